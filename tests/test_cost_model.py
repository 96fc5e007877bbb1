"""Cost models (liftpy.tuning.cost_model): the I/O lower bound's formula, the analytic model's sense of direction,
and a learned model that learns a device's landscape from its trials, held-out tasks included."""

import math
import random
from pathlib import Path

import pytest

from liftpy import nn
from liftpy.device import Device
from liftpy.nn.winograd import winograd_task
from liftpy.tuning import ProgramTask
from liftpy.tuning.cost_model import (LAUNCH_MS, MEMORY_LINE, MEMORY_WAIT, OUT_OF_ORDER_WINDOW, AnalyticModel,
                                      DeviceModel, LearnedModel, io_lower_bound, kendall_tau, top_recall,
                                      traffic_lower_bound, window_reuse)
from liftpy.tuning.features import FEATURES_VERSION, NAMES, program_features

from .test_features import CPU, generated_candidates


def test_the_lower_bound_is_theorem_4_9_of_the_ppopp21_paper():
    # U / (4 sqrt(2 R S)): 1e6 updates, R = 1, S = 128 -> 1e6 / (4 * 16)
    assert io_lower_bound(1e6, 1, 128) == pytest.approx(15625.0)
    # a 3x3 convolution at stride 1 reuses each input 9 times: the bound is 3x lower
    assert io_lower_bound(1e6, 9, 128) == pytest.approx(15625.0 / 3)
    assert io_lower_bound(0, 9, 128) == 0.0


def test_no_candidate_moves_less_than_the_lower_bound():
    """Every candidate of a 3x3 convolution, its global traffic counted in floats, moves at least what the
    bound allows a fast memory as large as a work-item's private budget and a group's local memory."""
    c, h, w, k, r = 16, 12, 12, 32, 3
    layer = nn.make_layer(input_shape=(c, h, w), kernel_shape=(k, r, r), stride=1, padding=1)
    updates = k * h * w * c * r * r
    bound = io_lower_bound(updates, r * r, CPU.private_mem_budget + CPU.local_mem_size / 4)
    seen = 0
    for config, generated in generated_candidates(nn.route_task(layer), 10):
        f = program_features(generated, CPU)
        assert (f["global_read_bytes"] + f["global_written_bytes"]) / 4 >= bound, config
        seen += 1
    assert seen >= 5


MATMUL = Path(__file__).resolve().parent.parent / "examples" / "programs" / "matmul.lift"


def matmul_task(n):
    return ProgramTask.make(MATMUL, {"n": n, "k": n, "m": n}, constants=("b",))


def test_the_least_traffic_of_a_call_is_its_inputs_and_output_or_the_bound_whichever_is_more():
    """A product reuses nothing through windows (R = 1), a whole 3x3 convolution at stride 2 has R = 9 / 4, a
    stage that slides tiles has none the formula can use. The least traffic, by hand: a 512^3 product moves its
    two inputs and output (3 MiB) at least; with S = 512 floats the bound, U / (4 sqrt(2 * 512)) = U / 128
    floats, is 4 MiB; with a fast memory of a million floats, the 3 MiB are more."""
    assert window_reuse(matmul_task(8)) == 1.0
    layer = nn.make_layer(input_shape=(8, 16, 16), kernel_shape=(8, 3, 3), stride=2, padding=1)
    assert window_reuse(nn.route_task(layer)) == pytest.approx(9 / 4)
    winograd = winograd_task(nn.make_layer(input_shape=(8, 16, 16), kernel_shape=(8, 3, 3), stride=1, padding=1))
    sliding = [s for s in winograd.stages() if window_reuse(s) is None]
    assert sliding  # the input's tiles: windows, but no kernelHeight of theirs
    small = Device(kind="cpu", private_mem_budget=512, local_mem_size=0)
    large = Device(kind="cpu", private_mem_budget=512, local_mem_size=4 * 2**20 - 4 * 512)
    assert traffic_lower_bound(matmul_task(512), 512 ** 3, small) == 4 * 2**20
    assert traffic_lower_bound(matmul_task(512), 512 ** 3, large) == 3 * 2**20


def features(**values):
    base = dict.fromkeys(NAMES, 1.0)
    base.update(compute_units=4, preferred_vector=8, work_groups=64, reduction_updates=1e6,
                global_read_bytes=1e5, global_written_bytes=1e4, vector_width=8, private_share=0.5, kernels=1,
                reduction_chain=1e3)
    base.update(values, version=FEATURES_VERSION)
    return base


