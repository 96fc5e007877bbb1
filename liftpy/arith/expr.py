"""Symbolic integer expressions, kept in a canonical normal form from the moment they are built.

Normal form
-----------
* Every expression is a polynomial: a sum of terms ``c * a1^e1 * ... * ak^ek`` with a non-zero integer
  coefficient ``c``, positive exponents ``ei`` and *atoms* ``ai``.  Atoms are variables (:class:`Var`) and the
  non-polynomial nodes :class:`FloorDiv`, :class:`Mod`, :class:`Min`, :class:`Max`, whose operands are
  themselves in normal form.
* Products of sums are expanded, like terms collected, zero terms dropped and constants folded.
* Atoms inside a monomial and monomials inside a sum are sorted by a total structural key (``_key``), so two
  expressions that are equal as polynomials over the same atoms are equal Python objects with equal hashes.
* A polynomial that is one constant is a :class:`Const`; one atom with coefficient 1 is that atom itself;
  anything else is a :class:`Poly`.

Division (:func:`floor_div`, ``//``) and remainder (:func:`mod`, ``%``) have Python's floor semantics.
Divisors are assumed to be non-zero for every binding (dividing by zero is an error, not a value), so e.g.
``(n*m) // m`` is ``n``.  A negative divisor is normalised away (``p // -q == (-p) // q``).
Every rule holds for every binding of the variables inside their ranges; nothing is assumed beyond them.

``p // q`` first splits ``p = q*A + R`` (an identity for any non-zero ``q``): ``A`` collects the monomials
that ``q`` divides exactly; the multiple of ``q``'s own monomial (the constant term when ``q`` is a constant)
has its coefficient reduced so that the share left in ``R`` lies in ``[0, c)``.  A many-term ``q`` is divided
by leading terms in graded order.  Then

1. ``R == 0``: the result is ``A``;
2. ``R // q`` provably a constant ``k`` (``0 <= R < q`` gives 0, ``-q <= R < 0`` gives -1, or the constant
   bounds of ``R`` for a constant ``q``): the result is ``A + k``;
3. otherwise ``A + (R // q)`` if ``R`` is provably non-negative, else ``p // q`` kept whole.  This keeps the
   numerators that generated C code relies on non-negative (C's ``/`` truncates): ``(n - size + step) // step``
   stays as written rather than becoming ``(n-size)/step + 1``.  It costs canonicity only for numerators that
   cannot be proved non-negative.

``(x // a + c) // q == (x + c*a) // (a*q)`` when ``a`` and ``q`` are provably positive.

``p % q`` uses the same split but reduces *every* coefficient of a divisible monomial modulo the divisor's
coefficient (``(i - 1) % 3 == (i + 2) % 3``) and drops ``A``; then ``R % q == R - k*q`` when ``R // q`` is the
constant ``k`` (so ``(i*n + j) % n == j`` for ``0 <= j < n``), and ``(x % (k*q)) % q == x % q``.  As for ``//``,
a rewritten numerator is only used when it is provably non-negative (or the result folds):
``(i + n - 1) % n`` does not become ``(i - 1) % n``.

In sums, ``r*(x % q) + r*q*(x // q)`` is rewritten to ``r*x`` (joining a split index: ``(i/m)*m + i%m == i``).

``min_``/``max_`` fold when both sides are constant or one side provably dominates; otherwise they are atoms
with their (sorted) operands.  The range reasoning used by these rules lives in :mod:`liftpy.arith.ranges`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import ClassVar, Mapping, Union

from liftpy.errors import ArithError

IntOrExpr = Union[int, "Expr"]


# ---------------------------------------------------------------------------------------------------------------
# The expression classes


class Expr:
    """An immutable, hashable integer expression in normal form; ``==`` is structural equality."""

    __slots__ = ("_hash", "_key", "_terms", "_fv", "_deep", "_str")

    def _setup(self, key: tuple, hsh: int) -> None:
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hsh)
        object.__setattr__(self, "_fv", None)
        object.__setattr__(self, "_deep", None)
        object.__setattr__(self, "_str", None)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable")

    # identity ------------------------------------------------------------------------------------------------
    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if isinstance(other, Expr):
            return self._hash == other._hash and self._key == other._key
        if isinstance(other, int):
            return isinstance(self, Const) and self.value == other
        return NotImplemented

    def __ne__(self, other) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    # ``<`` and friends would be mistaken for provable facts; make the mistake loud.
    def _no_order(self, other):
        raise TypeError("symbolic expressions have no order; use prove_lt / prove_nonneg / bounds from liftpy.arith")

    __lt__ = __le__ = __gt__ = __ge__ = _no_order

    def __reduce__(self):
        return (type(self), self._pickle_args())

    # arithmetic ----------------------------------------------------------------------------------------------
    def __add__(self, other):
        other = _coerce(other)
        return NotImplemented if other is None else _add(self, other)

    __radd__ = __add__

    def __sub__(self, other):
        other = _coerce(other)
        return NotImplemented if other is None else _add(self, _scale(other, -1))

    def __rsub__(self, other):
        other = _coerce(other)
        return NotImplemented if other is None else _add(other, _scale(self, -1))

    def __mul__(self, other):
        other = _coerce(other)
        return NotImplemented if other is None else _mul(self, other)

    __rmul__ = __mul__

    def __neg__(self):
        return _scale(self, -1)

    def __pos__(self):
        return self

    def __pow__(self, exponent):
        if not isinstance(exponent, int) or exponent < 0:
            raise TypeError("Expr ** needs a non-negative int exponent")
        result: Expr = ONE
        for _ in range(exponent):
            result = _mul(result, self)
        return result

    def __floordiv__(self, other):
        other = _coerce(other)
        return NotImplemented if other is None else floor_div(self, other)

    def __rfloordiv__(self, other):
        other = _coerce(other)
        return NotImplemented if other is None else floor_div(other, self)

    def __mod__(self, other):
        other = _coerce(other)
        return NotImplemented if other is None else mod(self, other)

    def __rmod__(self, other):
        other = _coerce(other)
        return NotImplemented if other is None else mod(other, self)

    def __truediv__(self, other):
        raise TypeError("symbolic sizes are integers: use // (floor division), not /")

    __rtruediv__ = __truediv__

    # queries -------------------------------------------------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return isinstance(self, Const)

    def as_int(self) -> int | None:
        return self.value if isinstance(self, Const) else None

    def free_vars(self) -> frozenset["Var"]:
        """The variables occurring in the expression (not those only mentioned by their ranges)."""
        fv = self._fv
        if fv is None:
            fv = self._compute_free_vars()
            object.__setattr__(self, "_fv", fv)
        return fv

    def var_names(self) -> frozenset[str]:
        return frozenset(v.name for v in self.free_vars())

    def _deep_names(self) -> frozenset[str]:
        """Names of the free variables and of every variable their ranges mention, transitively."""
        deep = self._deep
        if deep is None:
            names = set()
            for v in self.free_vars():
                names.add(v.name)
                names.update(d.name for d in v.range_deps())
            deep = frozenset(names)
            object.__setattr__(self, "_deep", deep)
        return deep

    def subs(self, mapping: Mapping) -> "Expr":
        """Replace variables (keys: a name, matching every variable of that name, or an exact ``Var``).

        Substitution also reaches into the ranges of the remaining variables, so that after binding ``n``
        an index ``j`` in ``[0, n-1]`` keeps a range that the simplifications can use.
        """
        by_name: dict[str, Expr] = {}
        by_var: dict[Var, Expr] = {}
        for key, value in mapping.items():
            value = as_expr(value)
            if isinstance(key, Var):
                by_var[key] = value
            elif isinstance(key, str):
                by_name[key] = value
            else:
                raise TypeError(f"subs keys must be names or Vars, not {type(key).__name__}")
        if not by_name and not by_var:
            return self
        touched = frozenset(by_name) | frozenset(v.name for v in by_var)
        return _subs(self, by_name, by_var, touched, {})

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        """The integer value under ``bindings`` (names to ints); ArithError if unbound or dividing by zero."""
        return self._eval(bindings)

    def __str__(self) -> str:
        text = self._str
        if text is None:
            text = _render.to_text(self)
            object.__setattr__(self, "_str", text)
        return text

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


class Const(Expr):
    """An integer constant."""

    __slots__ = ("value",)

    def __init__(self, value: int):
        value = operator.index(value)
        object.__setattr__(self, "value", value)
        self._setup((0, value), hash(value))  # hash(Const(3)) == hash(3), since Const(3) == 3
        object.__setattr__(self, "_terms", (((), value),) if value else ())

    def _pickle_args(self):
        return (self.value,)

    def _compute_free_vars(self):
        return frozenset()

    def _eval(self, bindings):
        return self.value

    def __repr__(self) -> str:
        return f"Const({self.value})"


ZERO = Const(0)
ONE = Const(1)


def as_expr(x: IntOrExpr) -> Expr:
    """An ``Expr`` for an int or an ``Expr`` (TypeError for anything else, floats included)."""
    e = _coerce(x)
    if e is None:
        raise TypeError(f"expected an int or an Expr, got {type(x).__name__}: {x!r}")
    return e


def _coerce(x) -> Expr | None:
    if isinstance(x, Expr):
        return x
    if isinstance(x, float):
        return None
    try:
        return Const(operator.index(x))
    except TypeError:
        return None


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of a variable; ``None`` is unbounded.  Bounds may be symbolic (``[0, n-1]``)."""

    lo: Expr | None = None
    hi: Expr | None = None
    _key: tuple = field(init=False, repr=False, compare=False, hash=False)

    POSITIVE: ClassVar["Range"]
    NATURAL: ClassVar["Range"]
    ANY: ClassVar["Range"]

    def __post_init__(self):
        lo = None if self.lo is None else as_expr(self.lo)
        hi = None if self.hi is None else as_expr(self.hi)
        if isinstance(lo, Const) and isinstance(hi, Const) and lo.value > hi.value:
            raise ArithError(f"empty range [{lo}, {hi}]")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "_key", ((0,) if lo is None else (1, lo._key), (0,) if hi is None else (1, hi._key)))

    def free_vars(self) -> frozenset["Var"]:
        out = frozenset()
        for b in (self.lo, self.hi):
            if b is not None:
                out |= b.free_vars()
        return out

    def __str__(self) -> str:
        lo = "(-inf" if self.lo is None else f"[{self.lo}"
        hi = "inf)" if self.hi is None else f"{self.hi}]"
        return f"{lo}, {hi}"


