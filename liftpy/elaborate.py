"""Elaboration: the surface tree of a file becomes the core IR of :mod:`liftpy.ir`.

This is where names get their meaning. A name is a primitive (from the table in :mod:`liftpy.primitives`), a
value, a size (array lengths, tuning parameters, the paper's ``kernelStride._1``), a user function or a macro.
What a call's arguments are read as -- sizes, functions, values, types -- comes from the callee's signature,
so ``split(windowSize/ω, xs)`` reads its first argument as a size expression.

* Curried calls are flattened: ``mapWrg(0)(f, xs)`` is ``mapWrg(0, f, xs)``; a call with too few arguments is
  a function (``mapLcl(0)(f)``, ``toPrivate(id)``), eta-expanded into a lambda.
* ``def``s with untyped (or non-scalar, nested) parameters are macros, expanded hygienically where they are
  called: their arguments keep the meaning they had at the call site, and every variable they bind gets a
  fresh name. ``map2D``, ``slide2D`` and ``pad2D`` come from the prelude, written in the language.
* ``val x = e`` binds a value (a :class:`~liftpy.ir.Let`), a size (``val windowSize = C*kh*kw``) or a
  function, by what ``e`` is.
* Nodes produced by a macro carry the span of the call in the user's file, so errors point there.
"""

from __future__ import annotations

import difflib
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

from . import arith
from ._paths import package_text
from .arith import Expr
from .errors import LiftError, LiftSyntaxError, LiftTypeError, SizeError, Span
from .ir import (
    Apply,
    Function,
    IndexFun,
    Lambda,
    Let,
    Literal,
    Node,
    Param,
    Pattern,
    Prim,
    Program,
    PTuple,
    PVar,
    ScalarOp,
    Tuple,
    UserFun,
    Var,
)
from .primitives import INDEX_FUNS, PRIMITIVES, SCALAR_OPS, Primitive
from .syntax import (
    S,
    SBlock,
    SBool,
    SCall,
    SDef,
    SFile,
    SFloat,
    SInt,
    SLambda,
    SName,
    SNamedArg,
    SOp,
    SParamDecl,
    SProj,
    SPVar,
    STuple,
    SVal,
    TArray,
    TName,
    TTuple,
    parse_file_syntax,
)
from .types import SCALARS, ArrayType, TupleType, Type, VectorType

_VECTOR_WIDTHS = (2, 3, 4, 8, 16)
# How deeply values, sizes, types and vals may nest once macros are expanded. Each level takes a few Python
# calls here and in the type checker; at this bound some 500 of the 1,000 the stack holds are left. The deepest
# program in the repository (a convolution pipeline, derived ones included) reaches 30 levels.
MAX_ELABORATED_NESTING = 120
# How many values, sizes, types and vals one program function may come to, its macros expanded. A macro that
# uses an argument twice doubles what it is given, so a chain of them grows a short text exponentially while
# nesting only a little deeper at each link; this bound stops it in about 0.3 s. The largest function in the
# repository (examples, tests/corpus, liftpy/nn, the rewrite rules, the derived pipelines printed and read
# back) comes to 413 (conv_pipeline.lift).
MAX_ELABORATED_NODES = 100_000
_KEYWORD_FUNS = ("let",)


# ------------------------------------------------------------------------------------------------ bindings
@dataclass(frozen=True)
class DataB:
    """A value in scope, called ``ir_name`` in the IR."""

    ir_name: str


@dataclass(frozen=True)
class SizeB:
    expr: Expr


@dataclass(frozen=True)
class SizeTupleB:
    elems: tuple  # of SizeB / SizeTupleB


@dataclass(frozen=True)
class MacroB:
    """Overloads of a macro, tried in order; each with the scope it was defined in."""

    overloads: tuple[tuple[SDef, "Scope"], ...]


@dataclass(frozen=True)
class UserFunB:
    fun: UserFun


@dataclass(frozen=True)
class ThunkB:
    """A macro argument: its syntax, the scope of the call and the span errors should point to."""

    ast: S
    scope: "Scope"
    span_override: Span | None


Binding = DataB | SizeB | SizeTupleB | MacroB | UserFunB | ThunkB


@dataclass
class Scope:
    names: dict[str, Binding] = field(default_factory=dict)
    parent: "Scope | None" = None

    def lookup(self, name: str) -> Binding | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def child(self, names: dict[str, Binding] | None = None) -> "Scope":
        return Scope(dict(names or {}), self)

    def visible(self) -> set[str]:
        out: set[str] = set()
        scope: Scope | None = self
        while scope is not None:
            out |= set(scope.names)
            scope = scope.parent
        return out


