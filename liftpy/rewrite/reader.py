"""The rule-file reader: text in the format of :mod:`liftpy.rewrite.rules` to rule descriptions.

Each side of a rule is parsed by the language's own parser (on the file with everything else blanked, so
positions are file positions) and elaborated with the prelude's and the file's macros; names nothing binds
become pattern variables. Every mistake is a :class:`~liftpy.errors.RewriteError` at its file and line,
naming the rule.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from .. import arith
from ..constraints import Constraint
from ..elaborate import Elaborator, Scope, prelude_scope
from ..errors import LiftError, RewriteError, Span
from ..ir import Node, Var
from ..primitives import PRIMITIVES
from ..syntax import SCall, SLambda, SName, SOp, STuple, SVal, S, TArray, TName, TTuple, parse_expression_syntax, parse_file_syntax
from ..types import SCALARS, ArrayType, TupleType, Type, VectorType
from .match import PREFIX, DimVar, TypeVar, binders, pattern_size, size_pattern_names
from .predicates import PREDICATES, Predicate

_VECTOR_WIDTHS = (2, 3, 4, 8, 16)


@dataclass(frozen=True)
class Condition:
    """One ``where`` condition, compiled: a type pattern, a size comparison or a predicate call."""

    kind: str  # "type", "size", "predicate"
    text: str
    span: Span | None
    var: str = ""  # "type": the pattern variable whose type is matched
    type: Type | None = None
    constraint: Constraint | None = None  # "size": over pattern names
    predicate: Predicate | None = None
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuleSource:
    """A rule as read from a file: its pattern and replacement (IR with pattern variables), conditions,
    the kinds of its pattern variables and which binders the two sides share."""

    name: str
    params: tuple[str, ...]
    doc: str
    span: Span
    lhs: Node
    rhs: Node
    conditions: tuple[Condition, ...]
    kinds: dict
    pattern_binders: frozenset[str]
    shared_binders: frozenset[str]


def read_rules(text: str, filename: str) -> list[RuleSource]:
    """Every rule of a rule file's text, in order."""
    return _FileReader(text, filename).read()


class RuleElaborator(Elaborator):
    """Elaborates one side of a rule: unbound names become pattern variables (see :mod:`.match`)."""

    def __init__(self, reserved: frozenset[str]):
        super().__init__(reserved)
        self.kinds: dict[str, str] = {}
        self.where: dict[str, Span | None] = {}

    def note(self, name: str, kind: str, ast: S):
        known = self.kinds.get(name)
        if known is not None and known != kind and known != "param":  # a rule parameter is a size or a dimension
            raise RewriteError(f"{name[1:]} is used as a {_KIND_TEXT[kind]} here and as a {_KIND_TEXT[known]} "
                               f"elsewhere", self.span(ast))
        self.kinds[name] = kind
        self.where.setdefault(name, self.span(ast))

    def unbound(self, name, kind, ast, scope):
        if kind in ("fun", "data") and len(name) >= 3:
            import difflib

            known = set(PRIMITIVES) | {n for n, b in _visible(scope).items() if type(b).__name__ == "MacroB"}
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.85)
            if close:  # surely a typo, not a pattern variable
                raise RewriteError(f"unknown function or value {name!r} (did you mean {close[0]}?)", self.span(ast))
        self.note(PREFIX + name, kind, ast)
        if kind == "size":
            return pattern_size(name)
        return Var(PREFIX + name, span=self.span(ast))

    def dim(self, ast, scope):
        if isinstance(ast, SName) and scope.lookup(ast.name) is None:
            self.note(PREFIX + ast.name, "dim", ast)
            return DimVar(PREFIX + ast.name)
        return super().dim(ast, scope)


def _visible(scope: Scope) -> dict:
    out: dict = {}
    while scope is not None:
        for k, v in scope.names.items():
            out.setdefault(k, v)
        scope = scope.parent
    return out


