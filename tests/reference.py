"""Independent references for tests: written with numpy alone, sharing no code with liftpy."""

import numpy as np


def conv2d_hwc(x, w, bias, stride=(1, 1), padding=(0, 0, 0, 0)):
    """Direct convolution by explicit loops in float64.

    x: H x W x C input, w: K x kh x kw x C weights, bias: K; padding (top, bottom, left, right);
    windows that do not fit at the bottom/right edge are dropped. Returns K x outH x outW.
    """
    top, bottom, left, right = padding
    xp = np.zeros((x.shape[0] + top + bottom, x.shape[1] + left + right, x.shape[2]))
    xp[top : top + x.shape[0], left : left + x.shape[1]] = x
    k, kh, kw, _ = w.shape
    out_h = (xp.shape[0] - kh) // stride[0] + 1
    out_w = (xp.shape[1] - kw) // stride[1] + 1
    out = np.empty((k, out_h, out_w))
    w64 = w.astype(np.float64)
    for i in range(out_h):
        for j in range(out_w):
            window = xp[i * stride[0] : i * stride[0] + kh, j * stride[1] : j * stride[1] + kw]
            out[:, i, j] = np.tensordot(w64, window, axes=([1, 2, 3], [0, 1, 2])) + bias
    return out


def conv2d_windows(x, w, bias, stride=(1, 1), padding=(0, 0, 0, 0)):
    """The same convolution with numpy's sliding_window_view, as a second, differently written reference."""
    top, bottom, left, right = padding
    xp = np.pad(x.astype(np.float64), ((top, bottom), (left, right), (0, 0)))
    kh, kw = w.shape[1:3]
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(0, 1))[:: stride[0], :: stride[1]]
    return np.einsum("ijcab,kabc->kij", windows, w.astype(np.float64)) + bias[:, None, None]


def conv2d_nchw(x, w, bias, stride=(1, 1), padding=(0, 0, 0, 0), reference=conv2d_hwc):
    """A batch in PyTorch's layouts (x: N x C x H x W, w: K x C x kh x kw, bias: K or None), one image at a time
    through ``reference`` (conv2d_hwc by default, or conv2d_windows) in its HWC layouts. Returns float64
    N x K x outH x outW."""
    bias = np.zeros(w.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64)
    w_khwc = np.asarray(w).transpose(0, 2, 3, 1)
    return np.stack([reference(np.asarray(image).transpose(1, 2, 0), w_khwc, bias, stride, padding) for image in x])
