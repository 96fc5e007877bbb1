"""The rewrite engine: strategies and traversals, matching with bindings, capture-avoiding substitution,
checked results, and rule files with mistakes reported at their file and line."""

import textwrap

import numpy as np
import pytest

import liftpy
from liftpy.errors import RewriteError
from liftpy.ir import Lambda, Let, Prim, walk
from liftpy.rewrite import (
    Failure,
    Strategy,
    Success,
    all_,
    bottomUp,
    fail,
    id_,
    normalize,
    one,
    position,
    repeat,
    rules,
    seq,
    some,
    topDown,
    try_,
    when,
)
from liftpy.rewrite.rules import load_file, load_text


def program(text: str):
    return liftpy.parse(text)


def body(result) -> str:
    return liftpy.pretty(result.program.main.body)


def binder_names(prog) -> list[str]:
    out = []
    for f in prog.functions:
        for n in walk(f.body):
            if isinstance(n, Lambda):
                out += list(n.param.names())
            elif isinstance(n, Let):
                out += list(n.pattern.names())
    return out


def same_meaning(a, b, **inputs):
    np.testing.assert_allclose(liftpy.evaluate(a, inputs), liftpy.evaluate(b, inputs), rtol=1e-6)


FOUR_TRANSPOSES = "def p(xs: [[float]_m]_n) = transpose(transpose(transpose(transpose(xs))))"
THREE_MAPS = "def p(xs: [float]_n) = map(a -> a + 1.0f, map(b -> b * 2.0f, map(c -> c - 3.0f, xs)))"


# ------------------------------------------------------------------------------------------------ combinators
def test_rule_applies_at_the_root_only_and_traversals_find_it():
    p = program(FOUR_TRANSPOSES)
    assert not rules.removeTransposeTranspose(p)  # a rule rewrites an expression, not a program
    root = p.main.body
    r = rules.removeTransposeTranspose(liftpy.typecheck(p).program.main.body)
    assert r and str(r.node) == "transpose(transpose(xs))"
    assert body(topDown(rules.removeTransposeTranspose)(p)) == "transpose(transpose(xs))"
    assert body(normalize(rules.removeTransposeTranspose)(p)) == "xs"
    assert str(root) == "transpose(transpose(transpose(transpose(xs))))"  # nothing was mutated


def test_top_down_and_bottom_up_choose_different_places():
    p = program(THREE_MAPS)
    down = topDown(rules.mapFusion)(p)  # the outer pair first
    up = bottomUp(rules.mapFusion)(p)  # the inner pair first
    assert body(down) == "map(x -> x * 2.0f + 1.0f, map(c -> c - 3.0f, xs))"
    assert body(up) == "map(a -> a + 1.0f, map(x -> (x - 3.0f) * 2.0f, xs))"
    assert down.steps[0].position == (0,) and up.steps[0].position == (0, 1)
    for r in (down, up):
        same_meaning(r.program, p, xs=np.arange(5, dtype=np.float32))


def test_seq_choice_try_repeat():
    p = program(FOUR_TRANSPOSES)
    strip = topDown(rules.removeTransposeTranspose)
    assert body((strip >> strip)(p)) == "xs"
    assert body(seq(strip, strip)(p)) == "xs"
    assert not (strip >> strip >> strip)(p)  # the third finds nothing
    assert body((topDown(rules.mapFusion) | strip)(p)) == "transpose(transpose(xs))"
    assert try_(topDown(rules.mapFusion))(p).program == liftpy.typecheck(p).program
    assert body(repeat(strip)(p)) == "xs"
    assert (fail | id_)(p) and not (id_ >> fail)(p)


def test_one_all_some():
    p = liftpy.typecheck(program("def p(xs: [[float]_m]_n) = zip(transpose(transpose(xs)), xs)")).program
    zip_node = p.main.body
    assert str(one(rules.removeTransposeTranspose)(zip_node).node) == "zip(xs, xs)"
    assert not all_(rules.removeTransposeTranspose)(zip_node)  # xs itself does not match
    assert str(all_(try_(rules.removeTransposeTranspose))(zip_node).node) == "zip(xs, xs)"
    assert str(some(rules.removeTransposeTranspose)(zip_node).node) == "zip(xs, xs)"
    assert not some(rules.mapFusion)(zip_node)
    assert all_(fail)(liftpy.typecheck(program("def p(xs: [float]_n) = xs")).program.main.body)  # a leaf


def test_position_applies_exactly_where_asked():
    p = program(THREE_MAPS)
    r = position((0, 1), rules.mapFusion)(p)
    assert r and r.steps[0].position == (0, 1)
    assert not position((0,), rules.removeMapId)(p)
    assert "outside the tree" in position((0, 5), id_)(p).reason


