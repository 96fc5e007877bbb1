"""VGG-16 as users pay for it: the nine unique layers, each called as a prepared layer, numpy in and numpy out,
against PyTorch's ``F.conv2d`` (padding inside the call), interleaved in rounds in one run.

    python benchmarks/vgg16.py [--trials 40] [--db tuning.sqlite] [--layers vgg16.2,vgg16.7] [--out FILE]

1. Tuning: the layers' programs (the direct one and, for a 3x3 layer of stride 1, Winograd's) with one budget
   of ``--trials`` per layer and program, which the task scheduler gives where the network's time gains the
   most (``nn.tune_layers``), resuming what the database holds.
2. The faster becomes an ``nn.Conv2d``, as a user's layer makes it; its first call is checked against the
   float64 reference.
3. Rounds: layer by layer, each method rests (``quiesce``), is warmed up (``warm_up``), then called ``--repeat``
   times -- liftpy's whole call timed, its kernel events summed beside -- and keeps the median of its rounds'
   medians: the machine's speed drifts, interleaving spreads it. Each round measures the device's FMA peak
   (``benchmarks/peak.py``); GFLOP/s are read against the fastest (one measurement alone read low in noisy
   phases: benchmarks/results/notes-tuning.md).

PyTorch runs with as many threads as the machine has cores, on the CPU unless ``--torch-device cuda``. The
naive OpenCL kernel (``--naive``) and CLBlast's im2col + GEMM (with pyclblast) are timed by their kernel events
only, as labelled. ``--out`` records every figure with the machine it was measured on; figures from two
machines are not comparable. The last run beside the retired hand-written pipelines:
``benchmarks/results/vgg16-route-vs-pipelines-c7939f9-zen4.txt``.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import liftpy  # noqa: E402
import liftpy.nn as nn  # noqa: E402
from benchmarks.baselines import clblast_conv, im2col_layer, naive_opencl, torch_layer  # noqa: E402
from benchmarks.peak import fma_peak  # noqa: E402
from liftpy.nn.reference import im2col_bytes  # noqa: E402
from liftpy.runtime import device_info, get_device  # noqa: E402
from liftpy.tuning import TuningDB  # noqa: E402

#: issue 15's target: the nine layers' whole calls together in at most this share of PyTorch's time
TARGET_OF_PYTORCH = 0.9


def quiesce(seconds: float = 0.3):
    """Let the previous measurement's library threads go idle: OpenBLAS, OpenMP and PyTorch threads spin after
    a call and slow whatever runs next on the cores."""
    time.sleep(seconds)


def warm_up(call, seconds: float = 0.05):
    """Call ``call()`` for ``seconds`` (at least once) before a method's calls are timed, the same for every
    method: after a pause a machine can take tens of milliseconds to run at speed again
    (benchmarks/cold_start.py measures it; benchmarks/results/notes-tuning.md)."""
    end = time.perf_counter() + seconds
    call()
    while time.perf_counter() < end:
        call()


def cpu_model() -> str:
    """The CPU's name with its family and model numbers (a hypervisor may show only "AMD EPYC")."""
    try:
        fields = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        return f"{fields['model name']} (family {fields['cpu family']}, model {fields['model']})"
    except (OSError, KeyError):
        return platform.processor() or platform.machine()


