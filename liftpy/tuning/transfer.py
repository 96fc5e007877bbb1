"""What won on the device's other tasks, as configurations of a new task: a search's measured starting points.

A device's tuning database holds the fastest configuration of every task tuned on it. A task like one of them --
the same program, or one with the same levels, at other sizes: a network's layers, a model's next version --
is likely fast where the nearest of them was. :func:`transferred` gives those bests made configurations of the
task's space (:meth:`~liftpy.rewrite.route.RouteSpace.adapted`), the most similar task's first, for the
model-guided search to measure first and rank with its model: starting points the device's own measurements
chose, not rules written from another machine's timings.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

from .db import Trial, config_key, ranked
from .program import ROUTE

#: the other tasks' bests a search starts from, most similar first
TRANSFERRED = 6

_SIZE = re.compile(r"(\w+)=([-\d,]+)")


def task_sizes(key: str) -> dict[str, tuple[int, ...]]:
    """The sizes a task's key names (``C=64 H=56 stride=2,2`` -> ``{'C': (64,), 'H': (56,), 'stride': (2, 2)}``)."""
    return {name: tuple(int(v) for v in value.split(",") if v) for name, value in _SIZE.findall(key)}


def distance(key: str, other: str) -> float:
    """How far apart two tasks are: over the sizes both name, the sum of their ratios' logarithms; a size only one
    names, another program (its digest) or another stage of one each count as a factor of two."""
    sizes, others = task_sizes(key), task_sizes(other)
    words, other_words = set(_SIZE.sub("", key).split()), set(_SIZE.sub("", other).split())
    far = len(words ^ other_words) / 2 + len(set(sizes) ^ set(others))
    for name in set(sizes) & set(others):
        a, b = sizes[name], others[name]
        if len(a) != len(b):
            far += 1
            continue
        far += sum(abs(math.log2((x + 1) / (y + 1))) for x, y in zip(a, b))
    return far


def bests_by_task(trials: Iterable[Trial]) -> dict[str, Trial]:
    """Each task's best correct trial, as the database ranks a task's (:func:`~liftpy.tuning.db.ranked`)."""
    by_task: dict[str, list[Trial]] = {}
    for trial in trials:
        by_task.setdefault(trial.task_key, []).append(trial)
    return {key: best[0] for key, best in ((k, ranked(v)) for k, v in by_task.items()) if best}


def route_bests(trials: Iterable[Trial]) -> dict[str, Trial]:
    """:func:`bests_by_task` of the trials through the automatic route: the configurations another task's route
    space can adapt."""
    return bests_by_task(t for t in trials if t.algorithm == ROUTE)


def transferred(task_key: str, space, bests: dict[str, Trial], limit: int = TRANSFERRED) -> list[dict[str, int]]:
    """The bests of the other tasks in ``bests`` made configurations of ``space`` (where they can be), the most
    similar task's first (:func:`distance`), each once, at most ``limit`` (of the ``3 * limit`` most similar:
    adapting one can make sketches)."""
    out: dict[str, dict[str, int]] = {}
    nearest = sorted((k for k in bests if k != task_key), key=lambda k: (distance(task_key, k), k))
    for key in nearest[: 3 * limit]:
        config = space.adapted(bests[key].config)
        if config is not None:
            out.setdefault(config_key(config), config)
        if len(out) >= limit:
            break
    return list(out.values())


__all__ = ["TRANSFERRED", "task_sizes", "distance", "bests_by_task", "route_bests", "transferred"]