# ------------------------------------------------------------------------------------------------ elaborator
class Elaborator:
    def __init__(self, reserved: frozenset[str] = frozenset()):
        self.taken: set[str] = set()  # every variable name bound so far, so each binder is unique
        self.reserved = reserved  # names written in the user's file: invented binders avoid them
        self.override: Span | None = None  # inside a macro expansion: the user's call site
        self.depth = 0  # how deeply the values, sizes, types and vals being elaborated nest (see nested)
        self.produced = 0  # how many of them the current program function has come to (see nested)

    # -------------------------------------------------------------------------------- names and spans
    def span(self, ast: S) -> Span | None:
        return self.override if self.override is not None else getattr(ast, "span", None)

    def fresh(self, base: str, invented: bool = False) -> str:
        """A binder name not used yet; ``invented`` ones (macros, eta-expansion) also avoid the user's names."""
        base = base or "x"
        name, i = base, 1
        while name in self.taken or (invented and name in self.reserved):
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name

    def error(self, ast: S, message: str, cls=LiftTypeError) -> LiftError:
        return cls(message, self.span(ast))

    @contextmanager
    def nested(self, ast: S):
        """One level deeper into the program. The parser bounds how deeply the text nests; macros expanded
        inside macros nest deeper still, so the elaborator keeps its own count, and refuses a program before
        the recursion of this stage or the next ones (type checking, code generation) runs out of stack.
        Each level is also a node produced: their count bounds how large macros may make a function."""
        if self.depth >= MAX_ELABORATED_NESTING:
            raise self.error(ast, f"the program nests deeper than {MAX_ELABORATED_NESTING} levels here, its macros "
                                  f"expanded and each val a level; break it up into functions", LiftSyntaxError)
        self.produced += 1
        if self.produced > MAX_ELABORATED_NODES:
            # inside a macro, the span is the user's call that began the expansion
            where = "this call's macros expand" if self.override is not None else "this function comes"
            raise self.error(ast, f"{where} to more than {MAX_ELABORATED_NODES:,} nodes; a macro that uses an "
                                  f"argument more than once copies it each time (bind it with val first)",
                             LiftSyntaxError)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    # -------------------------------------------------------------------------------- patterns
    def bind_pattern(self, pattern: S, scope: Scope) -> tuple[Pattern, Scope]:
        """A binder in the IR (with unique names) and the scope where its names are values."""
        names: dict[str, Binding] = {}
        invented = self.override is not None  # inside a macro: the binder is not the user's

        def go(p: S) -> Pattern:
            if isinstance(p, SPVar):
                if p.name in names:
                    raise self.error(p, f"{p.name} is bound twice in this pattern", LiftSyntaxError)
                ir_name = self.fresh(p.name, invented)
                names[p.name] = DataB(ir_name)
                return PVar(ir_name)
            return PTuple(tuple(go(e) for e in p.elems))

        ir_pattern = go(pattern)
        return ir_pattern, scope.child(names)

    # -------------------------------------------------------------------------------- classification
    def resolve(self, name: str, scope: Scope) -> Binding | Primitive | str | None:
        b = scope.lookup(name)
        if b is not None:
            return b
        if name in PRIMITIVES:
            return PRIMITIVES[name]
        if name in SCALAR_OPS and not SCALAR_OPS[name].infix:
            return name
        return None

    def is_function(self, ast: S, scope: Scope) -> bool:
        """Whether an argument denotes a function (a lambda, a primitive or macro short of arguments...)."""
        if isinstance(ast, SLambda):
            return True
        if isinstance(ast, SName):
            b = self.resolve(ast.name, scope)
            if isinstance(b, ThunkB):
                return self.is_function(b.ast, b.scope)
            return isinstance(b, (MacroB, UserFunB, Primitive)) or isinstance(b, str)
        if isinstance(ast, SCall):
            head, args = _flatten_call(ast)
            if isinstance(head, SName):
                b = self.resolve(head.name, scope)
                if isinstance(b, ThunkB):
                    return self.is_function(SCall(b.ast, args), b.scope)
                if isinstance(b, Primitive):
                    return self._prim_missing(b, args, scope) > 0
                if isinstance(b, MacroB):
                    return all(len(d.params) > len(args) for d, _ in b.overloads)
        return False

    def is_size(self, ast: S, scope: Scope, tuples: bool = True) -> bool:
        """Whether a val's right-hand side is a size expression (``val windowSize = C*kh*kw``), or with
        ``tuples`` a tuple of them."""
        if isinstance(ast, SInt):
            return True
        if isinstance(ast, SName):
            b = scope.lookup(ast.name)
            if isinstance(b, ThunkB):
                return self.is_size(b.ast, b.scope, tuples)
            return isinstance(b, SizeB) or tuples and isinstance(b, SizeTupleB)
        if isinstance(ast, SOp) and ast.op in ("+", "-", "*", "/", "%", "neg"):
            return all(self.is_size(a, scope, tuples=False) for a in ast.args)
        if isinstance(ast, SProj):
            return self.is_size_tuple(ast.expr, scope)
        if isinstance(ast, STuple):
            return tuples and all(self.is_size(e, scope) for e in ast.elems)
        if isinstance(ast, SCall) and isinstance(ast.fun, SName) and ast.fun.name in ("min", "max"):
            return all(self.is_size(a, scope) for a in ast.args)
        return False

    def is_size_tuple(self, ast: S, scope: Scope) -> bool:
        """Whether ``ast`` denotes a tuple of sizes (``kernelStride``, ``(3, 3)``)."""
        if isinstance(ast, SName):
            b = scope.lookup(ast.name)
            if isinstance(b, ThunkB):
                return self.is_size_tuple(b.ast, b.scope)
            return isinstance(b, SizeTupleB)
        if isinstance(ast, STuple):
            return all(self.is_size(e, scope) for e in ast.elems)
        if isinstance(ast, SProj):
            return self.is_size_tuple(ast.expr, scope)
        return False

    # -------------------------------------------------------------------------------- values
    def data(self, ast: S, scope: Scope) -> Node:
        with self.nested(ast):
            return self._data(ast, scope)

    def _data(self, ast: S, scope: Scope) -> Node:
        span = self.span(ast)
        if isinstance(ast, SName):
            b = self.resolve(ast.name, scope)
            if isinstance(b, DataB):
                return Var(b.ir_name, span=span)
            if isinstance(b, ThunkB):
                return self.in_thunk(b, lambda a, s: self.data(a, s))
            if isinstance(b, SizeB):
                value = b.expr.as_int()
                if value is None:
                    raise self.error(ast, f"{ast.name} is a size ({b.expr}); sizes are not values inside a program")
                return Literal(value, "int", span=span)
            if isinstance(b, (MacroB, UserFunB, Primitive, str)):
                raise self.error(ast, f"{ast.name} is a function; call it with its arguments")
            if isinstance(b, SizeTupleB):
                raise self.error(ast, f"{ast.name} is a tuple of sizes; take a component with {ast.name}._1")
            return self.unbound(ast.name, "data", ast, scope)
        if isinstance(ast, SInt):
            return Literal(ast.value, "int", span=span)
        if isinstance(ast, SFloat):
            return Literal(ast.value, "float", span=span)
        if isinstance(ast, SBool):
            return Literal(ast.value, "bool", span=span)
        if isinstance(ast, STuple):
            return Tuple(tuple(self.data(e, scope) for e in ast.elems), span=span)
        if isinstance(ast, SOp):
            args = tuple(self.data(a, scope) for a in ast.args)
            if ast.op == "neg" and isinstance(args[0], Literal) and args[0].scalar != "bool":
                return Literal(-args[0].value, args[0].scalar, span=span)
            return ScalarOp(ast.op, args, span=span)
        if isinstance(ast, SProj):
            if self.is_size_tuple(ast.expr, scope):
                return self.data_from_size(ast, scope)
            if ast.index < 1:
                raise self.error(ast, "tuple components are numbered from 1: ._1 is the first", LiftSyntaxError)
            return Prim("get", (ast.index - 1,), (self.data(ast.expr, scope),), span=span)
        if isinstance(ast, SCall):
            head, args = _flatten_call(ast)
            return self.call(head, args, scope, "data", ast)
        if isinstance(ast, SBlock):
            return self.block(list(ast.statements), ast.result, scope)
        if isinstance(ast, SLambda):
            raise self.error(ast, "a function where a value was expected")
        if isinstance(ast, SNamedArg):
            raise self.error(ast, f"named argument {ast.name}= outside a call")
        if isinstance(ast, (TArray, TName, TTuple)):
            raise self.error(ast, "a type where a value was expected")
        raise self.error(ast, f"cannot read {type(ast).__name__} as a value")

    def data_from_size(self, ast: S, scope: Scope) -> Node:
        size = self.size(ast, scope)
        if size.as_int() is None:
            raise self.error(ast, f"{size} is a size; sizes are not values inside a program")
        return Literal(size.as_int(), "int", span=self.span(ast))

    def in_thunk(self, thunk: ThunkB, f):
        saved = self.override
        self.override = thunk.span_override
        try:
            return f(thunk.ast, thunk.scope)
        finally:
            self.override = saved

    # -------------------------------------------------------------------------------- functions
    def fun(self, ast: S, scope: Scope) -> Node:
        """An argument in function position: a Lambda or a UserFun."""
        span = self.span(ast)
        if isinstance(ast, SLambda):
            pattern, inner = self.bind_pattern(ast.param, scope)
            return Lambda(pattern, self.data(ast.body, inner), span=span)
        if isinstance(ast, SName):
            b = self.resolve(ast.name, scope)
            if isinstance(b, ThunkB):
                return self.in_thunk(b, lambda a, s: self.fun(a, s))
            if isinstance(b, UserFunB):
                return b.fun
            if isinstance(b, (Primitive, MacroB, str)):
                return self.eta(ast, (), scope)
            if isinstance(b, DataB):
                raise self.error(ast, f"expected a function, got the value {ast.name}")
            if b is None:
                return self.unbound(ast.name, "fun", ast, scope)
            raise self.error(ast, f"expected a function, got the size {ast.name}")
        if isinstance(ast, SCall):
            head, args = _flatten_call(ast)
            if self.is_function(ast, scope):
                return self.eta(head, args, scope)
            raise self.error(ast, "expected a function here, but this call gives a value")
        if isinstance(ast, SBlock) and not ast.statements:
            return self.fun(ast.result, scope)
        raise self.error(ast, "expected a function (a lambda such as x -> x + 1, or a primitive such as id)")

    def eta(self, head: S, args: tuple[S, ...], scope: Scope) -> Lambda:
        """A call short of its last argument(s), as a function: ``mapLcl(0)(f)`` is ``x -> mapLcl(0, f, x)``."""
        missing = self.missing_count(head, args, scope)
        names = [self.fresh("x", invented=True) for _ in range(missing)]
        inner = scope.child({n: DataB(n) for n in names})
        extra = tuple(SName(n, getattr(head, "span", None)) for n in names)
        body = self.call(head, args + extra, inner, "data", head)
        param: Pattern = PVar(names[0]) if missing == 1 else PTuple(tuple(PVar(n) for n in names))
        return Lambda(param, body, span=self.span(head))

    def missing_count(self, head: S, args: tuple[S, ...], scope: Scope) -> int:
        if isinstance(head, SName):
            b = self.resolve(head.name, scope)
            if isinstance(b, Primitive):
                return max(self._prim_missing(b, args, scope), 1)
            if isinstance(b, MacroB):
                counts = [len(d.params) - len(args) for d, _ in b.overloads if len(d.params) > len(args)]
                if counts:
                    return min(counts)
            if isinstance(b, str):  # a math builtin such as exp
                return max(SCALAR_OPS[b].arity - len(args), 1)
            if isinstance(b, ThunkB):
                return self.missing_count(b.ast, (), b.scope) if not args else 1
        return 1

    def _prim_missing(self, prim: Primitive, args: tuple[S, ...], scope: Scope) -> int:
        """How many arguments a primitive call lacks (0 when complete)."""
        if prim.variadic:
            return 0 if args else 1
        try:
            filled = self.match_slots(prim, args, None, scope)
        except LiftError:
            return 0  # too many or misnamed arguments: reported when the call is built
        return len(prim.slots) - len(filled)

    # -------------------------------------------------------------------------------- calls
    def call(self, head: S, args: tuple[S, ...], scope: Scope, mode: str, ast: S) -> Node:
        span = self.span(ast)
        if isinstance(head, SLambda):
            fun = self.fun(head, scope)
            return Apply(fun, self.arg_value(args, scope, ast), span=span)
        if not isinstance(head, SName):
            raise self.error(ast, "only named functions, primitives and lambdas can be called")
        b = self.resolve(head.name, scope)
        if b is None and head.name in _KEYWORD_FUNS:
            return self.let_form(args, scope, ast)
        if isinstance(b, Primitive):
            return self.prim_call(b, args, scope, ast)
        if isinstance(b, MacroB):
            return self.expand(head.name, b, args, scope, ast)
        if isinstance(b, UserFunB):
            if len(args) not in (1, _arity(b.fun.param)):
                raise self.error(ast, f"{head.name} takes {_arity(b.fun.param)} argument(s), got {len(args)}")
            return Apply(b.fun, self.arg_value(args, scope, ast), span=span)
        if isinstance(b, str):
            spec = SCALAR_OPS[b]
            if len(args) != spec.arity:
                raise self.error(ast, f"{b} takes {spec.arity} argument(s), got {len(args)}")
            return ScalarOp(b, tuple(self.data(a, scope) for a in args), span=span)
        if isinstance(b, ThunkB):
            # the thunk's syntax lives in another scope: name the call-site arguments there by fresh names
            names = {self.fresh("arg", invented=True): ThunkB(a, scope, self.override) for a in args}
            inner = b.scope.child(names)
            call = SCall(b.ast, tuple(SName(n, getattr(a, "span", None)) for n, a in zip(names, args)))
            saved = self.override
            self.override = b.span_override if b.span_override is not None else self.override
            try:
                return self.data(call, inner)
            finally:
                self.override = saved
        if isinstance(b, DataB):
            raise self.error(head, f"{head.name} is a value, not a function")
        if isinstance(b, (SizeB, SizeTupleB)):
            raise self.error(head, f"{head.name} is a size, not a function")
        fun = self.unbound(head.name, "fun", head, scope)
        return Apply(fun, self.arg_value(args, scope, ast), span=span)

    def arg_value(self, args: tuple[S, ...], scope: Scope, ast: S) -> Node:
        values = tuple(self.data(a, scope) for a in args)
        if len(values) == 1:
            return values[0]
        return Tuple(values, span=self.span(ast))

    def let_form(self, args: tuple[S, ...], scope: Scope, ast: S) -> Node:
        """The paper's ``let(x -> body, value)``: the same node as ``val x = value; body``."""
        if len(args) != 2 or not isinstance(args[0], SLambda):
            raise self.error(ast, "let takes a lambda and a value: let(x -> body, value)")
        value = self.data(args[1], scope)
        pattern, inner = self.bind_pattern(args[0].param, scope)
        return Let(pattern, value, self.data(args[0].body, inner), span=self.span(ast))

    def prim_call(self, prim: Primitive, args: tuple[S, ...], scope: Scope, ast: S) -> Node:
        span = self.span(ast)
        if prim.variadic:
            if any(isinstance(a, SNamedArg) for a in args):
                raise self.error(ast, f"{prim.name} takes no named arguments")
            return Prim(prim.name, (), tuple(self.data(a, scope) for a in args), span=span)
        filled = self.match_slots(prim, args, ast, scope)
        if len(filled) < len(prim.slots):
            hint = f"; to pass {prim.name} as a function, use it where a function is expected" if not args else ""
            raise self.error(
                ast, f"{prim.name} takes {len(prim.slots)} arguments ({prim.signature}), got {len(args)}{hint}", LiftSyntaxError
            )
        params, exprs = [], []
        for slot in prim.slots:
            a = filled[slot.name]
            if slot.kind == "size":
                params.append(self.size(a, scope))
            elif slot.kind == "dim":
                params.append(self.dim(a, scope))
            elif slot.kind == "indexfun":
                params.append(self.indexfun(a, scope))
            elif slot.kind == "type":
                params.append(self.type_(a, scope))
            elif slot.kind == "fun":
                exprs.append(self.fun(a, scope))
            else:
                exprs.append(self.data(a, scope))
        return Prim(prim.name, tuple(params), tuple(exprs), span=span)

    def match_slots(self, prim: Primitive, args: tuple[S, ...], ast: S | None, scope: Scope) -> dict[str, S]:
        """Which argument fills which slot: named ones by name, the rest in order, ``toGlobal(x)`` on a value
        taking the default function."""
        filled: dict[str, S] = {}
        positional = []
        names = {s.name for s in prim.slots}
        for a in args:
            if isinstance(a, SNamedArg):
                if a.name not in names:
                    raise self.error(
                        a, f"{prim.name} has no argument named {a.name} ({prim.signature})", LiftSyntaxError
                    )
                if a.name in filled:
                    raise self.error(a, f"argument {a.name} given twice", LiftSyntaxError)
                filled[a.name] = a.value
            else:
                positional.append(a)
        free = [s for s in prim.slots if s.name not in filled]
        if len(positional) == len(free) - 1 and positional:
            default_slot = next((s for s in free if s.default), None)
            if default_slot is not None and not self.is_function(positional[0], scope):
                filled[default_slot.name] = SName(default_slot.default, getattr(positional[0], "span", None))
                free = [s for s in free if s is not default_slot]
        if len(positional) > len(free):
            raise self.error(
                ast, f"{prim.name} takes {len(prim.slots)} arguments ({prim.signature}), got {len(args)}", LiftSyntaxError
            )
        for slot, a in zip(free, positional):
            filled[slot.name] = a
        return filled

    # -------------------------------------------------------------------------------- macros
    def expand(self, name: str, macro: MacroB, args: tuple[S, ...], scope: Scope, ast: S) -> Node:
        chosen = None
        for sdef, def_scope in macro.overloads:
            binding = self.match_macro(sdef, args, scope)
            if binding is not None:
                chosen = (sdef, def_scope, binding)
                break
        if chosen is None:
            shapes = "; ".join(f"{name}({', '.join(_pattern_text(p) for p, _ in d.params)})" for d, _ in macro.overloads)
            raise self.error(ast, f"no definition of {name} takes these {len(args)} argument(s): {shapes}", LiftSyntaxError)
        sdef, def_scope, binding = chosen
        saved = self.override
        self.override = self.span(ast)  # everything the macro builds points at the user's call
        try:
            inner = def_scope.child(binding)
            lets: list[tuple[Pattern, Node, Type]] = []
            for (pattern, type_ast), arg in zip(sdef.params, self.ordered_args(sdef, args)):
                if type_ast is not None and not _is_size_type(type_ast) and isinstance(pattern, SPVar):
                    # a typed parameter of a value: bind it once and check its declared type
                    declared = self.type_(type_ast, inner)
                    value = self.in_thunk(binding[pattern.name], lambda a, s: self.data(a, s))
                    ir_pattern, inner = self.bind_pattern(pattern, inner)
                    lets.append((ir_pattern, value, declared))
            body = self.data(sdef.body, inner)
            if sdef.result is not None:
                declared = self.type_(sdef.result, inner)
                result_name = self.fresh(sdef.name + "Result", invented=True)
                body = Let(PVar(result_name), body, Var(result_name, span=self.override), declared=declared, span=self.override)
            for pattern, value, declared in reversed(lets):
                body = Let(pattern, value, body, declared=declared, span=self.override)
            return body
        finally:
            self.override = saved

    def ordered_args(self, sdef: SDef, args: tuple[S, ...]) -> list[S]:
        by_name = {a.name: a.value for a in args if isinstance(a, SNamedArg)}
        positional = iter(a for a in args if not isinstance(a, SNamedArg))
        out = []
        for pattern, _ in sdef.params:
            if isinstance(pattern, SPVar) and pattern.name in by_name:
                out.append(by_name[pattern.name])
            else:
                out.append(next(positional))
        return out

    def match_macro(self, sdef: SDef, args: tuple[S, ...], scope: Scope) -> dict[str, Binding] | None:
        """Bindings of the macro's parameters to thunks of the arguments, or None if this overload does not fit."""
        if len(args) != len(sdef.params):
            return None
        names = {p.name for p, _ in sdef.params if isinstance(p, SPVar)}
        if any(isinstance(a, SNamedArg) and a.name not in names for a in args):
            return None
        binding: dict[str, Binding] = {}
        for (pattern, type_ast), arg in zip(sdef.params, self.ordered_args(sdef, args)):
            if not self.bind_macro_param(pattern, arg, scope, self.override, binding):
                return None
        return binding

    def bind_macro_param(self, pattern: S, arg: S, scope: Scope, override, out: dict[str, Binding]) -> bool:
        if isinstance(pattern, SPVar):
            out[pattern.name] = ThunkB(arg, scope, override)
            return True
        # a tuple pattern: the argument must be a tuple literal, a tuple of sizes, or a thunk of one
        if isinstance(arg, STuple):
            if len(arg.elems) != len(pattern.elems):
                return False
            return all(self.bind_macro_param(p, a, scope, override, out) for p, a in zip(pattern.elems, arg.elems))
        if isinstance(arg, SName):
            b = scope.lookup(arg.name)
            if isinstance(b, ThunkB):
                return self.bind_macro_param(pattern, b.ast, b.scope, b.span_override, out)
            if isinstance(b, SizeTupleB):
                if len(b.elems) != len(pattern.elems):
                    return False
                for p, e in zip(pattern.elems, b.elems):
                    sub_scope = scope.child({"$": e})
                    if not self.bind_macro_param(p, SName("$", arg.span), sub_scope, override, out):
                        return False
                return True
        return False

    # -------------------------------------------------------------------------------- blocks
    def block(self, statements: list[S], result: S, scope: Scope) -> Node:
        if not statements:
            return self.data(result, scope)
        with self.nested(statements[0]):  # each val scopes over the statements after it
            return self._block(statements, result, scope)

    def _block(self, statements: list[S], result: S, scope: Scope) -> Node:
        stmt, rest = statements[0], statements[1:]
        if isinstance(stmt, SDef):
            return self.block(rest, result, self.define(stmt, scope, top_level=False))
        assert isinstance(stmt, SVal)
        if self.is_function(stmt.value, scope):
            if not isinstance(stmt.pattern, SPVar):
                raise self.error(stmt, "a function value must be bound to a single name")
            inner = scope.child({stmt.pattern.name: ThunkB(stmt.value, scope, self.override)})
            return self.block(rest, result, inner)
        if stmt.type is None and self.is_size(stmt.value, scope):
            return self.block(rest, result, self.bind_size(stmt.pattern, stmt.value, scope))
        value = self.data(stmt.value, scope)
        declared = self.type_(stmt.type, scope) if stmt.type is not None else None
        pattern, inner = self.bind_pattern(stmt.pattern, scope)
        return Let(pattern, value, self.block(rest, result, inner), declared=declared, span=self.span(stmt))

    def bind_size(self, pattern: S, value: S, scope: Scope) -> Scope:
        if isinstance(pattern, SPVar):
            if isinstance(value, STuple):
                return scope.child({pattern.name: self.size_tuple(value, scope)})
            if isinstance(value, SName) and isinstance(scope.lookup(value.name), SizeTupleB):
                return scope.child({pattern.name: scope.lookup(value.name)})
            return scope.child({pattern.name: SizeB(self.size(value, scope))})
        if not isinstance(value, STuple) or len(value.elems) != len(pattern.elems):
            raise self.error(value, f"cannot bind {_pattern_text(pattern)} to this size")
        for p, v in zip(pattern.elems, value.elems):
            scope = self.bind_size(p, v, scope)
        return scope

    def size_tuple(self, ast: STuple, scope: Scope) -> SizeTupleB:
        return SizeTupleB(
            tuple(self.size_tuple(e, scope) if isinstance(e, STuple) else SizeB(self.size(e, scope)) for e in ast.elems)
        )

    # -------------------------------------------------------------------------------- static arguments
    def size(self, ast: S, scope: Scope) -> Expr:
        with self.nested(ast):
            return self._size(ast, scope)

    def _size(self, ast: S, scope: Scope) -> Expr:
        if isinstance(ast, SInt):
            return arith.Const(ast.value)
        if isinstance(ast, SName):
            b = scope.lookup(ast.name)
            if isinstance(b, SizeB):
                return b.expr
            if isinstance(b, ThunkB):
                return self.in_thunk(b, lambda a, s: self.size(a, s))
            if isinstance(b, SizeTupleB):
                raise self.error(ast, f"{ast.name} is a tuple of sizes; take a component with {ast.name}._1")
            if isinstance(b, DataB):
                raise self.error(ast, f"{ast.name} is a value; a size (a number known before the program runs) is needed here")
            return self.unbound(ast.name, "size", ast, scope)
        if isinstance(ast, SOp):
            args = [self.size(a, scope) for a in ast.args]
            try:
                if ast.op == "neg":
                    return -args[0]
                ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
                       "/": lambda a, b: a // b, "%": lambda a, b: a % b}
                if ast.op in ops:
                    return ops[ast.op](*args)
            except LiftError as e:
                raise e.with_span(self.span(ast))
            raise self.error(ast, f"{ast.op} is not size arithmetic (sizes use + - * / %)")
        if isinstance(ast, SProj):
            elem = self.size_component(ast, scope)
            if not isinstance(elem, SizeB):
                raise self.error(ast, "a tuple of sizes where one size is needed")
            return elem.expr
        if isinstance(ast, SCall) and isinstance(ast.fun, SName) and ast.fun.name in ("min", "max") and len(ast.args) == 2:
            a, b = (self.size(x, scope) for x in ast.args)
            return arith.min_(a, b) if ast.fun.name == "min" else arith.max_(a, b)
        if isinstance(ast, SFloat):
            raise self.error(ast, f"a size must be an integer, got {ast.value}")
        raise self.error(ast, "expected a size (an integer expression over size names)")

    def size_tuple_of(self, ast: S, scope: Scope) -> SizeTupleB:
        if isinstance(ast, SName):
            b = scope.lookup(ast.name)
            if isinstance(b, SizeTupleB):
                return b
            if isinstance(b, ThunkB):
                return self.in_thunk(b, lambda a, s: self.size_tuple_of(a, s))
        if isinstance(ast, STuple):
            return self.size_tuple(ast, scope)
        if isinstance(ast, SProj):
            elem = self.size_component(ast, scope)
            if isinstance(elem, SizeTupleB):
                return elem
        raise self.error(ast, "expected a tuple of sizes")

    def size_component(self, ast: SProj, scope: Scope) -> SizeB | SizeTupleB:
        """``kernelStride._1``: a component of a tuple of sizes."""
        base = self.size_tuple_of(ast.expr, scope)
        if not 1 <= ast.index <= len(base.elems):
            raise self.error(ast, f"._{ast.index} out of range for a tuple of {len(base.elems)} sizes")
        return base.elems[ast.index - 1]

    def dim(self, ast: S, scope: Scope) -> int:
        if isinstance(ast, SInt):
            return ast.value
        value = self.size(ast, scope).as_int()
        if value is None:
            raise self.error(ast, "expected a constant (an OpenCL dimension or a tuple index)")
        return value

    def indexfun(self, ast: S, scope: Scope) -> IndexFun:
        if isinstance(ast, SName):
            b = scope.lookup(ast.name)
            if isinstance(b, ThunkB):
                return self.in_thunk(b, lambda a, s: self.indexfun(a, s))
            if ast.name in INDEX_FUNS:
                return IndexFun(_canonical_indexfun(ast.name))
        if isinstance(ast, SCall) and isinstance(ast.fun, SName) and ast.fun.name in INDEX_FUNS:
            return IndexFun(_canonical_indexfun(ast.fun.name), tuple(self.size(a, scope) for a in ast.args))
        known = ", ".join(sorted(INDEX_FUNS))
        raise self.error(ast, f"expected an index function ({known}), as in reorder(stride(4), xs)")

    def type_(self, ast: S, scope: Scope, introduce: set[str] | None = None) -> Type:
        """A type. With ``introduce``, unknown bare size names are new size variables (collected there)."""
        with self.nested(ast):
            return self._type(ast, scope, introduce)

    def _type(self, ast: S, scope: Scope, introduce: set[str] | None) -> Type:
        if isinstance(ast, (TName, SName)):
            name = ast.name
            if name in SCALARS:
                return SCALARS[name]
            for scalar in SCALARS:
                if name.startswith(scalar) and name != scalar and scalar != "bool":
                    rest = name[len(scalar) :]
                    if rest.isdigit() and int(rest) in _VECTOR_WIDTHS:
                        return VectorType(SCALARS[scalar], arith.Const(int(rest)))
                    if rest.startswith("_") and len(rest) > 1:
                        if rest[1:].isdigit():  # float_4: a width written as a number, not a size named "4"
                            width = arith.Const(int(rest[1:]))
                        else:
                            width = self.size_name(SName(rest[1:], getattr(ast, "span", None)), scope, introduce)
                        if width.as_int() is not None and width.as_int() < 1:
                            raise self.error(ast, f"{name}: a vector width must be at least 1, got {width}", SizeError)
                        return VectorType(SCALARS[scalar], width)
            raise self.error(ast, f"unknown type {name!r} (types: float, int, bool, float4, float_v, [T]_n, (T, U))")
        if isinstance(ast, TArray):
            elem = self.type_(ast.elem, scope, introduce)
            if isinstance(ast.size, SName):
                size = self.size_name(ast.size, scope, introduce)
            else:
                size = self.size(ast.size, scope)
            return ArrayType(elem, size)
        if isinstance(ast, (TTuple, STuple)):  # a tuple type written where an expression may stand
            return TupleType(tuple(self.type_(e, scope, introduce) for e in ast.elems))
        raise self.error(ast, "expected a type")

    def size_name(self, ast: SName, scope: Scope, introduce: set[str] | None) -> Expr:
        b = scope.lookup(ast.name)
        if b is None and introduce is not None:
            introduce.add(ast.name)
            var = arith.Var(ast.name)
            scope.names[ast.name] = SizeB(var)
            return var
        return self.size(ast, scope)

    def size_tuple_binding(self, name: str, t: Type) -> SizeB | SizeTupleB:
        if isinstance(t, TupleType):
            return SizeTupleB(tuple(self.size_tuple_binding(f"{name}._{i}", e) for i, e in enumerate(t.elems, 1)))
        return SizeB(arith.Var(name, arith.Range.NATURAL))

    # -------------------------------------------------------------------------------- definitions
    def define(self, sdef: SDef, scope: Scope, top_level: bool) -> Scope:
        """Bind a ``def`` in a new scope: a user function, a macro (or, at the top level, also a program
        function, returned through ``self.functions``)."""
        if _is_user_function(sdef):
            fun = self.user_fun(sdef, scope)
            return scope.child({sdef.name: UserFunB(fun)})
        existing = scope.lookup(sdef.name)
        overloads = ((sdef, scope),)
        if isinstance(existing, MacroB) and sdef.name in scope.names:
            overloads = existing.overloads + overloads
        new_scope = scope.child({sdef.name: MacroB(overloads)})
        return new_scope

    def user_fun(self, sdef: SDef, scope: Scope) -> UserFun:
        from .typecheck import check_user_fun

        inner = Scope({}, _globals_only(scope))
        names: dict[str, Binding] = {}
        patterns, types = [], []
        for pattern, type_ast in sdef.params:
            if not isinstance(pattern, SPVar):
                raise self.error(pattern, "user function parameters must be names")
            ir_name = self.fresh(pattern.name)
            names[pattern.name] = DataB(ir_name)
            patterns.append(PVar(ir_name))
            types.append(self.type_(type_ast, scope))
        inner = inner.child(names)
        body = self.data(sdef.body, inner)
        param = patterns[0] if len(patterns) == 1 else PTuple(tuple(patterns))
        param_type = types[0] if len(types) == 1 else TupleType(tuple(types))
        result = self.type_(sdef.result, scope) if sdef.result is not None else None
        fun = UserFun(sdef.name, param, param_type, result, body, span=sdef.span)
        if result is None:
            from .typecheck import Checker

            checker = Checker()
            env = checker.bind(param, param_type, {}, fun)
            fun = UserFun(sdef.name, param, param_type, checker.check(body, env).type, body, span=sdef.span)
        return check_user_fun(fun)  # closed, so checked once here; its body carries its types

    def program_function(self, sdef: SDef, scope: Scope) -> Function:
        self.taken = set()  # binders are unique within a function; functions are independent
        self.produced = 0
        inner = scope.child()
        params: list[Param] = []
        introduced: set[str] = set()
        # size parameters first, so data types may use them
        for pattern, type_ast in sdef.params:
            if _is_size_type(type_ast):
                if not isinstance(pattern, SPVar):
                    raise self.error(pattern, "size parameters must be names")
                t = self.type_(type_ast, inner)
                inner.names[pattern.name] = self.size_tuple_binding(pattern.name, t)
                params.append(Param(pattern.name, t, True, pattern.span))
            else:
                params.append(None)  # type: ignore[arg-type]  (filled below, keeping the order)
        body_scope = inner.child()
        for i, (pattern, type_ast) in enumerate(sdef.params):
            if params[i] is not None:
                continue
            if not isinstance(pattern, SPVar):
                raise self.error(pattern, "program parameters must be names")
            t = self.type_(type_ast, inner, introduce=introduced)
            if pattern.name in self.taken:
                raise self.error(pattern, f"parameter {pattern.name} is defined twice")
            ir_name = self.fresh(pattern.name)
            body_scope.names[pattern.name] = DataB(ir_name)
            params[i] = Param(ir_name, t, False, pattern.span)
        inferred: set[str] = set()
        result = self.type_(sdef.result, inner, introduce=inferred) if sdef.result is not None else None
        body = self.data(sdef.body, body_scope)
        return Function(sdef.name, tuple(params), result, body, sdef.span, tuple(sorted(inferred)))

    def unbound(self, name: str, kind: str, ast: S, scope: Scope):
        """A name nothing binds, read as ``kind`` ("data", "fun" or "size"). An error here; the rewrite
        rules' reader overrides this to make pattern variables."""
        raise self.unknown(name, scope, ast, what="size" if kind == "size" else "name")

    def unknown(self, name: str, scope: Scope, ast: S, what: str = "name") -> LiftError:
        candidates = scope.visible() | set(PRIMITIVES) | {n for n, s in SCALAR_OPS.items() if not s.infix}
        close = difflib.get_close_matches(name, sorted(candidates), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        if what == "size":
            return self.error(ast, f"unknown size {name!r}{hint}; sizes come from parameter types, size parameters, "
                                   f"vals, or 'param' declarations")
        return self.error(ast, f"unknown function or value {name!r}{hint}", LiftSyntaxError)

    # -------------------------------------------------------------------------------- files
    def file(self, sfile: SFile, base: Scope) -> tuple[Program, Scope]:
        scope = base.child()
        functions: list[Function] = []
        tuning: list[str] = []
        docs: list[tuple[str, str]] = []
        for item in sfile.items:
            if isinstance(item, SParamDecl):
                docs += [(n, d) for n, d in zip(item.names, item.docs) if d]
                for name in item.names:
                    if scope.lookup(name) is not None and name in scope.names:
                        raise self.error(item, f"{name} is already defined")
                    scope.names[name] = SizeB(arith.Var(name))
                    tuning.append(name)
            elif isinstance(item, SVal):
                if not self.is_size(item.value, scope):
                    raise self.error(item, "a top-level val must be a size (values live inside functions)")
                scope = self.bind_size(item.pattern, item.value, scope)
            elif isinstance(item, SDef):
                if _is_program_function(item):
                    functions.append(self.program_function(item, scope))
                scope = self.define(item, scope, top_level=True)
        names = [f.name for f in functions]
        for name in set(names):
            if names.count(name) > 1:
                raise LiftSyntaxError(f"function {name} is defined twice", next(f.span for f in functions if f.name == name))
        return Program(tuple(functions), tuple(tuning), sfile.filename, tuple(docs)), scope


# ------------------------------------------------------------------------------------------------ helpers
def _flatten_call(ast: SCall) -> tuple[S, tuple[S, ...]]:
    """``f(a)(b, c)`` -> ``(f, (a, b, c))``."""
    args: list[tuple[S, ...]] = []
    while isinstance(ast, SCall):
        args.append(ast.args)
        ast = ast.fun
    flat: tuple[S, ...] = ()
    for group in reversed(args):
        flat += group
    return ast, flat


def _arity(p: Pattern) -> int:
    return len(p.elems) if isinstance(p, PTuple) else 1


def _pattern_text(p: S) -> str:
    if isinstance(p, SPVar):
        return p.name
    return "(" + ", ".join(_pattern_text(e) for e in p.elems) + ")"


def _canonical_indexfun(name: str) -> str:
    return "stride" if name == "stridedIndex" else name


def _is_size_type(t: S | None) -> bool:
    """``int`` or a tuple of ``int``: in a program function, a size known at compile time."""
    if isinstance(t, TName):
        return t.name == "int"
    if isinstance(t, TTuple):
        return all(_is_size_type(e) for e in t.elems)
    return False


def _has_array(t: S | None) -> bool:
    if isinstance(t, TArray):
        return True
    if isinstance(t, TTuple):
        return any(_has_array(e) for e in t.elems)
    return False


def _is_user_function(sdef: SDef) -> bool:
    """Every parameter typed, none an array: a scalar function, compiled to an OpenCL function."""
    return bool(sdef.params) and all(t is not None and not _has_array(t) for _, t in sdef.params)


def _is_program_function(sdef: SDef) -> bool:
    """A top-level def with every parameter typed and at least one array parameter."""
    return all(t is not None for _, t in sdef.params) and any(_has_array(t) for _, t in sdef.params)


def _globals_only(scope: Scope) -> Scope:
    """User functions see macros, user functions and global sizes, not the values of where they are defined."""
    chain = []
    s: Scope | None = scope
    while s is not None:
        chain.append(s)
        s = s.parent
    out = Scope()
    for s in reversed(chain):
        out = out.child({k: v for k, v in s.names.items() if not isinstance(v, (DataB, ThunkB))})
    return out


# ------------------------------------------------------------------------------------------------ entry points
PRELUDE_FILE = "prelude.lift"


@lru_cache(maxsize=1)
def _prelude_syntax() -> SFile:
    return parse_file_syntax(package_text(PRELUDE_FILE), PRELUDE_FILE)


def prelude_scope(elaborator: Elaborator) -> Scope:
    program, scope = elaborator.file(_prelude_syntax(), Scope())
    return scope


def elaborate(sfile: SFile) -> Program:
    """Surface tree -> core IR program (macros expanded, names resolved, sizes symbolic)."""
    elaborator = Elaborator(frozenset(re.findall(r"\w+", sfile.source)))
    base = prelude_scope(elaborator)
    program, _ = elaborator.file(sfile, base)
    return program
