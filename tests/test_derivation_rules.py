"""The rules of the worked derivations (examples/derivations/) preserve meaning, as every rule of the catalogue
does (``test_rewrite_rules.py``, whose generators and ``check`` these tests use): on generated programs, sizes and
inputs, every application type-checks and evaluates to what the original program evaluates to. The catalogue as a
whole, with the derivations' rules loaded, stays documented and grouped.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import liftpy
from examples import derivations
from liftpy.rewrite import explore

from .test_rewrite_rules import EXAMPLES, arrays, check, literal, scalar_fun, seeds, using

pytestmark = pytest.mark.derivations

COVERED: set[str] = set()


def covers(*names):
    COVERED.update(names)
    return lambda test: test


class _Rules:
    """The catalogue with the derivations' rules, as ``rules.padOptimisational``: loaded when first used."""

    def catalogue(self):
        return derivations.catalogue()

    def __getattr__(self, name):
        return getattr(derivations.catalogue(), name)


rules = _Rules()


# ------------------------------------------------------------------------------------------------ convolution
CONV = 10  # examples per rule of the convolution's derivation (each runs a small 2D or 3D program)


@covers("padOptimisational")
@settings(max_examples=CONV)
@given(hs.integers(2, 3), hs.integers(2, 3), hs.integers(1, 2), hs.integers(0, 3), hs.integers(0, 3),
       scalar_fun("x"), seeds)
def test_pad_optimisational(n1, n2, s, rh, rw, f, seed):
    text = f"""def p(xs: [[float]_w]_h) =
        map2D(nb -> reduce(0.0f, (acc, x) -> acc + {f}, join(nb)), slide2D(({n1}, {n2}), ({s}, {s}), xs))"""
    program = liftpy.parse(text)
    (variant,) = explore(program, rules=[rules.padOptimisational()], depth=1)
    assert variant.program.tuning_params == ("ρh", "ρw")
    inputs = arrays(seed, xs=(5, 6))
    np.testing.assert_allclose(liftpy.evaluate(variant.program, inputs, {"ρh": rh, "ρw": rw}),
                               liftpy.evaluate(program, inputs), rtol=1e-5)


@covers("pad2DPad2D", "cropMap2D")
@settings(max_examples=CONV)
@given(hs.lists(hs.integers(0, 2), min_size=8, max_size=8), hs.integers(0, 2), hs.integers(0, 2), scalar_fun("x"), seeds)
def test_padding_and_cropping(amounts, c1, c2, f, seed):
    l1, r1, t1, b1, l2, r2, t2, b2 = amounts
    check(rules.pad2DPad2D, f"def p(xs: [[float]_w]_h) = map2D(x -> {f}, "
                            f"pad2D({l1}, {r1}, {t1}, {b1}, 0.0f, pad2D({l2}, {r2}, {t2}, {b2}, 0.0f, xs)))",
          arrays(seed, xs=(3, 4)))
    check(rules.cropMap2D, f"def p(xs: [[float]_w]_h) = pad(0, -{c1}, 0.0f, map(r -> pad(0, -{c2}, 0.0f, r), "
                           f"map2D(x -> {f}, xs)))", arrays(seed, xs=(3, 4)))


@covers("coalesceChunks")
@settings(max_examples=CONV)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), literal, seeds)
def test_coalesce_chunks(n, k, f, z, seed):
    text = f"def p(xs: [float]_len) = reduce({z}, (acc, x) -> acc + {f}, xs)"
    check(rules.coalesceChunks(n), text, arrays(seed, xs=(n * k,)))


