"""Rendering: the liftpy size syntax (``str(expr)``) and C99/OpenCL C (``to_c``).

Both print the normal form in a fixed human-looking order: positive terms, then negative terms, then the
constant; higher degree first, then by atom key (variables alphabetically before ``/``, ``%``, ``min``, ``max``);
coefficient first (``2*n``); powers as repeated products (``n*n``).  Parentheses appear only where the
grammar needs them, and always around an operand of ``*``, ``/`` or ``%`` that starts with a minus sign and
around a ``/``/``%`` factor of a product, so the text reads the same whether a parser binds unary minus
tighter than ``*`` (like Python) or looser.
"""

from __future__ import annotations

import unicodedata
from typing import Callable

from liftpy.arith.expr import Const, Expr, FloorDiv, Max, Min, Mod, Poly, Var

# precedence of the text produced for a node
_SUM, _PROD, _UNARY, _ATOM = 1, 2, 3, 4


def to_text(expr: Expr) -> str:
    """The size-syntax rendering (``/`` is floor division of the non-negative values sizes are)."""
    return _render(expr, lambda name: name, {}, "")[0]


def to_c(expr: Expr, index_type: str = "int") -> str:
    """C99/OpenCL C rendering; ``/`` and ``%`` agree with floor semantics for non-negative operands only.
    With ``index_type`` ``long`` (a kernel's loop indices are 64-bit), the operands of ``min``/``max`` are
    ``long`` (:func:`_min_operand`): OpenCL's ``min(62, i)`` for a ``long i`` is an ambiguous overload."""
    from liftpy.arith.expr import as_expr

    return _render(as_expr(expr), c_name, {}, "L" if index_type == "long" else "")[0]


def _render(e: Expr, name: Callable[[str], str], memo: dict, suffix: str) -> tuple[str, int]:
    """``e`` as text and its precedence; ``suffix``: see :func:`_min_operand`."""
    hit = memo.get(e)
    if hit is None:
        hit = _render_node(e, name, memo, suffix)
        memo[e] = hit
    return hit


def _operand(e: Expr, name, memo, suffix: str, right: bool) -> str:
    """An operand of ``/`` or ``%``: a left one may be a product, a right one only an atom."""
    text, prec = _render(e, name, memo, suffix)
    if prec == _SUM or prec == _UNARY or (right and prec != _ATOM):
        return f"({text})"
    return text


def _render_node(e: Expr, name, memo, suffix: str) -> tuple[str, int]:
    if isinstance(e, Const):
        return str(e.value), (_ATOM if e.value >= 0 else _UNARY)
    if isinstance(e, Var):
        return name(e.name), _ATOM
    if isinstance(e, (FloorDiv, Mod)):
        op = "/" if isinstance(e, FloorDiv) else "%"
        return f"{_operand(e.num, name, memo, suffix, False)}{op}{_operand(e.den, name, memo, suffix, True)}", _PROD
    if isinstance(e, (Min, Max)):
        fn = "min" if isinstance(e, Min) else "max"
        a, b = (_min_operand(x, name, memo, suffix) for x in (e.a, e.b))
        return f"{fn}({a}, {b})", _ATOM
    assert isinstance(e, Poly)
    return _render_sum(e, name, memo, suffix)


def _min_operand(e: Expr, name, memo, suffix: str) -> str:
    """An operand of ``min``/``max``; with ``suffix`` ``L`` (64-bit loop indices beside 32-bit work-item ones),
    a ``long`` whatever its variables: a constant ``62L``, anything else cast (OpenCL has no
    ``min(int, long)``)."""
    text, prec = _render(e, name, memo, suffix)
    if not suffix:
        return text
    if isinstance(e, Const):
        return text + suffix
    return f"(long){text}" if prec == _ATOM else f"(long)({text})"


def _display_key(mc) -> tuple:
    m, c = mc
    group = 2 if not m else (0 if c > 0 else 1)
    return (group, -sum(x for _, x in m), tuple((a._key, x) for a, x in m))


def _render_term(m, magnitude: int, name, memo, suffix: str) -> tuple[str, int, bool]:
    """``magnitude * m`` as text, its precedence, and whether it is one bare ``/`` or ``%`` factor."""
    if not m:
        return str(magnitude), _ATOM, False
    factors = []
    for a, x in m:
        factors.extend([_render(a, name, memo, suffix)] * x)
    if magnitude == 1 and len(factors) == 1:
        text, prec = factors[0]
        return text, prec, prec == _PROD
    parts = [] if magnitude == 1 else [str(magnitude)]
    parts.extend(text if prec == _ATOM else f"({text})" for text, prec in factors)
    return "*".join(parts), _PROD, False


def _render_sum(e: Poly, name, memo, suffix: str) -> tuple[str, int]:
    out = []
    prec = _SUM
    terms = sorted(e.terms, key=_display_key)
    for i, (m, c) in enumerate(terms):
        text, prec, bare_div = _render_term(m, abs(c), name, memo, suffix)
        if i == 0:
            if c < 0:
                out.append(f"-({text})" if bare_div else f"-{text}")
                prec = _UNARY
            else:
                out.append(text)
        else:
            out.append(("+" if c > 0 else "-") + text)
    if len(terms) > 1:
        prec = _SUM
    return "".join(out), prec


# ---------------------------------------------------------------------------------------------------------------
# C identifiers

_C_RESERVED = frozenset(
    """auto break case char const continue default do double else enum extern float for goto if inline int long
    register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
    _Bool _Complex _Imaginary bool half size_t ptrdiff_t intptr_t uintptr_t uchar ushort uint ulong
    kernel __kernel global __global local __local constant __constant private __private read_only write_only
    read_write __read_only __write_only __read_write min max abs clamp select mad""".split()
)


def c_name(name: str) -> str:
    """A C identifier for a variable name, deterministically.

    ``.`` becomes ``_`` (``kernelStride._1`` → ``kernelStride_1``), Greek letters their English names (θ →
    ``theta``, Θ → ``Theta``), other non-ASCII characters ``u{hex}``, other ASCII punctuation ``_``; a leading
    digit gets a ``_`` prefix and C/OpenCL keywords a ``_`` suffix.
    """
    out = []
    for ch in name.replace("._", "_"):
        if ch.isascii():
            out.append(ch if (ch.isalnum() or ch == "_") else "_")
        else:
            out.append(_greek_name(ch) or f"u{ord(ch):x}")
    text = "".join(out) or "_"
    if text[0].isdigit():
        text = "_" + text
    if text in _C_RESERVED:
        text += "_"
    return text


def _greek_name(ch: str) -> str | None:
    uname = unicodedata.name(ch, "")
    for prefix, case in (("GREEK SMALL LETTER ", str.lower), ("GREEK CAPITAL LETTER ", str.capitalize)):
        if uname.startswith(prefix):
            return case(uname[len(prefix):].replace(" ", "_"))
    return None
