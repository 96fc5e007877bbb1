"""The language end to end: the paper's listings parse, type-check, print back and mean what they should."""

import numpy as np
import pytest

import liftpy
from liftpy import arith
from liftpy.types import ArrayType, FLOAT

from .reference import conv2d_hwc, conv2d_windows

EXAMPLE_FILES = ["stencil2d.lift", "conv_layer.lift", "partial_conv.lift"]


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_example_parses_typechecks_and_prints_back(examples_dir, name):
    program = liftpy.load(examples_dir / name)
    typed = liftpy.typecheck(program)
    assert typed.main_type is not None
    text = liftpy.pretty(program)
    assert liftpy.parse(text) == program
    # printing is stable: the reprinted program prints the same text
    assert liftpy.pretty(liftpy.parse(text)) == text


def test_stencil_type_is_the_papers(examples_dir):
    t = liftpy.load(examples_dir / "stencil2d.lift").type
    width, height = arith.Var("width"), arith.Var("height")
    assert t.result == ArrayType(ArrayType(FLOAT, width - 2), height - 2)
    assert str(t.result) == "[[float]_(width-2)]_(height-2)"


def test_stencil_evaluates_to_a_3x3_correlation(examples_dir):
    rng = np.random.default_rng(1)
    weights = rng.standard_normal((3, 3)).astype(np.float32)
    image = rng.standard_normal((9, 11)).astype(np.float32)
    out = liftpy.evaluate(liftpy.load(examples_dir / "stencil2d.lift"), {"weights": weights, "inputData": image})
    expected = np.array(
        [[(image[i : i + 3, j : j + 3] * weights).sum() for j in range(9)] for i in range(7)], dtype=np.float64
    )
    assert out.shape == (7, 9)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


CONV_CASES = [
    # (H, W, C, K, kh, kw, stride, padding (top, bottom, left, right))
    pytest.param(8, 8, 3, 4, 3, 3, (1, 1), (1, 1, 1, 1), id="3x3-stride1-pad1"),
    pytest.param(7, 5, 2, 3, 3, 3, (1, 1), (1, 1, 1, 1), id="non-square-7x5"),
    pytest.param(9, 10, 3, 2, 3, 3, (2, 2), (1, 1, 1, 1), id="stride2"),
    pytest.param(8, 7, 2, 3, 3, 3, (1, 1), (0, 2, 1, 0), id="asymmetric-padding"),
    pytest.param(9, 8, 2, 3, 2, 4, (1, 1), (0, 1, 2, 1), id="rectangular-kernel-2x4"),
    pytest.param(6, 6, 1, 5, 3, 3, (1, 1), (1, 1, 1, 1), id="one-input-channel"),
    pytest.param(5, 6, 4, 3, 1, 1, (1, 1), (0, 0, 0, 0), id="1x1-kernel"),
    pytest.param(11, 9, 2, 2, 3, 3, (3, 2), (0, 0, 0, 0), id="stride-3x2-edge-windows-dropped"),
    pytest.param(5, 5, 2, 2, 5, 5, (1, 1), (0, 0, 0, 0), id="kernel-as-large-as-input"),
]


@pytest.mark.parametrize("h, w, c, k, kh, kw, stride, padding", CONV_CASES)
def test_conv_layer_matches_numpy(examples_dir, h, w, c, k, kh, kw, stride, padding):
    rng = np.random.default_rng(h * 100 + w)
    x = rng.standard_normal((h, w, c)).astype(np.float32)
    weights = rng.standard_normal((k, kh, kw, c)).astype(np.float32)
    bias = rng.standard_normal(k).astype(np.float32)
    program = liftpy.load(examples_dir / "conv_layer.lift")
    out = liftpy.evaluate(
        program,
        {"kernelsWeights": weights, "kernelsBiases": bias, "inputData": x},
        sizes={"padSize": padding, "kernelStride": stride},
    )
    expected = conv2d_hwc(x, weights, bias, stride, padding)
    np.testing.assert_allclose(conv2d_windows(x, weights, bias, stride, padding), expected, rtol=1e-10)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_conv_layer_output_sizes_are_inferred(examples_dir):
    typed = liftpy.typecheck(liftpy.load(examples_dir / "conv_layer.lift"))
    bindings = typed.result_bindings["convLayer"]
    sizes = {"inputHeight": 224, "kernelHeight": 3, "padSize._1": 1, "padSize._2": 1, "kernelStride._1": 1,
             "inputWidth": 227, "kernelWidth": 11, "padSize._3": 0, "padSize._4": 0, "kernelStride._2": 4}
    assert bindings["outHeight"].evaluate(sizes) == 224
    assert bindings["outWidth"].evaluate(sizes) == 55  # AlexNet's first layer: (227 - 11) / 4 + 1


def test_parse_gives_immutable_hashable_programs(examples_dir):
    a = liftpy.load(examples_dir / "conv_layer.lift")
    b = liftpy.load(examples_dir / "conv_layer.lift")
    assert a == b and hash(a.main.body) == hash(b.main.body)
    with pytest.raises(Exception):
        a.main.body.name = "other"  # frozen


