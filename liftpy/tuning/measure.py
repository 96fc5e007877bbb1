"""The measuring protocol: how a runner times candidates, and the seeds of the inputs they are checked on.

A batch of built candidates is checked, warmed up, then timed in :class:`Timing`'s rounds *taken in turns*: round 1
of every candidate, then round 2 of every candidate, ... A round lasts at least ``min_round_ms`` (as many calls as
that takes, TVM's ``min_repeat_ms``), and its figure is the mean of its calls' kernel spans (the first kernel's
start to the last's end: the device's waits between kernels included); a candidate's time is the median of its
rounds, its spread how far apart the middle half of its rounds lie (:func:`spread`). The machine's speed drifts for
seconds at a time (another process, another library's thread pool still spinning after its last call, the OpenCL
runtime's threads waking up): candidates timed in turns meet the same spells, so their ranking follows the kernels,
not the machine; a figure that must hold (a pick's) is sampled over several seconds (``min_span_ms``). A network's
steps are timed ``cold``: each call after a copy that fills the device's caches with other data and its inputs
written again, as the network's other steps leave them; back to back, a call finds its weights where the last left
them, which no step of a network does. The protocol is written out in the README.
"""

from __future__ import annotations

import hashlib
import math
from statistics import median
from dataclasses import dataclass
from typing import Sequence

from ..errors import InputError


@dataclass(frozen=True)
class Timing:
    """How long a runner times each candidate: first ``warmup_ms`` of calls (the device's threads awake, its caches
    filled), then ``rounds`` rounds of at least ``min_round_ms`` each (one call at least, at most ``max_calls`` a
    round); a candidate whose warm-up's fastest call (of two at least) is slower than ``cutoff_ms`` (far behind
    the best so far) is timed by that call alone. With ``race``, a candidate whose first round is slower than
    ``race`` times the leader (the batch's fastest first round, or ``leader_ms``, the task's best so far, if faster)
    takes no more rounds: a search needs to know it lost, not by how much exactly, and the rounds it would take are
    time the search spends on nothing."""

    rounds: int = 5
    min_round_ms: float = 25.0
    warmup_ms: float = 25.0
    max_calls: int = 1000
    cutoff_ms: float | None = None
    #: go on taking rounds in turns until the batch's timing has lasted this long (the machine's slow spells
    #: last seconds: a figure that must hold, as a pick's, is sampled across several)
    min_span_ms: float = 0.0
    #: the most rounds a candidate gets in a span
    max_rounds: int = 400
    race: float | None = None
    leader_ms: float | None = None
    #: each call starts with the device's caches holding other data and its inputs written again
    #: (:class:`~liftpy.runtime.CacheFlush`), as a network's step does; else calls run back to back, their
    #: weights and inputs still in the caches
    cold: bool = False

    def __post_init__(self):
        for name, least in (("rounds", 1), ("max_calls", 1), ("max_rounds", self.rounds)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InputError(f"timing: {name} must be an integer of at least {least}, got {value!r}")
        for name in ("min_round_ms", "warmup_ms", "min_span_ms"):
            if not getattr(self, name) >= 0:
                raise InputError(f"timing: {name} must be at least 0, got {getattr(self, name)!r}")
        if self.race is not None and not self.race >= 1:
            raise InputError(f"timing: race must be at least 1 (or None), got {self.race!r}")

    def racing(self, first_rounds: Sequence[float]) -> list[bool]:
        """Which candidates, by their first rounds, take the rest of theirs (all, without ``race``)."""
        if self.race is None or not first_rounds:
            return [True] * len(first_rounds)
        leader = min([*first_rounds, *([self.leader_ms] if self.leader_ms else [])])
        return [t <= self.race * leader for t in first_rounds]

    def calls_for(self, ms: float, first_ms: float) -> int:
        """Calls that last ``ms``, from one call's time ``first_ms`` (one at least, ``max_calls`` at most)."""
        if first_ms <= 0:
            return self.max_calls
        return max(1, min(self.max_calls, math.ceil(ms / first_ms)))


def spread(rounds: Sequence[float]) -> float:
    """How far apart the middle half of the rounds lie, over their median (0.05: the middle half within 5%):
    the noise of a figure, a slow spell's outlying rounds left out as the median leaves them out."""
    ordered = sorted(rounds)
    m = median(ordered)
    if m <= 0 or len(ordered) < 2:
        return 0.0
    lower, upper = ordered[: len(ordered) // 2], ordered[(len(ordered) + 1) // 2:]
    return (median(upper) - median(lower)) / m


def check_seed(subject, algorithm: str, config: dict, search_seed: int = 0, measurement: int = 0) -> int:
    """The seed of one configuration's inputs (the first of a batch names the batch's: :func:`batch_seed`):
    every batch, and every later measurement, is checked on inputs of its own, so that a kernel cannot pass on
    what an earlier one left in memory; the seed is recorded with each trial so that its check can be
    repeated."""
    from .db import config_key

    text = f"{subject.key}|{algorithm}|{config_key(config)}|{search_seed}|{measurement}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def batch_seed(subject, configs: Sequence[dict], search_seed: int = 0, measurement: int = 0) -> int:
    """The seed of a batch's inputs: drawn from every configuration in it, so that two batches never share
    their inputs (and one candidate's check is never on the inputs of an earlier batch it was in)."""
    from .db import config_key

    text = "|".join([subject.key, *(config_key(c) for c in configs), str(search_seed), str(measurement)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


__all__ = ["Timing", "check_seed", "batch_seed", "median", "spread"]