def test_the_analytic_model_prefers_fewer_loads_and_lines_enough_accumulators_busy_units_and_no_spills():
    """By hand, on a CPU of 4 units and 16 vector registers: a step of 1e6 multiply-adds and as many loads takes
    0.5e6 cycles (two of each a cycle); twice the loads, twice that; 1e6 cache lines brought from the next level,
    a cycle each, 1.5e6 cycles in all; 2 accumulators where 8 keep the pipes full
    (two multiply-adds a cycle, 4 cycles each), four times; 32 accumulators and 2 operands do not fit 16 registers:
    each accumulator loaded and stored at every update (3e6 loads), three times (on a GPU, whose registers per
    work-item are not known, only the 18 past them); one work-group leaves three units idle."""
    model = AnalyticModel()

    def time(**values):
        given = {"update_instructions": 1e6, "load_instructions": 1e6, "accumulators": 8,
                 "accumulator_share": 0.5, "is_cpu": 1, **values}
        return model.predict([features(**given)])[0] - LAUNCH_MS  # one kernel's launch

    assert time(load_instructions=2e6) == pytest.approx(2 * time(), rel=1e-3)
    assert time(cache_lines=1e6) == pytest.approx(3 * time(), rel=1e-3)
    assert time(accumulators=2, accumulator_share=2 / 16) == pytest.approx(4 * time(), rel=1e-3)
    assert time(accumulators=32, accumulator_share=2.0) == pytest.approx(3 * time(), rel=1e-3)
    gpu_fitting = time(accumulators=8, is_cpu=0)  # a GPU: only the 18 past the registers
    assert time(accumulators=32, accumulator_share=2.0, is_cpu=0) == pytest.approx(
        (1e6 + 2e6 * 18 / 32) / 1e6 * gpu_fitting, rel=1e-3)
    assert time(work_groups=1) == pytest.approx(4 * time(), rel=1e-2)
    assert time(accumulators=2, accumulator_share=2 / 16, is_cpu=0) == pytest.approx(time(), rel=1e-3)


def test_a_kernels_lines_from_memory_cost_less_the_more_streams_a_step_reads_there():
    """A CPU's kernel of 1.5e6 cycles (the pipes' 0.5e6 and 1e6 cache lines) that brings 2e5 lines from memory,
    its steps reading one stream from there each, takes 2e5 (MEMORY_LINE + MEMORY_WAIT) = 7.2e6 more cycles;
    eight streams each, 2e5 (MEMORY_LINE + MEMORY_WAIT / 8) = 3e6; on a GPU (which hides the waits) 2e5
    MEMORY_LINE = 2.4e6. Two accumulators leave the multiply-adds waiting four times their cycles (the latency
    test above), but a step whose 4e6 loads take as long waits on nothing more: the loads do not wait on the
    multiply-adds."""
    model = AnalyticModel()

    def time(**values):
        given = {"update_instructions": 1e6, "load_instructions": 1e6, "accumulators": 8,
                 "accumulator_share": 0.5, "is_cpu": 1, "cache_lines": 1e6, **values}
        return model.predict([features(**given)])[0] - LAUNCH_MS

    assert (MEMORY_LINE, MEMORY_WAIT) == (12, 24)
    pipes = time(memory_lines=0, memory_stream_lines=0)
    assert time(memory_lines=2e5, memory_stream_lines=2e5) == pytest.approx(pipes * 8.7 / 1.5, rel=1e-3)
    assert time(memory_lines=2e5, memory_stream_lines=2e5 / 8) == pytest.approx(pipes * 4.5 / 1.5, rel=1e-3)
    assert time(memory_lines=2e5, memory_stream_lines=2e5, is_cpu=0) == pytest.approx(pipes * 3.9 / 1.5, rel=1e-3)
    assert time(accumulators=2, accumulator_share=2 / 16, load_instructions=4e6) == pytest.approx(
        time(load_instructions=4e6), rel=1e-3)
    assert time(accumulators=2, accumulator_share=2 / 16) == pytest.approx(pipes * 3 / 1.5, rel=1e-3)


