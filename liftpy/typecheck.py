"""The type checker: infers the type of every node, with symbolic array lengths.

``typecheck(program)`` returns a :class:`TypedProgram` whose nodes carry their types (``node.type``) and
which lists the size constraints the program needs (``split`` divisibility and the like). With concrete
``sizes`` every constraint is decided at once, and a violated one is an error at the primitive that needs it.
Each primitive's own rule lives in :mod:`liftpy.primitives`; this module holds the machinery they share.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Mapping

from . import arith
from .arith import Expr
from .constraints import Constraint
from .errors import LiftTypeError, SizeError
from .ir import (
    Apply,
    Function,
    Lambda,
    Let,
    Literal,
    Node,
    Pattern,
    Prim,
    Program,
    PVar,
    ScalarOp,
    Tuple,
    UserFun,
    Var,
)
from .primitives import PRIMITIVES, infer_scalar_op
from .types import SCALARS, ArrayType, FunType, TupleType, Type, VectorType

Env = Mapping[str, Type]


@dataclass(frozen=True)
class TypedProgram:
    """A program whose every node carries its type, with what type checking found out."""

    program: Program
    function_types: dict[str, FunType]
    constraints: tuple[Constraint, ...]
    #: per function, the names its declared result left for inference (``outWidth``) and their values
    result_bindings: dict[str, dict[str, Expr]]

    @property
    def main_type(self) -> FunType:
        return self.function_types[self.program.main.name]

    def function(self, name: str | None = None) -> Function:
        return self.program.function(name)


class Checker:
    """Type rules' shared toolbox: checking sub-expressions, demanding arrays, recording size constraints."""

    def __init__(self):
        self.constraints: list[Constraint] = []

    # -------------------------------------------------------------------------------- traversal
    def check(self, node: Node, env: Env) -> Node:
        """``node`` with its type (and its sub-expressions' types) filled in."""
        if isinstance(node, Var):
            t = env.get(node.name)
            if t is None:
                self.fail(node, f"unknown variable {node.name!r}")
            if isinstance(t, FunType):
                self.fail(node, f"{node.name} is a function; call it or pass it to a primitive")
            return dataclasses.replace(node, type=t)
        if isinstance(node, Literal):
            return dataclasses.replace(node, type=SCALARS[node.scalar])
        if isinstance(node, Tuple):
            elems = tuple(self.check(e, env) for e in node.elems)
            return dataclasses.replace(node, elems=elems, type=TupleType(tuple(e.type for e in elems)))
        if isinstance(node, Prim):
            return PRIMITIVES[node.name].infer(self, node, env)
        if isinstance(node, ScalarOp):
            return infer_scalar_op(self, node, env)
        if isinstance(node, Let):
            value = self.check(node.value, env)
            if node.declared is not None:
                self.same_type(
                    value.type,
                    node.declared,
                    node,
                    lambda: f"declared type {node.declared} does not match the value's type {value.type}",
                )
            body = self.check(node.body, self.bind(node.pattern, value.type, env, node))
            return dataclasses.replace(node, value=value, body=body, type=body.type)
        if isinstance(node, Apply):
            arg = self.check(node.arg, env)
            fun = self.fun(node.fun, arg.type, env, node)
            return dataclasses.replace(node, fun=fun, arg=arg, type=fun.type.result)
        if isinstance(node, (Lambda, UserFun)):
            self.fail(node, "a function where a value was expected")
        raise TypeError(f"unknown node {node!r}")  # pragma: no cover - a bug, not a user error

    def fun(self, fun: Node, arg_type: Type, env: Env, at: Node) -> Node:
        """Check a function argument applied to a value of ``arg_type``; its ``.type`` is a FunType."""
        if isinstance(fun, Lambda):
            body = self.check(fun.body, self.bind(fun.param, arg_type, env, fun))
            return dataclasses.replace(fun, body=body, type=FunType(arg_type, body.type))
        if isinstance(fun, UserFun):
            self.same_type(
                arg_type,
                fun.param_type,
                at,
                lambda: f"{fun.name} expects {fun.param_type}, got {arg_type}",
            )
            return dataclasses.replace(fun, type=FunType(arg_type, fun.result_type))
        self.fail(at, f"expected a function, got {_describe(fun)}")

    def bind(self, pattern: Pattern, t: Type, env: Env, at: Node) -> Env:
        """Extend the environment with a pattern matched against a value of type ``t``."""
        out = dict(env)

        def go(p: Pattern, t: Type):
            if isinstance(p, PVar):
                out[p.name] = t
                return
            if not isinstance(t, TupleType) or len(t.elems) != len(p.elems):
                self.fail(at, f"the pattern {_pattern_text(p)} expects a tuple of {len(p.elems)}, got {t}")
            for sub, sub_t in zip(p.elems, t.elems):
                go(sub, sub_t)

        go(pattern, t)
        return out

    def done(self, node: Node, args: tuple[Node, ...], t: Type) -> Node:
        return dataclasses.replace(node, args=tuple(args), type=t)

    # -------------------------------------------------------------------------------- demands
    def fail(self, node: Node, message: str):
        raise LiftTypeError(message, getattr(node, "span", None))

    def array(self, t: Type, node: Node, what: str, nested: bool = False) -> ArrayType:
        """``t`` as an array type, or an error saying that ``what`` needs one."""
        if not isinstance(t, ArrayType):
            if nested:
                self.fail(node, f"{what} expects an array of arrays, got an array of {t}")
            self.fail(node, f"{what} expects an array, got {t}")
        return t

    def require(self, c: Constraint, node: Node, message: Callable[[], str] | None = None):
        """Decide a constraint now if the sizes allow; otherwise record it for the parameter space."""
        verdict = c.decide()
        if verdict is True:
            return
        if verdict is False:
            text = message() if message else c.reason
            raise (SizeError if c.kind == "divides" else LiftTypeError)(text, getattr(node, "span", None))
        self.constraints.append(c)

    def equal_sizes(self, a: Expr, b: Expr, node: Node, reason: str, message: Callable[[], str] | None = None):
        self.require(Constraint("equal", a, b, reason, node.span, _origin(node)), node, message)

    def divides(self, d: Expr, n: Expr, node: Node, reason: str):
        self.require(Constraint("divides", d, n, reason, node.span, _origin(node)), node)

    def at_least(self, a: Expr, b: Expr, node: Node, reason: str):
        self.require(Constraint("at_least", a, b, reason, node.span, _origin(node)), node)

    def positive(self, a: Expr, node: Node, what: str):
        self.require(Constraint("at_least", a, 1, f"{what} must be at least 1, got {a}", node.span, _origin(node)), node)

    def same_type(self, a: Type, b: Type, node: Node, message: Callable[[], str]):
        """Demand that two types agree, sizes compared symbolically (equal, or recorded as a constraint)."""
        pairs: list[tuple[Expr, Expr]] = []

        def go(x: Type, y: Type) -> bool:
            if isinstance(x, ArrayType) and isinstance(y, ArrayType):
                pairs.append((x.size, y.size))
                return go(x.elem, y.elem)
            if isinstance(x, VectorType) and isinstance(y, VectorType):
                pairs.append((x.width, y.width))
                return x.scalar == y.scalar
            if isinstance(x, TupleType) and isinstance(y, TupleType):
                return len(x.elems) == len(y.elems) and all(go(p, q) for p, q in zip(x.elems, y.elems))
            return x == y

        if not go(a, b):
            self.fail(node, message())
        for p, q in pairs:
            self.equal_sizes(p, q, node, message(), message)


