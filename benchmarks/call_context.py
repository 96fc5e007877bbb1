"""What one prepared program's kernels take depending on what the process does around its calls.

    python benchmarks/call_context.py [--subjects vgg16.10,depthwise] [--rounds 4] [--out FILE]

Each subject (a VGG-16 layer or a program of examples/programs/ at benchmarks/programs.py's sizes) is compiled
at its route's default configuration and prepared; then, in rounds, its calls are timed (kernel events, and the
whole call) four ways: back to back; 0.3 s apart (the device's threads fall asleep between calls); each call
right after a numpy product of 512x512 matrices on every core (another library's thread pool, spinning after
its work); and the second of two calls after a 0.3 s pause. Medians and the 10th-90th percentiles.
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
from benchmarks.measure_noise import tasks  # noqa: E402
from benchmarks.vgg16 import machine_record  # noqa: E402
from liftpy.interpreter import random_inputs  # noqa: E402
from liftpy.tuning.guess import best_guess  # noqa: E402


def prepared(task):
    space = task.space()
    executable = liftpy.compile(space.lower(best_guess(task, space.device, space=space)), task.size_map, None,
                                task.function)
    inputs = random_inputs(task.load(), task.size_map, 1, task.function)
    constants = {n: inputs[n] for n in task.constants}
    return executable.prepare(constants), {k: v for k, v in inputs.items() if k not in constants}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", default="vgg16.10,conv1x1,depthwise")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out")
    args = parser.parse_args()
    lines = machine_record(None)
    print("\n".join(lines), flush=True)
    a = np.random.default_rng(0).random((512, 512), dtype=np.float32)

    def call(program, inputs):
        start = time.perf_counter()
        run = program.run(inputs)
        return run.kernel_ms, (time.perf_counter() - start) * 1e3

    def after_blas(program, inputs):
        for _ in range(20):
            a @ a
        return call(program, inputs)

    def apart(program, inputs):
        time.sleep(0.3)
        return call(program, inputs)

    def second_after_pause(program, inputs):
        time.sleep(0.3)
        call(program, inputs)
        return call(program, inputs)

    ways = {"back to back": (call, 20), "0.3 s apart": (apart, 10), "after numpy's BLAS": (after_blas, 10),
            "2nd call after 0.3 s": (second_after_pause, 10)}
    for name, task in tasks(args.subjects.split(",")):
        program, inputs = prepared(task)
        for _ in range(5):
            call(program, inputs)
        times = {way: [] for way in ways}
        for _ in range(args.rounds):
            for way, (how, count) in ways.items():
                times[way] += [how(program, inputs) for _ in range(count)]
        for way, measured in times.items():
            kernel, whole = [m[0] for m in measured], [m[1] for m in measured]
            line = (f"{name:12} {way:22} kernels median {statistics.median(kernel):8.3f} ms "
                    f"(p10 {np.percentile(kernel, 10):7.3f}, p90 {np.percentile(kernel, 90):7.3f}), whole call "
                    f"{statistics.median(whole):8.3f} ms")
            lines.append(line)
            print(line, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
