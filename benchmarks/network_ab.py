"""One network prepared from several tuning databases (two tunings, or one before and after a change to how
liftpy reads them), against ONNX Runtime: whole calls (numpy in, numpy out) interleaved in one process.

    python benchmarks/network_ab.py benchmarks/models/resnet18.onnx --dbs before.sqlite,after.sqlite --rounds 60

Each round calls every contestant once, the order rotated round by round so that none always follows the same
one; each prepared network's first call is checked step by step. Prints each one's median and quartiles, its
ratio to ONNX Runtime's median, and per database how many of the network's tuned steps run Winograd's program.
Nothing is tuned: the databases are only read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from networks import commit, cpu_name, onnx_runtime_session  # noqa: E402


def databases_parser(doc: str, rounds: int) -> argparse.ArgumentParser:
    """The arguments of a comparison of tuning databases on one network (this script's, network_steps.py's)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("model", help="an .onnx file (benchmarks/export_models.py)")
    parser.add_argument("--dbs", required=True, help="tuning databases, comma-separated")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=rounds)
    return parser


def header(args) -> str:
    """The first line of a comparison's output: the machine, the commit, the network and the rounds."""
    return (f"# {cpu_name()}, {os.cpu_count()} cores; liftpy {commit()}; {Path(args.model).name}, batch {args.batch}; "
            f"{args.rounds} rounds")


def network_and_input(args):
    """The network of ``args.model`` at ``args.batch``, its input's name, and an input drawn at seed 0."""
    import liftpy.onnx

    net = liftpy.onnx.load(args.model, batch=args.batch)
    name = next(iter(net.inputs))
    return net, name, np.random.default_rng(0).standard_normal(net.inputs[name]).astype(np.float32)


def main() -> None:
    parser = databases_parser(__doc__, rounds=60)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()

    print(f"{header(args)}; ONNX Runtime {args.threads} threads, not spinning between calls", flush=True)
    net, name, x = network_and_input(args)
    calls = {}
    for db in args.dbs.split(","):
        prepared = net.prepare(db=db)
        prepared.run({name: x})  # checked step by step
        winograd = sum(1 for best in prepared.bests.values() if best.name == "winograd")
        print(f"# {db}: {len(prepared.bests)} distinct tasks tuned, {winograd} of them run Winograd's program")
        calls[db] = lambda p=prepared: p.run({name: x})
    session = onnx_runtime_session(Path(args.model), args.threads)
    feed = session.get_inputs()[0].name
    calls["onnxruntime"] = lambda: session.run(None, {feed: x})
    for call in calls.values():
        for _ in range(5):
            call()
    times: dict[str, list[float]] = {key: [] for key in calls}
    keys = list(calls)
    for r in range(args.rounds):
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            start = time.perf_counter()
            calls[key]()
            times[key].append((time.perf_counter() - start) * 1e3)
    baseline = statistics.median(times["onnxruntime"])
    for key, values in times.items():
        q1, q3 = np.percentile(values, [25, 75])
        print(f"{key:<40} median {statistics.median(values):8.3f} ms (quartiles {q1:.3f}-{q3:.3f}), "
              f"x{statistics.median(values) / baseline:.3f} of ONNX Runtime")


if __name__ == "__main__":
    main()
