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
    # only the reduction over the flattened 3 x 3 window, as a nest of two loops of 3 (listing 2 has one loop
    # of 9 and indexes with j/3 and j%3: the divisions are split off into loops, see sequential_loop)
    assert re.findall(r"for \(int (\w+) = 0; \1 < (\d+);", body) == [("j", "3"), ("j_1", "3")]
    # one private accumulator, no materialised windows
    assert re.search(r"^\s*float acc;$", body, re.M)
    assert "[9]" not in body and "local " not in body
    # the index: lid0 + 1024*wg0 + 1024*ky + kx, no redundant terms, no division
    reads = re.findall(r"inputData\[([^\]]*)\]", body)
    assert reads == ["1024*j+j_1+lid0+1024*wg0"]
    assert re.search(r"output\[lid0\+1022\*wg0\] = acc;", body)


def test_cpu_launch_has_enough_work_groups_for_every_core():
    """mapGlb kernels leave the local size free; on a CPU the code generator picks it so every core stays busy."""
    import itertools
    import math

    from liftpy.codegen.kernel import DeviceLimits, cpu_work_groups

    cpu = DeviceLimits(4096, (4096, 4096, 4096), 1 << 20, "cpu", 2)
    for global_size in itertools.product([1, 3, 7, 28, 60, 1024, 15360], [1, 2, 28, 30], [1, 8, 16]):
        local = cpu_work_groups(global_size, cpu)
        assert all(g % l == 0 for g, l in zip(global_size, local)), (global_size, local)
        assert math.prod(local) <= cpu.max_work_group_size
        groups = math.prod(global_size) // math.prod(local)
        assert groups >= min(16, math.prod(global_size)), (global_size, local)
        # grown from dimension 0: an outer dimension is split only when the inner ones are whole
        for d in range(1, len(local)):
            if local[d] > 1:
                assert all(local[i] == global_size[i] for i in range(d)), (global_size, local)
    # VGG-16 layer 19's direct convolution: PoCL alone chose 7 groups for 2 cores
    assert cpu_work_groups((7, 28, 8), cpu) == (7, 14, 1)
    # work-items with much private memory come in smaller groups (PoCL keeps a group's on one thread's stack)
    from liftpy.codegen.kernel import CPU_GROUP_PRIVATE_BYTES

    heavy = cpu_work_groups((7, 224, 4), cpu, private_bytes=8192)
    assert math.prod(heavy) * 8192 <= CPU_GROUP_PRIVATE_BYTES and heavy == (7, 8, 1)
    assert cpu_work_groups((7, 224, 4), cpu) == (7, 56, 1)


def test_launch_leaves_gpu_local_sizes_to_the_driver_and_fixes_them_on_a_cpu():
    from liftpy.codegen.kernel import DeviceLimits
    from liftpy.codegen.program import generate

    glb_only = next(p for p in CORPUS if "mapGlb" in p.read_text() and "mapWrg" not in p.read_text())
    gpu = generate(liftpy.load(glb_only), sizes_of(glb_only), limits=DeviceLimits(kind="gpu", compute_units=20))
    cpu = generate(liftpy.load(glb_only), sizes_of(glb_only), limits=DeviceLimits(kind="cpu", compute_units=2))
    for name, (global_size, local_size) in gpu.launch.items():
        assert local_size is None
        assert cpu.launch[name][0] == global_size and cpu.launch[name][1] is not None
    # mapWrg/mapLcl kernels keep the local size their maps give, on any device
    stencil, sizes = liftpy.load(EXAMPLES / "stencil2d.lift"), {"width": 30, "height": 20}
    assert generate(stencil, sizes, limits=DeviceLimits(kind="cpu")).launch == generate(stencil, sizes).launch
