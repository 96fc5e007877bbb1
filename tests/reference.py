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


def matmul(a, b):
    """a @ b in float64, by explicit sums over k."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out = np.zeros((a.shape[0], b.shape[1]))
    for k in range(a.shape[1]):
        out += np.outer(a[:, k], b[k, :])
    return out


def max_pool_nchw(x, size, stride):
    """Max over size x size windows moved by stride, per image and channel; windows that do not fit dropped."""
    n, c, h, w = x.shape
    out_h, out_w = (h - size) // stride + 1, (w - size) // stride + 1
    out = np.empty((n, c, out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            out[:, :, i, j] = x[:, :, i * stride : i * stride + size, j * stride : j * stride + size].max(axis=(2, 3))
    return out


def depthwise_nchw(x, w, padding=(0, 0, 0, 0)):
    """Each channel c of x (N x C x H x W) convolved with its own filter w[c] (C x kh x kw), stride 1, zero
    padding (top, bottom, left, right); float64."""
    top, bottom, left, right = padding
    xp = np.pad(np.asarray(x, dtype=np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    c, kh, kw = w.shape
    out_h, out_w = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], c, out_h, out_w))
    for a in range(kh):
        for b in range(kw):
            out += xp[:, :, a : a + out_h, b : b + out_w] * np.asarray(w, dtype=np.float64)[None, :, a, b, None, None]
    return out


def conv1x1_nchw(x, w, bias):
    """out[n, k] = bias[k] + sum_c w[k, c] x[n, c], per pixel; float64."""
    x, w = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    return np.einsum("nchw,kc->nkhw", x, w) + np.asarray(bias, dtype=np.float64)[None, :, None, None]


def dilated_conv_nchw(x, w, bias, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1)):
    """PyTorch's conv2d with dilation, by explicit loops over the taps in float64 (x: N x C x H x W, w: K x C x
    kh x kw, padding (top, bottom, left, right)); windows that do not fit are dropped."""
    top, bottom, left, right = padding
    xp = np.pad(np.asarray(x, dtype=np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    k, _, kh, kw = w.shape
    span_h, span_w = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    out_h = (xp.shape[2] - span_h) // stride[0] + 1
    out_w = (xp.shape[3] - span_w) // stride[1] + 1
    out = np.zeros((x.shape[0], k, out_h, out_w)) + np.asarray(bias, dtype=np.float64)[None, :, None, None]
    w64 = np.asarray(w, dtype=np.float64)
    for a in range(kh):
        for b in range(kw):
            rows = slice(a * dilation[0], a * dilation[0] + (out_h - 1) * stride[0] + 1, stride[0])
            cols = slice(b * dilation[1], b * dilation[1] + (out_w - 1) * stride[1] + 1, stride[1])
            out += np.einsum("nchw,kc->nkhw", xp[:, :, rows, cols], w64[:, :, a, b])
    return out


def conv2d_groups_nchw(x, w, bias, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """PyTorch's F.conv2d in full (x: N x C x H x W, w: K x C/groups x kh x kw, bias: K or None), float64:
    the channels and the kernels cut into ``groups`` groups, each group's kernels convolved with its own
    channels (dilated_conv_nchw), the groups' outputs side by side."""
    k, c = w.shape[0], x.shape[1]
    kg, cg = k // groups, c // groups
    bias = np.zeros(k) if bias is None else np.asarray(bias, dtype=np.float64)
    return np.concatenate([dilated_conv_nchw(x[:, g * cg:(g + 1) * cg], w[g * kg:(g + 1) * kg],
                                             bias[g * kg:(g + 1) * kg], stride, padding, dilation)
                           for g in range(groups)], axis=1)
