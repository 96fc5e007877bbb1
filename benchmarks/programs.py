"""The high-level programs of examples/programs/ as users pay for them, against PyTorch on the same data.

    python benchmarks/programs.py [--programs matmul,depthwise] [--parallel 2,3] [--trials 200] [--db FILE]
                                  [--repeat 5] [--rounds 3] [--out FILE]

Each program is compiled by the routes named in the table -- the naive lowering (``lower_to_opencl``: the outer
levels of maps global ones, ``--parallel`` of them; every reduction a sequential loop; no tuning), and, with
``--trials N``, the automatic route tuned (``liftpy.tune``: N trials in total per program, resumed from ``--db``)
-- and prepared once (weights and biases uploaded once). Its whole call, numpy in and numpy
out, is timed in rounds interleaved with PyTorch's equivalent call (when PyTorch is installed), the kernel
events summed beside; each method rests 0.3 s, then is called for 50 ms, before its calls are timed. The
first call is compared with PyTorch's result (or, without PyTorch, skipped: the tests check these programs
against numpy references at small sizes).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import liftpy  # noqa: E402
from benchmarks.baselines import timed  # noqa: E402
from benchmarks.vgg16 import machine_record, publish, quiesce, warm_up  # noqa: E402
from liftpy.rewrite.strategies import lowering  # noqa: E402

PROGRAMS = ROOT / "examples" / "programs"


def _torch():
    try:
        import torch
        import torch.nn.functional as F

        return torch, F
    except ImportError:
        return None, None


def torch_threads() -> int | None:
    """PyTorch set to use every core, as liftpy's device does; its thread count (None without PyTorch)."""
    torch, _ = _torch()
    if torch is None:
        return None
    torch.set_num_threads(os.cpu_count())
    return torch.get_num_threads()


def relative_error(got: np.ndarray, expected: np.ndarray, what: str) -> float:
    """The largest difference from PyTorch's result, relative to its largest magnitude (at least 1); over 1e-3
    stops the benchmark: a wrong answer is never timed."""
    scale = max(1.0, float(np.abs(expected).max()))
    error = float(np.abs(got.reshape(expected.shape) - expected).max()) / scale
    assert error < 1e-3, f"{what} differs from PyTorch by {error:.3g} (relative)"
    return error


