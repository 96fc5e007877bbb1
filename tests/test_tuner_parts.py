"""The tuner's mechanics with a fake builder and a fake runner: no OpenCL, no kernel, seconds.

The fake runner answers each configuration with a time of its own (a hash of it: a landscape the test knows),
wrong for the configurations the test says; the fake builder builds nothing. What is tested is the tuner's:
batches built ahead of the runner, every trial recorded once, resumed, a wrong trial never chosen, the fastest
measured again, a bug stopping the run, and the scheduler's share of one budget; and a real builder's
processes ending with the process that started them."""

import hashlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

import liftpy.nn as nn
from liftpy.device import Device
from liftpy.errors import DeviceError, InternalError, NoCorrectTrial
from liftpy.tuning import Built, Slot, TaskScheduler, Tuner, TuningDB, tune_groups
from liftpy.tuning.db import Best, Trial, chosen, config_key, per_call_ms
from liftpy.tuning.program import JOINED
from .conftest import QUIET

SMALL = dict(input_shape=(8, 12, 12), kernel_shape=(8, 3, 3), stride=1, padding=1)
FACTS = Device(name="fake device", kind="cpu", compute_units=2, max_work_group_size=4096,
               max_work_item_sizes=(4096, 4096, 4096), local_mem_size=2**20, preferred_vector_width_float=16,
               private_mem_budget=512)


def landscape(config) -> float:
    """A configuration's time in the fake world: 1-2 ms, by a hash of it."""
    digest = hashlib.sha256(config_key(config).encode()).digest()
    return 1.0 + digest[0] / 255


class FakeBuilder:
    """Builds nothing, at once; logs each call."""

    def __init__(self, log):
        self.log = log

    def build(self, builds):
        self.log.append(("build", len(builds)))
        futures = []
        for build in builds:
            future = Future()
            future.set_result(Built(build, "generated", None, 0.0))
            futures.append(future)
        return futures

    def close(self):
        pass


class FeaturingBuilder(FakeBuilder):
    """A FakeBuilder whose candidates have features: those the analytic model reads, its time the landscape's
    (in millions of multiply-adds), stamped ``version`` where given. Logs every configuration built, in order."""

    def __init__(self, log, version=None):
        super().__init__(log)
        self.version = version

    def build(self, builds):
        self.log.append(("build", len(builds)))
        futures = []
        for build in builds:
            self.log.append(("built", config_key(build.config)))
            features = dict(compute_units=1, work_groups=1, vector_width=1, preferred_vector=1, private_share=0,
                            global_read_bytes=0, global_written_bytes=0, kernels=0,
                            reduction_updates=landscape(build.config) * 1e6)
            if self.version is not None:
                features["version"] = self.version
            future = Future()
            future.set_result(Built(build, "generated", None, 0.0, features))
            futures.append(future)
        return futures


class FakeRunner:
    """Answers a batch on a thread of its own after ``delay`` seconds: ``landscape`` times, ``wrong`` ones
    wrong, ``bug`` ones a bug; every measurement of a configuration after its first is ``drift`` times its
    landscape time (the machine slowed down); a stage of a staged task (Winograd's) takes ``stage_scale`` of its
    landscape time, its stages joined (a candidate of no configuration) ``joined_ms``."""

    device = {"name": "fake device", "driver": "0", "platform": "fake"}
    device_facts = FACTS

    def __init__(self, log, wrong=(), bug=(), delay=0.01, first_times=None, fail=None, wrong_tasks=(),
                 stage_scale=1.0, joined_ms=1.0):
        self.log, self.wrong, self.bug, self.delay = log, wrong, bug, delay
        self.stage_scale, self.joined_ms = stage_scale, joined_ms
        self.joined = 0  # the joined programs timed
        self.wrong_tasks = wrong_tasks  # every trial of these tasks wrong
        self.first_times = first_times or {}  # config key -> the time of its first measurement
        self.seen: dict[str, int] = {}
        self.fail = fail
        self.batches = 0

    def result(self, config, seed):
        key = config_key(config)
        time_ms = self.first_times.get(key, landscape(config)) if key not in self.seen else landscape(config)
        self.seen[key] = self.seen.get(key, 0) + 1
        if key in self.bug:
            return {"status": "bug", "cause": "Traceback (most recent call last):\nKeyError: 'planted'"}
        status = "wrong" if key in self.wrong else "ok"
        return {"status": status, "cause": "" if status == "ok" else "output differs", "time_ms": time_ms,
                "times_ms": [time_ms], "max_error": 0.1 if status == "ok" else 9.0, "check_seed": seed,
                "memory_bytes": 1000, "moved_bytes": None, "device": self.device}

    def run(self, batch):
        self.batches += 1
        number = self.batches
        self.log.append(("run", number, len(batch.builts)))
        futures = [Future() for _ in batch.builts]

        def answer():
            time.sleep(self.delay)
            for built, future in zip(batch.builts, futures):
                if self.fail is not None:
                    future.set_exception(self.fail)
                    continue
                try:  # a mistake in a test's fake fails the test, not hangs it
                    result = self.result(built.config, batch.seed)
                except Exception as e:
                    future.set_exception(e)
                    continue
                if batch.task in self.wrong_tasks:
                    result = {**result, "status": "wrong", "cause": "output differs", "max_error": 9.0}
                if not built.config:  # a staged task's stages joined
                    self.joined += 1
                    result = {**result, "time_ms": self.joined_ms, "times_ms": [self.joined_ms]}
                elif batch.task.stage is not None:
                    scaled = result["time_ms"] * self.stage_scale
                    result = {**result, "time_ms": scaled, "times_ms": [scaled]}
                future.set_result(result)
            self.log.append(("done", number))

        threading.Thread(target=answer, daemon=True).start()
        return futures

    def close(self):
        pass


