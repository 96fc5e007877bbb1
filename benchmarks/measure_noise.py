"""How far apart the tuner's figures for one configuration land when it is measured again in a fresh worker.

    python benchmarks/measure_noise.py [--subjects vgg16.10,matmul] [--configs 3] [--workers 5] [--out FILE]

For each subject (VGG-16's conv layers and the programs of examples/programs/ at benchmarks/programs.py's
sizes), its route's first ``--configs`` starting points are built once, then measured ``--workers`` times,
each time by a fresh runner (a new worker process), under three protocols taken in turns:

- ``before``: the protocol of the tuner before the parts (a053b9f): each configuration alone, one warm-up
  call, then the median of 5 calls back to back;
- ``trial``: a search trial's, :class:`liftpy.tuning.Timing`'s default: the configurations of a batch timed
  together, 25 ms of warm-up, then 5 rounds of at least 25 ms each taken in turns, the median of the rounds;
- ``pick``: the confirmation's, which gives the figure the tuner reports for its pick: the same, the rounds
  going on in turns for CONFIRM_SPAN_MS (5 s).

It prints, per configuration, the median time and each protocol's spread: how far the workers' medians lie
from their median (the larger side, in %), and the worst over every configuration of 0.1 ms or more. Beside
them, the *host floor*: a fixed single-threaded numpy workload, no OpenCL, timed the pick's way in a fresh
process next to each worker, and its spread over the subject's workers: what the machine alone varies by in
the same minutes, which no timing protocol can take out of a figure.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.programs import PROGRAMS, cases  # noqa: E402
from benchmarks.vgg16 import machine_record  # noqa: E402
from liftpy.nn.conv import route_task  # noqa: E402
from liftpy.nn.layers import VGG16  # noqa: E402
from liftpy.runtime import device_info, get_device  # noqa: E402
from liftpy.tuning import Batch, Build, LocalRunner, ProgramTask, Timing  # noqa: E402
from liftpy.tuning.builder import build_candidate  # noqa: E402
from liftpy.tuning.guess import best_guess  # noqa: E402
from liftpy.tuning.runner import _HOST_THREADS  # noqa: E402
from liftpy.tuning.tuner import CONFIRM_SPAN_MS  # noqa: E402

PROTOCOLS = {  # (timing, configurations in one batch)
    "before": (Timing(rounds=5, min_round_ms=0, warmup_ms=1e-9), False),
    "trial": (Timing(), True),
    "pick": (Timing(min_span_ms=CONFIRM_SPAN_MS), True),
}


def tasks(names):
    table = cases(np.random.default_rng(0))
    for name in names:
        if name in VGG16:
            yield name, route_task(VGG16[name])
        else:
            sizes, constants = table[name][0], table[name][1]
            yield name, ProgramTask.make(PROGRAMS / f"{name}.lift", sizes, None, tuple(constants))


def measure(task, builts, timing, together, seed) -> list[float]:
    """Each configuration's median, measured by a fresh runner."""
    runner = LocalRunner()
    try:
        batches = [builts] if together else [[b] for b in builts]
        medians = []
        for i, part in enumerate(batches):
            results = [f.result() for f in runner.run(Batch(task, tuple(part), seed + i, timing))]
            for result in results:
                if result["status"] != "ok":
                    raise SystemExit(f"{task.describe()}: {result['status']}: {result.get('cause')}")
                medians.append(result["time_ms"])
        return medians
    finally:
        runner.close()


HOST_FLOOR = """
import statistics, sys, time
import numpy as np
a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
def round_ms():  # at least 25 ms of calls, as a round of the protocol
    calls, start = 0, time.perf_counter()
    while (time.perf_counter() - start) < 0.025:
        np.dot(a, a); calls += 1
    return (time.perf_counter() - start) * 1e3 / calls
for _ in range(3): round_ms()  # warm-up
rounds, start = [], time.perf_counter()
while (time.perf_counter() - start) * 1e3 < float(sys.argv[1]):
    rounds.append(round_ms())
print(statistics.median(rounds))
"""


def host_floor() -> float:
    """The median round of the fixed numpy workload over CONFIRM_SPAN_MS, in a fresh single-threaded process."""
    env = dict(os.environ, **{name: "1" for name in _HOST_THREADS})
    out = subprocess.run([sys.executable, "-c", HOST_FLOOR, str(CONFIRM_SPAN_MS)], env=env, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip())


def spread(values) -> float:
    """How far the values lie from their median, the larger side, as a share of it."""
    middle = statistics.median(values)
    return max(max(values) / middle - 1, 1 - min(values) / middle)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", default=",".join([*VGG16, *(p.stem for p in sorted(PROGRAMS.glob("*.lift")))]))
    parser.add_argument("--configs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    lines = machine_record(None)
    lines.append(f"protocols: before = each alone, 1 warm-up + median of 5 calls; trial = {Timing()}; pick = the "
                 f"same for at least {CONFIRM_SPAN_MS:g} ms")
    lines.append(f"{'subject':15} {'config':>6} {'median ms':>10} " + " ".join(f"{p + ' spread':>14}" for p in PROTOCOLS)
                 + f" {'host floor':>11}")
    print("\n".join(lines), flush=True)
    worst = {p: 0.0 for p in PROTOCOLS}
    worst_floor = 0.0
    start = time.perf_counter()
    for name, task in tasks(args.subjects.split(",")):
        portable = task.portable()
        space = task.space()
        facts = device_info(get_device(None))
        configs = [best_guess(task, facts, space=space)] + space.sample(args.configs - 1, seed=1)
        builts = [build_candidate(Build(portable, facts, c)) for c in configs]
        medians = {p: [[] for _ in configs] for p in PROTOCOLS}
        floors = []
        for worker in range(args.workers):
            floors.append(host_floor())
            order = list(PROTOCOLS) if worker % 2 == 0 else list(reversed(PROTOCOLS))
            for protocol in order:
                timing, together = PROTOCOLS[protocol]
                for i, m in enumerate(measure(portable, builts, timing, together, 1000 * worker)):
                    medians[protocol][i].append(m)
        for i in range(len(configs)):
            middle = statistics.median(medians["pick"][i])
            spreads = {p: spread(medians[p][i]) for p in PROTOCOLS}
            if middle >= 0.1:
                for p in PROTOCOLS:
                    worst[p] = max(worst[p], spreads[p])
            line = (f"{name:15} {i:>6} {middle:>10.3f} " + " ".join(f"{spreads[p] * 100:>13.1f}%" for p in PROTOCOLS)
                    + f" {spread(floors) * 100:>10.1f}%")
            worst_floor = max(worst_floor, spread(floors))
            lines.append(line)
            print(line, flush=True)
    lines.append("worst spread over the configurations of 0.1 ms or more: "
                 + ", ".join(f"{p} +-{worst[p] * 100:.1f}%" for p in PROTOCOLS)
                 + f"; the host floor +-{worst_floor * 100:.1f}%"
                 + f" ({time.perf_counter() - start:.0f} s)")
    print(lines[-1])
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
