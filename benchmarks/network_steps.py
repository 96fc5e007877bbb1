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
    tuned_pairs: list[list[tuple[float, float]]] = [[] for _ in dbs]  # (network ms, tuner's figure) per step
    again_pairs: list[list[tuple[float, float]]] = [[] for _ in dbs]  # (network ms, measured again) per step
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
            tuned_pairs[i].append((ms, best.time_ms))
            now = again[i].get(step.task)
            if now is not None:
                again_pairs[i].append((ms, now))
            cells.append(f"{ms:7.3f} (tuned {best.time_ms:6.3f} {best.name[:4]:<4}"
                         + (f", again {now:6.3f})" if now is not None else ")"))
        print(f"{step.name[-32:]:<32} " + "  ".join(cells))
    for db, tuned, measured in zip(dbs, tuned_pairs, again_pairs):
        network_ms, tuned_ms, within = summed(tuned)
        print(f"# {db}: tuned steps {network_ms:.3f} ms in the network, {tuned_ms:.3f} by their tuner "
              f"(x{tuned_ms / network_ms if network_ms else float('nan'):.3f}); {within} of {len(tuned)} within 10%")
        if measured:
            network_ms, again_ms, within = summed(measured)
            print(f"# {db}: {len(measured)} steps' direct picks measured again: {again_ms:.3f} ms against the steps' "
                  f"{network_ms:.3f} in the network (x{again_ms / network_ms:.3f}); {within} within 10%")


def summed(pairs) -> tuple[float, float, int]:
    """Of (network ms, figure ms) per step: both sums and how many figures lie within 10% of their step."""
    within = sum(ms > 0 and abs(figure / ms - 1) <= 0.10 for ms, figure in pairs)
    return sum(ms for ms, _ in pairs), sum(figure for _, figure in pairs), within


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