def commit() -> str:
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return head + (" (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else "")


def machine_record(torch_threads, torch_device="cpu") -> list[str]:
    """What the figures depend on, one fact a line."""
    info = device_info(get_device())
    try:
        import torch

        torch_text = f"PyTorch {torch.__version__}" + (f", {torch_threads} threads" if torch_threads else "")
        if torch_device != "cpu":
            torch_text += f"; its conv2d on {torch_device}: {torch.cuda.get_device_name(torch_device)}"
    except ImportError:
        torch_text = "PyTorch not installed"
    return [
        f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"commit: {commit()}",
        f"CPU: {cpu_model()}, {os.cpu_count()} cores",
        f"OpenCL: {info.platform} {info.driver}; device {info.name} ({info.kind}), {info.compute_units} compute units",
        torch_text,
        f"numpy {np.__version__}, Python {platform.python_version()}",
    ]


def time_liftpy(layer, x, repeat):
    """Medians of the whole call and of its kernel events over ``repeat`` calls."""
    calls, kernels = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        layer(x)
        calls.append((time.perf_counter() - start) * 1000)
        kernels.append(layer.last_run.kernel_ms)
    return statistics.median(calls), statistics.median(kernels)


def time_call(call, x, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call(x)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40,
                        help="trials per layer and program (already measured ones count; 0: no tuning, the "
                             "database's picks, and a layer it does not know runs the cost model's guess)")
    parser.add_argument("--db", default="tuning.sqlite")
    parser.add_argument("--layers", default=",".join(nn.VGG16))
    parser.add_argument("--repeat", type=int, default=10, help="timed calls per method, layer and round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of measurements (medians over rounds)")
    parser.add_argument("--naive", action="store_true", help="also time the naive OpenCL kernel (seconds per layer)")
    parser.add_argument("--torch-device", default="cpu",
                        help="where PyTorch's conv2d runs: cpu, or cuda on a machine whose GPU liftpy runs on "
                             "through OpenCL (numpy in and out either way)")
    parser.add_argument("--out", help="write the table and the machine record to this file")
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(os.cpu_count())
        torch_threads = torch.get_num_threads()
    except ImportError:
        torch_threads = None
    record = machine_record(torch_threads, args.torch_device)
    print("\n".join(record), file=sys.stderr)
    device = device_info(get_device()).name
    names = args.layers.split(",")
    if args.trials:  # --trials 0: the database as it is (building a space takes minutes)
        print(f"tuning {len(names)} layers through the automatic route ({args.trials} trials per layer and "
              "program, one budget)...", file=sys.stderr)
        start = time.perf_counter()
        nn.tune_layers(names, trials=args.trials, db=args.db)
        print(f"tuned in {time.perf_counter() - start:.0f} s", file=sys.stderr)

    layers = []
    database = TuningDB(args.db)
    for index, name in enumerate(names):
        spec = nn.VGG16[name]
        x, w, b = spec.random_inputs(seed=index)
        known = nn.conv.best_in_database(database, spec, device)
        tried = sum(len(database.trials(stage, device))
                    for _, task in nn.conv.layer_tasks(spec) for stage in task.stages())
        layer = nn.Conv2d(w, b, spec.stride, spec.padding, db=args.db, input_shape=x.shape)
        assert known is None or layer.plans[0].algorithm == known.name
        layer(x)  # the first call is checked against the float64 reference
        assert layer.last_run.max_error is not None and layer.last_run.max_error <= 1
        methods = {"PyTorch": torch_layer(w, b, spec.stride, spec.padding, args.torch_device),
                   "numpy im2col": im2col_layer(w, b, spec.stride, spec.padding)}
        methods = {k: v for k, v in methods.items() if v is not None}
        for call in methods.values():
            call(x)  # warm-up (PyTorch picks its algorithm, numpy touches its buffers)
        layers.append((name, spec, tried, layer, methods, (x, w, b), known.time_ms if known else None))
    database.close()

    calls: dict[tuple[str, str], list[float]] = {}
    peaks = []  # the ceiling the GFLOP/s are read against: the FMA loop's fastest, measured in every round
    for round_ in range(args.rounds):
        quiesce()
        peaks.append(fma_peak())
        for name, spec, tried, layer, methods, (x, w, b), _ in layers:
            measured = {}
            quiesce()
            warm_up(lambda: layer(x))
            measured["liftpy call"], measured["liftpy kernels"] = time_liftpy(layer, x, args.repeat)
            for method, call in methods.items():
                quiesce()
                warm_up(lambda: call(x))
                measured[method] = time_call(call, x, args.repeat if method == "PyTorch" else 3)
            if round_ == 0:  # kernel events only, labelled so; seconds a layer for the naive kernel
                if args.naive:
                    quiesce()
                    measured["naive OpenCL (kernels)"] = naive_opencl(x, w, b, spec.stride, spec.padding, repeat=1)[1]
                quiesce()
                measured["CLBlast im2col+GEMM (kernels)"] = clblast_conv(x, w, b, spec.stride, spec.padding)[1]
            for method, ms in measured.items():
                if ms is not None:
                    calls.setdefault((name, method), []).append(ms)
            print(f"round {round_ + 1}/{args.rounds} {name}: "
                  + ", ".join(f"{k} {v:.2f} ms" for k, v in measured.items() if v is not None), file=sys.stderr)

    median = {key: statistics.median(values) for key, values in calls.items()}
    peak = max(peaks)
    baselines = [m for m in ("PyTorch", "numpy im2col", "naive OpenCL (kernels)", "CLBlast im2col+GEMM (kernels)")
                 if any((name, m) in median for name, *_ in layers)]
    lines = [f"{'layer':9} {'algorithm':9} {'trials':>6} {'call ms':>8} {'kernels ms':>10} {'tuner ms':>8} "
             f"{'kern/tuner':>10} {'call/kern':>9} "
             f"{'GFLOP/s':>8} {'MiB':>6} {'mem ratio':>9} {'of peak':>7}"
             + "".join(f" {m + ' ms':>{len(m) + 4}} {'ratio':>6}" for m in baselines)]
    totals = {kind: 0.0 for kind in ("call", "kernels", *baselines)}
    database = TuningDB(args.db)
    for name, spec, tried, layer, methods, _, tuner_ms in layers:
        call_ms, kernel_ms = median[name, "liftpy call"], median[name, "liftpy kernels"]
        totals["call"] += call_ms
        totals["kernels"] += kernel_ms
        memory = layer.plans[0].memory_bytes
        im2col = im2col_bytes(spec.batch, spec.channels, spec.height, spec.width, spec.kernels,
                              spec.kernel_height, spec.kernel_width, spec.out_height, spec.out_width)
        gflops = spec.flops / call_ms / 1e6
        tuner_cells = (f"{tuner_ms:8.2f} {kernel_ms / tuner_ms:10.2f}" if tuner_ms
                       else f"{'guess':>8} {'-':>10}")  # untuned: the cost model's guess runs
        line = (f"{name:9} {layer.plans[0].algorithm:9} {tried:6} {call_ms:8.2f} {kernel_ms:10.2f} {tuner_cells} "
                f"{call_ms / kernel_ms:9.3f} {gflops:8.1f} {memory / 2**20:6.1f} {im2col / memory:9.2f} "
                f"{gflops / peak:7.2f}")
        for m in baselines:
            ms = median.get((name, m))
            if ms is None:
                line += f" {'-':>{len(m) + 4}} {'-':>6}"
                continue
            totals[m] += ms
            line += f" {ms:{len(m) + 4}.2f} {ms / call_ms:6.2f}"
        lines.append(line)
        database.record_baseline(spec, device, "liftpy call", call_ms, memory)  # beside its kernel events
        for m in baselines:
            if (name, m) in median:
                database.record_baseline(spec, device, m, median[name, m], None)
    database.close()
    call, kernels = totals["call"], totals["kernels"]
    flops = sum(spec.flops for _, spec, *_ in layers)
    gflops = {"liftpy whole calls": flops / call / 1e6, "liftpy kernels": flops / kernels / 1e6}
    if "PyTorch" in baselines:
        gflops["PyTorch"] = flops / totals["PyTorch"] / 1e6
    tuned = [layer for layer in layers if layer[-1]]
    tuner, tuned_kernels = sum(layer[-1] for layer in tuned), sum(median[layer[0], "liftpy kernels"] for layer in tuned)
    tuner_total = (f"{tuner:8.2f} {tuned_kernels / tuner:10.2f}" if len(tuned) == len(layers)
                   else f"{'-':>8} {'-':>10}")
    lines.append(f"{'total':9} {'':9} {'':6} {call:8.2f} {kernels:10.2f} {tuner_total} "
                 f"{call / kernels:9.3f} "
                 f"{gflops['liftpy whole calls']:8.1f} {'':6} {'':9} {gflops['liftpy whole calls'] / peak:7.2f}"
                 + "".join(f" {totals[m]:{len(m) + 4}.2f} {totals[m] / call:6.2f}" for m in baselines))
    rates = ", ".join(f"{label} {rate:.1f} GFLOP/s ({rate / peak:.0%})" for label, rate in gflops.items())
    if "PyTorch" in gflops:  # what the target x0.9 of PyTorch's time asks of this run's machine
        asked = gflops["PyTorch"] / TARGET_OF_PYTORCH
        rates += (f". x{TARGET_OF_PYTORCH} of PyTorch's time asks liftpy's whole calls for {asked:.1f} GFLOP/s "
                  f"({asked / peak:.0%} of the peak)")
    lines += [
        "",
        "liftpy: the layer's high-level program (liftpy/nn/conv2d.lift: direct; conv2d_winograd.lift: winograd)",
        "through the automatic route, the faster's best configuration in the tuning database (trials: both programs',",
        "there). call ms: liftpy's whole call, layer(x) on a prepared",
        "nn.Conv2d, numpy in and numpy out; kernels ms: the sum of its kernels' profiling events in the same calls;",
        "tuner ms: the tuner's figure for its pick (the database's; 'guess': untuned, the cost model's guess runs),",
        "kern/tuner: what the calls' kernels took against it;",
        "call/kern: their ratio; GFLOP/s from the whole call; ratio = baseline's time / liftpy's whole call (higher:",
        "liftpy faster). PyTorch and numpy are whole calls (numpy in, numpy out, padding inside); '(kernels)'",
        "baselines are kernel events only. mem ratio = im2col+GEMM bytes / liftpy's bytes. Medians over",
        f"{args.rounds} rounds of medians of {args.repeat} calls (numpy: 3; kernel-event baselines: first round only),",
        "each method called for 50 ms first. Total row: sums. of peak = liftpy's whole-call GFLOP/s / the FMA peak.",
        "GFLOP/s count the direct sum's multiply-adds: Winograd's program makes fewer, its rate is an effective one",
        "(above the FMA peak where it is fastest).",
        "",
        f"FMA peak: {peak:.1f} GFLOP/s (benchmarks/peak.py's hand-written loop, its fastest over the rounds; the",
        f"rounds' median {statistics.median(peaks):.1f}). Over these layers: {rates}",
        "",
        *record,
        f"command: python benchmarks/vgg16.py {' '.join(sys.argv[1:])}",
    ]
    publish(lines, args.out)


def publish(lines: list[str], out: str | None) -> None:
    """Print a results table, and write it to ``out`` when given."""
    text = "\n".join(lines)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


if __name__ == "__main__":
    main()
