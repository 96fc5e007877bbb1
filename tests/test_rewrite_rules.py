"""Every rule of the catalogue preserves meaning: on generated programs, sizes and inputs, every application of
the rule (at every place it matches, in every way it matches) type-checks and evaluates to what the original
program evaluates to.

Programs are generated from small templates with random scalar functions (hypothesis); each example explores
all one-step applications of the rule under test (``explore(..., depth=1)``) and runs each variant with the
interpreter against the original.
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import liftpy
import liftpy.errors
from liftpy.rewrite import explore, rules

EXAMPLES = 20  # per rule; every example checks every application of the rule
COVERED: set[str] = set()


def covers(*names):
    COVERED.update(names)
    return lambda test: test


# ------------------------------------------------------------------------------------------------ generators
def scalar_fun(*variables: str, max_leaves: int = 4):
    """Text of a random scalar expression over ``variables`` (floats in, floats out, bounded values)."""
    leaf = hs.one_of(
        hs.sampled_from(variables),
        hs.integers(-20, 20).map(lambda c: f"{c / 10:.1f}f"),
    )

    def extend(e):
        return hs.one_of(
            hs.tuples(e, hs.sampled_from(["+", "-", "*"]), e).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            hs.tuples(hs.sampled_from(["max", "min"]), e, e).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        )

    return hs.recursive(leaf, extend, max_leaves=max_leaves)


def using(var: str, *others: str):
    """A random scalar expression that certainly uses ``var``."""
    return hs.tuples(scalar_fun(var, *others), scalar_fun(var, *others)).map(lambda t: f"(({var} + {t[0]}) * {t[1]})")


literal = hs.integers(-20, 20).map(lambda c: f"{c / 10:.1f}f")
seeds = hs.integers(0, 2**32 - 1)


def arrays(seed, **shapes):
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, shape).astype(np.float32) for name, shape in shapes.items()}


def check(rule, text: str, inputs: dict, sizes: dict | None = None, at_least: int = 1, rtol: float = 1e-4):
    """Every one-step application of ``rule`` to the program ``text`` means what the program means."""
    program = liftpy.parse(text)
    variants = explore(program, rules=[rule], depth=1)
    assert len(variants) >= at_least, f"{rule} should apply to:\n{text}"
    expected = liftpy.evaluate(program, inputs, sizes)
    scale = max(1.0, float(np.abs(expected).max())) if np.size(expected) else 1.0
    for v in variants:
        liftpy.typecheck(v.program)  # symbolically, as the rewrite left it
        got = liftpy.evaluate(v.program, inputs, sizes)
        assert got.shape == expected.shape, v.describe()
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale, err_msg=v.describe())
    return variants


# ------------------------------------------------------------------------------------------------ algorithmic
@covers("splitJoin")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), seeds)
def test_split_join(n, chunks, f, seed):
    check(rules.splitJoin(n), f"def p(xs: [float]_len) = map(x -> {f}, xs)", arrays(seed, xs=(n * chunks,)))


@covers("splitJoin")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), seeds)
def test_split_join_with_a_symbolic_chunk_size(n, chunks, f, seed):
    program = liftpy.parse(f"def p(xs: [float]_len) = map(x -> {f}, xs)")
    (variant,) = explore(program, rules=[rules.splitJoin()], depth=1)
    assert variant.program.tuning_params == ("n",)
    typed = liftpy.typecheck(variant.program)
    assert any(c.kind == "divides" and str(c.lhs) == "n" for c in typed.constraints)
    inputs = arrays(seed, xs=(n * chunks,))
    np.testing.assert_allclose(liftpy.evaluate(variant.program, inputs, {"n": n}), liftpy.evaluate(program, inputs))


@covers("joinSplit")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), seeds)
def test_join_split(m, k, f, seed):
    check(rules.joinSplit, f"def p(xs: [[float]_m]_k) = map(row -> map(x -> {f}, row), xs)", arrays(seed, xs=(k, m)))


@covers("joinRows")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), hs.integers(1, 3), scalar_fun("x"), seeds)
def test_join_rows(m, k, n, f, seed):
    """Each element of a row gives one sum (a reduce, over an array that may depend on the element): the rows
    joined, the sums cut back into rows. Where each gives two values the rule does not match."""
    check(rules.joinRows, f"def p(xs: [[float]_m]_k, ys: [float]_n) = "
                          f"map(row -> join(map(x -> reduce({f}, (a, y) -> a + y, map(y -> y * x, ys)), row)), xs)",
          arrays(seed, xs=(k, m), ys=(n,)))
    two = liftpy.parse("def p(xs: [[float]_m]_k, ys: [float]_2) = map(row -> join(map(x -> map(y -> x * y, ys), row)), xs)")
    assert explore(two, rules=[rules.joinRows], depth=1) == []


@covers("roundUp")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 9), hs.integers(1, 5), scalar_fun("x"), seeds)
def test_round_up(n, r, f, seed):
    """The map over the array with its last element repeated r times, the extra results cropped: what the map
    gives (the last element's own result included), and after it a block of n + r that does not divide n."""
    text = f"def p(xs: [float]_n) = map(x -> {f}, xs)"
    xs = arrays(seed, xs=(n,))
    (variant,) = check(rules.roundUp(r), text, xs)
    blocked = explore(variant.program, rules=[rules.splitJoin(n + r)], depth=1)
    assert blocked, "the rounded map splits by its rounded length"
    expected = liftpy.evaluate(liftpy.parse(text), xs)
    for v in blocked:
        np.testing.assert_array_equal(liftpy.evaluate(v.program, xs), expected)


# ------------------------------------------------------------------------------------------------ fusion
@covers("mapFusion")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 6), scalar_fun("x"), scalar_fun("y"), seeds)
def test_map_fusion(n, f, g, seed):
    check(rules.mapFusion, f"def p(xs: [float]_n) = map(x -> {f}, map(y -> {g}, xs))", arrays(seed, xs=(n,)))


