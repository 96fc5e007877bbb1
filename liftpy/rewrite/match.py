"""Patterns, matching and instantiation: the mechanics behind every rewrite rule.

A rule's two sides are ordinary IR trees (elaborated from the language's own syntax) in which names that
nothing binds are *pattern variables*. They carry the reserved prefix ``?``, which no name in a program can
have:

* data and function variables are IR :class:`~liftpy.ir.Var` nodes named ``?xs``, ``?f``;
* size variables are :class:`liftpy.arith.Var` named ``?n`` (range unbounded, so normalisation assumes nothing);
* an OpenCL dimension in a pattern (``mapGlb(d, ...)``) is a :class:`DimVar`;
* a type variable in a ``where xs: [[T]_m]_n`` condition is a :class:`TypeVar`.

Matching is a generator of *bindings* (a dict from pattern names to what they matched), so a pattern with
several ways to match -- a function variable applied to an argument -- is enumerated by backtracking:

* a bare variable (``f``, ``xs``) matches an expression that does not mention a variable bound by the
  pattern's own lambdas ("x does not occur free in f", the side condition of most rules, is built in);
* ``F(x)``, a function variable applied to variables bound by the pattern, matches any expression ``e`` and
  binds ``F`` to ``x -> e`` (a higher-order pattern, in Miller's fragment);
* ``F(p)`` for any other argument pattern matches an expression with a sub-expression ``m`` matching ``p``
  and binds ``F`` to the function with a hole where ``m`` was (``F`` never mentions the pattern's bound
  variables; the hole is never the whole expression, so ``F`` is never the identity).

A lambda in the pattern matches a lambda of the program, its binder standing for the program's binder (a
name in the pattern may stand for a tuple pattern in the program). In the replacement, a binder with the
same name as one of the pattern's stands for that same program binder: the rewritten program keeps its
names and tuple shape. Other binders of the replacement get fresh names, and applying a bound function
(``f(g(x))``) beta-reduces, so no variable is ever captured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, Mapping

from .. import arith
from ..arith import Expr
from ..constraints import Constraint
from ..ir import (
    Apply,
    IndexFun,
    Lambda,
    Let,
    Literal,
    Node,
    Pattern,
    Prim,
    PTuple,
    PVar,
    ScalarOp,
    Tuple,
    UserFun,
    Var,
)
from ..primitives import is_view
from ..types import ArrayType, FunType, ScalarType, TupleType, Type, VectorType

PREFIX = "?"
#: key of the bindings entry holding the program's names bound by the pattern's binders seen so far
_BOUND = "$bound"

Bindings = dict


def is_pattern_name(name: str) -> bool:
    return name.startswith(PREFIX)


def pattern_size(name: str) -> arith.Var:
    """The size pattern variable for ``name``."""
    return arith.Var(PREFIX + name, arith.Range.ANY)


@dataclass(frozen=True)
class DimVar:
    """A pattern for an OpenCL dimension (the static ``d`` of ``mapGlb(d, f, xs)``)."""

    name: str

    def __str__(self) -> str:
        return self.name


class TypeVar(Type):
    """A pattern for a whole type (``T`` in ``where xs: [T]_n``)."""

    def __init__(self, name: str):
        self.name = name

    def map_sizes(self, f):
        return self

    def sizes(self):
        return iter(())

    def __eq__(self, other):
        return isinstance(other, TypeVar) and other.name == self.name

    def __hash__(self):
        return hash(("TypeVar", self.name))

    def __str__(self) -> str:
        return self.name


# ------------------------------------------------------------------------------------------------ tree helpers
def free_vars(node: Node) -> frozenset[str]:
    """Free variables of a node, cached on the (immutable) node."""
    cached = node.__dict__.get("_free")
    if cached is not None:
        return cached
    if isinstance(node, Var):
        out = frozenset((node.name,))
    elif isinstance(node, Lambda):
        out = free_vars(node.body) - frozenset(node.param.names())
    elif isinstance(node, Let):
        out = free_vars(node.value) | (free_vars(node.body) - frozenset(node.pattern.names()))
    elif isinstance(node, UserFun):
        out = frozenset()
    else:
        out = frozenset()
        for child in node.children():
            out |= free_vars(child)
    object.__setattr__(node, "_free", out)
    return out


def binders(node: Node) -> set[str]:
    """Every name bound inside ``node`` (lambda parameters and let patterns; user functions are closed)."""
    out: set[str] = set()

    def go(n: Node):
        if isinstance(n, Lambda):
            out.update(n.param.names())
        elif isinstance(n, Let):
            out.update(n.pattern.names())
        elif isinstance(n, UserFun):
            return
        for c in n.children():
            go(c)

    go(node)
    return out


def is_function(node: Node) -> bool:
    return isinstance(node, (Lambda, UserFun))


def pattern_value(p: Pattern) -> Node:
    """The expression a binder's value is: ``x`` for ``x``, the tuple ``(a, b)`` for ``(a, b)``."""
    if isinstance(p, PVar):
        return Var(p.name)
    return Tuple(tuple(pattern_value(e) for e in p.elems))