Range.POSITIVE = Range(ONE, None)
Range.NATURAL = Range(ZERO, None)
Range.ANY = Range(None, None)


class Atom(Expr):
    """A factor of a monomial: a variable or a non-polynomial node."""

    __slots__ = ()

    def _setup(self, key, hsh):
        super()._setup(key, hsh)
        object.__setattr__(self, "_terms", ((((self, 1),), 1),))


class Var(Atom):
    """A named integer variable; its range is part of its identity."""

    __slots__ = ("name", "range", "_deps")

    def __init__(self, name: str, range: Range = Range.POSITIVE):
        if not isinstance(name, str) or not name:
            raise TypeError(f"a variable name must be a non-empty str, got {name!r}")
        if range is None:
            range = Range.POSITIVE
        if not isinstance(range, Range):
            raise TypeError(f"a variable range must be a Range, got {type(range).__name__}")
        deps = set()
        for v in range.free_vars():
            deps.add(v)
            deps.update(v.range_deps())
        if any(d.name == name for d in deps):
            raise ArithError(f"the range {range} of '{name}' refers to '{name}' itself")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "range", range)
        object.__setattr__(self, "_deps", frozenset(deps))
        self._setup((1, name, range._key), hash((1, name, range)))

    def range_deps(self) -> frozenset["Var"]:
        """Variables that this variable's range mentions, transitively."""
        return self._deps

    def _pickle_args(self):
        return (self.name, self.range)

    def _compute_free_vars(self):
        return frozenset((self,))

    def _eval(self, bindings):
        try:
            value = bindings[self.name]
        except KeyError:
            raise ArithError(f"unbound size variable '{self.name}'") from None
        try:
            return operator.index(value)
        except TypeError:
            raise ArithError(f"size variable '{self.name}' is bound to a non-integer {value!r}") from None

    def __repr__(self) -> str:
        if self.range == Range.POSITIVE:
            return f"Var({self.name!r})"
        return f"Var({self.name!r}, {self.range})"


