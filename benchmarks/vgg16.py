"""VGG-16 end to end: tune each of the nine unique layers (or reuse the tuning database) and compare the
best configuration with every baseline measured in the same run, layer by layer and in total.

    python benchmarks/vgg16.py [--trials 30] [--db tuning.sqlite] [--layers vgg16.2,vgg16.7]

Baselines (benchmarks/baselines.py, hand-written and labelled): the naive direct OpenCL convolution on the
same device, numpy im2col + GEMM, PyTorch's CPU conv2d when torch is installed, and CLBlast's GEMM after a
hand-written im2col kernel on the same device when pyclblast is installed. They are stored in the database
too, so `liftpy report --db tuning.sqlite --network vgg16` shows them.

The CLBlast baseline is optional (the `bench` extra); to get it on Debian:

    apt-get install libclblast-dev
    pip install pyclblast        # or: pip install -e .[bench]
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
import liftpy.nn as nn  # noqa: E402
from benchmarks.baselines import clblast_conv, clblast_conv_bytes, im2col_gemm, naive_opencl, torch_conv2d  # noqa: E402
from liftpy.nn.reference import im2col_bytes  # noqa: E402
from liftpy.runtime import device_info, get_device  # noqa: E402
from liftpy.tuning import TuningDB  # noqa: E402


def quiesce(seconds: float = 0.5):
    """Let the previous measurement's library threads go idle: OpenBLAS and OpenMP threads spin after a call
    and slow whatever runs next on the two cores by up to 2x."""
    time.sleep(seconds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=30, help="trials per layer (already measured ones count)")
    parser.add_argument("--db", default="tuning.sqlite")
    parser.add_argument("--layers", default=",".join(nn.VGG16))
    parser.add_argument("--algorithm", default=None, help="pipelines to tune, comma-separated (default: the tuner's)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs of liftpy's best and of PyTorch (medians)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of measurements (medians over rounds)")
    args = parser.parse_args()
    device = device_info(get_device()).name
    names = args.layers.split(",")
    for name in names:  # 1. tuning (resumes: configurations already in the database are not measured again)
        print(f"{name}: tuning ({args.trials} trials)...", file=sys.stderr)
        liftpy.tune(nn.VGG16[name], trials=args.trials, db=args.db, algorithm=args.algorithm)
    rng = np.random.default_rng(0)
    layers = []
    for name in names:  # 2. liftpy's best configuration, and every baseline, measured in this run
        layer = nn.VGG16[name]
        database = TuningDB(args.db)
        best = database.best(layer, device)
        tried = len(database.trials(layer, device))
        database.close()
        x = rng.standard_normal((1, layer.channels, layer.height, layer.width)).astype(np.float32)
        w = (rng.standard_normal((layer.kernels, layer.channels, 3, 3)) / np.sqrt(9 * layer.channels)).astype(np.float32)
        b = rng.standard_normal(layer.kernels).astype(np.float32)
        plan = nn.plan(layer, best.config, algorithm=best.algorithm)
        plan.run(x, w, b, check=True)  # checked against the reference before it is timed
        layers.append((name, layer, best, tried, plan, (x, w, b)))
    # The machine's speed drifts (other tenants, library threads): every method is measured once per round,
    # layer by layer, and each keeps the median of its rounds' medians.
    times: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        for name, layer, best, tried, plan, (x, w, b) in layers:
            measured = {}
            quiesce()
            measured["liftpy"] = statistics.median(plan.run(x, w, b, repeat=args.repeat, warmup=2).runs_ms)
            if round_ == 0:  # seconds per layer; its ratios are large enough for one round
                quiesce()
                _, measured["naive OpenCL"] = naive_opencl(x, w, b, layer.stride, layer.padding, repeat=1)
            quiesce()
            _, measured["numpy im2col"] = im2col_gemm(x, w, b, layer.stride, layer.padding, repeat=5)
            quiesce()
            _, measured["PyTorch"] = torch_conv2d(x, w, b, layer.stride, layer.padding, repeat=args.repeat)
            quiesce()
            _, measured["CLBlast im2col+GEMM"] = clblast_conv(x, w, b, layer.stride, layer.padding)
            for method, ms in measured.items():
                if ms is not None:  # None: an optional baseline's library is missing
                    times.setdefault((name, method), []).append(ms)
            print(f"round {round_ + 1}/{args.rounds} {name}: "
                  + ", ".join(f"{k} {v:.2f} ms" for k, v in measured.items() if v is not None), file=sys.stderr)
    rows = []
    for name, layer, best, tried, plan, (x, w, b) in layers:
        baselines = {method: statistics.median(ts) for (n, method), ts in times.items()
                     if n == name and method != "liftpy"}
        database = TuningDB(args.db)
        for baseline, ms in baselines.items():
            memory = (clblast_conv_bytes(x.shape, w.shape, layer.stride, layer.padding)
                      if baseline.startswith("CLBlast") else None)
            database.record_baseline(layer, device, baseline, ms, memory)
        database.close()
        rows.append((name, layer, best, statistics.median(times[name, "liftpy"]), plan.memory_bytes, tried,
                     baselines))
    columns = list(rows[0][6])
    width = {c: max(16, len(c) + 3) for c in columns}  # "CLBlast im2col+GEMM ms" is wider than 16
    pw = max(8, *(len(r[2].algorithm) for r in rows))  # the pipeline column
    print(f"{'layer':9} {'trials':>6} {'pipeline':>{pw}} {'liftpy ms':>9} {'GFLOP/s':>8} {'MiB':>6} {'im2col MiB':>10} "
          f"{'mem ratio':>9} {'work ratio':>10}" + "".join(f" {c + ' ms':>{width[c]}} {'ratio':>6}" for c in columns))
    totals = {c: 0.0 for c in columns}
    total = 0.0
    memory_ratios, workspace_ratios, bounds = [], [], []
    for name, layer, best, liftpy_ms, memory_bytes, tried, baselines in rows:
        total += liftpy_ms
        im2col = im2col_bytes(1, layer.channels, layer.height, layer.width, layer.kernels, 3, 3,
                              layer.out_height, layer.out_width)
        # what every convolution holds: its input, weights, biases and output; the rest is workspace
        # (im2col: the column matrix; liftpy: the padded copy of the input)
        held = 4 * (layer.channels * layer.height * layer.width + layer.kernels * layer.channels * 9 + layer.kernels
                    + layer.kernels * layer.out_height * layer.out_width)
        memory_ratios.append(im2col / memory_bytes)
        bounds.append(im2col / held)
        workspace = memory_bytes - held
        work_ratio = (im2col - held) / workspace if workspace else None  # None: no workspace at all
        if work_ratio is not None:
            workspace_ratios.append(work_ratio)
        work_text = f"{work_ratio:10.2f}" if work_ratio is not None else f"{'none':>10}"
        line = (f"{name:9} {tried:6} {best.algorithm:>{pw}} {liftpy_ms:9.2f} {layer.flops / liftpy_ms / 1e6:8.1f} "
                f"{memory_bytes / 2**20:6.1f} {im2col / 2**20:10.1f} {im2col / memory_bytes:9.2f} {work_text}")
        for c in columns:
            totals[c] += baselines[c]
            line += f" {baselines[c]:{width[c]}.2f} {baselines[c] / liftpy_ms:6.2f}"
        print(line)
    work_mean = f"{statistics.mean(workspace_ratios):10.2f}" if workspace_ratios else f"{'none':>10}"
    print(f"{'total':9} {'':6} {'':{pw}} {total:9.2f} {'':8} {'':6} {'':10} {statistics.mean(memory_ratios):9.2f} "
          f"{work_mean}"
          + "".join(f" {totals[c]:{width[c]}.2f} {totals[c] / total:6.2f}" for c in columns))
    print(f"mem ratio of a pipeline holding nothing but its input, weights, biases and output: "
          f"{statistics.mean(bounds):.2f} on average")
    print(f"ratio = baseline time / liftpy time (higher: liftpy faster); mem ratio = im2col+GEMM bytes / liftpy bytes; "
          f"work ratio = the same for the workspace beyond input, weights, biases and output (im2col's column matrix "
          f"against liftpy's padded input; none: no workspace, left out of the mean); total row: sums of times, "
          f"means of ratios over layers; medians over "
          f"{args.rounds} rounds of medians of {args.repeat} runs (numpy: 5, CLBlast: 3, naive OpenCL: 1 run, 1 round); "
          f"device {device}")


if __name__ == "__main__":
    main()
