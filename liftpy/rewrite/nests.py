"""The loop nests of a high-level program: its spatial maps and its reductions, found by their traits.

The first step of the automatic route, as FlexTensor's static analysis: before any rewrite is
chosen, a program is read as nests of loops. A *spatial* loop is a map that computes (its elements are
independent: it may become parallel, be blocked, be vectorised); a *reduction* folds its elements into an
accumulator (it may be split into partial sums, or stay a sequential loop); an *epilogue* is an element-wise
map over a reduction's result (ReLU). Layout between them (``join``, a ``val`` that only rearranges data) is
looked through. The nests say nothing of how the program will run; the space of schedules is built on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import arith
from ..ir import Lambda, Let, Node, Prim, Program, walk
from ..primitives import is_view, primitive_of
from ..typecheck import typecheck
from ..types import ArrayType


@dataclass(frozen=True)
class Loop:
    """One loop of a nest: ``kind`` is "spatial" or "reduction"; ``extent`` its length (sizes symbolic)."""

    kind: str
    extent: arith.Expr
    node: Prim

    def __str__(self) -> str:
        return f"{self.kind} {self.extent}"


@dataclass(frozen=True)
class Nest:
    """A nest of loops, outermost first, and the element-wise maps applied to its reduction's results."""

    loops: tuple[Loop, ...]
    epilogue: tuple[Prim, ...] = ()

    @property
    def spatial(self) -> tuple[Loop, ...]:
        return tuple(loop for loop in self.loops if loop.kind == "spatial")

    @property
    def reductions(self) -> tuple[Loop, ...]:
        return tuple(loop for loop in self.loops if loop.kind == "reduction")

    def describe(self) -> str:
        text = " x ".join(f"({loop.extent})" for loop in self.spatial) or "no spatial loop"
        if self.reductions:
            text += "; reducing " + " x ".join(f"({loop.extent})" for loop in self.reductions)
        if self.epilogue:
            text += f"; then {len(self.epilogue)} element-wise map(s)"
        return text


def loop_nests(program: Program, function: str | None = None, sizes=None) -> list[Nest]:
    """The nests of a function's body, outermost computation first; extents are symbolic where ``sizes``
    does not bind them."""
    typed = typecheck(program, sizes or {})
    body = typed.program.function(function).body
    nests: list[Nest] = []
    inside: set[int] = set()  # nodes already part of a nest
    for node in walk(body):
        if id(node) in inside or not _computing(node):
            continue
        nest = _nest_from(node)
        nests.append(nest)
        for loop in nest.loops:
            inside.update(id(n) for n in walk(loop.node))
    return nests


def computes(node: Node) -> bool:
    """Whether ``node`` computes anything (a reduction, or a map that is not a view) rather than only
    rearranging data."""
    return any(_computing(n) for n in walk(node))


def _computing(node: Node) -> bool:
    prim = primitive_of(node)
    if prim is None:
        return False
    if prim.is_reduction:
        return True
    return prim.is_map and not is_view(node.args[-2])


def _extent(node: Prim) -> arith.Expr:
    t = node.args[-1].type
    assert isinstance(t, ArrayType), t
    return t.size


def _nest_from(top: Prim) -> Nest:
    loops: list[Loop] = []
    epilogue: list[Prim] = []
    node: Node | None = top
    while node is not None:
        prim = primitive_of(node)
        if prim is not None and prim.is_reduction:
            loops.append(Loop("reduction", _extent(node), node))
            break  # what a reduction's function does to one element is its body, not a loop
        if prim is not None and prim.is_map:
            inner = _inner_computation(node.args[-1])
            if inner is not None and primitive_of(inner).is_reduction and _is_elementwise(node.args[-2]):
                epilogue.append(node)  # map(f, reduce(...)): f applied to the reduction's result
                node = inner
                continue
            loops.append(Loop("spatial", _extent(node), node))
            f = node.args[-2]
            node = _inner_computation(f.body) if isinstance(f, Lambda) else None
            continue
        break
    return Nest(tuple(loops), tuple(epilogue))


def _inner_computation(node: Node) -> Prim | None:
    """The computing map or reduction a function body amounts to, looking through layout around it."""
    while True:
        if _computing(node):
            return node
        if isinstance(node, Let) and is_view(node.value):
            node = node.body
            continue
        prim = primitive_of(node)
        if prim is not None and prim.is_view and node.args and not prim.is_map:
            node = node.args[-1]  # join(...), transpose(...): a view of the computation below
            continue
        return None


def _is_elementwise(f: Node) -> bool:
    """A function of one scalar that computes without arrays: an activation."""
    return isinstance(f, Lambda) and not any(isinstance(n, Prim) for n in walk(f.body))


__all__ = ["Loop", "Nest", "loop_nests"]