def rename_pattern(p: Pattern, renaming: Mapping[str, str]) -> Pattern:
    if isinstance(p, PVar):
        return PVar(renaming.get(p.name, p.name))
    return PTuple(tuple(rename_pattern(e, renaming) for e in p.elems))


def count_uses(name: str, node: Node) -> int:
    if isinstance(node, Var):
        return 1 if node.name == name else 0
    if name not in free_vars(node):
        return 0
    return sum(count_uses(name, c) for c in node.children())


def replace_node(tree: Node, old: Node, new: Node) -> Node:
    """``tree`` with the subtree ``old`` (that very node, not one equal to it) replaced by ``new``; the
    subtrees that do not hold it are kept as they are."""
    if tree is old:
        return new
    kids = tree.children()
    if not kids:
        return tree
    out = tuple(replace_node(k, old, new) for k in kids)
    return tree if all(a is b for a, b in zip(out, kids)) else tree.with_children(out)


def replace_child(node: Node, index: int, child: Node) -> Node:
    kids = list(node.children())
    kids[index] = child
    return node.with_children(tuple(kids))


# ------------------------------------------------------------------------------------------------ substitution
class Names:
    """The names a rewrite must not reuse for a new binder; hands out fresh ones (``x``, ``x_1``, ...)."""

    def __init__(self, taken: set[str]):
        self.taken = taken

    def fresh(self, base: str) -> str:
        base = base.lstrip(PREFIX) or "x"
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


def substitute(node: Node, mapping: Mapping[str, Node], names: Names) -> Node:
    """``node`` with free variables replaced, renaming a binder that would capture a substituted variable."""
    if not mapping:
        return node
    relevant = {k: v for k, v in mapping.items() if k in free_vars(node)}
    if not relevant:
        return node
    if isinstance(node, Var):
        return relevant[node.name]
    danger: set[str] = set()
    for v in relevant.values():
        danger |= free_vars(v)
    if isinstance(node, Lambda):
        param, inner = _under_binder(node.param, relevant, danger, names)
        return dataclasses.replace(node, param=param, body=substitute(node.body, inner, names), type=None)
    if isinstance(node, Let):
        value = substitute(node.value, relevant, names)
        pattern, inner = _under_binder(node.pattern, relevant, danger, names)
        return dataclasses.replace(node, pattern=pattern, value=value, body=substitute(node.body, inner, names), type=None)
    return node.with_children(tuple(substitute(c, relevant, names) for c in node.children()))


def _under_binder(p: Pattern, mapping, danger, names: Names):
    bound = set(p.names())
    inner = {k: v for k, v in mapping.items() if k not in bound}
    clashes = bound & danger
    if clashes:
        renaming = {n: names.fresh(n) for n in clashes}
        p = rename_pattern(p, renaming)
        inner.update({old: Var(new) for old, new in renaming.items()})
    return p, inner