def task():
    return nn.route_task(nn.make_layer(**SMALL))


def tune(db, trials, log=None, runner=None, **options):
    log = [] if log is None else log
    runner = runner or FakeRunner(log)
    with Tuner(db, runner=runner, builder=FakeBuilder(log), **QUIET, **options) as tuner:
        return tuner.tune([Slot(task())], trials)[0], runner


def proposed(space, trials: int) -> list[str]:
    """The configurations a tuning of ``trials`` trials (the tests' local search, seed 0) measures first."""
    from liftpy.tuning import LocalSearch

    return [config_key(task().complete(c)) for c in LocalSearch(space, trials, 0).propose(2)]


def rows(db):
    return TuningDB(db, readonly=True).trials()


def test_every_trial_is_recorded_once_in_batches_and_a_resumed_run_measures_only_new_ones(tmp_path):
    db = tmp_path / "t.sqlite"
    log = []
    best, _ = tune(db, 20, log, batch=8, confirm=0)
    first = rows(db)
    assert len(first) == 20 and len({config_key(t.config) for t in first}) == 20
    assert [entry[2] for entry in log if entry[0] == "run"] == [2, 8, 8, 2]  # the first small (FIRST_BATCH)
    assert best.time_ms == min(landscape(t.config) for t in first)
    best, _ = tune(db, 26, batch=8, confirm=0)
    again = rows(db)
    assert len(again) == 26 and len({config_key(t.config) for t in again}) == 26
    assert [config_key(t.config) for t in again[:20]] == [config_key(t.config) for t in first]


def test_the_next_batch_is_built_while_the_runner_measures():
    """The builder gets batch 2 before the runner has answered batch 1 (it answers after 0.2 s); the first batch
    is small, so that the runner starts soon."""
    import tempfile

    log = []
    with tempfile.TemporaryDirectory() as directory:
        tune(f"{directory}/t.sqlite", 16, log, runner=FakeRunner(log, delay=0.2), batch=8, confirm=0)
    assert log[:4] == [("build", 2), ("run", 1, 2), ("build", 8), ("done", 1)], log


def test_a_wrong_trial_is_recorded_and_never_chosen_however_fast(tmp_path):
    db = tmp_path / "t.sqlite"
    space = task().space(FACTS)
    start = proposed(space, 10)[0]
    runner = FakeRunner([], wrong={start}, first_times={start: 0.001})
    best, _ = tune(db, 10, runner=runner, confirm=2)
    trials = {config_key(t.config): t for t in rows(db)}
    assert trials[start].status == "wrong" and trials[start].time_ms == 0.001
    assert config_key(best.config) != start and best.trial.status == "ok"


def test_a_fast_first_measurement_is_measured_again_and_ranked_by_its_later_medians(tmp_path):
    """A configuration whose first measurement caught a fast spell (0.5 ms; 1-2 ms after) is measured again in
    turns with its rivals: the best is then the one whose medians are the fastest, measured again."""
    db = tmp_path / "t.sqlite"
    space = task().space(FACTS)
    lucky = proposed(space, 12)[1]
    runner = FakeRunner([], first_times={lucky: 0.5})
    best, _ = tune(db, 12, runner=runner, confirm=3)
    trials = rows(db)
    again = [t for t in trials if t.measured_again]
    assert lucky in {config_key(t.config) for t in again}
    assert best.trial.measured_again and best.time_ms == min(landscape(t.config) for t in again)
    assert runner.seen[lucky] == 2  # its first measurement, and one batch of rounds in turns


def test_a_task_with_one_correct_trial_is_not_measured_again(tmp_path):
    """The confirmation orders rivals; a task with one correct trial (a network's small task given one) has
    none, and its tuning ends with its search's batch: no batch of rounds in turns for 5 s."""
    log = []
    best, runner = tune(tmp_path / "t.sqlite", 1, log, confirm=3)
    assert [entry for entry in log if entry[0] == "run"] == [("run", 1, 1)]
    assert best.trial.status == "ok" and not best.trial.measured_again


def test_a_network_keeps_its_other_steps_bests_where_one_step_has_no_correct_trial(tmp_path, capsys):
    """tune_groups as a network calls it (every_group=False): the step whose every trial is wrong is None and
    said on stderr, the other tuned; as a layer's tuning calls it, the same raises NoCorrectTrial."""
    other = nn.route_task(nn.make_layer(**dict(SMALL, input_shape=(8, 10, 10))))
    groups = [[("", task())], [("", other)]]

    def tuned(every_group, db):
        runner = FakeRunner([], wrong_tasks=(other,))
        return tune_groups(groups, 6, db, every_group=every_group, runner=runner, builder=FakeBuilder([]), **QUIET)

    found = tuned(False, tmp_path / "network.sqlite")
    assert found[0] is not None and found[0].task == task() and found[1] is None
    assert "no correct trial" in capsys.readouterr().err
    with pytest.raises(NoCorrectTrial, match="no correct trial"):
        tuned(True, tmp_path / "layers.sqlite")


