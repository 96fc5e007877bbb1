"""Each pass of the code generator's route (liftpy.codegen.passes) on small kernels in kernel IR, built by hand
or lowered from small programs; the expected IR is written here, not computed by the pass under test."""

import re
from pathlib import Path

import pytest

import liftpy
from liftpy import arith
from liftpy.arith import Const, Range, mod
from liftpy.codegen import kir, passes
from liftpy.codegen.c import CExpr, Guarded, Memory, MemRef, VLoad, fragments, guarded, literal, load, vector_of
from liftpy.codegen.launch import Launch
from liftpy.codegen.program import generate
from liftpy.device import Device
from liftpy.errors import CodegenError
from liftpy.types import FLOAT

CORPUS = Path(__file__).parent / "corpus"
GPU = Device()
CPU = Device(kind="cpu", compute_units=2, max_work_group_size=4096, max_work_item_sizes=(4096, 4096, 4096))


def var(name, n):
    return arith.Var(name, Range(Const(0), Const(n - 1)))


def mem(name, space, size):
    return Memory(name, space, FLOAT, size)


def kernel(*body, output=None, **kw):
    return kir.Kernel("k", tuple(body), output or mem("out", "global", 64), **kw)


def stmts(k, kind):
    return [s for s in kir.walk(k.body) if isinstance(s, kind)]


# ------------------------------------------------------------------------------------------------ lower
def test_lower_gives_parallel_loops_at_their_level_and_stores_to_the_output():
    g = generate(liftpy.load(CORPUS / "local_staging.lift"), {"rows": 12, "cols": 64})
    ir = g.kernels[0].ir
    (outer,) = ir.body
    assert isinstance(outer, kir.ParFor) and (outer.level, outer.dim, outer.extent) == ("work-group", 0, 12)
    inner = [s for s in kir.walk(outer.body) if isinstance(s, kir.ParFor)]
    assert [(p.level, p.extent) for p in inner] == [("local", 64), ("local", 64)]
    assert [(m.space, m.size) for m in ir.locals] == [("local", 64)]
    assert any(isinstance(s, kir.Store) and s.mem is ir.output for s in kir.walk(ir.body))


def test_the_kernel_ir_prints_for_people():
    g = generate(liftpy.load(CORPUS / "local_staging.lift"), {"rows": 12, "cols": 64})
    text = kir.format_kernel(g.kernels[0].ir)
    assert "for wg0 < 12 parallel work-group(0)" in text
    assert "local float tmp[64]" in text
    assert "barrier local" in text


# ------------------------------------------------------------------------------------------------ place_memory
def test_place_memory_moves_local_memories_to_the_top():
    i = var("i", 4)
    shared = mem("shared", "local", 16)
    k = kernel(kir.ParFor(i, 4, "work-group", 0, "groups", (kir.Alloc(shared), kir.Store(shared, i, literal(0, FLOAT)))))
    placed = passes.place_memory(k, GPU)
    assert placed.locals == (shared,)
    assert not stmts(placed, kir.Alloc)
    assert len(stmts(placed, kir.Store)) == 1