def beta(fun: Node, arg: Node, names: Names) -> Node:
    """``fun`` applied to ``arg``, reduced: a lambda's parameter is replaced by the argument when that is cheap
    (a view, which computes nothing -- a variable, a constant, a zip of arrays -- or used once), else bound by a
    ``let`` so the argument is computed once."""
    if not isinstance(fun, Lambda):
        return Apply(fun, arg)
    mapping: dict[str, Node] = {}
    lets: list[tuple[Pattern, Node]] = []

    def bind(p: Pattern, a: Node):
        if isinstance(p, PVar):
            if is_view(a) or count_uses(p.name, fun.body) <= 1:
                mapping[p.name] = a
            else:
                lets.append((p, a))
        elif isinstance(a, Tuple) and len(a.elems) == len(p.elems):
            for sub, sub_a in zip(p.elems, a.elems):
                bind(sub, sub_a)
        elif isinstance(a, Var):
            for i, sub in enumerate(p.elems):
                bind(sub, Prim("get", (i,), (a,)))
        else:
            lets.append((p, a))

    bind(fun.param, arg)
    body = substitute(fun.body, mapping, names)
    for p, a in reversed(lets):
        body = Let(p, a, body)
    return body


def freshen(node: Node, taken: set[str], names: Names) -> Node:
    """Rename binders of ``node`` whose names are in ``taken`` or bound twice, so every binder is unique."""
    seen: set[str] = set()

    def pattern(p: Pattern) -> tuple[Pattern, dict[str, Node]]:
        renaming = {}
        for n in p.names():
            if n in taken or n in seen:
                renaming[n] = names.fresh(n)
            seen.add(renaming.get(n, n))
        if not renaming:
            return p, {}
        return rename_pattern(p, renaming), {old: Var(new) for old, new in renaming.items()}

    def go(n: Node) -> Node:
        if isinstance(n, Lambda):
            p, ren = pattern(n.param)
            body = go(substitute(n.body, ren, names) if ren else n.body)
            if p is n.param and body is n.body:
                return n
            return dataclasses.replace(n, param=p, body=body, type=None)
        if isinstance(n, Let):
            value = go(n.value)
            p, ren = pattern(n.pattern)
            body = go(substitute(n.body, ren, names) if ren else n.body)
            if p is n.pattern and body is n.body and value is n.value:
                return n
            return dataclasses.replace(n, pattern=p, value=value, body=body, type=None)
        if isinstance(n, UserFun):
            return n
        kids = n.children()
        if not kids:
            return n
        new = tuple(go(c) for c in kids)
        if all(a is b for a, b in zip(new, kids)):
            return n
        return n.with_children(new)

    return go(node)