def test_a_staged_alternative_is_chosen_by_its_stages_joined_and_timed_whole_not_by_their_sum(tmp_path):
    """Winograd's stages, each timed alone, sum to less than the direct program's time; joined and timed whole,
    they take longer (as on ResNet-18's 7x7 layers: their caches shared): the group's pick is the direct
    program, and the database answers the whole's time for Winograd's. A tuning resumed does not time the
    same joined program again."""
    layer = nn.make_layer(**SMALL)
    direct, staged = nn.route_task(layer), nn.winograd.winograd_task(layer)
    groups = [[("direct", direct), ("winograd", staged)]]
    db = tmp_path / "t.sqlite"

    def tuned():
        runner = FakeRunner([], stage_scale=0.01, joined_ms=50.0)
        found = tune_groups(groups, 7, db, runner=runner, builder=FakeBuilder([]), **QUIET, confirm=0)
        return found[0], runner

    pick, runner = tuned()
    database = TuningDB(db, readonly=True)
    whole = database.best(staged, "fake device")
    assert runner.joined == 1 and whole.whole is not None and whole.time_ms == 50.0
    assert per_call_ms(whole.stages) < database.best(direct, "fake device").time_ms  # the sum would have won
    assert pick.name == "direct" and pick.task == direct
    assert len(database.trials(staged, algorithm=JOINED)) == 1
    again, runner = tuned()
    assert runner.joined == 0 and again.name == "direct"
    assert len(TuningDB(db, readonly=True).trials(staged, algorithm=JOINED)) == 1


def test_of_a_layers_programs_tied_in_time_the_one_keeping_less_memory_is_chosen():
    """Winograd's program 3% faster than the direct one but keeping 5 times its memory (its transformed weights
    and intermediates): tied (within TIED), the direct one runs; 10% faster, Winograd's; keeping as little, the
    fastest."""
    layer = nn.make_layer(**SMALL)
    direct_task, staged = nn.route_task(layer), nn.winograd.winograd_task(layer)

    def trial(key, algorithm, time_ms, memory):
        return Trial(key, "", algorithm, {"x": 1}, "fake device", "ok", "", time_ms, memory, 0.0, {}, 1.0)

    direct = Best(direct_task, {"x": 1}, 1.0, (trial(direct_task.key, "route", 1.0, 1_000_000),), name="direct")

    def winograd(time_ms, memory=5_000_000):
        stage = Best(staged.stages()[1], {"x": 1}, time_ms, (trial("stage", "route", time_ms, memory),))
        return Best(staged, {"s": {"x": 1}}, time_ms, (), (stage,), name="winograd",
                    whole=trial(staged.key, JOINED, time_ms, None))

    assert chosen([direct, winograd(0.97)]).name == "direct"
    assert chosen([direct, winograd(0.90)]).name == "winograd"
    assert chosen([direct, winograd(0.97, memory=1_000_000)]).name == "winograd"
    assert chosen([winograd(1.03), direct]).name == "direct" and chosen([]) is None