@covers("mapFusion")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 5), hs.integers(1, 4), scalar_fun("x", "c"), seeds)
def test_map_fusion_of_nested_functions(n, m, f, seed):
    text = f"""def p(xs: [[float]_m]_n, ws: [float]_m) =
        map(r -> reduce(0.0f, (acc, (x, c)) -> acc + {f}, zip(r, ws)), map(row -> map(y -> y * 2.0f, row), xs))"""
    check(rules.mapFusion, text, arrays(seed, xs=(n, m), ws=(m,)))


@covers("mapFission")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 6), using("x"), hs.sampled_from(["+", "-", "*"]), literal, literal, seeds)
def test_map_fission(n, g, op, c1, c2, seed):
    # f(g(x)) with f using g's result once, so at least two cuts exist; every cut is checked
    body = f"max(({g}) {op} {c1}, {c2})"
    check(rules.mapFission, f"def p(xs: [float]_n) = map(x -> {body}, xs)", arrays(seed, xs=(n,)), at_least=2)


@covers("mapFission")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("y"), literal, seeds)
def test_map_fission_across_a_reduction(n, m, f, z, seed):
    text = f"def p(xs: [[float]_m]_n) = map(row -> reduce({z}, (acc, v) -> acc + v, map(y -> {f}, row)), xs)"
    check(rules.mapFission, text, arrays(seed, xs=(n, m)))


@covers("reduceMapFusion")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 6), scalar_fun("x"), scalar_fun("acc", "y"), literal, seeds)
def test_reduce_map_fusion(n, g, f, z, seed):
    text = f"def p(xs: [float]_n) = reduce({z}, (acc, y) -> {f}, map(x -> {g}, xs))"
    check(rules.reduceMapFusion, text, arrays(seed, xs=(n,)))


@covers("inlineLet")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 6), scalar_fun("x"), seeds)
def test_inline_let(n, f, seed):
    text = f"def p(xs: [float]_n) = {{ val a = map(x -> {f}, xs); map((u, w) -> u * w + u, zip(a, a)) }}"
    check(rules.inlineLet, text, arrays(seed, xs=(n,)))


# ------------------------------------------------------------------------------------------------ interchange
@covers("transposeBothSides")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), seeds)
def test_transpose_both_sides(n, m, f, seed):
    check(rules.transposeBothSides, f"def p(xs: [[float]_m]_n) = map(row -> map(x -> {f}, row), xs)",
          arrays(seed, xs=(n, m)))


@covers("mapMapInterchange")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), using("a", "b"), seeds)
def test_map_map_interchange(n, m, f, seed):
    text = f"def p(xs: [float]_n, ys: [float]_m) = map(a -> map(b -> {f}, ys), xs)"
    check(rules.mapMapInterchange, text, arrays(seed, xs=(n,), ys=(m,)))


