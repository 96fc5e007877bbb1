"""Elevate-style strategies: small functions from a program (or expression) to success or failure.

A strategy maps a tree -- a :class:`~liftpy.ir.Program` or an IR node -- to :class:`Success` (the new tree,
the rule applications that made it, and any size assumptions or tuning parameters they introduced) or
:class:`Failure` (why not). Everything here is built from three one-level traversals over a node's
children (:func:`all_`, :func:`one`, :func:`some`); a program's children are its functions' bodies::

    s1 >> s2     seq(s1, s2)           s1, then s2 on its result
    s1 | s2      left_choice(s1, s2)   s1, or s2 where s1 fails
    try_(s)      s | id_               repeat(s): s until it fails
    topDown(s)   s | one(topDown(s))   bottomUp(s): one(bottomUp(s)) | s
    normalize(s) repeat(topDown(s))    position(path, s): s at one place

Calling a strategy on a program type-checks it first; results can be fed to the next strategy directly
(``lower_to_opencl(topDown(rules.tile2D(4, 4))(program))``). Named strategies built from the rule catalogue,
such as :data:`lower_to_opencl`, are at the end of this module.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterable, Union

from ..constraints import Constraint
from ..errors import LiftError, RewriteError
from ..ir import Lambda, Let, Node, Prim, Program, UserFun, Var, walk
from ..primitives import PRIMITIVES, is_view, primitive_of
from .match import Names, binders, static_size_names

Tree = Union[Node, Program]


# ------------------------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class Step:
    """One rule application: the rule (name and arguments), where (child indices from the root of the tree the
    strategy was called on), and which of the rule's matches there (0 unless the pattern matched several ways)."""

    rule: str
    args: tuple = ()
    position: tuple[int, ...] = ()
    alternative: int = 0

    @property
    def label(self) -> str:
        if not self.args:
            return self.rule
        return f"{self.rule}({', '.join('?' if a is None else str(a) for a in self.args)})"

    def __str__(self) -> str:
        where = ".".join(map(str, self.position)) or "root"
        alt = f" #{self.alternative}" if self.alternative else ""
        return f"{self.label} at {where}{alt}"


@dataclass(frozen=True)
class Success:
    """A strategy succeeded: the new tree and what it took.

    ``assumptions`` and ``tuning_params`` are pending only on bare expressions; on a program they are already
    part of the program (``Program.assumptions``, ``Program.tuning_params``)."""

    tree: Tree
    steps: tuple[Step, ...] = ()
    assumptions: tuple[Constraint, ...] = ()
    tuning_params: tuple[str, ...] = ()
    param_docs: tuple[tuple[str, str], ...] = ()  # what each new tuning parameter is, for ``param n "..."``

    def __bool__(self) -> bool:
        return True

    @property
    def program(self) -> Program:
        if not isinstance(self.tree, Program):
            raise RewriteError("this result is an expression, not a program")
        return self.tree

    @property
    def node(self) -> Node:
        if not isinstance(self.tree, Node):
            raise RewriteError("this result is a program, not an expression")
        return self.tree

    def unwrap(self) -> Tree:
        return self.tree

    def __repr__(self) -> str:
        what = f"program {self.tree.main.name}" if isinstance(self.tree, Program) and self.tree.functions else str(self.tree)
        steps = "; ".join(map(str, self.steps)) or "no rewrite"
        extra = f", {len(self.assumptions)} assumption(s)" if self.assumptions else ""
        return f"Success({what} after {steps}{extra})"


@dataclass(frozen=True)
class Failure:
    """A strategy failed, and why. ``near`` failures (a rule matched, but a condition or the type check
    said no) are preferred over plain mismatches when a traversal reports why nothing applied."""

    reason: str
    near: bool = False

    def __bool__(self) -> bool:
        return False

    def unwrap(self):
        raise RewriteError(self.reason)


Result = Union[Success, Failure]


def _better(a: Failure | None, b: Failure) -> Failure:
    if a is None or (b.near and not a.near):
        return b
    return a


# ------------------------------------------------------------------------------------------------ context
class Context:
    """What a strategy knows besides the tree: the names the whole program uses (so new binders and tuning
    parameters are fresh) and the position of the current node from the root of the call."""

    __slots__ = ("names", "position")

    def __init__(self, names: Names, position: tuple[int, ...] = ()):
        self.names = names
        self.position = position

    def child(self, index: int) -> "Context":
        return Context(self.names, self.position + (index,))

    @staticmethod
    def for_tree(tree: Tree) -> "Context":
        return Context(Names(names_in(tree)))


