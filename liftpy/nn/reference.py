"""The reference every generated convolution is checked against: numpy, float64 accumulation, im2col + GEMM.

It shares no code with the compiler. It is also the im2col + GEMM baseline whose memory footprint the paper
compares with (figure 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tuning.program import kinds_differ


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
    with np.errstate(invalid="ignore"):  # NaN and infinity in the data are data: inf - inf, 0·inf are NaN
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

#: float32's largest finite value: a float32 sum of terms whose magnitudes add up to more may overflow
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _finite(a) -> np.ndarray:
    """``a`` in float64, each NaN and infinity as 0 (the tolerance's norms are the finite values')."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isfinite(a), a, 0.0)


def _sum_bound(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
               padding: tuple[int, int, int, int], dilation: tuple[int, int], groups: int) -> np.ndarray:
    """‖w_k‖₂·‖window‖₂ + |b_k| for each output (N, K, outH, outW), in float64 over the finite values: at least
    Σ_i |w_i·x_i| + |b| of every output whose terms are all finite (Cauchy-Schwarz)."""
    n_images, channels, height, width = x.shape
    kernels, cg, kh, kw = w.shape
    top, bottom, left, right = padding
    squares = np.square(_finite(x)).reshape(n_images, groups, cg, height, width).sum(axis=2)
    squares = np.pad(squares, ((0, 0), (0, 0), (top, bottom), (left, right)))  # N x groups x Hp x Wp
    out_h, out_w = output_size(height, width, kh, kw, stride, padding, dilation)
    window_norms = np.sqrt(_windows(squares, kh, kw, stride, dilation, out_h, out_w).sum(axis=(-2, -1)))
    window_norms = np.repeat(window_norms, kernels // groups, axis=1)  # each kernel's group: N x K x oh x ow
    weight_norms = np.sqrt(np.square(_finite(w)).reshape(kernels, -1).sum(axis=1))
    bound = weight_norms[None, :, None, None] * window_norms
    if b is not None:
        bound = bound + np.abs(_finite(b))[None, :, None, None]
    return bound


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
    n·2^-126 allows for float32 underflow. NaN and infinity count as 0 in the norms: an output one of whose
    terms is not finite is not finite in the reference either, and is judged by kind (:func:`conv2d_compare`),
    so a finite output's tolerance is its own terms'. Returns float64 of the output's shape (N, K, outH, outW)."""
    terms = w.shape[1] * w.shape[2] * w.shape[3]
    m = terms + 1
    gamma = m * FLOAT32_UNIT_ROUNDOFF / (1 - m * FLOAT32_UNIT_ROUNDOFF)
    return gamma * _sum_bound(x, w, b, stride, padding, dilation, groups) + terms * 2.0 ** -126


@dataclass(frozen=True)
class Comparison:
    """An output against the reference (:func:`conv2d_compare`): ``error``, the largest difference of its finite
    elements in units of their tolerance, inf where a kind differs; ``mismatch``, the first such element, said."""

    error: float
    mismatch: str | None = None


def conv2d_compare(output: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                   stride: tuple[int, int], padding: tuple[int, int, int, int], dilation: tuple[int, int] = (1, 1),
                   groups: int = 1, block: tuple[int, int] = (1, 1)) -> Comparison:
    """``output`` (N, K, outH, outW) against the float64 reference, NaN and infinity treated as data.

    The reference propagates them as float32 arithmetic does (a NaN among an output's terms, inf - inf, 0·inf:
    NaN; +inf times a positive weight: +inf), so each element is compared by kind first
    (:func:`liftpy.tuning.program.kinds_differ`): NaN with NaN, an infinity with the same-signed one pass, and
    two numbers pass within :func:`conv2d_tolerance`. A kind that differs -- a NaN where the reference has a
    number, a number where it has a NaN -- is a wrong result (error inf) but where float32 may rightly differ:
    where the finite terms' magnitudes add up beyond float32's range (a partial sum may overflow, and inf - inf
    is NaN) and, for a program computing its outputs in ``block``s (Winograd's F(2x2, 3x3): (2, 2)), where the
    block's input tile or the kernel's weights or bias hold a non-finite value (its transforms multiply every
    element of a tile, so 0·inf and NaN reach the whole block): there a NaN or an infinity passes. An output
    never written is NaN in a checked run (its buffer filled with NaN): where the reference is NaN it is not
    seen."""
    reference = conv2d_reference(x, w, b, stride, padding, dilation, groups)
    output = np.asarray(output, dtype=np.float64).reshape(reference.shape)
    tolerance = conv2d_tolerance(x, w, b, stride, padding, dilation, groups)
    wrong = kinds_differ(output, reference)
    if wrong.any():
        excused = _sum_bound(x, w, b, stride, padding, dilation, groups) >= FLOAT32_MAX
        if tuple(block) != (1, 1):
            excused |= _block_reads_nonfinite(x, w, b, stride, padding, dilation, tuple(block), reference.shape)
        wrong &= ~(excused & ~np.isfinite(output))
    finite = np.isfinite(output) & np.isfinite(reference)
    error = float(np.max(np.abs(output[finite] - reference[finite]) / tolerance[finite], initial=0.0))
    if not wrong.any():
        return Comparison(error)
    where = tuple(int(i) for i in np.argwhere(wrong)[0])
    more = int(wrong.sum()) - 1
    return Comparison(float("inf"), f"output[{', '.join(map(str, where))}] is {_kind(output[where])} where the "
                                    f"reference is {_kind(reference[where])}" + (f" (and {more} more)" if more else ""))


def _kind(value: float) -> str:
    return "NaN" if np.isnan(value) else f"{value:+}" if np.isinf(value) else f"{value:.6g}"


def _block_reads_nonfinite(x, w, b, stride, padding, dilation, block, shape) -> np.ndarray:
    """For each output (``shape``: N, K, outH, outW), whether its block of block[0] x block[1] outputs reads a
    non-finite input (in any channel, within the block's padded input tile) or its kernel's weights or bias
    hold one. One group, as Winograd's program has."""
    n_images, _, height, width = x.shape
    kernels, _, kh, kw = w.shape
    top, bottom, left, right = padding
    out_h, out_w = shape[2:]
    blocks = (-(-out_h // block[0]), -(-out_w // block[1]))
    steps = (block[0] * stride[0], block[1] * stride[1])
    tile = ((block[0] - 1) * stride[0] + (kh - 1) * dilation[0] + 1,
            (block[1] - 1) * stride[1] + (kw - 1) * dilation[1] + 1)
    padded = np.zeros((n_images, max(height + top + bottom, (blocks[0] - 1) * steps[0] + tile[0]),
                       max(width + left + right, (blocks[1] - 1) * steps[1] + tile[1])), bool)
    padded[:, top:top + height, left:left + width] = ~np.isfinite(x).all(axis=1)
    tiles = np.lib.stride_tricks.sliding_window_view(padded, tile, axis=(1, 2))[:, ::steps[0], ::steps[1]]
    tainted = tiles[:, :blocks[0], :blocks[1]].any(axis=(-2, -1))
    tainted = tainted.repeat(block[0], axis=1).repeat(block[1], axis=2)[:, :out_h, :out_w]
    kernel = ~np.isfinite(w).reshape(kernels, -1).all(axis=1)
    if b is not None:
        kernel |= ~np.isfinite(np.asarray(b))
    return tainted[:, None] | kernel[None, :, None, None]


def conv2d_error(output: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                 stride: tuple[int, int], padding: tuple[int, int, int, int], dilation: tuple[int, int] = (1, 1),
                 groups: int = 1) -> float:
    """The largest error of ``output`` (N, K, outH, outW) against the float64 reference, in units of each
    element's tolerance (:func:`conv2d_tolerance`): at most 1 is correct. NaN and infinity are compared by
    kind (:func:`conv2d_compare`): one where the reference has another kind -- an element never written,
    when the output was filled with NaN before the run -- makes it infinite."""
    return conv2d_compare(output, x, w, b, stride, padding, dilation, groups).error
