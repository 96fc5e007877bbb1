"""What a cost model reads of a candidate before it runs: features of its kernel IR and of the device.

A candidate is a generated program (:class:`~liftpy.codegen.program.GeneratedProgram`): its kernels' IR after
the passes, their launches and buffers. :func:`program_features` counts, over every kernel and weighted by how
often each statement runs (its loops' trip counts, the parallel ones included):

- the global bytes it reads and writes (:mod:`liftpy.codegen.traffic`'s count);
- its *reduction updates*: elements stored into a private or local memory by a value that reads that memory
  (``acc = acc + w * x``), the multiply-adds of a convolution or a product; and the other stores by space;
- its parallelism against the device: work-items, work-groups, a group's size, groups per compute unit;
- what a work-item keeps: private bytes and registers against the device's budget, local bytes a group;
- the widest vector it loads or stores, against the device's preferred width; kernels, unrolled blocks;
- its *instructions* in the device's vector registers (a vector of 16 lanes where the device prefers 8 is two):
  the loads from global or local memory (a gathered vector one per lane, a ``vload`` one per register) and the
  reduction updates, and their ratio: a step that loads more than it computes waits on its loads;
- the *cache lines* its global loads bring each time they run (:func:`_new_lines`: a load that moves by a line
  or more a step brings its lines each step, one that streams along a row a line every few steps, one that
  does not move with the loop around it none), and how many of them jump a page or more a step;
- the *streams* a step reads at once (its global loads that bring lines), and its lines over them
  (``stream_lines``); the lines that come from memory, not a cache (``memory_lines``: each buffer's lines once,
  shared among its loads as they bring them), and those over the streams from memory of their step
  (``memory_stream_lines``): a core keeps a few lines of each stream in flight, so a step that walks one row of
  a large matrix waits on each of its lines where one that walks eight rows waits once for eight -- up to the
  streams its prefetchers follow (:data:`PREFETCHED_STREAMS`); a step of more waits on each line again.

Ratios a model needs across tasks of different sizes are given too (updates per global byte; per work-item), and
the *reduction chain*: the updates each output waits on in turn (a 3x3 pooling's 9, a convolution's ``C kh kw``),
which tells a long dependent chain from a short one the core overlaps with the next (a trial featurised before it
existed lacks it: a model reads it as unknown).
:func:`choice_features` adds what the route's configuration says that the IR shows only in pieces: each choice
of :data:`~liftpy.rewrite.route.CHOICES`, and its register block -- the outputs a work-item keeps, the
accumulators they take against the device's vector registers, the values a step loads per update.
Nothing is run or compiled: featurising a candidate costs its generation only.
"""

from __future__ import annotations

import math
from typing import Mapping

from ..arith import affine_in
from ..codegen.c import MemRef, VLoad, fragments
from ..codegen.kir import If, Kernel, ParFor, Produce, SeqFor, Store, Unrolled, VStore, walk
from ..codegen.traffic import branch_share, kernel_traffic
from ..device import Device
from ..rewrite.route.choices import vectors_outer

#: what the features mean, stored with them: raised when a count changes meaning (3: a CPU compiler's vectorised
#: loops, and a block not unrolled, counted in vector instructions; 4: the streams a step reads, the lines from
#: memory), so that a model learns only from trials featurised alike (:func:`current`)
FEATURES_VERSION = 4

#: the features, in a model's column order
NAMES = (
    "global_read_bytes", "global_written_bytes", "reduction_updates", "private_stores", "local_stores",
    "global_stores", "updates_per_byte", "work_items", "work_groups", "group_size", "groups_per_unit",
    "waves", "updates_per_item", "private_bytes", "private_share", "registers", "local_bytes", "local_share",
    "vector_width", "vector_share", "kernels", "unrolled_blocks", "compute_units", "preferred_vector",
    "is_cpu", "load_instructions", "update_instructions", "loads_per_update_instruction",
    "cache_lines", "far_loads", "lines_per_update", "reduction_chain", "stream_lines", "streams",
    "memory_lines", "memory_stream_lines",
)


