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


def _layer(sizes, low, high):
    """The reference of a clamped convolution on this machine's device, inputs drawn at a seed, and numpy's
    exact sums (float64) and magnitudes (the sums of the terms' absolute values)."""
    task = ProgramTask.make(CLIP, sizes, constants=("weights", "biases"))
    reference = reference_executable(task, get_device(None))
    inputs = random_inputs(task.load(), task.size_map, 437129829)
    inputs["low"], inputs["high"] = np.float32(low), np.float32(high)
    x, w, b = inputs["input"], inputs["weights"], inputs["biases"]
    sums = conv2d_nchw(x, w, b, padding=PAD)
    magnitudes = conv2d_nchw(np.abs(x), np.abs(w), np.abs(b), padding=PAD)
    return reference, inputs, sums, magnitudes


@pytest.fixture(scope="module")
def fire():
    return _layer(FIRE, -0.5, 0.5)


def test_the_magnitude_on_the_device_is_the_sum_of_the_terms_absolute_values(fire):
    reference, inputs, _, magnitudes = fire
    _, tolerance = reference.run(inputs)
    u, depth = 2.0 ** -24, 48 * 3 * 3 + 4  # 48 x 3 x 3 terms and 4 operations per output
    gamma = np.expm1(10 * np.sqrt(depth) * u + depth * u * u / (1 - u))  # Higham and Mary's bound at λ = 10
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


def test_an_output_a_thousandth_too_large_is_caught_at_a_vgg_layers_depth():
    """256 channels of 3x3 windows (VGG-16's layers 5-10), unclamped: a bound linear in the depth (γ_D) would
    let this pass; the probabilistic one does not."""
    sizes = dict(FIRE, C=256, H=6, W=6, K=8)
    reference, inputs, sums, _ = _layer(sizes, -3e38, 3e38)
    expected, tolerance = reference.run(inputs)
    assert close_to(sums.astype(np.float32), expected.reshape(sums.shape), tolerance) <= 1
    assert close_to((sums * 1.001).astype(np.float32), expected.reshape(sums.shape), tolerance) > 1


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


def test_a_network_steps_trials_are_checked_at_its_clamp_bounds_not_drawn_ones():
    """Drawn at random, a low above the high would clamp every output to one number: a blind check."""
    from liftpy.nn import operators

    w = np.ones((4, 3, 3, 3), np.float32)
    step = operators.conv("Conv_0", "Conv", "x", (1, 3, 8, 8), w, None, "y", padding=(1, 1, 1, 1), clamp=(0.0, 6.0))
    inputs = step.task.check_inputs(seed=5)
    assert (inputs["low"], inputs["high"]) == (0.0, 6.0)
    assert inputs["input"].shape == (1, 3, 8, 8) and inputs["input"].std() > 0.5  # the rest drawn
    for _, alternative in step.programs[1:]:  # Winograd's program, clamped the same
        assert (alternative.check_inputs(seed=5)["high"]) == 6.0
