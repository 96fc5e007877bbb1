"""A trial's tolerance is the float32 error bound of the program's own sums (liftpy.tuning.tolerance): it
follows each output's terms, not the output's size, so a correct sum clamped near zero passes and a term
dropped from it does not. Magnitudes and exact results are computed here with numpy in float64."""

import numpy as np
import pytest

from liftpy import load
from liftpy.interpreter import random_inputs
from liftpy.ir import Literal, ScalarOp, walk
from liftpy.runtime import get_device
from liftpy.tuning.program import ProgramTask, close_to, reference_executable
from liftpy.tuning.tolerance import magnitude_program, rounding_depth

from .conftest import EXAMPLES, ROOT
from .reference import conv2d_nchw

CLIP = ROOT / "liftpy" / "nn" / "programs" / "conv2d_clip.lift"
#: SqueezeNet 1.1's fire 7 expand layer, where the output-scale tolerance called five correct trials wrong
FIRE = dict(N=1, C=48, H=13, W=13, groups=1, K=192, kernelHeight=3, kernelWidth=3, padSize=(1, 1, 1, 1),
            stride=(1, 1), dilation=(1, 1))
PAD = (1, 1, 1, 1)


@pytest.fixture(scope="module")
def fire():
    """The reference of the fire layer on this machine's device, inputs drawn at a seed, and numpy's exact
    sums (float64) and magnitudes (the sums of the terms' absolute values)."""
    task = ProgramTask.make(CLIP, FIRE, constants=("weights", "biases"))
    reference = reference_executable(task, get_device(None))
    inputs = random_inputs(task.load(), task.size_map, 437129829)
    inputs["low"], inputs["high"] = np.float32(-0.5), np.float32(0.5)
    x, w, b = inputs["input"], inputs["weights"], inputs["biases"]
    sums = conv2d_nchw(x, w, b, padding=PAD)
    magnitudes = conv2d_nchw(np.abs(x), np.abs(w), np.abs(b), padding=PAD)
    return reference, inputs, sums, magnitudes


def test_the_magnitude_on_the_device_is_the_sum_of_the_terms_absolute_values(fire):
    reference, inputs, _, magnitudes = fire
    _, tolerance = reference.run(inputs)
    gamma = 436 * 2.0 ** -24 / (1 - 436 * 2.0 ** -24)  # 48 x 3 x 3 terms and 4 operations per output
    assert reference.depth == 436
    np.testing.assert_allclose(tolerance.reshape(magnitudes.shape), 2 * gamma * magnitudes, rtol=1e-5)


def test_a_correct_clamped_sum_passes_where_the_outputs_scale_would_refuse_it(fire):
    reference, inputs, sums, _ = fire
    expected, tolerance = reference.run(inputs)
    exact = np.clip(sums, -0.5, 0.5).astype(np.float32)  # the exact result, rounded once: a correct float32 result
    assert close_to(exact, expected.reshape(exact.shape), tolerance) <= 1
    assert close_to(exact, expected.reshape(exact.shape)) > 1  # the output-scale rule calls it wrong


def test_a_term_dropped_from_a_clamped_sum_is_caught(fire):
    reference, inputs, sums, _ = fire
    expected, tolerance = reference.run(inputs)
    x, w = inputs["input"].astype(np.float64), inputs["weights"].astype(np.float64)
    inside = np.argwhere((np.abs(sums) < 0.3) & (np.abs(w[None, :, 0, 1, 1, None, None] * x[:, 0:1]) > 0.1))
    n, k, i, j = inside[0]
    wrong = np.clip(sums, -0.5, 0.5)
    wrong[n, k, i, j] -= w[k, 0, 1, 1] * x[n, 0, i, j]  # the centre tap of channel 0, left out
    assert close_to(wrong.astype(np.float32), expected.reshape(wrong.shape), tolerance) > 1


def test_rounding_depth_counts_the_reductions_and_the_operations():
    program = load(CLIP)
    assert rounding_depth(program, FIRE) == 48 * 3 * 3 + 4
    assert rounding_depth(program, {**FIRE, "groups": 4, "K": 8}) == 12 * 3 * 3 + 4


def test_max_and_min_carry_only_their_rounded_operands():
    magnitude = magnitude_program(load(CLIP))
    ops = [n.op for n in walk(magnitude.main.body) if isinstance(n, ScalarOp)]
    assert sorted(ops) == ["*", "+"]  # min(max(s, low), high) is s's magnitude: low and high are exact inputs


def test_a_max_start_sentinel_has_no_magnitude():
    magnitude = magnitude_program(load(EXAMPLES / "programs" / "maxpool.lift"))
    literals = [n.value for n in walk(magnitude.main.body) if isinstance(n, Literal) and n.scalar == "float"]
    assert literals == [0.0]  # -3.402823e38f, the max's start, would otherwise make every tolerance huge


def test_a_program_whose_error_depends_on_values_is_compared_at_the_outputs_scale():
    assert magnitude_program(load(ROOT / "liftpy" / "nn" / "programs" / "softmax.lift")) is None