def test_a_bug_stops_the_tuning_with_its_traceback_saved_and_nothing_recorded_for_it(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the report's folder: not left in the system's
    db = tmp_path / "t.sqlite"
    space = task().space(FACTS)
    planted = proposed(space, 10)[0]
    with pytest.raises(InternalError) as caught:
        tune(db, 10, runner=FakeRunner([], bug={planted}), confirm=0)
    assert "a bug in liftpy" in caught.value.message and "KeyError: 'planted'" in caught.value.message
    assert "Traceback" in caught.value.path.read_text() and caught.value.path.parent == tmp_path
    assert planted not in {config_key(t.config) for t in rows(db)}


def test_a_runner_that_fails_stops_the_tuning_and_records_nothing_partial(tmp_path):
    db = tmp_path / "t.sqlite"
    with pytest.raises(DeviceError, match="no device left"):
        tune(db, 10, runner=FakeRunner([], fail=DeviceError("no device left")), confirm=0)
    assert rows(db) == []


# ------------------------------------------------------------------------------------------------ the scheduler
def _drive(scheduler: TaskScheduler, times) -> list[int]:
    """Run the scheduler to the end; ``times[i](t)``: slot i's time at its t-th trial. The trials each slot got."""
    while (choice := scheduler.next()) is not None:
        index, count = choice
        for _ in range(count):
            scheduler.observe(index, times[index](scheduler.states[index].trials + 1))
    return [state.trials for state in scheduler.states]


def test_the_scheduler_gives_the_budget_where_the_total_time_gains_most():
    """Three layers: a slow one that keeps improving, a fast one, and a slow one that stopped improving after
    its first trials. The first gets most of the budget; every one gets its first batch (FIRST_TRIALS), the
    fast one little more: a millisecond cannot gain what fifty can."""
    from liftpy.tuning.scheduler import FIRST_TRIALS

    improving = lambda t: 100.0 / t ** 0.5  # noqa: E731
    fast = lambda t: 1.0 + 1.0 / t  # noqa: E731
    flat = lambda t: 50.0 if t > 2 else 60.0  # noqa: E731
    counts = _drive(TaskScheduler([Slot("a", 0), Slot("b", 1), Slot("c", 2)], 96, batch=8),
                    [improving, fast, flat])
    assert sum(counts) == 96 and min(counts) >= FIRST_TRIALS and counts[1] <= FIRST_TRIALS + 8
    assert counts[0] > counts[2] and counts[0] > counts[1] and counts[0] >= 48, counts


def test_a_small_budget_over_many_slots_goes_mostly_to_the_slow_ones():
    """A network's budget of a few trials a slot: each slot's first batch is FIRST_TRIALS, and the rest goes
    where the total time gains most -- the one slow layer gets the most, four times the even share or more."""
    from liftpy.tuning.scheduler import FIRST_TRIALS

    slots = [Slot(str(i), i) for i in range(20)]
    times = [lambda t: 1.0 + 1.0 / t] * 19 + [lambda t: 40.0 / t ** 0.5]
    counts = _drive(TaskScheduler(slots, 100, batch=8), times)
    assert sum(counts) == 100 and min(counts) >= FIRST_TRIALS and counts[-1] == max(counts) >= 4 * 100 // 20, counts


def test_the_scheduler_weights_a_layer_by_how_often_it_runs():
    same = lambda t: 10.0 / t ** 0.5  # noqa: E731
    counts = _drive(TaskScheduler([Slot("a", 0, weight=1), Slot("b", 1, weight=4)], 80, batch=8), [same, same])
    assert counts[1] > counts[0], counts


def test_the_scheduler_tunes_a_slower_alternative_only_while_it_could_win():
    """A layer computed by a fast direct program or a Winograd program three times slower: after its first
    batch, Winograd's gets little of the budget."""
    direct = lambda t: 10.0 / t ** 0.3  # noqa: E731
    winograd = lambda t: 30.0 / t ** 0.3  # noqa: E731
    counts = _drive(TaskScheduler([Slot("d", 0, "direct"), Slot("w", 0, "winograd")], 64, batch=8),
                    [direct, winograd])
    assert counts[1] <= 16 < counts[0], counts


def test_a_stage_run_once_gets_its_cap_and_the_first_batches_fit_a_small_budget():
    counts = _drive(TaskScheduler([Slot("w", 0, per_call=False, cap=2), Slot("x", 0), Slot("y", 0)], 7, batch=8),
                    [lambda t: 1.0, lambda t: 2.0, lambda t: 3.0])
    assert counts[0] == 2 and sum(counts) == 7 and min(counts[1:]) >= 1, counts


def test_a_task_far_slower_than_its_kin_at_its_work_gets_the_trials_a_stranger_of_its_time_does_not():
    """Ansor's similar tasks' term: two convolutions of the same work, one five times slower than the other (its
    kin's throughput would give it a fifth of its time), and a pooling as slow with no kin. None improves; the
    slow convolution is expected to close part of the gap and gets more trials than the pooling; told no work
    (no features), the two slow ones are alike and get the same."""
    flat = lambda ms: lambda t: ms  # noqa: E731

    def drive(works):
        scheduler = TaskScheduler([Slot("a", 0, family="conv"), Slot("b", 1, family="conv"),
                                   Slot("c", 2, family="pool")], 60, batch=4)
        times = [flat(1.0), flat(5.0), flat(5.0)]
        while (choice := scheduler.next()) is not None:
            index, count = choice
            for _ in range(count):
                scheduler.observe(index, times[index](0), work=works[index])
        return [state.trials for state in scheduler.states]

    with_work = drive([100.0, 100.0, 100.0])
    assert with_work[1] > with_work[2] + 8, with_work
    without = drive([None, None, None])
    assert abs(without[1] - without[2]) <= 4, without


def test_a_resumed_budget_already_spent_still_gives_a_slot_never_tried_its_first_trial():
    """A network tuned again with the budget it had, after a step was added (a new fusion): the database's trials
    spent the budget, yet the new step gets one trial instead of none (a step with no correct trial is said and
    runs a guess); the tried ones get nothing more."""
    scheduler = TaskScheduler([Slot("old", 0), Slot("new", 1)], 10, batch=8)
    for _ in range(10):
        scheduler.observe(0, 1.0, handed=False)  # an earlier run's
    assert scheduler.next() == (1, 1)
    scheduler.observe(1, 2.0)
    assert scheduler.next() is None


def test_identical_layers_are_one_task_weighted_by_their_count(tmp_path, monkeypatch):
    """A network's repeated layer is tuned once: tune_layers hands the scheduler one group weighted 2."""
    seen = {}

    def fake_tune_groups(groups, trials, db, device, seed, weights=None, **options):
        seen.update(groups=groups, trials=trials, weights=weights)
        return [json.dumps([t.key for _, t in g]) for g in groups]

    monkeypatch.setattr(nn.conv, "tune_groups", fake_tune_groups)
    other = dict(SMALL, input_shape=(8, 10, 10))
    found = nn.conv.tune_layers([SMALL, other, SMALL], trials=5, algorithm="direct")
    assert len(seen["groups"]) == 2 and seen["weights"] == [2, 1] and seen["trials"] == 10
    assert found[0] == found[2] != found[1]


def test_the_rivals_measured_again_take_rounds_in_turns_for_the_whole_span(tmp_path, monkeypatch):
    """The confirmation's batch is timed for CONFIRM_SPAN_MS: the runner is asked for that span."""
    from liftpy.tuning import tuner as tuner_module

    monkeypatch.setattr(tuner_module, "CONFIRM_SPAN_MS", 1234.0)
    spans = []

    class Recording(FakeRunner):
        def run(self, batch):
            spans.append(batch.timing.min_span_ms)
            return super().run(batch)

    tune(tmp_path / "t.sqlite", 8, runner=Recording([]), confirm=2)
    assert spans[0] == 0.0 and spans[-1] == 1234.0  # a search batch, then a confirmation's


def test_the_spread_of_a_figure_is_its_middle_half_over_its_median():
    from liftpy.tuning.measure import spread

    assert spread([2.0, 2.0, 2.0]) == 0.0
    assert spread([1.0, 2.0, 3.0, 4.0]) == pytest.approx((3.5 - 1.5) / 2.5)  # halves' medians 1.5, 3.5; median 2.5
    # seven rounds, one slow: the lower three's median 10, the upper three's (10, 11, 90) 11, the median 10
    assert spread([10.0, 10.0, 10.0, 10.0, 10.0, 11.0, 90.0]) == pytest.approx((11.0 - 10.0) / 10.0)


def test_a_candidate_whose_first_launch_kills_the_builder_is_built_again_for_the_runner_to_judge(tmp_path):
    """A builder that compiles (and launches) the kernels beside the runner may die on a faulty kernel: that
    candidate, and those the reset cancelled, are built again without compiling, and every trial is recorded
    once; the fault is the runner's to find (here: it finds the candidate wrong)."""
    from concurrent.futures.process import BrokenProcessPool

    log, compiled, faulty = [], [], set()

    class Compiling(FakeBuilder):
        compiles, broken, resets = True, False, 0

        def reset(self):
            self.resets += 1
            self.broken = False

        def build(self, builds):
            futures = []
            for build in builds:
                compiled.append(build.compile)
                future = Future()
                key = config_key(build.config)
                if build.compile and (not faulty or key in faulty):  # the first candidate's launch crashes
                    faulty.add(key)
                    self.broken = True
                    future.set_exception(BrokenProcessPool("a process died"))
                else:
                    future.set_result(Built(build, "generated", None, 0.0))
                futures.append(future)
            return futures

    class Local(FakeRunner):
        on_this_machine = True

        def result(self, config, seed):
            if config_key(config) in faulty:
                return {**super().result(config, seed), "status": "wrong", "cause": "output differs"}
            return super().result(config, seed)

    builder = Compiling(log)
    db = tmp_path / "t.sqlite"
    with Tuner(db, runner=Local(log), builder=builder, **QUIET, confirm=0, batch=4) as tuner:
        best = tuner.tune([Slot(task())], 10)[0]
    trials = rows(db)
    assert len(trials) == 10 and len({config_key(t.config) for t in trials}) == 10
    assert [t.status for t in trials if config_key(t.config) in faulty] == ["wrong"]
    assert builder.resets == 1 and compiled.count(False) == 1  # rebuilt once, without compiling
    assert best is not None and config_key(best.config) not in faulty


class LineSpace:
    """A space of configurations {"a": 0..99}, whose neighbours are a +- 1."""

    def sample(self, n, seed=0):
        import random

        return [{"a": a} for a in random.Random(seed).sample(range(100), min(n, 100))]

    def neighbours(self, config):
        return [{"a": a} for a in (config["a"] - 1, config["a"] + 1) if 0 <= a < 100]


class Oracle:
    """A cost model that knows the fake landscape exactly."""

    def predict(self, features):
        return [f["time"] for f in features]


def line_time(config):
    return abs(config["a"] - 37) + 1.0


def test_a_model_guided_search_measures_what_its_model_ranks_first_and_learns_every_result():
    from liftpy.tuning.strategy import ModelGuided

    learned, featurised = [], []

    def featurise(configs):
        featurised.extend(configs)
        return [{"time": line_time(c)} for c in configs]

    search = ModelGuided(LineSpace(), 24, 0, [{"a": 90}], Oracle(), featurise,
                         lambda f, t: learned.append((f, t)), pool=20, explore=0.25)
    first = search.propose(8)
    pool = [c for c in featurised]
    best_six = sorted(pool, key=line_time)[:6]
    assert all(c in first for c in best_six)  # six ranked first, two explored at random
    assert {"a": 90} in pool and len({c["a"] for c in first}) == 8
    for c in first:
        search.observe(c, {"status": "ok", "time_ms": line_time(c), "features": {"time": line_time(c)}})
    assert len(learned) == 8
    proposed = list(first)
    for _ in range(4):
        batch = search.propose(8)
        proposed += batch
        for c in batch:
            search.observe(c, {"status": "ok", "time_ms": line_time(c)})
    assert len({c["a"] for c in proposed}) == len(proposed)  # never one twice
    assert {"a": 37} in proposed  # the neighbours of the fastest lead to the optimum


def test_a_model_guided_search_measures_each_opinion_first_whatever_its_model_predicts():
    """The first batch: the space's own pick (``first[0]``, what an untuned call runs), the second opinion's best
    predicted, then the model's ranking -- each measured once, never again."""
    from liftpy.tuning.strategy import ModelGuided

    class NearNinety:
        def predict(self, features):
            return [abs(f["a"] - 90) for f in features]

    featurised = []

    def featurise(configs):
        featurised.extend(configs)
        return [{"time": line_time(c), "a": c["a"]} for c in configs]

    search = ModelGuided(LineSpace(), 24, 0, [{"a": 5}], Oracle(), featurise, pool=20, climbs=0,
                         second_opinion=NearNinety())
    first = search.propose(3)
    pool = [c for c in featurised if c != {"a": 5}]
    assert first == [{"a": 5}, min(pool, key=lambda c: abs(c["a"] - 90)), min(pool, key=line_time)]
    later = [c for _ in range(3) for c in search.propose(7)]
    assert not [c for c in later if c in first] and len({c["a"] for c in later}) == len(later)


def test_a_model_guided_search_measures_the_most_similar_tasks_best_among_its_opinions():
    """``elsewhere`` (the device's other tasks' bests, adapted, the most similar first): the first of them is
    measured in the first batch after the space's own pick, all of them join the pool and are ranked there."""
    from liftpy.tuning.strategy import ModelGuided

    class Far:  # a model that puts every transferred configuration last
        def predict(self, features):
            return [1000.0 - f["a"] if f["a"] in (60, 70, 80) else line_time({"a": f["a"]}) for f in features]

    featurised = []

    def featurise(configs):
        featurised.extend(configs)
        return [{"a": c["a"]} for c in configs]

    search = ModelGuided(LineSpace(), 24, 0, [{"a": 5}], Far(), featurise, pool=10, climbs=0,
                         elsewhere=[{"a": 80}, {"a": 70}, {"a": 60}])
    first = search.propose(3)
    assert first[:2] == [{"a": 5}, {"a": 80}] and first[2] not in ({"a": 70}, {"a": 60})
    assert {"a": 70} in featurised and {"a": 60} in featurised
    later = [c for _ in range(5) for c in search.propose(6)]
    assert {"a": 80} not in later and len({c["a"] for c in first + later}) == len(first + later)


def test_a_guess_ranks_the_other_tasks_bests_with_its_pool_instead_of_measuring_the_first_of_them_first():
    """With ``anchor_elsewhere`` false (a guess: one configuration runs), the transferred bests join the pool and
    the model ranks them with the rest: one the model puts first is the first proposal, one it puts behind is not
    proposed first -- as the anchored search would."""
    from liftpy.tuning.strategy import ModelGuided

    def featurise(configs):
        return [{"time": line_time(c)} for c in configs]

    def guess(elsewhere, anchored):
        search = ModelGuided(LineSpace(), 1, 0, None, Oracle(), featurise, pool=6, climbs=0, elsewhere=elsewhere,
                             anchor_elsewhere=anchored)
        return search.propose(1)[0], search

    drawn = LineSpace().sample(6, seed=0)
    assert {"a": 37} not in drawn and {"a": 90} not in drawn
    assert guess([{"a": 90}, {"a": 37}], anchored=False)[0] == {"a": 37}  # the second transferred, best ranked
    pick, search = guess([{"a": 90}], anchored=False)
    assert pick == min(drawn, key=line_time) and search.features[config_key({"a": 90})] is not None
    assert guess([{"a": 90}], anchored=True)[0] == {"a": 90}


def test_the_guess_of_an_untuned_task_has_the_devices_other_tasks_bests_among_its_candidates(tmp_path, monkeypatch):
    """best_guess hands the model search the bests its database holds of the device's other tasks, adapted to the
    task's space (liftpy.tuning.transfer), and keys the guess it keeps by them."""
    from liftpy.tuning import ProgramTask, guess
    from liftpy.tuning.program import ROUTE

    from .test_guess import AVX2, SIZES
    from .test_programs import PROGRAMS

    monkeypatch.setenv("LIFTPY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LIFTPY_GUESS_POOL", "2")
    other, task = (ProgramTask.make(PROGRAMS / "conv_bias_relu.lift", {**SIZES, "K": k}) for k in (32, 16))
    other_space, space = other.space(AVX2), task.space(AVX2)
    config = other.complete({**other_space.plain(), "block.window": 4, "unroll": 1, "vector": 8, "vector_outer": 2,
                             "block.kernelWeights": 16})
    assert other_space.valid(config) and space.adapted(config) is not None
    handed = []
    searched = guess.model_search

    def model_search(*args, elsewhere=(), **kwargs):
        handed.append(list(elsewhere))
        return searched(*args, elsewhere=elsewhere, **kwargs)

    monkeypatch.setattr(guess, "model_search", model_search)
    guess.best_guess(task, AVX2, tmp_path / "none.sqlite", space=space)
    db = TuningDB(tmp_path / "t.sqlite")
    db.record(other, ROUTE, config, {"name": AVX2.name, "driver": "", "platform": ""},
              {"status": "ok", "cause": "", "time_ms": 1.0})
    guess.best_guess(task, AVX2, db, space=space)  # not the guess kept without the database's bests
    db.close()
    assert handed == [[], [space.adapted(config)]]


def test_a_model_guided_search_whose_pool_is_spent_draws_another_sample():
    from liftpy.tuning.strategy import ModelGuided

    search = ModelGuided(LineSpace(), 24, 0, [], Oracle(), lambda cs: [{"time": line_time(c)} for c in cs],
                         pool=5)
    proposed = [c["a"] for _ in range(4) for c in search.propose(6)]
    assert len(proposed) == 24 == len(set(proposed))


def test_a_model_guided_search_climbs_from_its_best_predicted_before_measuring():
    """Before anything is measured, the neighbours of the best predicted join the pool, a few rounds: the first
    proposal beats every sampled candidate, by as many moves as the rounds allow."""
    from liftpy.tuning.strategy import ModelGuided

    sampled = LineSpace().sample(5, seed=0)
    nearest = min(line_time(c) for c in sampled)
    assert nearest >= 5  # the optimum (a = 37) is four moves or more from the sample
    search = ModelGuided(LineSpace(), 24, 0, [], Oracle(), lambda cs: [{"time": line_time(c)} for c in cs],
                         pool=5, climbs=4, parents=3)
    first, = search.propose(1)
    assert line_time(first) == nearest - 4


def test_the_default_search_ranks_a_pool_scaled_to_the_budget_before_it_measures(tmp_path):
    """With no search named, a tuning is model-guided: before its first batch runs, the builder featurises a pool
    (POOL_PER_TRIAL candidates a trial of the budget, the best of a random sample by their register blocks), and
    the first batch is the pool's best predicted: here, where the analytic model reads the landscape's time,
    its two fastest (the analytic model's pick, measured whatever a learned model says, and the next)."""
    from liftpy.tuning.tuner import FIRST_BATCH, POOL_PER_TRIAL

    log = []
    trials = 4
    with Tuner(tmp_path / "t.sqlite", runner=FakeRunner(log), builder=FeaturingBuilder(log), progress=False,
               confirm=0) as tuner:
        tuner.tune([Slot(task())], trials)
    before_run = log[:next(i for i, entry in enumerate(log) if entry[0] == "run")]
    pool = {entry[1] for entry in before_run if entry[0] == "built"}
    assert len(pool) >= POOL_PER_TRIAL * trials
    measured = rows(tmp_path / "t.sqlite")
    assert len(measured) == trials and FIRST_BATCH == 2
    first_batch = sorted(t.time_ms for t in measured[:FIRST_BATCH])
    sampled = [entry[1] for entry in before_run[1:next(i for i, e in enumerate(before_run) if e[0] == "build" and i)]]
    assert first_batch == sorted(landscape(json.loads(k)) for k in sampled)[:FIRST_BATCH]  # the best predicted


def test_a_tuning_measures_first_what_won_on_the_devices_most_similar_task(tmp_path):
    """Where the database holds the device's other tasks, a new task's first batch holds first the best of the
    most similar task (the same layer on a 16x16 input, beside one on 48x48), adapted
    to its sizes, and the other bests join its pool; another device's tasks (a 13x13 one, nearer) are not read."""
    from liftpy.tuning.program import ROUTE
    from liftpy.tuning.transfer import distance

    db = tmp_path / "t.sqlite"
    near, far, nearest = (nn.route_task(nn.make_layer(**{**SMALL, "input_shape": (8, n, n)})) for n in (16, 48, 13))
    assert distance(task().key, nearest.key) < distance(task().key, near.key) < distance(task().key, far.key)
    space = task().space(FACTS)
    won = {}
    database = TuningDB(db)
    for other, device in ((near, FakeRunner.device), (far, FakeRunner.device),
                          (nearest, {**FakeRunner.device, "name": "another"})):
        configs = [c for c in other.space(FACTS).sample(30, seed=len(won))
                   if space.adapted(c) not in (None, *won.values())][:3]
        for rank, config in enumerate(configs):
            database.record(other, ROUTE, config, device, {"status": "ok", "cause": "", "time_ms": 1.0 + rank,
                                                           "times_ms": [1.0 + rank], "max_error": 0.1,
                                                           "check_seed": 1, "memory_bytes": 1, "moved_bytes": None})
        won[other.key] = space.adapted(configs[0])
    database.close()
    log = []
    with Tuner(db, runner=FakeRunner(log), builder=FeaturingBuilder(log), progress=False, confirm=0) as tuner:
        tuner.tune([Slot(task())], 4)
    first_batch = [t.config for t in rows(db) if t.task_key == task().key][:2]
    assert first_batch[0] == won[near.key]
    assert config_key(won[far.key]) in {entry[1] for entry in log if entry[0] == "built"}


def test_a_tuning_reads_again_the_features_an_older_liftpy_recorded(tmp_path):
    """Trials measured when liftpy read kernels otherwise (features of an older FEATURES_VERSION, or none) are
    featurised again by the builder before their task's search starts, and stored: the model learns from the
    device's whole history. Their measurements stay as they were."""
    from liftpy.tuning.features import FEATURES_VERSION, current
    from liftpy.tuning.program import ROUTE

    db = tmp_path / "t.sqlite"
    configs = task().space(FACTS).sample(3, seed=5)
    database = TuningDB(db)
    for i, config in enumerate(configs):
        stale = {"version": FEATURES_VERSION - 1, "reduction_updates": 1.0} if i else None
        database.record(task(), ROUTE, config, FakeRunner.device,
                        {"status": "ok", "cause": "", "time_ms": 1.0 + i, "times_ms": [1.0 + i], "max_error": 0.1,
                         "check_seed": 1, "memory_bytes": 1, "moved_bytes": None, "features": stale})
    database.close()
    assert not any(current(t.features) for t in rows(db))
    log = []
    builder = FeaturingBuilder(log, version=FEATURES_VERSION)
    with Tuner(db, runner=FakeRunner(log), builder=builder, progress=False, confirm=0) as tuner:
        tuner.tune([Slot(task())], 4)
    first_run = next(i for i, entry in enumerate(log) if entry[0] == "run")
    built_first = [entry[1] for entry in log[:first_run] if entry[0] == "built"]
    recorded = {config_key(t.config): t for t in rows(db)}
    for i, config in enumerate(configs):
        key = config_key(task().complete(config))
        assert key in built_first
        trial = recorded[key]
        assert current(trial.features) and trial.features["reduction_updates"] == landscape(config) * 1e6
        assert trial.time_ms == 1.0 + i


def test_a_prefilter_ranks_the_configurations_given_first_with_the_sample_but_the_first():
    """With a prefilter, a caller's guess (``first[0]``) is featurised whatever its figure, and the other
    configurations given first compete with the drawn sample for the pool: a search of a few trials featurises
    about as many candidates as its pool, not every configuration it is given."""
    from liftpy.tuning.strategy import ModelGuided

    featurised = []

    def featurise(configs):
        featurised.extend(configs)
        return [{"time": line_time(c)} for c in configs]

    first = [{"a": 99}, *({"a": a} for a in range(80, 96)), {"a": 37}]
    search = ModelGuided(LineSpace(), 4, 0, first, Oracle(), featurise, pool=4, climbs=0, drawn=8,
                         prefilter=lambda configs: [line_time(c) for c in configs])
    chosen = search.propose(2)
    assert len(featurised) == 1 + 4 + 1 and {"a": 99} in featurised and {"a": 37} in featurised
    assert chosen == [{"a": 99}, {"a": 37}]  # the anchor, then the best predicted


def test_a_prefilter_chooses_which_of_a_large_sample_are_featurised():
    """With a prefilter (a figure from the configuration alone), a model-guided search draws ``drawn``
    configurations and featurises only the ``pool`` best by it and a quarter as many others: generating a
    candidate is what costs, drawing one does not."""
    from liftpy.tuning.strategy import ModelGuided

    featurised = []

    def featurise(configs):
        featurised.extend(configs)
        return [{"time": line_time(c)} for c in configs]

    search = ModelGuided(LineSpace(), 10, 0, [], Oracle(), featurise, pool=8, climbs=0, drawn=60,
                         prefilter=lambda configs: [line_time(c) for c in configs])
    first, = search.propose(1)
    drawn = LineSpace().sample(60, seed=0)
    best_eight = sorted(drawn, key=line_time)[:8]
    assert len(featurised) == 8 + 2 and all(c in featurised for c in best_eight)
    assert first == best_eight[0]


BUILDS_THEN_WAITS = '''
import sys, time
from liftpy.device import Device
from liftpy.tuning import ProgramTask
from liftpy.tuning.builder import Build, LocalBuilder

if __name__ == "__main__":
    device = Device(name="a CPU", kind="cpu", compute_units=2, preferred_vector_width_float=8)
    task = ProgramTask.make(sys.argv[1], {"N": 1, "C": 4, "H": 6, "W": 6, "K": 4, "kernelHeight": 3,
                                          "kernelWidth": 3, "padSize": (1, 1, 1, 1), "stride": (1, 1)})
    builder = LocalBuilder(workers=1)
    builder.build([Build(task.portable(), device, task.complete(task.space(device).plain()))])[0].result()
    print(*builder.process_ids, flush=True)
    time.sleep(600)
'''


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an orphan's exit is reaped by whoever adopted it)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads processes' states from /proc")
def test_a_builders_processes_end_when_the_process_that_started_them_is_killed(tmp_path):
    """Killed (SIGKILL: nothing cleans up), a tuner leaves its builder processes waiting on their pool's queue,
    each holding its route spaces; each watches the process that started it and ends within seconds."""
    from .test_programs import PROGRAMS

    script = tmp_path / "builds_then_waits.py"
    script.write_text(BUILDS_THEN_WAITS)
    tuner = subprocess.Popen([sys.executable, str(script), str(PROGRAMS / "conv_bias_relu.lift")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        builders = [int(pid) for pid in tuner.stdout.readline().split()]
        assert builders, tuner.stderr.read() if tuner.poll() is not None else "no builder process started"
        assert all(_running(pid) for pid in builders)
        tuner.kill()
        tuner.wait()
        deadline = time.monotonic() + 20
        while any(_running(pid) for pid in builders) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_running(pid) for pid in builders)
    finally:
        tuner.kill()
