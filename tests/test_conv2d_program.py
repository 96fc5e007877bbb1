"""The convolution layer written at the high level (liftpy/nn/conv2d.lift): PyTorch's F.conv2d with stride,
padding, dilation and groups, its bias optional, means what tests/reference.py computes in float64 -- through
the automatic route's default configuration and sampled ones, on random shapes."""

from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.rewrite.route import RouteSpace

from . import reference
from .test_programs import _close as close_to_reference
from .conftest import QUIET
from .route_configs import example_config

CONV2D = Path(liftpy.__file__).parent / "nn" / "conv2d.lift"


def _layer(seed: int):
    """A random layer: one group, or 2 to 3 groups of 1 to 3 channels and kernels (depthwise for seeds 0, 4...;
    two or more of each for 2, 6...), kernels of 1 to 3 taps a side, stride 1 or 2, padding 0 to 2 on each
    side, dilation 1 to 3, windows that fit."""
    rng = np.random.default_rng(seed)
    while True:
        groups = 1 if seed % 4 == 1 else int(rng.integers(2, 4))
        per_group = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))  # channels, kernels
        if seed % 4 == 0:  # depthwise: a channel and a kernel per group
            per_group = (1, 1)
        elif seed % 4 == 2:  # groups that split both the channels and the kernels
            per_group = (int(rng.integers(2, 4)), int(rng.integers(2, 4)))
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        dilation = tuple(int(v) for v in rng.integers(1, 4, 2))
        padding = tuple(int(v) for v in rng.integers(0, 3, 4))
        n, h, w = int(rng.integers(1, 3)), int(rng.integers(4, 10)), int(rng.integers(4, 10))
        span = ((kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1)
        if h + padding[0] + padding[1] >= span[0] and w + padding[2] + padding[3] >= span[1]:
            break
    c, k = groups * per_group[0], groups * per_group[1]
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weights = rng.standard_normal((k, per_group[0], kh, kw)).astype(np.float32)
    biases = rng.standard_normal(k).astype(np.float32)
    sizes = {"N": n, "C": c, "H": h, "W": w, "K": k, "groups": groups, "kernelHeight": kh, "kernelWidth": kw,
             "padSize": padding, "stride": stride, "dilation": dilation}
    return x, weights, biases, sizes


def _close(got, expected):
    """test_programs' comparison, the output read in the reference's shape."""
    close_to_reference(np.asarray(got).reshape(expected.shape), expected)


@pytest.mark.parametrize("seed", range(6))
def test_the_high_level_convolution_computes_what_pytorch_defines(seed):
    """With and without a bias, the route's default and two sampled configurations."""
    x, weights, biases, sizes = _layer(seed)
    program = liftpy.load(CONV2D)
    for function, inputs, bias in (("conv2d", {"input": x, "weights": weights, "biases": biases}, biases),
                                   ("conv2dNoBias", {"input": x, "weights": weights}, None)):
        expected = reference.conv2d_groups_nchw(x, weights, bias, sizes["stride"], sizes["padSize"],
                                                sizes["dilation"], sizes["groups"])
        space = RouteSpace(program, sizes, function=function)
        for config in [example_config(space)] + space.sample(2, seed=seed):
            lowered = space.lower(config)
            output = liftpy.compile(lowered, sizes, function=function).run(inputs, poison=True).output
            _close(output, expected)


def test_the_interpreter_agrees_with_the_reference():
    """The program's meaning, before any rewrite: a grouped, dilated, strided, padded layer."""
    x, weights, biases, sizes = _layer(1)
    expected = reference.conv2d_groups_nchw(x, weights, biases, sizes["stride"], sizes["padSize"],
                                            sizes["dilation"], sizes["groups"])
    got = liftpy.evaluate(liftpy.load(CONV2D), {"input": x, "weights": weights, "biases": biases}, sizes,
                          function="conv2d")
    _close(got, expected)


def test_either_function_of_the_file_is_tuned_alone(tmp_path):
    """The file holds two functions; the route and the tuner's reference lower the one named, and its best
    computes the reference's convolution (the other function is left out of the rewrites)."""
    x, weights, _, sizes = _layer(2)
    best = liftpy.tune(CONV2D, sizes=sizes, function="conv2dNoBias", trials=3, db=tmp_path / "t.sqlite",
                       repeat=1, confirm=0, **QUIET, constants=("weights",))
    assert [f.name for f in best.program.functions] == ["conv2dNoBias"]
    assert all(t.status == "ok" for t in best.trials) and len(best.trials) == 3
    expected = reference.conv2d_groups_nchw(x, weights, None, sizes["stride"], sizes["padSize"], sizes["dilation"],
                                            sizes["groups"])
    _close(best.compile().prepare({"weights": weights}).run({"input": x}, poison=True).output, expected)