#: what :func:`choice_features` reads of a configuration: each route choice, then its register block
CHOICE_NAMES = (
    "parallel", "sequential_outer", "unroll", "local_size", "vector", "vector_outer", "pad_copy", "partial",
    "reorder", "local_memory", "chunk", "join_rows", "round_up",
    "blocked_levels", "block_outer", "block_inner", "block_outputs", "accumulators", "accumulator_share",
    "step_loads", "loads_per_update", "step_operands",
)


def current(features: Mapping[str, float] | None) -> bool:
    """Whether a trial's stored features were read as this liftpy reads them (:data:`FEATURES_VERSION`)."""
    return bool(features) and features.get("version") == FEATURES_VERSION


def choice_features(space, config: Mapping[str, int], device: Device) -> dict[str, float]:
    """What a route configuration says of its register block (see the module's docstring), by
    :data:`CHOICE_NAMES`: ``space`` is the configuration's :class:`~liftpy.rewrite.route.RouteSpace` (the joined
    rows' or a rounded level's where the configuration is of that side). Counted in the device's vector registers
    (a vector of 16 lanes where the device prefers 8 takes two): a block of ``a x b`` outputs with its ``a`` in
    vectors of ``v`` lanes keeps ``a b / v`` vector accumulators and loads ``a / v + b`` values a step (vectors
    and broadcasts), of which the ``a / v`` vectors and a broadcast are its operands, held in registers beside the
    accumulators while the step multiplies each broadcast by the vectors (a 1D block's: the value it broadcasts
    and a vector). Fewer loads per update, and accumulators and operands within the registers, make a faster
    step. On a CPU a block not unrolled is an array in memory, its inner level vectorised by the compiler: its
    accumulators are that level's vectors, in no register (none spills), each loaded a step beside the input's."""
    from ..rewrite.route.choices import ABSENT

    config = {**ABSENT, **config}
    side, own = space.side(config) if hasattr(space, "side") else (space, config)
    blocked = [b for b in (own.get(level.key, 1) for level in getattr(side, "levels", ())) if b > 1]  # outer first
    outer, inner = (blocked[0], blocked[-1]) if len(blocked) >= 2 else (1, blocked[0] if blocked else 1)
    outputs = math.prod(blocked) if blocked else max(1, config.get("partial", 0))
    lanes = config.get("vector", 0) or 1
    pieces = _registers(lanes, device.preferred_vector_width_float)
    share = 1 / device.vector_registers
    if blocked and lanes == 1 and not config.get("unroll") and device.is_cpu:
        # a block not unrolled is an array in memory whose inner level the compiler vectorises
        # (:func:`_compiler_lanes`): a step loads and updates each vector of it, beside a broadcast
        compiled = min(device.preferred_vector_width_float, inner)
        accumulators = outputs / compiled
        loads, operands, share = 2 * accumulators + outer, 2, 0.0  # no register holds it: none spills
    elif len(blocked) >= 2:
        vectorised, other = (outer, inner) if vectors_outer(config.get("vector_outer", 0)) else (inner, outer)
        loads = vectorised / lanes * pieces + other
        operands = vectorised / lanes * pieces + 1
        accumulators = outputs / lanes * pieces
    else:
        loads = outputs / lanes * pieces + 1
        operands = 2
        accumulators = outputs / lanes * pieces
    out = {name: float(config.get(name, 0) or 0) for name in CHOICE_NAMES[:13]}
    out.update(blocked_levels=len(blocked), block_outer=outer, block_inner=inner, block_outputs=outputs,
               accumulators=accumulators, accumulator_share=accumulators * share,
               step_loads=loads, loads_per_update=loads / max(1.0, accumulators), step_operands=operands)
    return {name: float(out[name]) for name in CHOICE_NAMES}