class _Binary(Atom):
    __slots__ = ()
    _tag = -1

    def _init2(self, a: Expr, b: Expr, names: tuple[str, str]):
        object.__setattr__(self, names[0], a)
        object.__setattr__(self, names[1], b)
        self._setup((self._tag, a._key, b._key), hash((self._tag, a._hash, b._hash)))

    def operands(self) -> tuple[Expr, Expr]:
        raise NotImplementedError

    def _pickle_args(self):
        return self.operands()

    def _compute_free_vars(self):
        a, b = self.operands()
        return a.free_vars() | b.free_vars()


class FloorDiv(_Binary):
    """``num // den`` that could not be simplified; build it with :func:`floor_div` or ``//``."""

    __slots__ = ("num", "den")
    _tag = 2

    def __init__(self, num: Expr, den: Expr):
        self._init2(num, den, ("num", "den"))

    def operands(self):
        return (self.num, self.den)

    def _eval(self, bindings):
        d = self.den._eval(bindings)
        if d == 0:
            raise ArithError(f"division by zero in {self}")
        return self.num._eval(bindings) // d


class Mod(_Binary):
    """``num % den`` that could not be simplified; build it with :func:`mod` or ``%``."""

    __slots__ = ("num", "den")
    _tag = 3

    def __init__(self, num: Expr, den: Expr):
        self._init2(num, den, ("num", "den"))

    def operands(self):
        return (self.num, self.den)

    def _eval(self, bindings):
        d = self.den._eval(bindings)
        if d == 0:
            raise ArithError(f"modulo by zero in {self}")
        return self.num._eval(bindings) % d


