"""The auto-tuner: measured search over a program's configurations in the automatic route's space (the paper's
sections 5-6), a convolution layer being its program ``liftpy/nn/conv2d.lift`` at the layer's sizes.

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
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Protocol, Sequence

from ..errors import InputError, NoCorrectTrial
from ..nn.layers import ConvLayer, layer as named_layer
from .db import Trial, TuningDB, config_key, lighter_rivals, ranked
from .measure import Job, Measurer, check_seed
from .program import ROUTE, ProgramTask

if TYPE_CHECKING:
    from ..ir import Program


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
    fastest correct configuration so far, else of the next fastest, else a random one again. On the route's
    spaces random search alone found its best late (after 48 to 145 of 150 trials); a block size or a vector
    width next to a good one is usually good too. For any space with ``sample(n, seed)`` and ``neighbours``."""

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


def resolve_layer(layer_or_shapes) -> ConvLayer:
    """A layer from a name (``"vgg16.7"``), a ConvLayer, or a dict of make_layer's arguments."""
    from ..nn.conv import make_layer

    if isinstance(layer_or_shapes, ConvLayer):
        return layer_or_shapes
    if isinstance(layer_or_shapes, str):
        return named_layer(layer_or_shapes)
    return make_layer(**layer_or_shapes)


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
#: median can come from a slow spell (VGG-16 layer 19's rounded 16 x 6 block, a starting point, measured 1.29
#: times the pick's figure once and never again, and ran 0.88 times its time in interleaved calls; 42b7c1a, Zen 3)
SECOND_LOOK = 1.35


def _measure_best_again(database: TuningDB, measurer: Measurer, task: ProgramTask, device: str, repeat: int,
                        count: int, rounds: int, search_seed: int, db_path, starts: Sequence[Mapping] = ()):
    """The ``count`` fastest correct trials not measured again yet, up to ``count`` of those near the fastest
    that move fewer bytes (:func:`~.db.lighter_rivals`, which the ranking prefers once measured again), and up
    to ``count`` of the search's ``starts`` (the space's starting points: what the compiler expects to be good)
    within SECOND_LOOK of the fastest, measured
    ``rounds`` more times, taking turns (see TuningDB.remeasured): the machine's speed drifts (other tenants,
    library threads), and a trial timed while it was fast must not win over one timed while it was slow. A
    trial measured again may now rank below one that was not: then the fastest of those are measured again in
    their turn, until the fastest trial is one measured again (at most :data:`CONFIRM_PASSES` passes).

    The lighter ones are measured too because a first median can hide them: VGG-16 layer 17's 16 x 14 block
    (478 MiB moved per call) ran 8.67 ms in interleaved calls where the route's pick, 16 x 7 (728 MiB), ran
    8.94, and the search had measured it again only by chance, at 8.1, 12.8 and 13.0 (c7939f9, Zen 4)."""
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
    stored as it finishes, resumed from the database; the fastest measured again at the end.

    A configuration whose first run is more than ``cutoff`` times slower than the best so far is timed once
    instead of ``repeat`` times (None: never). At the end the ``confirm`` fastest correct trials (and the
    starting points near them, see :func:`_measure_best_again`) are measured
    three times more, taking turns, and keep the median of these three medians: on a shared machine speed
    drifts for seconds at a time (a trial timed during the search in a fast phase measured 16.7 ms, then 50 and
    66 ms beside its rivals), and the ranking must not follow it."""
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
    known = database.best(task, dev["name"], ROUTE)
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


@dataclass(frozen=True)
class Tuned:
    """The best correct trial of a program: the low-level program it stands for, its configuration (every
    choice of the route), its time (median of the kernel events, ms) and every trial of the search. A program
    tuned stage by stage: its stages' best joined, ``config`` each stage's configuration by its name, the time
    the sum of the stages that run on every call, ``stages`` each stage's Tuned."""

    task: ProgramTask
    program: "Program"
    config: dict
    time_ms: float
    trials: tuple[Trial, ...]
    stages: tuple["Tuned", ...] = ()

    @property
    def device(self) -> str:
        """The device the best was measured on."""
        return self.stages[0].device if self.stages else self.best.device

    @property
    def memory_bytes(self) -> int:
        """The global memory the best program allocates beside its inputs (a staged program's: its stages')."""
        if self.stages:
            return sum(stage.memory_bytes for stage in self.stages)
        return self.best.memory_bytes or 0

    @property
    def best(self) -> Trial:
        """The trial the best configuration was measured by (its memory, its kernels' times, its cause); a
        program tuned stage by stage has one per stage (``stages``)."""
        if self.stages:
            raise InputError(f"{self.task.describe()} was tuned stage by stage: each stage has its best trial")
        return next(t for t in self.trials if t.status == "ok" and config_key(t.config) == config_key(self.config))

    def compile(self, device=None):
        """The best program compiled for ``device`` (an Executable: ``.run(inputs)``, ``.prepare(constants)``)."""
        from .. import compile as compile_program

        return compile_program(self.program, self.task.size_map, device, self.task.function)


