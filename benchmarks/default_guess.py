"""How good an untuned task's configuration is: the device's other tasks' best adapted and the cost model's
guesses (what an untuned task runs) against a long tuning's best.

    python benchmarks/default_guess.py [--tasks vgg16.10,conv1x1 | --network MODEL.onnx --steps 0,1,36]
                                       [--train-db DB ...] [--reference-db DB ...] [--no-guesses] [--out FILE]

A task is a VGG-16 layer or a program of examples/programs/ at benchmarks/programs.py's sizes (as in
benchmarks/search.py), or a step of an ONNX network (batch 1) by its index. For each task, the model's guess
(liftpy.tuning.guess: the first pick of a model-guided search) is found twice: with the analytic model alone (a
device with no data) and with the learned model trained on the ``--train-db`` trials of every *other* task
(leave-one-task-out: the model a device's earlier tunings would give it; their tasks' bests adapted among its
candidates, as liftpy.tuning.guess.best_guess has them). The transferred configuration is the best
of the most similar other task of the ``--train-db`` trials, adapted to the task (liftpy.tuning.transfer;
leave-one-task-out too). All are measured in one batch, their rounds in turns for 5 s, with the best of the
``--reference-db`` tunings of the task (refs-*.sqlite: 200 trials each on this machine), and given over that best.
Issue 49's targets for the guess: within 2x (analytic) and 1.25x (learned) on every task.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cost_model import unversioned  # noqa: E402
from benchmarks.search import measured_together, program_task, seed_database  # noqa: E402
from benchmarks.vgg16 import machine_record  # noqa: E402
from liftpy.tuning import TuningDB  # noqa: E402

RESULTS = ROOT / "benchmarks/results"
TASKS = ("vgg16.0,vgg16.2,vgg16.5,vgg16.7,vgg16.10,vgg16.12,vgg16.17,vgg16.19,vgg16.24,"
         "conv1x1,conv_bias_relu,depthwise,dilated_conv,grouped_conv,matmul,maxpool")


def guesses(task, space, train_dbs: list[str], seed: int, as_recorded: bool = False) -> tuple[dict, dict, float, int]:
    """(analytic guess, learned guess, seconds for both, trials the learned model saw) over the task's ``space``:
    the features of a pool made once and ranked by each model. ``as_recorded``: the training trials' features
    as the databases hold them (a network's tasks, which benchmarks/search.py cannot make again by name), not
    made afresh."""
    from liftpy.tuning.cost_model import DeviceModel
    from liftpy.tuning.guess import features_here, model_search

    start = time.perf_counter()
    made: dict = {}

    def featurise(configs):
        from liftpy.tuning.db import config_key

        fresh = [c for c in configs if config_key(c) not in made]
        for c, f in zip(fresh, features_here(task, space, fresh)):
            made[config_key(c)] = f
        return [made[config_key(c)] for c in configs]

    picks = []
    with tempfile.TemporaryDirectory() as directory:
        if as_recorded:
            held_out = unversioned(task.key)
            trials = [t for train in train_dbs for t in TuningDB(train, readonly=True).trials(
                device=space.device.name, status="ok") if unversioned(t.task_key) != held_out]
            models = [DeviceModel(), DeviceModel.of_trials(trials)]
        else:
            db = Path(directory) / "train.sqlite"
            sum(seed_database(db, train, task.key) for train in train_dbs)
            models = [DeviceModel.of(d, space.device.name) for d in (None, TuningDB(db, readonly=True))]
        if not models[1].rows:
            raise SystemExit(f"{', '.join(train_dbs)}: no trial of another task with features this liftpy reads")
        for model, elsewhere in zip(models, ([], others_bests(task, space, train_dbs))):
            search = model_search(task, space, model, 1, seed, featurise, elsewhere=elsewhere)
            picks.append(task.complete(search.propose(1)[0]))
    return picks[0], picks[1], time.perf_counter() - start, len(models[1].rows)


def recorded_by_today(train_dbs: list[str]) -> bool:
    """Whether ``train_dbs`` hold trials with their features as this liftpy reads them (a tuning by today's
    tuner): the model then trains on those as recorded, as a tuning's does -- Winograd's stages and a network's
    steps included, which benchmarks/search.py cannot make again by name; a multi-stage program's row timed whole
    carries none and is left out."""
    from liftpy.tuning.features import current

    return any(current(t.features) for db in train_dbs for t in TuningDB(db, readonly=True).trials(status="ok"))


def others_bests(task, space, train_dbs: list[str], limit: int | None = None) -> list[dict]:
    """The bests of the tasks of ``train_dbs`` but this one, adapted to ``space``, the most similar first (at most
    ``limit``, else liftpy.tuning.transfer's): what the learned guess ranks among its candidates
    (liftpy.tuning.guess.best_guess)."""
    from liftpy.tuning.transfer import TRANSFERRED, route_bests, transferred

    held_out = unversioned(task.key)
    trials = [t for db in train_dbs for t in TuningDB(db, readonly=True).trials(status="ok")
              if t.time_ms and unversioned(t.task_key) != held_out]
    return transferred(task.key, space, route_bests(trials), limit=limit or TRANSFERRED)


def transferred_best(task, space, train_dbs: list[str]) -> dict:
    """The best of the most similar task of ``train_dbs`` but this one, adapted to ``space`` (else its plain
    configuration)."""
    adapted = others_bests(task, space, train_dbs, limit=1)
    return task.complete(adapted[0] if adapted else space.plain())


def reference_best(task, reference_dbs: list[str]):
    key = unversioned(task.key)
    known = [t for db in reference_dbs for t in TuningDB(db, readonly=True).trials(status="ok")
             if t.time_ms and unversioned(t.task_key) == key]
    return min(known, key=lambda t: t.time_ms)


def named_tasks(args):
    """(name, task) of ``--network``'s ``--steps``, else of ``--tasks``."""
    from liftpy.nn.conv import route_task
    from liftpy.nn.layers import VGG16

    if args.network:
        import liftpy.onnx

        steps = liftpy.onnx.load(args.network, batch=1).steps
        return [(f"{Path(args.network).stem}.{i}", steps[int(i)].task) for i in args.steps.split(",")]
    return [(name, route_task(VGG16[name]) if name in VGG16 else program_task(name)) for name in args.tasks.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--network", help="an ONNX model whose steps (--steps) are the tasks")
    parser.add_argument("--steps", help="the network's steps, by index: 0,1,36")
    parser.add_argument("--train-db", nargs="+", default=[str(RESULTS / "vgg16-refs-9e2edb6-zen3.sqlite"),
                                                          str(RESULTS / "programs-refs-1467a6c-zen3.sqlite")])
    parser.add_argument("--reference-db", nargs="+")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--guesses", action=argparse.BooleanOptionalAction, default=True,
                        help="the cost model's guesses (a minute or two a task) beside the transferred best")
    parser.add_argument("--out")
    args = parser.parse_args()
    from liftpy.runtime import device_info, get_device

    references = args.reference_db or args.train_db
    as_recorded = bool(args.network) or recorded_by_today(args.train_db)
    lines = machine_record(None) + [
        f"trained on {', '.join(Path(d).name for d in args.train_db)} (leave-one-task-out); references: best of "
        f"{', '.join(Path(d).name for d in references)}, measured again with the guesses (5 s of rounds in turns)",
        f"{'task':16} {'transferred':>11} {'analytic/ref':>12} {'learned/ref':>12} {'ref ms':>9} "
        f"{'guess s':>8} {'trained on':>10}"]
    print("\n".join(lines), flush=True)
    ratios = {"transferred": [], "analytic": [], "learned": []}
    for name, task in named_tasks(args):
        space = task.space(device_info(get_device(None)))  # made once: tens of seconds for a VGG-16 layer
        transferred = transferred_best(task, space, args.train_db)
        analytic, learned, seconds, seen = (guesses(task, space, args.train_db, args.seed, as_recorded)
                                            if args.guesses else (None, None, 0.0, 0))
        best = reference_best(task, references)
        configs = {kind: c for kind, c in zip(ratios, (transferred, analytic, learned)) if c is not None}
        *times, ref_ms = measured_together(task, [*configs.values(), best.config], args.seed + 1)
        ratio = {kind: time_ms / ref_ms for kind, time_ms in zip(configs, times)}
        for kind, value in ratio.items():
            ratios[kind].append(value)
        cells = " ".join(f"{f'{ratio[k]:.2f}x' if k in ratio else '-':>{w}}" for k, w in zip(ratios, (11, 12, 12)))
        lines.append(f"{name:16} {cells} {ref_ms:>9.3f} {seconds:>8.0f} {seen:>10}")
        print(lines[-1], flush=True)
    for kind, values in ratios.items():
        if not values:
            continue
        lines.append(f"{kind}: median {statistics.median(values):.2f}x, worst {max(values):.2f}x over the reference")
        print(lines[-1], flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
