"""The loop nests of the high-level programs (liftpy.rewrite.nests): spatial maps, reductions and epilogues,
with their extents at concrete sizes worked out here by hand."""

from pathlib import Path

import pytest

import liftpy
from liftpy.rewrite.nests import loop_nests

PROGRAMS = Path(__file__).parent.parent / "examples" / "programs"
CONV = {"N": 2, "C": 8, "H": 10, "W": 12, "K": 6, "kernelHeight": 3, "kernelWidth": 3, "padSize._1": 1,
        "padSize._2": 1, "padSize._3": 0, "padSize._4": 2, "stride._1": 2, "stride._2": 1}


@pytest.mark.parametrize("name, sizes, spatial, reduction, epilogue", [
    ("matmul", {"n": 5, "m": 7, "k": 9}, [5, 7], [9], 0),
    ("maxpool", {"N": 2, "C": 3, "H": 9, "W": 8, "poolSize": 3, "poolStride": 2}, [2, 3, 4, 3], [9], 0),
    ("conv1x1", {"N": 2, "C": 8, "H": 4, "W": 5, "K": 6}, [2, 6, 4, 5], [8], 0),
    # (10 + 2 - 3) / 2 + 1 = 5 rows, 12 + 2 - 3 + 1 = 12 columns, 8 * 3 * 3 terms
    ("conv_bias_relu", CONV, [2, 6, 5, 12], [72], 1),
    # 2 groups of 4 channels and 3 kernels: 4 * 3 * 3 terms
    ("grouped_conv", {**CONV, "groups": 2}, [2, 2, 3, 5, 12], [36], 0),
    # taps 2 rows and 3 columns apart: windows span 5 x 7; (10 + 2 - 5) / 2 + 1 = 4, 12 + 2 - 7 + 1 = 8
    ("dilated_conv", {**CONV, "dilation._1": 2, "dilation._2": 3}, [2, 6, 4, 8], [72], 0),
    ("depthwise", {"N": 2, "C": 4, "H": 6, "W": 5, "kernelHeight": 3, "kernelWidth": 3, "padSize._1": 1,
                   "padSize._2": 1, "padSize._3": 1, "padSize._4": 1}, [2, 4, 6, 5], [9], 0),
])
def test_the_nests_of_each_program(name, sizes, spatial, reduction, epilogue):
    (nest,) = loop_nests(liftpy.load(PROGRAMS / f"{name}.lift"))
    assert [loop.extent.evaluate(sizes) for loop in nest.spatial] == spatial
    assert [loop.extent.evaluate(sizes) for loop in nest.reductions] == reduction
    assert [loop.kind for loop in nest.loops] == ["spatial"] * len(spatial) + ["reduction"] * len(reduction)
    assert len(nest.epilogue) == epilogue


def test_a_program_of_two_computations_has_two_nests():
    program = liftpy.parse("""
def f(xs: [[float]_m]_n) = {
  val rowSums = map(row -> reduce(0.0f, (a, x) -> a + x, row), xs)
  map(s -> map(v -> v * 2.0f, s), rowSums) }""")
    nests = loop_nests(program)
    assert [[(loop.kind, str(loop.extent)) for loop in nest.loops] for nest in nests] == [
        [("spatial", "n"), ("reduction", "m")], [("spatial", "n"), ("spatial", "1")]]


def test_layout_alone_has_no_nest():
    assert loop_nests(liftpy.parse("def f(xs: [[float]_m]_n) = transpose(map(row -> split(2, row), xs))")) == []


def test_check_prints_the_nests_at_the_sizes_given(capsys):
    from liftpy.cli import main

    assert main(["check", str(PROGRAMS / "matmul.lift"), "--nests", "--size", "n=4", "--size", "k=6"]) == 0
    assert "loops 1: (4) x (m); reducing (6)" in capsys.readouterr().out
