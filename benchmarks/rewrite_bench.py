"""Benchmark of the rewrite engine: exploring the paper's convolution layer (examples/conv_layer.lift).

    python benchmarks/rewrite_bench.py [--depth 3] [--runs 5]

Reports the medians over the runs of rewrites per second (successful rule applications, each matched,
instantiated and type-checked where it happens, duplicates included) and variants per second (distinct
programs, up to renaming of bound variables), for a breadth-first exploration with the default rules
(liftpy.rewrite.explore.default_rules). The catalogue is loaded before timing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import liftpy
from liftpy.rewrite import explore, rules
from liftpy.rewrite.explore import default_rules

HERE = Path(__file__).resolve().parent
CONV = HERE.parent / "examples" / "conv_layer.lift"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)

    program = liftpy.load(CONV)
    rules.catalogue()  # load the rule files once, outside the timings
    chosen = default_rules()
    explore(program, chosen, depth=1, progress=False)  # warm up

    rows = []
    for run in range(1, args.runs + 1):
        began = time.perf_counter()
        variants = explore(program, chosen, depth=args.depth, progress=False)
        seconds = time.perf_counter() - began
        s = variants.stats
        rows.append((s["rewrites"] / seconds, len(variants) / seconds, seconds, s["rewrites"], len(variants),
                     s["duplicates"]))
        print(f"run {run}: {len(variants)} variants, {s['rewrites']} rewrites ({s['duplicates']} duplicates) "
              f"in {seconds:.2f} s", file=sys.stderr)

    rewrites = statistics.median(r[0] for r in rows)
    variants_rate = statistics.median(r[1] for r in rows)
    seconds = statistics.median(r[2] for r in rows)
    print(f"exploring {CONV.name} to depth {args.depth} with {len(chosen)} rules "
          f"({', '.join(r.label for r in chosen)})")
    print(f"  {rows[0][4]} variants from {rows[0][3]} rewrites ({rows[0][5]} duplicates), "
          f"median {seconds:.2f} s over {args.runs} runs")
    print(f"  rewrites per second: {rewrites:.0f}")
    print(f"  variants per second: {variants_rate:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
