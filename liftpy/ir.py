"""The immutable intermediate representation.

Every node is a frozen dataclass. Two nodes are equal when they are the same program *up to renaming of bound
variables* (alpha-equivalence), so exploration can deduplicate and ``parse(pretty(p)) == p`` holds whatever
fresh names macro expansion picked. Source spans and inferred types ride along on the nodes but never take
part in equality. Transformations build new trees; nothing is mutated after construction.

Node kinds: :class:`Var`, :class:`Literal`, :class:`Tuple`, :class:`Lambda`, :class:`Apply`, :class:`Let`,
:class:`Prim` (a call of a primitive from :mod:`liftpy.primitives`), :class:`ScalarOp` (arithmetic and math
builtins on scalars and vectors) and :class:`UserFun` (a scalar function declared in the language, which
becomes an OpenCL function).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .arith import Expr as Size
from .errors import Span
from .types import Type


# ---------------------------------------------------------------------------------------------- patterns
@dataclass(frozen=True)
class PVar:
    """A pattern that binds one name."""

    name: str

    def names(self) -> Iterator[str]:
        yield self.name


@dataclass(frozen=True)
class PTuple:
    """A pattern that destructures a tuple: ``(acc, (x, w))``."""

    elems: tuple["Pattern", ...]

    def names(self) -> Iterator[str]:
        for e in self.elems:
            yield from e.names()


Pattern = PVar | PTuple


# ---------------------------------------------------------------------------------------------- index functions
@dataclass(frozen=True)
class IndexFun:
    """A reorder index function, such as ``stride(s)``; its meaning is in :mod:`liftpy.primitives`."""

    name: str
    params: tuple[Size, ...] = ()


# ---------------------------------------------------------------------------------------------- nodes
_META = dict(compare=False, repr=False, hash=False)


@dataclass(frozen=True, eq=False)
class Node:
    """Base of every expression node. ``span`` and ``type`` are metadata, not identity."""

    def children(self) -> tuple["Node", ...]:
        """Sub-expressions, in evaluation order (the rewrite engine traverses these)."""
        return ()

    def with_children(self, children: tuple["Node", ...]) -> "Node":
        """The same node over new sub-expressions (metadata kept, type dropped)."""
        assert not children
        return self

    # -- alpha-equivalence -------------------------------------------------------------------------
    def key(self) -> tuple:
        """A structural key in which variables bound inside this node are numbered in binding order."""
        cached = self.__dict__.get("_key")
        if cached is None:
            cached = _alpha_key(self, {}, [0])
            object.__setattr__(self, "_key", cached)
        return cached

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Node):
            return NotImplemented
        return self.key() == other.key()

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(self.key())
            object.__setattr__(self, "_hash", cached)
        return cached

    def __str__(self) -> str:
        from .pretty import pretty_expr

        return pretty_expr(self)


@dataclass(frozen=True, eq=False)
class Var(Node):
    name: str
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)


@dataclass(frozen=True, eq=False)
class Literal(Node):
    """A scalar constant. ``value`` is a Python float, int or bool; ``scalar`` names its type."""

    value: float | int | bool
    scalar: str
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)


@dataclass(frozen=True, eq=False)
class Tuple(Node):
    elems: tuple[Node, ...]
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)

    def children(self):
        return self.elems

    def with_children(self, children):
        return dataclasses.replace(self, elems=tuple(children), type=None)


@dataclass(frozen=True, eq=False)
class Lambda(Node):
    """``param -> body``. Every function takes one argument; several arguments are a tuple pattern."""

    param: Pattern
    body: Node
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)

    def children(self):
        return (self.body,)

    def with_children(self, children):
        (body,) = children
        return dataclasses.replace(self, body=body, type=None)


@dataclass(frozen=True, eq=False)
class Apply(Node):
    """A function (a lambda or a user function) applied to one argument."""

    fun: Node
    arg: Node
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)

    def children(self):
        return (self.fun, self.arg)

    def with_children(self, children):
        fun, arg = children
        return dataclasses.replace(self, fun=fun, arg=arg, type=None)


@dataclass(frozen=True, eq=False)
class Let(Node):
    """``val pattern = value; body`` and the paper's ``let(pattern -> body, value)``: evaluate once, reuse.

    The code generator materialises the value (in the address space its producer chose) when it computes
    something, and keeps it as a view when it only rearranges data.
    """

    pattern: Pattern
    value: Node
    body: Node
    declared: Type | None = None  # ``val x: T = ...``: the checker demands the value has type T
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)

    def children(self):
        return (self.value, self.body)

    def with_children(self, children):
        value, body = children
        return dataclasses.replace(self, value=value, body=body, type=None)


@dataclass(frozen=True, eq=False)
class Prim(Node):
    """A call of the primitive ``name`` with static ``params`` (sizes, dimensions, index functions, types)
    and expression ``args`` (functions and data), as declared in :mod:`liftpy.primitives`."""

    name: str
    params: tuple[Any, ...]
    args: tuple[Node, ...]
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)

    def children(self):
        return self.args

    def with_children(self, children):
        return dataclasses.replace(self, args=tuple(children), type=None)


@dataclass(frozen=True, eq=False)
class ScalarOp(Node):
    """Arithmetic (``+ - * / %``, comparisons, ``neg``) or a math builtin (``max``, ``exp``...) on scalars
    or vectors; see :data:`liftpy.primitives.SCALAR_OPS`."""

    op: str
    args: tuple[Node, ...]
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)

    def children(self):
        return self.args

    def with_children(self, children):
        return dataclasses.replace(self, args=tuple(children), type=None)


@dataclass(frozen=True, eq=False)
class UserFun(Node):
    """A scalar function written in the language (``def add(x: float, y: float): float = x + y``).

    It is a closed value: its body refers only to its parameters. It becomes an OpenCL function.
    """

    name: str
    param: Pattern
    param_type: Type
    result_type: Type
    body: Node
    span: Span | None = field(default=None, **_META)
    type: Type | None = field(default=None, **_META)

    def children(self):
        return ()  # closed: rewriting does not look inside user functions


# ---------------------------------------------------------------------------------------------- program
@dataclass(frozen=True)
class Param:
    """A program parameter: data (an input array or scalar) or a compile-time size (``int`` or a tuple of
    ``int``, as the paper's ``kernelStride: (int, int)``)."""

    name: str
    type: Type
    is_size: bool = False
    span: Span | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Function:
    """A program function: ``def name(params): result = body``."""

    name: str
    params: tuple[Param, ...]
    result: Type | None  # as declared; None when the program leaves it to inference
    body: Node
    span: Span | None = field(default=None, compare=False, repr=False)
    # names in the declared result that nothing else binds (the paper's ``outWidth``): inference binds them
    inferred_names: tuple[str, ...] = ()

    @property
    def data_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.is_size)

    @property
    def size_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_size)


