"""The code generator's passes for one kernel, named, over the kernel IR (:mod:`.kir`).

:func:`compile_kernel` reads as the list of passes. Each pass is a function from a :class:`~.kir.Kernel` to
a new one (the IR is frozen); its docstring says what it guarantees to the passes after it. The last pass,
:func:`print_opencl`, returns the C source and the kernel's argument list. Nothing here reads generated C
back and nothing is lowered twice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import arith
from ..arith import Range
from ..arith.expr import FloorDiv, Max, Min, Mod, Poly
from ..device import Device
from ..errors import CodegenError
from ..ir import Node
from . import kir
from .c import Code, Guarded, Memory, MemRef, Param, VLoad, c_type
from .launch import launch_for
from .lower import KernelContext, lower, user_fun_source
from .views import View


@dataclass(frozen=True)
class CompiledKernel:
    """A kernel's OpenCL C source, its arguments (buffer and scalar names, in order) and its final IR."""

    source: str
    args: tuple[str, ...]
    kernel: kir.Kernel


def compile_kernel(name: str, expr: Node, output: Memory, env: dict[str, View], ctx: KernelContext,
                   device: Device, buffers: dict[str, Memory], scalars: list[tuple[str, str]],
                   header: str) -> CompiledKernel:
    """One kernel of a program, from its expression to OpenCL C: the kernel IR passes, in order."""
    kernel = lower(name, expr, output, env, ctx)
    kernel = inline_single_steps(kernel)
    kernel = place_memory(kernel, device)
    kernel = insert_barriers(kernel)
    kernel = split_sequential_loops(kernel, ctx)
    kernel = version_padded_reads(kernel)
    kernel = peel_padded_loops(kernel)
    kernel = order_unrolled_stores(kernel)
    kernel = allocate_private(kernel)
    kernel = choose_launch(kernel, device)
    kernel = widen_indices(kernel, device)
    source, args = print_opencl(kernel, buffers, scalars, header, index_type(kernel, device))
    return CompiledKernel(source, args, kernel)


# ------------------------------------------------------------------------------------------------ loops
def inline_single_steps(kernel: kir.Kernel) -> kir.Kernel:
    """A sequential loop of one step is its body, its variable the constant it takes, so that the passes after
    see the body where the loop was (a convolution's batch of one image and its one group wrap its whole kernel
    in two such loops)."""

    def go(body: tuple) -> tuple:
        return _inline_steps(tuple(kir.map_bodies(s, go) for s in body))

    return replace(kernel, body=go(kernel.body))


def _inline_steps(body: tuple) -> tuple:
    """``body`` with each sequential loop of one step replaced by its steps, the variable the constant it takes,
    where what the steps declare clashes with nothing else declared in the scope they land in: C refuses a name
    declared twice in one scope (a depthwise convolution's pixel loop peeled at both ends once declared its
    accumulators twice)."""
    out: list = []
    for i, s in enumerate(body):
        if isinstance(s, kir.SeqFor) and s.extent == 1 \
                and not _scope_declarations(s.body) & (_scope_declarations(out) | _scope_declarations(body[i + 1:])):
            out.extend(kir.substitute_body(s.body, lambda e, s=s: e.subs({s.var: arith.Const(s.start)})))
        else:
            out.append(s)
    return tuple(out)


def _scope_declarations(body) -> set[str]:
    """The names of the memories ``body`` declares in its own C scope (a block of produced values and unrolled
    steps are printed without braces; a loop or a condition opens a scope)."""
    names: set[str] = set()
    for s in body:
        if isinstance(s, kir.Alloc):
            names.add(s.mem.name)
        elif isinstance(s, (kir.Produce, kir.Unrolled)):
            names |= _scope_declarations(s.body)
    return names


