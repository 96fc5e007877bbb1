"""Whole networks from ONNX: liftpy (tuned, on the default OpenCL device) against ONNX Runtime (CPU provider)
and PyTorch (eager), whole inferences -- numpy in, numpy out -- interleaved in one process.

The models are torchvision's with random weights, exported by ``benchmarks/export_models.py`` (run it first,
with any Python that has torch and torchvision). liftpy tunes each network's distinct tasks with one budget
(``--trials``, resumed from ``--db``), checks its first call step by step, and its output is compared with
ONNX Runtime's on the same input. PyTorch (optional: skipped where torch and torchvision are not installed) runs
torchvision's model with its own random weights: its time only. Each library uses one thread per core, and its
threads sleep once a call returns (ONNX Runtime's ``allow_spinning`` 0, PyTorch's ``OMP_WAIT_POLICY=PASSIVE``):
a pool left spinning keeps the cores busy for tens of milliseconds after its call and charges its spin to the
library called next (``benchmarks/results/networks-spinning-zen3.txt``).

    python benchmarks/networks.py --models benchmarks/models --trials 8 --db networks.sqlite

Prints per network the three medians of ``--rounds`` rounds (one call of each library a round, the order
rotated each round so that no library always follows the same one), each one's spread (the middle half of its
rounds over their median: the machine's noise), liftpy's ratio to ONNX Runtime, liftpy's device memory and ONNX
Runtime's peak resident memory (measured in a process of its own), and the tuning time. With ``--against DB``,
the network as another tuning database's picks make it runs in the same rounds too (an A/B of two tunings,
interleaved: two runs of this script differ by the machine's phases as much as by their tunings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

NETWORKS = ("resnet18", "vgg16", "mobilenet_v2", "squeezenet1_1")


def cpu_name() -> str:
    """The CPU's name with its family and model (a cloud machine's name alone hides its generation)."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().splitlines() if ":" in line)
    except OSError:
        return platform.processor()
    info = {key.strip(): value.strip() for key, value in info.items()}
    return f"{info.get('model name', '?')}, family {info.get('cpu family', '?')} model {info.get('model', '?')}"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        return "?"