class Min(_Binary):
    """``min(a, b)`` that could not be decided; build it with :func:`min_`."""

    __slots__ = ("a", "b")
    _tag = 4

    def __init__(self, a: Expr, b: Expr):
        self._init2(a, b, ("a", "b"))

    def operands(self):
        return (self.a, self.b)

    def _eval(self, bindings):
        return min(self.a._eval(bindings), self.b._eval(bindings))


class Max(_Binary):
    """``max(a, b)`` that could not be decided; build it with :func:`max_`."""

    __slots__ = ("a", "b")
    _tag = 5

    def __init__(self, a: Expr, b: Expr):
        self._init2(a, b, ("a", "b"))

    def operands(self):
        return (self.a, self.b)

    def _eval(self, bindings):
        return max(self.a._eval(bindings), self.b._eval(bindings))


Monomial = tuple  # tuple[tuple[Atom, int], ...] sorted by atom key; () is the constant monomial


class Poly(Expr):
    """A sum of at least two terms, or one term that is not a bare constant or atom.

    ``terms`` is a tuple of ``(monomial, coefficient)`` sorted by monomial key; built by the operators only.
    """

    __slots__ = ("terms",)

    def __init__(self, terms: tuple):
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "_terms", terms)
        self._setup((6, tuple((_mono_key(m), c) for m, c in terms)), hash((6, terms)))

    def _pickle_args(self):
        return (self.terms,)

    def _compute_free_vars(self):
        out = set()
        for m, _ in self.terms:
            for a, _ in m:
                out |= a.free_vars()
        return frozenset(out)

    def _eval(self, bindings):
        total = 0
        for m, c in self.terms:
            value = c
            for a, e in m:
                value *= a._eval(bindings) ** e
            total += value
        return total


# ---------------------------------------------------------------------------------------------------------------
# Polynomial arithmetic on the ``_terms`` representation


_MONO_KEYS: dict = {}  # monomial -> its key: the same monomials recur in every expression of a kernel


def _mono_key(m: Monomial) -> tuple:
    key = _MONO_KEYS.get(m)
    if key is None:
        if len(_MONO_KEYS) >= 1 << 16:
            _MONO_KEYS.clear()
        key = _MONO_KEYS[m] = tuple((a._key, e) for a, e in m)
    return key


