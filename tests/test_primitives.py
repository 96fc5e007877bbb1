"""Property: every primitive's interpreter result has the shape its type promises, on random sizes."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import liftpy
from liftpy.primitives import PRIMITIVES
from liftpy.types import ArrayType, TupleType, VectorType


def expected_shapes(t, prefix=()):
    """The numpy shape(s) a value of concrete type t must have: array lengths, then a vector's width; an
    array of tuples is a tuple of arrays."""
    if isinstance(t, ArrayType):
        return expected_shapes(t.elem, prefix + (t.size.as_int(),))
    if isinstance(t, TupleType):
        return tuple(expected_shapes(e, prefix) for e in t.elems)
    if isinstance(t, VectorType):
        return prefix + (t.width.as_int(),)
    return prefix


def actual_shapes(value):
    if isinstance(value, tuple):
        return tuple(actual_shapes(v) for v in value)
    return value.shape


# For each primitive: a program using it on inputs xs: [[float]_m]_n (and ys of the same shape), and the sizes
# it needs. Sizes are drawn so the program is well-typed.
@st.composite
def cases(draw, name):
    k = draw(st.integers(1, 4))
    n, m = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    sizes = {}
    if name in ("map", "mapSeq", "mapSeqUnroll"):
        body = f"{name}(row -> {name}(x -> x * 2.0f, row), xs)"
    elif name in ("mapGlb", "mapWrg", "mapLcl"):
        body = f"{name}({draw(st.integers(0, 2))}, row -> mapSeq(x -> x + 1.0f, row), xs)"
    elif name in ("reduce", "reduceSeq", "reduceSeqUnroll"):
        body = f"map(row -> {name}(0.0f, (a, x) -> a + x, row), xs)"
    elif name == "zip":
        body = "zip(xs, ys, xs)" if draw(st.booleans()) else "map(r -> zip(r._1, r._2), zip(xs, ys))"
    elif name == "split":
        m = k * draw(st.integers(1, 3))
        body = f"map(row -> split({k}, row), xs)"
    elif name == "join":
        body = "join(xs)"
    elif name == "slide":
        size, step = draw(st.integers(1, m)), draw(st.integers(1, 3))
        body = f"map(row -> slide({size}, {step}, row), xs)"
    elif name in ("pad", "padSelect"):
        left, right = draw(st.integers(-(m // 2), 3)), draw(st.integers(-(m // 2), 3))
        body = f"{name}({left}, {right}, 0.0f, transpose(xs))" if draw(st.booleans()) else f"map(r -> {name}({left}, {right}, 1.5f, r), xs)"
    elif name == "padClamp":
        body = f"map(r -> padClamp({draw(st.integers(0, 3))}, {draw(st.integers(0, 3))}, r), xs)"
    elif name == "transpose":
        body = "transpose(xs)"
    elif name == "reorder":
        m = k * draw(st.integers(1, 3))
        body = f"map(r -> reorder(stride({k}), r), xs)" if draw(st.booleans()) else "reorder(reverse, xs)"
    elif name == "get":
        body = "map(p -> p._2, zip(xs, ys))"
    elif name == "id":
        body = "id(xs)"
    elif name == "Value":
        body = f"Value(0.5f, [[float4]_{k}]_m)"
    elif name in ("toGlobal", "toLocal", "toPrivate"):
        body = f"{name}(mapSeq(mapSeq(id)), xs)"
    elif name == "asVector":
        m = k * draw(st.integers(1, 3))
        body = f"map(r -> asVector({k}, r), xs)"
    elif name == "asScalar":
        m = k * draw(st.integers(1, 3))
        body = f"map(r -> asScalar(asVector({k}, r)), xs)"
    elif name == "vectorize":
        m = k * draw(st.integers(1, 3))
        body = f"map(r -> map(vectorize({k}, x -> x * x), asVector({k}, r)), xs)"
    elif name == "dot":
        m = 4 * draw(st.integers(1, 3))
        body = "map(r -> map(p -> dot(p._1, p._2), zip(asVector(4, r._1), asVector(4, r._2))), zip(xs, ys))"
    else:
        raise AssertionError(f"no case for primitive {name}: add one")
    sizes.update(n=n, m=m)
    return name, body, sizes


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
@settings(max_examples=15)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_interpreter_result_has_the_shape_of_its_type(name, data, seed):
    name, body, sizes = data.draw(cases(name))
    program = liftpy.parse(f"def f(xs: [[float]_m]_n, ys: [[float]_m]_n) = {body}")
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((sizes["n"], sizes["m"])).astype(np.float32)
    ys = rng.standard_normal((sizes["n"], sizes["m"])).astype(np.float32)
    typed = liftpy.typecheck(program, sizes)
    out = liftpy.evaluate(program, {"xs": xs, "ys": ys})
    assert actual_shapes(out) == expected_shapes(typed.main_type.result), (name, body)


@pytest.mark.parametrize("body, expected", [
    ("slide(3, 2, xs)", lambda x: np.stack([x[0:3], x[2:5], x[4:7]])),
    ("pad(2, 1, 9.0f, xs)", lambda x: np.concatenate([[9, 9], x, [9]])),
    ("pad(-2, -3, 0.0f, xs)", lambda x: x[2:-3]),
    ("join(split(2, xs))", lambda x: x),
    ("reorder(reverse, xs)", lambda x: x[::-1]),
    ("asScalar(asVector(4, xs))", lambda x: x),
    ("join(transpose(split(4, xs)))", lambda x: x.reshape(2, 4).T.reshape(-1)),
])
def test_primitive_values(body, expected):
    x = np.arange(8, dtype=np.float32)
    out = liftpy.evaluate(liftpy.parse(f"def f(xs: [float]_n) = {body}"), {"xs": x})
    np.testing.assert_array_equal(out, expected(x))


def test_the_traits_other_stages_ask_of_primitives():
    """Each family, written out here as the code generator's name lists were before the primitives carried
    their traits (issue 13): the traits must give exactly these members."""
    from liftpy.primitives import PRIMITIVES

    def having(trait):
        return {name for name, prim in PRIMITIVES.items() if trait(prim)}

    assert having(lambda p: p.is_map) == {"map", "mapSeq", "mapSeqUnroll", "mapGlb", "mapWrg", "mapLcl"}
    assert having(lambda p: p.is_reduction) == {"reduce", "reduceSeq", "reduceSeqUnroll"}
    assert {name: p.parallel for name, p in PRIMITIVES.items() if p.parallel} == \
        {"mapGlb": "global", "mapWrg": "work-group", "mapLcl": "local"}
    assert having(lambda p: p.sequential) == {"mapSeq", "mapSeqUnroll", "reduceSeq", "reduceSeqUnroll"}
    assert having(lambda p: p.unrolled) == {"mapSeqUnroll", "reduceSeqUnroll"}
    assert {name: p.space for name, p in PRIMITIVES.items() if p.space} == \
        {"toGlobal": "global", "toLocal": "local", "toPrivate": "private"}
    assert {name: p.index_queries for name, p in PRIMITIVES.items() if p.index_queries} == {
        "mapGlb": ("get_global_id", "get_global_size"), "mapWrg": ("get_group_id", "get_num_groups"),
        "mapLcl": ("get_local_id", "get_local_size")}
    assert {name: p.loop_name for name, p in PRIMITIVES.items() if p.loop_name} == {
        "mapGlb": "gid", "mapWrg": "wg", "mapLcl": "lid", "mapSeq": "i", "mapSeqUnroll": "i", "reduceSeq": "j",
        "reduceSeqUnroll": "j"}
    assert having(lambda p: p.sets_vector_width) == {"asVector", "vectorize"}
    assert having(lambda p: p.guards_reads) == {"pad", "padSelect"}
    # one notion of a view for rewriting and code generation: the layout primitives, id, Value and map
    assert having(lambda p: p.is_view) == {"zip", "split", "join", "slide", "pad", "padSelect", "padClamp", "transpose", "reorder",
                                           "get", "asVector", "asScalar", "id", "Value", "map"}
    assert having(lambda p: p.applies_function) == {"vectorize", "toGlobal", "toLocal", "toPrivate"}
    assert having(lambda p: p.identity) == {"id"}
    # the algorithmic map and reduce are what lowering must still replace
    assert having(lambda p: (p.is_map or p.is_reduction) and p.level != "opencl") == {"map", "reduce"}


@pytest.mark.parametrize("body, view", [
    ("map(x -> x, xs)", True),
    ("map(id, xs)", True),
    ("transpose(map(row -> split(2, row), xs))", True),
    ("zip(xs, xs)", True),
    ("pad(1, 1, 0.0f, xs)", True),
    ("Value(0.0f, [float]_4)", True),
    ("map(x -> x + 1.0f, xs)", False),
    ("mapSeq(id, xs)", False),
    ("toPrivate(id, xs)", False),
    ("map(x -> dot(x, x), xs)", False),
])
def test_one_definition_of_a_view_for_rewriting_and_code_generation(body, view):
    from liftpy.primitives import is_view
    from liftpy.rewrite.predicates import PREDICATES
    from liftpy.rewrite.strategies import computes

    program = liftpy.parse(f"def f(xs: [float]_n) = {body}")
    expr = program.function().body
    assert is_view(expr) is view
    assert PREDICATES["view"].fn(expr) is view  # the rewrite engine's predicate asks the same question
    assert computes(expr) is not view
