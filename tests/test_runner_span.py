"""The runner's protocol on a real device: rounds taken in turns go on for the span asked; PoCL's worker threads
pinned, one to each CPU."""

import os
import subprocess
import sys
import time

import pytest

import liftpy.nn as nn
from liftpy.tuning import Batch, Build, LocalRunner, Timing
from liftpy.tuning.builder import build_candidate
from .route_configs import example_configs

SMALL = dict(input_shape=(8, 12, 12), kernel_shape=(8, 3, 3), stride=1, padding=1)


def test_a_batch_is_timed_in_rounds_for_at_least_its_span():
    task = nn.route_task(nn.make_layer(**SMALL)).portable()
    runner = LocalRunner()
    try:
        configs = example_configs(task.space(runner.device_facts))[:2]
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


def test_no_candidate_is_timed_while_the_tuners_own_process_computes():
    """LocalRunner.host_work: the tuner ranking candidates or a model learning took one of 2 cores from the
    kernels being timed (a batch's first rounds 1.5-2x its later ones); a batch waits to be timed until the
    block ends, and is timed then."""
    task = nn.route_task(nn.make_layer(**SMALL)).portable()
    runner = LocalRunner()
    try:
        configs = example_configs(task.space(runner.device_facts))[:2]
        builts = tuple(build_candidate(Build(task, runner.device_facts, c)) for c in configs)
        timing = Timing(rounds=3, min_round_ms=1)
        [f.result() for f in runner.run(Batch(task, builts, 1, timing))]  # the worker started, its reference made
        start = time.perf_counter()
        [f.result() for f in runner.run(Batch(task, builts, 2, timing))]
        alone = time.perf_counter() - start
        with runner.host_work():
            futures = runner.run(Batch(task, builts, 3, timing))
            time.sleep(max(3.0, 10 * alone))  # checked, then held back: not timed while the block runs
            waiting = [f.done() for f in futures]
        results = [f.result(timeout=60) for f in futures]
    finally:
        runner.close()
    assert waiting == [False, False]
    assert all(r["status"] == "ok" and len(r["times_ms"]) == 3 for r in results)


def test_the_cutoff_judges_the_warm_ups_fastest_call_not_the_checked_run(monkeypatch):
    """The checked run shares the machine with the builders compiling the next batch, and a single call can meet
    the device's threads waking up: a tuning cut candidates by such a call that, measured again, were within
    1.25x of their task's best. Here the checked (poisoned) run and the first call after it report 1000 ms more
    than they took: the candidates still get their rounds; a cutoff no call meets times them once."""
    from liftpy.runtime import PreparedProgram, device_info, get_device
    from liftpy.tuning.runner import measure_batch

    class Slowed:
        def __init__(self, run):
            self._run = run

        def __getattr__(self, name):
            return getattr(self._run, name)

        @property
        def runs_ms(self):
            return (self._run.runs_ms[0] + 1000.0, *self._run.runs_ms[1:])

        @property
        def kernel_ms(self):
            return self._run.kernel_ms + 1000.0

    run, seen = PreparedProgram.run, {}

    def slowed_at_first(self, inputs=None, *args, poison=False, **kwargs):
        result = run(self, inputs, *args, poison=poison, **kwargs)
        seen[id(self)] = seen.get(id(self), 0) + 1
        return Slowed(result) if seen[id(self)] <= 2 else result  # the check, then the warm-up's first call

    monkeypatch.setattr(PreparedProgram, "run", slowed_at_first)
    task = nn.route_task(nn.make_layer(**SMALL)).portable()
    device = get_device()
    facts = device_info(device)
    builts = tuple(build_candidate(Build(task, facts, c)) for c in example_configs(task.space(facts))[:2])
    kept = measure_batch(Batch(task, builts, 1, Timing(rounds=3, min_round_ms=1, cutoff_ms=100.0)), device)
    seen.clear()
    cut = measure_batch(Batch(task, builts, 1, Timing(rounds=3, min_round_ms=1, cutoff_ms=1e-9)), device)
    assert all(r["status"] == "ok" and len(r["times_ms"]) == 3 and r["time_ms"] < 100 for r in kept.values())
    assert all(r["status"] == "ok" and len(r["times_ms"]) == 1 and r["time_ms"] < 100
               and r["cause"] == "timed once: far slower than the best" for r in cut.values())


def test_the_race_stops_the_rounds_of_candidates_far_behind_the_leader():
    # by numbers: a leader of 1.0 ms and a race of 2: 2.0 ms still runs, 2.1 ms does not; the task's best counts
    timing = Timing(race=2.0)
    assert timing.racing([1.0, 2.0, 2.1]) == [True, True, False]
    assert Timing(race=2.0, leader_ms=0.5).racing([1.0, 1.2]) == [True, False]
    assert Timing().racing([1.0, 9.0]) == [True, True]  # no race: every candidate takes every round

    task = nn.route_task(nn.make_layer(**SMALL)).portable()
    runner = LocalRunner()
    try:
        configs = example_configs(task.space(runner.device_facts))[:2]
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