def names_in(tree: Tree) -> set[str]:
    """Every name a tree uses: binders, variables, parameters, size and tuning names."""
    out: set[str] = set()
    nodes: Iterable[Node]
    if isinstance(tree, Program):
        out.update(tree.tuning_params)
        for fun in tree.functions:
            out.add(fun.name)
            for p in fun.params:
                out.add(p.name)
                out.update(p.type.size_names())
            out.update(fun.inferred_names)
            if fun.result is not None:
                out.update(fun.result.size_names())
        nodes = (n for f in tree.functions for n in walk(f.body))
    else:
        nodes = walk(tree)
    for n in nodes:
        if isinstance(n, Var):
            out.add(n.name)
        elif isinstance(n, Prim):
            for p in n.params:
                out.update(static_size_names(p))
        if n.type is not None:
            out.update(n.type.size_names())
    if isinstance(tree, Node):
        out |= binders(tree)
    else:
        for f in tree.functions:
            out |= binders(f.body)
    return out


# ------------------------------------------------------------------------------------------------ strategies
class Strategy:
    """A strategy: ``fn(tree, context) -> Success | Failure``. Call it on a program, an expression or a
    previous result; combine with ``>>`` (sequence) and ``|`` (left choice)."""

    def __init__(self, fn: Callable[[Tree, Context], Result], name: str = "strategy"):
        self.fn = fn
        self.name = name

    def apply(self, tree: Tree, ctx: Context) -> Result:
        return self.fn(tree, ctx)

    def __call__(self, tree: Tree | Result) -> Result:
        """Apply to a program or expression; given a previous result, continue it (its steps come first)."""
        if isinstance(tree, Failure):
            return tree
        before = tree if isinstance(tree, Success) else None
        tree = prepare(before.tree if before else tree)
        result = self.apply(tree, Context.for_tree(tree))
        return _chain(before, result) if before and result else result

    def __rshift__(self, other: "Strategy") -> "Strategy":
        return seq(self, other)

    def __or__(self, other: "Strategy") -> "Strategy":
        return left_choice(self, other)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


def strategy(fn: Callable[[Tree, Context], Result]) -> Strategy:
    """Decorator: a function ``(tree, context) -> Success | Failure`` as a strategy named after it."""
    return Strategy(fn, fn.__name__)


def prepare(tree: Tree) -> Tree:
    """A program's nodes carry types (type-checking it if needed): rules check their results against them."""
    from ..typecheck import Checker, typecheck

    if isinstance(tree, Program):
        if all(f.body.type is not None for f in tree.functions):
            return tree
        return typecheck(tree).program
    if isinstance(tree, Node) and tree.type is None and not isinstance(tree, (Lambda, UserFun)):
        try:
            return Checker().check(tree, {})
        except LiftError:  # an open expression: rules that need types will say so
            return tree
    return tree


def children(tree: Tree) -> tuple[Node, ...]:
    if isinstance(tree, Program):
        return tuple(f.body for f in tree.functions)
    return tree.children()


def rebuild(tree: Tree, kids: tuple[Node, ...], results: Iterable[Success]) -> Success:
    """``tree`` over new children. On a program, the children's assumptions and tuning parameters join it."""
    steps, assumptions, tuning, docs = (), (), (), ()
    for r in results:
        steps += r.steps
        assumptions += r.assumptions
        tuning += r.tuning_params
        docs += r.param_docs
    if isinstance(tree, Program):
        functions = tuple(dataclasses.replace(f, body=k) for f, k in zip(tree.functions, kids))
        program = dataclasses.replace(
            tree,
            functions=functions,
            tuning_params=tuple(dict.fromkeys(tree.tuning_params + tuning)),
            assumptions=tuple(dict.fromkeys(tree.assumptions + assumptions)),
            param_docs=tuple(dict(tree.param_docs + docs).items()),
        )
        return Success(program, steps)
    node = tree.with_children(kids)
    if tree.type is not None:
        node = dataclasses.replace(node, type=tree.type)  # rewrites preserve types
    return Success(node, steps, assumptions, tuning, docs)