@dataclass(frozen=True)
class Program:
    """A parsed file: its functions (the last one is the main one) and its declared tuning parameters."""

    functions: tuple[Function, ...]
    tuning_params: tuple[str, ...] = ()
    filename: str = field(default="<string>", compare=False)
    # what each tuning parameter controls, as its declaration says: (name, text) pairs
    param_docs: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    #: size conditions the program relies on beyond what its types say (:class:`~liftpy.constraints.Constraint`),
    #: added by rewrites with symbolic parameters (a tiling needs its tiles to cover the input); the type
    #: checker records them with the program's other constraints
    assumptions: tuple = ()

    def function(self, name: str | None = None) -> Function:
        """The function called ``name``, or the main (last) function."""
        from .errors import LiftError

        if not self.functions:
            raise LiftError(f"{self.filename} defines no program function (a def with typed parameters)")
        if name is None:
            return self.functions[-1]
        for f in self.functions:
            if f.name == name:
                return f
        known = ", ".join(f.name for f in self.functions)
        raise LiftError(f"{self.filename} has no function {name!r} (it has: {known})")

    @property
    def main(self) -> Function:
        return self.function()

    @property
    def type(self) -> Type:
        """The inferred type of the main function (type checking on first use)."""
        from .typecheck import typecheck

        return typecheck(self).main_type

    def only(self, name: str | None = None) -> "Program":
        """The program with the function ``name`` (or the main one) alone: a file's functions are independent
        (what one calls is inlined), so a whole-program rewrite or lowering then touches that function only."""
        chosen = self.function(name)
        return self if self.functions == (chosen,) else dataclasses.replace(self, functions=(chosen,))

    def replace_function(self, fun: Function) -> "Program":
        return dataclasses.replace(
            self, functions=tuple(fun if f.name == fun.name else f for f in self.functions)
        )


