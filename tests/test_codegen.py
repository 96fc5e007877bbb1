"""Generated OpenCL against the interpreter: every program of the corpus compiles, builds on the default
OpenCL device (PoCL in CI), runs on random inputs and matches the reference semantics."""

import re
from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.types import ArrayType, VectorType

HERE = Path(__file__).parent
EXAMPLES = HERE.parent / "examples"
CORPUS = sorted((HERE / "corpus").glob("*.lift"))

# programs from examples/ with the sizes to compile them at
EXAMPLE_PROGRAMS = [
    (EXAMPLES / "stencil2d.lift", {"width": 30, "height": 20}),
    (EXAMPLES / "partial_conv.lift", {"inputChannels": 4, "kernelHeight": 3, "kernelWidth": 3, "numKernels": 4,
                                      "paddedInputHeight": 6, "paddedInputWidth": 6, "kernelStride": (1, 1),
                                      "θ": 4, "κ": 2, "σ": 2, "ω": 12, "v": 4}),
]


def sizes_of(path: Path) -> dict:
    """The ``// sizes: n=8 stride=1,1`` line of a corpus program."""
    match = re.search(r"^// sizes:(.*)$", path.read_text(), re.M)
    assert match, f"{path.name} has no '// sizes:' line"
    sizes = {}
    for item in match.group(1).split():
        name, value = item.split("=")
        values = tuple(int(v) for v in value.split(","))
        sizes[name] = values[0] if len(values) == 1 else values
    return sizes


def random_inputs(program, sizes, seed=0):
    from liftpy.typecheck import specialize

    rng = np.random.default_rng(seed)
    fun = specialize(program, sizes).main
    inputs = {}
    for p in fun.data_params:
        dims, t = [], p.type
        while isinstance(t, ArrayType):
            dims.append(t.size.as_int())
            t = t.elem
        if isinstance(t, VectorType):
            dims.append(t.width.as_int())
            t = t.scalar
        if t.name == "int":
            inputs[p.name] = rng.integers(-50, 50, size=dims).astype(np.int32)
        else:
            inputs[p.name] = rng.standard_normal(dims).astype(np.float32)
    return inputs


def check_against_interpreter(path: Path, sizes: dict):
    program = liftpy.load(path)
    exe = liftpy.compile(program, sizes)
    inputs = random_inputs(program, sizes)
    result = exe.run(inputs)
    expected = liftpy.evaluate(program, inputs, sizes)
    assert result.output.shape == expected.shape
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(result.output, expected, rtol=1e-4, atol=1e-5 * scale)
    assert result.kernel_ms > 0
    return exe


CASES = [pytest.param(p, sizes_of(p), id=p.stem) for p in CORPUS] + [
    pytest.param(p, s, id=f"examples-{p.stem}") for p, s in EXAMPLE_PROGRAMS
]


@pytest.mark.parametrize("path, sizes", CASES)
def test_corpus_program_matches_interpreter(path, sizes):
    exe = check_against_interpreter(path, sizes)
    for name, source in exe.sources.items():
        assert f"kernel void {name}(" in source
        # readable: indented, and every loop says which primitive made it
        for line in source.splitlines():
            if line.lstrip().startswith("for ("):
                assert "//" in line or "over" in source, line


def test_corpus_is_large_and_covers_every_primitive():
    from liftpy.ir import Prim, walk
    from liftpy.primitives import PRIMITIVES

    assert len(CASES) >= 30
    used = set()
    for param in CASES:
        program = liftpy.load(param.values[0])
        for fun in program.functions:
            used |= {n.name for n in walk(fun.body) if isinstance(n, Prim)}
    # map and reduce appear only through lowering (layout maps are views); the rest must all run somewhere
    assert set(PRIMITIVES) - used <= {"reduce"}, set(PRIMITIVES) - used


def test_stencil_kernel_has_the_form_of_listing_2():
    exe = liftpy.compile(liftpy.load(EXAMPLES / "stencil2d.lift"), {"width": 1024, "height": 1024})
    (source,) = exe.sources.values()
    body = source[source.index("{") :]
    # the work-group and work-item loops disappear: the launch has one group per row, one item per column
    assert "int wg0 = get_group_id(0);" in body and "int lid0 = get_local_id(0);" in body
    assert body.count("for (") == 1  # only the reduction loop of 9
    # one private accumulator, no materialised windows
    assert re.search(r"^\s*float acc;$", body, re.M)
    assert "[9]" not in body and "local " not in body
    # the flattened index: lid0 + 1024*wg0 + 1024*(j/3) + j%3, no redundant terms
    reads = re.findall(r"inputData\[([^\]]*)\]", body)
    assert reads == ["lid0+1024*wg0+1024*(j/3)+j%3"]
    assert re.search(r"output\[lid0\+1022\*wg0\] = acc;", body)
