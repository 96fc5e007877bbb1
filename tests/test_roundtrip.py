"""The printer round-trips, parse(pretty(p)) == p (equality up to renaming): every program kept in the repository,
and random programs (a property)."""

import pytest
from hypothesis import given, strategies as st

import liftpy
from liftpy import arith
from liftpy.ir import (
    Apply,
    Function,
    IndexFun,
    Lambda,
    Let,
    Literal,
    Param,
    Prim,
    Program,
    PTuple,
    PVar,
    ScalarOp,
    Tuple,
    Var,
)
from liftpy.primitives import PRIMITIVES, SCALAR_OPS
from liftpy.types import FLOAT, INT, ArrayType, TupleType, VectorType

from .lift_files import LIFT_FILES, short_name


@pytest.mark.parametrize("path", LIFT_FILES, ids=short_name)
def test_printer_round_trips_every_program_in_the_repository(path):
    program = liftpy.load(path)
    text = liftpy.pretty(program)
    assert liftpy.parse(text, filename=f"pretty({short_name(path)})") == program, text
    # printing is stable: the reprinted program prints the same text
    assert liftpy.pretty(liftpy.parse(text)) == text

USER_FUN = liftpy.parse(
    "def addf(a: float, b: float): float = a + b\ndef f(xs: [float]_n) = map(x -> addf(x, x), xs)"
).main.body.args[0].body.fun

SIZE_VARS = [arith.Var("n"), arith.Var("m"), arith.Var("tile")]
NAMES = ["a", "b", "c", "acc", "row", "x1", "θ_x"]


def sizes():
    leaf = st.one_of(st.integers(-3, 12).map(arith.Const), st.sampled_from(SIZE_VARS))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: p[0] + p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] - p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] * p[1]),
            st.tuples(inner, st.integers(1, 5)).map(lambda p: p[0] // p[1]),
            st.tuples(inner, st.sampled_from(SIZE_VARS)).map(lambda p: p[0] % p[1]),
        ),
        max_leaves=4,
    )


def types():
    leaf = st.sampled_from([FLOAT, INT, VectorType(FLOAT, arith.Const(4))])
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, sizes()).map(lambda p: ArrayType(*p)),
            st.lists(inner, min_size=2, max_size=3).map(lambda ts: TupleType(tuple(ts))),
        ),
        max_leaves=3,
    )


def literals():
    return st.one_of(
        st.integers(-5, 100).map(lambda v: Literal(v, "int")),
        st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).map(lambda v: Literal(v, "float")),
        st.booleans().map(lambda v: Literal(v, "bool")),
    )


def patterns():
    tree = st.recursive(
        st.sampled_from(NAMES).map(PVar),
        lambda inner: st.lists(inner, min_size=2, max_size=3).map(lambda ps: PTuple(tuple(ps))),
        max_leaves=3,
    )
    return tree.filter(lambda p: len(list(p.names())) == len(set(p.names())))  # (a, a) is an error


@st.composite
def functions(draw, scope, depth):
    pattern = draw(patterns())
    return Lambda(pattern, draw(exprs(scope + list(pattern.names()), depth - 1)))


@st.composite
def prims(draw, scope, depth):
    prim = PRIMITIVES[draw(st.sampled_from(sorted(PRIMITIVES)))]
    if prim.variadic:
        args = tuple(draw(st.lists(exprs(scope, depth - 1), min_size=2, max_size=3)))
        return Prim(prim.name, (), args)
    params, args = [], []
    for slot in prim.slots:
        if slot.kind == "size":
            params.append(draw(sizes()))
        elif slot.kind == "dim":
            params.append(draw(st.integers(0, 2)))
        elif slot.kind == "indexfun":
            params.append(draw(st.one_of(st.just(IndexFun("reverse")), sizes().map(lambda s: IndexFun("stride", (s,))))))
        elif slot.kind == "type":
            params.append(draw(types()))
        elif slot.kind == "fun":
            args.append(draw(functions(scope, depth)))
        elif prim.name == "Value":
            args.append(draw(literals()))
        else:
            args.append(draw(exprs(scope, depth - 1)))
    if prim.name == "get" and isinstance(args[0], (Literal, Tuple)):
        args[0] = Var(draw(st.sampled_from(scope)))  # (1, 2)._1 would read as a size
    return Prim(prim.name, tuple(params), tuple(args))


@st.composite
def exprs(draw, scope, depth):
    leaves = st.one_of(st.sampled_from(scope).map(Var), literals())
    if depth <= 0:
        return draw(leaves)
    ops = [name for name, spec in SCALAR_OPS.items()]
    choice = draw(st.integers(0, 9))
    if choice <= 1:
        return draw(leaves)
    if choice == 2:
        return Tuple(tuple(draw(st.lists(exprs(scope, depth - 1), min_size=2, max_size=3))))
    if choice == 3:
        op = draw(st.sampled_from(ops))
        args = tuple(draw(exprs(scope, depth - 1)) for _ in range(SCALAR_OPS[op].arity))
        if op == "neg" and isinstance(args[0], Literal):
            args = (Var(draw(st.sampled_from(scope))),)  # -literal is read as a negative literal
        return ScalarOp(op, args)
    if choice == 4:
        pattern = draw(patterns())
        value = draw(exprs(scope, depth - 1))
        if isinstance(value, Literal) and value.scalar == "int" or isinstance(value, Tuple):
            value = Var(draw(st.sampled_from(scope)))  # `val a = 3` binds a size, not a value
        declared = draw(st.one_of(st.none(), types()))
        return Let(pattern, value, draw(exprs(scope + list(pattern.names()), depth - 1)), declared=declared)
    if choice == 5:
        return Apply(USER_FUN, Tuple((draw(exprs(scope, depth - 1)), draw(exprs(scope, depth - 1)))))
    return draw(prims(scope, depth))


@st.composite
def programs(draw):
    params = (
        Param("xs", ArrayType(FLOAT, arith.Var("n"))),
        Param("ys", ArrayType(ArrayType(INT, arith.Var("m")), arith.Var("n"))),
        Param("s", FLOAT),
    )
    body = draw(exprs(["xs", "ys", "s"], 4))
    result = draw(st.one_of(st.none(), types()))
    return Program((Function("f", params, result, body),), ("tile",))


@given(programs())
def test_printer_round_trips_random_programs(program):
    text = liftpy.pretty(program)
    parsed = liftpy.parse(text)
    assert parsed == program, text
    # once parsed (binders made unique), printing is a fixed point
    again = liftpy.pretty(parsed)
    assert liftpy.pretty(liftpy.parse(again)) == again