@covers("mapMapInterchangeZip")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), using("r", "a", "b"), seeds)
def test_map_map_interchange_zip(n, m, f, seed):
    """The inner map also walks a row of the outer element (a residual's row beside shared windows)."""
    text = f"""def p(xs: [float]_n, rows: [[float]_m]_n, ys: [float]_m) =
        map((a, row) -> map((b, r) -> {f}, zip(ys, row)), zip(xs, rows))"""
    check(rules.mapMapInterchangeZip, text, arrays(seed, xs=(n,), rows=(n, m), ys=(m,)))


@covers("mapMapInterchangeSplitZip")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), using("r", "a", "b"), seeds)
def test_map_map_interchange_split_zip(n, chunk, chunks, f, seed):
    """The same over chunks of the zipped arrays (a blocked level's blocks), each chunk reduced."""
    m = chunk * chunks
    text = f"""def p(xs: [float]_n, rows: [[float]_{m}]_n, ys: [float]_{m}) =
        map((a, row) -> map(c -> reduce(0.0f, (acc, (b, r)) -> acc + {f}, c), split({chunk}, zip(ys, row))),
            zip(xs, rows))"""
    check(rules.mapMapInterchangeSplitZip, text, arrays(seed, xs=(n,), rows=(n, m), ys=(m,)))


@covers("mapReduceInterchange")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("acc", "x"), literal, seeds)
def test_map_reduce_interchange(n, m, f, z, seed):
    text = f"def p(xs: [[float]_m]_n) = map(row -> reduce({z}, (acc, x) -> {f}, row), xs)"
    check(rules.mapReduceInterchange, text, arrays(seed, xs=(n, m)))


@covers("blockReductions")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x", "w"), seeds)
def test_block_reductions(n, m, f, seed):
    """Reductions of computed arrays (zips with a shared row), each from its own start, walked at once."""
    text = f"""def p(xs: [[float]_m]_n, ws: [float]_m, zs: [float]_n) =
        map((row, z) -> reduce(z, (acc, (x, w)) -> acc + {f}, zip(row, ws)), zip(xs, zs))"""
    check(rules.blockReductions, text, arrays(seed, xs=(n, m), ws=(m,), zs=(n,)))


@covers("blockReductionsThen")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x", "w"), literal, seeds)
def test_block_reductions_then_a_function(n, m, f, z, seed):
    """... followed by an activation (a map over the reduction's result)."""
    text = f"""def p(xs: [[float]_m]_n, ws: [float]_m) =
        map(row -> map(s -> max(s, 0.0f), reduce({z}, (acc, (x, w)) -> acc + {f}, zip(row, ws))), xs)"""
    check(rules.blockReductionsThen, text, arrays(seed, xs=(n, m), ws=(m,)))


@covers("vectorizeBlock")
@settings(max_examples=EXAMPLES)
@given(hs.sampled_from([1, 2, 4]), hs.integers(1, 2), hs.integers(1, 3), scalar_fun("e._1", "e._2"), seeds)
def test_vectorize_block(v, vectors, n, f, seed):
    """A row of accumulators (blockReductions') kept as vectors: each step one vector update of v of them."""
    m = v * vectors
    text = f"""def p(xs: [[float]_m]_n, ws: [[float]_m]_n, z: [float]_m) =
        reduce(z, (acc, column) -> map((a, e) -> a + {f}, zip(acc, column)), map((x, w) -> zip(x, w), zip(xs, ws)))"""
    check(rules.vectorizeBlock(v), text, arrays(seed, xs=(n, m), ws=(n, m), z=(m,)))


@covers("vectorizeBlockOf")
@settings(max_examples=EXAMPLES)
@given(hs.sampled_from([1, 2, 4]), hs.integers(1, 2), hs.integers(1, 3), scalar_fun("a", "e"), seeds)
def test_vectorize_block_of_one_array(v, vectors, n, f, seed):
    """A row of accumulators whose steps read one array (a pooling's) kept as vectors."""
    m = v * vectors
    text = f"""def p(xs: [[float]_m]_n, z: [float]_m) =
        reduce(z, (acc, column) -> map((a, e) -> max(a, {f}), zip(acc, column)), xs)"""
    check(rules.vectorizeBlockOf(v), text, arrays(seed, xs=(n, m), z=(m,)))