# ------------------------------------------------------------------------------------------------ memory
def place_memory(kernel: kir.Kernel, device: Device) -> kir.Kernel:
    """Local memories move to the kernel's top (OpenCL declares them there), within the device's local memory;
    after this pass every :class:`~.kir.Alloc` in the body is private. A global temporary is refused: a
    kernel writes only its output buffer."""
    locals_: list[Memory] = list(kernel.locals)

    def go(body: tuple) -> tuple:
        out = []
        for s in body:
            if isinstance(s, kir.Alloc) and s.mem.space == "local":
                if s.mem not in locals_:
                    locals_.append(s.mem)
                continue
            if isinstance(s, kir.Alloc) and s.mem.space == "global":
                raise CodegenError(f"kernel {kernel.name}: a temporary in global memory ({s.mem.name}) is not "
                                   "supported: bind it with val to make it a kernel of its own")
            out.append(kir.map_bodies(s, go))
        return tuple(out)

    body = go(kernel.body)
    local_bytes = sum(m.bytes for m in locals_)
    if local_bytes > device.local_mem_size:
        raise CodegenError(f"kernel {kernel.name} needs {local_bytes} bytes of local memory; the device has "
                           f"{device.local_mem_size}")
    return replace(kernel, body=body, locals=tuple(locals_))


def insert_barriers(kernel: kir.Kernel) -> kir.Kernel:
    """Barriers where the work-items of a group share memory: after a value computed at work-group level
    into local (or global) memory, which the group's work-items read next; and at the end of each step of a
    sequential loop run by the whole group whose step has a barrier, since the next step overwrites what this
    one shared (a loop above the mapWrg too: without it a matrix product's rows, each copied to local memory in
    turn, raced, and a depthwise kernel never finished on PoCL).
    Only where every work-item of a group reaches them: at work-group level (inside mapWrg, outside mapLcl) or
    above it."""

    def go(body: tuple, level: str) -> tuple:
        out = []
        for s in body:
            inner = level
            if isinstance(s, kir.ParFor):
                inner = "group" if s.level == "work-group" else "item"
            s = kir.map_bodies(s, lambda b: go(b, inner))
            if level in ("kernel", "group") and isinstance(s, kir.SeqFor) and any(
                    isinstance(x, kir.Barrier) for x in kir.walk(s.body)):
                s = replace(s, body=s.body + (kir.Barrier("local"),))
            out.append(s)
            if level == "group" and isinstance(s, kir.Produce) and s.space in ("local", "global"):
                out.append(kir.Barrier(s.space))
        return tuple(out)

    return replace(kernel, body=go(kernel.body, "kernel"))


# ------------------------------------------------------------------------------------------------ padding
def version_padded_reads(kernel: kir.Kernel) -> kir.Kernel:
    """Parallel loops (and sequential ones around loops) whose body reads through padding get two versions: an
    interior one for the values of the loop variable at which every padding condition that depends on it
    holds, and the general one.

    Reading an input through its padding view (no padded copy) puts a condition at every read of a
    reduction's inner loop; for most work-items the window lies inside the input. In the interior version
    the variable carries the narrower range, so the conditions it proves go and neighbouring lanes become
    vector loads (:func:`~.c.substitute`). Conditions that stay are still checked: the interval decides only
    how much of the code is fast, never what it computes."""

    def go(body: tuple) -> tuple:
        out = []
        for s in body:
            if isinstance(s, kir.ParFor) or _sequential_worth_versioning(s):
                s = replace(s, body=_versioned(s.var, s.extent, s.body, go))
            else:
                s = kir.map_bodies(s, go)
            out.append(s)
        return tuple(out)

    return replace(kernel, body=go(kernel.body))


def _sequential_worth_versioning(s: kir.Stmt) -> bool:
    """A sequential loop is versioned too where its body loops (over a block's blocks, whose edges touch the
    padding; over a window's rows of taps around its channels): the test is then paid once per step of it,
    not at every read of the loops inside. The pass runs after split_sequential_loops, so that the loops of a
    window split from one reduction are versioned each: then only the taps that reach the padding test (a
    dilated convolution 10% faster: ``benchmarks/results/notes-compiler.md``). A loop still indexed by divisions
    is left alone: its variable is not affine in the indices."""
    return isinstance(s, kir.SeqFor) and any(isinstance(t, kir.SeqFor) for t in kir.walk(s.body)) \
        and not index_divisors(s.var, s.extent, s.body)


