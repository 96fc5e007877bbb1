"""The convolution references agree: the tests' own (tests/reference.py: explicit loops, and sliding windows with
einsum), liftpy's (liftpy.nn.reference.conv2d_reference, im2col + GEMM, which the library checks its kernels
with), and the interpreter running the paper's listing 3 (examples/conv_layer.lift).

Tolerances are error bounds, not guesses. Every reference sums n = C*kh*kw products and the bias; for the sum s
of those terms and M the sum of their magnitudes, a sum computed in a precision of unit roundoff u (n rounded
products, n rounded additions, in any order) is within γ(n + 1) M of s, γ(m) = m u / (1 - m u) (Higham,
Accuracy and Stability of Numerical Algorithms, section 3.1). The float64 references' products of float32
inputs are even exact (24 + 24 bits < 53); they lie within γ(n + 1) M of s with u = 2^-53. The interpreter
computes in float32 (values.py maps float to float32; its reduce folds ``acc + x * w`` one element at a time,
each product and sum rounded to float32), so it lies within γ(n + 1) M of s with u = 2^-24. Two results may
differ by the sum of their bounds; any mistake of indexing (a window shifted, a kernel flipped, a
stride or padding side swapped) moves results by about the size of one term, far above these bounds
(``test_the_bounds_notice_the_usual_mistakes``).
"""

from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.nn.reference import conv2d_reference

from .reference import conv2d_hwc, conv2d_nchw, conv2d_windows

LISTING_3 = Path(__file__).parent.parent / "examples" / "conv_layer.lift"
U32, U64 = 2.0**-24, 2.0**-53  # float32's and float64's unit roundoff


def gamma(m, u):
    return m * u / (1 - m * u)


# (C, H, W, K, kh, kw, stride (vertical, horizontal), padding (top, bottom, left, right))
LAYERS = [
    pytest.param(3, 7, 6, 4, 3, 3, (1, 1), (1, 1, 1, 1), id="3x3-padding-1"),
    pytest.param(5, 9, 10, 3, 3, 2, (2, 2), (0, 2, 1, 0), id="stride-2-uneven-padding-3x2-kernel"),
    pytest.param(2, 8, 5, 6, 1, 4, (2, 1), (1, 0, 2, 1), id="stride-2x1-1x4-kernel"),
    pytest.param(4, 10, 11, 5, 2, 3, (3, 2), (0, 1, 0, 0), id="stride-3x2-windows-dropped"),
    pytest.param(1, 5, 5, 1, 5, 5, (1, 1), (0, 0, 0, 0), id="one-channel-one-kernel-one-window"),
    pytest.param(6, 6, 7, 2, 4, 1, (1, 3), (3, 0, 0, 2), id="4x1-kernel-stride-1x3-padding-on-two-sides"),
]


def layer_arrays(seed, c, h, w, k, kh, kw):
    """One image H x W x C, weights K x kh x kw x C (listing 3's layouts) and biases, float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((h, w, c)).astype(np.float32)
    weights = rng.standard_normal((k, kh, kw, c)).astype(np.float32)
    bias = rng.standard_normal(k).astype(np.float32)
    return x, weights, bias


def listing_3(x, weights, bias, stride, padding):
    return liftpy.evaluate(liftpy.load(LISTING_3), {"kernelsWeights": weights, "kernelsBiases": bias, "inputData": x},
                           sizes={"padSize": padding, "kernelStride": stride})


def liftpys(x, weights, bias, stride, padding):
    """liftpy's reference in its NCHW / OIHW layouts, for the one image."""
    return conv2d_reference(x.transpose(2, 0, 1)[None], weights.transpose(0, 3, 1, 2), bias, stride, padding)[0]


def assert_within(a, b, bound, what):
    assert a.shape == b.shape, (what, a.shape, b.shape)
    excess = np.abs(a.astype(np.float64) - b) / bound
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert excess[worst] <= 1, f"{what}: at {worst} they differ by {abs(a[worst] - b[worst]):.3g} > {bound[worst]:.3g}"