def _check_2d_block(rule, f, k, m, n, seed):
    """``rule`` on a 2D register block (k x m accumulators updated by f at each of n steps)."""
    text = f"""def p(xs: [[[float]_m]_k]_n, ws: [[[float]_m]_k]_n, z: [[float]_m]_k) =
        reduce(z, (acc, column) -> map((r, c) -> map((a, e) -> a + {f}, zip(r, c)), zip(acc, column)),
               map((x, w) -> map((xr, wr) -> zip(xr, wr), zip(x, w)), zip(xs, ws)))"""
    check(rule, text, arrays(seed, xs=(n, k, m), ws=(n, k, m), z=(k, m)))


@covers("vectorizeInnerBlock")
@settings(max_examples=EXAMPLES)
@given(hs.sampled_from([1, 2, 4]), hs.integers(1, 2), hs.integers(1, 3), hs.integers(1, 3),
       scalar_fun("e._1", "e._2"), seeds)
def test_vectorize_inner_block(v, vectors, k, n, f, seed):
    """A 2D block's rows of accumulators kept as vectors."""
    _check_2d_block(rules.vectorizeInnerBlock(v), f, k, v * vectors, n, seed)


@covers("vectorizeOuterBlock")
@settings(max_examples=EXAMPLES)
@given(hs.sampled_from([1, 2, 4]), hs.integers(1, 2), hs.integers(1, 3), hs.integers(1, 3),
       scalar_fun("e._1", "e._2"), seeds)
def test_vectorize_outer_block(v, vectors, m, n, f, seed):
    """A 2D block's columns of accumulators (along its outer level) kept as vectors."""
    _check_2d_block(rules.vectorizeOuterBlock(v), f, v * vectors, m, n, seed)


def test_vectorize_block_needs_a_lanewise_update():
    program = liftpy.parse("""def p(xs: [[float]_4]_3, ws: [[float]_4]_3, z: [float]_4) =
        reduce(z, (acc, column) -> map((a, e) -> a + dot(e._1, e._2), zip(acc, column)),
               map((x, w) -> zip(x, w), zip(xs, ws)))""")
    result = liftpy.rewrite.topDown(rules.vectorizeBlock(2))(program)
    assert not result and "lanewise" in result.reason


@covers("privateVectorRow")
@settings(max_examples=EXAMPLES)
@given(hs.sampled_from([1, 2, 4]), hs.integers(1, 2), hs.integers(1, 4), seeds)
def test_private_vector_row(v, vectors, m, seed):
    n = v * vectors
    text = f"""def p(xs: [[float]_n]_m, z: [float]_n) =
        map(r -> asScalar(r), reduceSeq(asVector({v}, z), (acc, row) -> mapSeq((a, x) -> a + x * x, zip(acc, row)),
                                        map(r -> asVector({v}, r), xs)))"""
    check(rules.privateVectorRow, text, arrays(seed, xs=(m, n), z=(n,)))


@covers("privateAccumulatorRow")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), seeds)
def test_private_accumulator_row(n, m, seed):
    text = """def p(xs: [[float]_n]_m, z: [float]_n) =
        reduceSeq(z, (acc, row) -> mapSeq((a, x) -> a + x * x, zip(acc, row)), xs)"""
    check(rules.privateAccumulatorRow, text, arrays(seed, xs=(m, n), z=(n,)))


# ------------------------------------------------------------------------------------------------ reduction
@covers("reorderSum")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x", "y"), literal, seeds)
def test_reorder_sum(n, m, f, z, seed):
    text = f"""def p(xs: [[float]_m]_n, ys: [[float]_m]_n) =
        reduce({z}, (acc, (x, y)) -> acc + {f}, zip(join(xs), join(ys)))"""
    check(rules.reorderSum, text, arrays(seed, xs=(n, m), ys=(n, m)))


def test_reorder_sum_needs_arrays_of_one_shape():
    """Two arrays of as many elements but other shapes would pair other elements once walked by columns."""
    program = liftpy.parse("""def p(xs: [[float]_2]_3, ys: [[float]_3]_2) =
        reduce(0.0f, (acc, (x, y)) -> acc + x * y, zip(join(xs), join(ys)))""")
    assert not liftpy.rewrite.topDown(rules.reorderSum)(program)


@covers("partialReduce")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), literal, seeds)
def test_partial_reduce(n, chunks, f, z, seed):
    text = f"def p(xs: [float]_len) = reduce({z}, (acc, x) -> acc + {f}, xs)"
    check(rules.partialReduce(n), text, arrays(seed, xs=(n * chunks,)))


