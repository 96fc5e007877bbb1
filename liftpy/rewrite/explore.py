"""Exploration: enumerate the programs a set of rules can reach, each with the rule path that made it.

Breadth-first (every application of every rule at every place, level by level) or random walks. Programs are
deduplicated structurally, up to renaming of bound variables (``Node.key``); every variant type-checks
(each rule application is checked where it happens), passes the user's predicates, and carries its path
(:class:`~liftpy.rewrite.strategies.Step` s), which :func:`replay` turns back into the same program.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from ..errors import RewriteError
from ..ir import Node, Program, UserFun
from .match import Names
from .rules import Rule, RuleFamily, catalogue
from .strategies import Context, Step, Success, Tree, children, names_in, position, prepare, rebuild, seq


@dataclass(frozen=True)
class Variant:
    """A program reached by exploration and the rule applications that lead to it from the start."""

    program: Program
    path: tuple[Step, ...]

    @property
    def depth(self) -> int:
        return len(self.path)

    def describe(self) -> str:
        return " ; ".join(map(str, self.path)) or "(the original program)"


class Exploration(list):
    """The variants found (a list of :class:`Variant`), with counts in ``stats``: ``rewrites`` (successful rule
    applications, duplicates included), ``duplicates``, ``filtered`` (rejected by a predicate), ``seconds``."""

    def __init__(self, variants: Iterable[Variant] = (), stats: dict | None = None):
        super().__init__(variants)
        self.stats = stats or {}


def program_key(program: Program) -> tuple:
    """Identity of a program up to renaming of bound variables."""
    return (
        tuple((f.name, f.body.key()) for f in program.functions),
        program.tuning_params,
        frozenset(program.assumptions),
    )


def positions(tree: Tree, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Node]]:
    """Every rewritable node with its path of child indices, parents first (user functions are closed)."""
    if isinstance(tree, Node):
        if isinstance(tree, UserFun):
            return
        yield path, tree
    for i, child in enumerate(children(tree)):
        yield from positions(child, path + (i,))


def plug(program: Program, path: tuple[int, ...], result: Success) -> Program:
    """``program`` with the node at ``path`` replaced by a rule's result (its assumptions join the program)."""
    kids = children(program)
    i = path[0]
    body = _replace(kids[i], path[1:], result.tree)
    effects = Success(body, (), result.assumptions, result.tuning_params, result.param_docs)
    return rebuild(program, kids[:i] + (body,) + kids[i + 1 :], [effects]).tree


def _replace(node: Node, path: tuple[int, ...], new: Node) -> Node:
    if not path:
        return new
    kids = node.children()
    i = path[0]
    return rebuild(node, kids[:i] + (_replace(kids[i], path[1:], new),) + kids[i + 1 :], []).tree


def _as_rules(items: Iterable) -> list[Rule]:
    out = []
    for r in items:
        if isinstance(r, RuleFamily):
            r = r.instance()
        if not isinstance(r, Rule):
            raise RewriteError(f"explore enumerates rules; {r!r} is not a rule (use rules.NAME or rules.NAME(args))")
        out.append(r)
    return out


class _Progress:
    """Progress lines: always (``True``), never (``False``), to a function, or -- ``"auto"`` -- on a terminal
    once a run has taken a couple of seconds."""

    def __init__(self, report: bool | str | Callable[[dict], None], every: float = 1.0):
        if report == "auto":
            report = sys.stderr.isatty()
            every = 2.0
        self.report = report
        self.every = every
        self.last = time.perf_counter()
        self.shown = False

    def tick(self, stats: dict, force: bool = False):
        if not self.report:
            return
        now = time.perf_counter()
        if force and not self.shown and self.report is True and stats["seconds"] < self.every:
            return  # a short run needs no progress line
        if not force and now - self.last < self.every:
            return
        self.last = now
        self.shown = True
        if callable(self.report):
            self.report(dict(stats))
        else:
            print(f"explore: depth {stats['depth']}, {stats['variants']} variants, {stats['rewrites']} rewrites, "
                  f"{stats['duplicates']} duplicates, {stats['seconds']:.1f} s", file=sys.stderr, flush=True)


