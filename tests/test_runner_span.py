"""The runner's protocol on a real device: rounds taken in turns go on for the span asked."""

import time

import liftpy.nn as nn
from liftpy.tuning import Batch, Build, LocalRunner, Timing
from liftpy.tuning.builder import build_candidate

SMALL = dict(input_shape=(8, 12, 12), kernel_shape=(8, 3, 3), stride=1, padding=1)


def test_a_batch_is_timed_in_rounds_for_at_least_its_span():
    task = nn.route_task(nn.make_layer(**SMALL)).portable()
    runner = LocalRunner()
    try:
        configs = task.space(runner.device_facts).starting_points()[:2]
        builts = tuple(build_candidate(Build(task, runner.device_facts, c)) for c in configs)
        short = [f.result() for f in runner.run(Batch(task, builts, 1, Timing(rounds=3, min_round_ms=1)))]
        start = time.perf_counter()
        long = [f.result() for f in runner.run(Batch(task, builts, 2, Timing(rounds=3, min_round_ms=1,
                                                                              min_span_ms=1500)))]
        seconds = time.perf_counter() - start
    finally:
        runner.close()
    assert [len(r["times_ms"]) for r in short] == [3, 3]
    assert all(r["status"] == "ok" for r in short + long)
    assert seconds >= 1.5 and len(long[0]["times_ms"]) == len(long[1]["times_ms"]) > 3  # in turns: as many each


def test_the_race_stops_the_rounds_of_candidates_far_behind_the_leader():
    # by numbers: a leader of 1.0 ms and a race of 2: 2.0 ms still runs, 2.1 ms does not; the task's best counts
    timing = Timing(race=2.0)
    assert timing.racing([1.0, 2.0, 2.1]) == [True, True, False]
    assert Timing(race=2.0, leader_ms=0.5).racing([1.0, 1.2]) == [True, False]
    assert Timing().racing([1.0, 9.0]) == [True, True]  # no race: every candidate takes every round

    task = nn.route_task(nn.make_layer(**SMALL)).portable()
    runner = LocalRunner()
    try:
        configs = task.space(runner.device_facts).starting_points()[:2]
        builts = tuple(build_candidate(Build(task, runner.device_facts, c)) for c in configs)
        # a best so far no kernel can come near: both are raced out after their first round
        raced = [f.result() for f in runner.run(Batch(task, builts, 1, Timing(rounds=4, min_round_ms=1, race=2.0,
                                                                               leader_ms=1e-9)))]
        kept = [f.result() for f in runner.run(Batch(task, builts, 1, Timing(rounds=4, min_round_ms=1,
                                                                             race=1e9)))]
    finally:
        runner.close()
    assert [len(r["times_ms"]) for r in raced] == [1, 1]
    assert all(r["status"] == "ok" and "over 2x the leader" in r["cause"] for r in raced)
    assert [len(r["times_ms"]) for r in kept] == [4, 4] and not any(r["cause"] for r in kept)