@covers("partialReduce")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), seeds)
def test_partial_reduce_of_a_dot_product(n, chunks, seed):
    text = "def p(xs: [float]_len, ws: [float]_len) = reduce(0.5f, (acc, (x, w)) -> acc + x * w, zip(xs, ws))"
    check(rules.partialReduce(n), text, arrays(seed, xs=(n * chunks,), ws=(n * chunks,)))


@covers("partialSums")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x", "w"), literal, seeds)
def test_partial_sums(w, steps, f, z, seed):
    text = f"def p(xs: [float]_len, ws: [float]_len) = reduce({z}, (acc, (x, w)) -> acc + {f}, zip(xs, ws))"
    check(rules.partialSums(w), text, arrays(seed, xs=(w * steps,), ws=(w * steps,)))


def test_partial_sums_need_a_sum_and_a_width_that_divides():
    """A product of the elements cannot be split into sums, nor a length of 6 into 4 sums."""
    product = liftpy.parse("def p(xs: [float]_6) = reduce(1.0f, (acc, x) -> acc * x, xs)")
    assert not liftpy.rewrite.topDown(rules.partialSums(2))(product)
    total = liftpy.parse("def p(xs: [float]_6) = reduce(0.0f, (acc, x) -> acc + x, xs)")
    assert not liftpy.rewrite.topDown(rules.partialSums(4))(total)
    assert liftpy.rewrite.topDown(rules.partialSums(3))(total)


@covers("partialReduceSplitJoin")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), scalar_fun("acc", "x"), seeds)
def test_partial_reduce_split_join(m, per_block, blocks, f, seed):
    n = m * per_block
    text = f"def p(xs: [float]_len) = join(map(c -> reduce(0.0f, (acc, x) -> {f}, c), split({m}, xs)))"
    check(rules.partialReduceSplitJoin(n), text, arrays(seed, xs=(n * blocks,)))


# ------------------------------------------------------------------------------------------------ simplification
@covers("removeJoinSplit")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), seeds)
def test_remove_join_split(m, k, f, seed):
    check(rules.removeJoinSplit, f"def p(xs: [float]_len) = map(x -> {f}, join(split({m}, xs)))",
          arrays(seed, xs=(m * k,)))


@covers("removeSplitJoin")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), seeds)
def test_remove_split_join(m, k, f, seed):
    text = f"def p(xs: [[float]_{m}]_k) = map(r -> map(x -> {f}, r), split({m}, join(xs)))"
    check(rules.removeSplitJoin, text, arrays(seed, xs=(k, m)))


@covers("removeAsScalarAsVector", "removeAsVectorAsScalar")
@settings(max_examples=EXAMPLES)
@given(hs.sampled_from([2, 4, 8]), hs.integers(1, 3), scalar_fun("x"), seeds)
def test_remove_vector_casts(v, k, f, seed):
    text = f"def p(xs: [float]_len) = map(x -> {f}, asScalar(map(y -> y * 2.0f, asVector({v}, asScalar(asVector({v}, xs))))))"
    inputs = arrays(seed, xs=(v * k,))
    check(rules.removeAsScalarAsVector, text, inputs)
    check(rules.removeAsVectorAsScalar, text, inputs)


@covers("removeTransposeTranspose")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), seeds)
def test_remove_transpose_transpose(n, m, f, seed):
    text = f"def p(xs: [[float]_m]_n) = map(r -> map(x -> {f}, r), transpose(transpose(xs)))"
    check(rules.removeTransposeTranspose, text, arrays(seed, xs=(n, m)))


@covers("removeMapId", "removeMapCopy")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 6), scalar_fun("x"), seeds)
def test_remove_map_id(n, f, seed):
    inputs = arrays(seed, xs=(n,))
    check(rules.removeMapId, f"def p(xs: [float]_n) = map(x -> {f}, map(y -> y, xs))", inputs)
    check(rules.removeMapCopy, f"def p(xs: [float]_n) = map(x -> {f}, map(id, xs))", inputs)


# ------------------------------------------------------------------------------------------------ tiling
@covers("slideTiling")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), scalar_fun("x"), seeds)
def test_slide_tiling(size, step, windows_per_tile, tiles, f, seed):
    u = step * windows_per_tile
    length = tiles * u + size - step
    if length < size:
        return  # no window at all: nothing to tile
    text = f"def p(xs: [float]_len) = map(w -> reduce(0.0f, (acc, x) -> acc + {f}, w), slide({size}, {step}, xs))"
    check(rules.slideTiling(u), text, arrays(seed, xs=(length,)))