def test_a_cold_batch_runs_each_call_after_a_copy_through_the_devices_caches():
    """Timing(cold=True): a CacheFlush copies half the device's cache size, what it holds; a batch timed cold
    gets its rounds (that each call runs after it: the next test)."""
    import numpy as np
    import pyopencl as cl

    from liftpy.runtime import CacheFlush, get_device

    device = get_device()
    flush = CacheFlush(device)
    assert flush.bytes == max(4096, (device.global_mem_cache_size or CacheFlush.DEFAULT_CACHE_BYTES) // 2)
    assert flush.ms > 0
    pattern = np.arange(flush.bytes // 4, dtype=np.float32)
    cl.enqueue_copy(flush.queue, flush._source, pattern)
    flush().wait()
    copied = np.empty_like(pattern)
    cl.enqueue_copy(flush.queue, copied, flush._target)
    assert np.array_equal(copied, pattern)

    task = nn.route_task(nn.make_layer(**SMALL)).portable()
    runner = LocalRunner()
    try:
        configs = example_configs(task.space(runner.device_facts))[:2]
        builts = tuple(build_candidate(Build(task, runner.device_facts, c)) for c in configs)
        cold = [f.result() for f in runner.run(Batch(task, builts, 1, Timing(rounds=3, min_round_ms=1, cold=True)))]
    finally:
        runner.close()
    assert all(r["status"] == "ok" and len(r["times_ms"]) == 3 and r["time_ms"] > 0 for r in cold)


def test_a_cold_call_is_flushed_and_its_inputs_written_again_before_each_run_and_stays_right(monkeypatch):
    import numpy as np

    import liftpy
    from liftpy.runtime import CacheFlush, get_device

    exe = liftpy.compile(liftpy.parse("def f(xs: [float]_n) = mapGlb(0)(x -> x * 2.0f, xs)"), {"n": 1000})
    flush = CacheFlush(get_device())
    told = []
    monkeypatch.setattr(CacheFlush, "__call__", lambda self, inputs=(): told.append(len(inputs)))
    for zero_copy in (False, True):
        told.clear()
        prepared = exe.prepare(zero_copy=zero_copy)
        xs = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
        result = prepared.run({"xs": xs}, repeat=3, warmup=2, cold=flush)
        assert told == [1] * 5 and len(result.runs_ms) == 3
        np.testing.assert_array_equal(result.output, xs * 2)
    monkeypatch.undo()
    ys = np.random.default_rng(4).standard_normal(1000).astype(np.float32)
    for zero_copy in (False, True):  # the inputs written again from a copy of what this call gave
        np.testing.assert_array_equal(exe.prepare(zero_copy=zero_copy).run({"xs": ys}, repeat=2, cold=flush).output,
                                      ys * 2)


def test_pocl_is_asked_to_pin_its_threads_only_where_the_process_may_use_every_cpu(monkeypatch):
    from liftpy import runtime

    cpus = os.cpu_count()
    monkeypatch.delenv("POCL_AFFINITY", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)))
    runtime._pin_pocl_threads()
    assert os.environ["POCL_AFFINITY"] == "1"
    monkeypatch.setenv("POCL_AFFINITY", "0")  # the user's choice stays
    runtime._pin_pocl_threads()
    assert os.environ["POCL_AFFINITY"] == "0"
    monkeypatch.delenv("POCL_AFFINITY")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(1, cpus + 1)))  # CPU 0 not ours
    runtime._pin_pocl_threads()
    assert "POCL_AFFINITY" not in os.environ


PINNED = """
import os, sys
from liftpy.runtime import device_info, get_device
import liftpy.nn as nn
facts = device_info(get_device(None))
if "pthread" not in facts.name or os.cpu_count() < 2 or os.sched_getaffinity(0) != set(range(os.cpu_count())):
    print("not pocl"); sys.exit(0)
import numpy as np
nn.Conv2d(np.ones((4, 4, 3, 3), np.float32), padding=1)(np.ones((1, 4, 8, 8), np.float32))
single = []
for task in os.listdir("/proc/self/task"):
    for line in open(f"/proc/self/task/{task}/status"):
        if line.startswith("Cpus_allowed_list:"):
            allowed = line.split()[1]
            if allowed.isdigit():
                single.append(int(allowed))
print(os.environ.get("POCL_AFFINITY"), sorted(single))
"""


def test_a_process_running_kernels_on_pocl_has_one_worker_thread_pinned_to_each_cpu():
    """Read from Linux, not from liftpy: after a kernel ran, the process's threads allowed on one CPU alone are
    PoCL's workers, one on each CPU."""
    out = subprocess.run([sys.executable, "-c", PINNED], capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "POCL_AFFINITY"})
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "not pocl":
        pytest.skip("the device is not PoCL's CPU device, or the process may not use every CPU, or there is one")
    setting, single = out.stdout.split(" ", 1)
    assert setting == "1"
    assert single.strip() == str(list(range(os.cpu_count())))
