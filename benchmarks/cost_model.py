"""How well the cost models rank a task they were not trained on, from a tuning database of this machine's device.

    python benchmarks/cost_model.py [--db benchmarks/results/vgg16-route-zen3.sqlite ...] [--workers 2] [--out FILE]
    python benchmarks/cost_model.py --network MODEL.onnx=NETWORK.sqlite ... [--min-trials 8]

Each correct trial of the database (of each, where several are given: the tasks of all of them are held out in turn)
(VGG-16's layers by their labels, the programs of examples/programs/ at benchmarks/programs.py's sizes; with
``--network``, the steps and stages of a network tuned by ``net.tune`` or benchmarks/networks.py, named by the
network's file and the index of the first step that runs the task) is read with the features of its kernels
(liftpy.tuning.features) it was recorded with; a trial recorded without them is built again by today's compiler for
this machine's device, and its features are kept in ``benchmarks/results/features-<database>.json`` (computed once;
a configuration today's route no longer lowers is left out). The features of its configuration's choices are read
afresh. Then for each task in turn the learned model is trained on every *other* task's trials (each time over its
task's fastest, as a tuning trains it) and ranks this one's (leave-one-task-out); the analytic model ranks it with
no training. Printed per task: the trials, Kendall's tau of each model's order against the measured one, the share
of the five fastest measured among the model's 20 first, and how far the model's first choice among the measured
trials is from their best (its time over the best's); then the medians, and on how many tasks each model's first
choice is within 1.1x, 1.25x and 2x of the best. (A task of 20 trials or fewer has all of them among any 20 first:
its share is 1.)
"""

import argparse
import functools
import json
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.vgg16 import machine_record  # noqa: E402
from liftpy.tuning import TuningDB  # noqa: E402
from liftpy.tuning.cost_model import AnalyticModel, LearnedModel, kendall_tau, top_recall  # noqa: E402
from liftpy.tuning.db import config_key  # noqa: E402
from liftpy.tuning.features import FEATURES_VERSION, NAMES, choice_features, current  # noqa: E402


def unversioned(task_key: str) -> str:
    """A task's key less the route's version: a database of an older route holds the same tasks."""
    return task_key.rsplit(" ", 1)[0]


#: the tasks of the networks given by ``--network``, by their keys less the route's version: (name, task)
NETWORK_TASKS: dict[str, tuple] = {}


def load_networks(models: tuple[str, ...]) -> None:
    """Every task (and stage) of the ONNX models at ``models`` into :data:`NETWORK_TASKS` (in each process that
    featurises: a pool's initializer)."""
    import liftpy.onnx

    for path in models:
        network = liftpy.onnx.load(path, batch=1)
        for index, step in enumerate(network.steps):
            for _, task in step.programs:
                for each in (task, *task.stages()):
                    stage = f".{each.stage}" if each.stage is not None else ""
                    NETWORK_TASKS.setdefault(unversioned(each.key), (f"{network.name}.{index:02d}{stage}", each))


@functools.lru_cache(maxsize=None)  # asked once a trial: each task is made once
def task_of(task_key: str, label: str):
    """(name, task) of a trial's task: a network's (``--network``), a VGG-16 layer (matched by its key, less the
    route's version: a database of an older route holds the same layers) or a program of examples/programs/ (by
    its file's name)."""
    import numpy as np

    if unversioned(task_key) in NETWORK_TASKS:
        return NETWORK_TASKS[unversioned(task_key)]

    from benchmarks.programs import PROGRAMS, cases
    from liftpy.nn.conv import route_task
    from liftpy.nn.layers import VGG16
    from liftpy.tuning import ProgramTask

    for name, layer in VGG16.items():
        task = route_task(layer)
        if unversioned(task.key) == unversioned(task_key):
            return name, task
    name = Path(label).stem
    sizes, constants = cases(np.random.default_rng(0))[name][:2]
    return name, ProgramTask.make(PROGRAMS / f"{name}.lift", sizes, None, tuple(constants))


def featurise(task_key: str, label: str, configs: list[dict]) -> list[dict | None]:
    """Each configuration's kernels' features on this machine's device (None: today's route does not lower
    it)."""
    from liftpy.runtime import device_info, get_device
    from liftpy.tuning.builder import Build, build_candidate

    _, task = task_of(task_key, label)
    facts = device_info(get_device(None))
    out = []
    for config in configs:
        built = build_candidate(Build(task.portable(), facts, task.complete(config)))
        out.append(versioned(built.features) if built.failure is None else None)
    return out


def versioned(features: dict) -> dict:
    """The kernels' features by :data:`NAMES`, stamped with the version of liftpy's reading of them (a model
    learns from current ones only: :func:`liftpy.tuning.features.current`)."""
    return {**{n: features[n] for n in NAMES}, "version": FEATURES_VERSION}


def recorded_features(trial, cached: dict) -> dict | None:
    """A trial's kernels' features as this liftpy reads them: as it was recorded with them, else as ``cached`` (by
    task and configuration) holds them; None where neither is current."""
    for f in (trial.features, cached.get(f"{trial.task_key}|{config_key(trial.config)}")):
        if current(f) and set(NAMES) <= set(f):
            return versioned(f)
    return None