@covers("reduceFission", "mapFissionZip", "mapMapFission", "mapViewFission")
@settings(max_examples=CONV)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), scalar_fun("x"), seeds)
def test_fissions(n, m, k, f, seed):
    inputs = arrays(seed, xs=(n, m, k), cs=(m,))
    check(rules.reduceFission, f"""def p(ys: [[float]_k]_m, bs: [float]_m) =
        map((y, b) -> reduce(b, (acc, a) -> acc + a, map(x -> {f}, y)), zip(ys, bs))""",
          {"ys": inputs["xs"][0], "bs": inputs["cs"]})
    sums = f"join(map(row -> reduce(0.0f, (acc, x) -> acc + {f}, row), r))"
    check(rules.mapFissionZip, f"""def p(xs: [[[float]_k]_m]_n, cs: [float]_m) =
        map(r -> map((c, s) -> s + c, zip(cs, {sums})), xs)""", inputs)
    check(rules.mapMapFission, f"""def p(xs: [[[float]_k]_m]_n) =
        map(r -> map(s -> s * 2.0f, {sums}), xs)""", {"xs": inputs["xs"]})
    check(rules.mapViewFission, f"""def p(xs: [[[float]_k]_m]_n) =
        map(r -> join(transpose(map(row -> map(x -> {f}, row), r))), xs)""", {"xs": inputs["xs"]})


@covers("mapSplitZip", "chunkInterchange", "reduceBlock")
@settings(max_examples=CONV)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), scalar_fun("x", "w"), seeds)
def test_register_blocking(sig, kap, chunk, chunks, f, seed):
    length = chunk * chunks
    inputs = arrays(seed, xs=(sig, length), ws=(kap, length))
    check(rules.mapSplitZip, f"""def p(a: [float]_len, b: [float]_len) =
        map(c -> reduce(0.0f, (acc, (x, w)) -> acc + {f}, c), split({chunk}, zip(a, b)))""",
          {"a": inputs["xs"][0], "b": inputs["ws"][0]})
    check(rules.chunkInterchange, f"""def p(xs: [[float]_len]_s, ws: [[float]_len]_k) =
        map(a -> map(b -> join(map((x, w) -> reduce(0.0f, (acc, (p, q)) -> acc + p * q, zip(x, w)),
                                   zip(split({chunk}, a), split({chunk}, b)))), ws), xs)""", inputs)
    check(rules.reduceBlock, f"""def p(xs: [[float]_len]_s, ws: [[float]_len]_k) =
        map(a -> join(map(b -> reduce(0.0f, (acc, (x, w)) -> acc + {f}, zip(a, b)), ws)), xs)""", inputs)


@covers("copyPadded", "storeGlobal", "bindVal")
@settings(max_examples=CONV)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), hs.integers(0, 2), seeds)
def test_stages(h, w, c, pad, seed):
    inputs = arrays(seed, xs=(h, w, c))
    check(rules.copyPadded, f"def p(xs: [[[float]_c]_w]_h) = map2D(px -> reduce(0.0f, (a, x) -> a + x, px), "
                            f"pad2D({pad}, 1, {pad}, 0, 0.0f, xs))", inputs)
    check(rules.storeGlobal, """def p(xs: [[[float]_c]_w]_h, z: [[float]_c]_w) = transpose(join(reduceSeq(z,
        (acc, m) -> mapSeq((ar, mr) -> mapSeq((a, x) -> a + x * x, zip(ar, mr)), zip(acc, m)), xs)))""",
          dict(inputs, z=inputs["xs"][0]))
    variants = check(rules.bindVal, "def p(xs: [[[float]_c]_w]_h) = map(r -> reduce(0.0f, (a, x) -> a + x, join(r)), "
                                    "map(row -> map(px -> reduce(0.0f, (a, x) -> a + x * x, px), row), xs))", inputs)
    assert all("val stage" in liftpy.pretty(v.program) for v in variants)


# ------------------------------------------------------------------------------------------------ direct convolution
@covers("groupJoin")
@settings(max_examples=CONV)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), scalar_fun("x"), seeds)
def test_group_join(n, groups, m, f, seed):
    text = f"def p(xs: [[float]_m]_len) = join(map(r -> map(x -> {f}, r), xs))"
    check(rules.groupJoin(n), text, arrays(seed, xs=(n * groups, m)))