# ------------------------------------------------------------------------------------------------ matching
class Matcher:
    """Matches one rule's left-hand side. ``kinds`` maps pattern variable names to "data", "fun", "size",
    "dim" or "type"; ``pattern_binders`` are the IR names of the binders written in the pattern."""

    def __init__(self, kinds: Mapping[str, str], pattern_binders: frozenset[str]):
        self.kinds = kinds
        self.pattern_binders = pattern_binders

    # -- entry point
    def match(self, p: Node, n: Node, b: Bindings) -> Iterator[Bindings]:
        if isinstance(p, Var):
            yield from self._var(p.name, n, b)
            return
        if isinstance(p, Apply) and isinstance(p.fun, Var) and p.fun.name in self.kinds:
            yield from self._applied(p.fun.name, p.arg, n, b)
            return
        if type(p) is not type(n):
            return
        if isinstance(p, Prim):
            if p.name != n.name or len(p.args) != len(n.args) or len(p.params) != len(n.params):
                return
            b = match_statics(p.params, n.params, b)
            if b is not None:
                yield from self._all(p.args, n.args, b)
        elif isinstance(p, ScalarOp):
            if p.op == n.op and len(p.args) == len(n.args):
                yield from self._all(p.args, n.args, b)
        elif isinstance(p, Tuple):
            if len(p.elems) == len(n.elems):
                yield from self._all(p.elems, n.elems, b)
        elif isinstance(p, Literal):
            if p.scalar == n.scalar and p.value == n.value:
                yield b
        elif isinstance(p, Lambda):
            b = self._binder(p.param, n.param, b)
            if b is not None:
                yield from self.match(p.body, n.body, b)
        elif isinstance(p, Let):
            if p.declared != n.declared:
                return
            for b1 in self.match(p.value, n.value, b):
                b2 = self._binder(p.pattern, n.pattern, b1)
                if b2 is not None:
                    yield from self.match(p.body, n.body, b2)
        elif isinstance(p, Apply):
            for b1 in self.match(p.fun, n.fun, b):
                yield from self.match(p.arg, n.arg, b1)
        elif isinstance(p, UserFun):
            if p == n:
                yield b
        else:  # pragma: no cover - every node kind is handled above
            raise TypeError(f"cannot match {type(p).__name__}")

    def _all(self, ps, ns, b) -> Iterator[Bindings]:
        if not ps:
            yield b
            return
        for b1 in self.match(ps[0], ns[0], b):
            yield from self._all(ps[1:], ns[1:], b1)

    # -- variables
    def _var(self, name: str, n: Node, b: Bindings) -> Iterator[Bindings]:
        kind = self.kinds.get(name)
        if kind is None:
            if name in self.pattern_binders:  # a variable the pattern itself binds
                actual = b.get(name)
                if actual is not None and _same_names(actual, n):
                    yield b
            elif isinstance(n, Var) and n.name == name:
                yield b
            return
        if (kind == "fun") != is_function(n):
            return
        bound = b.get(name)
        if bound is not None:
            if bound == n:
                yield b
            return
        if free_vars(n) & b.get(_BOUND, frozenset()):
            return  # the pattern's own bound variables may only reach a variable through F(x)
        b = dict(b)
        b[name] = n
        yield b

    def _binder(self, p: Pattern, actual: Pattern, b: Bindings) -> Bindings | None:
        if isinstance(p, PVar):
            b = dict(b)
            b[p.name] = actual
            b[_BOUND] = b.get(_BOUND, frozenset()) | frozenset(actual.names())
            return b
        if not isinstance(actual, PTuple) or len(actual.elems) != len(p.elems):
            return None
        for sub, sub_actual in zip(p.elems, actual.elems):
            b = self._binder(sub, sub_actual, b)
            if b is None:
                return None
        return b

    # -- higher-order patterns
    def _applied(self, fname: str, arg: Node, n: Node, b: Bindings) -> Iterator[Bindings]:
        if self.kinds[fname] != "fun" or is_function(n):
            return
        bound = b.get(fname)
        if bound is not None:
            if isinstance(n, Apply) and n.fun == bound:
                yield from self.match(arg, n.arg, b)
            return
        abstracted = self._binder_tuple(arg, b)
        if abstracted is not None:  # F(x): F is x -> n
            outside = b.get(_BOUND, frozenset()) - frozenset(abstracted.names())
            if not free_vars(n) & outside:
                b = dict(b)
                b[fname] = Lambda(abstracted, n)
                yield b
            return
        # F(p): F is n with a hole where a sub-expression matching p was
        for path, sub, crossed in _positions(n):
            if free_vars(sub) & crossed:
                continue
            for b1 in self.match(arg, sub, b):
                hole = "y"
                while hole in free_vars(n) or hole in crossed:
                    hole += "_"
                context = _replace_at(n, path, Var(hole))
                if free_vars(context) & b1.get(_BOUND, frozenset()):
                    continue
                b2 = dict(b1)
                b2[fname] = Lambda(PVar(hole), context)
                yield b2

    def _binder_tuple(self, arg: Node, b: Bindings) -> Pattern | None:
        """The program's binder pattern when ``arg`` is made of the pattern's bound variables only."""
        if isinstance(arg, Var) and arg.name in self.pattern_binders and arg.name in b:
            return b[arg.name]
        if isinstance(arg, Tuple):
            parts = [self._binder_tuple(e, b) for e in arg.elems]
            if all(p is not None for p in parts):
                return PTuple(tuple(parts))
        return None