def _origin(node: Node) -> str:
    return getattr(node, "name", None) or getattr(node, "op", None) or type(node).__name__


def _describe(node: Node) -> str:
    if isinstance(node, Var):
        return f"the value {node.name}"
    return f"a {type(node).__name__.lower()}"


def _pattern_text(p: Pattern) -> str:
    if isinstance(p, PVar):
        return p.name
    return "(" + ", ".join(_pattern_text(e) for e in p.elems) + ")"


# ------------------------------------------------------------------------------------------------ programs
def check_user_fun(fun: UserFun) -> UserFun:
    """Check a user function's body against its declared types (once, where it is defined)."""
    checker = Checker()
    env = checker.bind(fun.param, fun.param_type, {}, fun)
    body = checker.check(fun.body, env)
    checker.same_type(
        body.type, fun.result_type, fun, lambda: f"{fun.name} is declared to return {fun.result_type}, its body gives {body.type}"
    )
    return dataclasses.replace(fun, body=body)


def check_function(fun: Function, checker: Checker) -> tuple[Function, FunType, dict[str, Expr]]:
    env = {p.name: p.type for p in fun.data_params}
    body = checker.check(fun.body, env)
    bindings: dict[str, Expr] = {}
    result = body.type
    if fun.result is not None:
        declared = _bind_result_names(fun.result, body.type, set(fun.inferred_names), bindings)
        checker.same_type(
            body.type,
            declared,
            fun.body,
            lambda: f"{fun.name} is declared to return {fun.result}, its body gives {body.type}",
        )
        result = declared
    params = tuple(p.type for p in fun.data_params)
    param_type = params[0] if len(params) == 1 else TupleType(params)
    return dataclasses.replace(fun, body=body), FunType(param_type, result), bindings


