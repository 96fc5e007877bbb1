"""Views: how layout primitives become index expressions, without code and without copies.

A *view* is a value the kernel can read element by element. Reading takes a *path* from the outermost level
of the value's type to a scalar or vector leaf: array indices (:class:`Index`), tuple components
(:class:`Get`) and vector lanes (:class:`Lane`). Each layout view rewrites the path and hands it to the view
below, the way Lift's ``emitView`` walks its chain:

* split(m)      ``(chunk, elem) -> chunk*m + elem``       * join(m)   ``k -> (k/m, k%m)``
* slide(_, s)   ``(window, elem) -> window*s + elem``     * transpose ``(i, j) -> (j, i)``
* reorder(f)    ``i -> f(i)``                             * asScalar(v) ``i -> (i/v, lane i%v)``
* pad(l, r)     ``i -> i-l`` guarded by ``0 <= i-l < n`` (constant) or clamped into ``[0, n)``
* zip           ``(i, component c, ...) -> component c at (i, ...)``
* asVector(v)   one vector load when the v elements provably sit side by side in memory, else a vector
  built from v scalar reads

A *destination* is the same on the output side: where each element of a computed value is written. Layout
primitives applied *after* a computation (``transpose(mapLcl(...))``) turn into destination transforms, so
results are written straight to their final place.

Indices are :mod:`liftpy.arith` expressions over loop variables with known ranges, so they simplify
(``(i*n + j)/n`` is ``i`` when ``0 <= j < n``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import arith
from ..arith import Expr, as_expr, prove_eq, prove_lt, prove_nonneg
from ..errors import CodegenError
from ..types import ArrayType, ScalarType, TupleType, Type, VectorType
from .c import CExpr, Memory, c_type, guarded, literal, load, vector_of
from .kir import Store, VStore


# ------------------------------------------------------------------------------------------------ paths
@dataclass(frozen=True)
class Index:
    expr: Expr


@dataclass(frozen=True)
class Get:
    component: int


@dataclass(frozen=True)
class Lane:
    lane: Expr


Path = tuple  # of Index | Get | Lane


def _split_index(path: Path, what: str) -> tuple[Expr, Path]:
    if not path or not isinstance(path[0], Index):
        raise CodegenError(f"internal: {what} read without an array index ({path})")
    return path[0].expr, path[1:]


def elem_count(t: Type) -> int:
    """Leaf elements (scalars or vectors) in a value of type t; tuples are stored as separate memories."""
    n = 1
    while isinstance(t, ArrayType):
        size = t.size.as_int()
        if size is None:
            raise CodegenError(f"size {t.size} is not known at compile time; give it with --size")
        n *= size
        t = t.elem
    if isinstance(t, TupleType):
        raise CodegenError("internal: tuple inside a memory")
    return n


def leaf_type(t: Type) -> Type:
    while isinstance(t, ArrayType):
        t = t.elem
    return t


# ------------------------------------------------------------------------------------------------ views
class View:
    """A readable value of type ``type``."""

    type: Type

    def read(self, path: Path) -> CExpr:
        raise NotImplementedError

    def address(self, path: Path) -> tuple[Memory, Expr] | None:
        """The memory and element offset a leaf read comes from, when it is a plain memory read."""
        return None

    def access(self, i: Expr) -> "View":
        return AccessView(self, as_expr(i))

    def component(self, c: int) -> "View":
        return GetView(self, c)


class MemView(View):
    """A memory holding a value of ``type`` in row-major order."""

    def __init__(self, mem: Memory, t: Type, base: Expr = arith.Const(0)):
        self.mem, self.type, self.base = mem, t, base

    def offset(self, path: Path) -> tuple[Expr, Path]:
        offset, t = self.base, self.type
        rest = list(path)
        while rest and isinstance(t, ArrayType):
            p = rest.pop(0)
            if not isinstance(p, Index):
                raise CodegenError(f"internal: expected an index into {t}, got {p}")
            offset = offset + p.expr * elem_count(t.elem)
            t = t.elem
        return offset, tuple(rest)

    def read(self, path):
        offset, rest = self.offset(path)
        ref = load(self.mem, offset)
        if _is_width_one(self.mem.leaf):
            return ref  # a vector of one lane is a scalar in C
        return _lane(ref, rest)

    def address(self, path):
        offset, rest = self.offset(path)
        if rest:
            return None
        return self.mem, offset


def _is_width_one(t: Type) -> bool:
    return isinstance(t, VectorType) and t.width.as_int() == 1


def _is_scalar(t: Type) -> bool:
    """Whether a value of type t is a scalar in C."""
    return isinstance(t, ScalarType) or _is_width_one(t)


def _type_at(t: Type, path: Path) -> Type:
    """The type of what ``path`` reads in a value of type t."""
    for p in path:
        if isinstance(p, Lane) and isinstance(t, VectorType):
            t = t.scalar
        elif isinstance(p, Get) and isinstance(t, TupleType):
            t = t.elems[p.component]
        elif isinstance(t, ArrayType):
            t = t.elem
    return t


def _lane(value: CExpr, rest: Path) -> CExpr:
    if not rest:
        return value
    (lane,) = rest
    if not isinstance(lane, Lane):
        raise CodegenError(f"internal: unexpected path element {lane}")
    k = lane.lane.as_int()
    if k is not None:
        return CExpr(value.paren(), f".s{k:x}", atomic=True)
    raise CodegenError("a vector lane chosen at run time cannot be read from a computed vector")


class ScalarView(View):
    """A scalar or vector value computed by a C expression."""

    def __init__(self, expr: CExpr, t: Type):
        self.expr, self.type = expr, t

    def read(self, path):
        if _is_width_one(self.type):
            return self.expr
        return _lane(self.expr, path)


class ConstView(View):
    """A constant: every element of the value is ``value`` (Value(v, T), pad's border)."""

    def __init__(self, value, t: Type):
        self.value, self.type = value, t

    def read(self, path):
        leaf = leaf_type(self.type)
        if path and isinstance(path[-1], Lane) and isinstance(leaf, VectorType):
            leaf = leaf.scalar
        return literal(self.value, leaf)


class AccessView(View):
    """Element ``i`` of an array view (what a map's function sees)."""

    def __init__(self, inner: View, i: Expr):
        if not isinstance(inner.type, ArrayType):
            raise CodegenError(f"internal: indexing a {inner.type}")
        self.inner, self.i, self.type = inner, i, inner.type.elem

    def read(self, path):
        return self.inner.read((Index(self.i),) + path)

    def address(self, path):
        return self.inner.address((Index(self.i),) + path)


class GetView(View):
    """Component ``c`` of a tuple view."""

    def __init__(self, inner: View, c: int):
        self.inner, self.c, self.type = inner, c, inner.type.elems[c]

    def read(self, path):
        return self.inner.read((Get(self.c),) + path)

    def address(self, path):
        return self.inner.address((Get(self.c),) + path)


class TupleView(View):
    """A tuple of views (a Tuple node)."""

    def __init__(self, views: tuple[View, ...]):
        self.views = views
        self.type = TupleType(tuple(v.type for v in views))

    def read(self, path):
        c, rest = _pop_get(path)
        return self.views[c].read(rest)

    def address(self, path):
        c, rest = _pop_get(path)
        return self.views[c].address(rest)


def _pop_get(path: Path) -> tuple[int, Path]:
    if not path or not isinstance(path[0], Get):
        raise CodegenError(f"internal: a tuple read without a component ({path})")
    return path[0].component, path[1:]


class ZipView(View):
    """An array of tuples made of arrays (zip), also how arrays of tuples are stored (one memory each)."""

    def __init__(self, views: tuple[View, ...], t: Type):
        self.views, self.type = views, t

    def _route(self, path: Path) -> tuple[int, Path]:
        # indices come first (one per array level above the tuple), then the component
        t, i = self.type, 0
        while isinstance(t, ArrayType):
            t, i = t.elem, i + 1
        c = path[i]
        if not isinstance(c, Get):
            raise CodegenError(f"internal: zip read without a component ({path})")
        return c.component, path[:i] + path[i + 1 :]

    def read(self, path):
        c, rest = self._route(path)
        return self.views[c].read(rest)

    def address(self, path):
        c, rest = self._route(path)
        return self.views[c].address(rest)


class _IndexView(View):
    """A layout view that only rewrites the path; subclasses say how."""

    def __init__(self, inner: View, t: Type):
        self.inner, self.type = inner, t

    def transform(self, path: Path) -> Path:
        raise NotImplementedError

    def read(self, path):
        return self.inner.read(self.transform(path))

    def address(self, path):
        return self.inner.address(self.transform(path))


class SplitView(_IndexView):
    def __init__(self, inner, t, m: Expr):
        super().__init__(inner, t)
        self.m = m

    def transform(self, path):
        chunk, rest = _split_index(path, "split")
        elem, rest = _split_index(rest, "split")
        return (Index(chunk * self.m + elem),) + rest


class JoinView(_IndexView):
    def __init__(self, inner, t, m: Expr):
        super().__init__(inner, t)
        self.m = m

    def transform(self, path):
        k, rest = _split_index(path, "join")
        return (Index(k // self.m), Index(k % self.m)) + rest


class TransposeView(_IndexView):
    def transform(self, path):
        i, rest = _split_index(path, "transpose")
        j, rest = _split_index(rest, "transpose")
        return (Index(j), Index(i)) + rest


class SlideView(_IndexView):
    def __init__(self, inner, t, step: Expr):
        super().__init__(inner, t)
        self.step = step

    def transform(self, path):
        window, rest = _split_index(path, "slide")
        elem, rest = _split_index(rest, "slide")
        return (Index(window * self.step + elem),) + rest


class ReorderView(_IndexView):
    def __init__(self, inner, t, index_fun):
        super().__init__(inner, t)
        self.index_fun = index_fun  # (i) -> Expr

    def transform(self, path):
        i, rest = _split_index(path, "reorder")
        return (Index(self.index_fun(i)),) + rest


class AsScalarView(_IndexView):
    def __init__(self, inner, t, width: Expr):
        super().__init__(inner, t)
        self.width = width

    def transform(self, path):
        i, rest = _split_index(path, "asScalar")
        return (Index(i // self.width), Lane(i % self.width)) + rest


class MapView(View):
    """map(f, xs) with a layout function f (``map(transpose, ...)`` in slide2D): element i is f's view of
    element i of xs, built when read."""

    def __init__(self, inner: View, t: Type, apply):
        self.inner, self.type, self.apply = inner, t, apply  # apply: element view -> view

    def read(self, path):
        i, rest = _split_index(path, "map")
        return self.apply(self.inner.access(i)).read(rest)

    def address(self, path):
        i, rest = _split_index(path, "map")
        return self.apply(self.inner.access(i)).address(rest)


class PadView(View):
    """pad(l, r, value): reads outside the original array give the value (or the clamped edge element);
    ``branch_free`` (padSelect): a scalar read is a select of the element clamped into the array."""

    def __init__(self, inner: View, t: Type, left: Expr, n: Expr, value: View | None, branch_free: bool = False):
        self.inner, self.type, self.left, self.n, self.value = inner, t, left, n, value  # value None: clamp
        self.branch_free = branch_free

    def _inner_index(self, i: Expr) -> Expr:
        j = i - self.left
        if self.value is None:
            return self._clamped(j)
        return j

    def _clamped(self, j: Expr) -> Expr:
        return arith.max_(arith.Const(0), arith.min_(j, self.n - 1))

    def _inside(self, j: Expr) -> bool:
        return prove_nonneg(j) and prove_lt(j, self.n)

    def read(self, path):
        i, rest = _split_index(path, "pad")
        j = self._inner_index(i)
        inner = self.inner.read((Index(j),) + rest)
        if self.value is None or self._inside(j):
            return inner
        border = self.value.read(rest if not isinstance(self.value, (ConstView, ScalarView)) else ())
        if rest and isinstance(rest[-1], Lane) and isinstance(self.value, ScalarView):
            border = self.value.read(rest[-1:])
        if self.branch_free and _is_scalar(_type_at(self.type, path)) and prove_lt(0, self.n):
            safe = self.inner.read((Index(self._clamped(j)),) + rest)  # an element that exists
            return guarded(j, self.n, inner, border, safe)
        return guarded(j, self.n, inner, border)

    def address(self, path):
        i, rest = _split_index(path, "pad")
        j = self._inner_index(i)
        if self.value is None or self._inside(j):
            return self.inner.address((Index(j),) + rest)
        return None


class AsVectorView(View):
    """asVector(v): one vector load when the lanes are contiguous in memory, else a vector of scalar reads."""

    def __init__(self, inner: View, t: Type, width: Expr):
        self.inner, self.type, self.width = inner, t, width

    def read(self, path):
        i, rest = _split_index(path, "asVector")
        v = self.width.as_int()
        if rest:
            (lane,) = rest
            return self.inner.read((Index(i * v + lane.lane),))
        if v == 1:
            return self.inner.read((Index(i),))
        return vector_of(c_type(self.type.elem), tuple(self.inner.read((Index(i * v + k),)) for k in range(v)))


class SingletonView(View):
    """A value seen as a one-element array (reduceSeq's ``[U]_1``)."""

    def __init__(self, inner: View, t: Type):
        self.inner, self.type = inner, t

    def read(self, path):
        _, rest = _split_index(path, "reduce result")
        return self.inner.read(rest)

    def address(self, path):
        _, rest = _split_index(path, "reduce result")
        return self.inner.address(rest)


# ------------------------------------------------------------------------------------------------ destinations
class Dest:
    """Where the elements of a computed value of ``type`` are written."""

    type: Type

    def write(self, out, path: Path, value: CExpr):
        """Add the statements writing the leaf at ``path`` to ``out`` (``out.add(statement)``)."""
        raise NotImplementedError

    def access(self, i: Expr) -> "Dest":
        return AccessDest(self, as_expr(i))

    def component(self, c: int) -> "Dest":
        return GetDest(self, c)

    def memory(self) -> Memory | None:
        """The memory written to, when this destination is a plain memory."""
        return None

    def address(self, path: Path) -> tuple[Memory, Expr] | None:
        return None


class MemDest(Dest):
    def __init__(self, mem: Memory, t: Type, base: Expr = arith.Const(0)):
        self.mem, self.type, self.base = mem, t, base
        self.view = MemView(mem, t, base)

    def write(self, out, path, value):
        offset, rest = self.view.offset(path)
        if rest and not _is_width_one(self.mem.leaf):
            (lane,) = rest
            out.add(Store(self.mem, offset, value, lane.lane.as_int()))
        else:
            out.add(Store(self.mem, offset, value))

    def memory(self):
        return self.mem

    def address(self, path):
        return self.view.address(path)


class AccessDest(Dest):
    def __init__(self, inner: Dest, i: Expr):
        if not isinstance(inner.type, ArrayType):
            raise CodegenError(f"internal: indexing a destination of type {inner.type}")
        self.inner, self.i, self.type = inner, i, inner.type.elem

    def write(self, out, path, value):
        self.inner.write(out, (Index(self.i),) + path, value)

    def address(self, path):
        return self.inner.address((Index(self.i),) + path)


class GetDest(Dest):
    def __init__(self, inner: Dest, c: int):
        self.inner, self.c, self.type = inner, c, inner.type.elems[c]

    def write(self, out, path, value):
        self.inner.write(out, (Get(self.c),) + path, value)


class TupleDest(Dest):
    """A tuple (or an array of tuples) written to one destination per component."""

    def __init__(self, dests: tuple[Dest, ...], t: Type):
        self.dests, self.type = dests, t

    def write(self, out, path, value):
        route = ZipView(self.dests, self.type) if isinstance(self.type, ArrayType) else None
        if route is not None:
            c, rest = route._route(path)
        else:
            c, rest = _pop_get(path)
        self.dests[c].write(out, rest, value)


class _IndexDest(Dest):
    def __init__(self, inner: Dest, t: Type):
        self.inner, self.type = inner, t

    def transform(self, path: Path) -> Path:
        raise NotImplementedError

    def write(self, out, path, value):
        self.inner.write(out, self.transform(path), value)

    def address(self, path):
        return self.inner.address(self.transform(path))


class TransposeDest(_IndexDest):
    """Writing E where transpose(E) is wanted: element (i, j) of E goes to (j, i)."""

    def transform(self, path):
        return TransposeView.transform(self, path)  # the same permutation


class JoinDest(_IndexDest):
    """Writing E : [[T]_m]_n where join(E) is wanted: (i, j) goes to i*m + j."""

    def __init__(self, inner, t, m: Expr):
        super().__init__(inner, t)
        self.m = m

    def transform(self, path):
        return SplitView.transform(self, path)


class SplitDest(_IndexDest):
    """Writing E : [T]_n where split(m, E) is wanted: k goes to (k/m, k%m)."""

    def __init__(self, inner, t, m: Expr):
        super().__init__(inner, t)
        self.m = m

    def transform(self, path):
        return JoinView.transform(self, path)


class CropDest(Dest):
    """Writing E : [T]_m where pad(l, r) of E is wanted with l, r <= 0 (a crop: padClamp(0, -r) after a map
    rounded up by ``roundUp``): element i goes to i + l, written only where that falls in the result -- a
    guarded store where the index may fall outside, none where it always does."""

    def __init__(self, inner: Dest, t: Type, left: Expr):
        self.inner, self.type, self.left = inner, t, as_expr(left)

    def _target(self, path: Path) -> tuple[Expr, Path, list[tuple[Expr, Expr]] | None]:
        """The index in the result, the rest of the path, and the guards (None: never inside)."""
        i, rest = _split_index(path, "crop")
        j = as_expr(i) + self.left
        n = self.inner.type.size
        guards = []
        if not prove_lt(j, n):
            guards.append((j, as_expr(n)))
        if not prove_nonneg(j):
            guards.append((arith.Const(0) - j, arith.Const(1)))  # -j < 1: j >= 0
        if prove_nonneg(j - n) or prove_lt(j, 0):
            return j, rest, None
        return j, rest, guards

    def write(self, out, path, value):
        j, rest, guards = self._target(path)
        if guards is None:
            return
        if not guards:
            return self.inner.write(out, (Index(j),) + rest, value)
        for s in out.collect(lambda: self.inner.write(out, (Index(j),) + rest, value)):
            out.add(_with_guards(s, tuple(guards)))

    def address(self, path):
        j, rest, guards = self._target(path)
        return self.inner.address((Index(j),) + rest) if guards == [] else None


def _with_guards(stmt, guards: tuple) -> object:
    """A store written by a destination below a crop, made conditional on the crop's guards too."""
    if not isinstance(stmt, (Store, VStore)):
        raise CodegenError(f"internal: a cropped destination wrote {type(stmt).__name__}")
    return replace(stmt, guards=stmt.guards + guards)


class MapDest(Dest):
    """Writing xs where map(f, xs) is wanted, f a layout function: element i goes through f's inverse."""

    def __init__(self, inner: Dest, t: Type, through):
        self.inner, self.type, self.through = inner, t, through  # through: element dest -> dest for xs[i]

    def write(self, out, path, value):
        i, rest = _split_index(path, "map")
        self.through(self.inner.access(i)).write(out, rest, value)

    def address(self, path):
        i, rest = _split_index(path, "map")
        return self.through(self.inner.access(i)).address(rest)


class AsScalarDest(Dest):
    """Writing E : [S_v]_n where asScalar(E) is wanted: a vector store, or one store per lane."""

    def __init__(self, inner: Dest, t: Type, width: Expr):
        self.inner, self.type, self.width = inner, t, width

    def write(self, out, path, value):
        i, rest = _split_index(path, "asScalar")
        v = self.width.as_int()
        if rest or v == 1:
            lane = rest[0].lane if rest else 0
            self.inner.write(out, (Index(i * v + lane),), value)
            return
        first = self.inner.address((Index(i * v),))
        if first is not None and first[0].space != "private" and all(
            (a := self.inner.address((Index(i * v + k),))) is not None and a[0] is first[0] and prove_eq(a[1], first[1] + k)
            for k in range(1, v)
        ):
            out.add(VStore(first[0], first[1], v, value))
            return
        for k in range(v):
            self.inner.write(out, (Index(i * v + k),), CExpr(value.paren(), f".s{k:x}", atomic=True))


__all__ = [
    "Index",
    "Get",
    "Lane",
    "View",
    "MemView",
    "ScalarView",
    "ConstView",
    "TupleView",
    "ZipView",
    "SplitView",
    "JoinView",
    "TransposeView",
    "SlideView",
    "ReorderView",
    "AsScalarView",
    "AsVectorView",
    "PadView",
    "SingletonView",
    "Dest",
    "MemDest",
    "TupleDest",
    "TransposeDest",
    "JoinDest",
    "SplitDest",
    "CropDest",
    "AsScalarDest",
    "elem_count",
    "leaf_type",
    "ScalarType",
]