def test_place_memory_refuses_more_local_memory_than_the_device_has():
    big = mem("big", "local", GPU.local_mem_size // 4 + 1)
    with pytest.raises(CodegenError, match="bytes of local memory"):
        passes.place_memory(kernel(kir.Alloc(big)), GPU)


def test_place_memory_refuses_a_global_temporary():
    with pytest.raises(CodegenError, match="global memory"):
        passes.place_memory(kernel(kir.Alloc(mem("t", "global", 8))), GPU)


# ------------------------------------------------------------------------------------------------ insert_barriers
def _shared_then_read(level):
    g, l = var("g", 4), var("l", 8)
    shared = mem("shared", "local", 8)
    out = mem("out", "global", 32)
    produce = kir.Produce("local", (kir.ParFor(l, 8, "local", 0, "fill", (kir.Store(shared, l, literal(1, FLOAT)),)),))
    read = kir.ParFor(l, 8, "local", 0, "use", (kir.Store(out, 8 * g + l, load(shared, 7 - l)),))
    return kernel(kir.ParFor(g, 4, level, 0, "outer", (produce, read)), output=out)


def test_a_barrier_follows_local_memory_written_at_work_group_level():
    k = passes.insert_barriers(_shared_then_read("work-group"))
    body = k.body[0].body
    assert [type(s) for s in body] == [kir.Produce, kir.Barrier, kir.ParFor]
    assert body[1].space == "local"


def test_no_barrier_inside_a_work_item():
    k = passes.insert_barriers(_shared_then_read("global"))
    assert not stmts(k, kir.Barrier)


def test_a_sequential_loop_sharing_memory_ends_each_step_with_a_barrier():
    g, j, l = var("g", 4), var("j", 3), var("l", 8)
    shared = mem("shared", "local", 8)
    produce = kir.Produce("local", (kir.ParFor(l, 8, "local", 0, "fill", (kir.Store(shared, l, literal(1, FLOAT)),)),))
    loop = kir.SeqFor(j, 3, "steps", (produce,))
    k = passes.insert_barriers(kernel(kir.ParFor(g, 4, "work-group", 0, "outer", (loop,))))
    (seq,) = stmts(k, kir.SeqFor)
    assert [type(s) for s in seq.body] == [kir.Produce, kir.Barrier, kir.Barrier]


# ------------------------------------------------------------------------------------------------ version_padded_reads
def test_interior_interval_of_a_window_read_through_padding():
    i, k = var("i", 10), var("k", 3)
    # in[i + k - 1] of an array of 10 padded by one on each side: inside for 1 <= i <= 8 whatever k
    guard = Guarded(i + k - 1, Const(10), literal(1, FLOAT), literal(0, FLOAT))
    assert passes.interior_interval(i, 10, [guard]) == (1, 8)


def test_interior_interval_ignores_a_remainder_that_looks_linear_on_three_points():
    """j % 3 + j - 1 is j - 1 + j on 0, 1, 2, but not beyond: a flattened window's index, before its loop is split
    into a nest. Taking it for linear gave an interior of one step and wrong sums (found by test_route)."""
    j = var("j", 9)
    guard = Guarded(mod(j, 3) - 1, Const(5), literal(1, FLOAT), literal(0, FLOAT))
    assert passes.interior_interval(j, 9, [guard]) == (0, 8)  # nothing proved: the condition stays
    assert not arith.affine_in(mod(j, 3) + j, j) and not arith.affine_in(j * j, j)
    assert arith.affine_in(3 * j + var("k", 4) * 2 - 1, j)


def test_a_sequential_loop_around_loops_gets_an_interior_version():
    """The blocks of a row (i) around a reduction (k): their padding tested once per block, not per read."""
    i, k = var("i", 4), var("k", 3)
    inp, out = mem("in", "global", 8), mem("out", "global", 8)
    read = guarded(2 * i + k - 1, Const(8), load(inp, 2 * i + k - 1), literal(0, FLOAT))
    inner = kir.SeqFor(k, 3, "window", (kir.Store(out, 2 * i, read),))
    versioned = passes.version_padded_reads(kernel(kir.SeqFor(i, 4, "blocks", (inner,)), output=out))
    (branch,) = versioned.body[0].body
    assert isinstance(branch, kir.If) and (branch.lo, branch.hi) == (1, None)  # 2i + k - 1 < 8 always


def test_padded_reads_get_an_interior_version_without_conditions():
    i, k = var("i", 10), var("k", 3)
    inp, out = mem("in", "global", 10), mem("out", "global", 10)
    read = guarded(i + k - 1, Const(10), load(inp, i + k - 1), literal(0, FLOAT))
    body = (kir.SeqFor(k, 3, "window", (kir.Store(out, i, read),)),)
    versioned = passes.version_padded_reads(kernel(kir.ParFor(i, 10, "global", 0, "pixels", body), output=out))
    (branch,) = versioned.body[0].body
    assert isinstance(branch, kir.If) and (branch.lo, branch.hi) == (1, 8)

    def guards(b):
        return [f for s in kir.walk(b) if isinstance(s, kir.Store) for f in fragments(s.value) if isinstance(f, Guarded)]

    assert guards(branch.then) == [] and len(guards(branch.orelse)) == 1
    (store,) = [s for s in kir.walk(branch.then) if isinstance(s, kir.Store)]
    assert str(store.value) == "in[i+k-1]"


def test_vector_lanes_that_become_neighbours_load_as_one_vector():
    i = var("i", 4)
    inp = mem("in", "global", 16)
    lanes = tuple(guarded(4 * i + c - 1, Const(16), load(inp, 4 * i + c - 1), literal(0, FLOAT)) for c in range(4))
    assert "vload4" not in str(vector_of("float4", lanes))
    inside = arith.Var("i", Range(Const(1), Const(3)))
    from liftpy.codegen.c import substitute

    moved = substitute(vector_of("float4", lanes), lambda e: e.subs({i: inside}))
    assert any(isinstance(f, VLoad) for f in fragments(moved))


# ------------------------------------------------------------------------------------------------ padSelect's reads
def test_a_padded_scalar_read_is_a_branch_or_a_select_of_an_element_that_exists():
    """Read through pad, a scalar is a branch around its load; through padSelect, branch-free: the load from
    the index clamped into the array (an element that exists whatever the index), then the padding's value
    where the condition fails. In an interior version the condition and the clamp go."""
    from liftpy.codegen.c import substitute
    from liftpy.codegen.views import ConstView, Index, MemView, PadView
    from liftpy.types import array_of

    def read(branch_free):
        inner = MemView(mem("in", "global", 8), array_of(FLOAT, 8))
        return PadView(inner, array_of(FLOAT, 10), Const(1), Const(8), ConstView(0.0, FLOAT), branch_free).read(
            (Index(i),))

    i = var("i", 10)
    assert str(read(False)) == "((0 <= (i-1) && (i-1) < 8) ? in[i-1] : 0.0f)"
    assert str(read(True)) == "select(0.0f, in[max(0, min(7, i-1))], (0 <= (i-1) && (i-1) < 8))"
    inside = arith.Var("i", Range(Const(1), Const(8)))
    assert str(substitute(read(True), lambda e: e.subs({i: inside}))) == "in[i-1]"


# ------------------------------------------------------------------------------------------------ peel_padded_loops
def test_an_innermost_loop_through_padding_is_peeled_at_its_interiors_edges():
    """out[i] = in[i - 2] of 12 elements padded by two on each side (16 steps): steps 0-1 and 14-15 store the
    padding's value, steps 2-13 read without a condition; the steps keep their order."""
    i = var("i", 16)
    inp, out = mem("in", "global", 12), mem("out", "global", 16)
    read = guarded(i - 2, Const(12), load(inp, i - 2), literal(0, FLOAT))
    k = passes.peel_padded_loops(kernel(kir.SeqFor(i, 16, "row", (kir.Store(out, i, read),)), output=out))
    loops = [s for s in k.body if isinstance(s, kir.SeqFor)]
    assert [(loop.start, loop.extent) for loop in loops] == [(0, 2), (2, 12), (14, 2)]
    middle = [s for s in kir.walk(loops[1].body) if isinstance(s, kir.Store)]
    assert [str(s.value) for s in middle] == ["in[i-2]"] and loops[1].label == "row"
    edges = [s for loop in (loops[0], loops[2]) for s in kir.walk(loop.body) if isinstance(s, kir.Store)]
    assert [str(s.value) for s in edges] == ["0.0f", "0.0f"]
    source, _ = passes.print_opencl(k, {"in": inp}, [], "")
    assert "for (int i = 2; i < 14; i++)" in source and "?" not in source and "select(" not in source


def test_a_one_step_edge_is_its_body_with_the_variable_a_constant():
    i = var("i", 10)
    inp, out = mem("in", "global", 8), mem("out", "global", 10)
    read = guarded(i - 1, Const(8), load(inp, i - 1), literal(0, FLOAT))
    k = passes.peel_padded_loops(kernel(kir.SeqFor(i, 10, None, (kir.Store(out, i, read),)), output=out))
    assert [type(s).__name__ for s in k.body] == ["Store", "SeqFor", "Store"]
    assert [str(s.offset) for s in (k.body[0], k.body[2])] == ["0", "9"]


def test_one_step_edges_that_declare_the_same_memory_are_not_inlined_into_one_scope():
    """Each step declares an accumulator: the first edge's step is inlined, the last one's stays a loop (its own
    C scope), since C refuses a name declared twice in one scope."""
    i = var("i", 10)
    inp, out, acc = mem("in", "global", 8), mem("out", "global", 10), mem("acc", "private", 1)
    read = guarded(i - 1, Const(8), load(inp, i - 1), literal(0, FLOAT))
    body = (kir.Alloc(acc), kir.Store(acc, Const(0), read), kir.Store(out, i, load(acc, Const(0))))
    k = passes.peel_padded_loops(kernel(kir.SeqFor(i, 10, None, body), output=out))
    assert [type(s).__name__ for s in k.body] == ["Alloc", "Store", "Store", "SeqFor", "SeqFor"]
    assert [(s.start, s.extent) for s in k.body[3:]] == [(1, 8), (9, 1)]
    source, _ = passes.print_opencl(k, {"in": inp}, [], "")
    assert source.count("float acc") == 3  # the first edge, and one in each loop's scope


def test_a_loop_with_a_short_interior_or_with_loops_inside_is_not_peeled():
    """A 3-tap window's loop (an interior of one step) stays whole; so does a loop around it, whose padding
    version_padded_reads tests once per step instead."""
    i, k = var("i", 3), var("k", 16)
    inp, out = mem("in", "global", 16), mem("out", "global", 16)
    tap = kir.Store(out, k, guarded(k + i - 1, Const(16), load(inp, k + i - 1), literal(0, FLOAT)))
    short = kernel(kir.SeqFor(i, 3, "taps", (tap,)), output=out)
    assert passes.peel_padded_loops(short) == short
    around = kernel(kir.SeqFor(k, 16, "pixels", (kir.SeqFor(i, 3, "taps", (tap,)),)), output=out)
    assert passes.peel_padded_loops(around) == around


def test_a_padded_copy_runs_a_row_per_work_item_with_an_unconditional_middle():
    """A channel's padded plane copied by rows (copy_padding's shape for a 2D view): the middle of each row
    is a plain loop, and the copy equals numpy's padding of the input."""
    import numpy as np

    program = liftpy.parse("""
def padcopy(input: [[[float]_10]_9]_3) =
  mapGlb(1, channel -> mapGlb(0, row -> mapSeq(toGlobal(id), row), channel),
    map(x -> transpose(map(pad(1, 2, 0.0f), transpose(map(pad(2, 1, 0.0f), x)))), input))
""")
    exe = liftpy.compile(program, {})
    (source,) = exe.sources.values()
    assert re.search(r"for \((int|long) i = 2; i < 12; i\+\+\)", source)
    x = np.random.default_rng(3).standard_normal((3, 9, 10)).astype(np.float32)
    out = exe.prepare().run({"input": x}, poison=True).output
    assert np.array_equal(out.reshape(3, 12, 13), np.pad(x, ((0, 0), (1, 2), (2, 1))))


# ------------------------------------------------------------------------------------------------ split_sequential_loops
def test_index_divisors_form_a_chain():
    j = var("j", 36)
    inp, out = mem("in", "global", 100), mem("out", "global", 1)
    body = (kir.Store(out, Const(0), load(inp, 20 * (j // 12) + 4 * (j // 4 % 3) + j % 4)),)
    assert passes.index_divisors(j, 36, body) == [4, 12]


def test_a_loop_with_divided_indices_becomes_a_nest_without_divisions():
    j = var("j", 36)
    inp, out = mem("in", "global", 100), mem("out", "global", 1)
    store = kir.Store(out, Const(0), load(inp, 20 * (j // 12) + 4 * (j // 4 % 3) + j % 4))
    k = passes.split_sequential_loops(kernel(kir.SeqFor(j, 36, "reduce", (store,)), output=out),
                                      passes.KernelContext({"j"}))
    loops = stmts(k, kir.SeqFor)
    assert [loop.extent for loop in loops] == [3, 3, 4]
    assert loops[0].label == "reduce, as 3 x 3 x 4" and loops[1].label is None
    (new_store,) = stmts(k, kir.Store)
    assert [loop.var.name for loop in loops] == ["j", "j_1", "j_2"]
    assert str(new_store.value) == "in[20*j+4*j_1+j_2]"


def test_a_loop_without_divisions_stays_whole():
    j = var("j", 8)
    out = mem("out", "global", 8)
    k = kernel(kir.SeqFor(j, 8, "plain", (kir.Store(out, j, literal(0, FLOAT)),)), output=out)
    assert passes.split_sequential_loops(k, passes.KernelContext({"j"})) == k


# ------------------------------------------------------------------------------------------------ inline_single_steps
def test_a_loop_of_one_step_is_its_body_at_that_step():
    """A batch of one image wrapped a whole convolution kernel in a loop of one step: the loop goes, its index
    becomes the constant it took; a loop of two steps stays."""
    i, g = var("i", 1), var("g", 2)
    inp, out = mem("in", "global", 100), mem("out", "global", 100)
    inner = kir.SeqFor(g, 2, "two", (kir.Store(out, 10 * i + g, load(inp, 7 * i + g)),))
    k = passes.inline_single_steps(kernel(kir.SeqFor(i, 1, "batch", (inner,)), output=out))
    (loop,) = k.body
    assert isinstance(loop, kir.SeqFor) and loop.extent == 2
    (store,) = loop.body
    assert str(store.offset) == "g" and str(store.value) == "in[g]"


# ------------------------------------------------------------------------------------------------ order_unrolled_stores
def test_a_block_of_stores_is_written_in_address_order_where_they_commute():
    """A block of accumulators held as vectors along one output dimension was written back vector by vector
    (each store a plane away from the last); in address order, the neighbouring pixels follow each other."""
    acc, out = mem("acc", "private", 4), mem("out", "global", 400)
    p = var("p", 10)

    def block(target):
        return kir.Unrolled("copy of 2", tuple(
            kir.Unrolled("copy of 1", tuple(kir.Store(target, 4 * p + 100 * lane + pixel, load(acc, 2 * pixel + lane))
                                            for lane in range(2)))
            for pixel in range(2)))

    (ordered,) = passes.order_unrolled_stores(kernel(block(out), output=out)).body
    assert ordered.label == "copy of 2, in address order"
    assert [str(s.offset) for s in ordered.body] == ["4*p", "4*p+1", "4*p+100", "4*p+101"]
    assert [str(s.value) for s in ordered.body] == ["acc[0]", "acc[2]", "acc[1]", "acc[3]"]
    # stores that read what the block writes keep their order
    unchanged = kernel(block(acc), output=acc)
    assert passes.order_unrolled_stores(unchanged) == unchanged


# ------------------------------------------------------------------------------------------------ allocate_private
def test_private_arrays_with_constant_indices_live_in_registers():
    j = var("j", 4)
    regs, array = mem("acc", "private", 4), mem("row", "private", 4)
    out = mem("out", "global", 4)
    body = (kir.Alloc(regs), kir.Alloc(array),
            kir.Store(regs, Const(2), literal(0, FLOAT)),
            kir.SeqFor(j, 4, "fill", (kir.Store(array, j, load(regs, Const(2))),)))
    k = passes.allocate_private(kernel(*body, output=out))
    assert k.registers == frozenset({regs})
    assert k.private_bytes == 32
    code = passes.print_opencl(passes.choose_launch(kernel(kir.ParFor(var("g", 4), 4, "global", 0, "g", k.body),
                                                           output=out, registers=k.registers), GPU), {}, [], "//")[0]
    assert "float acc_0, acc_1, acc_2, acc_3;" in code and "float row[4];" in code
    assert "row[j] = acc_2;" in code


# ------------------------------------------------------------------------------------------------ choose_launch
def test_launch_from_the_parallel_loops():
    g, l = var("g", 12), var("l", 64)
    k = kernel(kir.ParFor(g, 12, "work-group", 0, "g", (kir.ParFor(l, 64, "local", 0, "l", ()),)))
    assert passes.choose_launch(k, GPU).launch == Launch((768,), (64,))


def test_private_memory_bounds_a_cpu_work_group():
    x, y = var("x", 224), var("y", 7)
    k = kernel(kir.ParFor(y, 7, "global", 0, "y", (kir.ParFor(x, 224, "global", 1, "x", ()),)))
    light = passes.choose_launch(k, CPU).launch
    heavy = passes.choose_launch(kir.Kernel("k", k.body, k.output, private_bytes=64 * 1024), CPU).launch
    assert light.global_size == heavy.global_size == (7, 224)
    assert heavy.local_size[0] * heavy.local_size[1] <= 8 < light.local_size[0] * light.local_size[1]


# ------------------------------------------------------------------------------------------------ print_opencl
def test_loop_indices_are_64_bit_on_a_cpu_and_32_bit_on_a_gpu():
    """A sequential loop's index is a ``long`` on a CPU (no sign extension at each access) and an ``int`` on a
    GPU; work-item indices are ``int`` on both; nothing else of the kernel changes. A kernel with barriers
    keeps ``int`` loops on a CPU."""
    program = liftpy.parse("""
def rows(xs: [[float]_8]_6) = mapGlb(0, row -> mapSeq(x -> x * 2.0f, row), xs)
""")
    sources = {device.kind: generate(program, {}, device=device).kernels[0].source for device in (CPU, GPU)}
    for kind, index in (("cpu", "long"), ("gpu", "int")):
        assert re.search(r"\bint gid0 = get_global_id\(0\);", sources[kind]), sources[kind]
        assert re.search(rf"for \({index} i = 0; i < 8; i\+\+\)", sources[kind]), sources[kind]
    assert sources["cpu"].replace("long ", "int ") == sources["gpu"]
    # with barriers, int on a CPU too: PoCL 3.1 aborted on 64-bit loops around a barrier's regions
    staged = generate(liftpy.load(CORPUS / "local_staging.lift"), {"rows": 12, "cols": 64}, device=CPU)
    source = staged.kernels[0].source
    assert "barrier(" in source and "long " not in source and "int wg0 = get_group_id(0);" in source


def test_the_printer_returns_the_arguments_the_kernel_uses():
    i = var("i", 16)
    used, unused, out = mem("xs", "global", 16), mem("ys", "global", 16), mem("out", "global", 16)
    from liftpy.codegen.c import Param

    value = CExpr(load(used, i), " * ", CExpr(Param("alpha"), atomic=True))
    k = kernel(kir.ParFor(i, 16, "global", 0, "items", (kir.Store(out, i, value),)), output=out)
    k = passes.choose_launch(k, GPU)
    source, args = passes.print_opencl(k, {"xs": used, "ys": unused}, [("alpha", "float"), ("beta", "float")], "//")
    assert args == ("xs", "alpha", "out")
    assert "int i = get_global_id(0);" in source  # as many work-items as elements: no loop
    assert "out[i] = xs[i] * alpha;" in source


def test_a_parallel_loop_stays_when_the_launch_has_fewer_work_items():
    i = var("i", 16)
    out = mem("out", "global", 16)
    k = kernel(kir.ParFor(i, 16, "global", 0, "items", (kir.Store(out, i, literal(0, FLOAT)),)), output=out)
    source, _ = passes.print_opencl(kir.Kernel("k", k.body, out, launch=Launch((4,), None)), {}, [], "//")
    assert "for (int i = get_global_id(0); i < 16; i += get_global_size(0)) {" in source


def test_loads_and_stores_keep_their_memory_and_index():
    i = var("i", 8)
    inp = mem("in", "global", 8)
    (ref,) = [f for f in fragments(load(inp, 2 * i + 1)) if isinstance(f, MemRef)]
    assert ref.mem is inp and ref.offset == 2 * i + 1


def test_compile_shows_the_kernel_ir(tmp_path, capsys):
    from liftpy.cli import main

    code = main(["compile", str(CORPUS / "local_staging.lift"), "--size", "rows=12", "--size", "cols=64",
                 "-o", str(tmp_path), "--show-ir"])
    out = capsys.readouterr().out
    assert code == 0
    assert "kernel diffs -> output[768]" in out and "parallel work-group(0)" in out and "barrier local" in out


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.lift")), ids=lambda p: p.stem)
def test_the_parameter_space_and_the_launch_see_the_same_parallel_maps(path):
    """The parameter space bounds the work-groups of parallel_maps (functional IR, sizes symbolic); the launch
    is made from the kernel IR's parallel loops: for every corpus program they agree."""
    from liftpy.codegen.launch import extents, parallel_maps
    from liftpy.typecheck import typecheck

    from .test_codegen import sizes_of

    program, sizes = liftpy.load(path), sizes_of(path)
    generated = generate(program, sizes)
    body = typecheck(program, sizes).program.function(None).body  # every kernel of the program
    from_expr: dict = {"work-group": {}, "local": {}, "global": {}}
    for m in parallel_maps(body):
        from_expr[m.level][m.dim] = max(from_expr[m.level].get(m.dim, 0), m.extent.as_int())
    from_ir: dict = {"work-group": {}, "local": {}, "global": {}}
    for kernel in generated.kernels:
        for level, dims in extents(kernel.ir).items():
            for d, n in dims.items():
                from_ir[level][d] = max(from_ir[level].get(d, 0), n)
    assert from_expr == from_ir


def test_kernels_of_constant_inputs_run_once_when_a_program_is_prepared():
    """A stage that reads only the weights is hoisted: run when the program is prepared, not at each call."""
    import numpy as np

    program = liftpy.parse("""
def scaledSum(w: [float]_n, x: [float]_n) = {
  val doubled = mapGlb(0)(a -> a * 2.0f, w)
  mapGlb(0)((a, b) -> a + b, zip(doubled, x)) }""")
    exe = liftpy.compile(program, {"n": 1000})
    rng = np.random.default_rng(0)
    w = rng.standard_normal(1000).astype(np.float32)
    prepared = exe.prepare({"w": w})
    assert prepared.hoisted == ("scaledSum_doubled",)
    for seed in (1, 2):
        x = np.random.default_rng(seed).standard_normal(1000).astype(np.float32)
        result = prepared.run({"x": x}, poison=True)  # the hoisted result is kept, not poisoned
        np.testing.assert_array_equal(result.output, np.float32(2) * w + x)
        assert list(result.per_kernel_ms) == ["scaledSum_output"]
    x = rng.standard_normal(1000).astype(np.float32)
    everything = exe.prepare().run({"w": w, "x": x})  # no constants: both kernels run at every call
    assert list(everything.per_kernel_ms) == ["scaledSum_doubled", "scaledSum_output"]
    np.testing.assert_array_equal(everything.output, np.float32(2) * w + x)


# a device that does not share the host's memory (a discrete GPU) keeps its own copy of a zero-copy buffer: its
# outputs must be mapped at every call and its inputs' buffers made anew (NVIDIA's OpenCL computed stale answers
# before); PoCL, told it does not share, runs that path here
HOST_MEMORY = pytest.mark.parametrize("shared", [True, False], ids=["shared memory", "device memory"])


@HOST_MEMORY
def test_a_prepared_program_never_overwrites_an_output_the_caller_still_holds(shared, monkeypatch):
    """Outputs are reused once dropped (their memory and buffer), never while the caller holds them or a view."""
    import gc

    import numpy as np

    monkeypatch.setattr(liftpy.runtime, "shares_host_memory", lambda device: shared)

    exe = liftpy.compile(liftpy.parse("def twice(x: [float]_n) = mapGlb(0)(a -> a * 2.0f, x)"), {"n": 4096})
    for zero_copy in (True, False):
        prepared = exe.prepare(zero_copy=zero_copy)
        xs = [np.random.default_rng(seed).standard_normal(4096).astype(np.float32) for seed in range(6)]
        kept = [prepared.run({"x": xs[0]}).output,
                prepared.run({"x": xs[1]}).output[100:200],  # only a view of it is held
                np.asarray(prepared.run({"x": xs[2]}).output).reshape(64, 64)]
        for x in xs[3:]:
            prepared.run({"x": x})  # dropped at once
        np.testing.assert_array_equal(kept[0], xs[0] * np.float32(2))
        np.testing.assert_array_equal(kept[1], xs[1][100:200] * np.float32(2))
        np.testing.assert_array_equal(kept[2], (xs[2] * np.float32(2)).reshape(64, 64))
        gc.collect()
        first = prepared.run({"x": xs[3]}).output
        address = first.ctypes.data
        del first
        again = prepared.run({"x": xs[4]}).output  # a dropped output's memory is used again
        assert again.ctypes.data == address
        np.testing.assert_array_equal(again, xs[4] * np.float32(2))


@HOST_MEMORY
def test_an_input_array_given_again_is_read_as_it_is_now(shared, monkeypatch):
    """The same array given at every call and written in place between calls (once its buffer is kept, where
    the device reads the array where it lies), then another array, then the first again: each call computes on
    what its input holds at that call."""
    import numpy as np

    monkeypatch.setattr(liftpy.runtime, "shares_host_memory", lambda device: shared)

    exe = liftpy.compile(liftpy.parse("def twice(x: [float]_n) = mapGlb(0)(a -> a * 2.0f, x)"), {"n": 4096})
    rng = np.random.default_rng(7)
    for zero_copy in (True, False):
        prepared = exe.prepare(zero_copy=zero_copy)
        x = rng.standard_normal(4096).astype(np.float32)
        np.testing.assert_array_equal(prepared.run({"x": x}).output, x * np.float32(2))
        for step in range(5):
            x[step::5] = rng.standard_normal(x[step::5].shape).astype(np.float32)  # written in place
            np.testing.assert_array_equal(prepared.run({"x": x}, poison=True).output, x * np.float32(2))
            np.testing.assert_array_equal(prepared.run({"x": x}).output, x * np.float32(2))
        other = -x
        np.testing.assert_array_equal(prepared.run({"x": other}).output, other * np.float32(2))
        x[:] = rng.standard_normal(4096).astype(np.float32)
        np.testing.assert_array_equal(prepared.run({"x": x}).output, x * np.float32(2))


def test_a_prepared_call_sets_what_changes_and_refuses_what_it_cannot_take():
    """The weights and the temporaries are a prepared program's arguments once; a call sets its own: a new
    array, a scalar of its own at each call. A constant given again, an unknown name or a missing input is
    an error that names it."""
    import numpy as np

    from liftpy.errors import InputError

    program = liftpy.parse("""
def scaled(alpha: float, w: [float]_n, x: [float]_n) = {
  val shifted = mapGlb(0)(a -> a + 1.0f, x)
  mapGlb(0)((a, b) -> alpha * a + b, zip(shifted, w)) }""")
    rng = np.random.default_rng(4)
    w = rng.standard_normal(100).astype(np.float32)
    prepared = liftpy.compile(program, {"n": 100}).prepare({"w": w})
    for alpha in (2.0, -0.5, 3.0):
        x = rng.standard_normal(100).astype(np.float32)
        out = prepared.run({"x": x, "alpha": alpha}, poison=True).output
        np.testing.assert_allclose(out, np.float32(alpha) * (x + np.float32(1)) + w, rtol=1e-6)
    with pytest.raises(InputError, match="cannot change"):
        prepared.run({"x": x, "alpha": 1.0, "w": w})
    with pytest.raises(InputError, match="has no input y"):
        prepared.run({"x": x, "alpha": 1.0, "y": x})
    with pytest.raises(InputError, match="no input given for alpha"):
        prepared.run({"x": x})
