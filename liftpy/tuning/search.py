"""The auto-tuner: measured search over a layer's valid configurations (the paper's sections 5-6).

The search strategy and the measuring are decoupled: a *sampler* proposes configurations (the paper's
method: random valid configurations, no duplicates -- :class:`RandomSampler`); a later model-guided sampler
plugs in with the same two methods. Every trial is measured in a worker process and stored in the tuning
database as soon as it finishes; running the same search again resumes it, skipping what is measured.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Protocol

from ..nn.conv import ALGORITHMS, DEFAULT_ALGORITHM, conv_space, default_config, make_layer
from ..nn.layers import ConvLayer, layer as named_layer
from .db import Trial, TuningDB, config_key
from .measure import Job, Measurer


class Sampler(Protocol):
    """Proposes configurations to measure, in order; told about every result (for model-guided search)."""

    def proposals(self) -> Iterator[dict[str, int]]: ...

    def observe(self, config: dict[str, int], result: dict) -> None: ...


class RandomSampler:
    """The paper's search: distinct random valid configurations from the parameter space, seeded; the
    default rule's configuration is measured first, so the search never reports worse than the default."""

    def __init__(self, space, seed: int = 0, pool: int = 10_000, first: dict | None = None):
        self.space, self.seed, self.pool, self.first = space, seed, pool, first

    def proposals(self):
        if self.first is not None:
            yield self.first
        for config in self.space.sample(self.pool, seed=self.seed):
            if config != self.first:
                yield config

    def observe(self, config, result):
        pass


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
    if isinstance(layer_or_shapes, ConvLayer):
        return layer_or_shapes
    if isinstance(layer_or_shapes, str):
        return named_layer(layer_or_shapes)
    return make_layer(**layer_or_shapes)


def device_record(device) -> dict:
    from ..runtime import device_info, get_device

    info = device_info(get_device(device))
    return {"name": info.name, "driver": info.driver, "platform": info.platform}


def tune(layer_or_shapes, trials: int = 100, db: str | Path = "tuning.sqlite", device=None, seed: int = 0,
         algorithm: str | None = None, repeat: int = 5, timeout: float = 120.0, progress: bool = True,
         sampler: Sampler | None = None, fault: str | None = None, cutoff: float | None = 10.0) -> list[Trial]:
    """Measure up to ``trials`` configurations of a layer (those already in the database count), and return
    every trial of this layer, device and algorithm in the database. A configuration whose first run is more
    than ``cutoff`` times slower than the best so far is timed once instead of ``repeat`` times (None: never)."""
    layer = resolve_layer(layer_or_shapes)
    algorithm = algorithm or DEFAULT_ALGORITHM
    if algorithm not in ALGORITHMS:
        from ..errors import InputError

        raise InputError(f"unknown algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")
    dev = device_record(device)
    database = TuningDB(db)
    space = conv_space(layer, device=device, algorithm=algorithm)
    sampler = sampler or RandomSampler(space, seed, first=default_config(space, algorithm))
    measured = database.measured(layer, algorithm, dev["name"])
    todo = max(0, trials - len(measured))
    known = database.best(layer, dev["name"], algorithm)
    bar = Progress(todo, best_ms=known.time_ms if known else None, start=time.perf_counter(), enabled=progress)
    measurer = Measurer(device, timeout)
    try:
        for config in sampler.proposals():
            if bar.done >= todo:
                break
            if config_key(config) in measured:
                continue  # resumed: measured by an earlier run
            cutoff_ms = cutoff * bar.best_ms if cutoff is not None and bar.best_ms is not None else None
            result = measurer.measure(Job(layer, algorithm, config, repeat, 1, fault, cutoff_ms))
            database.record(layer, algorithm, config, dev, result)
            measured.add(config_key(config))
            sampler.observe(config, result)
            bar.update(result)
    finally:
        bar.finish()
        measurer.close()
    out = database.trials(layer, dev["name"], algorithm=algorithm)
    database.close()
    return out