def test_results_feed_the_next_strategy_and_failures_pass_through():
    p = program(FOUR_TRANSPOSES)
    first = topDown(rules.removeTransposeTranspose)(p)
    second = topDown(rules.removeTransposeTranspose)(first)
    assert body(second) == "xs"
    failed = topDown(rules.mapFusion)(p)
    assert topDown(rules.removeTransposeTranspose)(failed) is failed
    with pytest.raises(RewriteError, match="mapFusion applies nowhere"):
        failed.unwrap()


def test_user_strategies_are_plain_functions():
    @liftpy.rewrite.strategy
    def only_maps(tree, ctx):
        return Success(tree) if isinstance(tree, Prim) and tree.name == "map" else Failure("not a map")

    p = program(THREE_MAPS)
    r = normalize(only_maps >> rules.mapFusion)(p)
    assert body(r).count("map(") == 1
    assert isinstance(only_maps, Strategy) and repr(only_maps) == "only_maps"
    assert body(normalize(when(lambda t: isinstance(t, Prim)) >> rules.mapFusion)(p)).count("map(") == 1


def test_repeat_stops_a_rule_that_never_stops():
    p = program("def p(xs: [[float]_m]_n) = map(r -> map(x -> x, r), xs)")
    with pytest.raises(RewriteError, match="did not stop"):
        repeat(topDown(rules.transposeBothSides), limit=20)(p)


# ------------------------------------------------------------------------------------------------ failures
def test_failures_say_why():
    p = program(THREE_MAPS)
    assert topDown(rules.removeJoinSplit)(p).reason == "removeJoinSplit applies nowhere"
    # a condition that does not hold
    small = program("def p(xs: [[float]_10]_10) = map(r -> map(w -> 0.0f, r), slide2D((3, 3), (1, 1), xs))")
    r = topDown(rules.tile2D(5, 5))(small)
    assert not r and r.near and "condition (h - n1 + s1) % (tileHeight - n1 + s1) == 0 does not hold" in r.reason
    # an ill-typed result: vectorising by a width that does not divide the length
    r = topDown(rules.vectorize(4))(program("def p(xs: [float]_6) = map(x -> x * 2.0f, xs)"))
    assert not r and "ill-typed" in r.reason and "asVector(4)" in r.reason


def test_parameters_are_checked():
    with pytest.raises(RewriteError, match="splitJoin takes 1 parameter"):
        rules.splitJoin(2, 3)
    with pytest.raises(RewriteError, match="OpenCL dimension"):
        rules.mapGlb(3)
    with pytest.raises(RewriteError, match="OpenCL dimension"):
        rules.mapGlb()
    with pytest.raises(RewriteError, match="at least 1"):
        rules.splitJoin(0)
    with pytest.raises(AttributeError, match="did you mean splitJoin"):
        rules.spliJoin
    assert rules.splitJoin(4) is rules.splitJoin(n=4)  # instances are cached


# ------------------------------------------------------------------------------------------------ binding
def test_a_bare_pattern_variable_never_captures_a_bound_variable():
    # mapMapInterchange: map(a -> map(b -> F(a, b), ys), xs) needs ys independent of a
    independent = program("def p(xs: [float]_n, ys: [float]_m) = map(a -> map(b -> a * b, ys), xs)")
    assert topDown(rules.mapMapInterchange)(independent)
    nested = program("def p(xs: [[float]_m]_n) = map(a -> map(b -> b * 2.0f, a), xs)")  # ys is a itself
    assert not topDown(rules.mapMapInterchange)(nested)
    # transposeBothSides: map(row -> map(f, row)) needs f independent of the row
    uses_row = program("def p(xs: [[float]_m]_n) = map(row -> map(x -> { val r = row; x }, row), xs)")
    assert not topDown(rules.transposeBothSides)(uses_row)


def test_binders_stay_unique_when_a_rewrite_duplicates_a_function():
    p = program("""def p(xs: [float]_n) = {
        val a = map(x -> { val y = x * 2.0f; y + y }, xs);
        map((u, w) -> u * w, zip(a, a)) }""")
    r = topDown(rules.inlineLet)(p)
    assert r
    names = binder_names(r.program)
    assert len(names) == len(set(names)), names
    same_meaning(r.program, p, xs=np.arange(4, dtype=np.float32))


def test_substitution_avoids_capture():
    # fusing puts g's body, which uses the outer x, under f's binder -- also called x in the source
    p = program("""def p(zs: [[float]_m]_n, xs: [float]_n) =
        map((x, row) -> map(y -> y * x, map(x -> x + 1.0f, row)), zip(xs, zs))""")
    r = normalize(rules.mapFusion)(p)
    assert r and len(r.steps) == 1
    names = binder_names(r.program)
    assert len(names) == len(set(names))
    rng = np.random.default_rng(0)
    same_meaning(r.program, p, zs=rng.standard_normal((3, 4)).astype(np.float32),
                 xs=rng.standard_normal(3).astype(np.float32))


