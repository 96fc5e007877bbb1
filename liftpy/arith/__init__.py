"""Symbolic integer arithmetic for array sizes, tuning parameters and index expressions.

* :mod:`liftpy.arith.expr` — the expression classes and the normal form (read its docstring first);
* :mod:`liftpy.arith.ranges` — bounds from variable ranges, and the sound-but-incomplete provers;
* :mod:`liftpy.arith.render` — the size syntax (``str``) and C (``to_c``, ``c_name``);
* :mod:`liftpy.arith.smt` — translation to Z3 (imported lazily; Z3 is optional).
"""

from liftpy.arith.expr import (
    ONE,
    ZERO,
    Atom,
    Const,
    Expr,
    FloorDiv,
    Max,
    Min,
    Mod,
    Poly,
    Range,
    Var,
    affine_in,
    as_expr,
    floor_div,
    max_,
    min_,
    mod,
)
from liftpy.arith.ranges import bounds, lower_bound, prove_eq, prove_le, prove_lt, prove_nonneg, upper_bound
from liftpy.arith.render import c_name, to_c
from liftpy.arith.smt import to_z3

__all__ = [
    "Atom",
    "Const",
    "Expr",
    "FloorDiv",
    "Max",
    "Min",
    "Mod",
    "ONE",
    "Poly",
    "Range",
    "Var",
    "ZERO",
    "affine_in",
    "as_expr",
    "bounds",
    "c_name",
    "floor_div",
    "lower_bound",
    "max_",
    "min_",
    "mod",
    "prove_eq",
    "prove_le",
    "prove_lt",
    "prove_nonneg",
    "to_c",
    "to_z3",
    "upper_bound",
]