def read(db: str, device: str, by_label: dict, known: dict, workers: int, models: tuple[str, ...] = (),
         network: bool = False) -> None:
    """A database's correct trials (``network``: a network's, of the tasks of :data:`NETWORK_TASKS`) joined to
    ``by_label`` (by task name), and their features to ``known`` (by task and configuration): as recorded, else
    from ``features-<db>.json``, else built again and kept there (``models``: the networks a worker loads)."""
    trials = [t for t in TuningDB(db, readonly=True).trials(status="ok") if t.time_ms]
    if not trials or any(t.device != device for t in trials):
        raise SystemExit(f"{db}: its trials are not all of this machine's device ({device})")
    if network:  # a network's database: its tasks that today's loading of the network still makes
        kept = [t for t in trials if unversioned(t.task_key) in NETWORK_TASKS]
        if len(kept) < len(trials):
            print(f"{db}: {len(trials) - len(kept)} of {len(trials)} trials left out (their tasks are not the "
                  f"network's today)", file=sys.stderr)
        trials = kept
    cache = ROOT / "benchmarks/results" / f"features-{Path(db).stem}.json"
    cached = json.loads(cache.read_text()) if cache.exists() else {}
    cached = {key: f for key, f in cached.items() if f is None or current(f)}  # made by an older liftpy: again
    mine: dict[str, list] = {}
    for t in trials:
        mine.setdefault(task_of(t.task_key, t.label)[0], []).append(t)
    missing = {label: [t for t in ts if recorded_features(t, cached) is None
                       and f"{t.task_key}|{config_key(t.config)}" not in cached]
               for label, ts in mine.items()}
    with ProcessPoolExecutor(workers, initializer=load_networks, initargs=(models,)) as pool:
        jobs = {label: pool.submit(featurise, ts[0].task_key, ts[0].label, [t.config for t in ts])
                for label, ts in missing.items() if ts}
        for label, job in jobs.items():
            for t, f in zip(missing[label], job.result()):
                cached[f"{t.task_key}|{config_key(t.config)}"] = f
    if any(missing.values()):
        cache.write_text(json.dumps(cached, sort_keys=True) + "\n")
    known.update(cached)
    for label, ts in mine.items():
        by_label.setdefault(label, []).extend(ts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", action="append", help="a tuning database of this machine's device (repeatable; "
                        "default: benchmarks/results/vgg16-route-zen3.sqlite)")
    parser.add_argument("--network", action="append", default=[], metavar="MODEL=DB",
                        help="an ONNX model and the database its network was tuned into (repeatable)")
    parser.add_argument("--min-trials", type=int, default=20, help="a task held out needs this many trials "
                        "(default 20; a network's tuning gives most of its tasks fewer)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out")
    args = parser.parse_args()
    from liftpy.runtime import device_info, get_device

    networks = [pair.split("=", 1) for pair in args.network]
    if any(len(pair) != 2 for pair in networks):
        parser.error("--network takes MODEL.onnx=DATABASE")
    models = tuple(model for model, _ in networks)
    load_networks(models)
    databases = args.db or ([] if networks else [str(ROOT / "benchmarks/results/vgg16-route-zen3.sqlite")])
    device = device_info(get_device(None)).name
    by_label: dict[str, list] = {}  # by the task's name
    known: dict = {}
    for db in databases:
        read(db, device, by_label, known, args.workers)
    for _, db in networks:
        read(db, device, by_label, known, args.workers, models, network=True)
    facts = device_info(get_device(None))
    rows = {}
    for label, ts in by_label.items():
        space = task_of(ts[0].task_key, ts[0].label)[1].space(facts)
        rows[label] = [({**f, **choice_features(space, t.config, facts)}, t.time_ms) for t in ts
                       if (f := recorded_features(t, known))]
    lines = machine_record(None) + [f"databases: {', '.join(databases + args.network)}; leave-one-task-out, "
                                    f"tasks of {args.min_trials} trials or more"]
    lines.append(f"{'task':32} {'trials':>6} {'tau learned':>12} {'tau analytic':>13} {'top5 in 20':>11} "
                 f"{'first/best learned':>19} {'first/best analytic':>20}")
    print("\n".join(lines), flush=True)
    summary = {"tau": [], "analytic": [], "recall": [], "first": [], "first_analytic": []}
    for label in sorted(rows):
        held = rows[label]
        if len(held) < args.min_trials:
            continue
        others = [(f, t, other) for other, rs in rows.items() if other != label for f, t in rs]
        model = LearnedModel()
        model.fit([f for f, _, _ in others], [t for _, t, _ in others], [k for _, _, k in others])
        features, measured = [f for f, _ in held], [t for _, t in held]
        learned, analytic = model.predict(features), AnalyticModel().predict(features)
        best = min(measured)
        first = measured[min(range(len(held)), key=learned.__getitem__)] / best
        first_analytic = measured[min(range(len(held)), key=analytic.__getitem__)] / best
        values = (kendall_tau(learned, measured), kendall_tau(analytic, measured), top_recall(learned, measured),
                  first, first_analytic)
        for key, value in zip(summary, values):
            summary[key].append(value)
        line = (f"{label:32} {len(held):>6} {values[0]:>12.3f} {values[1]:>13.3f} {values[2]:>11.2f} "
                f"{values[3]:>18.2f}x {values[4]:>19.2f}x")
        lines.append(line)
        print(line, flush=True)
    tail = ["median: " + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in summary.items() if v)]
    for name in ("first", "first_analytic"):
        if values := summary[name]:
            tail.append(f"{name}: within 1.1x of the best on {sum(v <= 1.1 for v in values)} of {len(values)} "
                         f"tasks, within 1.25x on {sum(v <= 1.25 for v in values)}, within 2x on "
                         f"{sum(v <= 2 for v in values)}; geometric mean {statistics.geometric_mean(values):.3f}x")
    lines += tail
    print("\n".join(tail))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