def onnx_runtime_session(path: Path, threads: int, profile_prefix: str | None = None):
    """ONNX Runtime's CPU session of the model at ``path``: ``threads`` threads, not spinning between calls; with
    ``profile_prefix``, its profiler on, writing there."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if profile_prefix is not None:
        options.enable_profiling, options.profile_file_prefix = True, profile_prefix
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def torch_model(name: str, threads: int):
    """torchvision's model in eval mode, or None where torch or torchvision is missing."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when torch's OpenMP starts
    try:
        sys.path.insert(0, str(Path(__file__).parent))
        from export_models import _torchvision

        torch, torchvision = _torchvision()
    except ImportError:
        return None
    torch.set_num_threads(threads)
    model = getattr(torchvision.models, name)(weights=None).eval()

    def call(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return model(torch.from_numpy(x)).numpy()

    return call


def onnx_runtime_peak_mib(path: Path, batch: int, threads: int) -> float:
    """ONNX Runtime's peak resident memory for a session and 5 calls, above the process's once it has imported
    it: measured in a fresh process, the peak reset after the imports (Linux's clear_refs)."""
    script = f"""
import numpy as np, onnxruntime
def status(key):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key))
x = np.random.default_rng(0).standard_normal(({batch}, 3, 224, 224)).astype(np.float32)
before = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")
o = onnxruntime.SessionOptions(); o.intra_op_num_threads = {threads}
o.add_session_config_entry("session.intra_op.allow_spinning", "0")
s = onnxruntime.InferenceSession({str(path)!r}, o, providers=["CPUExecutionProvider"])
for _ in range(5): s.run(None, {{s.get_inputs()[0].name: x}})
print((status("VmHWM:") - before) / 1024)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    return float(out.stdout.strip()) if out.returncode == 0 else float("nan")


def main() -> None:
    import liftpy.onnx
    from liftpy.tuning.measure import spread
    from liftpy.tuning.tuner import STRATEGIES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="benchmarks/models", help="the .onnx files of export_models.py")
    parser.add_argument("--networks", default=",".join(NETWORKS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--trials", type=int, default=0,
                        help="tuning trials per distinct task of each network, given with one budget (0: none)")
    parser.add_argument("--db", default="networks.sqlite")
    parser.add_argument("--against", help="another tuning database: its picks run in the same rounds too")
    parser.add_argument("--search", choices=STRATEGIES, default="model",
                        help="the tuner's search strategy (liftpy tune --search)")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds, one call of each library")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()

    print(f"# {cpu_name()}, {os.cpu_count()} cores; liftpy {commit()}; batch {args.batch}; {args.rounds} rounds; "
          f"search {args.search}; "
          f"{args.threads} threads for ONNX Runtime and PyTorch, not spinning between calls")
    rows = []
    for name in args.networks.split(","):
        path = Path(args.models) / f"{name}.onnx"
        net = liftpy.onnx.load(path, batch=args.batch)
        tuning_s = 0.0
        if args.trials:
            start = time.perf_counter()
            net.tune(args.trials * len(net.tuning_groups()), args.db, strategy=args.search)
            tuning_s = time.perf_counter() - start
        prepared = net.prepare(db=args.db)
        x = np.random.default_rng(0).standard_normal(net.inputs[next(iter(net.inputs))]).astype(np.float32)
        feeds = {next(iter(net.inputs)): x}
        ours = prepared.run(feeds)[net.outputs[0]]  # checked step by step
        session = onnx_runtime_session(path, args.threads)
        theirs = session.run(None, {session.get_inputs()[0].name: x})[0]
        difference = float(np.abs(ours - theirs).max() / max(1.0, np.abs(theirs).max()))
        torch_call = torch_model(name, args.threads)
        kernels = []

        def ours():
            prepared.run(feeds, profile=True)
            kernels.append(sum(prepared.step_ms))

        calls = {"liftpy": ours, "onnxruntime": lambda: session.run(None, {session.get_inputs()[0].name: x})}
        if torch_call is not None:
            calls["pytorch"] = lambda: torch_call(x)
        times = {"liftpy": [], "onnxruntime": [], "pytorch": [], "against": []}
        if args.against:
            other = net.prepare(db=args.against)
            other.run(feeds)  # checked step by step
            calls["against"] = lambda: other.run(feeds)
        order = list(calls)
        for _ in range(args.rounds):  # one call of each, the first of the last round last: none always follows one
            for library in order:
                start = time.perf_counter()
                calls[library]()
                times[library].append((time.perf_counter() - start) * 1e3)
            order = order[1:] + order[:1]
        medians = {k: statistics.median(v) if v else float("nan") for k, v in times.items()}
        spreads = {k: spread(v) if v else float("nan") for k, v in times.items()}
        running = [step for i, step in enumerate(net.steps) if i not in prepared.elided]  # a kernel each
        tuned = sum(1 for step in running if step.task in prepared.bests)
        row = dict(network=name, batch=args.batch, liftpy_ms=medians["liftpy"], kernels_ms=statistics.median(kernels),
                   onnxruntime_ms=medians["onnxruntime"], pytorch_ms=medians["pytorch"],
                   ratio=medians["liftpy"] / medians["onnxruntime"], liftpy_device_mib=prepared.peak_bytes / 2**20,
                   onnxruntime_peak_mib=onnx_runtime_peak_mib(path, args.batch, args.threads),
                   tuning_s=tuning_s, trials=args.trials, steps=len(running), tuned_steps=tuned,
                   max_difference=difference, spreads=spreads)
        rows.append(row)
        print(f"{name:14} liftpy {row['liftpy_ms']:8.2f} ms (kernels {row['kernels_ms']:8.2f})  onnxruntime "
              f"{row['onnxruntime_ms']:8.2f} ms  pytorch {row['pytorch_ms']:8.2f} ms  liftpy/ort x{row['ratio']:.2f}  "
              f"spread liftpy {spreads['liftpy']:.0%} ort {spreads['onnxruntime']:.0%} "
              f"pytorch {spreads['pytorch']:.0%}  "
              f"memory liftpy {row['liftpy_device_mib']:.0f} MiB, ort {row['onnxruntime_peak_mib']:.0f} MiB  "
              f"tuning {tuning_s:.0f} s ({tuned}/{len(running)} steps tuned)  |liftpy-ort|/scale "
              f"{difference:.1e}", flush=True)
        if args.against:
            row["against_ms"] = medians["against"]
            print(f"{'':14} liftpy with {Path(args.against).name}'s picks {medians['against']:8.2f} ms  liftpy/ort "
                  f"x{medians['against'] / medians['onnxruntime']:.2f}  spread {spreads['against']:.0%}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
