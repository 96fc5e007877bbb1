"""Types of the liftpy language: scalars, vectors, arrays with symbolic lengths, tuples and functions.

Array lengths and vector widths are :mod:`liftpy.arith` expressions, so ``[float]_(n-2)`` is a type whose
length is the normalised expression ``n-2``. Types are immutable and compare structurally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from . import arith
from .arith import Expr


class Type:
    """Base of every type."""

    def map_sizes(self, f: Callable[[Expr], Expr]) -> "Type":
        """The same type with every size (array length, vector width) replaced by ``f(size)``."""
        raise NotImplementedError

    def sizes(self) -> Iterator[Expr]:
        """Every size expression that occurs in the type."""
        raise NotImplementedError

    def subs(self, mapping: Mapping) -> "Type":
        return self.map_sizes(lambda e: e.subs(mapping))

    def size_names(self) -> frozenset[str]:
        names: set[str] = set()
        for size in self.sizes():
            names |= size.var_names()
        return frozenset(names)

    def __str__(self) -> str:
        return render_type(self)


@dataclass(frozen=True)
class ScalarType(Type):
    name: str  # "float", "int" or "bool"

    def map_sizes(self, f):
        return self

    def sizes(self):
        return iter(())


FLOAT = ScalarType("float")
INT = ScalarType("int")
BOOL = ScalarType("bool")
SCALARS = {"float": FLOAT, "int": INT, "bool": BOOL}


@dataclass(frozen=True)
class VectorType(Type):
    """An OpenCL vector such as ``float4``; written ``float4`` or ``float_v`` (symbolic width)."""

    scalar: ScalarType
    width: Expr

    def map_sizes(self, f):
        return VectorType(self.scalar, f(self.width))

    def sizes(self):
        yield self.width


@dataclass(frozen=True)
class ArrayType(Type):
    elem: Type
    size: Expr

    def map_sizes(self, f):
        return ArrayType(self.elem.map_sizes(f), f(self.size))

    def sizes(self):
        yield self.size
        yield from self.elem.sizes()


@dataclass(frozen=True)
class TupleType(Type):
    elems: tuple[Type, ...]

    def map_sizes(self, f):
        return TupleType(tuple(e.map_sizes(f) for e in self.elems))

    def sizes(self):
        for e in self.elems:
            yield from e.sizes()


@dataclass(frozen=True)
class FunType(Type):
    param: Type
    result: Type

    def map_sizes(self, f):
        return FunType(self.param.map_sizes(f), self.result.map_sizes(f))

    def sizes(self):
        yield from self.param.sizes()
        yield from self.result.sizes()


def array_of(elem: Type, *sizes_outer_first) -> Type:
    """``array_of(FLOAT, h, w)`` is ``[[float]_w]_h`` (sizes listed outermost first, like numpy shapes)."""
    t = elem
    for size in reversed(sizes_outer_first):
        t = ArrayType(t, arith.as_expr(size))
    return t


def array_dims(t: Type) -> tuple[list[Expr], Type]:
    """The lengths of the nested arrays of ``t`` (outermost first) and the element type below them."""
    dims = []
    while isinstance(t, ArrayType):
        dims.append(t.size)
        t = t.elem
    return dims, t


def scalar_of(t: Type) -> ScalarType | None:
    """The scalar behind a scalar or vector type, else None."""
    if isinstance(t, ScalarType):
        return t
    if isinstance(t, VectorType):
        return t.scalar
    return None


def vectorized(t: Type, width: Expr) -> Type:
    """The type a vectorised function sees in place of ``t``: scalars become vectors of ``width``."""
    if isinstance(t, ScalarType):
        return VectorType(t, width)
    if isinstance(t, TupleType):
        return TupleType(tuple(vectorized(e, width) for e in t.elems))
    return t


def size_text(size: Expr) -> str:
    """A size as the language writes it after ``_``: bare when atomic, parenthesised otherwise."""
    text = str(size)
    if _is_atomic(text):
        return text
    return f"({text})"


def _is_atomic(text: str) -> bool:
    # a name or a number; a tuple component such as kernel._2 is not: the grammar reads `]_kernel` and then a '.'
    return text.replace("_", "a").isalnum()


def render_type(t: Type) -> str:
    if isinstance(t, ScalarType):
        return t.name
    if isinstance(t, VectorType):
        w = t.width.as_int()
        if w in (2, 3, 4, 8, 16):  # OpenCL's own vector types
            return f"{t.scalar.name}{w}"
        width = size_text(t.width)  # another constant (float_1) or a size (float_v); float_(v*2) is not in the grammar
        return f"{t.scalar.name}_{width}"
    if isinstance(t, ArrayType):
        return f"[{render_type(t.elem)}]_{size_text(t.size)}"
    if isinstance(t, TupleType):
        return "(" + ", ".join(render_type(e) for e in t.elems) + ")"
    if isinstance(t, FunType):
        return f"{render_type(t.param)} -> {render_type(t.result)}"
    raise TypeError(f"not a type: {t!r}")
