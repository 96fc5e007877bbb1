"""The automatic route's spaces for the programs of examples/programs/, at benchmarks/programs.py's sizes: what
can be blocked, how many configurations, how long building the space and sampling 1,000 takes (issue 14: under
10 s), and the median time to generate one candidate's kernels (issue 14: under 100 ms). No OpenCL device is
used: the kernels are generated for the pocl-cpu profile.

    python benchmarks/route_space.py [--programs matmul,conv1x1] [--candidates 20] [--out FILE]
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
from benchmarks.programs import PROGRAMS, cases  # noqa: E402
from benchmarks.vgg16 import machine_record, publish  # noqa: E402
from liftpy.codegen.program import generate  # noqa: E402
from liftpy.params import target_profiles  # noqa: E402
from liftpy.rewrite.route import RouteSpace  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", default=",".join(p.stem for p in sorted(PROGRAMS.glob("*.lift"))))
    parser.add_argument("--candidates", type=int, default=20, help="candidates generated per program")
    parser.add_argument("--out")
    args = parser.parse_args()
    table = cases(np.random.default_rng(0))
    profile = target_profiles()["pocl-cpu"]
    lines = [f"{'program':15} {'levels that can be blocked':38} {'sketches':>8} {'configs':>8} "
             f"{'space+1000 s':>12} {'codegen ms':>10}"]
    for name in args.programs.split(","):
        sizes = table[name][0]
        program = liftpy.load(PROGRAMS / f"{name}.lift")
        start = time.perf_counter()
        space = RouteSpace(program, sizes, device="pocl-cpu")
        sample = space.sample(1000)
        build_s = time.perf_counter() - start
        times = []
        for config in sample[: args.candidates]:
            start = time.perf_counter()
            generate(space.lower(config), sizes, None, profile)
            times.append((time.perf_counter() - start) * 1000)
        levels = ", ".join(f"{level.name} ({level.extent})" for level in space.levels)
        lines.append(f"{name:15} {levels:38} {len(list(space.sketches())):8} {space.count():8} {build_s:12.2f} "
                     f"{statistics.median(times):10.1f}")
        print(lines[-1], file=sys.stderr)
    lines += ["", "configs: the space for the pocl-cpu profile (a tuning counts its device's: their private-memory "
                  "budgets differ, so do the counts);",
              "space+1000 s: building the space (the rewrites of every sketch, their parameter spaces) and "
                  "sampling 1,000 configurations (or all, where fewer);",
              f"codegen ms: median time to lower one sampled configuration and generate its kernels (first "
              f"{args.candidates} samples).", "", *machine_record(None),
              f"command: python benchmarks/route_space.py {' '.join(sys.argv[1:])}"]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