def test_alpha_equivalent_programs_are_equal():
    a = liftpy.parse("def f(xs: [float]_n) = map(x -> x * 2.0f, xs)")
    b = liftpy.parse("def f(xs: [float]_n) = map(y -> y * 2.0f, xs)")
    c = liftpy.parse("def f(xs: [float]_n) = map(y -> y * 3.0f, xs)")
    assert a == b and hash(a.main.body) == hash(b.main.body)
    assert a != c


def test_user_functions_and_tuples():
    program = liftpy.parse(
        """
        def mult(x: float, y: float): float = x * y
        def axpy(a: float, x: float, y: float) = a * x + y
        def f(xs: [float]_n, ys: [float]_n) =
          map((x, y) -> axpy(2.0f, mult(x, y), y), zip(xs, ys))
        """
    )
    xs = np.arange(5, dtype=np.float32)
    ys = np.ones(5, dtype=np.float32)
    out = liftpy.evaluate(program, {"xs": xs, "ys": ys})
    np.testing.assert_allclose(out, 2 * xs * ys + ys)
    assert liftpy.parse(liftpy.pretty(program)) == program


def test_zip_of_three_and_nested_tuples():
    program = liftpy.parse(
        "def f(a: [float]_n, b: [float]_n, c: [int]_n) = "
        "map(t -> { val ((x, y), z) = ((t._1, t._2), t._3); x * y + z }, zip(a, b, c))"
    )
    a = np.arange(4, dtype=np.float32)
    c = np.array([1, 2, 3, 4], dtype=np.int32)
    out = liftpy.evaluate(program, {"a": a, "b": a, "c": c})
    np.testing.assert_allclose(out, a * a + c)


def test_vectors_dot_and_vectorize():
    program = liftpy.parse(
        "def f(xs: [float]_n, ys: [float]_n) = "
        "reduce(0.0f, (acc, (x, y)) -> acc + dot(x, y), zip(asVector(4, xs), asVector(4, ys)))"
    )
    xs = np.arange(8, dtype=np.float32)
    ys = np.arange(8, dtype=np.float32) * 0.5
    out = liftpy.evaluate(program, {"xs": xs, "ys": ys})
    np.testing.assert_allclose(out, [np.dot(xs, ys)], rtol=1e-6)
    scaled = liftpy.parse(
        "def f(xs: [float]_n) = asScalar(map(vectorize(4, x -> x * 2.0f + 1.0f), asVector(4, xs)))"
    )
    np.testing.assert_allclose(liftpy.evaluate(scaled, {"xs": xs}), xs * 2 + 1)


def test_reorder_stride_is_the_papers_index_function():
    program = liftpy.parse("def f(xs: [float]_n) = reorder(stride(4), xs)")
    xs = np.arange(12, dtype=np.float32)
    out = liftpy.evaluate(program, {"xs": xs})
    chunk = 12 // 4
    np.testing.assert_array_equal(out, [xs[i // chunk + 4 * (i % chunk)] for i in range(12)])


def test_pad_clamp_and_negative_pad_crops():
    clamp = liftpy.parse("def f(xs: [float]_n) = padClamp(2, 1, xs)")
    xs = np.array([1, 2, 3], dtype=np.float32)
    np.testing.assert_array_equal(liftpy.evaluate(clamp, {"xs": xs}), [1, 1, 1, 2, 3, 3])
    crop = liftpy.parse("def f(xs: [float]_n): [float]_(n-3) = pad(-1, -2, 0.0f, xs)")
    np.testing.assert_array_equal(liftpy.evaluate(crop, {"xs": np.arange(6, dtype=np.float32)}), [1, 2, 3])


def test_low_level_forms_mean_their_high_level_counterparts():
    high = liftpy.parse("def f(xs: [[float]_m]_n) = map(row -> reduce(0.0f, (a, x) -> a + x, row), xs)")
    low = liftpy.parse(
        "def f(xs: [[float]_m]_n) = mapWrg(0)(mapLcl(0)(row -> toGlobal(id, "
        "reduceSeq(toPrivate(id, 0.0f), (a, x) -> a + x, row))), split(2, xs))"
    )
    xs = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_allclose(
        liftpy.evaluate(low, {"xs": xs}).reshape(6, 1), liftpy.evaluate(high, {"xs": xs}), rtol=1e-6
    )


def test_tuning_parameters_are_declared_and_need_values():
    program = liftpy.parse("param tile\ndef f(xs: [float]_n) = join(map(c -> map(x -> x + 1.0f, c), split(tile, xs)))")
    assert program.tuning_params == ("tile",)
    typed = liftpy.typecheck(program)
    # tile >= 1 is known from the declaration (tuning parameters are positive), so only divisibility remains
    assert [c.text for c in typed.constraints] == ["n % tile == 0"]
    assert "split" in str(typed.constraints[0])
    out = liftpy.evaluate(program, {"xs": np.zeros(6, np.float32)}, sizes={"tile": 3})
    np.testing.assert_array_equal(out, np.ones(6))


def test_subpackages_are_reachable_from_a_plain_import():
    import subprocess
    import sys

    code = "import liftpy; print(liftpy.nn.conv2d.__name__, liftpy.rewrite.strategies.lower_to_opencl)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["conv2d", "lower_to_opencl"]