def test_replacement_binders_named_like_the_patterns_keep_the_programs_names():
    p = program("def p(xs: [[float]_m]_n) = map(line -> map(v -> v * 2.0f, line), xs)")
    r = topDown(rules.transposeBothSides)(p)
    assert body(r) == "transpose(map(map(v -> v * 2.0f), transpose(xs)))"  # printed as a partial call
    assert binder_names(r.program) == ["line", "v"]


def test_rewritten_programs_print_and_parse_back():
    for text, strategy in [
        (THREE_MAPS, normalize(rules.mapFusion)),
        ("def p(xs: [[float]_12]_12) = map(r -> map(w -> reduce(0.0f, (a, x) -> a + x, join(w)), r), "
         "slide2D((3, 3), (1, 1), xs))", topDown(rules.tile2D(4, 4)) >> topDown(rules.mapFission)),
        ("def p(xs: [float]_n) = reduce(0.0f, (acc, x) -> acc + x * x, xs)", topDown(rules.partialReduce(4))),
    ]:
        r = strategy(program(text))
        assert r, r
        again = liftpy.parse(liftpy.pretty(r.program))
        assert liftpy.typecheck(again).program.functions == r.program.functions


def test_a_bare_expression_can_be_rewritten():
    node = liftpy.typecheck(program(FOUR_TRANSPOSES)).program.main.body
    r = normalize(rules.removeTransposeTranspose)(node)
    assert r and str(r.node) == "xs" and len(r.steps) == 2


# ------------------------------------------------------------------------------------------------ rule files
GOOD = """\
// a user's rules
/// double: map(f) == map(f) o map(id)
rule double:
    map(f, xs) => map(f, map(x -> x, xs))

/// chunked(n): like splitJoin, in a user's file
rule chunked(n):
    map(f, xs) => join(map(map(f), split(n, xs)))
  where n >= 2
"""


def test_a_user_rule_file(tmp_path):
    path = tmp_path / "mine.rules"
    path.write_text(GOOD)
    book = load_file(path)
    assert list(book) == ["double", "chunked"] and book.groups == {"mine": ["double", "chunked"]}
    assert book.chunked.doc.startswith("chunked(n): like splitJoin")
    p = program("def p(xs: [float]_8) = map(x -> x + 1.0f, xs)")
    r = topDown(book.chunked(4))(p)
    assert r and body(r) == "join(map(map(x -> x + 1.0f), split(4, xs)))"
    assert "n >= 2" in topDown(book.chunked(1))(p).reason


BAD_RULES = [
    # (text, line, message)
    ("/// r: doc\nrule r:\n    map(f, xs) => map(f, (xs\n", 3, "rule r: unexpected"),
    ("/// r: doc\nrule r:\n    map(f, xs) map(f, xs)\n", 2, "rule r has no `=>`"),
    ("/// r: doc\nrule r:\n    map(f, xs)\n => map(f, ys)\n", 4, "rule r: ys in the replacement is not bound by the pattern"),
    ("/// r: doc\nrule r:\n    map(f, xs) => mapp(f, xs)\n", 3, "rule r: unknown function or value 'mapp' (did you mean map?)"),
    ("/// r: doc\nrule r:\n    reduc(z, f, xs) => xs\n", 3, "rule r: unknown function or value 'reduc' (did you mean reduce?)"),
    ("rule r:\n    map(f, xs) => xs\n", 1, "rule r has no documentation"),
    ("/// r: doc\nrule r: map(f, xs) => xs\n/// r: again\nrule r: map(g, ys) => ys\n", 4, "rule r is defined twice"),
    ("/// r: doc\nrule r(n):\n    map(f, xs) => xs\n", 2, "rule r: parameter n is not used"),
    ("/// r: doc\nrule r:\n    map(f, xs) => xs\n  where sorted(f)\n", 4, "rule r: unknown condition sorted(...)"),
    ("/// r: doc\nrule r:\n    map(f, xs) => xs\n  where zs: [T]_n\n", 4, "rule r: zs is not a value matched by the pattern"),
    ("/// r: doc\nrule r:\n    split(n, xs) => xs\n  where m % n == 0\n", 4, "rule r: m in `m % n == 0` is bound neither"),
    ("/// r: doc\nrule r:\n    map(f, xs) => split(f, xs)\n", 3, "rule r: f is a function in the pattern but a size in the replacement"),
    ("/// r: doc\nrule r:\n    xs => join(split(2, xs))\n", 3, "rule r: the pattern is a bare variable"),
    ("/// r: doc\nrule r:\n    map(x -> map(x -> f, x), xs) => xs\n", 3, "rule r: x is bound twice in the pattern"),
    ("/// r: doc\nrule r:\n    map(f, xs) => xs\nthis is not a rule\n", 4, "rule r: unexpected 'this'"),
    ("// rules\nthis is not a rule\n", 2, "expected `rule NAME: PATTERN => REPLACEMENT`"),
    ("/// r: doc\nrule r:\n    map(f, xs) => xs\n  where\n", 4, "rule r: empty condition"),
    ("/// r: doc\nrule r:\n    map(f, xs) => xs\n  where n != 2\n", 4, "rule r: a condition is"),
]