@covers("reduceBlockBias")
@settings(max_examples=CONV)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 4), scalar_fun("x", "w"), seeds)
def test_reduce_block_bias(sig, kap, length, f, seed):
    inputs = arrays(seed, xs=(sig, length, 2), ws=(kap, 2 * length), bs=(kap,))
    check(rules.reduceBlockBias, f"""def p(xs: [[[float]_2]_len]_s, ws: [[float]_len2]_k, bs: [float]_k) =
        map(a -> join(map((wk, b) -> reduce(b, (acc, (x, w)) -> acc + {f}, zip(join(a), map(e -> e * 2.0f, wk))),
                          zip(ws, bs))), xs)""", inputs)


@covers("vectorAccumulators", "privateAccumulators", "storeGlobalBlock")
@settings(max_examples=CONV)
@given(hs.integers(1, 3), hs.sampled_from([1, 2, 4]), hs.integers(1, 2), hs.integers(1, 3), using("a", "x", "w"),
       seeds)
def test_vector_accumulators(sig, v, vectors, length, g, seed):
    kap = v * vectors
    inputs = arrays(seed, ps=(length, sig), qs=(length, kap), z=(sig, kap))
    update = "(acc, (ps, qs)) -> map((accRow, x) -> map((a, w) -> {g}, zip(accRow, qs)), zip(acc, ps))"
    check(rules.vectorAccumulators(v), f"""def p(ps: [[float]_s]_len, qs: [[float]_k]_len, z: [[float]_k]_s) =
        join(reduce(z, {update.format(g=g)}, zip(ps, qs)))""", inputs)
    sequential = update.replace("map(", "mapSeq(").format(g=g)
    check(rules.privateAccumulators, f"""def p(ps: [[float]_s]_len, qs: [[float]_k]_len, z: [[float]_k]_s) =
        join(reduceSeq(z, {sequential}, zip(ps, qs)))""", inputs)
    check(rules.storeGlobalBlock, f"""def p(ps: [[float]_s]_len, qs: [[float]_k]_len, z: [[float]_k]_s) =
        join(reduceSeq(toPrivate(b -> mapSeq(r -> mapSeq(e -> id(e), r), b), z), {sequential}, zip(ps, qs)))""",
          inputs)


@covers("zipGroupView", "copyGroups")
@settings(max_examples=CONV)
@given(hs.integers(1, 3), hs.integers(1, 3), hs.integers(1, 3), scalar_fun("a", "x"), seeds)
def test_grouped_weights(n, groups, length, g, seed):
    inputs = arrays(seed, ws=(n * groups, length, 2), bs=(n * groups,))
    # the group read twice: its first components transposed (the weights), its second ones (the biases)
    variants = check(rules.zipGroupView, f"""def p(ws: [[[float]_2]_len]_k, bs: [float]_k) =
        map(g -> reduce(map((w, b) -> b, g), (acc, x) -> map((a, x) -> {g}, zip(acc, x)),
                        transpose(map((w, b) -> join(w), g))),
            split({n}, zip(ws, bs)))""", inputs)
    assert all("zip(map(" in liftpy.pretty(v.program) for v in variants)
    check(rules.copyGroups, f"""def p(ws: [[[float]_2]_len]_k) =
        map(r -> reduce(0.0f, (a, x) -> a + x, join(r)), map(g -> transpose(map(w -> join(w), g)), split({n}, ws)))""",
          {"ws": inputs["ws"]})


def test_zip_group_view_keeps_the_second_components_out():
    # a view that reads the second components (the biases) cannot come from the first ones alone
    program = liftpy.parse("""def p(ws: [[float]_3]_4, bs: [[float]_3]_4) =
        map(g -> transpose(map((w, b) -> b, g)), split(2, zip(ws, bs)))""")
    result = liftpy.rewrite.topDown(rules.zipGroupView)(program)
    assert not result


def test_vector_accumulators_need_a_lane_wise_update():
    # dot on scalars is a product, on vectors a sum of products: vectorising would change the meaning
    program = liftpy.parse("""def p(ps: [[float]_2]_3, qs: [[float]_4]_3, z: [[float]_4]_2) =
        join(reduce(z, (acc, (ps, qs)) -> map((accRow, x) -> map((a, w) -> a + x * dot(w, w), zip(accRow, qs)),
                                              zip(acc, ps)), zip(ps, qs)))""")
    result = liftpy.rewrite.topDown(rules.vectorAccumulators(2))(program)
    assert not result and "lanewise" in result.reason  # it would type-check: only the condition stops it


