"""Predicates for rules' ``where`` clauses: ``where nontrivial(G)``, ``where unplaced(z)``...

Each takes the nodes its arguments matched and says yes or no; :func:`predicate` registers more.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from ..ir import Lambda, Node, Prim, Var
from ..primitives import PRIMITIVES


@dataclass(frozen=True)
class Predicate:
    name: str
    fn: Callable[..., bool]
    doc: str


PREDICATES: dict[str, Predicate] = {}


def predicate(name: str):
    """Register a condition usable in ``where`` clauses as ``name(x, ...)``; its docstring documents it."""

    def register(fn):
        PREDICATES[name] = Predicate(name, fn, inspect.getdoc(fn) or "")
        return fn

    return register


def _body(node: Node) -> Node:
    return node.body if isinstance(node, Lambda) else node


@predicate("nontrivial")
def _nontrivial(f: Node) -> bool:
    """The function is not the identity ``x -> x``."""
    return not (isinstance(f, Lambda) and isinstance(f.body, Var) and list(f.param.names()) == [f.body.name])


@predicate("unplaced")
def _unplaced(e: Node) -> bool:
    """The value (or the function's result) is not already placed by toGlobal, toLocal or toPrivate."""
    body = _body(e)
    return not (isinstance(body, Prim) and PRIMITIVES[body.name].space)


@predicate("computes")
def _computes(e: Node) -> bool:
    """Evaluating the expression (or the function's body) does arithmetic, not only data layout."""
    from .strategies import computes

    return computes(e)


@predicate("variable")
def _variable(e: Node) -> bool:
    """The expression is a variable."""
    return isinstance(e, Var)


@predicate("view")
def _view(e: Node) -> bool:
    """The expression (or the function's body) only rearranges data (no arithmetic, no copy to memory)."""
    from ..primitives import is_view

    return is_view(e)


@predicate("lanewise")
def _lanewise(f: Node) -> bool:
    """The expression (or the function's body) is arithmetic on scalars that also means the same lane by lane
    on vectors: variables, their tuple components, literals and scalar operators only (no dot, reduction,
    user function or array)."""
    from ..ir import Literal, ScalarOp, walk
    from ..primitives import primitive_of

    return all(isinstance(n, (Var, Literal, ScalarOp, Lambda)) or getattr(primitive_of(n), "projects", False)
               for n in walk(f))
