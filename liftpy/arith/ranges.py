"""Range reasoning: symbolic bounds of an expression from the ranges of its variables.

A bound is found by *monotone substitution*: write the expression as a polynomial in one atom ``a``; if it is
provably non-decreasing in ``a`` (linear with a non-negative coefficient, or a polynomial with non-negative
coefficients and ``a >= 0``), replacing ``a`` by its upper bound gives an upper bound, and symmetrically.
Substituting pointwise (the coefficient signs and the atom's bounds hold for every binding) keeps the
correlations that plain interval arithmetic loses: ``n - 1 - j`` with ``j`` in ``[0, n-1]`` is bounded below by
``n - 1 - (n - 1) = 0``.  Atoms are eliminated in dependency order (``j`` before the ``n`` its range mentions,
``x // 2`` before ``x``); an atom that cannot be eliminated (unbounded in the needed direction, or of unknown
monotonicity) stays in the bound.

The provers are sound and incomplete: True is a proof for every binding inside the ranges, False means
"could not prove".  With ``use_z3=True`` they fall back on Z3 (bounded by a timeout) when the cheap reasoning
fails.
"""

from __future__ import annotations

from liftpy.arith.expr import (
    ZERO,
    Atom,
    Const,
    Expr,
    FloorDiv,
    IntOrExpr,
    Max,
    Min,
    Mod,
    Var,
    _collect,
    _positive,
    _top_atoms,
    as_expr,
    floor_div,
    max_,
    min_,
)

_MAX_DEPTH = 40  # nested bound computations (each elimination may prove coefficient signs recursively)
_MAX_STEPS = 200  # elimination attempts for one expression
_CACHE_LIMIT = 200_000

_IN_PROGRESS = object()
_lower_cache: dict = {}
_upper_cache: dict = {}


class _Guard:
    depth = 0
    # bumped whenever a result was cut short (depth limit or a cycle), so that such results are not cached:
    # a cached answer must not depend on where the question was first asked
    truncations = 0


def lower_bound(e: Expr) -> Expr:
    """A symbolic lower bound of ``e`` (``e`` itself when nothing better is known)."""
    return _bound(e, upper=False)


def upper_bound(e: Expr) -> Expr:
    """A symbolic upper bound of ``e`` (``e`` itself when nothing better is known)."""
    return _bound(e, upper=True)


def bounds(expr: IntOrExpr) -> tuple[Expr | None, Expr | None]:
    """Inclusive ``(lower, upper)`` bounds over the variables' ranges; None where nothing is known.

    Bounds are symbolic where variables cannot be eliminated: for ``j`` in ``[0, n-1]`` this is ``(0, n-1)``.
    """
    e = as_expr(expr)
    lo, hi = _bound(e, False), _bound(e, True)
    if isinstance(e, Const):
        return e, e
    return (None if lo == e else lo), (None if hi == e else hi)


def prove_nonneg(expr: IntOrExpr, *, use_z3: bool = False) -> bool:
    """True only if ``expr >= 0`` for every binding of its variables inside their ranges."""
    e = as_expr(expr)
    if isinstance(e, Const):
        return e.value >= 0
    lo = _bound(e, False)
    if isinstance(lo, Const) and lo.value >= 0:
        return True
    if use_z3:
        from liftpy.arith.smt import z3_prove_nonneg

        return z3_prove_nonneg(e)
    return False


def prove_le(a: IntOrExpr, b: IntOrExpr, *, use_z3: bool = False) -> bool:
    """True only if ``a <= b`` for every binding inside the ranges."""
    return prove_nonneg(as_expr(b) - as_expr(a), use_z3=use_z3)


def prove_lt(a: IntOrExpr, b: IntOrExpr, *, use_z3: bool = False) -> bool:
    """True only if ``a < b`` for every binding inside the ranges."""
    return prove_nonneg(as_expr(b) - as_expr(a) - 1, use_z3=use_z3)


def prove_eq(a: IntOrExpr, b: IntOrExpr, *, use_z3: bool = False) -> bool:
    """True only if ``a == b`` for every binding inside the ranges (structural equality first)."""
    a, b = as_expr(a), as_expr(b)
    if a == b:
        return True
    d = a - b
    if d == ZERO or (prove_nonneg(d) and prove_nonneg(-d)):
        return True
    if isinstance(d, Const) or not use_z3:
        return False
    from liftpy.arith.smt import z3_prove_nonneg

    return z3_prove_nonneg(d) and z3_prove_nonneg(-d)


# ---------------------------------------------------------------------------------------------------------------


def _bound(e: Expr, upper: bool) -> Expr:
    if isinstance(e, Const):
        return e
    cache = _upper_cache if upper else _lower_cache
    hit = cache.get(e)
    if hit is not None:
        if hit is _IN_PROGRESS:  # a cycle: answer trivially (and soundly)
            _Guard.truncations += 1
            return e
        return hit
    if _Guard.depth >= _MAX_DEPTH:
        _Guard.truncations += 1
        return e
    if _Guard.depth == 0 and len(cache) > _CACHE_LIMIT:
        _lower_cache.clear()
        _upper_cache.clear()
    cache[e] = _IN_PROGRESS
    before = _Guard.truncations
    _Guard.depth += 1
    try:
        result = _eliminate(e, upper)
    finally:
        _Guard.depth -= 1
        cache.pop(e, None)
    if _Guard.truncations == before:
        cache[e] = result
    return result