def explore(
    program: Program,
    rules: Sequence | None = None,
    depth: int = 3,
    *,
    method: str = "bfs",
    predicates: Iterable[Callable[[Program], bool]] = (),
    limit: int | None = None,
    walks: int = 100,
    seed: int = 0,
    progress: bool | str | Callable[[dict], None] = "auto",
) -> Exploration:
    """The distinct programs reachable from ``program`` in 1 to ``depth`` rule applications.

    ``rules`` are catalogue rules (``rules.splitJoin(4)``, ``rules.mapFusion``; a parameterised rule given
    without arguments gets fresh tuning parameters), by default :func:`default_rules`. ``method`` is "bfs"
    (every application, level by level) or "random" (``walks`` random walks of ``depth`` steps, from
    ``seed``). A variant failing one of ``predicates`` is neither returned nor explored further. ``limit``
    stops after that many variants; ``progress`` prints a line to stderr every second (``True``), calls a
    function with the counts, or (``"auto"``) prints on a terminal when the run is long. The original program
    is not among the results.
    """
    if method not in ("bfs", "random"):
        raise RewriteError(f"unknown exploration method {method!r} (bfs or random)")
    rule_list = _as_rules(default_rules() if rules is None else rules)
    start = prepare(program)
    predicates = tuple(predicates)
    stats = {"depth": 0, "variants": 0, "rewrites": 0, "duplicates": 0, "filtered": 0, "seconds": 0.0}
    seen = {program_key(start)}
    found: list[Variant] = []
    report = _Progress(progress)
    began = time.perf_counter()

    def successors(v: Variant, order: Callable[[list], list] | None = None) -> Iterator[Variant]:
        names = names_in(v.program)
        sites = [(path, node, rule) for path, node in positions(v.program) for rule in rule_list
                 if rule.family.could_match(node)]
        if order is not None:
            sites = order(sites)
        for path, node, rule in sites:
            ctx = Context(Names(set(names)), path)
            for r in rule.alternatives(node, ctx):
                if not r:
                    continue
                stats["rewrites"] += 1
                new = plug(v.program, path, r)
                key = program_key(new)
                if key in seen:
                    stats["duplicates"] += 1
                    continue
                seen.add(key)
                if not all(p(new) for p in predicates):
                    stats["filtered"] += 1
                    continue
                yield Variant(new, v.path + r.steps)

    def add(v: Variant) -> bool:
        found.append(v)
        stats["variants"] = len(found)
        stats["seconds"] = time.perf_counter() - began
        report.tick(stats)
        return limit is not None and len(found) >= limit

    if method == "bfs":
        frontier = [Variant(start, ())]
        for level in range(1, depth + 1):
            stats["depth"] = level
            following = []
            for v in frontier:
                for child in successors(v):
                    following.append(child)
                    if add(child):
                        return _done(found, stats, began, report)
            frontier = following
    else:
        rng = random.Random(seed)

        def shuffled(sites):
            rng.shuffle(sites)
            return sites

        for _ in range(walks):
            current = Variant(start, ())
            for level in range(1, depth + 1):
                stats["depth"] = level
                step = next(successors(current, shuffled), None)
                if step is None:
                    break
                current = step
                if add(step):
                    return _done(found, stats, began, report)
    return _done(found, stats, began, report)


def _done(found, stats, began, report) -> Exploration:
    stats["seconds"] = time.perf_counter() - began
    stats["variants"] = len(found)
    report.tick(stats, force=True)
    return Exploration(found, stats)


def replay(program: Program, path: Sequence[Step], rule_catalogue=None) -> Success:
    """Apply a variant's rule path to ``program`` again (the result equals the variant's program)."""
    book = rule_catalogue or catalogue()
    steps = [position(s.position, book[s.rule].instance(*s.args).alternative(s.alternative)) for s in path]
    result = seq(*steps)(program) if steps else Success(prepare(program))
    if not result:
        raise RewriteError(f"the path does not replay: {result.reason}")
    return result


def default_rules() -> list[Rule]:
    """The rules :func:`explore` uses when given none: the algorithmic, fusion, interchange and simplification
    groups, with ``splitJoin`` by 2 and tiling left out (its variants multiply without bound)."""
    book = catalogue()
    out: list[Rule] = []
    for group in ("algorithmic", "fusion", "interchange", "simplification"):
        for name in book.groups.get(group, []):
            family = book[name]
            if family.params:
                if name == "splitJoin":
                    out.append(family.instance(2))
                continue
            out.append(family.instance())
    return out