def _mono_mul(m1: Monomial, m2: Monomial) -> Monomial:
    if not m1:
        return m2
    if not m2:
        return m1
    exps = dict(m1)
    for a, e in m2:
        exps[a] = exps.get(a, 0) + e
    return tuple(sorted(exps.items(), key=lambda ae: ae[0]._key))


def _mono_div(m: Monomial, d: Monomial) -> Monomial | None:
    """``m / d`` if ``d`` divides ``m``, else None."""
    if not d:
        return m
    exps = dict(m)
    for a, e in d:
        have = exps.get(a, 0)
        if have < e:
            return None
        if have == e:
            del exps[a]
        else:
            exps[a] = have - e
    return tuple(sorted(exps.items(), key=lambda ae: ae[0]._key))


def _from_terms(terms: dict) -> Expr:
    """The normal form of a ``{monomial: coefficient}`` polynomial."""
    items = [(m, c) for m, c in terms.items() if c]
    if len(items) > 1 and any(isinstance(a, Mod) for m, _ in items for a, _ in m):
        items = _recombine_div_mod(dict(items))
    if not items:
        return ZERO
    if len(items) == 1:
        m, c = items[0]
        if not m:
            return Const(c)
        if c == 1 and len(m) == 1 and m[0][1] == 1:
            return m[0][0]
    else:
        items.sort(key=lambda mc: _mono_key(mc[0]))
    return Poly(tuple(items))


def _recombine_div_mod(terms: dict) -> list:
    """Rewrite ``r*(x % q) + r*q*(x // q)`` to ``r*x`` (exact for any non-zero q), until none is left.

    This is how a split index is joined again: ``(i/m)*m + i%m`` is ``i``.
    """
    changed = True
    while changed:
        changed = False
        for m, c in list(terms.items()):
            if not c:
                continue
            for atom, power in m:
                if power != 1 or not isinstance(atom, Mod):
                    continue
                rest = _mono_div(m, ((atom, 1),))
                quotient = ((FloorDiv(atom.num, atom.den), 1),)
                partners = [(_mono_mul(_mono_mul(rest, qm), quotient), c * qc) for qm, qc in atom.den._terms]
                if all(terms.get(pm) == pc for pm, pc in partners):
                    del terms[m]
                    for pm, _ in partners:
                        del terms[pm]
                    for xm, xc in atom.num._terms:
                        xm = _mono_mul(rest, xm)
                        terms[xm] = terms.get(xm, 0) + c * xc
                    changed = True
                    break
            if changed:
                break
    return [(m, c) for m, c in terms.items() if c]


_RESULTS: dict = {}  # (operation, a, b) -> result: a kernel's index arithmetic repeats the same operations


def _cached(op, a: Expr, b: Expr) -> Expr:
    """``op(a, b)`` for a pure operation on expressions in normal form, remembered (most operations the code
    generator asks for were asked before: every step of an unrolled block, every candidate of a space)."""
    key = (op, a, b)
    out = _RESULTS.get(key)
    if out is None:
        out = op(a, b)
        if len(_RESULTS) >= 1 << 17:
            _RESULTS.clear()
        _RESULTS[key] = out
    return out


def _add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const):
        if isinstance(b, Const):
            return Const(a.value + b.value)
        if a.value == 0:
            return b
    elif isinstance(b, Const) and b.value == 0:
        return a
    return _cached(_add_terms, a, b)


def _add_terms(a: Expr, b: Expr) -> Expr:
    terms = dict(a._terms)
    for m, c in b._terms:
        terms[m] = terms.get(m, 0) + c
    return _from_terms(terms)


def _scale(a: Expr, k: int) -> Expr:
    if k == 1:
        return a
    if k == 0:
        return ZERO
    if isinstance(a, Const):
        return Const(a.value * k)
    if len(a._terms) == 1:  # may become a bare atom again (-(-n) is n)
        (m, c), = a._terms
        return _from_terms({m: c * k})
    return Poly(tuple((m, c * k) for m, c in a._terms))  # order and non-zeroness are unchanged


def _mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const):
        return _scale(b, a.value)
    if isinstance(b, Const):
        return _scale(a, b.value)
    return _cached(_mul_terms, a, b)