def _bind_result_names(declared: Type, inferred: Type, names: set[str], out: dict[str, Expr]) -> Type:
    """Bind the names a declared result type introduces (``outWidth``) to the inferred sizes."""
    if not names:
        return declared

    def go(d: Type, i: Type):
        if isinstance(d, ArrayType) and isinstance(i, ArrayType):
            free = d.size.var_names() & names
            if isinstance(d.size, arith.Var) and d.size.name in names and d.size.name not in out:
                out[d.size.name] = i.size
            elif free:
                pass  # an expression over an unbound name: checked below once the names are bound
            go(d.elem, i.elem)
        elif isinstance(d, TupleType) and isinstance(i, TupleType):
            for x, y in zip(d.elems, i.elems):
                go(x, y)

    go(declared, inferred)
    return declared.subs(out)


def typecheck(program: Program, sizes: Mapping[str, object] | None = None) -> TypedProgram:
    """Infer every node's type. With ``sizes`` (name -> int, or a tuple for a tuple size parameter), the
    program is first specialised to those sizes, and every size constraint is decided."""
    written = program
    if sizes:
        program = specialize(program, sizes)
    _check_parameter_extents(program, written)
    checker = Checker()
    for assumption in program.assumptions:  # first: a broken one explains the type errors it would cause
        if assumption.decide() is False:
            raise SizeError(f"{assumption.reason}: {assumption.text} does not hold", assumption.span)
        checker.require(assumption, assumption)
    functions, types, bindings = [], {}, {}
    for fun in program.functions:
        typed, fun_type, names = check_function(fun, checker)
        functions.append(typed)
        types[fun.name] = fun_type
        bindings[fun.name] = names
    typed_program = dataclasses.replace(program, functions=tuple(functions))
    unique = tuple(dict.fromkeys(checker.constraints))
    return TypedProgram(typed_program, types, unique, bindings)


def _check_parameter_extents(program: Program, written: Program) -> None:
    """Refuse a parameter whose array length is a negative constant, or whose vector width is below 1, as
    written (``[float]_(0-1)``) or once the sizes are given (``n=-3``). Only parameters: inside a program a
    negative amount is meaningful (``pad`` crops with it), but no input has a negative length."""
    for fun, before in zip(program.functions, written.functions):
        for param, declared in zip(fun.params, before.params):
            problem = None if param.is_size else _bad_extent(param.type)
            if problem is None:
                continue
            what, rule = problem
            where = "" if param.type == declared.type else f" with these sizes ({param.type})"
            raise SizeError(f"parameter {param.name} : {declared.type} has {what}{where}; {rule}", param.span)


def _bad_extent(t: Type) -> tuple[str, str] | None:
    """What is wrong with the constant extents of a parameter's type and the rule it breaks, or None."""
    if isinstance(t, ArrayType):
        length = t.size.as_int()
        if length is not None and length < 0:
            return f"an array length of {length}", "a length cannot be negative"
        return _bad_extent(t.elem)
    if isinstance(t, VectorType):
        width = t.width.as_int()
        if width is not None and width < 1:
            return f"a vector width of {width}", "a width must be at least 1"
    if isinstance(t, TupleType):
        return next((p for p in map(_bad_extent, t.elems) if p is not None), None)
    return None


def size_bindings(program: Program, sizes: Mapping[str, object]) -> dict[str, int]:
    """Expand a user's size values: tuple size parameters (``padSize=(1, 1, 1, 1)``) become ``padSize._1``..."""
    out: dict[str, int] = {}
    tuple_params = {p.name: p for f in program.functions for p in f.size_params if isinstance(p.type, TupleType)}
    for name, value in sizes.items():
        if name in tuple_params:
            arity = len(tuple_params[name].type.elems)
            values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * arity
            if len(values) != arity:
                raise SizeError(f"size {name} takes {arity} values, got {len(values)}")
            for i, v in enumerate(values, 1):
                out[f"{name}._{i}"] = _as_int(f"{name}._{i}", v)
        else:
            out[name] = _as_int(name, value)
    return out


def _as_int(name: str, value: object) -> int:
    try:
        if isinstance(value, bool) or int(value) != value:
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise SizeError(f"size {name} must be an integer, got {value!r}") from None


def specialize(program: Program, sizes: Mapping[str, object]) -> Program:
    """The program with concrete values substituted for size variables (array lengths, tuning parameters)."""
    from .ir import map_sizes

    bindings = size_bindings(program, sizes)
    mapping = {name: arith.Const(v) for name, v in bindings.items()}
    functions = []
    for fun in program.functions:
        params = tuple(dataclasses.replace(p, type=p.type.subs(mapping)) for p in fun.params)
        result = fun.result.subs(mapping) if fun.result is not None else None
        body = map_sizes(fun.body, lambda e: e.subs(mapping))
        functions.append(dataclasses.replace(fun, params=params, result=result, body=body))
    tuning = tuple(t for t in program.tuning_params if t not in bindings)
    assumptions = tuple(a.subs(mapping) for a in program.assumptions)
    return dataclasses.replace(program, functions=tuple(functions), tuning_params=tuning, assumptions=assumptions)