def test_a_short_chain_of_updates_overlaps_the_next_outputs_in_the_cores_window():
    """A core keeps OUT_OF_ORDER_WINDOW instructions in flight: one accumulator of a pooling's 9 updates (a load
    each: 18 instructions) overlaps 320 / 18 > 8 such chains, enough to hide the latency; a chain of 40 such
    updates overlaps 4 (half of the 8 the pipes need: twice the time of a full pipe); one of 160 or more, or one
    of a trial featurised before the chain was read, none (8 times)."""
    model = AnalyticModel()

    def time(**values):
        given = {"update_instructions": 1e6, "load_instructions": 1e6, "accumulators": 1,
                 "accumulator_share": 1 / 16, "is_cpu": 1, **values}
        return model.predict([features(**given)])[0] - LAUNCH_MS

    full = time(accumulators=8, accumulator_share=0.5)
    assert OUT_OF_ORDER_WINDOW == 320
    assert time(reduction_chain=9) == pytest.approx(full, rel=1e-3)
    assert time(reduction_chain=40) == pytest.approx(2 * full, rel=1e-3)
    assert time(reduction_chain=160) == pytest.approx(8 * full, rel=1e-3)
    assert time(reduction_chain=float("nan")) == pytest.approx(8 * full, rel=1e-3)
    assert time(reduction_chain=40, is_cpu=0) == pytest.approx(full, rel=1e-3)


def test_the_analytic_model_reads_an_older_trial_by_its_traffic_and_vectors():
    """A trial featurised before the instructions were counted: slower with more traffic, narrower vectors,
    idle units or private values over the budget."""
    model = AnalyticModel()

    def old(**values):
        return features(update_instructions=float("nan"), **values)

    assert model.predict([old(global_read_bytes=1e8)])[0] > model.predict([old()])[0]
    assert model.predict([old(vector_width=1)])[0] > model.predict([old(vector_width=8)])[0]
    assert model.predict([old(work_groups=1)])[0] > model.predict([old(work_groups=64)])[0]
    assert model.predict([old(private_share=2.0)])[0] > model.predict([old(private_share=1.0)])[0]


def landscape(f):
    """A device the analytic model does not know: it pays 40% more per byte read than its rates say, groups
    of 64 run best, and vectors wider than 4 gain nothing."""
    units = f["compute_units"]
    arithmetic = f["reduction_updates"] / (units * min(4, f["vector_width"]) * 1e6)
    moving = 1.4 * f["global_read_bytes"] / (units * 4e6)
    return (arithmetic + moving) * (1 + abs(math.log2(f["group_size"] / 64)) / 2)


def random_features(rng, task):
    return features(reduction_updates=1e6 * (task + 1), global_read_bytes=rng.uniform(1e5, 3e6) * (task + 1),
                    vector_width=rng.choice([1, 2, 4, 8, 16]), group_size=rng.choice([8, 16, 32, 64, 128, 256, 512]))


@pytest.mark.skipif(not LearnedModel.available(), reason="the model extra (lightgbm) is not installed")
def test_a_learned_model_ranks_a_held_out_task_of_the_device_better_than_the_analytic_one():
    rng = random.Random(0)
    seen = [random_features(rng, task) for task in (0, 1, 3, 4) for _ in range(60)]
    held_out = [random_features(rng, 2) for _ in range(60)]  # a layer between the others in size
    truth = [landscape(f) for f in held_out]
    model = LearnedModel()
    model.fit(seen, [landscape(f) for f in seen])
    assert model.trained
    learned, analytic = model.predict(held_out), AnalyticModel().predict(held_out)
    assert kendall_tau(learned, truth) > max(0.6, kendall_tau(analytic, truth) + 0.1)
    assert top_recall(learned, truth) >= 0.6


def test_a_learned_model_with_too_few_trials_predicts_as_the_analytic_one():
    model = LearnedModel(least=10)
    model.fit([features()] * 3, [1.0, 2.0, 3.0])
    assert not model.trained
    probe = [features(global_read_bytes=1e7), features()]
    assert model.predict(probe) == AnalyticModel().predict(probe)


def test_kendall_tau_and_the_recall_of_the_top():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [40, 30, 20, 10]) == -1.0
    measured = list(range(30))
    assert top_recall(measured, measured) == 1.0
    assert top_recall([-m for m in measured], measured) == 0.0  # the fastest five predicted slowest


