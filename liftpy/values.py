"""How the interpreter represents values: batched numpy arrays, tuples as structures of arrays.

A value of type ``T`` evaluated inside ``d`` enclosing maps is a *batched* value: every numpy array in it (a
*leaf*) starts with the ``d`` batch axes of those maps, followed by the array axes of ``T`` (outermost first)
and, for a vector element, one trailing axis of the vector width. A tuple is a Python tuple of values, and an
array of tuples is a tuple of arrays (structure of arrays), so every layout primitive is a cheap numpy view
on each leaf, and ``map`` costs nothing: an array of ``n`` elements at depth ``d`` is the same numpy data as
one element at depth ``d + 1``. This keeps the interpreter fast enough to be the reference for real layers.
"""

from __future__ import annotations

import math
from typing import Callable, Union

import numpy as np

from .types import ArrayType, ScalarType, TupleType, Type, VectorType

Value = Union[np.ndarray, tuple]

DTYPES = {"float": np.float32, "int": np.int32, "bool": np.bool_}


def dtype_of(t: Type) -> np.dtype:
    while isinstance(t, ArrayType):
        t = t.elem
    if isinstance(t, VectorType):
        t = t.scalar
    if isinstance(t, ScalarType):
        return np.dtype(DTYPES[t.name])
    raise TypeError(f"no single dtype for {t}")


def on_leaves(value: Value, f: Callable[[np.ndarray], np.ndarray]) -> Value:
    """Apply ``f`` to every leaf of a value, keeping its tuple structure."""
    if isinstance(value, tuple):
        return tuple(on_leaves(v, f) for v in value)
    return f(value)


def zip_leaves(values: list[Value], f: Callable[..., np.ndarray]) -> Value:
    """Apply ``f`` leaf-wise to several values of the same structure."""
    if isinstance(values[0], tuple):
        return tuple(zip_leaves([v[i] for v in values], f) for i in range(len(values[0])))
    return f(*values)


def first_leaf(value: Value) -> np.ndarray:
    while isinstance(value, tuple):
        value = value[0]
    return value


def align(value: Value, depth: int, batch: tuple[int, ...]) -> Value:
    """A value computed at ``depth`` seen from inside more maps: insert and broadcast the missing batch axes."""
    extra = len(batch) - depth
    if extra == 0:
        return value

    def go(leaf: np.ndarray) -> np.ndarray:
        rest = leaf.shape[depth:]
        expanded = leaf.reshape(leaf.shape[:depth] + (1,) * extra + rest)
        return np.broadcast_to(expanded, tuple(batch) + rest)

    return on_leaves(value, go)


def constant(value, t: Type, batch: tuple[int, ...], shape: tuple[int, ...] = ()) -> Value:
    """A value of scalar (or vector) type filled with ``value``, broadcast over the batch."""
    if isinstance(t, TupleType):
        return tuple(constant(v, e, batch, shape) for v, e in zip(value, t.elems))
    extra = ()
    if isinstance(t, VectorType):
        extra = (t.width.as_int(),)
    return np.broadcast_to(np.asarray(value, dtype=dtype_of(t)), tuple(batch) + tuple(shape) + extra)


class Joined:
    """A leaf whose axes each join a run of a numpy array's axes, kept unjoined: the ``join`` of a window's rows,
    which no strides can describe (a reshape would copy every window), read by a fold one element at a time,
    each element a view. ``groups[k]``: how many of ``base``'s axes make axis ``k``."""

    __slots__ = ("base", "groups")

    def __init__(self, base: np.ndarray, groups: tuple[int, ...]):
        self.base, self.groups = base, groups

    @property
    def shape(self) -> tuple[int, ...]:
        out, start = [], 0
        for g in self.groups:
            out.append(math.prod(self.base.shape[start:start + g]))
            start += g
        return tuple(out)

    @property
    def ndim(self) -> int:
        return len(self.groups)

    @property
    def dtype(self) -> np.dtype:
        return self.base.dtype

    def join(self, axis: int) -> "Joined":
        """Axes ``axis`` and ``axis + 1`` joined."""
        g = self.groups
        return Joined(self.base, g[:axis] + (g[axis] + g[axis + 1],) + g[axis + 2:])

    def take(self, i: int, axis: int) -> Value:
        """Element ``i`` along ``axis``: a view of the base (a plain array once no joined axis is left)."""
        start = sum(self.groups[:axis])
        g = self.groups[axis]
        index = np.unravel_index(i, self.base.shape[start:start + g])
        view = self.base[(slice(None),) * start + tuple(int(k) for k in index)]
        groups = self.groups[:axis] + self.groups[axis + 1:]
        return view if all(k == 1 for k in groups) else Joined(view, groups)

    def materialize(self) -> np.ndarray:
        return self.base.reshape(self.shape)


def join_axes(leaf, axis: int):
    """A leaf's axes ``axis`` and ``axis + 1`` as one: a numpy view where strides can say it, else a
    :class:`Joined` (a copy only if something other than a fold reads it: :func:`materialized`)."""
    if isinstance(leaf, Joined):
        return leaf.join(axis)
    n, m = leaf.shape[axis], leaf.shape[axis + 1]
    if n <= 1 or m <= 1 or leaf.strides[axis] == m * leaf.strides[axis + 1]:
        return leaf.reshape(leaf.shape[:axis] + (n * m,) + leaf.shape[axis + 2:])
    return Joined(leaf, (1,) * leaf.ndim).join(axis)


def take(value: Value, i: int, axis: int) -> Value:
    """Element ``i`` of every leaf along ``axis``, as views (a fold's step)."""
    if isinstance(value, tuple):
        return tuple(take(v, i, axis) for v in value)
    if isinstance(value, Joined):
        return value.take(i, axis)
    return value[(slice(None),) * axis + (i,)]


def materialized(value: Value) -> Value:
    """A value with every :class:`Joined` leaf made a numpy array."""
    if isinstance(value, tuple):
        return tuple(materialized(v) for v in value)
    return value.materialize() if isinstance(value, Joined) else value


def concrete(size) -> int:
    """A size that must be known when the interpreter runs (sizes are bound before evaluation)."""
    n = size.as_int()
    if n is None:
        raise ValueError(f"size {size} is not known at evaluation time")
    return n
