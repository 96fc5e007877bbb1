"""The tuner: tasks tuned with one budget through the automatic route's spaces, in parts with narrow interfaces.

- a **search strategy** per task proposes configurations of its space a batch at a time
  (:mod:`liftpy.tuning.strategy`);
- a **builder** lowers them and generates their kernels on a pool of processes, apart from the device
  (:mod:`liftpy.tuning.builder`);
- a **runner** checks and times built candidates on a device, answering futures (:mod:`liftpy.tuning.runner`;
  on a Ray cluster, :mod:`liftpy.tuning.distributed`);
- the **database** is the only writer of trials, each stored as it finishes (:mod:`liftpy.tuning.db`);
- the **task scheduler** gives each batch to the task where the total time is expected to gain the most
  (:mod:`liftpy.tuning.scheduler`).

:class:`Tuner` holds the parts; the next batch is built while the runner measures the last. Running the same
tuning again resumes it: what the database holds is not measured again, and the strategies know its results.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import sys
import tempfile
import time
from concurrent.futures import CancelledError, TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import DatabaseError, InputError, InternalError, NoCorrectTrial
from .builder import Build, Built, LocalBuilder
from .cost_model import AnalyticModel, DeviceModel, block_figures
from .db import Best, TuningDB, best_of, chosen, config_key, flat_config, joined, lighter_rivals
from .features import current
from .measure import Timing, batch_seed
from .program import JOINED, ROUTE, ProgramTask
from .runner import SCRIPT_GUARD, Batch, LocalRunner, leave_if_importing_the_script
from .scheduler import Slot, TaskScheduler
from .strategy import LocalSearch, ModelGuided, SearchStrategy
from .transfer import route_bests, transferred

#: rounds of measuring the fastest trials again before a task's best is given (each a batch of a few trials)
CONFIRM_PASSES = 3
#: a configuration the strategy proposed first (its ``first``) whose first median is within this factor of the
#: fastest's is measured again with it: one median can come from a slow spell
#: (benchmarks/results/notes-tuning.md, 42b7c1a)
SECOND_LOOK = 1.35
#: trials for a stage that runs once, when the program is prepared (a layer's transformed weights): its speed
#: costs nothing per call, so its first batch only
HOISTED_TRIALS = 2
#: candidates built, checked and timed together (their timing rounds taken in turns)
BATCH = 8
#: a candidate whose first timing round is slower than this factor of the leader's (the batch's fastest, or
#: the task's best so far) takes no more rounds (:class:`~liftpy.tuning.measure.Timing`'s ``race``). A
#: batch's first rounds are taken in turns, so they meet the same slow spell; against a best measured minutes
#: before, only a spell of 2x or more (the worst seen on the shared machines here) could race out a true rival
RACE = 2.0
#: the search strategies a tuning can be asked for by name
STRATEGIES = ("model", "local", "random")
#: random candidates a model-guided search featurises and ranks at its start (then the neighbours of the best):
#: at most MODEL_POOL, POOL_PER_TRIAL for each trial of its budget (a candidate costs its generation, a few tenths
#: of a second: a search of a few trials need not pay a minute to rank them)
MODEL_POOL = 64
POOL_PER_TRIAL = 8
#: the random configurations of which a model-guided search featurises its pool, the best by their register
#: blocks alone (nothing generated): DRAWN_PER_POOL for each in the pool and at least LEAST_DRAWN, from as many
#: structures as the pool has candidates (each structure's sketch made costs; a draw within the sketches made
#: costs little, and a network's small task, its pool 24, then still meets its structures' best blocks)
DRAWN_PER_POOL, LEAST_DRAWN = 4, 512
#: the climbs of a model-guided search (the neighbours of its best predicted, before a batch): one each
#: CLIMB_TRIALS trials of its budget, at most MODEL_CLIMBS (a climb generates a few dozen candidates: a search
#: of a few trials, a network's small task, pays none)
MODEL_CLIMBS, CLIMB_TRIALS = 3, 10
#: candidates in a tuning's first batch: built quickly, so that the runner starts while the next is built
FIRST_BATCH = 2
#: how long the rivals measured again take rounds in turns: the figure of a pick must hold across the machine's
#: slow spells, which last seconds (benchmarks/results/notes-tuning.md)
CONFIRM_SPAN_MS = 5000.0


@dataclass
class Progress:
    """A one-line progress report on stderr: trials done, failures, the total time so far, time left."""

    total: int
    done: int = 0
    failed: int = 0
    start: float = 0.0
    enabled: bool = True

    def update(self, result: dict, total_ms: float | None):
        self.done += 1
        self.failed += result["status"] != "ok"
        if self.enabled:
            elapsed = time.perf_counter() - self.start
            eta = elapsed / self.done * max(0, self.total - self.done)
            best = f"{total_ms:.3f} ms" if total_ms is not None else "-"
            print(f"\r  trials {self.done}/{self.total}, failed {self.failed}, best {best}, "
                  f"ETA {int(eta // 60)}m{int(eta % 60):02d}s   ", end="", file=sys.stderr, flush=True)

    def finish(self):
        if self.enabled and self.done:
            print(file=sys.stderr)


def task_slots(task: ProgramTask, group: int = 0, alternative: str = "", weight: float = 1.0) -> list[Slot]:
    """A task's slots in a tuning: one, or for a function computing several values in turn one per stage
    (:mod:`liftpy.rewrite.stages`), a stage run once when the program is prepared capped at HOISTED_TRIALS."""
    return [Slot(stage, group, alternative, weight, per_call=not stage.hoisted,
                 cap=HOISTED_TRIALS if stage.hoisted else None, family=family(stage)) for stage in task.stages()]


def family(task: ProgramTask) -> str:
    """What makes tasks similar for the scheduler (:attr:`Slot.family`): the same program, function and stage, at
    any sizes -- a network's convolutions with a ReLU are one family."""
    return f"{Path(task.path).name}:{task.function or ''}:{task.stage or ''}"