def test_the_report_predicts_a_task_from_the_devices_other_tasks_and_sets_its_traffic_against_the_bound():
    """``liftpy report``'s columns: the model sees none of the task's own trials (the same trials of another
    task in the database change nothing but the device's other tasks), its figures are scaled by the median of
    measured over predicted; the traffic over the bound, with the Mali profile's S = 256 + 32768 / 4 floats."""
    from liftpy.params import target_profiles
    from liftpy.tuning.db import Trial
    from liftpy.tuning.report import ModelView

    mali = target_profiles()["mali-g72"]
    task, other = matmul_task(64), matmul_task(32)

    def trial(key, time_ms, **values):
        return Trial(key, "", "route", {}, mali.name, "ok", "", time_ms, 0, 0.0, {}, 1.0, features=features(**values))

    mine = [trial(task.key, 3.0, global_read_bytes=1e6, reduction_updates=64 ** 3),
            trial(task.key, 1.0, global_read_bytes=1e5, reduction_updates=64 ** 3)]

    class Database:
        def __init__(self, rows):
            self.rows = rows

        def trials(self, subject=None, device=None, status=None):
            return [t for t in self.rows if device in (None, t.device)]

    alone = ModelView.of(Database(mine), task, mine)
    figures = AnalyticModel().predict([t.features for t in mine])  # no other task: the analytic model's
    scale = (3.0 / figures[0] + 1.0 / figures[1]) / 2  # the median of two
    assert [alone.predicted_ms[id(t)] for t in mine] == pytest.approx([f * scale for f in figures])
    assert any("analytic" in line for line in alone.notes)
    s = 256 + 32768 / 4
    for t in mine:
        moved = t.features["global_read_bytes"] + t.features["global_written_bytes"]
        least = max(3 * 64 * 64 * 4, 4 * 64 ** 3 / (4 * math.sqrt(2 * s)))
        assert alone.over_bound[id(t)] == pytest.approx(moved / least)
    if LearnedModel.available():
        others = [trial(other.key, 1.0 + i / 10, global_read_bytes=1e5 * (1 + i)) for i in range(40)]
        learned = ModelView.of(Database(mine + others), task, mine)
        assert any("learned from 40 trials of the device's 1 other tasks" in line for line in learned.notes)
        again = ModelView.of(Database(mine * 20 + others), task, mine)  # its own trials are not learned from
        assert [again.predicted_ms[id(t)] for t in mine] == [learned.predicted_ms[id(t)] for t in mine]


def test_a_device_model_learns_only_from_trials_featurised_as_this_liftpy_reads_them():
    """A trial whose features were read by an older featuriser (another version, or none recorded) would teach
    the model what its counts meant then: it is left out."""
    from liftpy.tuning.db import Trial

    def trial(time_ms, stored):
        return Trial("task", "", "route", {}, "a CPU", "ok", "", time_ms, 0, 0.0, {}, 1.0, features=stored)

    stale = {**features(), "version": FEATURES_VERSION - 1}
    unversioned = {k: v for k, v in features().items() if k != "version"}
    model = DeviceModel.of_trials([trial(1.0, features()), trial(2.0, stale), trial(3.0, unversioned),
                                   trial(4.0, {})])
    assert [time_ms for _, time_ms, _ in model.rows] == [1.0]


def test_benchmarks_read_only_current_features_and_stamp_them():
    """benchmarks/cost_model.py's reading of a trial's features, which its leave-one-out runs and the seeded
    databases of benchmarks/search.py and default_guess.py train on: a trial's own features where they are
    current, else the cache's, and what it returns carries the version a :class:`DeviceModel` asks for (seeded
    trials without it once trained the learned model on nothing)."""
    from dataclasses import replace

    from benchmarks.cost_model import recorded_features
    from liftpy.tuning.db import Trial, config_key
    from liftpy.tuning.features import current

    values = {name: float(i + 1) for i, name in enumerate(NAMES)}
    config = {"vector": 8}

    def trial(features):
        return Trial("program k conv", "", "route", config, "dev", "ok", "", 1.0, None, None, {}, None,
                     features=features)

    key = f"program k conv|{config_key(config)}"
    stale = dict(values, version=FEATURES_VERSION - 1)
    cached = {name: 2 * v for name, v in values.items()} | {"version": FEATURES_VERSION}
    own = recorded_features(trial(dict(values, version=FEATURES_VERSION)), {key: cached})
    assert own == dict(values, version=FEATURES_VERSION) and current(own)
    from_cache = recorded_features(trial(stale), {key: cached})
    assert from_cache == cached and current(from_cache)
    assert recorded_features(trial(stale), {key: dict(values)}) is None  # a cache without a version is stale
    assert recorded_features(trial({}), {}) is None
    assert len(DeviceModel.of_trials([replace(trial(stale), features=from_cache)]).rows) == 1