def stencil_case(draw_sizes):
    (n1, n2), (s1, s2), (q1, q2), (t1, t2) = draw_sizes
    tile = (s1 * q1 + n1 - s1, s2 * q2 + n2 - s2)
    shape = (t1 * s1 * q1 + n1 - s1, t2 * s2 * q2 + n2 - s2)
    return tile, shape


pair = lambda lo, hi: hs.tuples(hs.integers(lo, hi), hs.integers(lo, hi))
stencil_sizes = hs.tuples(pair(1, 3), pair(1, 2), pair(1, 2), pair(1, 2))


@covers("tile2D", "tileMap2D")
@settings(max_examples=EXAMPLES)
@given(stencil_sizes, scalar_fun("x"), seeds)
def test_tile_2d(sizes, f, seed):
    """Both 2D tilings of a stencil, on the same program: tile2D and tileMap2D."""
    (n1, n2), (s1, s2) = sizes[0], sizes[1]
    tile, shape = stencil_case(sizes)
    text = f"""def p(xs: [[float]_w]_h) =
        map2D(win -> reduce(0.0f, (acc, x) -> acc + {f}, join(win)), slide2D(({n1}, {n2}), ({s1}, {s2}), xs))"""
    for rule in (rules.tile2D, rules.tileMap2D):
        check(rule(*tile), text, arrays(seed, xs=shape))


# ------------------------------------------------------------------------------------------------ vectorisation
@covers("vectorize")
@settings(max_examples=EXAMPLES)
@given(hs.sampled_from([2, 4, 8]), hs.integers(1, 3), using("x"), seeds)
def test_vectorize(v, k, f, seed):
    check(rules.vectorize(v), f"def p(xs: [float]_len) = map(x -> {f}, xs)", arrays(seed, xs=(v * k,)))


def test_vectorize_rejects_a_function_that_is_not_lane_wise():
    # x -> 0.0f on a vector gives a scalar: the vectorised map would not have the original type
    program = liftpy.parse("def p(xs: [float]_8) = map(x -> 0.0f, xs)")
    result = liftpy.rewrite.topDown(rules.vectorize(4))(program)
    assert not result and "ill-typed" in result.reason


@covers("dotBuiltin", "dotBuiltinSeq")
@settings(max_examples=EXAMPLES)
@given(hs.sampled_from([2, 4, 8]), hs.integers(1, 3), literal, hs.sampled_from(["reduce", "reduceSeq"]), seeds)
def test_dot_builtin(v, k, z, reduction, seed):
    text = f"def p(xs: [float]_len, ys: [float]_len) = {reduction}({z}, (acc, (a, b)) -> acc + a * b, zip(xs, ys))"
    rule = rules.dotBuiltin(v) if reduction == "reduce" else rules.dotBuiltinSeq(v)
    check(rule, text, arrays(seed, xs=(v * k,), ys=(v * k,)))


# ------------------------------------------------------------------------------------------------ lowering
@covers("mapGlb", "mapWrg", "mapLcl", "mapSeq")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), hs.integers(0, 2), seeds)
def test_map_lowering(n, m, f, d, seed):
    text = f"def p(xs: [[float]_m]_n) = map(row -> map(x -> {f}, row), xs)"
    inputs = arrays(seed, xs=(n, m))
    for rule in (rules.mapGlb(d), rules.mapWrg(d), rules.mapLcl(d), rules.mapSeq):
        assert len(check(rule, text, inputs)) == 2  # the outer and the inner map


@covers("reduceSeq", "mapSeqUnroll", "reduceSeqUnroll")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("acc", "x"), literal, seeds)
def test_sequential_lowering_and_unrolling(n, m, f, z, seed):
    inputs = arrays(seed, xs=(n, m))
    check(rules.reduceSeq, f"def p(xs: [[float]_m]_n) = map(row -> reduce({z}, (acc, x) -> {f}, row), xs)", inputs)
    check(rules.mapSeqUnroll, f"def p(xs: [[float]_m]_n) = mapSeq(row -> reduceSeq({z}, (acc, x) -> {f}, row), xs)",
          inputs)
    check(rules.reduceSeqUnroll, f"def p(xs: [[float]_m]_n) = mapSeq(row -> reduceSeq({z}, (acc, x) -> {f}, row), xs)",
          inputs)


