"""Trials per minute of the tuner against an earlier commit's, on the same trials, in one run.

    python benchmarks/tuning_throughput.py [--before a053b9f] [--trials 16] [--subjects vgg16.10,matmul]
                                           [--rounds 1] [--out FILE]

For each subject (VGG-16's layer 10 and the programs of examples/programs/ at benchmarks/programs.py's sizes)
the same ``--trials`` configurations (its route's starting points, then random ones, of those the earlier
commit's route can lower and generate too) are tuned -- checked and timed, no confirmation pass -- by the
earlier commit's tuner (a git worktree of ``--before``) and by this one's, each in a fresh process with a fresh
database and an empty PoCL kernel cache, taking turns for ``--rounds`` rounds (which side goes first
alternating from one subject to the next). It prints each one's wall time from the call to the tuner to its
return (spaces, references, builds, checks, timing and database writes), the trials per minute, and whether the
two agree on every trial's status.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def subject_task(name):
    import numpy as np

    from benchmarks.programs import PROGRAMS, cases
    from liftpy.nn.conv import route_task
    from liftpy.nn.layers import VGG16
    from liftpy.tuning import ProgramTask

    if name in VGG16:
        return route_task(VGG16[name])
    sizes, constants = cases(np.random.default_rng(0))[name][:2]
    return ProgramTask.make(PROGRAMS / f"{name}.lift", sizes, None, tuple(constants))


def child(side: str, name: str, configs_file: str, db: str) -> None:
    """Tune the fixed configurations with this process's liftpy; print the seconds and each trial's status.
    Side ``probe``: print which of them this liftpy can lower and generate (nothing compiled or run)."""
    configs = json.loads(Path(configs_file).read_text())
    task = subject_task(name)
    if side == "probe":
        from liftpy.codegen.program import generate
        from liftpy.errors import LiftError
        from liftpy.runtime import device_info, get_device

        device = device_info(get_device(None))
        space, made = task.space(device), []
        for config in configs:
            try:
                generate(space.lower(config), task.size_map, task.function, device)
                made.append(True)
            except LiftError:
                made.append(False)
        print(json.dumps({"made": made}))
        return
    start = time.perf_counter()
    if side == "before":  # the serial tuner (liftpy.tuning.search, a053b9f)
        from liftpy.tuning.program import check_reference
        from liftpy.tuning.search import search

        class Fixed:
            first = []

            def proposals(self):
                for c in configs:
                    yield "route", c

            def observe(self, algorithm, config, result):
                pass

        check_reference(task, None, 0)
        trials = search(task, Fixed(), len(configs), db, None, 0, 5, 120.0, progress=False, confirm=0)
    else:
        from liftpy.tuning import Slot, Tuner

        class Fixed:
            first = []

            def __init__(self):
                self.left = list(configs)

            def propose(self, n):
                out, self.left = self.left[:n], self.left[n:]
                return out

            def observe(self, config, result):
                pass

        with Tuner(db, progress=False, confirm=0, strategy=lambda *args: Fixed()) as tuner:
            tuner.tune([Slot(task)], len(configs))
            trials = tuner.database.trials(task)
    seconds = time.perf_counter() - start
    statuses = {json.dumps(task.complete(t.config), sort_keys=True): t.status for t in trials}
    print(json.dumps({"seconds": seconds, "statuses": statuses}))


def run_side(side, worktree, name, configs_file) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        # PoCL's kernel cache empty at the start of each run: a search's candidates are new kernels, and a cache
        # filled by the other side's run of the same configurations would hand this side its builds
        env = dict(os.environ, PYTHONPATH=str(ROOT if side == "after" else worktree),
                   POCL_CACHE_DIR=f"{directory}/pocl-cache")
        out = subprocess.run([sys.executable, __file__, "--child", side, "--subject", name, "--configs-file",
                              configs_file, "--db", f"{directory}/t.sqlite"], env=env, capture_output=True,
                             text=True, cwd=ROOT if side == "after" else worktree)
    if out.returncode != 0:
        raise SystemExit(f"{side} {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="a053b9f")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--subjects", default="vgg16.10,conv1x1,conv_bias_relu,depthwise,dilated_conv,grouped_conv,"
                                               "matmul,maxpool")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--subject", help=argparse.SUPPRESS)
    parser.add_argument("--configs-file", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, os.environ.get("PYTHONPATH", str(ROOT)))
    sys.path.insert(1, str(ROOT))
    if args.child:
        return child(args.child, args.subject, args.configs_file, args.db)

    from benchmarks.vgg16 import machine_record

    worktree = Path(tempfile.gettempdir()) / f"liftpy-{args.before}"
    if not worktree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), args.before], cwd=ROOT, check=True,
                       capture_output=True)
    lines = machine_record(None) + [f"before: {args.before} (serial tuner); after: this commit; {args.trials} "
                                    f"trials each, confirmation off, {args.rounds} round(s) taking turns"]
    lines.append(f"{'subject':15} {'before s':>9} {'after s':>9} {'before /min':>12} {'after /min':>11} "
                 f"{'speed-up':>9} {'same statuses':>14}")
    print("\n".join(lines), flush=True)
    totals = {"before": 0.0, "after": 0.0}
    totals_seen = []  # subjects done: which side goes first alternates from one to the next
    for name in args.subjects.split(","):
        task = subject_task(name)
        space = task.space()
        configs, seen = [], set()
        for c in space.sample(4 * args.trials, seed=7):
            key = json.dumps(task.complete(c), sort_keys=True)
            if key not in seen:
                seen.add(key)
                configs.append(task.complete(c))
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(configs, f)
        # the same trials for both: only configurations the earlier commit's route can make too (this one's
        # makes more: a trial failing at once there would be a whole trial here)
        made = run_side("probe", worktree, name, f.name)["made"]
        configs = [c for c, ok in zip(configs, made) if ok][: args.trials]
        Path(f.name).write_text(json.dumps(configs))
        seconds = {"before": [], "after": []}
        statuses = {}
        for round_ in range(args.rounds):
            for side in (("before", "after") if (round_ + len(totals_seen)) % 2 == 0 else ("after", "before")):
                result = run_side(side, worktree, name, f.name)
                seconds[side].append(result["seconds"])
                statuses[side] = result["statuses"]
        os.unlink(f.name)
        totals_seen.append(name)
        b, a = statistics.median(seconds["before"]), statistics.median(seconds["after"])
        totals["before"] += b
        totals["after"] += a
        same = statuses["before"] == statuses["after"]
        line = (f"{name:15} {b:>9.1f} {a:>9.1f} {60 * len(configs) / b:>12.1f} {60 * len(configs) / a:>11.1f} "
                f"{b / a:>8.2f}x {'yes' if same else 'NO':>14}")
        if not same:
            differ = [k for k in statuses["before"] if statuses["before"][k] != statuses["after"].get(k)]
            line += f"  ({len(differ)} differ: " + "; ".join(
                f"{statuses['before'][k]} -> {statuses['after'].get(k)}" for k in differ[:3]) + ")"
        lines.append(line)
        print(line, flush=True)
    lines.append(f"{'total':15} {totals['before']:>9.1f} {totals['after']:>9.1f}   speed-up "
                 f"{totals['before'] / totals['after']:.2f}x")
    print(lines[-1])
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
