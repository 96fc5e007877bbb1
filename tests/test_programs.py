"""The high-level programs of examples/programs/: each means what its numpy reference (tests/reference.py) says,
in the interpreter and as OpenCL lowered by the default route (lower_to_opencl), at small sizes."""

from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.ir import Prim, walk
from liftpy.primitives import PRIMITIVES
from liftpy.rewrite.nests import loop_nests
from liftpy.rewrite.strategies import lower_to_opencl, lowering

from . import reference

PROGRAMS = Path(__file__).parent.parent / "examples" / "programs"


def _case(name):
    rng = np.random.default_rng(7)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    if name == "matmul":
        a, b = r(5, 7), r(7, 6)
        return {"a": a, "b": b}, {"n": 5, "k": 7, "m": 6}, reference.matmul(a, b)
    if name == "maxpool":
        x = r(2, 3, 7, 9)
        sizes = {"N": 2, "C": 3, "H": 7, "W": 9, "poolSize": 3, "poolStride": 2}
        return {"input": x}, sizes, reference.max_pool_nchw(x, 3, 2)
    if name == "depthwise":
        x, w = r(2, 4, 6, 5), r(4, 3, 3)
        sizes = {"N": 2, "C": 4, "H": 6, "W": 5, "kernelHeight": 3, "kernelWidth": 3, "padSize": (1, 1, 1, 1)}
        return {"weights": w, "input": x}, sizes, reference.depthwise_nchw(x, w, (1, 1, 1, 1))
    if name == "conv1x1":
        x, w, b = r(2, 5, 4, 3), r(6, 5), r(6)
        sizes = {"N": 2, "C": 5, "H": 4, "W": 3, "K": 6}
        return {"weights": w, "biases": b, "input": x}, sizes, reference.conv1x1_nchw(x, w, b)
    if name == "conv_bias_relu":
        x, w, b = r(2, 3, 7, 6), r(4, 3, 3, 3), r(4)
        sizes = {"N": 2, "C": 3, "H": 7, "W": 6, "K": 4, "kernelHeight": 3, "kernelWidth": 3,
                 "padSize": (1, 0, 2, 1), "stride": (2, 1)}
        expected = np.maximum(reference.conv2d_nchw(x, w, b, (2, 1), (1, 0, 2, 1)), 0)
        return {"weights": w, "biases": b, "input": x}, sizes, expected
    if name == "grouped_conv":
        x, w, b = r(2, 4, 6, 7), r(6, 2, 3, 3), r(6)  # 2 groups: 2 channels and 3 kernels each
        sizes = {"N": 2, "C": 4, "H": 6, "W": 7, "K": 6, "groups": 2, "kernelHeight": 3, "kernelWidth": 3,
                 "padSize": (1, 1, 0, 2), "stride": (1, 2)}
        expected = np.concatenate([reference.conv2d_nchw(x[:, 2 * g : 2 * g + 2], w[3 * g : 3 * g + 3],
                                                         b[3 * g : 3 * g + 3], (1, 2), (1, 1, 0, 2))
                                   for g in range(2)], axis=1)
        return {"input": x, "weights": w, "biases": b}, sizes, expected
    if name == "dilated_conv":
        x, w, b = r(2, 3, 9, 8), r(4, 3, 3, 2), r(4)
        sizes = {"N": 2, "C": 3, "H": 9, "W": 8, "K": 4, "kernelHeight": 3, "kernelWidth": 2,
                 "padSize": (1, 2, 0, 1), "stride": (1, 2), "dilation": (2, 3)}
        return {"weights": w, "biases": b, "input": x}, sizes, reference.dilated_conv_nchw(x, w, b, (1, 2), (1, 2, 0, 1),
                                                                                         (2, 3))
    raise KeyError(name)


NAMES = ["matmul", "maxpool", "depthwise", "conv1x1", "conv_bias_relu", "grouped_conv", "dilated_conv"]


def test_every_program_of_the_folder_is_checked_here():
    assert sorted(p.stem for p in PROGRAMS.glob("*.lift")) == sorted(NAMES)


def _close(got, expected):
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("name", NAMES)
def test_the_interpreter_agrees_with_numpy(name):
    inputs, sizes, expected = _case(name)
    _close(liftpy.evaluate(liftpy.load(PROGRAMS / f"{name}.lift"), inputs, sizes), expected)


@pytest.mark.parametrize("name", NAMES)
def test_the_default_lowering_runs_on_opencl(name):
    inputs, sizes, expected = _case(name)
    lowered = lower_to_opencl(liftpy.load(PROGRAMS / f"{name}.lift"))
    assert lowered, lowered
    exe = liftpy.compile(lowered.program, sizes)
    result = exe.run(inputs, poison=True)
    _close(result.output, expected)


@pytest.mark.parametrize("parallel", [1, 3])
@pytest.mark.parametrize("name", NAMES)
def test_lowering_with_more_or_fewer_parallel_levels_runs_on_opencl(name, parallel):
    """How many spatial levels run in parallel is a choice of the automatic route's space: each must be right.
    The outermost levels become mapGlb(parallel - 1) and inwards; a nest of fewer levels uses the highest."""
    inputs, sizes, expected = _case(name)
    program = liftpy.load(PROGRAMS / f"{name}.lift")
    (nest,) = loop_nests(program)
    lowered = lowering(parallel=parallel)(program)
    assert lowered, lowered
    dims = {n.params[0] for f in lowered.program.functions for n in walk(f.body)
            if isinstance(n, Prim) and PRIMITIVES[n.name].parallel == "global"}
    levels = min(parallel, len(nest.spatial))
    assert dims == set(range(parallel - levels, parallel))
    result = liftpy.compile(lowered.program, sizes).run(inputs, poison=True)
    _close(result.output, expected)