@pytest.mark.parametrize("text, line, message", BAD_RULES, ids=[m for _, _, m in BAD_RULES])
def test_rule_file_mistakes_are_reported_at_their_line(tmp_path, text, line, message):
    path = tmp_path / "bad.rules"
    path.write_text(text)
    with pytest.raises(RewriteError) as info:
        load_file(path)
    rendered = info.value.render()
    assert rendered.startswith(f"{path}:{line}:"), rendered
    assert message in rendered, rendered
    assert ": error: " in rendered.splitlines()[0]


def test_python_rules_beside_a_rule_file(tmp_path):
    (tmp_path / "extra.rules").write_text(GOOD)
    (tmp_path / "extra.py").write_text(textwrap.dedent('''
        from liftpy.ir import Prim
        from liftpy.rewrite.rules import python_rule

        @python_rule("reverseTwice")
        def reverse_twice(node, names):
            """reverseTwice: xs == reorder(reverse, reorder(reverse, xs)) on arrays"""
            if isinstance(node, Prim) and node.name == "map":
                yield Prim("reorder", (_reverse(),), (Prim("reorder", (_reverse(),), (node,)),))

        def _reverse():
            from liftpy.ir import IndexFun
            return IndexFun("reverse")
    '''))
    book = load_file(tmp_path / "extra.rules")
    assert "reverseTwice" in book and book.reverseTwice.span.line == 5  # the decorator's line
    p = program("def p(xs: [float]_n) = map(x -> x * 3.0f, xs)")
    r = topDown(book.reverseTwice)(p)
    assert r and body(r) == "reorder(reverse, reorder(reverse, map(x -> x * 3.0f, xs)))"
    same_meaning(r.program, p, xs=np.arange(5, dtype=np.float32))


def test_python_rule_file_mistakes_are_reported(tmp_path):
    (tmp_path / "broken.rules").write_text(GOOD)
    (tmp_path / "broken.py").write_text("def oops(:\n    pass\n")
    with pytest.raises(RewriteError) as info:
        load_file(tmp_path / "broken.rules")
    assert info.value.render().startswith(f"{tmp_path / 'broken.py'}:1:")
    (tmp_path / "broken.py").write_text(
        "from liftpy.rewrite.rules import python_rule\n\n@python_rule('undocumented')\ndef f(node, names):\n    yield node\n")
    with pytest.raises(RewriteError, match="undocumented has no documentation"):
        load_file(tmp_path / "broken.rules")


def test_the_catalogue_without_the_derivations_is_documented_and_grouped():
    book = rules.catalogue()
    assert list(book.groups) == ["algorithmic", "fusion", "interchange", "reduction", "simplification", "tiling",
                                 "vectorisation", "lowering", "memory"]  # the derivations': test_derivation_rules.py
    for name, family in book.items():
        first = family.doc.splitlines()[0]
        assert first.startswith(name) and ("==" in first), f"{name}: the doc should start with its equation"
        assert family.span is not None and family.span.line > 0
    text = book.markdown()
    assert "### `tile2D(tileHeight, tileWidth)`" in text


def test_the_catalogue_document_is_up_to_date():
    from liftpy._paths import data_text

    assert data_text("rewrites", "CATALOGUE.md") == rules.catalogue().markdown() + "\n", (
        "regenerate with: python -c 'from liftpy.rewrite import rules; print(rules.catalogue().markdown())' "
        "> rewrites/CATALOGUE.md")


def test_load_text_reports_the_name_it_is_given():
    with pytest.raises(RewriteError) as info:
        load_text("/// r: doc\nrule r:\n    map(f, xs) => ys\n", "inline.rules")
    assert str(info.value).startswith("inline.rules:3:")


def test_simplify_removes_every_identity():
    from liftpy.rewrite import simplify

    p = program("""def p(xs: [[float]_8]_n) =
        map(r -> map(y -> y, asScalar(asVector(4, join(split(2, r))))), transpose(transpose(xs)))""")
    r = simplify(p)
    assert r and body(r) == "xs" and len(r.steps) == 5
