"""Each step of a network against the figure its tuner reported: per tuning database, every step's kernel time in
the network's own calls (median) beside its pick's tuned time -- how far the tuner's protocol is from what the
network pays, step by step.

    python benchmarks/network_steps.py benchmarks/models/resnet18.onnx --dbs warm.sqlite,cold.sqlite --rounds 6

The prepared networks' calls are taken in turns, ``--calls`` a round each (after each one's checked first call
and a settling spell), so that a slow spell of the machine falls on every database alike. Prints a line per
step, then per database the sums and how many steps lie within 10% of their tuned figure. Nothing is tuned.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from network_ab import databases_parser, header, network_and_input  # noqa: E402


def main() -> None:
    parser = databases_parser(__doc__, rounds=6)
    parser.add_argument("--calls", type=int, default=7, help="calls a round, each step's median taken over them")
    args = parser.parse_args()

    print(f"{header(args)} of {args.calls} calls", flush=True)
    net, name, x = network_and_input(args)
    dbs = args.dbs.split(",")
    prepared = [net.prepare(db=db) for db in dbs]
    rounds: list[list[list[float]]] = [[] for _ in dbs]
    for _ in range(args.rounds):
        for i, p in enumerate(prepared):
            rounds[i].append(p.timed({name: x}, calls=args.calls)[1])
    medians = [[statistics.median(column) for column in zip(*steps)] for steps in rounds]
    print(f"{'step':<32} " + "  ".join(f"{Path(db).name[:24]:>24}" for db in dbs))
    sums = [[0.0, 0.0, 0, 0] for _ in dbs]  # network ms, tuned ms, steps within 10%, steps
    for j, step in enumerate(net.steps):
        if prepared[0].programs[j] is None:  # written in place by its inputs' steps
            continue
        cells = []
        for i, p in enumerate(prepared):
            best = p.bests.get(step.task)
            ms = medians[i][j]
            if best is None:
                cells.append(f"{ms:7.3f} (untuned)      ")
                continue
            sums[i][0] += ms
            sums[i][1] += best.time_ms
            sums[i][2] += abs(best.time_ms / ms - 1) <= 0.10 if ms > 0 else 0
            sums[i][3] += 1
            cells.append(f"{ms:7.3f} (tuned {best.time_ms:6.3f} {best.name[:4]:<4})")
        print(f"{step.name[-32:]:<32} " + "  ".join(cells))
    for db, (network_ms, tuned_ms, within, count) in zip(dbs, sums):
        ratio = tuned_ms / network_ms if network_ms else float("nan")
        print(f"# {db}: tuned steps {network_ms:.3f} ms in the network, {tuned_ms:.3f} by their tuner (x{ratio:.3f}); "
              f"{within} of {count} within 10%")


if __name__ == "__main__":
    main()