def _mul_terms(a: Expr, b: Expr) -> Expr:
    terms: dict = {}
    for m1, c1 in a._terms:
        for m2, c2 in b._terms:
            m = _mono_mul(m1, m2)
            terms[m] = terms.get(m, 0) + c1 * c2
    return _from_terms(terms)


def _collect(e: Expr, atom: Atom) -> dict[int, Expr]:
    """``e`` as a polynomial in ``atom``: ``{exponent: coefficient expression}``."""
    parts: dict[int, dict] = {}
    for m, c in e._terms:
        k = 0
        rest = []
        for a, x in m:
            if a == atom:
                k = x
            else:
                rest.append((a, x))
        bucket = parts.setdefault(k, {})
        rest_m = tuple(rest)
        bucket[rest_m] = bucket.get(rest_m, 0) + c
    return {k: _from_terms(v) for k, v in parts.items()}


def affine_in(e: Expr, var: "Var") -> bool:
    """``e`` is ``a * var + b`` with ``a`` and ``b`` free of ``var`` (no power of it, no division or
    remainder of something holding it: ``var % 3`` looks linear on 0, 1, 2 and is not)."""
    for m, _ in as_expr(e)._terms:
        for a, x in m:
            if isinstance(a, Var) and a.name == var.name:
                if x != 1:
                    return False
            elif var.name in {v.name for v in a.free_vars()}:
                return False
    return True


def _top_atoms(e: Expr) -> list[Atom]:
    """The distinct atoms of ``e``'s monomials (not those nested inside other atoms), in key order."""
    seen = {}
    for m, _ in e._terms:
        for a, _ in m:
            seen[a] = None
    return sorted(seen, key=lambda a: a._key)


# ---------------------------------------------------------------------------------------------------------------
# Substitution


def _subs(e: Expr, by_name, by_var, touched, memo) -> Expr:
    if isinstance(e, Const) or not (e._deep_names() & touched):
        return e
    hit = memo.get(e)
    if hit is not None:
        return hit
    if isinstance(e, Var):
        if e in by_var:
            out = by_var[e]
        elif e.name in by_name:
            out = by_name[e.name]
        else:
            r = e.range
            lo = None if r.lo is None else _subs(r.lo, by_name, by_var, touched, memo)
            hi = None if r.hi is None else _subs(r.hi, by_name, by_var, touched, memo)
            out = Var(e.name, Range(lo, hi))
    elif isinstance(e, Poly):  # the terms' products summed in one dictionary, normalised once
        terms: dict = {}
        for m, c in e.terms:
            new = [(_subs(a, by_name, by_var, touched, memo), x) for a, x in m]
            if all(b is a for (a, _), (b, _) in zip(m, new)):  # a monomial the mapping does not touch
                terms[m] = terms.get(m, 0) + c
                continue
            term: Expr = Const(c)
            for b, x in new:
                term = _mul(term, b ** x)
            for tm, tc in term._terms:
                terms[tm] = terms.get(tm, 0) + tc
        out = _from_terms(terms)
    else:
        a, b = (_subs(o, by_name, by_var, touched, memo) for o in e.operands())
        out = {FloorDiv: floor_div, Mod: mod, Min: min_, Max: max_}[type(e)](a, b)
    memo[e] = out
    return out


# ---------------------------------------------------------------------------------------------------------------
# Division, remainder, min and max


def _split(p: Expr, q: Expr, reduce_all: bool = False) -> tuple[Expr, Expr] | None:
    """``(A, R)`` with ``p == q*A + R``, ``A`` collecting what ``q`` divides; None if no split was found.

    For a one-term ``q = c*M``: a term of ``p`` whose monomial ``M`` divides goes to ``A`` when ``c`` divides its
    coefficient.  Coefficients are also reduced modulo ``c`` (leaving a share in ``[0, c)`` in ``R``) for the
    monomial ``M`` itself, or for every divisible monomial when ``reduce_all`` (used by ``%``, where ``A`` is
    dropped).  A many-term ``q`` is divided by leading terms in graded order.
    """
    if len(q._terms) != 1:
        return _split_multi(p, q)
    qm, qc = q._terms[0]
    quotient: dict = {}
    rest: dict = {}
    for m, c in p._terms:
        r = _mono_div(m, qm)
        if r is None:
            rest[m] = rest.get(m, 0) + c
            continue
        if reduce_all or not r:
            a, c = divmod(c, qc)
        elif c % qc == 0:
            a, c = c // qc, 0
        else:
            a = 0
        if a:
            quotient[r] = quotient.get(r, 0) + a
        if c:
            rest[m] = rest.get(m, 0) + c
    return _from_terms(quotient), _from_terms(rest)


