"""How the interpreter represents values: batched numpy arrays, tuples as structures of arrays.

A value of type ``T`` evaluated inside ``d`` enclosing maps is a *batched* value: every numpy array in it (a
*leaf*) starts with the ``d`` batch axes of those maps, followed by the array axes of ``T`` (outermost first)
and, for a vector element, one trailing axis of the vector width. A tuple is a Python tuple of values, and an
array of tuples is a tuple of arrays (structure of arrays), so every layout primitive is a cheap numpy view
on each leaf, and ``map`` costs nothing: an array of ``n`` elements at depth ``d`` is the same numpy data as
one element at depth ``d + 1``. This keeps the interpreter fast enough to be the reference for real layers.
"""

from __future__ import annotations

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


def concrete(size) -> int:
    """A size that must be known when the interpreter runs (sizes are bound before evaluation)."""
    n = size.as_int()
    if n is None:
        raise ValueError(f"size {size} is not known at evaluation time")
    return n
