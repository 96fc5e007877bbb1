"""Constraints on sizes that the type rules require but cannot always decide symbolically.

``split(m, xs: [T]_n)`` needs ``n % m == 0``; with concrete sizes that is checked at once, with symbolic sizes
(tuning parameters) it is recorded. The parameter stage turns recorded constraints into solver terms; the
type checker reports the violated ones with the place and the primitive that asked for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .arith import Expr, as_expr, prove_eq, prove_nonneg
from .errors import Span


@dataclass(frozen=True)
class Constraint:
    """``kind`` is one of ``"divides"`` (``lhs`` divides ``rhs``), ``"equal"`` (``lhs == rhs``) or
    ``"at_least"`` (``lhs >= rhs``). ``reason`` says, in words, what needs it and why."""

    kind: str
    lhs: Expr
    rhs: Expr
    reason: str
    span: Span | None = field(default=None, compare=False)
    origin: str = ""  # the primitive (or rule, or user) that imposed it

    def __post_init__(self):
        object.__setattr__(self, "lhs", as_expr(self.lhs))
        object.__setattr__(self, "rhs", as_expr(self.rhs))

    @property
    def text(self) -> str:
        """The condition in the language's size syntax."""
        if self.kind == "divides":
            return f"{_paren(self.rhs)} % {_paren(self.lhs)} == 0"
        if self.kind == "equal":
            return f"{self.lhs} == {self.rhs}"
        return f"{self.lhs} >= {self.rhs}"

    def var_names(self) -> frozenset[str]:
        return self.lhs.var_names() | self.rhs.var_names()

    def decide(self) -> bool | None:
        """True or False when the sizes settle it, None while it depends on unknown values."""
        if self.kind == "divides":
            d, n = self.lhs.as_int(), self.rhs.as_int()
            if d is not None and n is not None:
                return d != 0 and n % d == 0
            if d == 1 or n == 0 or (self.rhs % self.lhs).as_int() == 0:
                return True
            return None
        if self.kind == "equal":
            diff = (self.lhs - self.rhs).as_int()
            if diff is not None:
                return diff == 0
            return True if prove_eq(self.lhs, self.rhs) else None
        diff = self.lhs - self.rhs
        if diff.as_int() is not None:
            return diff.as_int() >= 0
        return True if prove_nonneg(diff) else None

    def holds(self, bindings: Mapping[str, int]) -> bool:
        """Evaluate with every variable bound."""
        lhs, rhs = self.lhs.evaluate(bindings), self.rhs.evaluate(bindings)
        if self.kind == "divides":
            return lhs != 0 and rhs % lhs == 0
        if self.kind == "equal":
            return lhs == rhs
        return lhs >= rhs

    def subs(self, mapping: Mapping) -> "Constraint":
        return Constraint(self.kind, self.lhs.subs(mapping), self.rhs.subs(mapping), self.reason, self.span, self.origin)

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span is not None else ""
        return f"{where}{self.reason}: {self.text}"


def _paren(e: Expr) -> str:
    text = str(e)
    return text if text.replace("_", "a").replace(".", "a").isalnum() else f"({text})"