def _grlex_key(m: Monomial) -> tuple:
    """Sort key of the graded lexicographic monomial order (a well-order compatible with products)."""
    degree = sum(e for _, e in m)
    return (degree, _LexKey(m))


class _LexKey:
    """Lexicographic order on exponent vectors; atoms with smaller keys are the more significant variables."""

    __slots__ = ("m",)

    def __init__(self, m):
        self.m = m

    def __lt__(self, other):
        a, b = self.m, other.m
        for (xa, ea), (xb, eb) in zip(a, b):
            if xa == xb:
                if ea != eb:
                    return ea < eb
                continue
            # the side holding the more significant atom here has a positive exponent where the other has 0
            return xb._key < xa._key
        return len(a) < len(b)

    def __eq__(self, other):
        return self.m == other.m


def _split_multi(p: Expr, q: Expr):
    lead_m, lead_c = max(q._terms, key=lambda mc: _grlex_key(mc[0]))
    remaining = dict(p._terms)
    quotient: dict = {}
    rest: dict = {}
    for _ in range(256):
        remaining = {m: c for m, c in remaining.items() if c}
        if not remaining:
            return _from_terms(quotient), _from_terms(rest)
        m = max(remaining, key=_grlex_key)
        c = remaining[m]
        r = _mono_div(m, lead_m)
        if r is not None and c % lead_c == 0:
            f = c // lead_c
            quotient[r] = quotient.get(r, 0) + f
            for qm, qc in q._terms:
                mm = _mono_mul(r, qm)
                remaining[mm] = remaining.get(mm, 0) - f * qc
        else:
            rest[m] = rest.get(m, 0) + c
            del remaining[m]
    return None


def _positive(e: Expr) -> bool:
    if isinstance(e, Const):
        return e.value > 0
    return _ranges.prove_nonneg(e - 1)


def _all_negative(q: Expr) -> bool:
    return all(c < 0 for _, c in q._terms)


def _constant_quotient(r: Expr, q: Expr) -> int | None:
    """``r // q`` when it is provably one constant (q is a positive constant or provably positive)."""
    if isinstance(q, Const):
        lo = _ranges.lower_bound(r)
        hi = _ranges.upper_bound(r)
        if isinstance(lo, Const) and isinstance(hi, Const) and lo.value // q.value == hi.value // q.value:
            return lo.value // q.value
        return None
    if not _positive(q):
        return None
    if _ranges.prove_nonneg(r):
        return 0 if _ranges.prove_lt(r, q) else None
    if _ranges.prove_lt(r, ZERO) and _ranges.prove_nonneg(r + q):
        return -1
    return None


def _atom_plus_const(x: Expr, cls) -> tuple[Expr | None, int]:
    """``(atom, c)`` if ``x == atom + c`` for an atom of class ``cls``, else ``(None, 0)``."""
    if isinstance(x, cls):
        return x, 0
    if isinstance(x, Poly) and len(x.terms) == 2:
        (m0, c0), (m1, c1) = x.terms
        if not m0 and c1 == 1 and len(m1) == 1 and m1[0][1] == 1 and isinstance(m1[0][0], cls):
            return m1[0][0], c0
    return None, 0


def floor_div(p: IntOrExpr, q: IntOrExpr) -> Expr:
    """``p // q`` with floor semantics, simplified as the module docstring describes."""
    return _cached(_floor_div, as_expr(p), as_expr(q))


