"""The reference every generated convolution is checked against: numpy, float64 accumulation, im2col + GEMM.

It shares no code with the compiler. It is also the im2col + GEMM baseline whose memory footprint the paper
compares with (figure 2).
"""

from __future__ import annotations

import numpy as np


def conv2d_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
                     padding: tuple[int, int, int, int]) -> np.ndarray:
    """NCHW input, OIHW weights, padding (top, bottom, left, right); PyTorch's semantics (windows that do
    not fit are dropped). Computed in float64; returns float64 NCHW."""
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    top, bottom, left, right = padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    out_h = (h + top + bottom - kh) // stride[0] + 1
    out_w = (wd + left + right - kw) // stride[1] + 1
    weights = w.reshape(k, c * kh * kw).astype(np.float64)
    out = np.empty((n, k, out_h, out_w))
    for i in range(n):
        windows = np.lib.stride_tricks.sliding_window_view(xp[i], (kh, kw), axis=(1, 2))
        windows = windows[:, :: stride[0], :: stride[1]][:, :out_h, :out_w]  # C x oh x ow x kh x kw
        columns = windows.transpose(0, 3, 4, 1, 2).reshape(c * kh * kw, out_h * out_w)  # im2col
        out[i] = (weights @ columns).reshape(k, out_h, out_w)
    if b is not None:
        out += np.asarray(b, dtype=np.float64)[None, :, None, None]
    return out


def im2col_bytes(batch: int, channels: int, height: int, width: int, kernels: int, kh: int, kw: int,
                 out_h: int, out_w: int) -> int:
    """Memory of an im2col + GEMM convolution in float32: input, the column matrix, weights, bias, output."""
    floats = (batch * channels * height * width + channels * kh * kw * out_h * out_w * batch
              + kernels * channels * kh * kw + kernels + batch * kernels * out_h * out_w)
    return 4 * floats