# ------------------------------------------------------------------------------------------------ memory
@covers("privateAccumulator", "globalMemory", "privateMemory", "localMemory")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("acc", "x"), literal, seeds)
def test_memory_placement(n, m, f, z, seed):
    inputs = arrays(seed, xs=(n, m))
    text = f"def p(xs: [[float]_m]_n) = mapSeq(row -> reduceSeq({z}, (acc, x) -> {f}, row), xs)"
    check(rules.privateAccumulator, text, inputs)
    check(rules.globalMemory, text, inputs)
    check(rules.privateMemory, text, inputs)
    text = f"def p(xs: [[float]_m]_n) = mapWrg(0, row -> mapLcl(0, x -> {f.replace('acc', 'x')}, row), xs)"
    check(rules.localMemory, text, inputs)


@covers("reorderStride")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), literal, seeds)
def test_reorder_stride(s, k, f, z, seed):
    text = f"def p(xs: [float]_len) = reduce({z}, (acc, x) -> acc + {f}, xs)"
    check(rules.reorderStride(s), text, arrays(seed, xs=(s * k,)))


@covers("reorderZip")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), seeds)
def test_reorder_zip(s, k, seed):
    text = f"def p(xs: [float]_len, ys: [float]_len) = map((a, b) -> a - b * 2.0f, reorder(stride({s}), zip(xs, ys)))"
    check(rules.reorderZip, text, arrays(seed, xs=(s * k,), ys=(s * k,)))


@covers("letPrivate")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x", "k"), seeds)
def test_let_private(n, m, f, seed):
    text = f"def p(vs: [float]_n, ws: [float]_m) = mapSeq(k -> reduceSeq(0.0f, (acc, x) -> acc + {f}, vs), ws)"
    variants = check(rules.letPrivate, text, arrays(seed, vs=(n,), ws=(m,)))
    assert any("vsPrivate" in liftpy.pretty(v.program) for v in variants)


@covers("letLocal")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x", "y"), seeds)
def test_let_local(n, k, m, f, seed):
    """A work-group's row of a, read by each of its work-items (a column of b each), staged in local memory;
    the group's function written out or as a mapLcl applied partially (which the parser writes out)."""
    inputs = arrays(seed, a=(n, k), b=(m, k))
    for group in (f"g -> mapLcl(0, c -> reduceSeq(0.0f, (acc, (x, y)) -> acc + {f}, zip(row, c)), g)",
                  f"mapLcl(0, c -> reduceSeq(0.0f, (acc, (x, y)) -> acc + {f}, zip(row, c)))"):
        text = f"def p(a: [[float]_k]_n, b: [[float]_k]_m) = mapWrg(1, row -> mapWrg(0, {group}, split(1, b)), a)"
        variants = check(rules.letLocal, text, inputs)
        assert all("toLocal" in liftpy.pretty(v.program) and "rowLocal" in liftpy.pretty(v.program) for v in variants)
    refused = f"def p(a: [[float]_k]_n) = mapWrg(0, row -> mapLcl(0, x -> {f.replace('y', 'x')}, row), a)"
    assert not explore(liftpy.parse(refused), rules=[rules.letLocal], depth=1)  # each work-item its own element


# ------------------------------------------------------------------------------------------------ the route's
@covers("mapViewFission")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), scalar_fun("x"), seeds)
def test_map_view_fission(n, m, k, f, seed):
    check(rules.mapViewFission, f"""def p(xs: [[[float]_k]_m]_n) =
        map(r -> join(transpose(map(row -> map(x -> {f}, row), r))), xs)""", arrays(seed, xs=(n, m, k)))


@covers("privateAccumulators")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 3), hs.integers(1, 4), hs.integers(1, 3), using("a", "x", "w"), seeds)
def test_private_accumulators(sig, kap, length, g, seed):
    inputs = arrays(seed, ps=(length, sig), qs=(length, kap), z=(sig, kap))
    update = "(acc, (ps, qs)) -> mapSeq((accRow, x) -> mapSeq((a, w) -> {g}, zip(accRow, qs)), zip(acc, ps))"
    check(rules.privateAccumulators, f"""def p(ps: [[float]_s]_len, qs: [[float]_k]_len, z: [[float]_k]_s) =
        join(reduceSeq(z, {update.format(g=g)}, zip(ps, qs)))""", inputs)


