"""Each step of a network against the figure its tuner reported: per tuning database, every step's kernel time in
the network's own calls (median) beside its pick's tuned time -- how far the tuner's protocol is from what the
network pays, step by step.

    python benchmarks/network_steps.py benchmarks/models/resnet18.onnx --dbs warm.sqlite,cold.sqlite --rounds 6

The prepared networks' calls are taken in turns, ``--calls`` a round each (after each one's checked first call
and a settling spell), so that a slow spell of the machine falls on every database alike. Prints a line per
step, then per database the sums and how many steps lie within 10% of their tuned figure. Nothing is tuned.

With ``--again``, each direct program's pick is also measured again now, by the tuner's own protocol for a
pick (cold, rounds in turns over CONFIRM_SPAN_MS, a fresh runner), between the first and the second half of
the network's rounds: whether the protocol or the hour tells the figure from the step.
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
    parser.add_argument("--again", action="store_true", help="each direct pick measured again now, as the tuner "
                        "measures a pick, halfway through the rounds")
    args = parser.parse_args()

    print(f"{header(args)} of {args.calls} calls", flush=True)
    net, name, x = network_and_input(args)
    dbs = args.dbs.split(",")
    prepared = [net.prepare(db=db) for db in dbs]
    rounds: list[list[list[float]]] = [[] for _ in dbs]
    again: list[dict] = [{} for _ in dbs]
    for r in range(args.rounds):
        if args.again and r == args.rounds // 2:
            again = [measured_again(p) for p in prepared]
        for i, p in enumerate(prepared):
            rounds[i].append(p.timed({name: x}, calls=args.calls)[1])
    medians = [[statistics.median(column) for column in zip(*steps)] for steps in rounds]
    print(f"{'step':<32} " + "  ".join(f"{Path(db).name[:24]:>24}" for db in dbs))
    sums = [[0.0, 0.0, 0, 0, 0.0, 0.0, 0, 0] for _ in dbs]  # network ms, tuned ms, within 10%, steps; the same
    # for the steps measured again: network ms, again ms, within 10%, steps
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
            now = again[i].get(step.task)
            if now is not None:
                sums[i][4] += ms
                sums[i][5] += now
                sums[i][6] += abs(now / ms - 1) <= 0.10 if ms > 0 else 0
                sums[i][7] += 1
            cells.append(f"{ms:7.3f} (tuned {best.time_ms:6.3f} {best.name[:4]:<4}"
                         + (f", again {now:6.3f})" if now is not None else ")"))
        print(f"{step.name[-32:]:<32} " + "  ".join(cells))
    for db, (network_ms, tuned_ms, within, count, net_again, again_ms, within_again, count_again) in zip(dbs, sums):
        ratio = tuned_ms / network_ms if network_ms else float("nan")
        print(f"# {db}: tuned steps {network_ms:.3f} ms in the network, {tuned_ms:.3f} by their tuner (x{ratio:.3f}); "
              f"{within} of {count} within 10%")
        if count_again:
            print(f"# {db}: {count_again} steps' direct picks measured again: {again_ms:.3f} ms against the steps' "
                  f"{net_again:.3f} in the network (x{again_ms / net_again:.3f}); {within_again} within 10%")


def measured_again(prepared) -> dict:
    """Each distinct step's direct pick (not Winograd's stages) measured now as the tuner measures a pick: cold,
    rounds in turns for CONFIRM_SPAN_MS, by a fresh runner; by the step's task."""
    from liftpy.nn.operators import WINOGRAD
    from liftpy.runtime import device_info
    from liftpy.tuning import Batch, Build, LocalRunner, Timing
    from liftpy.tuning.builder import build_candidate
    from liftpy.tuning.tuner import CONFIRM_SPAN_MS

    facts = device_info(prepared.device)
    runner = LocalRunner()
    found = {}
    try:
        for seed, (task, best) in enumerate(prepared.bests.items()):
            if best.name == WINOGRAD:
                continue
            built = build_candidate(Build(task.portable(), facts, task.complete(best.config)))
            timing = Timing(min_span_ms=CONFIRM_SPAN_MS, cold=task.cold)
            result = runner.run(Batch(task, (built,), seed, timing))[0].result()
            if result["status"] == "ok":
                found[task] = result["time_ms"]
    finally:
        runner.close()
    return found


if __name__ == "__main__":
    main()