def _chain(first: Success, second: Success) -> Success:
    return Success(
        second.tree,
        first.steps + second.steps,
        tuple(dict.fromkeys(first.assumptions + second.assumptions)),
        tuple(dict.fromkeys(first.tuning_params + second.tuning_params)),
        tuple(dict(first.param_docs + second.param_docs).items()),
    )


id_ = Strategy(lambda tree, ctx: Success(tree), "id")
fail = Strategy(lambda tree, ctx: Failure("fail"), "fail")


def seq(*strategies: Strategy) -> Strategy:
    """Each strategy on the result of the one before; fails as soon as one fails."""

    def go(tree, ctx):
        done = Success(tree)
        for s in strategies:
            r = s.apply(done.tree, ctx)
            if not r:
                return r
            done = _chain(done, r)
        return done

    return Strategy(go, " >> ".join(map(str, strategies)))


def left_choice(*strategies: Strategy) -> Strategy:
    """The first strategy that succeeds."""

    def go(tree, ctx):
        best = None
        for s in strategies:
            r = s.apply(tree, ctx)
            if r:
                return r
            best = _better(best, r)
        return best if best is not None else Failure("no alternative")

    return Strategy(go, "(" + " | ".join(map(str, strategies)) + ")")


def try_(s: Strategy) -> Strategy:
    """``s``, or leave the tree unchanged where ``s`` fails."""
    return Strategy(lambda tree, ctx: s.apply(tree, ctx) or Success(tree), f"try({s})")


def repeat(s: Strategy, limit: int = 10_000) -> Strategy:
    """``s`` again and again until it fails (always succeeds). Gives up with an error after ``limit`` steps,
    which only a rule that undoes itself (or grows the program forever) reaches."""

    def go(tree, ctx):
        done = Success(tree)
        for _ in range(limit):
            r = s.apply(done.tree, ctx)
            if not r:
                return done
            done = _chain(done, r)
        raise RewriteError(f"repeat({s}) did not stop after {limit} steps (does a rule undo another?)")

    return Strategy(go, f"repeat({s})")


# ------------------------------------------------------------------------------------------------ traversals
def all_(s: Strategy) -> Strategy:
    """``s`` on every child; fails if it fails on one (succeeds on a leaf)."""

    def go(tree, ctx):
        kids = children(tree)
        results = []
        for i, k in enumerate(kids):
            r = s.apply(k, ctx.child(i))
            if not r:
                return r
            results.append(r)
        if not kids:
            return Success(tree)
        return rebuild(tree, tuple(r.tree for r in results), results)

    return Strategy(go, f"all({s})")


def _one(s: Strategy, tree: Tree, ctx: Context) -> Result:
    kids = children(tree)
    best = None
    for i, k in enumerate(kids):
        r = s.apply(k, ctx.child(i))
        if r:
            return rebuild(tree, kids[:i] + (r.tree,) + kids[i + 1 :], [r])
        best = _better(best, r)
    return best if best is not None else Failure(f"{s}: no sub-expression")


def one(s: Strategy) -> Strategy:
    """``s`` on the first child where it succeeds."""
    return Strategy(lambda tree, ctx: _one(s, tree, ctx), f"one({s})")


def some(s: Strategy) -> Strategy:
    """``s`` on every child where it succeeds; fails if it succeeds on none."""

    def go(tree, ctx):
        kids = list(children(tree))
        results, best = [], None
        for i, k in enumerate(kids):
            r = s.apply(k, ctx.child(i))
            if r:
                kids[i] = r.tree
                results.append(r)
            else:
                best = _better(best, r)
        if not results:
            return best if best is not None else Failure(f"{s}: no sub-expression")
        return rebuild(tree, tuple(kids), results)

    return Strategy(go, f"some({s})")


def topDown(s: Strategy) -> Strategy:
    """``s`` at the first place it succeeds, parents before children (pre-order)."""
    return top_down_where(s, None)


def top_down_where(s: Strategy, into: Callable[[Tree], bool] | None) -> Strategy:
    """topDown, looking below only the nodes for which ``into`` holds (None: below every node)."""

    def go(tree, ctx):
        r = s.apply(tree, ctx)
        if r or not children(tree) or (into is not None and not into(tree)):
            return r
        below = _one(inner, tree, ctx)
        return below if below else _better(r, below)

    inner = Strategy(go, f"topDown({s})")
    return _traversal(go, s, inner.name)


