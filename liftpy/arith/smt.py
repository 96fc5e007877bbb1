"""Translation to Z3 integer terms, and the Z3 fallback of the provers.

Z3 is imported inside the functions so that ``import liftpy.arith`` works without it. At exit its main context is
left to the operating system (:func:`leave_main_context`).

Z3's integer ``/`` and ``%`` (SMT-LIB ``div``/``mod``) are Euclidean: the remainder is never negative.  For a
positive divisor that is exactly Python's floor division and modulo; for a divisor whose sign is unknown the
translation spells floor semantics out with ``If``, so the Z3 term always means what ``evaluate`` computes.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import MutableMapping
from typing import Mapping

from liftpy.arith.expr import Const, Expr, FloorDiv, Max, Min, Mod, Poly, Var, as_expr

_Z3_TIMEOUT_MS = 1000


def leave_main_context() -> None:
    """Mark Z3's main context (where one was made) as not to be deleted when Python exits: the operating system
    reclaims its memory. After a network's tuning in one process, deleting it ran for minutes
    (``ast_manager::~ast_manager``, during the interpreter's final collection) after all the work was done; Z3's
    deletion of a context holding many terms is known to be slow. Registered to run at exit."""
    module = sys.modules.get("z3.z3")
    context = getattr(module, "_main_ctx", None)
    if context is not None:
        context.owner = False


atexit.register(leave_main_context)


def to_z3(expr, variables: Mapping[str, object] | None = None):
    """A ``z3.ArithRef`` (Int) for ``expr``; variables are looked up by name in ``variables``.

    Missing variables become ``z3.Int(name)`` and are added to ``variables`` when it is a mutable mapping.
    """
    import z3

    env = {} if variables is None else variables
    memo: dict = {}

    def var(v: Var):
        term = env.get(v.name)
        if term is None:
            term = z3.Int(v.name)
            if isinstance(env, MutableMapping):
                env[v.name] = term
        return term

    def conv(e: Expr):
        hit = memo.get(e)
        if hit is not None:
            return hit
        if isinstance(e, Const):
            out = z3.IntVal(e.value)
        elif isinstance(e, Var):
            out = var(e)
        elif isinstance(e, Poly):
            terms = []
            for m, c in e.terms:
                factors = [z3.IntVal(c)] if c != 1 or not m else []
                for a, x in m:
                    factors.extend([conv(a)] * x)
                terms.append(factors[0] if len(factors) == 1 else z3.Product(*factors))
            out = terms[0] if len(terms) == 1 else z3.Sum(*terms)
        elif isinstance(e, (FloorDiv, Mod)):
            x, q = conv(e.num), conv(e.den)
            if _known_positive(e.den):
                out = x / q if isinstance(e, FloorDiv) else x % q
            else:
                quotient = z3.If(q > 0, x / q, (-x) / (-q))
                out = quotient if isinstance(e, FloorDiv) else x - q * quotient
        elif isinstance(e, Min):
            a, b = conv(e.a), conv(e.b)
            out = z3.If(a <= b, a, b)
        elif isinstance(e, Max):
            a, b = conv(e.a), conv(e.b)
            out = z3.If(a >= b, a, b)
        else:  # pragma: no cover - every node type is handled above
            raise TypeError(f"cannot translate {type(e).__name__} to Z3")
        memo[e] = out
        return out

    return conv(as_expr(expr))


def _known_positive(e: Expr) -> bool:
    from liftpy.arith.expr import _positive

    return _positive(e)


def z3_prove_nonneg(e: Expr, timeout_ms: int = _Z3_TIMEOUT_MS) -> bool:
    """True if Z3 shows ``e >= 0`` under the range constraints of all variables involved (False on unknown)."""
    import z3

    variables = set(e.free_vars())
    for v in list(variables):
        variables |= v.range_deps()
    names = [v.name for v in variables]
    if len(set(names)) != len(names):
        return False  # two variables share a name but not a range: a name-keyed encoding would conflate them
    env: dict = {}
    try:
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        for v in sorted(variables, key=lambda v: v.name):
            term = to_z3(v, env)
            if v.range.lo is not None:
                solver.add(term >= to_z3(v.range.lo, env))
            if v.range.hi is not None:
                solver.add(term <= to_z3(v.range.hi, env))
        solver.add(to_z3(e, env) < 0)
        return solver.check() == z3.unsat
    except z3.Z3Exception:  # an error inside Z3 (an internal assertion, met once after a timeout): not shown
        return False
