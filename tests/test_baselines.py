"""benchmarks/baselines.py: the hand-written baselines compute the same convolution as the float64 reference."""

import sys

import numpy as np
import pytest

from benchmarks.baselines import clblast_conv, clblast_conv_bytes, im2col_gemm, naive_opencl
from liftpy.nn.reference import conv2d_reference, im2col_bytes

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
    expected = conv2d_reference(x, w, b, stride, padding)
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
    """For one image it allocates exactly what an im2col + GEMM convolution needs (liftpy's own count)."""
    assert clblast_conv_bytes((1, 256, 28, 28), (512, 256, 3, 3), (1, 1), (1, 1, 1, 1)) == \
        im2col_bytes(1, 256, 28, 28, 512, 3, 3, 28, 28)