# ---------------------------------------------------------------------------------------------- traversal
def free_vars(node: Node) -> frozenset[str]:
    """Names a node refers to but does not bind."""
    if isinstance(node, Var):
        return frozenset((node.name,))
    if isinstance(node, Lambda):
        return free_vars(node.body) - frozenset(node.param.names())
    if isinstance(node, Let):
        return free_vars(node.value) | (free_vars(node.body) - frozenset(node.pattern.names()))
    if isinstance(node, UserFun):
        return frozenset()
    out: frozenset[str] = frozenset()
    for child in node.children():
        out |= free_vars(child)
    return out


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, parents before children."""
    yield node
    for child in node.children():
        yield from walk(child)


def map_sizes(node: Node, f: Callable[[Size], Size]) -> Node:
    """Apply ``f`` to every size in the tree (primitive parameters, types in parameters)."""
    from .arith import Expr

    def on_param(p):
        if isinstance(p, Expr):
            return f(p)
        if isinstance(p, Type):
            return p.map_sizes(f)
        if isinstance(p, IndexFun):
            return IndexFun(p.name, tuple(f(x) for x in p.params))
        return p

    def go(n: Node) -> Node:
        if isinstance(n, Prim):
            return dataclasses.replace(
                n, params=tuple(on_param(p) for p in n.params), args=tuple(go(a) for a in n.args), type=None
            )
        if isinstance(n, UserFun):
            return n
        if isinstance(n, Let) and n.declared is not None:
            return dataclasses.replace(
                n, value=go(n.value), body=go(n.body), declared=n.declared.map_sizes(f), type=None
            )
        kids = n.children()
        if not kids:
            return n
        return n.with_children(tuple(go(c) for c in kids))

    return go(node)


# ---------------------------------------------------------------------------------------------- alpha keys
def _pattern_key(p: Pattern, env: dict[str, int], counter: list[int]) -> Any:
    if isinstance(p, PVar):
        env[p.name] = counter[0]
        counter[0] += 1
        return ("b",)
    return tuple(_pattern_key(e, env, counter) for e in p.elems)


def _param_key(p: Any) -> Any:
    if isinstance(p, Node):
        return ("node", p.key())
    return p


def _alpha_key(n: Node, env: dict[str, int], counter: list[int]) -> tuple:
    if isinstance(n, Var):
        index = env.get(n.name)
        return ("var", index) if index is not None else ("free", n.name)
    if isinstance(n, Literal):
        return ("lit", n.scalar, n.value)
    if isinstance(n, Lambda):
        inner = dict(env)
        pk = _pattern_key(n.param, inner, counter)
        return ("lam", pk, _alpha_key(n.body, inner, counter))
    if isinstance(n, Let):
        value = _alpha_key(n.value, env, counter)
        inner = dict(env)
        pk = _pattern_key(n.pattern, inner, counter)
        return ("let", pk, value, n.declared, _alpha_key(n.body, inner, counter))
    if isinstance(n, Tuple):
        return ("tuple",) + tuple(_alpha_key(e, env, counter) for e in n.elems)
    if isinstance(n, Apply):
        return ("app", _alpha_key(n.fun, env, counter), _alpha_key(n.arg, env, counter))
    if isinstance(n, Prim):
        return ("prim", n.name, tuple(_param_key(p) for p in n.params)) + tuple(
            _alpha_key(a, env, counter) for a in n.args
        )
    if isinstance(n, ScalarOp):
        return ("op", n.op) + tuple(_alpha_key(a, env, counter) for a in n.args)
    if isinstance(n, UserFun):
        return ("userfun", n.name, n.param_type, n.result_type, n.body.key() if n.body is not None else None)
    raise TypeError(f"unknown node {n!r}")
