"""Copies a prepared layer's call can avoid on a CPU device: buffers over the caller's arrays (USE_HOST_PTR)
and a mapped read of the output, against uploading the images and reading the output back by copies.

    python benchmarks/zero_copy.py [--layers vgg16.0,vgg16.2,vgg16.10,vgg16.24] [--rounds 5] [--repeat 10]

Both ways run the same compiled kernels with the same weights, interleaved in rounds; each keeps the median
of its rounds' medians of the whole call and of its kernel events. The outputs must be identical.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import liftpy.nn as nn  # noqa: E402
from benchmarks.vgg16 import machine_record, publish  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="vgg16.0,vgg16.2,vgg16.10,vgg16.24")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", help="write the table and the machine record to this file")
    args = parser.parse_args()
    rows = []
    for index, name in enumerate(args.layers.split(",")):
        spec = nn.VGG16[name]
        x, w, b = spec.random_inputs(seed=index)
        plan = nn.plan(spec)
        ways = {"copies": plan.executable.prepare(plan.constants(w, b), zero_copy=False),
                "zero-copy": plan.executable.prepare(plan.constants(w, b), zero_copy=True)}
        outputs = {way: program.run({"input": x}).output for way, program in ways.items()}
        assert np.array_equal(outputs["copies"], outputs["zero-copy"])
        calls = {way: [] for way in ways}
        kernels = {way: [] for way in ways}
        for _ in range(args.rounds):
            for way, program in ways.items():
                time.sleep(0.2)
                whole, events = [], []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    result = program.run({"input": x})
                    whole.append((time.perf_counter() - start) * 1000)
                    events.append(result.kernel_ms)
                calls[way].append(statistics.median(whole))
                kernels[way].append(statistics.median(events))
        rows.append((name, {way: (statistics.median(calls[way]), statistics.median(kernels[way])) for way in ways}))
    lines = [f"{'layer':9} {'copies call':>11} {'kernels':>8} {'zero-copy call':>14} {'kernels':>8} "
             f"{'saved ms':>8}"]
    for name, measured in rows:
        (copy_call, copy_kernels), (zero_call, zero_kernels) = measured["copies"], measured["zero-copy"]
        lines.append(f"{name:9} {copy_call:11.2f} {copy_kernels:8.2f} {zero_call:14.2f} "
                     f"{zero_kernels:8.2f} {copy_call - zero_call:8.2f}")
    lines += ["", f"milliseconds, medians over {args.rounds} rounds of medians of {args.repeat} calls; the default "
                  "configuration of each layer", *machine_record(None),
              f"command: python benchmarks/zero_copy.py {' '.join(sys.argv[1:])}"]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