def _same_names(p: Pattern, n: Node) -> bool:
    if isinstance(p, PVar):
        return isinstance(n, Var) and n.name == p.name
    return isinstance(n, Tuple) and len(n.elems) == len(p.elems) and all(_same_names(a, b) for a, b in zip(p.elems, n.elems))


def _positions(n: Node, path=(), crossed=frozenset()) -> Iterator[tuple[tuple[int, ...], Node, frozenset]]:
    """Proper data sub-expressions of ``n`` (pre-order) with their path and the binders above them inside n."""
    if isinstance(n, UserFun):
        return
    inner = crossed
    if isinstance(n, Lambda):
        inner = crossed | frozenset(n.param.names())
    for i, child in enumerate(n.children()):
        child_crossed = inner
        if isinstance(n, Let) and i == 1:
            child_crossed = crossed | frozenset(n.pattern.names())
        if not is_function(child):
            yield path + (i,), child, child_crossed
        yield from _positions(child, path + (i,), child_crossed)


def _replace_at(n: Node, path: tuple[int, ...], new: Node) -> Node:
    if not path:
        return new
    kids = n.children()
    return replace_child(n, path[0], _replace_at(kids[path[0]], path[1:], new))


# ------------------------------------------------------------------------------------------------ statics, types
def match_statics(ps: tuple, actuals: tuple, b: Bindings) -> Bindings | None:
    for p, a in zip(ps, actuals):
        b = match_static(p, a, b)
        if b is None:
            return None
    return b


def match_static(p, a, b: Bindings) -> Bindings | None:
    if isinstance(p, DimVar):
        if p.name in b:
            return b if b[p.name] == a else None
        return {**b, p.name: a}
    if isinstance(p, Expr):
        return match_size(p, a, b) if isinstance(a, Expr) else None
    if isinstance(p, IndexFun):
        if not isinstance(a, IndexFun) or p.name != a.name or len(p.params) != len(a.params):
            return None
        for x, y in zip(p.params, a.params):
            b = match_size(x, y, b)
            if b is None:
                return None
        return b
    if isinstance(p, Type):
        return match_type(p, a, b) if isinstance(a, Type) else None
    return b if p == a else None


def static_size_names(p) -> frozenset[str]:
    """The size names in a primitive's static parameter (a size, a type, an index function; none in a dim)."""
    if isinstance(p, Expr):
        return p.var_names()
    if isinstance(p, Type):
        return p.size_names()
    if isinstance(p, IndexFun):
        return frozenset().union(*(x.var_names() for x in p.params))
    return frozenset()


def size_pattern_names(e: Expr) -> frozenset[str]:
    return frozenset(n for n in e.var_names() if is_pattern_name(n))


def match_size(p: Expr, a: Expr, b: Bindings) -> Bindings | None:
    """A size pattern: a pattern variable binds; an expression of bound variables must equal ``a``."""
    names = size_pattern_names(p)
    if isinstance(p, arith.Var) and p.name in names and p.name not in b:
        return {**b, p.name: a}
    if any(n not in b for n in names):
        return None  # an expression over sizes not bound yet: not supported on a pattern's left side
    value = p.subs({n: b[n] for n in names}) if names else p
    return b if sizes_equal(value, a) else None


def sizes_equal(x: Expr, y: Expr) -> bool:
    return x == y or Constraint("equal", x, y, "").decide() is True