def _floor_div(p: Expr, q: Expr) -> Expr:
    if isinstance(q, Const):
        if q.value == 0:
            raise ArithError(f"division by zero: ({p}) / 0")
        if isinstance(p, Const):
            return Const(p.value // q.value)
        if q.value == 1:
            return p
        if q.value < 0:
            return floor_div(-p, -q)
    elif _all_negative(q):
        return floor_div(-p, -q)
    if isinstance(p, Const) and p.value == 0:
        return ZERO
    split = _split(p, q)
    if split is None:
        quotient, rest = ZERO, p
    else:
        quotient, rest = split
    if rest == ZERO:
        return quotient
    k = _constant_quotient(rest, q)
    if k is not None:
        return quotient + k
    if quotient != ZERO and not _ranges.prove_nonneg(rest):
        quotient, rest = ZERO, p
    return quotient + _floor_div_atom(rest, q)


def _floor_div_atom(x: Expr, q: Expr) -> Expr:
    inner, c = _atom_plus_const(x, FloorDiv)
    if inner is not None and _positive(q) and _positive(inner.den):
        # floor((floor(y/a) + c)/q) == floor((y + c*a)/(a*q)) for a, q > 0
        return floor_div(inner.num + c * inner.den, inner.den * q)
    return FloorDiv(x, q)


def mod(p: IntOrExpr, q: IntOrExpr) -> Expr:
    """``p % q`` with floor semantics (the sign of ``q``), simplified as the module docstring describes."""
    return _cached(_mod, as_expr(p), as_expr(q))


def _mod(p: Expr, q: Expr) -> Expr:
    if isinstance(q, Const):
        if q.value == 0:
            raise ArithError(f"modulo by zero: ({p}) % 0")
        if isinstance(p, Const):
            return Const(p.value % q.value)
        if q.value in (1, -1):
            return ZERO
        if q.value < 0:
            return -mod(-p, -q)
    elif _all_negative(q):
        return -mod(-p, -q)
    if isinstance(p, Const) and p.value == 0:
        return ZERO
    split = _split(p, q, reduce_all=True)
    rest = p if split is None else split[1]
    if rest == ZERO:
        return ZERO
    k = _constant_quotient(rest, q)
    if k is not None:
        return rest - k * q
    if rest != p and not _ranges.prove_nonneg(rest):
        rest = p
        k = _constant_quotient(rest, q)
        if k is not None:
            return rest - k * q
    stripped = _strip_inner_mods(rest, q)
    if stripped is not rest and _ranges.prove_nonneg(stripped):
        return mod(stripped, q)
    return Mod(rest, q)


def _strip_inner_mods(x: Expr, q: Expr) -> Expr:
    """``x`` with each term ``c * (y % a)`` where ``q`` divides ``a`` replaced by ``c * y`` (same value mod q)."""
    terms: dict = {}
    changed = False
    for m, c in x._terms:
        if len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Mod):
            inner = m[0][0]
            split = _split(inner.den, q)
            if split is not None and split[1] == ZERO:
                changed = True
                for mm, cc in inner.num._terms:
                    terms[mm] = terms.get(mm, 0) + c * cc
                continue
        terms[m] = terms.get(m, 0) + c
    return _from_terms(terms) if changed else x


def min_(a: IntOrExpr, b: IntOrExpr) -> Expr:
    """``min(a, b)``: folded when decidable from the ranges, else a ``Min`` atom with sorted operands."""
    return _cached(_min, as_expr(a), as_expr(b))


def _min(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return a if a.value <= b.value else b
    if a == b or _ranges.prove_nonneg(b - a):
        return a
    if _ranges.prove_nonneg(a - b):
        return b
    if b._key < a._key:
        a, b = b, a
    return Min(a, b)


def max_(a: IntOrExpr, b: IntOrExpr) -> Expr:
    """``max(a, b)``: folded when decidable from the ranges, else a ``Max`` atom with sorted operands."""
    return _cached(_max, as_expr(a), as_expr(b))


def _max(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return a if a.value >= b.value else b
    if a == b or _ranges.prove_nonneg(a - b):
        return a
    if _ranges.prove_nonneg(b - a):
        return b
    if b._key < a._key:
        a, b = b, a
    return Max(a, b)


# the range reasoning and the renderer use the classes above; imported last to break the cycle
from liftpy.arith import ranges as _ranges  # noqa: E402
from liftpy.arith import render as _render  # noqa: E402
