"""The reference every generated convolution is checked against: numpy, float64 accumulation, im2col + GEMM.

It shares no code with the compiler. It is also the im2col + GEMM baseline whose memory footprint the paper
compares with (figure 2).
"""

from __future__ import annotations

import numpy as np


def _windows(planes: np.ndarray, kh: int, kw: int, stride: tuple[int, int], dilation: tuple[int, int],
             out_h: int, out_w: int) -> np.ndarray:
    """The windows of padded planes (..., Hp, Wp): (..., out_h, out_w, kh, kw), the taps ``dilation`` apart."""
    span_h, span_w = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    windows = np.lib.stride_tricks.sliding_window_view(planes, (span_h, span_w), axis=(-2, -1))
    windows = windows[..., ::dilation[0], ::dilation[1]]
    return windows[..., ::stride[0], ::stride[1], :, :][..., :out_h, :out_w, :, :]


def output_size(height: int, width: int, kh: int, kw: int, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int] = (1, 1)) -> tuple[int, int]:
    """PyTorch's output height and width (windows that do not fit are dropped)."""
    top, bottom, left, right = padding
    return ((height + top + bottom - (kh - 1) * dilation[0] - 1) // stride[0] + 1,
            (width + left + right - (kw - 1) * dilation[1] - 1) // stride[1] + 1)


def conv2d_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
                     padding: tuple[int, int, int, int], dilation: tuple[int, int] = (1, 1),
                     groups: int = 1) -> np.ndarray:
    """NCHW input, OIHW weights (K x C/groups x kh x kw), padding (top, bottom, left, right); PyTorch's
    semantics (windows that do not fit are dropped; the kernels of group g see the channels of group g).
    Computed in float64; returns float64 NCHW."""
    n, c, h, wd = x.shape
    k, cg, kh, kw = w.shape
    kg = k // groups
    top, bottom, left, right = padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    out_h, out_w = output_size(h, wd, kh, kw, stride, padding, dilation)
    out = np.empty((n, k, out_h, out_w))
    for g in range(groups):
        weights = w[g * kg:(g + 1) * kg].reshape(kg, cg * kh * kw).astype(np.float64)
        for i in range(n):
            windows = _windows(xp[i, g * cg:(g + 1) * cg], kh, kw, stride, dilation, out_h, out_w)
            columns = windows.transpose(0, 3, 4, 1, 2).reshape(cg * kh * kw, out_h * out_w)  # im2col
            out[i, g * kg:(g + 1) * kg] = (weights @ columns).reshape(kg, out_h, out_w)
    if b is not None:
        out += np.asarray(b, dtype=np.float64)[None, :, None, None]
    return out


def im2col_bytes(batch: int, channels: int, height: int, width: int, kernels: int, kh: int, kw: int,
                 out_h: int, out_w: int) -> int:
    """Memory of an im2col + GEMM convolution in float32: input, the column matrix, weights, bias, output."""
    floats = (batch * channels * height * width + channels * kh * kw * out_h * out_w * batch
              + kernels * channels * kh * kw + kernels + batch * kernels * out_h * out_w)
    return 4 * floats


#: the unit roundoff of float32: every float32 operation is exact up to a relative error of u
FLOAT32_UNIT_ROUNDOFF = 2.0 ** -24


def conv2d_tolerance(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
                     padding: tuple[int, int, int, int], dilation: tuple[int, int] = (1, 1),
                     groups: int = 1) -> np.ndarray:
    """The error a float32 evaluation of each output element may make, whatever its order of summation.

    An output is a dot product of n = (C/groups)·kh·kw window elements with the weights, plus the bias: n + 1
    rounded additions and n rounded products. Whatever the order (sequential, blocked, vector lanes, partial
    sums, with or without FMA), the computed value ŷ satisfies (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., eq. 3.5)

        |ŷ - y| ≤ γ_(n+1) · (Σ_i |w_i·x_i| + |b|),   γ_m = m·u / (1 - m·u),   u = 2^-24,

    and by Cauchy-Schwarz Σ_i |w_i·x_i| ≤ ‖w_k‖₂·‖window‖₂, which is cheap (a box sum of x² over the group's
    channels, no second convolution). The bound grows with the reduction's length n, so a short reduction is
    held to a tight tolerance; dropping one term of a window exceeds it unless that term is tiny. A floor of
    n·2^-126 allows for float32 underflow. Returns float64 of the output's shape (N, K, outH, outW)."""
    n_images, channels, height, width = x.shape
    kernels, cg, kh, kw = w.shape
    top, bottom, left, right = padding
    terms = cg * kh * kw
    m = terms + 1
    gamma = m * FLOAT32_UNIT_ROUNDOFF / (1 - m * FLOAT32_UNIT_ROUNDOFF)
    squares = np.square(x.astype(np.float64)).reshape(n_images, groups, cg, height, width).sum(axis=2)
    squares = np.pad(squares, ((0, 0), (0, 0), (top, bottom), (left, right)))  # N x groups x Hp x Wp
    out_h, out_w = output_size(height, width, kh, kw, stride, padding, dilation)
    window_norms = np.sqrt(_windows(squares, kh, kw, stride, dilation, out_h, out_w).sum(axis=(-2, -1)))
    window_norms = np.repeat(window_norms, kernels // groups, axis=1)  # each kernel's group: N x K x oh x ow
    weight_norms = np.sqrt(np.square(w.astype(np.float64)).reshape(kernels, -1).sum(axis=1))
    bound = weight_norms[None, :, None, None] * window_norms
    if b is not None:
        bound = bound + np.abs(np.asarray(b, dtype=np.float64))[None, :, None, None]
    return gamma * bound + terms * 2.0 ** -126


def conv2d_error(output: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                 stride: tuple[int, int], padding: tuple[int, int, int, int], dilation: tuple[int, int] = (1, 1),
                 groups: int = 1) -> float:
    """The largest error of ``output`` (N, K, outH, outW) against the float64 reference, in units of each
    element's tolerance (:func:`conv2d_tolerance`): at most 1 is correct. An element that is NaN or infinite
    -- never written, when the output was filled with NaN before the run -- makes it infinite."""
    reference = conv2d_reference(x, w, b, stride, padding, dilation, groups)
    output = np.asarray(output, dtype=np.float64).reshape(reference.shape)
    if not np.isfinite(output).all():
        return float("inf")
    tolerance = conv2d_tolerance(x, w, b, stride, padding, dilation, groups)
    return float((np.abs(output - reference) / tolerance).max())
