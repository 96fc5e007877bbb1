"""Exploration (breadth-first and random walks, deduplicated, each variant with a replayable rule path) and
the ``rewrite`` / ``explore`` commands."""

import argparse

import numpy as np
import pytest

import liftpy
import liftpy.errors
from liftpy.errors import RewriteError
from liftpy.ir import Lambda, Let, walk
from liftpy.rewrite import explore, replay, rules
from liftpy.rewrite.cli import add_commands, parse_strategy
from liftpy.rewrite.explore import default_rules, program_key

CONV_SIZES = {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1)}


def conv_inputs(seed=0, h=6, w=6, c=2, k=3):
    rng = np.random.default_rng(seed)
    return {"inputData": rng.standard_normal((h, w, c)).astype(np.float32),
            "kernelsWeights": rng.standard_normal((k, 3, 3, c)).astype(np.float32),
            "kernelsBiases": rng.standard_normal(k).astype(np.float32)}


@pytest.fixture(scope="module")
def conv():
    return liftpy.load("examples/conv_layer.lift")


@pytest.fixture(scope="module")
def conv_depth3(conv):
    return explore(conv, depth=3)


def test_exploring_the_convolution_to_depth_3_gives_distinct_checked_variants(conv, conv_depth3):
    variants = conv_depth3
    assert len(variants) > 1000
    keys = [program_key(v.program) for v in variants]
    assert len(set(keys)) == len(keys)  # no duplicates, up to renaming of bound variables
    assert program_key(liftpy.typecheck(conv).program) not in set(keys)
    assert {v.depth for v in variants} == {1, 2, 3}
    assert variants.stats["duplicates"] > 0 and variants.stats["rewrites"] == len(variants) + variants.stats["duplicates"]
    inputs = conv_inputs(h=6, w=6, c=2, k=4)
    expected = liftpy.evaluate(conv, inputs, CONV_SIZES)
    sample = variants[:: max(1, len(variants) // 40)]
    ran = 0
    for v in sample:  # a sample runs (where its splits fit these sizes); all type-check
        try:
            out = liftpy.evaluate(v.program, inputs, CONV_SIZES)
        except liftpy.errors.SizeError:
            continue  # e.g. splitJoin(2) twice on the 6 rows: the variant requires 4 | 6
        ran += 1
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5, err_msg=v.describe())
    assert ran > len(sample) // 2
    for v in variants:
        liftpy.typecheck(v.program)


def test_variants_replay_from_their_rule_path(conv, conv_depth3):
    for v in conv_depth3[::97]:
        assert replay(conv, v.path).program == v.program, v.describe()
    assert "at 0." in conv_depth3[-1].describe()


def test_variants_keep_binders_unique(conv_depth3):
    for v in conv_depth3[::7]:
        names = []
        for n in walk(v.program.main.body):
            if isinstance(n, Lambda):
                names += list(n.param.names())
            elif isinstance(n, Let):
                names += list(n.pattern.names())
        assert len(names) == len(set(names)), v.describe()


def test_predicates_prune_and_limit_stops(conv):
    no_split = lambda p: "split(" not in liftpy.pretty(p)
    variants = explore(conv, rules=[rules.splitJoin(2), rules.mapFusion, rules.removeJoinSplit], depth=2,
                       predicates=[no_split])
    assert variants and all(no_split(v.program) for v in variants)
    assert variants.stats["filtered"] > 0
    assert len(explore(conv, depth=3, limit=25)) == 25


def test_random_walks(conv):
    variants = explore(conv, rules=[rules.splitJoin(2), rules.mapFission, rules.mapFusion], depth=3,
                       method="random", walks=10, seed=1)
    keys = [program_key(v.program) for v in variants]
    assert variants and len(set(keys)) == len(keys)
    again = explore(conv, rules=[rules.splitJoin(2), rules.mapFission, rules.mapFusion], depth=3,
                    method="random", walks=10, seed=1)
    assert [program_key(v.program) for v in again] == keys  # a seed replays the same walks
    for v in variants:
        assert replay(conv, v.path).program == v.program


def test_progress_is_reported(conv):
    seen = []
    explore(conv, rules=[rules.splitJoin(2)], depth=2, progress=seen.append)
    assert seen and seen[-1]["variants"] > 0 and "rewrites" in seen[-1]


def test_explore_takes_rules_only(conv):
    from liftpy.rewrite import topDown

    with pytest.raises(RewriteError, match="not a rule"):
        explore(conv, rules=[topDown(rules.mapFusion)])
    with pytest.raises(RewriteError, match="unknown exploration method"):
        explore(conv, method="dfs")
    assert {r.label for r in default_rules()} >= {"splitJoin(2)", "mapFusion", "mapFission", "removeMapId"}


def test_symbolic_rules_in_exploration_introduce_tuning_parameters():
    p = liftpy.parse("def p(xs: [float]_n) = map(x -> x * 2.0f, map(y -> y + 1.0f, xs))")
    variants = explore(p, rules=[rules.splitJoin, rules.mapFusion], depth=2)
    tuned = [v for v in variants if v.program.tuning_params]
    assert tuned and all(v.program.tuning_params[0] == "n_1" for v in tuned)  # n is an input size already
    xs = np.arange(6, dtype=np.float32)
    for v in tuned:
        assert replay(p, v.path).program == v.program  # the same fresh names again
        sizes = {name: 1 for name in v.program.tuning_params}
        sizes["n_1"] = 3
        try:
            np.testing.assert_allclose(liftpy.evaluate(v.program, {"xs": xs}, sizes), xs * 2 + 2)
        except liftpy.errors.SizeError:
            assert len(v.program.tuning_params) == 2  # the second split does not fit these values


# ------------------------------------------------------------------------------------------------ the commands
def run(argv):
    parser = argparse.ArgumentParser(prog="liftpy")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.fn(args)


def test_rewrite_command_prints_the_program_in_the_languages_syntax(capsys, examples_dir, tmp_path):
    assert run(["rewrite", str(examples_dir / "stencil2d.lift"), "--strategy",
                "topDown(tile2D(4, 4)) ; lower_to_opencl"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("// rewritten by: tile2D(4, 4) at 0.1\n// requires: (height-2) % 2 == 0")
    assert "slide(4, 2, map(slide(4, 2), inputData))" in out
    path = tmp_path / "tiled.lift"
    path.write_text(out)
    reloaded = liftpy.load(path)  # the output is a program again
    inputs = {"weights": np.ones((3, 3), np.float32), "inputData": np.arange(48, dtype=np.float32).reshape(6, 8)}
    np.testing.assert_allclose(liftpy.evaluate(reloaded, inputs),
                               liftpy.evaluate(liftpy.load(examples_dir / "stencil2d.lift"), inputs))


def test_rewrite_command_errors(examples_dir):
    with pytest.raises(RewriteError, match="mapFusion applies nowhere"):
        run(["rewrite", str(examples_dir / "stencil2d.lift"), "-s", "topDown(mapFusion)"])
    with pytest.raises(RewriteError, match="no rule named tile3D \\(did you mean tile2D\\?\\)"):
        run(["rewrite", str(examples_dir / "stencil2d.lift"), "-s", "topDown(tile3D(4))"])
    with pytest.raises(RewriteError, match="cannot read"):
        run(["rewrite", str(examples_dir / "stencil2d.lift"), "-s", "topDown(tile2D(4, 4)"])
    with pytest.raises(RewriteError, match="cannot read"):
        run(["rewrite", str(examples_dir / "stencil2d.lift"), "-s", "__import__('os')"])


def test_strategy_text():
    s = parse_strategy("normalize(mapFusion) ; try(topDown(splitJoin(?))) <+ id")
    assert str(s) == "(normalize(mapFusion) >> try(topDown(splitJoin(?))) | id)"
    assert str(parse_strategy("position((0, 1), all(mapSeq))")) == "position(0.1, all(mapSeq))"
    p = liftpy.parse("def p(xs: [float]_n) = map(a -> a + 1.0f, map(b -> b * 2.0f, xs))")
    assert liftpy.pretty(parse_strategy("normalize(mapFusion) >> topDown(mapGlb(0))")(p).program.main.body) == \
        "mapGlb(0, x -> x * 2.0f + 1.0f, xs)"


def test_explore_command(capsys, examples_dir):
    assert run(["explore", str(examples_dir / "conv_layer.lift"), "--depth", "2", "--rules",
                "splitJoin(4), mapFusion, removeJoinSplit", "--show", "2", "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("// variant 1 (depth 1): splitJoin(4) at 0.")
    assert captured.out.count("// variant ") == 2 and captured.out.count("def convLayer(") == 2
    assert "variants" in captured.err and "rewrites/s" in captured.err
    with pytest.raises(RewriteError, match="is not a rule"):
        run(["explore", str(examples_dir / "conv_layer.lift"), "--rules", "topDown(mapFusion)"])