@covers("selectPadding")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), hs.integers(-1, 2), hs.integers(0, 2), literal, seeds)
def test_select_padding(n, m, left, right, z, seed):
    inputs = arrays(seed, xs=(n, m))
    variants = check(rules.selectPadding, f"def p(xs: [[float]_m]_n) = "
                                          f"map(r -> pad({left}, {right}, {z}, r), pad(1, 1, 0.0f, xs))", inputs,
                     at_least=2)
    assert all("padSelect" in liftpy.pretty(v.program) for v in variants)


# ------------------------------------------------------------------------------------------------ other programs
def _every_rule():
    for family in rules.catalogue().values():
        kinds = list(family.param_kinds.values())
        yield family.instance(*[0 if kind == "dim" else 2 for kind in kinds])


from .test_codegen import random_inputs as _random_inputs  # noqa: E402
from .test_codegen import sizes_of as _corpus_sizes  # noqa: E402


def test_every_rule_preserves_the_meaning_of_the_corpus_programs(examples_dir):
    """Every rule, at every place it applies in the code generator's corpus of low-level programs, and in the
    paper's listings: the rewritten program computes what the original computes."""
    cases = [(p, _corpus_sizes(p)) for p in sorted((examples_dir.parent / "tests" / "corpus").glob("*.lift"))]
    cases.append((examples_dir / "conv_layer.lift", {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1), "inputHeight": 6,
                  "inputWidth": 6, "inputChannels": 4, "numKernels": 4, "kernelHeight": 3, "kernelWidth": 3}))
    cases.append((examples_dir / "stencil2d.lift", {"height": 6, "width": 8}))
    checked = 0
    for path, sizes in cases:
        program = liftpy.load(path)
        inputs = _random_inputs(program, sizes)
        inputs = {k: v for k, v in inputs.items()}
        expected = liftpy.evaluate(program, inputs, sizes)
        for v in explore(program, rules=list(_every_rule()), depth=1):
            try:
                got = liftpy.evaluate(v.program, inputs, sizes)
            except liftpy.errors.SizeError:
                continue  # the variant's constraints (split by 2...) do not hold at these sizes
            for a, b in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=f"{path.name}: {v.describe()}")
            checked += 1
    assert checked > 150


# ------------------------------------------------------------------------------------------------ coverage
def test_every_rule_of_the_catalogue_is_tested():
    missing = sorted(set(rules.catalogue()) - COVERED)
    assert not missing, f"rules without a meaning-preservation test: {missing}"


# ------------------------------------------------------------------------------------------------ on PoCL
# The lowering rules checked on PoCL: programs lowered by lower_to_opencl (alone and after tiling) are
# compiled, run on the default OpenCL device, and compared with the interpreter on the original program.
LOWERED_ON_POCL = [
    ("stencil2d.lift", {"width": 14, "height": 10}, None),
    ("stencil2d.lift", {"width": 14, "height": 10}, (4, 4)),
    ("conv_layer.lift", {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1)}, None),
    ("conv_layer.lift", {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1)}, (4, 4)),
]


@pytest.mark.parametrize("name, sizes, tile", LOWERED_ON_POCL)
def test_lowered_programs_run_on_pocl(name, sizes, tile):
    from liftpy.rewrite import strategies, topDown

    program = liftpy.load(Path(__file__).parent.parent / "examples" / name)
    rng = np.random.default_rng(7)
    if name == "conv_layer.lift":
        inputs = {"kernelsWeights": rng.standard_normal((4, 3, 3, 2)).astype(np.float32),
                  "kernelsBiases": rng.standard_normal(4).astype(np.float32),
                  "inputData": rng.standard_normal((10, 10, 2)).astype(np.float32)}
        sizes = dict(sizes, numKernels=4, kernelHeight=3, kernelWidth=3, inputChannels=2, inputHeight=10, inputWidth=10)
    else:
        inputs = {"weights": rng.standard_normal((3, 3)).astype(np.float32),
                  "inputData": rng.standard_normal((sizes["height"], sizes["width"])).astype(np.float32)}
    expected = liftpy.evaluate(program, inputs, sizes)
    if tile is not None:
        program = topDown(rules.tile2D(*tile))(program).program
    lowered = strategies.lower_to_opencl(program).program
    result = liftpy.compile(lowered, sizes).run(inputs)
    np.testing.assert_allclose(result.output, expected, rtol=1e-4, atol=1e-4)