@pytest.mark.parametrize("c, h, w, k, kh, kw, stride, padding", LAYERS)
def test_the_three_references_agree(c, h, w, k, kh, kw, stride, padding):
    x, weights, bias = layer_arrays(c * 1000 + h * 10 + w, c, h, w, k, kh, kw)
    results = {
        "tests' loops": conv2d_hwc(x, weights, bias, stride, padding),
        "tests' windows": conv2d_windows(x, weights, bias, stride, padding),
        "liftpy's im2col": liftpys(x, weights, bias, stride, padding),
        "listing 3 interpreted": listing_3(x, weights, bias, stride, padding),
    }
    out_h = (h + padding[0] + padding[1] - kh) // stride[0] + 1
    out_w = (w + padding[2] + padding[3] - kw) // stride[1] + 1
    assert {name: r.shape for name, r in results.items()} == {name: (k, out_h, out_w) for name in results}
    assert results["listing 3 interpreted"].dtype == np.float32  # the interpreter's float is float32
    # M: the sum of the terms' magnitudes at every output (the same convolution of the absolute values)
    magnitude = conv2d_hwc(np.abs(x), np.abs(weights), np.abs(bias), stride, padding)
    n = c * kh * kw
    bounds = {name: gamma(n + 1, U32 if name == "listing 3 interpreted" else U64) * magnitude for name in results}
    names = list(results)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            # the float64 bound added to the float32 one covers the rounding of the difference itself
            assert_within(results[first], results[second], bounds[first] + bounds[second] + U64 * magnitude,
                          f"{first} against {second}")


def test_the_bounds_notice_the_usual_mistakes():
    """What the bounds allow is far below what a wrong window, kernel, stride or padding changes."""
    c, h, w, k, kh, kw, stride, padding = 4, 9, 8, 3, 3, 2, (2, 1), (0, 2, 1, 0)
    x, weights, bias = layer_arrays(7, c, h, w, k, kh, kw)
    right = conv2d_hwc(x, weights, bias, stride, padding)
    bound = gamma(c * kh * kw + 1, U32) * conv2d_hwc(np.abs(x), np.abs(weights), np.abs(bias), stride, padding)
    mistakes = {
        "kernel flipped (a convolution, not a correlation)": conv2d_hwc(x, weights[:, ::-1, ::-1], bias, stride,
                                                                        padding),
        "padding top and bottom swapped": conv2d_hwc(x, weights, bias, stride, (2, 0, 1, 0)),
        "padding left and right swapped": conv2d_hwc(x, weights, bias, stride, (0, 2, 0, 1)),
        "kernels in the wrong order": conv2d_hwc(x, weights[::-1], bias, stride, padding),
        "channels in the wrong order": conv2d_hwc(x[:, :, ::-1], weights, bias, stride, padding),
        "no bias": conv2d_hwc(x, weights, 0 * bias, stride, padding),
        "strides swapped (listing 3 interpreted)": listing_3(x, weights, bias, stride[::-1], padding),
    }
    for what, wrong in mistakes.items():
        assert wrong.shape != right.shape or np.any(np.abs(wrong - right) > 10 * bound), what


