"""The cost model's guess for a task (liftpy.tuning.guess): a configuration of the task's space, found by the
model alone, kept on disk, its program computing what numpy does; the register operands the model counts."""

import numpy as np

import liftpy
from liftpy.device import Device
from liftpy.rewrite.route import RouteSpace
from liftpy.tuning import ProgramTask, guess
from liftpy.tuning.cost_model import AnalyticModel
from liftpy.tuning.features import choice_features

from . import reference
from .test_programs import PROGRAMS

AVX2 = Device(name="an AVX2 CPU", kind="cpu", compute_units=2, max_work_group_size=4096,
              max_work_item_sizes=(4096, 4096, 4096), local_mem_size=2**16, preferred_vector_width_float=8,
              private_mem_budget=512)
SIZES = {"N": 1, "C": 8, "H": 12, "W": 12, "K": 16, "kernelHeight": 3, "kernelWidth": 3,
         "padSize": (1, 1, 1, 1), "stride": (1, 1)}


def test_the_guess_is_a_configuration_of_the_space_kept_on_disk_and_computes_what_numpy_does(tmp_path, monkeypatch):
    """No database (a path where there is none): the analytic model's pick, a valid configuration that lowers
    and runs right; asked again, it is read from liftpy's cache, nothing generated."""
    monkeypatch.setenv("LIFTPY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LIFTPY_GUESS_POOL", "2")  # the mechanics: a short search
    task = ProgramTask.make(PROGRAMS / "conv_bias_relu.lift", SIZES)
    space = task.space(AVX2)
    config = guess.best_guess(task, AVX2, tmp_path / "none.sqlite", space=space)
    assert config == task.complete(config) and space.valid(config) and config != task.complete(space.plain())

    def refused(*args, **kwargs):
        raise AssertionError("a remembered guess generated candidates")

    monkeypatch.setattr(guess, "features_here", refused)
    assert guess.best_guess(task, AVX2, None, space=space) == config
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(shape, dtype=np.float32) for shape in ((1, 8, 12, 12), (16, 8, 3, 3), (16,)))
    got = liftpy.compile(space.lower(config), task.size_map).run({"input": x, "weights": w, "biases": b},
                                                                 poison=True).output
    expected = np.maximum(reference.conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1)), 0)
    assert np.allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_a_block_whose_operands_do_not_fit_the_registers_beside_its_accumulators_ranks_behind():
    """AVX2's 16 vector registers: 4 vectors of 8 kernels x 4 windows keep 16 accumulators, and a step's 4 weight
    vectors and a broadcast pixel need 5 more -- the block spills; 2 vectors x 4 windows keep 8 and need 3.
    Per multiply-add the second is faster (its step fits), though its loads per update are more."""
    k32 = RouteSpace(liftpy.load(PROGRAMS / "conv_bias_relu.lift"), {**SIZES, "K": 32}, AVX2)
    wide = {**k32.plain(), "block.window": 4, "unroll": 1, "vector": 8, "vector_outer": 2, "block.kernelWeights": 32}
    fitting = {**wide, "block.kernelWeights": 16}
    assert k32.valid(wide) and k32.valid(fitting)
    f_wide, f_fitting = (choice_features(k32, c, AVX2) for c in (wide, fitting))
    assert (f_wide["accumulators"], f_wide["step_operands"]) == (16, 5)
    assert (f_fitting["accumulators"], f_fitting["step_operands"]) == (8, 3)
    assert f_fitting["loads_per_update"] > f_wide["loads_per_update"]
    assert AnalyticModel.block_cycles(f_fitting, True) < AnalyticModel.block_cycles(f_wide, True)


AVX512 = Device(name="an AVX-512 CPU", kind="cpu", compute_units=2, max_work_group_size=4096,
                max_work_item_sizes=(4096, 4096, 4096), local_mem_size=2**16, preferred_vector_width_float=16,
                private_mem_budget=512)


def test_a_block_that_brings_more_cache_lines_per_multiply_add_ranks_behind_though_its_pipes_are_busy():
    """AVX-512: 4 vectors of 16 kernels x 2 windows, 4 x 4 and 1 x 8 all keep at least the 8 accumulators two
    pipes of 4 cycles' latency need, and fit the 32 registers with their operands. A step moves along the
    reduction: its weight vectors are new lines (4, 4 and 1 a step), its broadcast pixels stream (a line every
    16 steps each): 4.125 lines for 8 multiply-adds, 4.25 for 16, 1.5 for 8 -- the first brings the most per
    multiply-add and ranks behind; counting pipes and registers alone, the three tie."""
    space = RouteSpace(liftpy.load(PROGRAMS / "conv_bias_relu.lift"), {**SIZES, "K": 64, "H": 16, "W": 16}, AVX512)
    base = {**space.plain(), "unroll": 1, "vector": 16, "vector_outer": 2}
    blocks = {(k, w): {**base, "block.kernelWeights": k, "block.window": w} for k, w in ((64, 2), (64, 4), (16, 8))}
    assert all(space.valid(c) for c in blocks.values())
    features = {b: choice_features(space, c, AVX512) for b, c in blocks.items()}
    assert [features[b]["accumulators"] for b in blocks] == [8, 16, 8]
    assert all(f["accumulators"] + f["step_operands"] <= 32 for f in features.values())
    cycles = {b: AnalyticModel.block_cycles(f, True) for b, f in features.items()}
    assert cycles[64, 2] > cycles[64, 4] and cycles[64, 2] > cycles[16, 8]