_KIND_TEXT = {"data": "value", "fun": "function", "size": "size", "dim": "dimension", "type": "type", "param": "parameter"}


@dataclass
class _Item:
    kind: str  # "rule" or "def"
    start: int
    end: int
    doc: str = ""
    line: int = 0


class _FileReader:
    """Reads one rule file; every mistake is a RewriteError at its file and line, naming the rule."""

    def __init__(self, text: str, filename: str, base: Scope | None = None):
        self.text = text
        self.filename = filename
        self.code = _blank_comments(text)
        self.reserved = frozenset(re.findall(r"\w+", text))
        self.scope = base

    # -- spans and errors
    def span_at(self, offset: int) -> Span:
        line = self.text.count("\n", 0, offset) + 1
        col = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return Span(self.filename, line, col, source=self.text)

    def error(self, message: str, offset: int | None = None, span: Span | None = None) -> RewriteError:
        if span is None and offset is not None:
            span = self.span_at(offset)
        elif span is not None:
            span = dataclasses.replace(span, source=self.text)
        return RewriteError(message, span)

    def first_code(self, start: int, end: int) -> int:
        text = self.code[start:end]
        return start + len(text) - len(text.lstrip())

    def masked(self, start: int, end: int) -> str:
        """The file with everything outside [start, end) blanked, so parser positions are file positions."""
        blank = lambda s: re.sub(r"[^\n]", " ", s)
        return blank(self.text[:start]) + self.code[start:end] + blank(self.text[end:])

    # -- items
    def items(self) -> list[_Item]:
        items: list[_Item] = []
        doc: list[str] = []
        doc_start = None
        offset = 0
        current: _Item | None = None
        for line in self.text.splitlines(keepends=True):
            stripped = line.rstrip("\n")
            if stripped.startswith("///"):
                if current is not None:
                    current.end = offset
                    current = None
                if doc_start is None:
                    doc_start = offset
                doc.append(stripped[3:].strip() if not stripped[3:4] == " " else stripped[4:].rstrip())
            elif re.match(r"(rule|def)\b", stripped):
                if current is not None:
                    current.end = offset
                kind = stripped.split(None, 1)[0]
                current = _Item(kind, offset, len(self.text), "\n".join(doc).strip(), self.text.count("\n", 0, offset) + 1)
                items.append(current)
                doc, doc_start = [], None
            elif current is None and self.code[offset : offset + len(stripped)].strip():
                indent = len(stripped) - len(stripped.lstrip())
                raise self.error("expected `rule NAME: PATTERN => REPLACEMENT`, `def` or a comment", offset + indent)
            offset += len(line)
        if doc:
            raise self.error("documentation (///) with no rule after it", doc_start)
        return items

    # -- whole file
    def read(self) -> list[RuleSource]:
        out: list[RuleSource] = []
        elaborator = Elaborator(self.reserved)
        if self.scope is None:
            self.scope = prelude_scope(elaborator)
        seen: dict[str, int] = {}
        for item in self.items():
            if item.kind == "def":
                self.define(item, elaborator)
                continue
            rule = self.rule(item)
            if rule.name in seen:
                raise self.error(f"rule {rule.name} is defined twice (first at line {seen[rule.name]})", item.start)
            seen[rule.name] = item.line
            out.append(rule)
        return out

    def define(self, item: _Item, elaborator: Elaborator):
        try:
            sfile = parse_file_syntax(self.masked(item.start, item.end), self.filename)
            program, self.scope = elaborator.file(sfile, self.scope)
        except LiftError as e:
            raise self.error(e.message, span=e.span) from None
        if program.functions:
            raise self.error("rule files define macros (untyped parameters), not programs", item.start)

    # -- one rule
    def rule(self, item: _Item) -> RuleSource:
        code = self.code
        head = re.compile(r"rule\s+(\w+)\s*(?:\(([^)]*)\))?\s*:").match(code, item.start)
        if head is None:
            name = re.compile(r"rule\s+(\w+)").match(code, item.start)
            what = f"rule {name.group(1)}: " if name else ""
            raise self.error(f"{what}expected `rule NAME(PARAMS):` then PATTERN => REPLACEMENT", item.start)
        name = head.group(1)
        params = tuple(p.strip() for p in (head.group(2) or "").split(",") if p.strip())
        for p in params:
            if not re.fullmatch(r"(?!\d)\w+", p):
                raise self.error(f"rule {name}: parameter {p!r} is not a name", head.start(2))
        if len(set(params)) != len(params):
            raise self.error(f"rule {name}: a parameter is declared twice", head.start(2))
        if not item.doc:
            raise self.error(f"rule {name} has no documentation: write what it does, with its equation, in /// "
                             f"lines before it", item.start)
        body_start, body_end = head.end(), item.end
        arrows = _top_level(code, body_start, body_end, "=>")
        if len(arrows) != 1:
            problem = "has no `=>` between its pattern and its replacement" if not arrows else "has more than one `=>`"
            raise self.error(f"rule {name} {problem}", arrows[1] if len(arrows) > 1 else item.start)
        arrow = arrows[0]
        wheres = _top_level(code, arrow + 2, body_end, "where")
        rhs_end = wheres[0] if wheres else body_end
        if not code[body_start:arrow].strip():
            raise self.error(f"rule {name} has no pattern before `=>`", arrow)
        if not code[arrow + 2 : rhs_end].strip():
            raise self.error(f"rule {name} has no replacement after `=>`", arrow)
        conditions_text: list[tuple[int, int]] = []
        for i, w in enumerate(wheres):
            end = wheres[i + 1] if i + 1 < len(wheres) else body_end
            start = w + len("where")
            pieces = _top_level(code, start, end, ",")
            bounds = [start] + [p + 1 for p in pieces] + [end]
            for a, z in zip(bounds, bounds[1:]):
                stop = z - 1 if z != end else z
                if not code[a:stop].strip():
                    raise self.error(f"rule {name}: empty condition", a)
                conditions_text.append((a, stop))
        return self.compile(name, params, item, (body_start, arrow), (arrow + 2, rhs_end), conditions_text)

    def parse(self, name: str, start: int, end: int) -> S:
        try:
            return parse_expression_syntax(self.masked(start, end), self.filename)
        except LiftError as e:
            raise self.error(f"rule {name}: {e.message}", span=e.span) from None

    def compile(self, name, params, item, lhs_range, rhs_range, condition_ranges) -> RuleSource:
        lhs_ast = self.parse(name, *lhs_range)
        rhs_ast = self.parse(name, *rhs_range)
        left, right = RuleElaborator(self.reserved), RuleElaborator(self.reserved)
        try:
            lhs = left.data(lhs_ast, self.scope.child())
            rhs = right.data(rhs_ast, self.scope.child())
        except LiftError as e:
            raise self.error(f"rule {name}: {e.message}", span=e.span) from None
        if isinstance(lhs, Var) and lhs.name.startswith(PREFIX):
            raise self.error(f"rule {name}: the pattern is a bare variable, which would match everything",
                             self.first_code(*lhs_range))
        left_binders = _user_binders(lhs_ast)
        right_binders = _user_binders(rhs_ast)
        for side, names in (("pattern", left_binders), ("replacement", right_binders)):
            twice = [n for n in set(names) if names.count(n) > 1]
            if twice:
                where = lhs_range if side == "pattern" else rhs_range
                raise self.error(f"rule {name}: {twice[0]} is bound twice in the {side}; give each binder its own name",
                                 self.first_code(*where))
        kinds = dict(left.kinds)
        conditions = []
        bound_later: set[str] = set()
        for p in params:
            kinds.setdefault(PREFIX + p, "param")
        for start, end in condition_ranges:
            c = self.condition(name, start, end, kinds, left)
            conditions.append(c)
            if c.kind == "type":
                bound_later |= _type_names(c.type)
        for var, kind in right.kinds.items():
            known = kinds.get(var)
            if known == "param":
                kinds[var] = known = kind
            if known is None and var[1:] not in params and var not in bound_later:
                raise self.error(f"rule {name}: {var[1:]} in the replacement is not bound by the pattern",
                                 span=right.where[var])
            if known is not None and known != kind:
                raise self.error(f"rule {name}: {var[1:]} is a {_KIND_TEXT[known]} in the pattern but a "
                                 f"{_KIND_TEXT[kind]} in the replacement", span=right.where[var])
            kinds.setdefault(var, kind)
        for p in params:
            if kinds.get(PREFIX + p, "param") == "param":
                raise self.error(f"rule {name}: parameter {p} is not used in the pattern or the replacement",
                                 item.start)
        pattern_binders = frozenset(binders(lhs))
        shared = frozenset(left_binders) & frozenset(right_binders)
        return RuleSource(name, params, item.doc, self.span_at(item.start), lhs, rhs, tuple(conditions), kinds,
                          pattern_binders, shared)

    def condition(self, name: str, start: int, end: int, kinds: dict, left: RuleElaborator) -> Condition:
        text = " ".join(self.code[start:end].split())
        span = self.span_at(start + len(self.code[start:end]) - len(self.code[start:end].lstrip()))
        typed = re.match(r"\s*((?!\d)\w+)\s*:(?!=)", self.code[start:end])
        elab = RuleElaborator(self.reserved)
        elab.kinds = dict(kinds)
        try:
            if typed:
                var = PREFIX + typed.group(1)
                if kinds.get(var) != "data":
                    raise self.error(f"rule {name}: {typed.group(1)} is not a value matched by the pattern", span=span)
                ast = self.parse(name, start + typed.end(), end)
                type_pattern = _type_pattern(ast, elab, self.scope.child())
                for n, k in elab.kinds.items():
                    kinds.setdefault(n, k)
                return Condition("type", text, span, var=var, type=type_pattern)
            ast = self.parse(name, start, end)
            if isinstance(ast, SCall) and isinstance(ast.fun, SName) and ast.fun.name in PREDICATES:
                args = []
                for a in ast.args:
                    if not isinstance(a, SName) or PREFIX + a.name not in kinds:
                        raise self.error(f"rule {name}: {ast.fun.name}'s arguments must be names from the pattern", span=span)
                    args.append(PREFIX + a.name)
                return Condition("predicate", text, span, predicate=PREDICATES[ast.fun.name], args=tuple(args))
            if isinstance(ast, SCall) and isinstance(ast.fun, SName):
                known = ", ".join(sorted(PREDICATES))
                raise self.error(f"rule {name}: unknown condition {ast.fun.name}(...) (known: {known})", span=span)
            constraint = self.size_condition(name, ast, elab, span, text)
        except LiftError as e:
            if isinstance(e, RewriteError) and e.message.startswith(f"rule {name}"):
                raise
            raise self.error(f"rule {name}: {e.message}", span=e.span or span) from None
        for n in size_pattern_names(constraint.lhs) | size_pattern_names(constraint.rhs):
            if n not in kinds:
                raise self.error(f"rule {name}: {n[1:]} in `{text}` is bound neither by the pattern nor by a parameter",
                                 span=span)
        for n, k in elab.kinds.items():
            if k == "size":
                kinds.setdefault(n, k)
        return Condition("size", text, span, constraint=constraint)

    def size_condition(self, name, ast, elab, span, text) -> Constraint:
        ops = ("==", ">=", "<=", ">", "<")
        if not (isinstance(ast, SOp) and ast.op in ops):
            raise self.error(f"rule {name}: a condition is `x: TYPE`, a size comparison ({', '.join(ops)}, "
                             f"`a % b == 0`) or a predicate ({', '.join(sorted(PREDICATES))})", span=span)
        a_ast, b_ast = ast.args
        scope = self.scope.child()
        if ast.op == "==" and isinstance(a_ast, SOp) and a_ast.op == "%" and _is_zero(b_ast):
            n, d = (elab.size(x, scope) for x in a_ast.args)
            return Constraint("divides", d, n, text, span, name)
        a, b = elab.size(a_ast, scope), elab.size(b_ast, scope)
        if ast.op == "==":
            return Constraint("equal", a, b, text, span, name)
        if ast.op == ">=":
            return Constraint("at_least", a, b, text, span, name)
        if ast.op == "<=":
            return Constraint("at_least", b, a, text, span, name)
        if ast.op == ">":
            return Constraint("at_least", a, b + 1, text, span, name)
        return Constraint("at_least", b, a + 1, text, span, name)


