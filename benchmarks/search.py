"""Random, local and model-guided searches of the same tasks with the same seed, on this machine's device.

    python benchmarks/search.py [--tasks vgg16.10,vgg16.5] [--trials 20] [--searches random,local,model]
                                [--train-db benchmarks/results/vgg16-route-zen3.sqlite ...]
                                [--reference-db DB ...] [--out FILE]

A task is a VGG-16 layer (``vgg16.10``), a program of examples/programs/ at benchmarks/programs.py's sizes
(``conv1x1``), or one at sizes of its own (``conv1x1@C=512:H=13:K=1000:N=1:W=13``: SqueezeNet's classifier).

Each search tunes each task in a fresh database (confirmation off, so that every trial is one the search chose).
The model-guided one starts from a database holding ``--train-db``'s trials of the device's *other* tasks,
with their features (``benchmarks/results/features-<db>.json``, made by benchmarks/cost_model.py): the model a
device's earlier tunings would give it. The searches of a task take turns (the order alternating) and the
reference is the best trial any of them found in this run. Printed per task and search: the first trial's time
over the reference, the trials until one within 10% and 5% of it ("-": none), the best over the reference, the
wall time, and each search's best measured again: all of them in one batch, their rounds in turns for 5 s (a
search's figures come from its own minutes of a noisy machine; these from the same ones). With
``--reference-db`` (a longer tuning of the same tasks on this machine: ``refs-*.sqlite``), its best joins that
batch, and each search's best is given over it ("vs ref"), with the trials until one within 5% of it ("ref
5%": each trial's time put on the batch's clock by its search's best, measured again over as first measured).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cost_model import recorded_features, task_of, unversioned  # noqa: E402
from benchmarks.vgg16 import machine_record  # noqa: E402
from liftpy.tuning import Slot, Tuner, TuningDB  # noqa: E402
from liftpy.tuning.program import ROUTE  # noqa: E402


def seed_database(db: Path, train_db: str, held_out_key: str) -> int:
    """Write ``train_db``'s correct trials of every task but the held-out one, with their features (their
    kernels' as recorded, else from ``benchmarks/results/features-<db>.json``; their choices' read afresh),
    into ``db``; how many."""
    from liftpy.runtime import device_info, get_device
    from liftpy.tuning.features import choice_features

    cache = ROOT / "benchmarks/results" / f"features-{Path(train_db).stem}.json"
    features = json.loads(cache.read_text()) if cache.exists() else {}
    facts = device_info(get_device(None))
    held_out = unversioned(held_out_key)
    target = TuningDB(db)
    count, spaces = 0, {}
    for t in TuningDB(train_db, readonly=True).trials(status="ok"):
        f = recorded_features(t, features)
        if not f or not t.time_ms or unversioned(t.task_key) == held_out:
            continue
        name, task = task_of(t.task_key, t.label)
        if task.key not in spaces:
            spaces[task.key] = task.space(facts)
        f = {**f, **choice_features(spaces[task.key], t.config, facts)}
        target.record(task, ROUTE, t.config, {"name": t.device, "driver": "", "platform": ""},
                      {"status": "ok", "cause": "", "time_ms": t.time_ms, "features": f})
        count += 1
    target.close()
    if not count:
        raise SystemExit(f"{train_db}: no trial with today's features (run benchmarks/cost_model.py --db {train_db})")
    return count


def search(task, strategy: str, trials: int, seed: int, train_dbs: list[str]):
    """The times of the trials a search measured, in its order (None: not correct), its wall seconds, and the
    configuration of its fastest."""
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "t.sqlite"
        if strategy == "model":
            for train_db in train_dbs:
                seed_database(db, train_db, task.key)
        start = time.perf_counter()
        with Tuner(db, seed=seed, progress=False, confirm=0, strategy=strategy) as tuner:
            tuner.tune([Slot(task)], trials)
            seconds = time.perf_counter() - start
            mine = tuner.database.trials(task, tuner.device["name"])
        fastest = min((t for t in mine if t.status == "ok"), key=lambda t: t.time_ms)
        return [t.time_ms if t.status == "ok" else None for t in mine], seconds, fastest.config


def measured_together(task, configs: list[dict], seed: int) -> list[float]:
    """The configurations measured again in one batch, their rounds in turns for 5 s (the tuner's confirmation
    protocol): each search's best is compared on the same minutes of the machine, not on its own run's."""
    from liftpy.runtime import device_info, get_device
    from liftpy.tuning import Batch, Build, LocalRunner, Timing
    from liftpy.tuning.builder import build_candidate

    facts = device_info(get_device(None))
    builts = tuple(build_candidate(Build(task.portable(), facts, task.complete(c))) for c in configs)
    runner = LocalRunner()
    try:
        results = [f.result() for f in runner.run(Batch(task.portable(), builts, seed, Timing(min_span_ms=5000)))]
    finally:
        runner.close()
    return [r["time_ms"] if r["status"] == "ok" else float("nan") for r in results]


def program_task(name: str):
    """A program of examples/programs/ by its name, at benchmarks/programs.py's sizes or, after ``@``, at the
    sizes given (``conv1x1@C=512:H=13:K=1000:N=1:W=13``)."""
    import numpy as np

    from benchmarks.programs import PROGRAMS, cases
    from liftpy.tuning import ProgramTask

    program, _, given = name.partition("@")
    if not given:
        return task_of("", program)[1]
    constants = cases(np.random.default_rng(0))[program][1]
    sizes = {key: int(value) for key, value in (pair.split("=") for pair in given.split(":"))}
    return ProgramTask.make(PROGRAMS / f"{program}.lift", sizes, None, tuple(constants))


def trials_to(times, reference: float, within: float) -> str:
    for i, t in enumerate(times, 1):
        if t is not None and t <= reference * (1 + within):
            return str(i)
    return "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="vgg16.10,vgg16.5")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--searches", default="random,local,model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-db", nargs="+", default=[str(ROOT / "benchmarks/results/vgg16-route-zen3.sqlite")])
    parser.add_argument("--reference-db", nargs="+")
    parser.add_argument("--out")
    args = parser.parse_args()
    from liftpy.nn.conv import route_task
    from liftpy.nn.layers import VGG16

    trained_on = ", ".join(Path(db).name for db in args.train_db)
    lines = machine_record(None) + [f"{args.trials} trials a search, seed {args.seed}, confirmation off; the model "
                                    f"search trained first on {trained_on}'s other tasks"]
    lines.append(f"{'task':10} {'search':8} {'first/ref':>10} {'to 10%':>7} {'to 5%':>6} {'best/ref':>9} "
                 f"{'wall s':>7} {'best again, ms':>15} {'vs ref':>7} {'ref 5%':>7}")
    print("\n".join(lines), flush=True)
    searches = args.searches.split(",")
    for number, name in enumerate(args.tasks.split(",")):
        task = route_task(VGG16[name]) if name in VGG16 else program_task(name)
        results = {}
        for strategy in (searches if number % 2 == 0 else list(reversed(searches))):
            results[strategy] = search(task, strategy, args.trials, args.seed, args.train_db)
        reference = min(t for times, _, _ in results.values() for t in times if t is not None)
        configs = [results[s][2] for s in searches]
        if args.reference_db:
            key = unversioned(task.key)
            known = [t for db in args.reference_db for t in TuningDB(db, readonly=True).trials(status="ok")
                     if t.time_ms and unversioned(t.task_key) == key]
            configs.append(min(known, key=lambda t: t.time_ms).config)
        times_again = measured_together(task, configs, args.seed + 1)
        again = dict(zip(searches, times_again))
        reference_again = times_again[-1] if args.reference_db else float("nan")
        if args.reference_db:
            lines.append(f"{name:10} {'ref':8} {len(known)} trials of the reference databases, their best "
                         f"again {reference_again:.3f} ms")
            print(lines[-1], flush=True)
        for strategy in searches:
            times, seconds, _ = results[strategy]
            first = times[0] / reference if times and times[0] is not None else float("nan")
            fastest = min(t for t in times if t is not None)
            on_batch_clock = [None if t is None else t * again[strategy] / fastest for t in times]
            line = (f"{name:10} {strategy:8} {first:>9.2f}x {trials_to(times, reference, 0.10):>7} "
                    f"{trials_to(times, reference, 0.05):>6} {fastest / reference:>8.2f}x {seconds:>7.0f} "
                    f"{again[strategy]:>15.3f} {again[strategy] / reference_again:>6.2f}x "
                    f"{trials_to(on_batch_clock, reference_again, 0.05) if args.reference_db else '':>7}")
            lines.append(line)
            print(line, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
