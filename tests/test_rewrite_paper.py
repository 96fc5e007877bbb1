"""The paper's rewrites on the paper's programs: the 2D tiling of section 3.4.1 on the stencil (listing 1) and
the convolution (listing 3), the vectorisation of section 3.4.2, the dot builtin, symbolic tile sizes as tuning
parameters, and the default lowering -- each compared with the expected form and run against the original."""

import re

import numpy as np
import pytest

import liftpy
from liftpy.ir import Prim, walk
from liftpy.rewrite import rules, topDown
from liftpy.rewrite.strategies import lower_to_opencl

from .reference import conv2d_hwc

UNTILE2D = "map(row -> join(row), join(map(tileRow -> transpose(tileRow), {})))"


def body_text(program) -> str:
    """The main function's body on one line (the printer breaks long calls over lines)."""
    text = re.sub(r"\s+", " ", liftpy.pretty(program.main.body))
    return re.sub(r"([({]) ", r"\1", text)


def rng_inputs(seed, **shapes):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


# ------------------------------------------------------------------------------------------------ 3.4.1 tiling
def test_tiling_the_stencil_gives_the_nested_slide_form(examples_dir):
    program = liftpy.load(examples_dir / "stencil2d.lift")
    result = topDown(rules.tile2D(4, 4))(program)
    assert result, result
    # the expected program: listing 1 with its slide2D replaced by tiles of 4x4 moved by 4 - (3 - 1) = 2, each
    # tile's own slide2D of 3x3 windows, laid back out as one 2D array of windows
    expected = liftpy.parse((examples_dir / "stencil2d.lift").read_text().replace(
        "slide2D((3, 3), (1, 1), inputData)",
        UNTILE2D.format("map2D(tile -> slide2D((3, 3), (1, 1), tile), slide2D((4, 4), (2, 2), inputData))")))
    assert result.program.functions == expected.functions
    # the tiles must cover the input: recorded as assumptions, checked by the type checker
    assumptions = {a.text for a in result.program.assumptions}
    assert assumptions == {"(height-2) % 2 == 0", "(width-2) % 2 == 0"}
    for height, width in [(6, 8), (10, 4), (4, 12)]:
        inputs = rng_inputs(height * width, weights=(3, 3), inputData=(height, width))
        np.testing.assert_allclose(liftpy.evaluate(result.program, inputs), liftpy.evaluate(program, inputs), rtol=1e-6)


def test_a_tiling_that_does_not_cover_the_input_is_refused_for_those_sizes(examples_dir):
    program = topDown(rules.tile2D(4, 4))(liftpy.load(examples_dir / "stencil2d.lift")).program
    inputs = rng_inputs(0, weights=(3, 3), inputData=(7, 8))  # (7 - 2) % 2 != 0: the last row of windows is lost
    with pytest.raises(liftpy.LiftError, match="tile2D"):
        liftpy.evaluate(program, inputs)


def test_tiling_the_convolution_gives_the_nested_slide_form(examples_dir):
    program = liftpy.load(examples_dir / "conv_layer.lift")
    result = topDown(rules.tile2D(5, 5))(program)
    assert result, result
    text = (examples_dir / "conv_layer.lift").read_text()
    original = "slide2D((kernelHeight, kernelWidth), (kernelStride._1, kernelStride._2), paddedInput)"
    assert original in text
    tiled = UNTILE2D.format(
        "map2D(tile -> slide2D((kernelHeight, kernelWidth), (kernelStride._1, kernelStride._2), tile), "
        "slide2D((5, 5), (5 - (kernelHeight - kernelStride._1), 5 - (kernelWidth - kernelStride._2)), paddedInput))")
    expected = liftpy.typecheck(liftpy.parse(text.replace(original, tiled))).program  # pad's 0 becomes 0.0f
    assert result.program.functions == expected.functions
    # 3x3 kernels, stride 1, 10x10 padded input: tiles of 5 moved by 3 cover the 8 window positions? (10-3+1) % 3
    # != 0, so pick inputs where they do: 9x12 input + padding 1 = 11x14, windows 9x12, tile step 3
    h, w, c, k = 9, 12, 2, 3
    inputs = rng_inputs(1, inputData=(h, w, c), kernelsWeights=(k, 3, 3, c), kernelsBiases=(k,))
    sizes = {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1)}
    out = liftpy.evaluate(result.program, inputs, sizes)
    reference = conv2d_hwc(inputs["inputData"], inputs["kernelsWeights"], inputs["kernelsBiases"], (1, 1), (1, 1, 1, 1))
    np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out, liftpy.evaluate(program, inputs, sizes), rtol=1e-6)