def tune_task(task: ProgramTask, trials: int = 100, db: str | Path = "tuning.sqlite", device=None, seed: int = 0,
              repeat: int = 5, timeout: float = 120.0, progress: bool = True, cutoff: float | None = 10.0,
              confirm: int = 4, sampler: Sampler | None = None, fault: str | None = None) -> Tuned:
    """Tune a program task through the automatic route (:mod:`liftpy.rewrite.route`): up to ``trials``
    configurations of its space in total (the route's starting points first: its default and one of each kind
    of vectors; those in the database count), each checked against the naive route, itself checked against the
    interpreter first (see :mod:`liftpy.tuning.program`; a wrong result is recorded and never chosen; a bug in
    liftpy met while preparing a trial raises :class:`~liftpy.errors.InternalError` with its traceback saved to
    a file, what was measured before staying in the database). Returns the best.

    A function computing several values in turn is tuned stage by stage (:mod:`liftpy.rewrite.stages`), the
    trials shared among its stages (:func:`stage_budgets`); the stages' best are joined and the joined program
    checked against the naive route of the whole."""
    from .program import check_reference

    _check_budget(trials, repeat, confirm, timeout)
    stages = task.stages()
    if len(stages) > 1:
        if sampler is not None:
            raise InputError(f"{task.describe()} is tuned stage by stage: a sampler searches one stage's space")
        tuned = [tune_task(stage, budget, db, device, seed, repeat, timeout, progress, cutoff, confirm, None, fault)
                 for stage, budget in zip(stages, stage_budgets(stages, trials))]
        best = joined_stages(task, tuned)
        check_joined(best, device, seed)
        return best
    space = task.space(device)
    if progress:
        print(f"  space: {space.describe(made=False)}", file=sys.stderr)
    check_reference(task, device, seed)
    if sampler is None:
        sampler = LocalSearchSampler(ROUTE, space, trials, seed, first=space.starting_points())
    found = search(task, sampler, trials, db, device, seed, repeat, timeout, progress, fault, cutoff, confirm)
    return best_of(task, found, space)


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


def joined_stages(task: ProgramTask, tuned: Sequence[Tuned]) -> Tuned:
    """The stages' best joined into one program (:func:`liftpy.rewrite.stages.join_stages`)."""
    from ..rewrite.stages import join_stages

    program = join_stages(task.load(), task.function, {t.task.stage: t.program for t in tuned})
    time_ms = per_call_ms((t.task, t.time_ms) for t in tuned)
    trials = tuple(trial for t in tuned for trial in t.trials)
    return Tuned(task, program, {t.task.stage: t.config for t in tuned}, time_ms, trials, tuple(tuned))


def per_call_ms(stage_times: Iterable[tuple[ProgramTask, float]]) -> float:
    """A staged program's time per call: its stages' (task, time), those run once when it is prepared left out."""
    return sum(time_ms for stage, time_ms in stage_times if not stage.hoisted)


def check_joined(tuned: Tuned, device=None, seed: int = 0) -> None:
    """The joined program run once against the naive route of the whole program, on inputs of its own: each
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
                            f"{error:.3g} times the tolerance against the naive route): {tuned.config}")


def tune_program(path, sizes: Mapping[str, object], trials: int = 100, db: str | Path = "tuning.sqlite",
                 device=None, seed: int = 0, function: str | None = None, constants: Sequence[str] = (),
                 **options) -> Tuned:
    """Tune any program file at ``sizes`` (``function`` of it; ``constants``: its inputs that stay fixed across
    calls) through the automatic route: :func:`tune_task`'s ``options``. Returns the best."""
    task = ProgramTask.make(path, sizes, function, constants)
    return tune_task(task, trials, db, device, seed, **options)


def tune(layer_or_shapes, trials: int = 100, db: str | Path = "tuning.sqlite", device=None, seed: int = 0,
         algorithm: str = "auto", **options) -> Tuned:
    """Tune a convolution layer (a name such as ``"vgg16.7"``, a ConvLayer, or make_layer's arguments as a
    dict) through the automatic route (:func:`tune_task`'s ``options``): its program, ``liftpy/nn/conv2d.lift``
    at its sizes with its weights and biases constant, and where the layer is a 3x3 convolution of stride 1
    Winograd's (``conv2d_winograd.lift``, :mod:`liftpy.nn.winograd`), ``trials`` each (``algorithm``: "auto"
    for both, "direct" or "winograd" for one). Returns the faster; ``nn.Conv2d`` and ``nn.conv2d`` then find it
    in the database."""
    return fastest(resolve_layer(layer_or_shapes), algorithm,
                   lambda name, task: tune_task(task, trials, db, device, seed, **options))


def fastest(layer: ConvLayer, algorithm: str, tune_one) -> Tuned:
    """The fastest of the layer's programs (:func:`liftpy.nn.conv.layer_tasks`), each tuned by ``tune_one(name,
    task)``. With "auto", a program after the first (the direct one, which computes every layer) that gets no
    correct trial is left out, and the reason said on stderr: the layer runs the others."""
    from ..nn.conv import AUTO, layer_tasks

    tuned = []
    for index, (name, task) in enumerate(layer_tasks(layer, algorithm)):
        try:
            tuned.append(tune_one(name, task))
        except NoCorrectTrial as e:
            if algorithm != AUTO or index == 0:
                raise
            print(f"note: {name} left out: {e.message}", file=sys.stderr)
    return min(tuned, key=lambda t: t.time_ms)


def best_in(task: ProgramTask, database: TuningDB, device=None) -> Tuned:
    """The best the database holds for ``task`` on ``device`` (any device: None); a staged program's stages'
    best joined."""
    stages = task.stages()
    if len(stages) > 1:
        return joined_stages(task, [best_in(stage, database, device) for stage in stages])
    return best_of(task, database.trials(task, device))


def best_of(task, found: Sequence[Trial], space=None) -> Tuned:
    """The best correct trial among ``found`` (:func:`~.db.ranked`) as a :class:`Tuned`; none correct is an error
    naming why."""
    ok = ranked(found)
    if not ok:
        causes = sorted({t.status for t in found})
        raise NoCorrectTrial(f"no correct trial of {task.describe()} (trials: {len(found)}; "
                             f"failures: {', '.join(causes) or 'none'})")
    best = ok[0]
    space = space or task.space()
    return Tuned(task, space.lower(best.config), dict(best.config), best.time_ms, tuple(found))