def _is_zero(ast: S) -> bool:
    return getattr(ast, "value", None) == 0 and type(ast).__name__ == "SInt"


def _user_binders(ast: S) -> list[str]:
    """Binder names written in a rule side (lambda parameters, vals), in order."""
    out: list[str] = []

    def pattern(p):
        if hasattr(p, "elems"):
            for e in p.elems:
                pattern(e)
        elif hasattr(p, "name"):
            out.append(p.name)

    def go(x):
        if isinstance(x, SLambda):
            pattern(x.param)
        elif isinstance(x, SVal):
            pattern(x.pattern)
        if dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                value = getattr(x, f.name)
                for v in value if isinstance(value, tuple) else (value,):
                    if isinstance(v, tuple):
                        for w in v:
                            if isinstance(w, S):
                                go(w)
                    elif isinstance(v, S) and f.name != "span":
                        go(v)

    go(ast)
    return out


def _type_pattern(ast: S, elab: RuleElaborator, scope: Scope) -> Type:
    """A type written in a condition; unknown names are size or type pattern variables."""
    if isinstance(ast, (TName, SName)):
        name = ast.name
        if name in SCALARS:
            return SCALARS[name]
        for scalar in ("float", "int"):
            rest = name[len(scalar):] if name.startswith(scalar) else None
            if rest and rest.isdigit() and int(rest) in _VECTOR_WIDTHS:
                return VectorType(SCALARS[scalar], arith.Const(int(rest)))
            if rest and rest.startswith("_") and len(rest) > 1:
                return VectorType(SCALARS[scalar], elab.size(SName(rest[1:], ast.span), scope))
        elab.note(PREFIX + name, "type", ast)
        return TypeVar(PREFIX + name)
    if isinstance(ast, TArray):
        return ArrayType(_type_pattern(ast.elem, elab, scope), elab.size(ast.size, scope))
    if isinstance(ast, (TTuple, STuple)):
        return TupleType(tuple(_type_pattern(e, elab, scope) for e in ast.elems))
    raise RewriteError("expected a type such as [[T]_m]_n", getattr(ast, "span", None))


def _type_names(t: Type) -> set[str]:
    out = set(t.size_names()) if not isinstance(t, TypeVar) else set()
    if isinstance(t, TypeVar):
        out.add(t.name)
    elif isinstance(t, ArrayType):
        out |= _type_names(t.elem)
    elif isinstance(t, TupleType):
        for e in t.elems:
            out |= _type_names(e)
    return out


def _blank_comments(text: str) -> str:
    """The text with comments replaced by spaces (newlines kept), so delimiters inside them are ignored."""

    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, text, flags=re.S)


def _top_level(code: str, start: int, end: int, token: str) -> list[int]:
    """Offsets of ``token`` in code[start:end] outside brackets (a word token must stand alone)."""
    out = []
    depth = 0
    i = start
    word = token.isalpha()
    while i < end:
        c = code[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and code.startswith(token, i):
            if not word or ((i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_"))
                            and (i + len(token) >= len(code) or not (code[i + len(token)].isalnum() or code[i + len(token)] == "_"))):
                out.append(i)
                i += len(token)
                continue
        i += 1
    return out
