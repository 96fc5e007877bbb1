"""Reading text: the Lark grammar in ``grammar/liftpy.lark`` turned into a small surface syntax tree.

The surface tree says only what was written; :mod:`liftpy.elaborate` gives it meaning (which names are
primitives, sizes or values, macro expansion, curried calls). Syntax errors become :class:`LiftSyntaxError`
with the file, line and column and what was expected there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import lark

from ._paths import data_text
from .errors import LiftSyntaxError, Span

_META = dict(compare=False, repr=False)


# ------------------------------------------------------------------------------------------------ surface nodes
@dataclass(frozen=True)
class S:
    """Base of surface nodes; every node knows where it was written."""


@dataclass(frozen=True)
class SName(S):
    name: str
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SInt(S):
    value: int
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SFloat(S):
    value: float
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SBool(S):
    value: bool
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class STuple(S):
    elems: tuple[S, ...]
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SNamedArg(S):
    name: str
    value: S
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SCall(S):
    fun: S
    args: tuple[S, ...]
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SProj(S):
    """``expr._k`` (1-based, as the paper's ``kernelStride._1``)."""

    expr: S
    index: int
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SOp(S):
    op: str
    args: tuple[S, ...]
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SPVar(S):
    name: str
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SPTuple(S):
    elems: tuple[S, ...]
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SLambda(S):
    param: S  # SPVar or SPTuple
    body: S
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SVal(S):
    pattern: S
    type: S | None
    value: S
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SDef(S):
    name: str
    params: tuple[tuple[S, S | None], ...]  # (pattern, type or None)
    result: S | None
    body: S
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SBlock(S):
    statements: tuple[S, ...]  # SVal and SDef
    result: S
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SParamDecl(S):
    names: tuple[str, ...]
    docs: tuple[str, ...] = ()  # what each parameter controls ("" when not said)
    span: Span | None = field(default=None, **_META)


# types
@dataclass(frozen=True)
class TName(S):
    name: str
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class TArray(S):
    elem: S
    size: S
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class TTuple(S):
    elems: tuple[S, ...]
    span: Span | None = field(default=None, **_META)


@dataclass(frozen=True)
class SFile(S):
    items: tuple[S, ...]
    filename: str
    source: str = field(default="", **_META)


# ------------------------------------------------------------------------------------------------ parsing
@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    """The grammar's parser; its tables kept in liftpy's disk cache (:mod:`liftpy._cache`), which lark reads
    in a tenth of the time it takes to make them."""
    from ._cache import entry

    text = data_text("grammar", "liftpy.lark")
    cache = entry("grammar", text)
    return lark.Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=True,
                     start=["start", "expression"], cache=str(cache) if cache is not None else False)


_TOKEN_NAMES = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "PROJ": "a tuple component such as _1",
    "COMPARE": "a comparison",
    "$END": "the end of the file",
}


def _expected(names) -> str:
    """Lark's terminal names as the user wrote them: '(' rather than LPAR."""
    terminals = {t.name: t for t in _parser().terminals}
    shown = set()
    for name in names:
        if name in _TOKEN_NAMES:
            shown.add(_TOKEN_NAMES[name])
        elif name in terminals and terminals[name].pattern.type == "str":
            shown.add(repr(terminals[name].pattern.value))
    ordered = sorted(shown)
    if len(ordered) > 8:
        ordered = ordered[:8] + ["..."]
    return ", ".join(ordered)


_CLOSERS = {")": "(", "]": "[", "}": "{"}


def _unclosed_bracket(text: str) -> tuple[str, int, int] | None:
    """The innermost bracket left open at the end of the text (comments skipped), with its line and column."""
    stack: list[tuple[str, int, int]] = []
    line, col, i = 1, 1, 0
    while i < len(text):
        c = text[i]
        if text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = len(text) if end < 0 else end + 2
            chunk = text[i:end]
            line += chunk.count("\n")
            col = len(chunk) - chunk.rfind("\n") if "\n" in chunk else col + len(chunk)
            i = end
            continue
        if c in "([{":
            stack.append((c, line, col))
        elif c in _CLOSERS and stack and stack[-1][0] == _CLOSERS[c]:
            stack.pop()
        if c == "\n":
            line, col = line + 1, 1
        else:
            col += 1
        i += 1
    return stack[-1] if stack else None


