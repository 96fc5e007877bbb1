"""benchmarks/baselines.py: the hand-written baselines compute the same convolution as tests/reference.py's
float64 loops."""

import sys

import numpy as np
import pytest

from benchmarks.baselines import clblast_conv, clblast_conv_bytes, im2col_gemm, naive_opencl

from .reference import conv2d_nchw

# (x shape, w shape, stride, padding (top, bottom, left, right)): small layers, uneven strides and paddings
LAYERS = [
    ((1, 3, 9, 11), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1)),
    ((2, 5, 13, 10), (7, 5, 3, 2), (2, 1), (0, 2, 1, 0)),
]


def arrays(x_shape, w_shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    return x, w, b


def check(baseline, x_shape, w_shape, stride, padding, **kwargs):
    x, w, b = arrays(x_shape, w_shape)
    out, ms = baseline(x, w, b, stride, padding, repeat=1, **kwargs)
    expected = conv2d_nchw(x, w, b, stride, padding)
    assert out.shape == expected.shape and out.dtype == np.float32
    assert np.abs(out - expected).max() <= 1e-4 * np.abs(expected).max()
    assert ms > 0


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", LAYERS)
def test_naive_opencl(x_shape, w_shape, stride, padding):
    check(naive_opencl, x_shape, w_shape, stride, padding)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", LAYERS)
def test_im2col_gemm(x_shape, w_shape, stride, padding):
    check(im2col_gemm, x_shape, w_shape, stride, padding)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", LAYERS)
def test_clblast_conv(x_shape, w_shape, stride, padding):
    pytest.importorskip("pyclblast")
    check(clblast_conv, x_shape, w_shape, stride, padding)


def test_clblast_conv_without_pyclblast(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyclblast", None)  # makes `import pyclblast` raise ImportError
    x, w, b = arrays(*LAYERS[0][:2])
    assert clblast_conv(x, w, b, (1, 1), (1, 1, 1, 1)) == (None, None)


def test_clblast_conv_bytes():
    """It allocates what an im2col + GEMM convolution needs: float32 input, weights, biases, output, and the
    column matrix of one image (a column of C*kh*kw values per output pixel), reused image after image."""
    # a VGG-16 layer: 256 x 28 x 28 in, 512 kernels 3 x 3, padding 1, so the output is 512 x 28 x 28
    columns = (256 * 3 * 3) * (28 * 28)
    one_image = 4 * (256 * 28 * 28 + 512 * 256 * 3 * 3 + 512 + columns + 512 * 28 * 28)
    assert clblast_conv_bytes((1, 256, 28, 28), (512, 256, 3, 3), (1, 1), (1, 1, 1, 1)) == one_image
    # a batch of 2 with stride 2 and uneven padding: 8 x 9 x 10 in, 6 kernels 3 x 2; output 5 x 5
    columns = (8 * 3 * 2) * (5 * 5)
    assert clblast_conv_bytes((2, 8, 9, 10), (6, 8, 3, 2), (2, 2), (1, 1, 0, 1)) == \
        4 * (2 * 8 * 9 * 10 + 6 * 8 * 3 * 2 + 6 + columns + 2 * 6 * 5 * 5)