def bottomUp(s: Strategy) -> Strategy:
    """``s`` at the first place it succeeds, children before parents (post-order)."""

    def go(tree, ctx):
        below = _one(inner, tree, ctx) if children(tree) else None
        if below:
            return below
        r = s.apply(tree, ctx)
        return r if r or below is None else _better(below, r)

    inner = Strategy(go, f"bottomUp({s})")
    return _traversal(go, s, inner.name)


def _traversal(go, s: Strategy, name: str) -> Strategy:
    """A traversal that failed everywhere says so, with the most telling reason found on the way."""

    def outer(tree, ctx):
        r = go(tree, ctx)
        if r:
            return r
        detail = f": {r.reason}" if r.near else ""
        return Failure(f"{s} applies nowhere{detail}", r.near)

    return Strategy(outer, name)


def each_stage(s: Strategy) -> Strategy:
    """``s`` on each stage of a function's body -- the value of every top-level val that computes, then the
    body's result -- where a traversal would stop at the first: each of a program's kernels gets its own
    parallel levels (a sum split into partial sums in memory is two stages, both parallel). Fails where ``s``
    fails on a stage."""

    def go(tree, ctx):
        if isinstance(tree, Program):  # each function's body
            return all_(stages).apply(tree, ctx)
        if isinstance(tree, Let):
            value = s.apply(tree.value, ctx.child(0)) if computes(tree.value) else Success(tree.value)
            body = go(tree.body, ctx.child(1)) if value else value
            return rebuild(tree, (value.tree, body.tree), (value, body)) if body else body
        return s.apply(tree, ctx)

    stages = Strategy(go, f"each_stage({s})")
    return stages


def normalize(s: Strategy) -> Strategy:
    """``s`` everywhere until it applies nowhere: ``repeat(topDown(s))``."""
    return Strategy(repeat(topDown(s)).fn, f"normalize({s})")


def position(path: Iterable[int], s: Strategy) -> Strategy:
    """``s`` at the sub-expression reached by following child indices ``path`` from the root."""
    path = tuple(path)

    def go(tree, ctx, depth=0):
        if depth == len(path):
            return s.apply(tree, ctx)
        kids = children(tree)
        i = path[depth]
        if i >= len(kids):
            return Failure(f"position {'.'.join(map(str, path))} is outside the tree")
        r = go(kids[i], ctx.child(i), depth + 1)
        if not r:
            return r
        return rebuild(tree, kids[:i] + (r.tree,) + kids[i + 1 :], [r])

    return Strategy(go, f"position({'.'.join(map(str, path))}, {s})")


def when(predicate: Callable[[Tree], bool], name: str | None = None) -> Strategy:
    """Succeeds (changing nothing) where ``predicate`` holds: guards such as ``when(is_compute_map) >> rule``."""
    label = name or getattr(predicate, "__name__", "predicate")
    return Strategy(lambda tree, ctx: Success(tree) if predicate(tree) else Failure(f"not {label}"), label)


def function_arg(s: Strategy) -> Strategy:
    """``s`` on the function argument of a primitive call (the ``f`` of ``mapGlb(d, f, xs)``)."""

    def go(tree, ctx):
        if not isinstance(tree, Prim):
            return Failure("not a primitive call")
        prim = PRIMITIVES[tree.name]
        slots = [sl for sl in prim.slots if not sl.static] if not prim.variadic else []
        for i, slot in enumerate(slots):
            if slot.kind == "fun":
                return position((i,), s).apply(tree, ctx)
        return Failure(f"{tree.name} takes no function")

    return Strategy(go, f"function_arg({s})")


# ------------------------------------------------------------------------------------------------ predicates
def computes(node: Node) -> bool:
    """Whether evaluating ``node`` does more than rearrange data (:func:`liftpy.primitives.is_view`)."""
    return not is_view(node)


def is_compute_map(tree: Tree) -> bool:
    """A high-level ``map`` whose function computes something (a map of a view stays a view when lowered)."""
    prim = primitive_of(tree)
    return prim is not None and prim.is_map and prim.is_view and computes(tree.args[0])


def body_is_reduction(tree: Tree) -> bool:
    """A map-like primitive whose function's result is a reduction (its value goes to memory)."""
    if not (isinstance(tree, Prim) and PRIMITIVES[tree.name].is_map):
        return False
    f = tree.args[-2]
    return isinstance(f, Lambda) and isinstance(f.body, Prim) and PRIMITIVES[f.body.name].is_reduction


