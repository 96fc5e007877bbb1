"""How long a call takes to run at speed after the machine rests: the basis of programs.py's warm-up.

    python benchmarks/cold_start.py [--program conv_bias_relu] [--rests 10] [--rest 0.3] [--calls 30] [--out FILE]

A program of examples/programs/ (at benchmarks/programs.py's sizes, lowered with the route's default: no tuning
database needed) and PyTorch's equivalent are each called ``--calls`` times after each of ``--rests`` pauses of
``--rest`` seconds, taking turns; the table gives, by call index, the median over the rests of liftpy's kernel
events and whole call and of PyTorch's whole call. On the 2-core AMD EPYC VM, in a noisy hour, liftpy's
conv+bias+ReLU kernels took about 15 calls (30 ms) to settle after a 0.3 s rest and PyTorch one call, which is
why programs.py calls every method for 50 ms before timing it; in a quiet hour both settled after their first
call (benchmarks/results/cold-start-*.txt).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import liftpy  # noqa: E402
from benchmarks.programs import PROGRAMS, cases, relative_error, torch_threads  # noqa: E402
from benchmarks.vgg16 import machine_record, publish  # noqa: E402
from liftpy.tuning import ProgramTask  # noqa: E402
from liftpy.tuning.guess import best_guess  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", default="conv_bias_relu")
    parser.add_argument("--rests", type=int, default=10)
    parser.add_argument("--rest", type=float, default=0.3, help="seconds")
    parser.add_argument("--calls", type=int, default=30, help="calls after each rest")
    parser.add_argument("--out")
    args = parser.parse_args()
    threads = torch_threads()
    sizes, constants, inputs, torch_call, _ = cases(np.random.default_rng(0))[args.program]
    task = ProgramTask.make(PROGRAMS / f"{args.program}.lift", sizes, None, tuple(constants))
    space = task.space()
    config = best_guess(task, space.device, space=space)
    prepared = liftpy.compile(space.lower(config), sizes).prepare(constants)
    if torch_call is not None:
        relative_error(prepared.run(inputs, poison=True).output, torch_call(inputs), args.program)
    kernels = [[] for _ in range(args.calls)]
    calls = [[] for _ in range(args.calls)]
    theirs = [[] for _ in range(args.calls)]
    for _ in range(args.rests):
        time.sleep(args.rest)
        for i in range(args.calls):
            start = time.perf_counter()
            result = prepared.run(inputs)
            calls[i].append((time.perf_counter() - start) * 1000)
            kernels[i].append(result.kernel_ms)
        if torch_call is not None:
            time.sleep(args.rest)
            for i in range(args.calls):
                start = time.perf_counter()
                torch_call(inputs)
                theirs[i].append((time.perf_counter() - start) * 1000)
    lines = [f"{'call':>4} {'liftpy kernels ms':>17} {'liftpy call ms':>14} {'PyTorch call ms':>15}"]
    for i in range(args.calls):
        torch_ms = f"{statistics.median(theirs[i]):15.2f}" if theirs[i] else f"{'-':>15}"
        lines.append(f"{i + 1:4d} {statistics.median(kernels[i]):17.2f} {statistics.median(calls[i]):14.2f} {torch_ms}")
    lines += ["", f"{args.program}, the route's default configuration {config}; medians over {args.rests} rests of "
              f"{args.rest} s, by the call's index after the rest.", "", *machine_record(threads),
              f"command: python benchmarks/cold_start.py {' '.join(sys.argv[1:])}"]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