def _eliminate(e: Expr, upper: bool) -> Expr:
    current = e
    stuck: set = set()
    for _ in range(_MAX_STEPS):
        if isinstance(current, Const):
            break
        atom = _pick(_top_atoms(current), stuck)
        if atom is None:
            break
        replaced = _substitute_extreme(current, atom, upper)
        if replaced is None:
            stuck.add(atom)
        else:
            current = replaced
            stuck.clear()
    if not isinstance(current, Const):
        interval = _interval(current)
        if interval is not None:
            return Const(interval[1] if upper else interval[0])
    return current


def _interval(e: Expr) -> tuple[int, int] | None:
    """Plain interval arithmetic with constant atom bounds: the fallback for non-monotone polynomials."""
    lo_sum = hi_sum = 0
    for m, c in e._terms:
        lo, hi = 1, 1
        for atom, power in m:
            alo, ahi = _atom_bound(atom, False), _atom_bound(atom, True)
            alo = None if alo is None else _bound(alo, False)
            ahi = None if ahi is None else _bound(ahi, True)
            if not (isinstance(alo, Const) and isinstance(ahi, Const)):
                return None
            plo, phi = _power_interval(alo.value, ahi.value, power)
            corners = (lo * plo, lo * phi, hi * plo, hi * phi)
            lo, hi = min(corners), max(corners)
        lo_sum += min(c * lo, c * hi)
        hi_sum += max(c * lo, c * hi)
    return lo_sum, hi_sum


def _power_interval(lo: int, hi: int, power: int) -> tuple[int, int]:
    if power % 2 or lo >= 0:
        return lo**power, hi**power
    if hi <= 0:
        return hi**power, lo**power
    return 0, max(lo**power, hi**power)


def _dependencies(atom: Atom) -> frozenset:
    """Variables whose elimination should wait until ``atom`` is gone (they occur in its bounds)."""
    if isinstance(atom, Var):
        return atom.range_deps()
    out = set()
    for v in atom.free_vars():
        out.add(v)
        out.update(v.range_deps())
    return frozenset(out)


def _pick(atoms: list, stuck: set) -> Atom | None:
    candidates = [a for a in atoms if a not in stuck]
    for a in candidates:
        if not any(a in _dependencies(b) for b in candidates if b is not a):
            return a
    return candidates[0] if candidates else None


def _substitute_extreme(e: Expr, atom: Atom, upper: bool) -> Expr | None:
    """``e`` with ``atom`` replaced by the bound that extremises ``e``, or None if that cannot be decided."""
    coeffs = _collect(e, atom)
    degree = max(coeffs)
    if degree == 1:
        c1 = coeffs[1]
        if prove_nonneg(c1):
            increasing = True
        elif prove_nonneg(-c1):
            increasing = False
        else:
            return None
    else:
        lo = _atom_bound(atom, False)
        if lo is None or not prove_nonneg(lo):
            return None
        signs = [coeffs.get(k, ZERO) for k in range(1, degree + 1)]
        if all(prove_nonneg(c) for c in signs):
            increasing = True
        elif all(prove_nonneg(-c) for c in signs):
            increasing = False
        else:
            return None
    target = _atom_bound(atom, upper == increasing)
    if target is None or target == atom:
        return None
    total: Expr = ZERO
    for k, c in coeffs.items():
        total = total + c * target**k
    return total


def _atom_bound(atom: Atom, upper: bool) -> Expr | None:
    """A bound of one atom in terms of other expressions (None if unknown)."""
    if isinstance(atom, Var):
        return atom.range.hi if upper else atom.range.lo
    if isinstance(atom, FloorDiv):
        return _floor_div_bound(atom, upper)
    if isinstance(atom, Mod):
        return _mod_bound(atom, upper)
    if isinstance(atom, Min):
        return min_(_bound(atom.a, upper), _bound(atom.b, upper))
    if isinstance(atom, Max):
        return max_(_bound(atom.a, upper), _bound(atom.b, upper))
    return None


def _floor_div_bound(atom: FloorDiv, upper: bool) -> Expr | None:
    x, q = atom.num, atom.den
    if isinstance(q, Const):  # a positive constant once normalised; floor(x/q) is monotone in x
        return floor_div(_bound(x, upper), q)
    if not _positive(q):
        return None
    x_nonneg = prove_nonneg(x)
    if not upper:
        if not x_nonneg:
            return min_(_bound(x, False), ZERO)  # floor(x/q) >= min(x, 0) for q >= 1
        lx, hq = _bound(x, False), _bound(q, True)
        if isinstance(lx, Const) and isinstance(hq, Const):
            return Const(lx.value // hq.value)
        return ZERO
    hx = _bound(x, True)
    if not x_nonneg:
        return max_(hx, ZERO)  # floor(x/q) <= max(x, 0) for q >= 1
    lq = _bound(q, False)
    if isinstance(lq, Const) and lq.value > 1:
        return floor_div(hx, lq)
    return hx


def _mod_bound(atom: Mod, upper: bool) -> Expr | None:
    x, q = atom.num, atom.den
    if not _positive(q):
        return None
    if not upper:
        return ZERO
    top = q - 1
    if prove_nonneg(x):
        hx = _bound(x, True)
        if hx != x and prove_nonneg(top - hx):
            return hx
    return top