def not_reduction(tree: Tree) -> bool:
    """Not a reduction: what a reduction's steps compute runs in its sequential loop, never in parallel."""
    prim = primitive_of(tree)
    return prim is None or not prim.is_reduction


def is_prim(*names: str) -> Strategy:
    """Succeeds on a call of one of the primitives ``names``."""
    return when(lambda t: isinstance(t, Prim) and t.name in names, f"is_prim({', '.join(names)})")


# ------------------------------------------------------------------------------------------------ named strategies
def lowering(unroll: bool = False, parallel: int = 2, sequential_outer: int = 0, local_size=None,
             unit_levels: frozenset[str] = frozenset(), stays_sequential: Callable[[Tree], bool] | None = None) \
        -> Strategy:
    """The default lowering to OpenCL of a one-kernel program, as in the paper's listing 1 (with no choice but
    ``unit_levels`` given, the naive lowering: the reference every trial is checked against):

    * the outermost ``parallel`` levels of maps that compute become global maps, the outermost
      ``mapGlb(parallel - 1)`` down to ``mapGlb(0)`` (with the default 2: the outermost map that computes becomes
      ``mapGlb(1)`` and the next one inside it ``mapGlb(0)``; a nest with fewer levels uses the highest
      dimensions); maps that only rearrange data stay views;
    * the remaining computing maps become ``mapSeq``, reductions ``reduceSeq`` (unrolled with ``unroll``);
    * a reduction's accumulator lives in private memory (an array of them -- a block's -- copied there element
      by element, so that unrolled they are registers), and a sequential map whose elements are reductions
      writes them to global memory (``toGlobal(id, reduceSeq(toPrivate(id, init), ...))``).

    ``parallel`` (1 to 3, OpenCL's dimensions) is the first choice of the automatic route's space: how many of
    a nest's spatial levels run in parallel; with ``sequential_outer`` the outermost levels, that many, run
    sequentially above them instead (a batch of one image need not take one of the three dimensions). With a
    ``local_size`` (a size, or a tuning parameter), the parallel levels are work-groups instead: the outer
    ones ``mapWrg`` (one work-item wide), the innermost split into work-groups of ``local_size`` work-items
    (``mapWrg(mapLcl)``) -- the work-group size a GPU needs, and the one PoCL vectorises across on a CPU.

    ``unit_levels`` names the levels of one element at the sizes the program is compiled for (a batch of one
    image, a convolution of one group): the maps binding them run sequentially, a loop of one iteration, and
    neither the parallel levels nor ``sequential_outer`` count them (unless no other level is below them) -- a
    dimension given to such a map runs one work-item in it, and a conv2d layer of one image and one group ran
    on one core.

    A map ``stays_sequential`` says is neither a parallel level nor a sequential outer one, nor counted among
    them (the automatic route's maps over a register block's results: one work-item computes the block).
    """
    from . import rules

    if parallel not in (1, 2, 3):
        raise RewriteError(f"lowering: parallel must be 1, 2 or 3 (OpenCL's dimensions), got {parallel}")

    def is_unit(tree) -> bool:
        return is_compute_map(tree) and isinstance(tree.args[0], Lambda) \
            and not unit_levels.isdisjoint(tree.args[0].param.names())

    unit = when(is_unit, "map over one element")
    def sequential_map(tree) -> bool:  # a map that computes and stays sequential
        return is_compute_map(tree) and stays_sequential is not None and stays_sequential(tree)

    # a level: a unit map too, where no other level is below it
    compute_map = when(lambda t: is_compute_map(t) and not sequential_map(t), "compute map")

    def descend(tree) -> bool:  # where the next level is looked for: not in a reduction, nor in a block's map,
        # nor past a val that computes (its value is read whole by what follows: each work-item computes it all)
        return not_reduction(tree) and not sequential_map(tree) and not (isinstance(tree, Let)
                                                                         and not is_view(tree.value))

    def past_units(build: Callable[[], Strategy]) -> Strategy:  # build(), or unit maps made sequential around it
        # (a unit map above no other level stays parallel: a kernel's result is computed by a parallel map)
        skipping = _Lazy(lambda: left_choice(
            unit >> rules.mapSeq >> function_arg(top_down_where(skipping, descend)), build()), "past units")
        return skipping

    def level(k: int) -> Strategy:  # this computing map as mapGlb(k - 1), the next k - 1 levels inside it below
        s = compute_map >> rules.mapGlb(k - 1)
        return past_units(lambda: s >> function_arg(try_(top_down_where(level(k - 1), descend)))
                          if k > 1 else s)

    def local_level(d: int) -> Strategy:  # this computing map as work-groups of local_size work-items
        return rules.splitJoin(local_size) >> topDown(
            compute_map >> rules.mapWrg(d) >> function_arg(topDown(compute_map >> rules.mapLcl(d))))

    def group_level(k: int) -> Strategy:  # mapWrg(k - 1) with the next levels inside, or the innermost split
        if k == 1:
            return past_units(lambda: compute_map >> local_level(0))
        deeper = rules.mapWrg(k - 1) >> function_arg(top_down_where(group_level(k - 1), descend))
        return past_units(lambda: compute_map >> left_choice(deeper, local_level(k - 1)))

    parallel_levels = level if local_size is None else group_level

    def outer(k: int) -> Strategy:  # this computing map sequential, the next levels below it
        return past_units(lambda: compute_map >> rules.mapSeq >> function_arg(top_down_where(outer(k - 1), descend))) \
            if k else parallel_levels(parallel)

    steps = [
        each_stage(try_(topDown(outer(sequential_outer)))),
        normalize(when(is_compute_map, "compute map") >> rules.mapSeq),
        normalize(rules.reduceSeq),
        normalize(left_choice(rules.privateAccumulators, rules.privateAccumulatorRow, rules.privateVectorRow,
                                rules.privateAccumulator)),
        normalize(when(body_is_reduction, "map of reductions") >> rules.globalMemory),
    ]
    if unroll:
        steps.append(normalize(rules.reduceSeqUnroll))
    s = seq(*steps)
    name = "lower_to_opencl" + ("(unroll)" if unroll else "") + (f"(parallel={parallel})" if parallel != 2 else "") \
        + (f"(sequential_outer={sequential_outer})" if sequential_outer else "") \
        + (f"(local_size={local_size})" if local_size is not None else "")
    return Strategy(s.fn, name)