def cases(rng):
    """name -> (sizes, constant inputs, per-call inputs, PyTorch's call or None, flops). The calls take their
    arrays as default arguments: the names are reused from case to case."""

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    torch, F = _torch()

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))

    out = {}
    a, b = r(512, 512), r(512, 512)
    out["matmul"] = ({"n": 512, "k": 512, "m": 512}, {"b": b}, {"a": a},
                     torch and (lambda i, b=b: torch.matmul(t(i["a"]), t(b)).numpy()), 2 * 512 ** 3)
    x = r(1, 64, 112, 112)
    out["maxpool"] = ({"N": 1, "C": 64, "H": 112, "W": 112, "poolSize": 2, "poolStride": 2}, {}, {"input": x},
                      torch and (lambda i: F.max_pool2d(t(i["input"]), 2, 2).numpy()), 64 * 56 * 56 * 4)
    x, w = r(1, 64, 112, 112), r(64, 3, 3)
    out["depthwise"] = ({"N": 1, "C": 64, "H": 112, "W": 112, "kernelHeight": 3, "kernelWidth": 3,
                         "padSize": (1, 1, 1, 1)}, {"weights": w}, {"input": x},
                        torch and (lambda i, w=w: F.conv2d(t(i["input"]), t(w[:, None]), None, 1, 1, 1, 64).numpy()),
                        2 * 64 * 112 * 112 * 9)
    x, w, bias = r(1, 256, 56, 56), r(64, 256), r(64)
    out["conv1x1"] = ({"N": 1, "C": 256, "H": 56, "W": 56, "K": 64}, {"weights": w, "biases": bias}, {"input": x},
                      torch and (lambda i, w=w, bias=bias: F.conv2d(t(i["input"]), t(w[:, :, None, None]), t(bias)).numpy()),
                      2 * 64 * 256 * 56 * 56)
    x, w, bias = r(1, 64, 56, 56), r(64, 64, 3, 3), r(64)
    conv_sizes = {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "kernelHeight": 3, "kernelWidth": 3,
                  "padSize": (1, 1, 1, 1), "stride": (1, 1)}
    out["conv_bias_relu"] = (conv_sizes, {"weights": w, "biases": bias}, {"input": x},
                             torch and (lambda i, w=w, bias=bias: F.relu(F.conv2d(t(i["input"]), t(w), t(bias), 1, 1)).numpy()),
                             2 * 64 * 64 * 9 * 56 * 56)
    wg = r(64, 16, 3, 3)
    out["grouped_conv"] = ({**conv_sizes, "groups": 4}, {"weights": wg, "biases": bias}, {"input": x},
                           torch and (lambda i, bias=bias: F.conv2d(t(i["input"]), t(wg), t(bias), 1, 1, 1, 4).numpy()),
                           2 * 64 * 16 * 9 * 56 * 56)
    out["dilated_conv"] = ({**conv_sizes, "padSize": (2, 2, 2, 2), "dilation": (2, 2)}, {"weights": w, "biases": bias},
                           {"input": x},
                           torch and (lambda i, w=w, bias=bias: F.conv2d(t(i["input"]), t(w), t(bias), 1, 2, 2).numpy()),
                           2 * 64 * 64 * 9 * 56 * 56)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", default=",".join(p.stem for p in sorted(PROGRAMS.glob("*.lift"))))
    parser.add_argument("--parallel", default="2", help="the naive lowering's global levels, comma-separated: one "
                                                        "route each ('' for none)")
    parser.add_argument("--trials", type=int, default=0, help="tune each program through the automatic route, "
                                                              "with this many trials in total (0: not tuned)")
    parser.add_argument("--db", default=str(ROOT / "benchmarks" / "results" / "programs.sqlite"),
                        help="the tuning database (resumed)")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per method, program and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    record = machine_record(torch_threads())
    print("\n".join(record), file=sys.stderr)
    table = cases(np.random.default_rng(0))
    prepared = []
    for name in args.programs.split(","):
        sizes, constants, inputs, torch_call, flops = table[name]
        expected = torch_call(inputs) if torch_call is not None else None
        routes = []
        for parallel in (int(p) for p in args.parallel.split(",") if p):
            route = lowering(parallel=parallel)
            routes.append((route.name, lambda route=route: route(liftpy.load(PROGRAMS / f"{name}.lift")).program))
        if args.trials:
            start = time.perf_counter()
            best = liftpy.tune(PROGRAMS / f"{name}.lift", sizes=sizes, trials=args.trials, db=args.db,
                               constants=tuple(constants))
            ok = [t for t in best.trials if t.status == "ok"]
            found_at = 1 + [t.config for t in best.trials].index(best.config)
            print(f"{name}: space {best.task.space().count()} configurations, {len(best.trials)} trials "
                  f"({len(ok)} correct) in {time.perf_counter() - start:.0f} s; the best ({best.time_ms:.3f} ms of "
                  f"kernels) was trial {found_at}: {best.config}", file=sys.stderr)
            routes.append((f"tuned ({len(best.trials)} trials)", lambda best=best: best.program))
        for label, make in routes:
            start = time.perf_counter()
            exe = liftpy.compile(make(), sizes)
            compile_ms = (time.perf_counter() - start) * 1000
            run = exe.prepare(constants)
            first = run.run(inputs, poison=True).output
            error = relative_error(first, expected, f"{name}: {label}") if expected is not None else None
            prepared.append((name, label, run, inputs, torch_call, flops))
            print(f"{name} {label}: compiled in {compile_ms:.0f} ms; first call checked (error {error})",
                  file=sys.stderr)

    samples: dict = {}
    for round_ in range(args.rounds):
        baseline_timed = set()  # PyTorch once per program and round, after its first route
        for name, route, run, inputs, torch_call, _ in prepared:
            quiesce()
            warm_up(lambda: run.run(inputs))
            calls, kernels = [], []
            for _ in range(args.repeat):
                start = time.perf_counter()
                result = run.run(inputs)
                calls.append((time.perf_counter() - start) * 1000)
                kernels.append(result.kernel_ms)
            samples.setdefault((name, route, "call"), []).append(statistics.median(calls))
            samples.setdefault((name, route, "kernels"), []).append(statistics.median(kernels))
            if torch_call is not None and name not in baseline_timed:
                baseline_timed.add(name)
                quiesce()
                warm_up(lambda: torch_call(inputs))
                samples.setdefault((name, "PyTorch", "call"), []).append(timed(torch_call, inputs, args.repeat)[1])
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)

    def med(*key):
        values = samples.get(key)
        return statistics.median(values) if values else None

    lines = [f"{'program':15} {'route':30} {'call ms':>9} {'kernels ms':>10} {'GFLOP/s':>8} {'PyTorch ms':>10} "
             f"{'liftpy/PyTorch':>14}"]
    for name, route, _, _, _, flops in prepared:
        call, kernels, theirs = med(name, route, "call"), med(name, route, "kernels"), med(name, "PyTorch", "call")
        ratio = f"{call / theirs:14.2f}" if theirs else f"{'-':>14}"
        lines.append(f"{name:15} {route:30} {call:9.2f} {kernels:10.2f} {flops / call / 1e6:8.1f} "
                     f"{theirs if theirs is not None else float('nan'):10.2f} {ratio}")
    lines += ["", "routes lower_to_opencl: the naive lowering, untuned, with its number of global levels (2 unless",
              "said); tuned: the automatic route's best after that many trials (liftpy.tune, database --db).",
              "call ms: the prepared program's whole call, numpy in and out; kernels ms: its kernel events;",
              f"liftpy/PyTorch: how many times PyTorch's whole call. Medians over {args.rounds} rounds of medians of "
              f"{args.repeat} calls, each method called for 50 ms first (benchmarks.vgg16.warm_up).", "", *record,
              f"command: python benchmarks/programs.py {' '.join(sys.argv[1:])}"]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