@pytest.mark.parametrize("reference", [conv2d_hwc, conv2d_windows])
def test_the_batch_helper_agrees_with_liftpys_reference(reference):
    """tests/reference.py's conv2d_nchw (PyTorch's layouts, a batch, image by image) against liftpy's, with and
    without a bias."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 7, 9)).astype(np.float32)
    weights = rng.standard_normal((5, 4, 2, 3)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    stride, padding = (2, 1), (1, 0, 0, 2)
    magnitude = conv2d_nchw(np.abs(x), np.abs(weights), np.abs(bias), stride, padding, reference)
    bound = 2 * gamma(4 * 2 * 3 + 1, U64) * magnitude
    for b in (bias, None):
        ours = conv2d_nchw(x, weights, b, stride, padding, reference)
        assert ours.shape == (3, 5, 4, 9) and ours.dtype == np.float64
        assert_within(ours, conv2d_reference(x, weights, b, stride, padding), bound, f"bias {b is not None}")
    # each image is its own: the second image's result does not depend on the first
    alone = conv2d_nchw(x[1:2], weights, bias, stride, padding, reference)
    np.testing.assert_array_equal(alone[0], conv2d_nchw(x, weights, bias, stride, padding, reference)[1])


def test_the_program_references_agree_with_the_convolution_and_with_numpy():
    """The references of examples/programs/ (tests/reference.py) checked against conv2d_nchw and numpy's own
    operations, written differently."""
    from .reference import conv1x1_nchw, conv2d_nchw, depthwise_nchw, dilated_conv_nchw, matmul, max_pool_nchw

    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((6, 3))
    np.testing.assert_allclose(matmul(a, b), a @ b, rtol=1e-12)
    x, w, bias = rng.standard_normal((2, 3, 8, 7)), rng.standard_normal((5, 3, 3, 2)), rng.standard_normal(5)
    np.testing.assert_allclose(dilated_conv_nchw(x, w, bias, (2, 1), (1, 0, 2, 1), (1, 1)),
                               conv2d_nchw(x, w, bias, (2, 1), (1, 0, 2, 1)), rtol=1e-10)
    # dilation 2 reads every other row: the same as convolving with a kernel of zeros between the taps
    spread = np.zeros((5, 3, 5, 2))
    spread[:, :, ::2] = w
    np.testing.assert_allclose(dilated_conv_nchw(x, w, bias, (1, 1), (0, 0, 0, 0), (2, 1)),
                               conv2d_nchw(x, spread, bias), rtol=1e-10)
    w1 = rng.standard_normal((5, 3))
    np.testing.assert_allclose(conv1x1_nchw(x, w1, bias), conv2d_nchw(x, w1[:, :, None, None], bias), rtol=1e-10)
    wd = rng.standard_normal((3, 3, 3))
    for c in range(3):
        np.testing.assert_allclose(depthwise_nchw(x, wd, (1, 1, 1, 1))[:, c],
                                   conv2d_nchw(x[:, c : c + 1], wd[c][None, None], None, (1, 1), (1, 1, 1, 1))[:, 0],
                                   rtol=1e-10)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    np.testing.assert_allclose(max_pool_nchw(x, 3, 2), windows.max(axis=(4, 5)))


def test_liftpys_reference_with_dilation_and_groups_agrees_with_the_tests():
    """liftpy.nn.reference (what nn.conv2d checks its first call against) with dilation and groups, against
    tests/reference.py's conv2d_groups_nchw (group by group, each a dilated convolution), with and without a
    bias; its tolerance passes the float32 rounding of the answer and refuses one element moved by 0.1% (of itself, or of 1 where it is smaller)."""
    from liftpy.nn.reference import conv2d_error

    from .reference import conv2d_groups_nchw

    rng = np.random.default_rng(8)
    for groups, dilation, stride, padding in [(4, (2, 3), (2, 1), (0, 2, 1, 3)), (12, (3, 1), (1, 1), (1, 1, 1, 1)),
                                              (3, (1, 2), (1, 2), (2, 2, 0, 1))]:
        x = rng.standard_normal((2, 12, 11, 13))
        weights = rng.standard_normal((24, 12 // groups, 3, 2))
        for b in (rng.standard_normal(24), None):
            expected = conv2d_groups_nchw(x, weights, b, stride, padding, dilation, groups)
            ours = conv2d_reference(x, weights, b, stride, padding, dilation, groups)
            magnitude = conv2d_groups_nchw(np.abs(x), np.abs(weights), None if b is None else np.abs(b), stride,
                                           padding, dilation, groups)
            assert_within(ours, expected, 2 * gamma(12 // groups * 6 + 1, U64) * magnitude, f"{groups} groups")
            rounded = expected.astype(np.float32)
            assert conv2d_error(rounded, x, weights, b, stride, padding, dilation, groups) <= 1
            moved = rounded.copy()
            moved[1, 5, 2, 3] += 1e-3 * (abs(moved[1, 5, 2, 3]) + 1)
            assert conv2d_error(moved, x, weights, b, stride, padding, dilation, groups) > 1