def program_features(generated, device: Device) -> dict[str, float]:
    """The features of a generated program on ``device`` (see the module's docstring), by :data:`NAMES`."""
    totals = dict.fromkeys(("global_read_bytes", "global_written_bytes", *_COUNTED), 0.0)
    work_items = work_groups = group_size = 0
    private_bytes = registers = local_bytes = width = 0
    kernels = [plan for plan in generated.kernels if plan.ir is not None]
    for plan in kernels:
        ir: Kernel = plan.ir
        traffic = kernel_traffic(ir)
        totals["global_read_bytes"] += traffic.read
        totals["global_written_bytes"] += traffic.written
        for name, value in _weighted_counts(ir, device.preferred_vector_width_float, device.is_cpu).items():
            totals[name] += value
        launch = plan.launch
        items = math.prod(launch.global_size)
        size = math.prod(launch.local_size) if launch.local_size else 1
        if items >= work_items:  # the widest kernel's parallelism stands for the program's
            work_items, group_size, work_groups = items, size, max(1, items // max(1, size))
        private_bytes = max(private_bytes, ir.private_bytes)
        registers = max(registers, sum(m.size for m in ir.registers))
        local_bytes = max(local_bytes, sum(m.bytes for m in ir.locals))
        width = max(width, _widest_vector(ir))
    units = max(1, device.compute_units)
    output_elements = math.prod(generated.buffer(generated.output).shape)
    moved = totals["global_read_bytes"] + totals["global_written_bytes"]
    out = {
        **totals,
        "updates_per_byte": totals["reduction_updates"] / max(1.0, moved),
        "work_items": work_items,
        "work_groups": work_groups,
        "group_size": group_size,
        "groups_per_unit": work_groups / units,
        "waves": math.ceil(work_groups / units),
        "updates_per_item": totals["reduction_updates"] / max(1, work_items),
        "private_bytes": private_bytes,
        "private_share": private_bytes / 4 / max(1, device.private_mem_budget),
        "registers": registers,
        "local_bytes": local_bytes,
        "local_share": local_bytes / max(1, device.local_mem_size),
        "vector_width": width,
        "vector_share": width / max(1, device.preferred_vector_width_float),
        "kernels": len(generated.kernels),
        "compute_units": units,
        "preferred_vector": device.preferred_vector_width_float,
        "is_cpu": float(device.is_cpu),
        "loads_per_update_instruction": totals["load_instructions"] / max(1.0, totals["update_instructions"]),
        "lines_per_update": totals["cache_lines"] / max(1.0, totals["update_instructions"]),
        "reduction_chain": totals["reduction_updates"] / max(1, output_elements),
        "streams": totals["cache_lines"] / totals["stream_lines"] if totals["stream_lines"] else 0.0,
    }
    return {name: float(out[name]) for name in NAMES}


#: what :func:`_weighted_counts` counts
_COUNTED = ("reduction_updates", "private_stores", "local_stores", "global_stores", "unrolled_blocks",
            "load_instructions", "update_instructions", "cache_lines", "far_loads", "stream_lines", "memory_lines",
            "memory_stream_lines")

#: bytes of a cache line, and of a page: a load whose address moves a line or more a step brings a new line each
#: step (a stream of smaller steps brings one every few); one that moves a page or more defeats the prefetchers
#: and the TLB's reach
LINE_BYTES = 64
PAGE_BYTES = 4096
#: the streams a core's prefetchers follow at once (Intel's L2 streamer: 32, a page each): a step that reads more
#: streams from memory than that waits on each of their lines, as a step of one stream does
PREFETCHED_STREAMS = 32


def _weighted_counts(kernel: Kernel, preferred: int, is_cpu: bool = False) -> Mapping[str, float]:
    """Elements stored, by kind, and load and update instructions (in vector registers of ``preferred`` lanes),
    each weighted by how often its statement runs (both sides of a padding branch counted at the share of its
    loop it covers: the traffic count's rule). On a CPU an innermost loop the C compiler vectorises
    (:func:`_compiler_lanes`) takes an instruction per ``preferred`` of its steps, a load whose address moves by
    ``k`` elements a step ``k`` of them (its lanes gathered from ``k`` registers), one that does not move one.
    A step's global loads that bring lines are its streams: each one's lines count over their number in
    ``stream_lines``; a buffer's lines come from memory once, its loads' share of them in ``memory_lines`` (over
    their step's streams from memory -- each load's share of its lines from memory, summed -- in
    ``memory_stream_lines``)."""
    counts = dict.fromkeys(_COUNTED, 0.0)
    extents: dict = {}
    in_registers = set(kernel.registers)

    def go(body: tuple, times: float, loaded: set, streams: list, loops: tuple = (),
           vectorised: tuple | None = None):
        """``loaded``: what a loop's step has loaded so far -- the same element again is no load (the C
        compiler's common subexpressions), within an unrolled block too; ``loops``: the enclosing loops'
        (variable, trip count), innermost last, whose steps move the loads' addresses; ``vectorised``: the
        loop the compiler vectorises (variable, lanes) where the statements are its steps; ``streams``: the
        lines each of the step's global loads brings (a stream each)."""
        for s in body:
            if isinstance(s, (Store, VStore)):
                lanes = (s.width if isinstance(s, VStore) else 1) * _lanes(s.mem)
                space = s.mem.space
                counts[f"{space}_stores" if space in ("private", "local", "global") else "private_stores"] += \
                    times * lanes
                parts = list(fragments(s.value))
                if space != "global" and any(isinstance(f, (MemRef, VLoad)) and f.mem is s.mem for f in parts):
                    counts["reduction_updates"] += times * lanes
                    counts["update_instructions"] += times * (_registers(lanes, preferred) if vectorised is None
                                                              else 1 / vectorised[1])
                for f in parts:
                    loads = isinstance(f, VLoad) or (isinstance(f, MemRef) and not f.mem.is_variable
                                                     and f.mem not in in_registers)
                    if loads and (key := (id(f.mem), str(f.offset), isinstance(f, VLoad))) not in loaded:
                        loaded.add(key)
                        read = f.width * _lanes(f.mem) if isinstance(f, VLoad) else _lanes(f.mem)
                        counts["load_instructions"] += times * (_registers(read, preferred) if vectorised is None
                                                                else _strided_loads(f, *vectorised))
                        if f.mem.space == "global":
                            lines, far = _new_lines(f, loops)
                            counts["cache_lines"] += times * lines
                            counts["far_loads"] += times * far
                            if lines:
                                streams.append((f.mem, times * lines))
            elif isinstance(s, (ParFor, SeqFor)):
                extents[s.var] = (s.start if isinstance(s, SeqFor) else 0, s.extent)
                lanes = _compiler_lanes(s, preferred, in_registers) if is_cpu else 0
                step: list = []
                steps.append(step)
                go(s.body, times * s.extent, set(), step, (*loops, (s.var, s.extent)),
                   (s.var, lanes) if lanes > 1 else None)
            elif isinstance(s, Unrolled):
                counts["unrolled_blocks"] += 1
                go(s.body, times, loaded, streams, loops)
            elif isinstance(s, Produce):
                go(s.body, times, loaded, streams, loops)
            elif isinstance(s, If):
                inside = branch_share(s, extents.get(s.var))
                go(s.then, times * inside, set(loaded), streams, loops)
                go(s.orelse, times * (1 - inside), set(loaded), streams, loops)

    steps: list[list] = [[]]  # each step's streams: (memory, lines it brings), the kernel's own first
    go(kernel.body, 1.0, set(), steps[0])
    brought: dict = {}  # lines brought of each buffer, by all its loads
    for step in steps:
        for memory, lines in step:
            brought[memory] = brought.get(memory, 0.0) + lines
    first = {m: min(1.0, -(-m.bytes // LINE_BYTES) / lines) for m, lines in brought.items()}  # first touches
    for step in steps:
        if step:
            counts["stream_lines"] += sum(lines for _, lines in step) / len(step)
            memory = sum(lines * first[m] for m, lines in step)
            from_memory = sum(first[m] for m, _ in step)  # the step's streams from memory
            counts["memory_lines"] += memory
            counts["memory_stream_lines"] += (memory / max(1.0, from_memory) if from_memory <= PREFETCHED_STREAMS
                                              else memory)
    return counts


def _new_lines(load, loops: tuple) -> tuple[float, float]:
    """The new cache lines a global load brings each time it runs, and how often its address then moved a page
    or more (0 to 1), inside ``loops`` ((variable, trip count), innermost last). Its address moves with the
    innermost loop whose variable it depends on; the loops inside that one reuse its line. A pass of that loop
    touches every line its steps span where a step moves less than a line, else the load's lines at each
    step; a pass is taken to start on lines not touched before (the loops outside move to other rows, planes
    or blocks). An address not affine in that variable is taken as moving by a page a step."""
    offset = load.offset
    inner_trips = 1
    for var, trips in reversed(loops):
        if var in offset.free_vars():
            break
        inner_trips *= trips
    else:
        return 0.0, 0.0  # the same element for the whole kernel: once, not counted
    moved = _moved(offset, var)
    step = abs(moved) * load.mem.leaf_bytes if moved is not None else PAGE_BYTES
    span = load.mem.leaf_bytes * (load.width if isinstance(load, VLoad) else 1)
    per_step = -(-span // LINE_BYTES)
    lines = trips * per_step if step >= LINE_BYTES else -(-(max(0, trips - 1) * step + span) // LINE_BYTES)
    runs = max(1, trips) * max(1, inner_trips)  # a loop of no step runs the load no time: its count is 0 anyway
    return lines / runs, float(step >= PAGE_BYTES) / max(1, inner_trips)


def _compiler_lanes(loop, preferred: int, in_registers) -> int:
    """The lanes a CPU's C compiler vectorises a sequential loop into (its steps in vector registers of
    ``preferred`` lanes), or 0: an innermost loop of scalar stores, each into memory (not registers) at an address
    that moves by one element a step -- an array of accumulators updated in place (``acc[i] = max(acc[i],
    x[2 i + j])``), which the compiler keeps in vectors; an unrolled block's are registers already."""
    if not isinstance(loop, SeqFor) or loop.extent < 2 or not loop.body:
        return 0
    for s in loop.body:
        if not isinstance(s, Store) or s.guards or s.lane is not None or s.mem in in_registers or s.mem.is_variable:
            return 0
        if _lanes(s.mem) != 1 or _moved(s.offset, loop.var) not in (1, -1):
            return 0
        if any(isinstance(f, VLoad) or (isinstance(f, MemRef) and _lanes(f.mem) != 1) for f in fragments(s.value)):
            return 0
    return min(preferred, loop.extent)


def _strided_loads(load, var, lanes: int) -> float:
    """Load instructions a step of a loop the compiler vectorises into ``lanes`` lanes takes for ``load``: one
    per vector where its address does not move (a broadcast) or moves by one element, ``k`` where it moves by
    ``k`` (at most a gather's ``lanes``)."""
    offset = load.offset
    if var not in offset.free_vars():
        return 1 / lanes
    moved = _moved(offset, var)
    if moved is None:
        return 1.0
    return min(max(1, abs(moved)), lanes) / lanes


def _moved(offset, var) -> int | None:
    """The elements an address ``offset`` moves by a step of loop variable ``var``; None where it is not affine
    in it."""
    return (offset.subs({var: 1}) - offset.subs({var: 0})).as_int() if affine_in(offset, var) else None


def _registers(lanes: int, preferred: int) -> int:
    """The device's vector registers (of ``preferred`` lanes) a value of ``lanes`` floats takes: an instruction
    each to load or update it."""
    return -(-lanes // max(1, preferred))


def _lanes(memory) -> int:
    """Floats in one element of ``memory`` (a vector's lanes)."""
    return memory.leaf_bytes // 4


def _widest_vector(kernel: Kernel) -> int:
    widest = 1
    for s in walk(kernel.body):
        if isinstance(s, VStore):
            widest = max(widest, s.width * _lanes(s.mem))
        if isinstance(s, (Store, VStore)):
            widest = max(widest, _lanes(s.mem))
            for f in fragments(s.value):
                if isinstance(f, VLoad):
                    widest = max(widest, f.width * _lanes(f.mem))
                elif isinstance(f, MemRef):
                    widest = max(widest, _lanes(f.mem))
    return widest


__all__ = ["FEATURES_VERSION", "NAMES", "CHOICE_NAMES", "current", "choice_features", "program_features"]
