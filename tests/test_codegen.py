"""Generated OpenCL against the interpreter: every program of the corpus compiles, builds on the default
OpenCL device (PoCL in CI), runs on random inputs and matches the reference semantics."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.types import ArrayType, VectorType

from .reference import conv2d_hwc

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


# What the code generator writes for each loop (liftpy/codegen/passes.py prints it), as the tests expect to read it:
# a parallel map's loop over work-items (or work-groups) of dimension d, stepping by their count or, when the
# launch has more of them than elements, by the launch's size, and a line saying so; or no loop at all, when
# the launch has one work-item per element, the index read once
_PARALLEL = {"mapGlb": ("get_global_id", "get_global_size"), "mapWrg": ("get_group_id", "get_num_groups"),
             "mapLcl": ("get_local_id", "get_local_size")}
_PARALLEL_FOR = re.compile(r"for \(int (\w+) = (get_\w+)\((\d)\); \1 < (\d+); \1 \+= (\w+\(\d\)|\d+)\) \{")
_PARALLEL_SAYS = re.compile(r"// (mapGlb|mapWrg|mapLcl)\((\d)\) over (\d+) element\(s\)"
                            r"(?: \((\d+) in the launch: at most one each\))?")
_PARALLEL_INDEX = re.compile(r"int (\w+) = (get_\w+_id)\((\d)\);(.*)")
# a sequential loop (mapSeq, reduceSeq), split into a nest of loops when its index is divided (the comment,
# after the outermost, gives the nest's shape, "as 3 x 3"); or a copy's loop
_SEQUENTIAL_FOR = re.compile(r"for \((?:int|long) (\w+) = 0; \1 < (\d+); \1\+\+\) \{")
_SEQUENTIAL_SAYS = re.compile(r"// (mapSeq|reduceSeq) over (\d+) element\(s\)(?:, as (\d+(?: x \d+)+))?")


def assert_every_loop_names_its_primitive(source: str):
    """Each ``for (`` line of a kernel is followed by a comment naming the primitive that made it, with the
    loop's dimension and length; the inner loops of a split sequential loop follow its comment, with the
    extents it gives. The parallel maps that need no loop name theirs on the line reading their index."""
    lines = [line.strip() for line in source.splitlines()]
    assert source.count("for (") == sum(line.startswith("for (") for line in lines), "a loop not on its own line"
    explained = set()
    for i, line in enumerate(lines):
        if index := _PARALLEL_INDEX.fullmatch(line):
            _, query, dim, comment = index.groups()
            says = _PARALLEL_SAYS.fullmatch(comment.removeprefix("  "))
            assert says and not says.group(4), f"{line}: no comment naming its map"
            assert (_PARALLEL[says.group(1)][0], says.group(2)) == (query, dim), line
        if not line.startswith("for (") or i in explained:
            continue
        comment = lines[i + 1]
        if loop := _PARALLEL_FOR.fullmatch(line):
            _, query, dim, n, step = loop.groups()
            says = _PARALLEL_SAYS.fullmatch(comment)
            assert says, f"{line} is followed by {comment!r}"
            kind, said_dim, said_n, launched = says.groups()
            assert (_PARALLEL[kind][0], said_dim, said_n) == (query, dim, n), (line, comment)
            if launched:
                assert step == launched and int(launched) > int(n), (line, comment)
            else:
                assert step == f"{_PARALLEL[kind][1]}({dim})", (line, comment)
        else:
            loop = _SEQUENTIAL_FOR.fullmatch(line)
            assert loop, f"{line}: neither a parallel nor a sequential loop"
            if comment == "// copy":
                explained.add(i)
                continue
            says = _SEQUENTIAL_SAYS.fullmatch(comment)
            assert says, f"{line} is followed by {comment!r}"
            _, n, shape = says.groups()
            extents = [int(e) for e in shape.split(" x ")] if shape else [int(n)]
            assert math.prod(extents) == int(n), (line, comment)
            explained.update(_nest_loops(lines, i, extents))
        explained.add(i)


# what may stand between the loops of a nest: the interior and border versions of a step
_BETWEEN_NEST_LOOPS = re.compile(r"if \(.*\) \{|// interior: .*|\}|\} else \{|else \{")


def _nest_loops(lines: list[str], first: int, extents: list[int]) -> set[int]:
    """The lines of the loops of a split nest whose outermost loop is on line ``first`` (its comment after
    it): the inner loops follow, each inside the one before, only interior/border versions between them; a
    versioned step repeats the loops inside it, every copy with the same variable and extent."""
    inner, k = [], first + 2
    while len(inner) < len(extents) - 1:
        assert k < len(lines), (lines[first], "its nest ends early")
        loop = _SEQUENTIAL_FOR.fullmatch(lines[k])
        if loop:
            inner.append((loop.group(1), int(loop.group(2))))
        else:
            assert _BETWEEN_NEST_LOOPS.fullmatch(lines[k]), (lines[first], lines[k])
        k += 1
    outer = _SEQUENTIAL_FOR.fullmatch(lines[first])
    assert [int(outer.group(2))] + [e for _, e in inner] == extents, (lines[first], inner)
    depth, end = 0, first
    for end in range(first, len(lines)):  # the outermost loop's block
        depth += lines[end].count("{") - lines[end].count("}")
        if depth == 0:
            break
    found = {first}
    for j in range(first + 1, end):
        loop = _SEQUENTIAL_FOR.fullmatch(lines[j])
        if loop and (loop.group(1), int(loop.group(2))) in inner:
            found.add(j)
    return found


def assert_indented(source: str):
    """Four spaces per open brace; the continuation lines of a parameter list are indented twice."""
    depth, previous = 0, ""
    for line in source.splitlines():
        text = line.lstrip(" ")
        if text and not previous.endswith(","):
            assert line[: len(line) - len(text)] == "    " * (depth - text.startswith("}")), line
        depth += text.count("{") - text.count("}")
        previous = text or previous
    assert depth == 0


@pytest.mark.parametrize("path, sizes", CASES)
def test_corpus_program_matches_interpreter(path, sizes):
    exe = check_against_interpreter(path, sizes)
    for name, source in exe.sources.items():
        assert f"kernel void {name}(" in source
        # readable: indented, and every loop says which primitive made it
        assert_indented(source)
        assert_every_loop_names_its_primitive(source)


def test_the_loop_comment_check_fails_on_what_it_should():
    good = """kernel void k(global float* out) {
    for (int i = 0; i < 9; i++) {
        // mapSeq over 9 element(s)
        out[i] = 0.0f;
    }
    for (int j = 0; j < 3; j++) {
        // reduceSeq over 6 element(s), as 3 x 2
        for (int j_1 = 0; j_1 < 2; j_1++) {
            out[2*j+j_1] = 1.0f;
        }
    }
    for (int gid0 = get_global_id(0); gid0 < 5; gid0 += get_global_size(0)) {
        // mapGlb(0) over 5 element(s)
        out[gid0] = 2.0f;
    }
}"""
    assert_indented(good)
    assert_every_loop_names_its_primitive(good)
    bad = [good.replace("        // mapSeq over 9 element(s)\n", ""),  # a loop without its comment
           good.replace("mapSeq over 9", "mapSeq over 8"),  # the wrong length
           good.replace("as 3 x 2", "as 2 x 3"),  # the wrong nest
           good.replace("mapGlb(0) over", "mapLcl(0) over"),  # the wrong primitive
           good.replace("gid0 < 5; gid0 += get_global_size(0)) {", "gid0 < 5; gid0 += 8) {"),
           good.replace("    for (int i", "  for (int i"),
           good.replace("    for (int gid0", "    int lid0 = get_local_id(0);\n    for (int gid0")]
    for source in bad:
        with pytest.raises(AssertionError):
            assert_indented(source)
            assert_every_loop_names_its_primitive(source)


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


def test_partial_convolution_kernel_sums_to_the_convolution():
    """Listing 4's kernel (the partial convolution, checked against the interpreter with the corpus) against
    numpy: its partial sums, added up over the chunks, are the convolution of the padded input (no bias)."""
    path, sizes = EXAMPLE_PROGRAMS[1]
    assert path.name == "partial_conv.lift"
    exe = liftpy.compile(liftpy.load(path), sizes)
    rng = np.random.default_rng(8)
    padded = rng.standard_normal((6, 6, 4)).astype(np.float32)  # paddedInputHeight x paddedInputWidth x C
    weights = rng.standard_normal((4, 3, 3, 4)).astype(np.float32)  # numKernels x 3 x 3 x C
    out = exe.run({"kernelsWeights": weights, "paddedInput": padded}).output
    # θ = 4: 2 x 2 tiles of 4 x 4 (step 2), each of 2 x 2 windows 3 x 3, σ = 2 windows a work-item; κ = 2
    # kernels a work-group; ω = 12 of the 36 values of a window a chunk
    assert out.shape == (4, 2, 2, 2, 2, 3)  # tiles, kernel groups, κ, window groups, σ, chunks
    sums = out.astype(np.float64).sum(axis=-1).reshape(2, 2, 4, 2, 2)  # tile row, tile column, kernel, window
    got = sums.transpose(2, 0, 3, 1, 4).reshape(4, 4, 4)  # kernel, output row, output column
    expected = conv2d_hwc(padded, weights, np.zeros(4))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * max(1.0, float(np.abs(expected).max())))


def test_stencil_kernel_has_the_form_of_listing_2():
    exe = liftpy.compile(liftpy.load(EXAMPLES / "stencil2d.lift"), {"width": 1024, "height": 1024})
    (source,) = exe.sources.values()
    body = source[source.index("{") :]
    # the work-group and work-item loops disappear: the launch has one group per row, one item per column
    assert "int wg0 = get_group_id(0);" in body and "int lid0 = get_local_id(0);" in body
    # only the reduction over the flattened 3 x 3 window, as a nest of two loops of 3 (listing 2 has one loop
    # of 9 and indexes with j/3 and j%3: the divisions are split off into loops, see sequential_loop)
    assert re.findall(r"for \((?:int|long) (\w+) = 0; \1 < (\d+);", body) == [("j", "3"), ("j_1", "3")]
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

    from liftpy.codegen.launch import cpu_work_groups
    from liftpy.device import Device

    cpu = Device(max_work_group_size=4096, max_work_item_sizes=(4096, 4096, 4096), local_mem_size=1 << 20, kind="cpu",
                 compute_units=2)
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
    from liftpy.codegen.launch import CPU_GROUP_PRIVATE_BYTES

    heavy = cpu_work_groups((7, 224, 4), cpu, private_bytes=8192)
    assert math.prod(heavy) * 8192 <= CPU_GROUP_PRIVATE_BYTES and heavy == (7, 8, 1)
    assert cpu_work_groups((7, 224, 4), cpu) == (7, 56, 1)


def test_launch_leaves_gpu_local_sizes_to_the_driver_and_fixes_them_on_a_cpu():
    from liftpy.device import Device
    from liftpy.codegen.program import generate

    glb_only = next(p for p in CORPUS if "mapGlb" in p.read_text() and "mapWrg" not in p.read_text())
    gpu = generate(liftpy.load(glb_only), sizes_of(glb_only), device=Device(kind="gpu", compute_units=20))
    cpu = generate(liftpy.load(glb_only), sizes_of(glb_only), device=Device(kind="cpu", compute_units=2))
    for name, (global_size, local_size) in gpu.launch.items():
        assert local_size is None
        assert cpu.launch[name][0] == global_size and cpu.launch[name][1] is not None
    # mapWrg/mapLcl kernels keep the local size their maps give, on any device
    stencil, sizes = liftpy.load(EXAMPLES / "stencil2d.lift"), {"width": 30, "height": 20}
    assert generate(stencil, sizes, device=Device(kind="cpu")).launch == generate(stencil, sizes).launch


@pytest.mark.parametrize("name", ["local_staging", "matmul_tiled", "matvec_workgroups", "stencil_pad2d"])
def test_kernels_generated_offline_for_a_target_run_correctly_here(name, tmp_path, capsys):
    """liftpy compile --target writes kernels for a device one does not have (the Mali-G72 profile: work-groups
    of at most 384); the OpenCL they are is portable, so they run here and must match the interpreter."""
    from liftpy.cli import main
    from liftpy.codegen.program import generate
    from liftpy.params import target_profiles
    from liftpy.runtime import Executable

    path = HERE / "corpus" / f"{name}.lift"
    sizes = sizes_of(path)
    args = ["compile", str(path), *(f"--size={k}={v if isinstance(v, int) else ','.join(map(str, v))}"
                                    for k, v in sizes.items()), "--target", "mali-g72", "-o", str(tmp_path)]
    assert main(args) == 0
    assert "wrote" in capsys.readouterr().out
    program = liftpy.load(path)
    mali = target_profiles()["mali-g72"]
    generated = generate(program, sizes, device=mali)
    for kernel in generated.kernels:
        assert (tmp_path / f"{kernel.name}.cl").read_text().strip() == kernel.source.strip()
        local = kernel.launch.local_size
        assert local is None or math.prod(local) <= mali.max_work_group_size
    inputs = random_inputs(program, sizes, seed=3)
    result = Executable(generated).run(inputs, poison=True)
    expected = liftpy.evaluate(program, inputs, sizes)
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(result.output, expected, rtol=1e-4, atol=1e-5 * scale)


def test_a_sequential_map_above_the_global_maps_is_walked_by_every_work_item():
    """mapSeq outside every parallel map may hold mapGlb (its steps are independent): the route's
    sequential_outer choice, a batch of one image not taking one of the three dimensions."""
    program = liftpy.parse("def f(xs: [[[float]_m]_k]_n) = mapSeq(img -> mapGlb(1)(r -> mapGlb(0)(x -> x * 2.0f, r), img), xs)")
    exe = liftpy.compile(program, {"n": 3, "k": 4, "m": 5})
    assert exe.generated.kernels[0].launch.global_size == (5, 4)
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    np.testing.assert_array_equal(exe.run({"xs": x}, poison=True).output, x * 2)


@pytest.mark.parametrize("text, n, expected", [
    ("padClamp(0, -2, mapGlb(0)(x -> x * 2.0f + 1.0f, padClamp(0, 2, xs)))", 7, lambda xs: xs * 2 + 1),
    ("pad(-1, -2, 0.0f, mapGlb(0)(x -> x * 3.0f, xs))", 9, lambda xs: xs[1:7] * 3),
    ("padClamp(0, -2, join(mapGlb(0)(b -> mapSeq(x -> x + 1.0f, b), split(3, padClamp(0, 2, xs)))))", 7,
     lambda xs: xs + 1),
])
def test_a_cropped_result_is_written_through_guarded_stores(text, n, expected):
    """A map whose result is cropped (``roundUp``'s padClamp(0, -r), a pad of negative sizes) writes its
    elements where they land, each store guarded where its index may fall outside the result -- one kernel, no
    buffer for the uncropped result -- and its output is exactly the cropped elements (against numpy, the
    output buffer poisoned first)."""
    program = liftpy.parse(f"def f(xs: [float]_n) = {text}")
    exe = liftpy.compile(program, {"n": n})
    (source,) = exe.sources.values()
    assert "if (" in source and source.count("kernel void") == 1
    xs = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(exe.run({"xs": xs}, poison=True).output, expected(xs), rtol=1e-6)