class _Lazy(Strategy):
    """A named strategy built on first use (the rule catalogue loads then, not at import)."""

    def __init__(self, build: Callable[[], Strategy], name: str):
        self._build = build
        self._built: Strategy | None = None
        super().__init__(self._run, name)

    def _run(self, tree, ctx):
        if self._built is None:
            self._built = self._build()
        return self._built.apply(tree, ctx)


#: lower a high-level program to OpenCL primitives (see :func:`lowering`)
lower_to_opencl = _Lazy(lowering, "lower_to_opencl")

#: remove identity compositions (join(split), transpose(transpose), map(id)...) wherever they occur
simplify = _Lazy(lambda: normalize(_group_choice("simplification")), "simplify")


def _group_choice(group: str) -> Strategy:
    from . import rules

    return left_choice(*[rules.catalogue()[name] for name in rules.catalogue().groups[group]])


NAMED = {"lower_to_opencl": lower_to_opencl, "simplify": simplify}


def parametric() -> dict[str, Callable[..., Strategy]]:
    """Named strategies that take parameters, defined beside the rules (``rewrites/*.py``, a module-level
    ``STRATEGIES`` dict): ``split_sum(ω)`` of ``rewrites/reduction.py``, ``relayout(name)`` and ``copy_padding`` of
    ``rewrites/copies.py``."""
    import importlib
    from pathlib import Path

    from .._paths import data_dir

    out: dict[str, Callable[..., Strategy]] = {}
    for path in sorted(Path(str(data_dir("rewrites"))).glob("*.py")):
        if path.stem.startswith("_"):
            continue
        module = importlib.import_module(f"liftpy.catalogue.{path.stem}")
        out.update(getattr(module, "STRATEGIES", {}))
    return out

__all__ = [
    "Step",
    "Success",
    "Failure",
    "Result",
    "Context",
    "Strategy",
    "strategy",
    "id_",
    "fail",
    "seq",
    "left_choice",
    "try_",
    "repeat",
    "all_",
    "one",
    "some",
    "topDown",
    "bottomUp",
    "normalize",
    "each_stage",
    "position",
    "when",
    "function_arg",
    "is_prim",
    "computes",
    "is_compute_map",
    "lowering",
    "lower_to_opencl",
    "simplify",
]