# ------------------------------------------------------------------------------------------------ copies (pipelines without a padded copy)
@covers("mapGlbToMap", "mapWrgToMap", "mapLclToMap", "mapSeqToMap")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), literal, seeds)
def test_loops_back_to_maps(n, m, f, z, seed):
    inputs = arrays(seed, xs=(n, m))
    check(rules.mapGlbToMap, f"def p(xs: [[float]_m]_n) = mapGlb(1, row -> mapGlb(0, x -> toGlobal(id, {f}), row), xs)",
          inputs, at_least=2)
    check(rules.mapWrgToMap, f"def p(xs: [[float]_m]_n) = mapWrg(0, row -> mapLcl(0, x -> toGlobal(id, {f}), row), xs)",
          inputs)
    check(rules.mapLclToMap, f"def p(xs: [[float]_m]_n) = mapWrg(0, row -> mapLcl(0, x -> toGlobal(id, {f}), row), xs)",
          inputs)
    check(rules.mapSeqToMap, f"def p(xs: [[float]_m]_n) = mapGlb(0, row -> toGlobal(id, "
                             f"reduceSeq({z}, (acc, x) -> acc + {f}, mapSeq(y -> y * 2.0f, row))), xs)", inputs)


@covers("removeToGlobal")
@settings(max_examples=EXAMPLES)
@given(hs.integers(1, 4), hs.integers(1, 4), scalar_fun("x"), seeds)
def test_remove_to_global(n, m, f, seed):
    inputs = arrays(seed, xs=(n, m))
    check(rules.removeToGlobal, f"def p(xs: [[float]_m]_n) = mapGlb(1, row -> mapGlb(0, x -> toGlobal(id, {f}), row), xs)",
          inputs)
    # toGlobal of a function that computes, and a copy of a padded view (the pipelines' padding kernel)
    check(rules.removeToGlobal, f"def p(xs: [[float]_m]_n) = mapGlb(1, row -> mapGlb(0, toGlobal(x -> {f}), row), xs)",
          inputs)
    variants = check(rules.removeToGlobal, "def p(xs: [[float]_m]_n) = "
                                           "mapGlb(1, row -> mapGlb(0, toGlobal(id), row), pad2D(1, 0, 2, 1, 0.0f, xs))",
                     inputs)
    assert all("toGlobal" not in liftpy.pretty(v.program) for v in variants)


# ------------------------------------------------------------------------------------------------ the catalogue
def test_the_catalogue_is_documented_and_grouped():
    book = rules.catalogue()
    assert list(book.groups) == ["algorithmic", "fusion", "interchange", "reduction", "simplification", "tiling",
                                 "vectorisation", "lowering", "memory", "convolution", "direct", "copies"]
    for name, family in book.items():
        first = family.doc.splitlines()[0]
        assert first.startswith(name) and ("==" in first), f"{name}: the doc should start with its equation"
        assert family.span is not None and family.span.line > 0
    text = book.markdown()
    assert "### `tile2D(tileHeight, tileWidth)`" in text


def test_the_catalogue_does_not_load_the_derivations():
    from liftpy.rewrite import rules as catalogue_rules

    mine = set(rules.catalogue()) - set(catalogue_rules.catalogue())
    assert {"padOptimisational", "bindVal", "zipGroupView", "mapGlbToMap"} <= mine
    assert all(rules.catalogue()[name] is catalogue_rules.catalogue()[name] for name in catalogue_rules.catalogue())
    assert {"convolution", "direct", "inline_copies"} <= set(rules.catalogue().strategies)


def test_every_rule_of_the_derivations_is_tested():
    from liftpy.rewrite import rules as catalogue_rules

    missing = sorted(set(rules.catalogue()) - set(catalogue_rules.catalogue()) - COVERED)
    assert not missing, f"rules without a meaning-preservation test: {missing}"