def _work(features: Mapping | None) -> float | None:
    """The multiply-adds a candidate's kernels do a call, from its features (None where unknown)."""
    return (features or {}).get("reduction_updates")


@dataclass
class _Tuned:
    """A slot's part of a tuning: its space, strategy and what is measured."""

    slot: Slot
    space: object
    strategy: SearchStrategy
    measured: set[str]


def _check_budget(trials, rounds, confirm, timeout, batch):
    for name, value, least in (("trials", trials, 0), ("repeat", rounds, 1), ("confirm", confirm, 0),
                               ("batch", batch, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InputError(f"{name} must be an integer of at least {least}, got {value!r}")
    if not timeout > 0:
        raise InputError(f"timeout must be a positive number of seconds, got {timeout!r}")


class Tuner:
    """The tuning context: a database (the path: only the tuner writes it), a runner (default: a
    :class:`~liftpy.tuning.runner.LocalRunner` on ``device``), a builder (default: the runner's, else a
    :class:`~liftpy.tuning.builder.LocalBuilder` whose processes the local runner pauses while it times), a
    strategy per task (``"model"``: :class:`ModelGuided`, ranked by the device's cost model, the default;
    ``"local"``: :class:`LocalSearch`; ``"random"``; or a factory ``strategy(space, trials, seed, first)``), the
    timing protocol (``repeat``: its rounds) and the search's options. A runner measuring several batches at once
    says how many in ``parallelism`` (a Ray cluster's devices); the tuner keeps that many in flight, and builds the
    next while they run. Use it in a ``with`` block, or close it; a runner or builder given is the caller's to close."""

    def __init__(self, db: str | Path = "tuning.sqlite", device=None, *, seed: int = 0, repeat: int = 5,
                 timeout: float = 120.0, progress: bool = True, confirm: int = 4, cutoff: float | None = 10.0,
                 batch: int = BATCH, builder=None, runner=None,
                 strategy: str | Callable[..., SearchStrategy] = "model", fault: str | None = None):
        leave_if_importing_the_script()
        _check_budget(0, repeat, confirm, timeout, batch)
        self.db, self.seed, self.timeout, self.progress = db, seed, timeout, progress
        self.confirm, self.cutoff, self.batch, self.fault = confirm, cutoff, batch, fault
        self.timing = Timing(rounds=repeat)
        self._first = True  # the next batch is a tuning's first (FIRST_BATCH)
        if not callable(strategy) and strategy not in STRATEGIES:
            raise InputError(f"no search strategy {strategy!r} (choose from {', '.join(STRATEGIES)})")
        self.strategy = strategy
        self._model: DeviceModel | None = None  # the device's cost model, made when a search first asks
        self._trials: list | None = None  # the device's correct trials, read when a search first asks
        self._bests: dict | None = None  # each task's best of them
        self._own = []  # the parts made here, closed here
        self.database = TuningDB(db)
        try:
            if runner is None:
                if builder is None:
                    builder = LocalBuilder()
                    self._own.append(builder)
                runner = LocalRunner(device, timeout, quiet=lambda: getattr(builder, "process_ids", ()))
                self._own.append(runner)
            elif builder is None:
                builder = runner.builder() if hasattr(runner, "builder") else LocalBuilder()
                self._own.append(builder)
        except BaseException:
            self.close()
            raise
        self.builder, self.runner = builder, runner
        #: the device's record (name, driver, platform) and facts (what the builder generates for)
        self.device, self.device_facts = runner.device, runner.device_facts

    def __enter__(self) -> "Tuner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for part in reversed(self._own):
            part.close()
        self._own = []
        self.database.close()

    # -------------------------------------------------------------------------------- tuning
    def tune(self, slots: Sequence[Slot], trials: int) -> list[Best | None]:
        """Tune ``slots`` with ``trials`` trials in all (those in the database count; one a slot at least), as the
        scheduler allots them; then the fastest of each measured again in turns. Each slot's best (None: no
        correct trial)."""
        _check_budget(trials, self.timing.rounds, self.confirm, self.timeout, self.batch)
        slots = list(slots)
        if trials:  # a trial for each slot at least: a staged program joins every stage's best
            trials = max(trials, len(slots))
        share = max(1, trials // max(1, len(slots)))
        tuned, scheduler = [], TaskScheduler(slots, trials, self.batch)
        if self.strategy == "model":
            self._bring_features_current(slot.task for slot in slots)
        for index, slot in enumerate(slots):
            tuned.append(self._start(index, slot, share, scheduler))
        bar = Progress(max(0, trials - scheduler.spent), start=time.perf_counter(), enabled=self.progress)
        parallel = max(1, int(getattr(self.runner, "parallelism", 1)))  # batches the runner measures at once
        self._first = True
        try:
            running: collections.deque = collections.deque()
            building = self._build_next(scheduler, tuned)
            while building is not None or running:
                while building is not None and len(running) < parallel:
                    running.append(self._run(building, tuned, scheduler))
                    with self._host_work():  # proposed while the runner checks, built while it measures
                        building = self._build_next(scheduler, tuned)
                self._record(running.popleft(), tuned, scheduler, bar)
        finally:
            bar.finish()
        for part in tuned:
            if self.confirm:
                self._measure_best_again(part)
        return [best_of(p.slot.task, self.database.trials(p.slot.task, self.device["name"], algorithm=ROUTE),
                        p.space) for p in tuned]

    def _start(self, index: int, slot: Slot, share: int, scheduler: TaskScheduler) -> _Tuned:
        """A slot's space and strategy, told what the database holds of it (a resumed tuning)."""
        task = slot.task
        if hasattr(self.runner, "prepare"):  # its worker starts and makes the reference while the spaces are made
            self.runner.prepare(task.portable())
        space = task.space(self.device_facts)
        if self.progress:
            print(f"  space of {task.describe()}: {space.describe(made=False)}", file=sys.stderr)
        strategy = self._strategy_for(task, space, slot.cap or share)
        measured = set()
        for trial in self.database.trials(task, self.device["name"], algorithm=ROUTE):
            config = task.complete(trial.config)
            measured.add(config_key(config))
            ok = trial.status == "ok" and trial.time_ms is not None
            if ok:
                strategy.observe(config, {"status": "ok", "time_ms": trial.time_ms})
            scheduler.observe(index, trial.time_ms if ok else None, handed=False, work=_work(trial.features))
        return _Tuned(slot, space, strategy, measured)

    def _strategy_for(self, task: ProgramTask, space, trials: int) -> SearchStrategy:
        """The search of a task: the model-guided one measures the best of the device's most similar task
        (adapted) and the analytic model's pick in its first batch, and ranks the rest with the device's model;
        the others (for comparison) start from random configurations."""
        if self.strategy == "model":
            model = self._device_model()
            elsewhere = transferred(task.key, space, self._bests_elsewhere())
            pool = min(MODEL_POOL, POOL_PER_TRIAL * trials)
            return ModelGuided(space, trials, self.seed, None, model, lambda configs: self._featurise(task, configs),
                               lambda features, time_ms: model.learn(features, time_ms, task.key), pool=pool,
                               climbs=min(MODEL_CLIMBS, trials // CLIMB_TRIALS), second_opinion=AnalyticModel(),
                               prefilter=lambda configs: block_figures(space, configs),
                               drawn=max(LEAST_DRAWN, DRAWN_PER_POOL * pool),
                               drawn_structures=pool, elsewhere=elsewhere)
        if callable(self.strategy):
            return self.strategy(space, trials, self.seed, None)
        return LocalSearch(space, trials, self.seed, None, explore=1.0 if self.strategy == "random" else 0.4)

    def _bring_features_current(self, tasks) -> None:
        """The device's correct trials of these tasks whose features an older liftpy read (or none did:
        :func:`~.features.current`) featurised again by the builder -- generated, nothing run -- and stored, so that
        the model learns from the device's whole history of them. Where the database cannot store them, the
        tuning goes on without them (they are what the builder makes again at will, not measurements)."""
        device = self.device["name"]
        for task in dict.fromkeys(tasks):
            stale = [t for t in self.database.trials(task, device, status="ok", algorithm=ROUTE)
                     if not current(t.features)]
            if not stale:
                continue
            if self.progress:
                print(f"  {task.describe()}: the features of {len(stale)} trials read again (this liftpy reads "
                      "kernels otherwise than the one that measured them)", file=sys.stderr)
            made = self._featurise(task, [task.complete(t.config) for t in stale])
            try:
                self.database.set_features(task, ROUTE, device,
                                           [(t.config, f) for t, f in zip(stale, made) if f is not None])
            except DatabaseError as e:
                print(f"warning: {e.message}; the model learns without those trials", file=sys.stderr)

    def _device_trials(self) -> list:
        """The device's correct trials, every task's, as the database held them when a search first asked: read
        once for its model and its tasks' bests."""
        if self._trials is None:
            self._trials = self.database.trials(device=self.device["name"], status="ok")
        return self._trials

    def _bests_elsewhere(self) -> dict:
        """Each task's best trial through the route on this device (:func:`~liftpy.tuning.transfer.route_bests`)."""
        if self._bests is None:
            self._bests = route_bests(self._device_trials())
        return self._bests

    def _device_model(self) -> DeviceModel:
        """The device's cost model, trained on every task's trials of the device in the database."""
        if self._model is None:
            self._model = DeviceModel.of_trials(self._device_trials())
        return self._model

    def _featurise(self, task: ProgramTask, configs: list[dict]) -> list[dict | None]:
        """Candidates' features, from the builder (lowered and generated, nothing compiled or run); None for
        one that does not build. A process that dies generating one (nothing compiled) dies as it starts, where
        it imports a script that tunes as it is imported: the tuning stops, saying so."""
        futures = self.builder.build([Build(task.portable(), self.device_facts, c) for c in configs])
        out = []
        for future in futures:
            try:
                built = future.result(timeout=self.timeout)
            except (FutureTimeout, BrokenProcessPool, CancelledError) as e:
                if not isinstance(e, CancelledError):  # cancelled: the builder was reset for another candidate
                    self._reset_builder(e)
                if isinstance(e, BrokenProcessPool):
                    raise InputError(f"a builder process died: {SCRIPT_GUARD}") from None
                out.append(None)
                continue
            if built.failure is not None and built.failure["status"] == "bug":
                self._stop_for_bug(task, built.config, None, built.failure["cause"])
            out.append(built.features if built.failure is None else None)
        return out

    def _reset_builder(self, error: Exception) -> None:
        """After a build past the time limit (its process is stuck) or a process that died: the builder started
        afresh, unless another candidate's failure has reset it already."""
        stuck = isinstance(error, FutureTimeout) or getattr(self.builder, "broken", True)
        if stuck and hasattr(self.builder, "reset"):
            self.builder.reset()

    def _build_next(self, scheduler: TaskScheduler, tuned: list[_Tuned]):
        """The next batch the scheduler allots, proposed by its slot's strategy and handed to the builder:
        (slot index, configurations, build futures); None when the budget is spent."""
        while (choice := scheduler.next()) is not None:
            index, count = choice
            if self._first and count > FIRST_BATCH:  # the first batch small: the runner starts sooner
                scheduler.give_back(index, count - FIRST_BATCH)
                count = FIRST_BATCH
            self._first = False
            part = tuned[index]
            configs: list[dict] = []
            while len(configs) < count:
                proposed = part.strategy.propose(count - len(configs))
                if not proposed:
                    scheduler.exhausted(index)
                    break
                for config in proposed:
                    key = config_key(config)
                    if key not in part.measured:  # resumed: measured by an earlier run
                        part.measured.add(key)
                        configs.append(config)
            scheduler.give_back(index, count - len(configs))
            if configs:
                builds = [self._build(part.slot.task, c) for c in configs]
                return index, configs, self.builder.build(builds)
        return None

    def _build(self, task: ProgramTask, config: dict) -> Build:
        """What the builder is asked for a candidate: its kernels compiled too where the builder shares the
        runner's machine (a local builder beside a local runner)."""
        return Build(task.portable(), self.device_facts, config, self.fault, compile=self._compiles)

    @property
    def _compiles(self) -> bool:
        """Whether the builder compiles the kernels too (a local builder beside a local runner)."""
        return getattr(self.builder, "compiles", False) and getattr(self.runner, "on_this_machine", False)

    def _built(self, task: ProgramTask, configs: list[dict], futures) -> list[Built]:
        """The builder's answers. A build that compiles and runs past the time limit, or whose process dies
        (its kernel's first launch hung or crashed), is built again without compiling: the runner then meets
        the fault and charges it to the candidate. Past the time limit otherwise: a timeout."""
        builts = []
        for config, future in zip(configs, futures):
            build = self._build(task, config)
            while True:
                try:
                    builts.append(future.result(timeout=self.timeout))
                    break
                except CancelledError:  # the builder was reset for another candidate: built again
                    future = self.builder.build([build])[0]
                    continue
                except (FutureTimeout, BrokenProcessPool) as e:
                    self._reset_builder(e)
                    if build.compile:
                        build = dataclasses.replace(build, compile=False)
                        future = self.builder.build([build])[0]
                    elif isinstance(e, FutureTimeout):
                        builts.append(Built(build, None, {"status": "timeout", "cause": f"not built after "
                                                          f"{self.timeout:g} s (lower and generate)"}, self.timeout))
                        break
                    else:  # it dies at start where it imports a script that tunes as it is imported
                        raise InputError(f"a builder process died: {SCRIPT_GUARD}") from None
        for built in builts:
            if built.failure is not None and built.failure["status"] == "bug":
                self._stop_for_bug(task, built.config, None, built.failure["cause"])
        return builts

    def _seed(self, task, configs, measurement: int = 0) -> int:
        return batch_seed(task, configs, self.seed, measurement)

    def _run(self, building, tuned: list[_Tuned], scheduler: TaskScheduler):
        """A built batch handed to the runner: (slot index, configurations, result futures, the inputs' seed,
        each candidate's features, recorded with its result). A candidate whose warm-up's fastest call is
        ``cutoff`` times slower than its task's best so far is timed by it alone; one whose first round is
        :data:`RACE` times slower than the leader's, for that round."""
        index, configs, futures = building
        task = tuned[index].slot.task
        builts = self._built(task, configs, futures)
        best = scheduler.states[index].best
        cutoff_ms = self.cutoff * best if self.cutoff is not None and best is not None else None
        batch = Batch(task.portable(), tuple(builts), self._seed(task, configs),
                      self._timing(task, cutoff_ms=cutoff_ms, race=RACE, leader_ms=best))
        return index, configs, self.runner.run(batch), batch.seed, [b.features for b in builts]

    def _record(self, running, tuned: list[_Tuned], scheduler: TaskScheduler, bar: Progress) -> None:
        index, configs, futures, seed, features = running
        part = tuned[index]
        results = [future.result() for future in futures]  # waited for without the host: the worker may want it
        with self._host_work():
            for config, result, known in zip(configs, results, features):
                if result["status"] == "bug":
                    self._stop_for_bug(part.slot.task, config, seed, result["cause"])
                if known:
                    result = {**result, "features": known}
                self.database.record(part.slot.task, ROUTE, config, result.get("device", self.device), result)
                part.strategy.observe(config, result)
                ok = result["status"] == "ok" and result.get("time_ms") is not None
                scheduler.observe(index, result["time_ms"] if ok else None, work=_work(known))
                bar.update(result, scheduler.total_ms())

    def _host_work(self):
        """A block of this process's computing kept apart from the runner's timing, where the runner shares its
        machine (:meth:`LocalRunner.host_work`)."""
        return getattr(self.runner, "host_work", contextlib.nullcontext)()

    def _stop_for_bug(self, task, config, seed, cause: str):
        """A bug in liftpy met while building or measuring a candidate stops the tuning, its traceback saved."""
        report = Path(tempfile.gettempdir()) / f"liftpy-bug-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
        report.write_text(f"liftpy failed while preparing a tuning trial\ntuning: {task.describe()}\n"
                          f"configuration: {config}\ninput seed: {seed}\ndatabase: {self.db}\n\n{cause}")
        last = cause.strip().splitlines()[-1] if cause.strip() else "(no message)"
        raise InternalError(f"a bug in liftpy stopped the tuning of {task.describe()} ({config}): {last}; the "
                            f"traceback is in {report} (please report it); the trials measured so far are saved in "
                            f"{self.db}", report)

    # -------------------------------------------------------------------------------- the confirmation
    def _measure_best_again(self, part: _Tuned) -> None:
        """The ``confirm`` fastest correct trials not measured again yet, up to ``confirm`` of those near the
        fastest that move fewer bytes (:func:`~.db.lighter_rivals`: a first median can hide them), and up to
        ``confirm`` of the strategy's ``first`` within SECOND_LOOK of the fastest, measured again together, their
        rounds in turns for CONFIRM_SPAN_MS, on inputs of their own (:meth:`TuningDB.remeasured`): trials of
        different batches were timed at different times, and one timed while the machine was fast must not win
        over one timed while it was slow. Repeated until the fastest trial is one measured again (at most
        CONFIRM_PASSES passes). A task with one correct trial has nothing to order: its figure is its search's."""
        task, count = part.slot.task, self.confirm
        started = {config_key(task.complete(c)) for c in part.strategy.first}
        for measurement in range(1, CONFIRM_PASSES + 1):
            ok = sorted((t for t in self.database.trials(task, self.device["name"], "ok", ROUTE) if t.time_ms),
                        key=lambda t: t.time_ms)
            if not ok or ok[0].measured_again or len(ok) == 1:  # one correct trial: no rival to order
                return
            rivals = [t for t in ok[:count] if not t.measured_again]
            lighter = lighter_rivals(ok[0], [t for t in ok if not t.measured_again])
            rivals += [t for t in lighter if t not in rivals][:count]
            second = [t for t in ok if not t.measured_again and t.time_ms <= ok[0].time_ms * SECOND_LOOK
                      and config_key(task.complete(t.config)) in started]
            rivals += [t for t in second if t not in rivals][:count]
            configs = [t.config for t in rivals]
            portable = task.portable()
            builds = [self._build(task, c) for c in configs]
            builts = self._built(task, configs, self.builder.build(builds))
            timing = self._timing(task, min_span_ms=CONFIRM_SPAN_MS)
            batch = Batch(portable, tuple(builts), self._seed(task, configs, measurement), timing)
            for trial, future in zip(rivals, self.runner.run(batch)):
                result = future.result()
                if result["status"] == "bug":
                    self._stop_for_bug(task, trial.config, batch.seed, result["cause"])
                self.database.remeasured(task, ROUTE, trial.config, self.device["name"], [result])

    def _timing(self, task, **changes) -> Timing:
        """The protocol a batch of ``task`` is timed by: the tuner's, cold for a network's step."""
        return dataclasses.replace(self.timing, cold=task.cold, **changes)

    # -------------------------------------------------------------------------------- a staged program
    def measure_joined(self, best: Best) -> Best:
        """A staged program's joined best run through the runner, checked against the naive lowering of the whole
        program on inputs of its own (each stage was checked alone, and joining them is a rewrite too: a
        difference is a bug in liftpy), and timed whole -- for CONFIRM_SPAN_MS as a task's pick is, or for its
        rounds without ``confirm`` -- and recorded as a :data:`~.program.JOINED` trial, its time the best's. Each
        stage was timed alone, its calls back to back with its data in the caches; run one after another, they
        share the caches, and the whole can take longer than their sum. A joined best the database holds already
        is not run again."""
        from ..codegen.program import generate

        task = best.task.portable()
        known = self.database.whole(best.task, best.config, self.device["name"])
        if known is not None:
            return best.timed_whole(known)
        start = time.perf_counter()
        generated = generate(best.program, task.size_map, task.function, self.device_facts)
        built = Built(Build(task, self.device_facts, {}), generated, None, time.perf_counter() - start)
        timing = self._timing(task, min_span_ms=CONFIRM_SPAN_MS if self.confirm else 0.0)
        batch = Batch(task, (built,), self._seed(task, [flat_config(best.config)], 1), timing)
        result = self.runner.run(batch)[0].result()
        if result["status"] != "ok":
            raise InternalError(f"the stages of {task.describe()}, each correct alone, are {result['status']} "
                                f"joined ({result.get('cause', '')}): {best.config}")
        self.database.record(best.task, JOINED, flat_config(best.config), result.get("device", self.device), result)
        return best.timed_whole(self.database.whole(best.task, best.config, self.device["name"]))


def tune_task(task: ProgramTask, trials: int = 100, db: str | Path = "tuning.sqlite", device=None, seed: int = 0,
              **options) -> Best:
    """Tune a program task through the automatic route: up to ``trials`` configurations of its space in total
    (those in the database count), each checked against the naive lowering,
    itself checked against the interpreter first (:mod:`liftpy.tuning.program`). A wrong result is recorded and
    never chosen; a bug in liftpy raises :class:`~liftpy.errors.InternalError`, what was measured staying in the
    database. Returns the best; none correct raises :class:`~liftpy.errors.NoCorrectTrial`. ``options``:
    :class:`Tuner`'s.

    A function computing several values in turn is tuned stage by stage (:mod:`liftpy.rewrite.stages`), the
    trials shared among its stages by the scheduler; the stages' best are joined and the joined program checked
    against the naive lowering of the whole."""
    return tune_groups([[("", task)]], trials, db, device, seed, **options)[0]


def tune_groups(groups: Sequence[Sequence[tuple[str, ProgramTask]]], trials: int, db="tuning.sqlite", device=None,
                seed: int = 0, weights: Sequence[float] | None = None, every_group: bool = True,
                **options) -> list[Best | None]:
    """Tune groups with one budget of ``trials``: each group a list of (name, task) alternatives computing the
    same thing (a layer's direct and Winograd programs), run ``weights[i]`` times per call of the whole. Each
    group's chosen alternative's best (:func:`~.db.chosen`: the fastest, or one tied with it keeping less memory),
    its name in ``name``. An alternative after the first with no correct trial is left out, said on stderr; a
    group whose first has none raises :class:`~liftpy.errors.NoCorrectTrial` -- or, without ``every_group`` (a
    network, whose other steps' bests are worth keeping), is None, said on stderr."""
    weights = list(weights or [1.0] * len(groups))
    slots, owners = [], []
    for g, (alternatives, weight) in enumerate(zip(groups, weights)):
        for a, (name, task) in enumerate(alternatives):
            for slot in task_slots(task, g, name or str(a), weight):
                slots.append(slot)
                owners.append((g, a))
    with Tuner(db, device, seed=seed, **options) as tuner:
        for alternatives in groups:
            for _, task in alternatives:  # a trial's inputs and outputs fit the host and the device, before any run
                task.check_memory(tuner.device_facts)
        found = tuner.tune(slots, trials)
        results = []
        for g, alternatives in enumerate(groups):
            tuned = []
            for a, (name, task) in enumerate(alternatives):
                stages = [best for best, owner in zip(found, owners) if owner == (g, a)]
                if None in stages:  # named by the first stage (or the task) with no correct trial
                    lacking = next(s.task for s, b, owner in zip(slots, found, owners) if owner == (g, a) and b is None)
                    trials_of = tuner.database.trials(lacking, tuner.device["name"], algorithm=ROUTE)
                    error = NoCorrectTrial(f"no correct trial of {lacking.describe()} (trials: {len(trials_of)}; "
                                           f"failures: {', '.join(sorted({t.status for t in trials_of})) or 'none'})")
                    if a == 0 and every_group:
                        raise error
                    print(f"note: {name or lacking.name} left out: {error.message}", file=sys.stderr)
                    continue
                best = stages[0] if len(stages) == 1 and stages[0].task == task else joined(task, stages)
                if best.stages:
                    best = tuner.measure_joined(best)
                tuned.append(dataclasses.replace(best, name=name))
            results.append(chosen(tuned))
        return results


def tune_program(path, sizes: Mapping[str, object], trials: int = 100, db: str | Path = "tuning.sqlite",
                 device=None, seed: int = 0, function: str | None = None, constants: Sequence[str] = (),
                 **options) -> Best:
    """Tune any program file at ``sizes`` (``function`` of it; ``constants``: its inputs that stay fixed across
    calls) through the automatic route: :func:`tune_task`'s ``options``. Returns the best."""
    task = ProgramTask.make(path, sizes, function, constants)
    return tune_task(task, trials, db, device, seed, **options)


__all__ = ["Tuner", "tune_task", "tune_groups", "tune_program", "task_slots", "Progress", "HOISTED_TRIALS",
           "CONFIRM_PASSES", "SECOND_LOOK", "BATCH", "CONFIRM_SPAN_MS"]
