"""The code generator against an older commit's: the same configurations, kernels of both, timed interleaved.

    git worktree add /tmp/old <commit>
    python benchmarks/codegen_ab.py --old /tmp/old --db tuning.sqlite [--out FILE]

For each of the nine VGG-16 layers, the best configuration of the automatic route the tuning database holds
is compiled twice: by this checkout and, in a subprocess, by the checkout at ``--old``. Both programs run in
this process on the same device buffers' worth of data (the older kernels take the place of the new ones in
the same plan), each checked once against the float64 reference, and their outputs compared with each other.
Then rounds: per layer, the older and the newer program are called ``--repeat`` times each, in alternating
order; the whole call and the kernel-event sum are recorded. Medians of the rounds' medians.
"""

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import liftpy.nn as nn  # noqa: E402
from benchmarks.vgg16 import machine_record, publish, quiesce  # noqa: E402
from liftpy.codegen.launch import Launch  # noqa: E402
from liftpy.codegen.program import KernelPlan  # noqa: E402
from liftpy.nn import conv  # noqa: E402
from liftpy.runtime import Executable, device_info, get_device  # noqa: E402
from liftpy.tuning import TuningDB  # noqa: E402

# Run in the older checkout: its code generator's kernels for each (layer, configuration), as JSON.
EMIT = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
import liftpy
# the older checkout's rules too (an editable install of this one would otherwise provide them), under the
# package name of either age (liftpy.rewrites, then liftpy.catalogue)
for package in ("liftpy.rewrites", "liftpy.catalogue"):
    spec = importlib.util.spec_from_file_location(package, sys.argv[1] + "/rewrites/__init__.py",
                                                  submodule_search_locations=[sys.argv[1] + "/rewrites"])
    sys.modules[package] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
assert liftpy.__file__.startswith(sys.argv[1]), liftpy.__file__
import liftpy.nn as nn
out = []
for name, config in json.loads(sys.stdin.read()):
    g = nn.plan(nn.VGG16[name], config).executable.generated
    out.append([[k.name, k.source, list(k.launch.global_size), k.launch.local_size and list(k.launch.local_size),
                 list(k.args), k.produces] for k in g.kernels])
print(json.dumps(out))
"""


def older_kernels(old: Path, jobs: list) -> list:
    result = subprocess.run([sys.executable, "-c", EMIT, str(old)], input=json.dumps(jobs), capture_output=True,
                            text=True, check=True)
    return json.loads(result.stdout)


def timed(bound, x, repeat):
    calls, kernels = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        result = bound.run(x, check=False)
        calls.append((time.perf_counter() - start) * 1000)
        kernels.append(result.kernel_ms)
    return statistics.median(calls), statistics.median(kernels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="a checkout (worktree) of the older commit")
    parser.add_argument("--db", required=True, help="a tuning database holding the layers' route trials")
    parser.add_argument("--layers", default=",".join(nn.VGG16))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    old_commit = subprocess.run(["git", "-C", args.old, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    record = machine_record(None) + [f"older commit: {old_commit} ({args.old})"]
    print("\n".join(record), file=sys.stderr)
    dev = get_device()
    device = device_info(dev).name
    database = TuningDB(args.db)
    names = args.layers.split(",")
    best = {}
    for name in names:
        found = database.best(conv.route_task(nn.VGG16[name]), device) or database.best(conv.route_task(nn.VGG16[name]))
        if found is None:
            raise SystemExit(f"{args.db} has no tuned configuration of {name}")
        best[name] = found
    database.close()
    olds = older_kernels(Path(args.old), [[n, best[n].config] for n in names])

    layers = []
    for index, name in enumerate(names):
        spec, found = nn.VGG16[name], best[name]
        new_plan = conv.plan(spec, found.config)
        generated = new_plan.executable.generated
        kernels = tuple(KernelPlan(k[0], k[1], Launch(tuple(k[2]), k[3] and tuple(k[3])), tuple(k[4]), k[5])
                        for k in olds[index])
        old_plan = conv.ConvPlan(spec, found.config, Executable(dataclasses.replace(generated, kernels=kernels), dev))
        x, w, b = spec.random_inputs(seed=index)
        bound = {}
        outputs = {}
        for which, plan in (("old", old_plan), ("new", new_plan)):
            bound[which] = plan.bind(w, b)
            result = bound[which].run(x, check=True, weights=(w, b))  # against the float64 reference
            outputs[which] = result.output
        same = np.array_equal(outputs["old"], outputs["new"])
        layers.append((name, found, bound, x, same))
        print(f"{name} {found.config}: both checked; outputs bitwise equal: {same}", file=sys.stderr)

    samples: dict[tuple, list] = {}
    for round_ in range(args.rounds):
        for name, found, bound, x, _ in layers:
            order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
            for which in order:
                quiesce(0.1)
                samples.setdefault((name, which), []).append(timed(bound[which], x, args.repeat))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)

    def med(name, which, k):
        return statistics.median(s[k] for s in samples[name, which])

    lines = [f"{'layer':9} {'old kernels':>11} {'new kernels':>11} {'new/old':>7} "
             f"{'old call':>8} {'new call':>8} {'new/old':>7}  bitwise equal"]
    totals = [0.0, 0.0, 0.0, 0.0]
    for name, found, _, _, same in layers:
        ok, nk, oc, nc = med(name, "old", 1), med(name, "new", 1), med(name, "old", 0), med(name, "new", 0)
        totals = [t + v for t, v in zip(totals, (ok, nk, oc, nc))]
        lines.append(f"{name:9} {ok:11.2f} {nk:11.2f} {nk / ok:7.3f} {oc:8.2f} {nc:8.2f} "
                     f"{nc / oc:7.3f}  {same}")
    ok, nk, oc, nc = totals
    lines.append(f"{'total':9} {ok:11.2f} {nk:11.2f} {nk / ok:7.3f} {oc:8.2f} {nc:8.2f} {nc / oc:7.3f}")
    lines += ["", f"ms; medians over {args.rounds} rounds (alternating order) of medians of {args.repeat} calls; "
              "kernels: sum of kernel events; call: the whole run, numpy in and out.", "", *record,
              f"command: python benchmarks/codegen_ab.py {' '.join(sys.argv[1:])}"]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