def _versioned(var: arith.Var, n: int, body: tuple, go) -> tuple:
    guards = [f for f in kir.value_fragments(body) if isinstance(f, Guarded)]
    if not guards:
        return body
    lo, hi = interior_interval(var, n, guards)
    if lo > hi or (lo == 0 and hi == n - 1):
        return go(body)
    inside = arith.Var(var.name, Range(arith.Const(lo), arith.Const(hi)))
    interior = kir.substitute_body(body, lambda e: e.subs({var: inside}))
    return (kir.If(var, lo if lo > 0 else None, hi if hi < n - 1 else None,
                   f"interior: no padding condition depends on {var.name}", go(interior), go(body)),)


def interior_interval(var: arith.Var, n: int, guards: list[Guarded]) -> tuple[int, int]:
    """The values of ``var`` in ``[0, n)`` for which every condition ``0 <= a*var + rest < m`` that increases
    linearly in ``var`` holds, whatever the other variables. (A sequential loop's variable may still be
    split into a nest -- ``j`` into ``3 * (j / 3) + j % 3`` -- so linear means affine in the variable, not
    merely linear on three points.)"""
    lo, hi = 0, n - 1
    for guard in guards:
        index, m = guard.index, guard.n.as_int()
        if var not in index.free_vars() or m is None or not arith.affine_in(index, var):
            continue
        at0, at1 = (index.subs({var: k}) for k in (0, 1))
        step = (at1 - at0).as_int()
        if step is None or step <= 0:
            continue  # not increasing by a constant step in var: this condition stays in both versions
        rest_lo, rest_hi = (b.as_int() if b is not None else None for b in arith.bounds(at0))
        if rest_lo is None or rest_hi is None:
            continue
        lo = max(lo, -(rest_lo // step))  # step*var + rest_lo >= 0
        hi = min(hi, (m - 1 - rest_hi) // step)  # step*var + rest_hi <= m - 1
    return lo, hi


# ------------------------------------------------------------------------------------------------ loops
def split_sequential_loops(kernel: kir.Kernel, ctx: KernelContext) -> kir.Kernel:
    """Sequential loops whose index is divided by a chain of divisors become loop nests.

    Views of joined arrays index them with divisions: a reduction over a flattened 3 x 3 x 512 window reads
    ``in[15360*(j/1536) + 512*(j/512%3) + j%512]``, a division and two remainders per step of a loop whose
    step is a handful of vector FMAs. When the divisors of ``j`` form a chain dividing the loop's length, the
    loop becomes one loop per factor and ``j`` their weighted sum, which the arithmetic simplifies
    (``in[15360*ky + 512*kx + c]``). The steps run in the same order, so the result is the same to the bit."""

    def go(body: tuple) -> tuple:
        out = []
        for s in body:
            s = kir.map_bodies(s, go)  # inner loops first
            if isinstance(s, kir.SeqFor) and s.splittable:
                s = _split(s, ctx)
            out.append(s)
        return tuple(out)

    return replace(kernel, body=go(kernel.body))


def index_divisors(var: arith.Var, n: int, body: tuple) -> list[int]:
    """The chain of divisors d (1 < d < n, d | n, each dividing the next) of ``var/d`` and ``var%d`` in the
    body's index expressions (``var/a%b`` counts ``a`` and ``a*b``: it is ``(var % (a*b))/a``)."""
    found: set[int] = set()
    for e in kir.index_exprs(body):
        for sub in _subexpressions(e):
            if isinstance(sub, (FloorDiv, Mod)) and sub.num == var and sub.den.as_int() is not None:
                found.add(sub.den.as_int())
            if isinstance(sub, Mod) and isinstance(sub.num, FloorDiv) and sub.num.num == var \
                    and sub.num.den.as_int() is not None and sub.den.as_int() is not None:
                found.add(sub.num.den.as_int() * sub.den.as_int())
    chain: list[int] = []
    for d in sorted(found):
        if 1 < d < n and n % d == 0 and (not chain or d % chain[-1] == 0):
            chain.append(d)
    return chain


def _subexpressions(e: arith.Expr):
    yield e
    if isinstance(e, (FloorDiv, Mod, Min, Max)):
        for operand in e.operands():
            yield from _subexpressions(operand)
    elif isinstance(e, Poly):
        for monomial, _ in e.terms:
            for atom, _ in monomial:
                yield from _subexpressions(atom)


def _split(loop: kir.SeqFor, ctx: KernelContext) -> kir.SeqFor:
    chain = index_divisors(loop.var, loop.extent, loop.body)
    if not chain:
        return loop
    cuts = [1, *chain, loop.extent]
    extents = [cuts[k + 1] // cuts[k] for k in reversed(range(len(cuts) - 1))]  # outermost first
    weights = [cuts[k] for k in reversed(range(len(cuts) - 1))]
    names = [loop.var.name] + [ctx.fresh(loop.var.name) for _ in extents[1:]]
    loop_vars = [arith.Var(name, Range(arith.Const(0), arith.Const(extent - 1)))
                 for name, extent in zip(names, extents)]
    index = sum((w * v for w, v in zip(weights, loop_vars)), arith.Const(0))
    body = kir.substitute_body(loop.body, lambda e: e.subs({loop.var: index}))
    label = f"{loop.label}, as {' x '.join(str(x) for x in extents)}" if loop.label else None
    for k in reversed(range(len(loop_vars))):
        body = (kir.SeqFor(loop_vars[k], extents[k], label if k == 0 else None, body),)
    return body[0]


def peel_padded_loops(kernel: kir.Kernel) -> kir.Kernel:
    """An innermost sequential loop whose body reads through padding is split at the edges of its interior
    (index-set splitting): ``for i in [0, lo)``, ``for i in [lo, hi]``, ``for i in (hi, n)``, the same steps
    in the same order. In the middle loop the padding conditions that depend on ``i`` are gone and its reads
    are plain loads the C compiler vectorises; at the edges, the conditions that cannot hold give way to the
    padding's value (a padded copy by rows five times faster: ``benchmarks/results/notes-compiler.md``). A loop
    with loops inside is versioned per step by :func:`version_padded_reads`."""

    def go(body: tuple) -> tuple:
        out: list = []
        for s in body:
            s = kir.map_bodies(s, go)
            out.extend(_peeled(s) if _innermost_sequential(s) else (s,))
        return _inline_steps(tuple(out))

    return replace(kernel, body=go(kernel.body))


#: the fewest steps an interior must have for its loop to be peeled: fewer, and three copies of the body buy
#: nothing (a 3-tap window's loop)
PEEL_MIN_INTERIOR = 4


def _innermost_sequential(s: kir.Stmt) -> bool:
    return isinstance(s, kir.SeqFor) and not any(isinstance(t, (kir.SeqFor, kir.ParFor)) for t in kir.walk(s.body))


def _peeled(loop: kir.SeqFor) -> tuple:
    guards = [f for f in kir.value_fragments(loop.body) if isinstance(f, Guarded)]
    if not guards or loop.start:
        return (loop,)
    n = loop.extent
    lo, hi = interior_interval(loop.var, n, guards)
    if hi - lo + 1 < PEEL_MIN_INTERIOR or (lo == 0 and hi == n - 1):
        return (loop,)
    parts: list = []
    for start, end in ((0, lo), (lo, hi + 1), (hi + 1, n)):  # [start, end); a part of one step is inlined after
        if end > start:
            var = arith.Var(loop.var.name, Range(arith.Const(start), arith.Const(end - 1)))
            body = kir.substitute_body(loop.body, lambda e, var=var: e.subs({loop.var: var}))
            label = loop.label if start == lo else None
            parts.append(replace(loop, var=var, extent=end - start, start=start, body=body, label=label))
    return tuple(parts)


def order_unrolled_stores(kernel: kir.Kernel) -> kir.Kernel:
    """An unrolled block of stores only (nested blocks included) writes in the order of its addresses where the
    stores commute: one memory, offsets apart by distinct constants, values that read nothing the block writes.
    A block of accumulators kept as vectors along the kernels is otherwise written back vector by vector, lane
    by lane, each store a plane (50176 floats) from the last where the neighbouring pixels are 4 bytes apart:
    VGG-16 layer 2's kernel 16% slower (``benchmarks/results/notes-compiler.md``)."""

    def go(body: tuple) -> tuple:
        out: list = []
        for s in body:
            s = kir.map_bodies(s, go)
            out.append(_in_address_order(s) if isinstance(s, kir.Unrolled) else s)
        return tuple(out)

    return replace(kernel, body=go(kernel.body))


def _in_address_order(block: kir.Unrolled) -> kir.Unrolled:
    stores = list(kir.walk(block.body))
    if not all(isinstance(s, kir.Unrolled) or (isinstance(s, kir.Store) and s.lane is None) for s in stores):
        return block
    stores = [s for s in stores if isinstance(s, kir.Store)]
    if len(stores) < 2 or len({s.mem for s in stores}) > 1:
        return block
    written = stores[0].mem
    if any(isinstance(f, (MemRef, VLoad)) and f.mem == written for f in kir.value_fragments(block.body)):
        return block
    apart = [(s.offset - stores[0].offset).as_int() for s in stores]
    if None in apart or len(set(apart)) < len(apart):
        return block
    ordered = tuple(s for _, s in sorted(zip(apart, stores), key=lambda pair: pair[0]))
    return kir.Unrolled(f"{block.label}, in address order", ordered)


# ------------------------------------------------------------------------------------------------ private memory
def allocate_private(kernel: kir.Kernel) -> kir.Kernel:
    """Private arrays indexed only by constants live in registers (one variable per element); the kernel's
    private memory is counted over all its code (both padding versions), for :func:`choose_launch`."""
    private = [s.mem for s in kir.walk(kernel.body) if isinstance(s, kir.Alloc) and s.mem.space == "private"]
    refs = [(s.mem, s.offset) for s in kir.walk(kernel.body) if isinstance(s, (kir.Store, kir.VStore))]
    refs += [(f.mem, f.offset) for f in kir.value_fragments(kernel.body) if isinstance(f, MemRef)]
    variable_index = {mem for mem, offset in refs if offset.as_int() is None}
    registers = frozenset(m for m in private if m.size > 1 and m not in variable_index)
    return replace(kernel, registers=registers, private_bytes=sum(m.bytes for m in private))


# ------------------------------------------------------------------------------------------------ launch
def choose_launch(kernel: kir.Kernel, device: Device) -> kir.Kernel:
    """The NDRange (:func:`~.launch.launch_for`), once the private memory a work-item needs is known."""
    return replace(kernel, launch=launch_for(kernel, device))


# ------------------------------------------------------------------------------------------------ indices
#: the reach of a kernel's index arithmetic from which every index is 64-bit: half of ``int``'s range, a margin
#: for the terms of an index that pass its array's length before they sum into it (a pad's offset, a rounded-up
#: block); ordinary sizes stay far below, and their kernels unchanged
INT_INDEX_LIMIT = 2**30
#: the same for ``long``: past it a kernel is refused
LONG_INDEX_LIMIT = 2**62


def widen_indices(kernel: kir.Kernel, device: Device) -> kir.Kernel:
    """Every index of a kernel 64-bit (``long_indices``) where its arithmetic can leave 32 bits
    (:func:`index_reach`); a kernel whose indices can leave 64 bits is refused, and so is a 64-bit kernel with
    barriers on a CPU, whose compiler (PoCL 3.1) aborts on it (:func:`index_type`)."""
    reach = index_reach(kernel)
    if reach < INT_INDEX_LIMIT:
        return kernel
    if reach >= LONG_INDEX_LIMIT:
        raise CodegenError(f"kernel {kernel.name}'s indices reach {reach}: past what 64-bit indices hold; "
                           f"give smaller sizes")
    if device.is_cpu and any(isinstance(s, kir.Barrier) for s in kir.walk(kernel.body)):
        raise CodegenError(f"kernel {kernel.name}'s indices reach {reach}, which needs 64-bit indices, and a "
                           f"CPU's OpenCL compiler (PoCL) aborts on 64-bit loops around barriers; give smaller sizes")
    return replace(kernel, long_indices=True)


def index_reach(kernel: kir.Kernel) -> int:
    """The largest magnitude a kernel's index arithmetic names: a memory's length, a loop's end or launch, a
    constant of an index expression (an index within its array stays below the array's length)."""
    reach = kernel.output.size
    for mem in kir.memories(kernel.body):
        reach = max(reach, mem.size)
    for s in kir.walk(kernel.body):
        if isinstance(s, kir.ParFor):
            reach = max(reach, s.extent)
        elif isinstance(s, kir.SeqFor):
            reach = max(reach, abs(s.start) + s.extent)
    if kernel.launch is not None:
        reach = max(reach, *kernel.launch.global_size)
    seen: set = set()
    for e in kir.index_exprs(kernel.body):
        reach = max(reach, _largest_constant(e, seen))
    return reach


def _largest_constant(e, seen: set) -> int:
    """The largest magnitude of a constant in an index expression (each subexpression looked at once)."""
    if e in seen:
        return 0
    seen.add(e)
    if isinstance(e, arith.Const):
        return abs(e.value)
    if isinstance(e, Poly):
        return max(max(abs(c), max((_largest_constant(a, seen) for a, _ in m), default=0)) for m, c in e.terms)
    if isinstance(e, (FloorDiv, Mod, Min, Max)):
        return max(_largest_constant(x, seen) for x in e.operands())
    return 0


# ------------------------------------------------------------------------------------------------ C
def index_type(kernel: kir.Kernel, device: Device) -> str:
    """The C type of a kernel's sequential loop indices: ``long`` in a kernel that needs 64-bit indices
    (:func:`widen_indices`), else the device's (:attr:`~liftpy.device.Device.index_type`), except ``int`` in a
    kernel with barriers: PoCL 3.1's work-group compiler aborts (``ParallelRegion::Verify``, "Multiple outgoing
    edges from exit block") on 64-bit loops around or between a barrier's regions."""
    if kernel.long_indices:
        return "long"
    if any(isinstance(s, kir.Barrier) for s in kir.walk(kernel.body)):
        return "int"
    return device.index_type


def print_opencl(kernel: kir.Kernel, buffers: dict[str, Memory], scalars: list[tuple[str, str]],
                 header: str, index_type: str = "int") -> tuple[str, tuple[str, ...]]:
    """The kernel as a standalone OpenCL C source, and its arguments in order: the buffers it reads (in the
    order of ``buffers``), the scalar parameters it uses, then its output. Sequential loops count in
    ``index_type`` (:func:`index_type`); work-item and work-group indices are ``int`` except in a kernel that
    needs 64-bit indices (:func:`widen_indices`): with 64-bit ones PoCL 3.1 no longer vectorises a padding copy
    across its work-items (a dilated convolution's call 17% slower on Zen 3)."""
    code = Code()
    _print_body(kernel.body, kernel, code, index_type)
    body = code.render(base_indent=1, registers=kernel.registers, index=index_type)
    used_memories = set(kir.memories(kernel.body))
    used_params = {f.name for f in kir.value_fragments(kernel.body) if isinstance(f, Param)}
    args: list[str] = []
    params: list[str] = []
    for name, mem in buffers.items():
        if mem in used_memories and mem is not kernel.output:
            args.append(name)
            params.append(f"const global {c_type(mem.leaf)}* restrict {name}")
    for name, ctype in scalars:
        if name in used_params:
            args.append(name)
            params.append(f"const {ctype} {name}")
    out = kernel.output
    args.append(out.name)
    params.append(f"global {c_type(out.leaf)}* restrict {out.name}")
    funs = "".join(user_fun_source(f) + "\n" for f in kernel.user_funs.values())
    funs = "".join(h + "\n" for h in kernel.helpers.values()) + funs
    decls = "".join(f"    {m.declaration()}\n" for m in kernel.locals)
    signature = f"kernel void {kernel.name}(" + ",\n        ".join(params) + ")"
    return f"{header}\n\n{funs}{signature} {{\n{decls}{body}\n}}\n", tuple(args)


def _print_body(body: tuple, kernel: kir.Kernel, code: Code, index: str) -> None:
    for s in body:
        if isinstance(s, kir.Alloc):
            code.line(_Declaration(s.mem))
        elif isinstance(s, kir.Store):
            target = MemRef(s.mem, s.offset)
            if s.lane is not None:
                code.line(*_guarded(s.guards), target, f".s{s.lane:x} = ", s.value, ";")
            else:
                code.line(*_guarded(s.guards), target, " = ", s.value, ";")
        elif isinstance(s, kir.VStore):
            code.line(*_guarded(s.guards), f"vstore{s.width}(", s.value, f", 0, {s.mem.c_name} + ", s.offset, ");")
        elif isinstance(s, kir.Barrier):
            code.line(f"barrier({'CLK_LOCAL_MEM_FENCE' if s.space == 'local' else 'CLK_GLOBAL_MEM_FENCE'});")
        elif isinstance(s, (kir.Produce, kir.Unrolled)):
            if isinstance(s, kir.Unrolled):
                code.comment(s.label)
            _print_body(s.body, kernel, code, index)
        elif isinstance(s, kir.ParFor):
            _print_parallel_loop(s, kernel, code, index)
        elif isinstance(s, kir.SeqFor):
            name = s.var.name
            code.open(f"for ({index} {name} = {s.start}; {name} < {s.start + s.extent}; {name}++)")
            if s.label:
                code.comment(s.label)
            _print_body(s.body, kernel, code, index)
            code.close()
        elif isinstance(s, kir.If):
            tests = ([f"{s.lo} <= {s.var.name}"] if s.lo is not None else []) + \
                    ([f"{s.var.name} <= {s.hi}"] if s.hi is not None else [])
            code.open(f"if ({' && '.join(tests)})")
            code.comment(s.label)
            _print_body(s.then, kernel, code, index)
            code.close()
            code.open("else")
            _print_body(s.orelse, kernel, code, index)
            code.close()
        else:
            raise CodegenError(f"internal: no C for {type(s).__name__}")


def _guarded(guards) -> tuple:
    """The ``if (...)`` a guarded store starts with: its indices below their bounds."""
    if not guards:
        return ()
    parts: list = ["if ("]
    for k, (index, bound) in enumerate(guards):
        parts += ([" && "] if k else []) + [index, " < ", bound]
    return (*parts, ") ")


def _print_parallel_loop(s: kir.ParFor, kernel: kir.Kernel, code: Code, index: str) -> None:
    """A loop over the work-items (groups), dropped when there are as many as elements."""
    name, n, (query, count) = s.var.name, s.extent, s.queries
    threads = kernel.launch.threads(s.level, s.dim)
    ctype = "long" if kernel.long_indices else "int"
    if threads == n:
        code.line(f"{ctype} {name} = {query}({s.dim});  // {s.label}")
        _print_body(s.body, kernel, code, index)
        return
    if threads > n:
        code.open(f"for ({ctype} {name} = {query}({s.dim}); {name} < {n}; {name} += {threads})")
        code.comment(f"{s.label} ({threads} in the launch: at most one each)")
    else:
        code.open(f"for ({ctype} {name} = {query}({s.dim}); {name} < {n}; {name} += {count}({s.dim}))")
        code.comment(s.label)
    _print_body(s.body, kernel, code, index)
    code.close()


class _Declaration:
    """A private memory's declaration, rendered once the registers are known."""

    def __init__(self, mem: Memory):
        self.mem = mem

    def render(self, registers, index: str = "int") -> str:
        return self.mem.declaration(registers)


__all__ = ["compile_kernel", "CompiledKernel", "place_memory", "insert_barriers", "version_padded_reads",
           "interior_interval", "split_sequential_loops", "peel_padded_loops", "index_divisors", "allocate_private", "choose_launch",
           "print_opencl"]