def test_the_papers_rule_maps_the_function_over_each_tile(examples_dir):
    # the rule as printed in section 3.4.1: map2D(f) over windows -> f mapped in 2D over the windows of each tile
    text = """def blur(image: [[float]_w]_h) =
        map2D(nbh -> reduce(0.0f, (acc, x) -> acc + x * 0.25f, join(nbh)), slide2D((2, 2), (1, 1), image))"""
    program = liftpy.parse(text)
    result = topDown(rules.tileMap2D(3, 4))(program)
    assert result, result
    expected = liftpy.parse(text.replace(
        "map2D(nbh -> reduce(0.0f, (acc, x) -> acc + x * 0.25f, join(nbh)), slide2D((2, 2), (1, 1), image))",
        UNTILE2D.format("map2D(tile -> map2D(nbh -> reduce(0.0f, (acc, x) -> acc + x * 0.25f, join(nbh)), "
                        "slide2D((2, 2), (1, 1), tile)), slide2D((3, 4), (2, 3), image))")))
    assert result.program.functions == expected.functions
    inputs = rng_inputs(2, image=(7, 10))  # windows 6 x 9: 3 x 3 tiles of 2 x 3 windows
    np.testing.assert_allclose(liftpy.evaluate(result.program, inputs), liftpy.evaluate(program, inputs), rtol=1e-6)


def test_symbolic_tile_sizes_become_tuning_parameters_with_constraints(examples_dir):
    program = liftpy.load(examples_dir / "conv_layer.lift")
    result = topDown(rules.tile2D())(program)
    assert result.program.tuning_params == ("tileHeight", "tileWidth")
    assert liftpy.pretty(result.program).startswith('param tileHeight "tileHeight of tile2D(?, ?)", tileWidth')
    typed = liftpy.typecheck(result.program)
    texts = {c.text for c in typed.constraints}
    assert "tileHeight >= kernelHeight" in texts
    assert ("(inputHeight+kernelStride._1+padSize._1+padSize._2-kernelHeight) % "
            "(kernelStride._1+tileHeight-kernelHeight) == 0") in texts
    # tiling twice gives two independent tuning parameters
    twice = topDown(rules.slideTiling())(topDown(rules.slideTiling())(liftpy.parse(
        "def p(xs: [float]_n) = map(w -> reduce(0.0f, (a, x) -> a + x, w), slide(3, 1, xs))")))
    assert twice.program.tuning_params == ("u", "u_1")
    # with values for them the program runs, and means what the original means
    sizes = {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1), "tileHeight": 5, "tileWidth": 6}
    inputs = rng_inputs(3, inputData=(9, 8, 2), kernelsWeights=(2, 3, 3, 2), kernelsBiases=(2,))
    np.testing.assert_allclose(liftpy.evaluate(result.program, inputs, sizes),
                               liftpy.evaluate(program, inputs, sizes), rtol=1e-6)


# ------------------------------------------------------------------------------------------------ 3.4.2 vectors
def test_vectorisation_gives_the_form_of_section_3_4_2():
    text = "def relu(input: [float]_n) = map(x -> max(x, 0.0f), input)"
    program = liftpy.parse(text)
    result = topDown(rules.vectorize(4))(program)
    assert result, result
    expected = liftpy.parse("def relu(input: [float]_n) = asScalar(map(vectorize(4, x -> max(x, 0.0f)), asVector(4, input)))")
    assert result.program.functions == expected.functions
    typed = liftpy.typecheck(result.program)
    assert any(c.kind == "divides" and c.text == "n % 4 == 0" for c in typed.constraints)
    inputs = rng_inputs(4, input=(24,))
    np.testing.assert_array_equal(liftpy.evaluate(result.program, inputs), liftpy.evaluate(program, inputs))


def test_the_dot_builtin_vectorises_the_convolution(examples_dir):
    program = liftpy.load(examples_dir / "conv_layer.lift")
    result = topDown(rules.dotBuiltin(4))(program)
    assert result, result
    assert "acc + dot(x, w)" in body_text(result.program)
    assert "zip(asVector(4, join(join(slidingWindow))), asVector(4, join(join(singleKernelWeights))))" in body_text(result.program)
    inputs = rng_inputs(5, inputData=(6, 7, 4), kernelsWeights=(3, 3, 3, 4), kernelsBiases=(3,))  # 3*3*4 % 4 == 0
    sizes = {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1)}
    np.testing.assert_allclose(liftpy.evaluate(result.program, inputs, sizes),
                               liftpy.evaluate(program, inputs, sizes), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------------ section 4.2
def test_partial_reduction_with_coalescing_as_in_section_4_2_2(examples_dir):
    """The convolution's reduction reordered by a stride and split into chunks of ω: the partial sums of
    listing 4, added up by a second reduction (section 4.2.3)."""
    program = liftpy.load(examples_dir / "conv_layer.lift")
    omega = 6
    steps = (topDown(rules.reorderStride(3)) >> topDown(rules.reorderZip) >> topDown(rules.partialReduce(omega)))
    result = steps(program)
    assert result, result
    text = body_text(result.program)
    assert "reorder(stride(3)" in text and f"split({omega}" in text
    inputs = rng_inputs(6, inputData=(5, 6, 2), kernelsWeights=(4, 3, 3, 2), kernelsBiases=(4,))  # window 18
    sizes = {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1)}
    np.testing.assert_allclose(liftpy.evaluate(result.program, inputs, sizes),
                               liftpy.evaluate(program, inputs, sizes), rtol=1e-5, atol=1e-5)


