"""A task's configuration chosen by its device's cost model alone, with no measurement of the task.

The guess is the first proposal of a model-guided search (:class:`~liftpy.tuning.strategy.ModelGuided`): of a
random sample of the task's route space, the best by their register blocks alone
(:meth:`~liftpy.tuning.cost_model.AnalyticModel.block_cycles`: the device's vector registers and pipes, nothing
generated), the device's other tasks' bests adapted to it (the most similar first), and then the neighbours of
the best predicted, featurised (lowered and generated, nothing compiled or run) and ranked by the device's model
-- trained on the device's trials in the tuning database where it holds some, else the analytic model alone.
Candidates are featurised in this process (a script without a ``__main__`` guard must not start processes). A
guess is kept on disk (liftpy's cache) by its task, the device's facts, the trials its model learned from and the
other tasks' bests.

It is what an untuned task runs -- a layer or a network's step the tuning database knows nothing of -- in place
of a configuration written by hand from one machine's timings (the two compared:
``benchmarks/results/default-guess-network-*``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Sequence

from .._cache import remembered
from ..errors import InputError
from .cost_model import DeviceModel
from .db import TuningDB, config_key
from .transfer import route_bests, transferred

#: candidates a guess featurises and ranks first (the best of 32 times as many random ones by their register
#: blocks alone: nothing generated; a smaller guess draws from twice as many structures), and the most climbs from
#: the best of them (each joins to the pool the half as many neighbours of the best predicted that are best by
#: their blocks, until the best two are climbed from): 15-60 s for a task in one process, paid once a task and
#: device. ``$LIFTPY_GUESS_POOL`` sets a smaller guess, quicker and rougher (the tests' run takes 2).
GUESS_POOL = 16
#: guesses liftpy's cache keeps (a network's distinct layers on a few devices)
GUESSES_KEPT = 512


def guess_pool() -> int:
    """:data:`GUESS_POOL`, or ``$LIFTPY_GUESS_POOL`` where set (a positive integer)."""
    text = os.environ.get("LIFTPY_GUESS_POOL", str(GUESS_POOL))
    if not text.strip().isdigit() or int(text) < 1:
        raise InputError(f"LIFTPY_GUESS_POOL={text!r}: the guess's pool must be a positive integer")
    return int(text)


def model_search(task, space, model: DeviceModel, trials: int, seed: int, featurise=None,
                 elsewhere: Sequence[dict] = ()):
    """The model-guided search of ``task`` over ``space`` whose first proposal is the guess (its candidates'
    features from ``featurise``, by default made in this process; each result it is told trains ``model``):
    ``elsewhere``, the device's other tasks' bests adapted (:func:`~.transfer.transferred`), join its pool, to be
    ranked by the model with the rest."""
    from .cost_model import block_figures
    from .strategy import ModelGuided

    def here(configs):
        return features_here(task, space, configs)

    pool = guess_pool()
    return ModelGuided(space, trials, seed, None, model, featurise or here,
                       lambda features, time_ms: model.learn(features, time_ms, task.key), pool=pool, climbs=pool,
                       prefilter=lambda configs: block_figures(space, configs), drawn=32 * pool,
                       drawn_structures=None if pool >= GUESS_POOL else 2 * pool, neighbours=max(2, pool // 2),
                       elsewhere=elsewhere, anchor_elsewhere=False)


def features_here(task, space, configs: Sequence[dict]) -> list[dict | None]:
    """Candidates' features, generated in this process (None for one that does not lower or generate)."""
    from .builder import Build, build_candidates

    device = space.device
    return [b.features if b.failure is None else None
            for b in build_candidates([Build(task.portable(), device, c) for c in configs], space)]


def best_guess(task, device, database: TuningDB | str | Path | None = None, seed: int = 0, space=None) -> dict:
    """The model's configuration for ``task`` on ``device`` (a :class:`~liftpy.device.Device`): the first
    proposal of :func:`model_search` (over ``space``, where the caller has made the task's), its model trained
    on the device's trials in ``database`` (or the database at that path, only read; none there: no trials),
    the bests of the device's other tasks there among its candidates."""
    if isinstance(database, (str, Path)):
        if not Path(database).exists():
            return best_guess(task, device, None, seed, space)
        opened = TuningDB(database, readonly=True)
        try:
            return best_guess(task, device, opened, seed, space)
        finally:
            opened.close()
    trials = [] if database is None else database.trials(device=device.name, status="ok")
    model = DeviceModel.of_trials(trials)
    bests = route_bests(trials)
    learned = hashlib.sha256("\n".join(sorted(repr((k, t, sorted(f.items()))) for f, t, k in model.rows))
                             .encode()).hexdigest()
    shown = sorted(f"{key} {config_key(best.config)}" for key, best in bests.items())
    text = f"{task.key}\n{device!r}\n{learned}\n{shown}\n{seed}\n{guess_pool()}"

    def derive() -> dict:
        made = space if space is not None else task.space(device)
        chosen = model_search(task, made, model, 1, seed, elsewhere=transferred(task.key, made, bests)).propose(1)
        if not chosen:  # nothing in the space lowers: the plain configuration, whose failure then says why
            return task.complete(made.plain())
        return task.complete(chosen[0])

    return dict(remembered("guess", text, derive, kept=GUESSES_KEPT))


__all__ = ["best_guess", "model_search", "features_here", "guess_pool", "GUESS_POOL"]
