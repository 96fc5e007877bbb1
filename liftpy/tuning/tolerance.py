"""The tolerance a trial's output is checked at: the float32 error bound of the program's own arithmetic.

A float32 evaluation's error in an output element is a sum of its roundings, each at most ``u = 2^-24`` times
a partial result, and every partial result is at most the element's *magnitude* ``M``: the same computation
with every input replaced by its absolute value and every subtraction by an addition -- for a sum, the sum of
its terms' absolute values, whatever their order. With ``D`` roundings on the element's path the error is at
most ``γ_D · M`` (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1), and, with rounding errors
independent and of mean zero, at most ``γ̃_D(λ) · M = (exp(λ·√D·u + D·u²/(1-u)) - 1) · M`` with probability at
least ``1 - 2D·exp(-λ²(1-u)²/2)`` (Higham and Mary, SIAM J. Sci. Comput. 41(5), 2019, Theorem 3.1). The check
uses the second at ``λ = 10`` (:data:`LAMBDA`; a false alarm under 1e-17 per element at ``D = 10^4``): the
first, ``D·u`` against ``10·√D·u``, lets an output 0.1% too large pass on a VGG-16 layer. The naive lowering
and a tuned candidate (reductions split, reordered, vectorised) are two such evaluations, so they may differ by
twice it. The bound follows each element's own terms, not the output's size: a sum of large terms clamped near
zero (a convolution with ReLU6) keeps the error of its terms.

:func:`magnitude_program` writes ``M``'s program from the program itself (a pure transformation of its scalar
operations), so the device computes ``M`` with the naive lowering at any size. Operations whose error depends
on the values, not only on their magnitudes (exp, log, sqrt, tanh, comparisons and select, division by a
computed value), have none: their programs are compared at the output's scale (:func:`close_to`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import numpy as np

from ..ir import Lambda, Let, Literal, Node, Prim, Program, ScalarOp, UserFun, Var, walk
from ..types import FLOAT, scalar_of

#: float32's unit roundoff
UNIT_ROUNDOFF = 2.0 ** -24
#: the probabilistic bound's λ (the module's docstring)
LAMBDA = 10.0
#: the smallest normal float32: a result below it may be flushed to zero (each rounding may lose this much)
SMALLEST_NORMAL = 2.0 ** -126
#: a literal at least this large is a sentinel -- the start of a max or min (``-3.402823e38f``) -- not a
#: number that enters a sum: its magnitude is 0 (an operand of max or min carries no rounding of its own)
SENTINEL = 2.0 ** 100


class _NoBound(Exception):
    """An operation whose error bound :func:`magnitude_program` cannot write."""


def magnitude_program(program: Program, function: str | None = None) -> Program | None:
    """The program computing each output element's magnitude ``M`` (the module's docstring) when run on the
    inputs' absolute values; None where an operation's error depends on values (compare at the output's scale).

    Rules, per float operation: ``a + b`` and ``a - b`` give ``Ma + Mb``; ``-a`` and ``fabs(a)`` give ``Ma``;
    ``a * b`` gives ``Ma * Mb``; ``a / b`` with ``b`` exact (a scalar input or a literal) gives ``Ma / |b|``;
    ``max`` and ``min`` give the largest ``M`` of their operands that carry rounding (an exact operand -- a
    scalar input, a literal -- moves no error through them). A literal's magnitude is its absolute value, a
    sentinel's (:data:`SENTINEL`, or not finite) 0; integer and boolean operations (indices) stay as they are."""
    from ..typecheck import typecheck

    fun = program.function(function)
    typed = typecheck(program.only(fun.name)).program.function(fun.name)
    exact = frozenset(p.name for p in fun.data_params if scalar_of(p.type) == FLOAT)
    try:
        body = _magnitude(typed.body, exact)
    except _NoBound:
        return None
    return program.replace_function(dataclasses.replace(fun, body=body))


def rounding_depth(program: Program, sizes: Mapping[str, object], function: str | None = None) -> int:
    """``D``: an upper bound of the rounded operations on any output element's path at ``sizes`` -- every
    reduction's length and every float operation written, each counted once (a path passes each at most once
    per element it folds)."""
    from ..typecheck import typecheck

    name = program.function(function).name
    typed = typecheck(program.only(name), sizes).program.function(name)
    depth = 0
    for node in walk(typed.body):
        if isinstance(node, Prim) and _is_reduction(node):
            depth += _length(node.args[-1].type, sizes)
        elif isinstance(node, ScalarOp) and _is_float(node):
            depth += 1
        elif isinstance(node, UserFun):
            depth += sum(1 for inner in walk(node.body) if isinstance(inner, ScalarOp) and _is_float(inner))
    return max(depth, 1)


def tolerance(magnitude: np.ndarray, depth: int) -> np.ndarray:
    """Each element's tolerance: twice the probabilistic bound ``γ̃_D(λ) · M`` (the module's docstring), plus
    what flushing results below the smallest normal may lose on the way (``2 · D`` of it)."""
    u = UNIT_ROUNDOFF
    gamma = math.expm1(LAMBDA * math.sqrt(depth) * u + depth * u * u / (1 - u))
    return 2 * gamma * np.abs(np.asarray(magnitude, np.float64)) + 2 * depth * SMALLEST_NORMAL


# ------------------------------------------------------------------------------------------------ the rules
def _magnitude(node: Node, exact: frozenset[str]) -> Node:
    """``node``'s magnitude expression; ``exact``: the names in scope bound to exact scalars (scalar inputs)."""
    if isinstance(node, Literal):
        if node.scalar != "float":
            return node
        value = abs(float(node.value))
        return dataclasses.replace(node, value=value if math.isfinite(value) and value < SENTINEL else 0.0)
    if isinstance(node, Lambda):
        return node.with_children((_magnitude(node.body, exact - frozenset(node.param.names())),))
    if isinstance(node, Let):
        inner = exact - frozenset(node.pattern.names())
        return node.with_children((_magnitude(node.value, exact), _magnitude(node.body, inner)))
    if isinstance(node, UserFun):
        return dataclasses.replace(node, body=_magnitude(node.body, frozenset()), type=None)
    if not isinstance(node, ScalarOp) or not _is_float(node):
        if isinstance(node, ScalarOp) and any(_is_float(a) for a in node.args):
            raise _NoBound(node.op)  # a comparison of floats: its result flips with rounding
        return node.with_children(tuple(_magnitude(child, exact) for child in node.children()))
    args = node.args
    if node.op in ("+", "-"):
        return dataclasses.replace(node, op="+", args=tuple(_magnitude(a, exact) for a in args), type=None)
    if node.op == "*":
        return dataclasses.replace(node, args=tuple(_magnitude(a, exact) for a in args), type=None)
    if node.op in ("neg", "fabs"):
        return _magnitude(args[0], exact)
    if node.op == "/" and _is_exact(args[1], exact):
        return dataclasses.replace(node, args=tuple(_magnitude(a, exact) for a in args), type=None)
    if node.op in ("max", "min"):
        rounded = [_magnitude(a, exact) for a in args if not _is_exact(a, exact)]
        if not rounded:
            return Literal(0.0, "float", node.span)
        if len(rounded) == 1:
            return rounded[0]
        return dataclasses.replace(node, op="max", args=tuple(rounded), type=None)
    raise _NoBound(node.op)


def _is_exact(node: Node, exact: frozenset[str]) -> bool:
    return isinstance(node, Literal) or isinstance(node, Var) and node.name in exact


def _is_float(node: Node) -> bool:
    return node.type is not None and scalar_of(node.type) == FLOAT


def _is_reduction(node: Prim) -> bool:
    from ..primitives import primitive_of

    return primitive_of(node).is_reduction


def _length(array_type, sizes: Mapping[str, object]) -> int:
    size = array_type.size
    known = size.as_int()
    if known is not None:
        return known
    return size.evaluate({k: v for k, v in sizes.items() if isinstance(v, int)})


__all__ = ["magnitude_program", "rounding_depth", "tolerance", "LAMBDA", "UNIT_ROUNDOFF", "SENTINEL"]