def test_let_introduction_fetches_a_value_once_into_private_memory():
    # listing 4, line 27: the σ input values are read once and reused for each of the κ kernels
    text = """def p(inputs: [float]_σ, kernels: [[float]_σ]_κ) =
        mapSeq(k -> reduceSeq(0.0f, (acc, (x, w)) -> acc + x * w, zip(inputs, k)), kernels)"""
    program = liftpy.parse(text)
    result = topDown(rules.letPrivate)(program)
    assert result, result
    assert body_text(result.program).startswith("{val inputsPrivate = mapSeq(toPrivate(id), inputs); mapSeq(k -> reduceSeq(0.0f, (acc, (x, w)) -> acc + x * w, zip(inputsPrivate, k)), kernels)")
    inputs = rng_inputs(7, inputs=(3,), kernels=(4, 3))
    np.testing.assert_allclose(liftpy.evaluate(result.program, inputs), liftpy.evaluate(program, inputs))


# ------------------------------------------------------------------------------------------------ lowering
def _computing_maps_left(program) -> list[str]:
    from liftpy.rewrite.strategies import is_compute_map

    return [n.name for f in program.functions for n in walk(f.body)
            if is_compute_map(n) or isinstance(n, Prim) and n.name == "reduce"]


@pytest.mark.parametrize("tile", [False, True], ids=["plain", "tiled"])
def test_lowering_the_convolution(examples_dir, tile):
    program = liftpy.load(examples_dir / "conv_layer.lift")
    start = topDown(rules.tile2D(4, 4))(program) if tile else program
    result = lower_to_opencl(start)
    assert result, result
    assert _computing_maps_left(result.program) == []
    text = body_text(result.program)
    assert "mapGlb(1," in text and "mapGlb(0," in text
    assert "toGlobal(id, reduceSeq(toPrivate(id, singleKernelBias)" in text
    inputs = rng_inputs(8, inputData=(8, 8, 3), kernelsWeights=(4, 3, 3, 3), kernelsBiases=(4,))
    sizes = {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1)}
    np.testing.assert_allclose(liftpy.evaluate(result.program, inputs, sizes),
                               liftpy.evaluate(program, inputs, sizes), rtol=1e-6)


def test_lowering_with_unrolling_and_the_stencil_left_alone(examples_dir):
    stencil = liftpy.load(examples_dir / "stencil2d.lift")
    result = lower_to_opencl(stencil)  # already low level: nothing to do, and that is a success
    assert result and result.steps == () and result.program == stencil
    from liftpy.rewrite.strategies import lowering

    program = liftpy.parse("def p(xs: [[float]_4]_n) = map(r -> reduce(0.0f, (a, x) -> a + x, r), xs)")
    result = lowering(unroll=True)(program)
    assert "reduceSeqUnroll(toPrivate(id, 0.0f)" in body_text(result.program)
    assert body_text(result.program).startswith("mapGlb(1,")
    inputs = rng_inputs(9, xs=(5, 4))
    np.testing.assert_allclose(liftpy.evaluate(result.program, inputs), liftpy.evaluate(program, inputs))


# ------------------------------------------------------------------------------------------------ the issue's example
def test_the_issue_example_runs_as_written(examples_dir):
    import liftpy
    from liftpy.rewrite import explore, normalize, repeat, rules, seq, topDown, try_  # noqa: F401 (as in the issue)

    prog = liftpy.load(examples_dir / "conv_layer.lift")
    tiled = (topDown(rules.tile2D(4, 4)))(prog)
    lowered = liftpy.rewrite.strategies.lower_to_opencl(tiled)
    variants = explore(prog, rules=[rules.splitJoin(4), rules.mapFusion, rules.mapFission], depth=3)
    assert tiled and lowered and [s.rule for s in lowered.steps][:2] == ["tile2D", "mapGlb"]  # the whole path
    assert liftpy.rewrite.replay(prog, lowered.steps).program == lowered.program
    assert variants and all(v.path and v.depth <= 3 for v in variants)
    inputs = rng_inputs(10, inputData=(8, 8, 2), kernelsWeights=(4, 3, 3, 2), kernelsBiases=(4,))
    sizes = {"padSize": (1, 1, 1, 1), "kernelStride": (1, 1)}
    np.testing.assert_allclose(liftpy.evaluate(lowered.program, inputs, sizes),
                               liftpy.evaluate(prog, inputs, sizes), rtol=1e-6)


def test_a_rule_parameter_can_be_a_size_expression_of_the_users():
    from liftpy import arith

    program = liftpy.parse("def p(xs: [float]_n) = map(x -> x * 2.0f, xs)")
    theta = arith.Var("θ")
    result = topDown(rules.splitJoin(theta * 2))(program)
    assert result.program.tuning_params == ("θ",)
    assert "split(2*θ, xs)" in body_text(result.program)
    xs = np.arange(12, dtype=np.float32)
    np.testing.assert_allclose(liftpy.evaluate(result.program, {"xs": xs}, {"θ": 3}), xs * 2)
