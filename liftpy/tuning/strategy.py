"""Search strategies: what to measure next in one task's space, a batch at a time.

A strategy proposes configurations in batches and is told every result, the resumed search's included:
:class:`LocalSearch` (random samples, then the neighbours of the fastest) and :class:`ModelGuided` (a pool
ranked by a cost model, trained again as results come).
"""

from __future__ import annotations

import itertools
import random
from typing import Callable, Iterator, Protocol, Sequence

from .db import config_key


class SearchStrategy(Protocol):
    """Proposes configurations of one space to measure, ``n`` at a time, never one twice; told every result.
    ``first``: the configurations it proposes first because its caller expects them to be good (a guess), which
    the tuner's confirmation looks at again when they come near the fastest."""

    first: list[dict[str, int]]

    def propose(self, n: int) -> list[dict[str, int]]: ...

    def observe(self, config: dict[str, int], result: dict) -> None: ...


class LocalSearch:
    """Random configurations for a share ``explore`` of the budget (``first`` first: a configuration or a list
    of them), then a local search: an unmeasured neighbour
    (:meth:`~liftpy.rewrite.route.RouteSpace.neighbours`: one choice changed, or a block's shape) of the
    fastest correct configuration so far, else of the next fastest, else a random one again: random search
    alone found its best late, and a block size or a vector width next to a good one is usually good too. With
    ``explore=1``, random search. For any space with ``sample(n, seed)`` and ``neighbours``."""

    def __init__(self, space, trials: int, seed: int = 0, first: dict | list[dict] | None = None,
                 explore: float = 0.4, pool: int = 64):
        self.space = space
        self.first = [first] if isinstance(first, dict) else list(first or [])
        self.random_trials = max(1, int(trials * explore))
        self.pool, self.seed, self.rng = max(pool, 2 * trials), seed, random.Random(seed)
        self.times: dict[str, float] = {}  # by config_key, of the correct trials
        self._configs: dict[str, dict] = {}
        self._neighbours: dict[str, list[dict]] = {}
        self._proposals = self._proposed()

    def propose(self, n: int) -> list[dict[str, int]]:
        """The next ``n`` configurations (fewer when the space is spent)."""
        return list(itertools.islice(self._proposals, n))

    def _proposed(self) -> Iterator[dict]:
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
            yield config

    def _randoms(self):
        """``first``, then the random pool, drawn only when ``first`` is spent: drawing it makes every sketch of
        a route space (minutes for Winograd's stages), which a short search of its ``first`` never needs."""
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

    def observe(self, config, result):
        if result.get("status") == "ok" and result.get("time_ms") is not None:
            key = config_key(config)
            self.times[key], self._configs[key] = float(result["time_ms"]), dict(config)


