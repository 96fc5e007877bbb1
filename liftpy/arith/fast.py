"""Expressions compiled to Python functions, for code that evaluates the same expression many times (the
parameter sampler checks constraints millions of times).

``compile_expr(e)(values)`` equals ``e.evaluate(values)`` (floor semantics), except that a division by zero
raises ``ZeroDivisionError`` rather than an ArithError.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Mapping

from liftpy.arith.expr import Const, Expr, FloorDiv, Max, Min, Mod, Poly, Var


def _source(e: Expr, names: dict[str, str]) -> str:
    if isinstance(e, Const):
        return f"({e.value})"
    if isinstance(e, Var):
        if e.name not in names:
            names[e.name] = f"v{len(names)}"
        return names[e.name]
    if isinstance(e, FloorDiv):
        return f"({_source(e.num, names)} // {_source(e.den, names)})"
    if isinstance(e, Mod):
        return f"({_source(e.num, names)} % {_source(e.den, names)})"
    if isinstance(e, Min):
        return f"min({_source(e.a, names)}, {_source(e.b, names)})"
    if isinstance(e, Max):
        return f"max({_source(e.a, names)}, {_source(e.b, names)})"
    assert isinstance(e, Poly)
    terms = []
    for monomial, coeff in e.terms:
        factors = [str(coeff)] if coeff != 1 or not monomial else []
        for atom, power in monomial:
            factors += [_source(atom, names)] * power
        terms.append("*".join(factors))
    return "(" + " + ".join(terms) + ")"


@lru_cache(maxsize=4096)
def compile_expr(e: Expr) -> Callable[[Mapping[str, int]], int]:
    """A function of a mapping from variable names to ints."""
    names: dict[str, str] = {}
    body = _source(e, names)
    args = "".join(f"    {local} = values[{name!r}]\n" for name, local in names.items())
    code = f"def f(values):\n{args}    return {body}\n"
    scope: dict = {}
    exec(compile(code, f"<compiled {e}>", "exec"), scope)  # noqa: S102 - our own generated arithmetic
    return scope["f"]