def match_type(p: Type, a: Type, b: Bindings) -> Bindings | None:
    if isinstance(p, TypeVar):
        if p.name in b:
            return b if b[p.name] == a else None
        return {**b, p.name: a}
    if isinstance(p, ArrayType) and isinstance(a, ArrayType):
        b = match_size(p.size, a.size, b)
        return None if b is None else match_type(p.elem, a.elem, b)
    if isinstance(p, VectorType) and isinstance(a, VectorType):
        if p.scalar != a.scalar:
            return None
        return match_size(p.width, a.width, b)
    if isinstance(p, TupleType) and isinstance(a, TupleType):
        if len(p.elems) != len(a.elems):
            return None
        for x, y in zip(p.elems, a.elems):
            b = match_type(x, y, b)
            if b is None:
                return None
        return b
    if isinstance(p, FunType) and isinstance(a, FunType):
        b = match_type(p.param, a.param, b)
        return None if b is None else match_type(p.result, a.result, b)
    if isinstance(p, ScalarType):
        return b if p == a else None
    return None


# ------------------------------------------------------------------------------------------------ instantiation
def instantiate_size(e: Expr, b: Bindings) -> Expr:
    names = size_pattern_names(e)
    if not names:
        return e
    return e.subs({n: b[n] for n in names})


def instantiate_type(t: Type, b: Bindings) -> Type:
    if isinstance(t, TypeVar):
        return b[t.name]
    if isinstance(t, ArrayType):
        return ArrayType(instantiate_type(t.elem, b), instantiate_size(t.size, b))
    if isinstance(t, VectorType):
        return VectorType(t.scalar, instantiate_size(t.width, b))
    if isinstance(t, TupleType):
        return TupleType(tuple(instantiate_type(e, b) for e in t.elems))
    if isinstance(t, FunType):
        return FunType(instantiate_type(t.param, b), instantiate_type(t.result, b))
    return t


def _instantiate_static(p, b: Bindings):
    if isinstance(p, DimVar):
        return b[p.name]
    if isinstance(p, Expr):
        return instantiate_size(p, b)
    if isinstance(p, IndexFun):
        return IndexFun(p.name, tuple(instantiate_size(x, b) for x in p.params))
    if isinstance(p, Type):
        return instantiate_type(p, b)
    return p


class Instantiator:
    """Builds a replacement from the right-hand side template and a match's bindings."""

    def __init__(self, b: Bindings, pattern_binders: frozenset[str], names: Names):
        self.b = b
        self.pattern_binders = pattern_binders
        self.names = names
        self.renaming: dict[str, str] = {}  # template binders -> fresh program names

    def build(self, t: Node) -> Node:
        b = self.b
        if isinstance(t, Var):
            if is_pattern_name(t.name):
                return b[t.name]
            if t.name in self.pattern_binders and t.name in b:
                return pattern_value(b[t.name])
            return Var(self.renaming.get(t.name, t.name))
        if isinstance(t, Apply) and isinstance(t.fun, Var) and is_pattern_name(t.fun.name):
            return beta(b[t.fun.name], self.build(t.arg), self.names)
        if isinstance(t, Lambda):
            return Lambda(self.binder(t.param), self.build(t.body))
        if isinstance(t, Let):
            value = self.build(t.value)
            declared = instantiate_type(t.declared, b) if t.declared is not None else None
            return Let(self.binder(t.pattern), value, self.build(t.body), declared)
        if isinstance(t, Prim):
            return Prim(t.name, tuple(_instantiate_static(p, b) for p in t.params), tuple(self.build(a) for a in t.args))
        if isinstance(t, (Tuple, ScalarOp, Apply)):
            return t.with_children(tuple(self.build(c) for c in t.children()))
        return t  # literals, user functions

    def binder(self, p: Pattern) -> Pattern:
        if isinstance(p, PVar):
            if p.name in self.pattern_binders and p.name in self.b:
                return self.b[p.name]
            fresh = self.names.fresh(p.name)
            self.renaming[p.name] = fresh
            return PVar(fresh)
        return PTuple(tuple(self.binder(e) for e in p.elems))
