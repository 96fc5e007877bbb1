"""Where a network's time goes: liftpy's steps beside ONNX Runtime's nodes, and each one's call beside its kernels.

    python benchmarks/network_breakdown.py resnet18.onnx --dbs rn.sqlite [--calls 30] [--out FILE]

liftpy runs the network prepared from the tuning database (the first of ``--dbs``); each step's time is its
kernels' span (the device's waits between its own kernels included), the median of ``--calls`` calls. ONNX
Runtime (CPU provider, a thread per core, not spinning) runs the same input with its profiler on: each node's
median over as many runs. Then both whole calls (numpy in, numpy out) in turns, and what liftpy's call spends
outside its steps' spans: the waits between steps and the host's copies. The two lists are not joined: ONNX
Runtime fuses and renames nodes its own way (a Conv, its ReLU and a residual Add are one node in NCHWc).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from network_ab import databases_parser, header, network_and_input  # noqa: E402


def onnx_runtime_nodes(model: Path, feed: str, x, calls: int, threads: int) -> list[tuple[str, str, float]]:
    """(node, operator, median ms) for each node ONNX Runtime ran, in the order it first ran them."""
    from networks import onnx_runtime_session

    with tempfile.TemporaryDirectory() as directory:
        session = onnx_runtime_session(model, threads, profile_prefix=str(Path(directory) / "ort"))
        for _ in range(10 + calls):
            session.run(None, {feed: x})
        events = json.loads(Path(session.end_profiling()).read_text())
    runs: dict[str, tuple[str, list[float]]] = {}
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            name = event["name"][: -len("_kernel_time")]
            runs.setdefault(name, (event["args"].get("op_name", "?"), []))[1].append(event["dur"] / 1e3)
    return [(name, op, statistics.median(times[10:] or times)) for name, (op, times) in runs.items()]


def whole_calls(calls: dict, rounds: int) -> dict[str, float]:
    """Each callable's median time over ``rounds`` rounds taken in turns, each timed call right after an untimed
    one (its threads awake, as in a stream of inferences)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            call()
            start = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = databases_parser(__doc__, rounds=30)
    parser.add_argument("--calls", type=int, default=30, help="calls for each step's and node's median")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out")
    args = parser.parse_args()
    from networks import onnx_runtime_session

    lines = [f"{header(args)}; ONNX Runtime {args.threads} threads, not spinning"]
    print(lines[-1], flush=True)
    net, name, x = network_and_input(args)
    prepared = net.prepare(db=args.dbs.split(",")[0])
    steps = prepared.timed({name: x}, args.calls)[1]  # each step's median kernel span
    width = min(max(len(step.name) for step in net.steps), 60)
    lines.append(f"liftpy: {len(net.steps)} steps, each its kernels' span (ms, median of {args.calls} calls)")
    for step, ms, program in zip(net.steps, steps, prepared.programs):
        if program is not None:
            label = step.name if len(step.name) <= width else "..." + step.name[-width + 3:]
            lines.append(f"  {label:<{width}}  {step.op:<20} {ms:8.3f}")
    nodes = onnx_runtime_nodes(Path(args.model), name, x, args.calls, args.threads)
    lines.append(f"ONNX Runtime: {len(nodes)} nodes (ms, median of {args.calls} runs, its profiler)")
    lines += [f"  {node[:width]:<{width}}  {op:<20} {ms:8.3f}" for node, op, ms in nodes]
    session = onnx_runtime_session(Path(args.model), args.threads)
    feed = session.get_inputs()[0].name
    whole = whole_calls({"liftpy": lambda: prepared.run({name: x}),
                         "onnxruntime": lambda: session.run(None, {feed: x})}, args.rounds)
    spans = sum(steps)
    lines.append(f"liftpy: whole call {whole['liftpy']:.3f} ms; its steps' spans {spans:.3f} ms; outside them "
                 f"{whole['liftpy'] - spans:.3f} ms (waits between steps, host copies)")
    lines.append(f"ONNX Runtime: whole call {whole['onnxruntime']:.3f} ms; its nodes {sum(n[2] for n in nodes):.3f} ms "
                 f"(profiled runs)")
    print("\n".join(lines[1:]), flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
