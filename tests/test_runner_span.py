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
