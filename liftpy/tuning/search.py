"""The auto-tuner: measured search over a program task's configurations in the automatic route's space (the
paper's sections 5-6). It knows tasks, not layers: :mod:`liftpy.nn` makes a layer's tasks and asks here.

The search strategy and the measuring are decoupled: a *sampler* proposes configurations (random trials, then a
local search around the best -- :class:`LocalSearchSampler`); a model-guided sampler plugs in with the same two
methods. Every trial is measured in a worker process and stored in the tuning database as soon as it finishes;
running the same search again resumes it, skipping what is measured.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Protocol, Sequence

from ..errors import InputError, NoCorrectTrial
from .db import Best, Trial, TuningDB, best_of, config_key, joined, lighter_rivals
from .measure import Job, Measurer, check_seed
from .program import ROUTE, ProgramTask


class Sampler(Protocol):
    """Proposes (algorithm, configuration) pairs to measure, in order; told about every result (for
    model-guided search). ``first``: the configurations it proposes first because the space expects them to be
    good (the route's starting points), which the confirmation looks at twice (SECOND_LOOK)."""

    first: list[dict[str, int]]

    def proposals(self) -> Iterator[tuple[str, dict[str, int]]]: ...

    def observe(self, algorithm: str, config: dict[str, int], result: dict) -> None: ...


class LocalSearchSampler:
    """Random trials for a share ``explore`` of the budget (``first`` first: a configuration or a list of
    them, as the route's starting points), then a local search: an unmeasured neighbour
    (:meth:`~liftpy.rewrite.route.RouteSpace.neighbours`: one choice changed, or a block's shape) of the
    fastest correct configuration so far, else of the next fastest, else a random one again: random search
    alone found its best late, and a block size or a vector width next to a good one is usually good too. For
    any space with ``sample(n, seed)`` and ``neighbours``."""

    def __init__(self, algorithm: str, space, trials: int, seed: int = 0, first: dict | list[dict] | None = None,
                 explore: float = 0.4, pool: int = 1000):
        self.algorithm, self.space = algorithm, space
        self.first = [first] if isinstance(first, dict) else list(first or [])
        self.random_trials = max(1, int(trials * explore))
        self.pool, self.seed, self.rng = max(pool, 2 * trials), seed, random.Random(seed)
        self.times: dict[str, float] = {}  # by config_key, of the correct trials
        self._configs: dict[str, dict] = {}
        self._neighbours: dict[str, list[dict]] = {}

    def proposals(self):
        """``first``, then random configurations until the random share is explored -- counting the results
        observed before (a resumed search's) -- then the local search."""
        proposed: set[str] = set()
        randoms = self._randoms()
        while True:
            explored = max(len(proposed), len(self.times)) >= self.random_trials and len(proposed) >= len(self.first)
            local = self._next_neighbour(proposed) if explored else None
            config = local or next((c for c in randoms if config_key(c) not in proposed), None)
            if config is None:
                return
            proposed.add(config_key(config))
            yield self.algorithm, config

    def _randoms(self):
        """``first``, then the random pool, drawn only when ``first`` is spent: drawing it makes every sketch of
        a route space (minutes for Winograd's stages), which a short search of its starting points never needs."""
        yield from self.first
        yield from self.space.sample(self.pool, seed=self.seed)

    def _next_neighbour(self, proposed: set[str]) -> dict | None:
        for key in sorted(self.times, key=self.times.get):
            if key not in self._neighbours:
                self._neighbours[key] = self.space.neighbours(self._configs[key])
            options = [c for c in self._neighbours[key] if config_key(c) not in proposed]
            if options:
                return self.rng.choice(options)
        return None

    def observe(self, algorithm, config, result):
        if result.get("status") == "ok" and result.get("time_ms") is not None:
            key = config_key(config)
            self.times[key], self._configs[key] = float(result["time_ms"]), dict(config)


@dataclass
class Progress:
    """A one-line progress report on stderr: trials done, failures, best time so far, time left."""

    total: int
    done: int = 0
    failed: int = 0
    best_ms: float | None = None
    start: float = 0.0
    enabled: bool = True

    def update(self, result: dict):
        self.done += 1
        if result["status"] != "ok":
            self.failed += 1
        elif self.best_ms is None or result["time_ms"] < self.best_ms:
            self.best_ms = result["time_ms"]
        if self.enabled:
            elapsed = time.perf_counter() - self.start
            eta = elapsed / self.done * (self.total - self.done)
            best = f"{self.best_ms:.3f} ms" if self.best_ms is not None else "-"
            print(f"\r  trials {self.done}/{self.total}, failed {self.failed}, best {best}, "
                  f"ETA {int(eta // 60)}m{int(eta % 60):02d}s   ", end="", file=sys.stderr, flush=True)

    def finish(self):
        if self.enabled and self.done:
            print(file=sys.stderr)


def device_record(device) -> dict:
    from ..runtime import device_info, get_device

    info = device_info(get_device(device))
    return {"name": info.name, "driver": info.driver, "platform": info.platform}


def _measured(measurer: Measurer, job: Job, db_path) -> dict:
    """A job's result; a bug in liftpy met while preparing it stops the search with its traceback saved."""
    result = measurer.measure(job)
    if result["status"] != "bug":
        return result
    import tempfile

    from ..errors import InternalError

    report = Path(tempfile.gettempdir()) / f"liftpy-bug-{time.strftime('%Y%m%d-%H%M%S')}.txt"
    report.write_text(f"liftpy failed while preparing a tuning trial\ntuning: {job.subject.describe()}\n"
                      f"configuration: {job.config}\ninput seed: {job.seed}\ndatabase: {db_path}\n\n{result['cause']}")
    last = result["cause"].strip().splitlines()[-1]
    raise InternalError(f"a bug in liftpy stopped the tuning of {job.subject.describe()} ({job.config}): "
                        f"{last}; the traceback is in {report} (please report it); the trials measured so far are "
                        f"saved in {db_path}", report)


#: rounds of measuring the fastest trials again before the search gives its best (each a few trials)
CONFIRM_PASSES = 3
#: a starting point whose first median is within this factor of the fastest's is measured again with it: one
#: median can come from a slow spell (benchmarks/results/notes-tuning.md, 42b7c1a)
SECOND_LOOK = 1.35


def _measure_best_again(database: TuningDB, measurer: Measurer, task: ProgramTask, device: str, repeat: int,
                        count: int, rounds: int, search_seed: int, db_path, starts: Sequence[Mapping] = ()):
    """The ``count`` fastest correct trials not measured again yet, up to ``count`` of those near the fastest
    that move fewer bytes (:func:`~.db.lighter_rivals`: a first median can hide them), and up to ``count`` of
    the search's ``starts`` within SECOND_LOOK of the fastest, measured ``rounds`` more times, taking turns
    (:meth:`TuningDB.remeasured`): the machine's speed drifts, and a trial timed while it was fast must not win
    over one timed while it was slow. Repeated until the fastest trial is one measured again (at most
    :data:`CONFIRM_PASSES` passes)."""
    started = {config_key(task.complete(c)) for c in starts}
    for _ in range(CONFIRM_PASSES):
        ok = sorted((t for t in database.trials(task, device, "ok") if t.algorithm == ROUTE and t.time_ms),
                    key=lambda t: t.time_ms)
        if not ok or ok[0].measured_again:
            return
        rivals = [t for t in ok[:count] if not t.measured_again]
        lighter = lighter_rivals(ok[0], [t for t in ok if not t.measured_again])
        rivals += [t for t in lighter if t not in rivals][:count]
        second = [t for t in ok if not t.measured_again and t.time_ms <= ok[0].time_ms * SECOND_LOOK
                  and config_key(task.complete(t.config)) in started]
        rivals += [t for t in second if t not in rivals][:count]
        results: list[list[dict]] = [[] for _ in rivals]
        for round_ in range(1, rounds + 1):
            for trial, measured in zip(rivals, results):  # checked again, on inputs of this measurement's own
                inputs_seed = check_seed(task, ROUTE, trial.config, search_seed, round_)
                job = Job(task, ROUTE, trial.config, repeat, 1, seed=inputs_seed)
                measured.append(_measured(measurer, job, db_path))
        for trial, measured in zip(rivals, results):
            database.remeasured(task, ROUTE, trial.config, device, measured)


def _check_budget(trials, repeat, confirm, timeout):
    for name, value, least in (("trials", trials, 0), ("repeat", repeat, 1), ("confirm", confirm, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InputError(f"{name} must be an integer of at least {least}, got {value!r}")
    if not timeout > 0:
        raise InputError(f"timeout must be a positive number of seconds, got {timeout!r}")


def search(task: ProgramTask, sampler: Sampler, trials: int, db, device, seed: int, repeat: int, timeout: float,
           progress: bool = True, fault: str | None = None, cutoff: float | None = 10.0,
           confirm: int = 4) -> list[Trial]:
    """The measured search behind :func:`tune_task`: the sampler's proposals measured in a worker, each
    stored as it finishes, resumed from the database; the task's trials on the device.

    A configuration whose first run is more than ``cutoff`` times slower than the best so far is timed once
    instead of ``repeat`` times (None: never). At the end the ``confirm`` fastest correct trials (and the
    starting points near them) are measured three times more, taking turns (:func:`_measure_best_again`): on
    a shared machine speed drifts for seconds at a time, and the ranking must not follow it."""
    dev = device_record(device)
    database = TuningDB(db)
    # resumed: what an earlier run measured is not measured again, and the sampler knows its results (a
    # local search goes on from the best so far)
    previous = [t for t in database.trials(task, dev["name"]) if t.algorithm == ROUTE]
    measured = {config_key(task.complete(t.config)) for t in previous}
    for t in previous:
        if t.status == "ok":
            sampler.observe(ROUTE, task.complete(t.config), {"status": "ok", "time_ms": t.time_ms})
    todo = max(0, trials - len(measured))
    known = database.best(task, dev["name"])
    bar = Progress(todo, best_ms=known.time_ms if known is not None else None, start=time.perf_counter(),
                   enabled=progress)
    measurer = Measurer(device, timeout)
    try:
        for _, config in sampler.proposals():
            if bar.done >= todo:
                break
            key = config_key(config)
            if key in measured:
                continue  # resumed: measured by an earlier run
            cutoff_ms = cutoff * bar.best_ms if cutoff is not None and bar.best_ms is not None else None
            inputs_seed = check_seed(task, ROUTE, config, seed)
            job = Job(task, ROUTE, config, repeat, 1, fault, cutoff_ms, inputs_seed)
            result = _measured(measurer, job, db)
            database.record(task, ROUTE, config, dev, result)
            measured.add(key)
            sampler.observe(ROUTE, config, result)
            bar.update(result)
        if confirm:
            _measure_best_again(database, measurer, task, dev["name"], repeat, confirm, rounds=3, search_seed=seed,
                                starts=sampler.first, db_path=db)
        return [t for t in database.trials(task, dev["name"]) if t.algorithm == ROUTE]
    finally:
        bar.finish()
        measurer.close()
        database.close()


def tune_task(task: ProgramTask, trials: int = 100, db: str | Path = "tuning.sqlite", device=None, seed: int = 0,
              repeat: int = 5, timeout: float = 120.0, progress: bool = True, cutoff: float | None = 10.0,
              confirm: int = 4, sampler: Sampler | None = None, fault: str | None = None) -> Best:
    """Tune a program task through the automatic route: up to ``trials`` configurations of its space in total
    (the route's starting points first; those in the database count), each checked against the naive lowering,
    itself checked against the interpreter first (:mod:`liftpy.tuning.program`). A wrong result is recorded and
    never chosen; a bug in liftpy raises :class:`~liftpy.errors.InternalError`, what was measured staying in the
    database. Returns the best; none correct raises :class:`~liftpy.errors.NoCorrectTrial`.

    A function computing several values in turn is tuned stage by stage (:mod:`liftpy.rewrite.stages`), the
    trials shared among its stages (:func:`stage_budgets`); the stages' best are joined and the joined program
    checked against the naive lowering of the whole."""
    from .program import check_reference

    _check_budget(trials, repeat, confirm, timeout)
    task.check_memory(device)  # a trial's inputs and outputs fit the host and the device, before any is drawn
    stages = task.stages()
    if len(stages) > 1:
        if sampler is not None:
            raise InputError(f"{task.describe()} is tuned stage by stage: a sampler searches one stage's space")
        tuned = [tune_task(stage, budget, db, device, seed, repeat, timeout, progress, cutoff, confirm, None, fault)
                 for stage, budget in zip(stages, stage_budgets(stages, trials))]
        best = joined(task, tuned)
        check_joined(best, device, seed)
        return best
    space = task.space(device)
    if progress:
        print(f"  space: {space.describe(made=False)}", file=sys.stderr)
    check_reference(task, device, seed)
    if sampler is None:
        sampler = LocalSearchSampler(ROUTE, space, trials, seed, first=space.starting_points())
    found = search(task, sampler, trials, db, device, seed, repeat, timeout, progress, fault, cutoff, confirm)
    best = best_of(task, found, space)
    if best is None:
        causes = sorted({t.status for t in found})
        raise NoCorrectTrial(f"no correct trial of {task.describe()} (trials: {len(found)}; "
                             f"failures: {', '.join(causes) or 'none'})")
    return best


#: trials for a stage that runs once, when the program is prepared (a layer's transformed weights): its speed
#: costs nothing per call, so the starting points only
HOISTED_TRIALS = 2


def stage_budgets(stages: Sequence[ProgramTask], trials: int) -> list[int]:
    """Each stage's share of ``trials``: HOISTED_TRIALS for a stage run once, the rest evenly among the stages
    run on every call (the first ones one more where it does not divide), at least one each."""
    hoisted = [s.hoisted for s in stages]
    left = max(0, trials - HOISTED_TRIALS * sum(hoisted))
    per_call = max(1, len(stages) - sum(hoisted))
    shares = iter([left // per_call + (i < left % per_call) for i in range(per_call)])
    return [min(trials, HOISTED_TRIALS) if h else max(1, next(shares)) for h in hoisted]


def check_joined(tuned: Best, device=None, seed: int = 0) -> None:
    """The joined program run once against the naive lowering of the whole program, on inputs of its own: each
    stage was checked alone, and joining them is a rewrite too. A difference is a bug in liftpy."""
    from .. import compile as compile_program
    from ..errors import InternalError
    from ..interpreter import random_inputs
    from .program import close_to, naive_program

    task = tuned.task
    inputs = random_inputs(task.load(), task.size_map, seed + 1, task.function)
    expected = compile_program(naive_program(task), task.size_map, device, task.function).run(inputs, poison=True)
    got = compile_program(tuned.program, task.size_map, device, task.function).run(inputs, poison=True)
    error = close_to(got.output, expected.output)
    if error > 1:
        raise InternalError(f"the stages of {task.describe()}, each correct alone, are wrong joined (largest error "
                            f"{error:.3g} times the tolerance against the naive lowering): {tuned.config}")


def tune_program(path, sizes: Mapping[str, object], trials: int = 100, db: str | Path = "tuning.sqlite",
                 device=None, seed: int = 0, function: str | None = None, constants: Sequence[str] = (),
                 **options) -> Best:
    """Tune any program file at ``sizes`` (``function`` of it; ``constants``: its inputs that stay fixed across
    calls) through the automatic route: :func:`tune_task`'s ``options``. Returns the best."""
    task = ProgramTask.make(path, sizes, function, constants)
    return tune_task(task, trials, db, device, seed, **options)