def _end_of_file_error(text: str, filename: str, expected) -> LiftSyntaxError:
    opened = _unclosed_bracket(text)
    if opened is not None:
        bracket, line, col = opened
        closing = {"(": ")", "[": "]", "{": "}"}[bracket]
        return LiftSyntaxError(
            f"unexpected end of file: this {bracket!r} is never closed (expected {closing!r})",
            Span(filename, line, col, source=text),
        )
    lines = text.splitlines() or [""]
    return LiftSyntaxError(
        f"unexpected end of file (expected {_expected(expected)})", Span(filename, len(lines), len(lines[-1]) + 1, source=text)
    )


def parse_file_syntax(text: str, filename: str = "<string>") -> SFile:
    """Parse text into the surface tree, or raise LiftSyntaxError at the first mistake."""
    return _parse(text, filename, "start")


def parse_expression_syntax(text: str, filename: str = "<string>") -> S:
    """Parse one expression (the two sides of a rewrite rule, say)."""
    return _parse(text, filename, "expression")


def _parse(text: str, filename: str, start: str):
    try:
        tree = _parser().parse(text, start=start)
    except lark.exceptions.UnexpectedCharacters as e:
        span = Span(filename, e.line, e.column, source=text)
        char = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "end of file"
        raise LiftSyntaxError(f"unexpected character {char!r}", span) from None
    except lark.exceptions.UnexpectedEOF as e:
        raise _end_of_file_error(text, filename, e.expected) from None
    except lark.exceptions.UnexpectedToken as e:
        token = e.token
        if token.type == "$END":
            raise _end_of_file_error(text, filename, e.expected) from None
        span = Span(filename, token.line, token.column, token.end_line, token.end_column, source=text)
        raise LiftSyntaxError(f"unexpected {str(token)!r} (expected {_expected(e.expected)})", span) from None
    _check_nesting(tree, filename, text)
    try:
        return _Builder(filename, text).transform(tree)
    except lark.exceptions.VisitError as e:  # lark wraps what a transformer raises; ours are already located
        if isinstance(e.orig_exc, LiftSyntaxError):
            raise e.orig_exc from None
        raise


# How deep the parse tree may nest. Every stage walks the program recursively (Python's stack holds some 1,000
# calls), so a text nested thousands deep must be refused with an error, not a RecursionError; the deepest
# program in the repository nests 52 levels, a derived convolution pipeline included.
MAX_NESTING = 200


def _check_nesting(tree: lark.Tree, filename: str, text: str) -> None:
    """Refuse, at its place, the first subtree nested deeper than MAX_NESTING (walked without recursion)."""
    stack = [(tree, 1, None)]
    while stack:
        node, depth, located = stack.pop()
        if not node.meta.empty:  # a subtree of keywords only (`true`) has no position: its parent's is used
            located = node.meta
        if depth > MAX_NESTING and located is not None:
            raise LiftSyntaxError(
                f"the program nests deeper than {MAX_NESTING} levels here; break this expression up with vals or functions",
                Span(filename, located.line, located.column, located.end_line, located.end_column, source=text),
            )
        stack.extend((child, depth + 1, located) for child in node.children if isinstance(child, lark.Tree))