class ModelGuided:
    """A search a cost model guides (:mod:`liftpy.tuning.cost_model`): a pool of candidates -- ``first`` where
    given, a random sample of ``pool`` configurations, and the neighbours (the route's moves) of the fastest
    measured and of the best predicted, an evolutionary step whose fitness is measured time where known and the
    model's figure elsewhere -- is featurised without running anything (``featurise``: configurations -> their
    features, None where one does not build) and ranked by the model; each batch is its best-ranked unmeasured
    candidates but for a share ``explore`` drawn at random from the pool (before a batch, a climb: the
    neighbours of the best predicted not expanded yet, joined to the pool, ``climbs`` of them in a search: each
    neighbourhood is a few dozen candidates to generate). Every result observed is handed on
    (``learn(features, time)``), so that the model is trained again before the next batch. When the pool is
    spent, another random sample joins it. With a ``prefilter`` (configurations -> figures, lower better, from
    the configurations alone: nothing generated), each random sample is ``drawn`` configurations (from at most
    ``drawn_structures`` of the route's structures, where given: a sketch costs to make), which, with ``first``
    but its first, compete for the pool: the ``pool`` best by the prefilter and a quarter as many others at
    random are featurised, and of a candidate's neighbours the ``neighbours`` best by it where given (all
    where not). ``trials`` (the budget) is taken as every strategy takes it; the pool does not
    depend on it.

    Each opinion the search holds is measured in its first batches, whatever the model predicts of it:
    ``first[0]`` where given (a caller's guess), ``elsewhere[0]`` -- the best of the device's most similar task,
    adapted (:mod:`liftpy.tuning.transfer`; every one of ``elsewhere`` joins the pool) unless ``anchor_elsewhere``
    is false (a guess, which runs one configuration: the model then ranks them with the rest) -- and the best
    predicted by ``second_opinion`` (another model, the analytic one beside a learned one). A search of a few
    trials (a network's small tasks get five or so) then does not miss what the formula sees where trees trained
    on other tasks misrank this one (``benchmarks/results/default-guess-a3f6339-zen3.txt``)."""

    def __init__(self, space, trials: int, seed: int, first: dict | list[dict] | None, model,
                 featurise: Callable[[list[dict]], Sequence[dict | None]],
                 learn: Callable[[dict, float], None] = lambda features, time_ms: None,
                 pool: int = 64, explore: float = 0.125, parents: int = 2, climbs: int = 3,
                 prefilter: Callable[[list[dict]], Sequence[float]] | None = None, drawn: int = 512,
                 drawn_structures: int | None = None, second_opinion=None, elsewhere: Sequence[dict] = (),
                 neighbours: int | None = None, anchor_elsewhere: bool = True):
        self.space, self.model, self.featurise, self.learn = space, model, featurise, learn
        self.second_opinion, self._second_pick = second_opinion, None
        self.prefilter, self.drawn, self.drawn_structures = prefilter, drawn, drawn_structures
        self._climbs_left, self.neighbours = climbs, neighbours
        self.first = [first] if isinstance(first, dict) else list(first or [])
        self.elsewhere = [dict(c) for c in elsewhere]
        self.anchor_elsewhere = anchor_elsewhere
        self.pool_size, self.explore, self.parents = pool, explore, parents
        self.rng = random.Random(seed)
        self.seed = seed
        self.features: dict[str, dict | None] = {}  # by config_key: featurised candidates (None: not built)
        self.configs: dict[str, dict] = {}
        self.times: dict[str, float] = {}  # by config_key, of the correct trials
        self.proposed: set[str] = set()
        self._expanded: set[str] = set()  # candidates whose neighbours are in the pool
        self._samples = 0  # random samples drawn into the pool so far

    def propose(self, n: int) -> list[dict[str, int]]:
        """The ``n`` candidates to measure next (fewer when the pool and the space are spent)."""
        self._grow()
        ranked = self._ranked()
        while self._climbs_left > 0:  # the best predicted's neighbours, until none beats them (a few in a search)
            self._climbs_left -= 1
            top = next((k for k in ranked[: self.parents] if k not in self._expanded), None)
            if top is None or not self._expand([top]):
                break
            ranked = self._ranked()
        while len(ranked) < n and self._grow(sample=True):  # the pool spent: more of the space, if it has any
            ranked = self._ranked()
        if not ranked:
            return []
        explored = min(len(ranked) - min(n, len(ranked)), int(n * self.explore + 0.5)) if n > 1 else 0
        chosen = ranked[: n - explored]
        rest = ranked[n - explored:]
        chosen += self.rng.sample(rest, min(explored, len(rest)))
        anchors = self._anchors()[:n]
        chosen = (anchors + [k for k in chosen if k not in anchors])[:n]
        self.proposed.update(chosen)
        return [dict(self.configs[k]) for k in chosen]

    def _anchors(self) -> list[str]:
        """The opinions not measured yet (that build): ``first[0]``, ``elsewhere[0]``, the second opinion's best
        predicted of the first pool."""
        if self.second_opinion is not None and self._second_pick is None:
            pool = [k for k, f in self.features.items() if f is not None]
            if pool:
                figures = self.second_opinion.predict([self.features[k] for k in pool])
                self._second_pick = pool[min(range(len(pool)), key=figures.__getitem__)]
        anchored = self.elsewhere[:1] if self.anchor_elsewhere else []
        keys = [config_key(c) for c in [*self.first[:1], *anchored]] + [k for k in [self._second_pick] if k]
        return [k for k in dict.fromkeys(keys) if k not in self.proposed and self.features.get(k) is not None]

    def _ranked(self) -> list[str]:
        """The pool's unmeasured candidates, best predicted first."""
        open_keys = [k for k, f in self.features.items() if f is not None and k not in self.proposed]
        if not open_keys:
            return []
        scores = dict(zip(open_keys, self.model.predict([self.features[k] for k in open_keys])))
        return sorted(open_keys, key=scores.__getitem__)

    def _grow(self, sample: bool = False) -> int:
        """The pool made larger: ``first`` and a random sample at the start (and with ``sample``, another),
        then the neighbours of the fastest measured; how many new candidates."""
        new: list[dict] = []
        if sample or not self._samples:
            new += [] if self._samples else self.elsewhere
            new += self._sampled(self.seed + self._samples, [] if self._samples else self.first)
            self._samples += 1
        return self._add(new) + self._expand(sorted(self.times, key=self.times.get)[: self.parents])

    def _sampled(self, seed: int, first: Sequence[dict]) -> list[dict]:
        """The candidates to featurise of ``first`` and a random sample: all of ``first`` and ``pool`` random
        ones; or with a prefilter ``first[0]`` (an anchor) and the best ``pool`` by it of the rest of ``first``
        and ``drawn`` random ones, and a quarter as many others: what a candidate costs to featurise (its
        generation) then follows the budget, not the number of starting points."""
        if self.prefilter is None:
            return list(first) + self.space.sample(self.pool_size, seed=seed)
        limit = {"structures": self.drawn_structures} if self.drawn_structures else {}
        drawn = list({config_key(c): c for c in [*first[1:], *self.space.sample(self.drawn, seed=seed, **limit)]
                      if config_key(c) not in self.configs}.values())
        figures = self.prefilter(drawn)
        order = sorted(range(len(drawn)), key=figures.__getitem__)
        rest = order[self.pool_size:]
        chosen = order[: self.pool_size] + self.rng.sample(rest, min(len(rest), self.pool_size // 4))
        return list(first[:1]) + [drawn[i] for i in chosen]

    def _expand(self, keys: Sequence[str]) -> int:
        """The neighbours of these candidates not expanded yet joined to the pool (with a prefilter and
        ``neighbours``, each one's best ``neighbours`` by it); how many new candidates."""
        new: list[dict] = []
        for key in keys:
            if key not in self._expanded:
                self._expanded.add(key)
                near = [c for c in self.space.neighbours(self.configs[key]) if config_key(c) not in self.configs]
                if self.prefilter is not None and self.neighbours is not None and len(near) > self.neighbours:
                    figures = self.prefilter(near)
                    near = [near[i] for i in sorted(range(len(near)), key=figures.__getitem__)[: self.neighbours]]
                new += near
        return self._add(new)

    def _add(self, configs: Sequence[dict]) -> int:
        """Candidates not in the pool yet featurised and joined to it; how many."""
        fresh = []
        for config in configs:
            key = config_key(config)
            if key not in self.configs:
                self.configs[key] = dict(config)
                fresh.append(key)
        if fresh:
            for key, features in zip(fresh, self.featurise([self.configs[k] for k in fresh])):
                self.features[key] = features
        return len(fresh)

    def observe(self, config, result):
        key = config_key(config)
        self.proposed.add(key)
        self.configs.setdefault(key, dict(config))
        if result.get("status") == "ok" and result.get("time_ms") is not None:
            self.times[key] = float(result["time_ms"])
            features = result.get("features") or self.features.get(key)
            if features:
                self.learn(features, float(result["time_ms"]))


__all__ = ["SearchStrategy", "LocalSearch", "ModelGuided"]
