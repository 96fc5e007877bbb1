"""The C type of the kernels' loop indices, A/B: each example program's best configuration from a tuning
database compiled twice, with 32-bit loop indices and with the device's (64-bit on a CPU: see
``liftpy.device.Device.index_type``), both prepared, their whole calls timed interleaved with PyTorch's in one
run, and each first call checked against PyTorch's answer.

    python benchmarks/index_type_ab.py --db tuning.sqlite [--programs conv1x1,matmul] [--rounds 11]

The database is one ``benchmarks/programs.py --trials N --db ...`` wrote (every program of it tuned).
"""

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import liftpy  # noqa: E402
import liftpy.codegen.passes as passes  # noqa: E402
from benchmarks.programs import PROGRAMS, cases, relative_error, torch_threads  # noqa: E402
from benchmarks.vgg16 import machine_record, publish, quiesce, warm_up  # noqa: E402
from liftpy.rewrite.route import RouteSpace  # noqa: E402


def best_config(db: sqlite3.Connection, function: str) -> dict:
    """The fastest correct trial of the program whose function is ``function`` (the layer key names it)."""
    row = db.execute("SELECT config FROM trials WHERE layer LIKE ? AND status = 'ok' ORDER BY time_ms LIMIT 1",
                     (f"% {function} %",)).fetchone()
    if row is None:
        raise SystemExit(f"no correct trial of {function} in the database")
    return json.loads(row[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--programs", default="")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--out")
    args = parser.parse_args()
    record = machine_record(torch_threads())
    db = sqlite3.connect(args.db)
    table = cases(np.random.default_rng(0))
    names = args.programs.split(",") if args.programs else list(table)
    device_type = passes.index_type
    runs = []
    for name in names:
        sizes, constants, inputs, torch_call, _ = table[name]
        program = liftpy.load(PROGRAMS / f"{name}.lift")
        config = best_config(db, program.functions[-1].name)
        space = RouteSpace(program, sizes)
        expected = torch_call(inputs)
        for label, choose in (("int", lambda kernel, device: "int"), ("device's", device_type)):
            passes.index_type = choose
            try:
                run = liftpy.compile(space.lower(config), sizes).prepare(constants)
            finally:
                passes.index_type = device_type
            error = relative_error(run.run(inputs, poison=True).output, expected, f"{name} ({label})")
            print(f"{name} {label}: {config}, first call's error {error:.1e}", file=sys.stderr)
            runs.append((name, label, lambda run=run, inputs=inputs: run.run(inputs)))
        runs.append((name, "PyTorch", lambda call=torch_call, inputs=inputs: call(inputs)))
    samples: dict = {}
    for _ in range(args.rounds):
        for name, label, call in runs:
            quiesce()
            warm_up(call)
            calls, kernels = [], []
            for _ in range(args.repeat):
                start = time.perf_counter()
                result = call()
                calls.append((time.perf_counter() - start) * 1000)
                kernels.append(getattr(result, "kernel_ms", float("nan")))
            samples.setdefault((name, label), []).append((statistics.median(calls), statistics.median(kernels)))
    lines = [f"{'program':15} {'int: call ms':>12} {'kernels':>8} {'/PyTorch':>8}   "
             f"{'device: call ms':>15} {'kernels':>8} {'/PyTorch':>8}   {'PyTorch ms':>10}"]
    for name in names:
        theirs = statistics.median(c for c, _ in samples[(name, "PyTorch")])
        line = f"{name:15}"
        for label in ("int", "device's"):
            call = statistics.median(c for c, _ in samples[(name, label)])
            kernel = statistics.median(k for _, k in samples[(name, label)])
            line += f" {call:12.2f} {kernel:8.2f} {call / theirs:8.2f}  " + (" " * 6 if label == "int" else "")
        lines.append(line + f" {theirs:10.2f}")
    lines += ["", "int: every loop index 32-bit; device's: the device's type for sequential loops (long on a CPU), "
              "work-item indices int. Medians over "
              f"{args.rounds} rounds of medians of {args.repeat} calls; configurations: the best of {args.db}.",
              "", *record, f"command: python benchmarks/index_type_ab.py {' '.join(sys.argv[1:])}"]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