class _Builder(lark.Transformer):
    """Parse tree -> surface nodes, each with its span."""

    def __init__(self, filename: str, source: str):
        super().__init__(visit_tokens=False)
        self.filename = filename
        self.source = source

    def _span(self, meta_or_token: Any) -> Span | None:
        m = meta_or_token
        line = getattr(m, "line", None)
        if line is None:
            return None
        return Span(self.filename, m.line, m.column, getattr(m, "end_line", None), getattr(m, "end_column", None), source=self.source)

    def __default__(self, data, children, meta):  # pragma: no cover - every rule is handled below
        raise AssertionError(f"unhandled grammar rule {data}")

    # --- items
    @lark.v_args(meta=True)
    def start(self, meta, items):
        return SFile(tuple(items), self.filename, self.source)

    def expression(self, children):
        return children[0]

    @lark.v_args(meta=True)
    def param_decl(self, meta, items):
        return SParamDecl(tuple(n for n, _ in items), tuple(d for _, d in items), self._span(meta))

    def param_item(self, children):
        name, doc = children
        return str(name), str(doc)[1:-1] if doc is not None else ""

    @lark.v_args(meta=True)
    def def_fun(self, meta, children):
        name, params, result, body = children
        return SDef(str(name), tuple(params or ()), result, body, self._span(meta))

    def params(self, children):
        return tuple(children)

    def param(self, children):
        pattern, type_ = children
        return (pattern, type_)

    @lark.v_args(meta=True)
    def pvar(self, meta, children):
        return SPVar(str(children[0]), self._span(meta))

    @lark.v_args(meta=True)
    def ptuple(self, meta, children):
        return SPTuple(tuple(children), self._span(meta))

    @lark.v_args(meta=True)
    def top_val(self, meta, children):
        return children[0]

    @lark.v_args(meta=True)
    def val_binding(self, meta, children):
        pattern, type_, value = children
        return SVal(pattern, type_, value, self._span(meta))

    @lark.v_args(meta=True)
    def block(self, meta, children):
        *statements, result = children
        return SBlock(tuple(statements), result, self._span(meta))

    # --- expressions
    @lark.v_args(meta=True)
    def name(self, meta, children):
        return SName(str(children[0]), self._span(meta))

    @lark.v_args(meta=True)
    def int_lit(self, meta, children):
        return SInt(int(children[0]), self._span(meta))

    @lark.v_args(meta=True)
    def float_lit(self, meta, children):
        value = float(str(children[0]).rstrip("fF"))
        if math.isinf(value):  # 1e999: no float holds it, and no printer could write it back
            raise LiftSyntaxError(f"the number {children[0]} is too large for a float", self._span(meta))
        return SFloat(value, self._span(meta))

    @lark.v_args(meta=True)
    def true_lit(self, meta, children):
        return SBool(True, self._span(meta))

    @lark.v_args(meta=True)
    def false_lit(self, meta, children):
        return SBool(False, self._span(meta))

    @lark.v_args(meta=True)
    def tuple(self, meta, children):
        return STuple(tuple(children), self._span(meta))

    @lark.v_args(meta=True)
    def call(self, meta, children):
        fun, args = children
        return SCall(fun, tuple(args or ()), self._span(meta))

    def args(self, children):
        return tuple(children)

    @lark.v_args(meta=True)
    def named_arg(self, meta, children):
        name, value = children
        return SNamedArg(str(name), value, self._span(meta))

    @lark.v_args(meta=True)
    def proj(self, meta, children):
        expr, proj = children
        return SProj(expr, int(str(proj)[1:]), self._span(meta))

    def _op(op):
        @lark.v_args(meta=True)
        def build(self, meta, children):
            return SOp(op, tuple(children), self._span(meta))

        return build

    add, sub, mul, div, mod = _op("+"), _op("-"), _op("*"), _op("/"), _op("%")
    neg, not_op, and_op, or_op = _op("neg"), _op("!"), _op("&&"), _op("||")

    @lark.v_args(meta=True)
    def compare(self, meta, children):
        a, op, b = children
        return SOp(str(op), (a, b), self._span(meta))

    # --- types
    @lark.v_args(meta=True)
    def named_type(self, meta, children):
        return TName(str(children[0]), self._span(meta))

    @lark.v_args(meta=True)
    def array_type(self, meta, children):
        elem, size = children
        return TArray(elem, size, self._span(meta))

    @lark.v_args(meta=True)
    def tuple_type(self, meta, children):
        return TTuple(tuple(children), self._span(meta))


def _to_pattern(node: S) -> S:
    """A lambda's parameter is parsed as an expression; it must be a name or a tuple of them."""
    if isinstance(node, SName):
        return SPVar(node.name, node.span)
    if isinstance(node, STuple):
        return SPTuple(tuple(_to_pattern(e) for e in node.elems), node.span)
    raise LiftSyntaxError("a lambda's parameter must be a name or a tuple of names, as in (acc, (x, w)) -> ...", getattr(node, "span", None))


@lark.v_args(meta=True)
def _lambda(self, meta, children):
    param, body = children
    return SLambda(_to_pattern(param), body, self._span(meta))


setattr(_Builder, "lambda", _lambda)
