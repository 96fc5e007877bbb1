"""A kernel's NDRange: global and local sizes from its parallel loops and the device.

``mapGlb/mapWrg/mapLcl(d)`` set the sizes of dimension ``d`` (the paper's table 1). A kernel of mapGlb only
leaves the local size free; on a CPU it is chosen so that every core has work-groups to the end
(:func:`cpu_work_groups`), within what the work-items' private memory allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import arith
from ..device import Device
from ..errors import CodegenError
from ..ir import Lambda, Node
from ..primitives import primitive_of
from .kir import BODIES, Kernel, ParFor, Produce
from .memory import only_copies


@dataclass(frozen=True)
class ParallelMap:
    """A parallel map of a kernel's expression: its level and dimension, its length, and for a mapLcl the
    work-group it makes with the mapLcl maps around it (their lengths, outermost first, its own last)."""

    node: Node
    level: str
    dim: int
    extent: arith.Expr
    group: tuple = ()
    #: a mapLcl that copies into local memory (``toLocal(mapLcl(...))``): the group's work-items walk it in
    #: strides, so its length sets no work-group size (see :func:`extents`)
    stages: bool = False


def stages(node: Node) -> bool:
    """A mapLcl that only copies: as the function of a ``toLocal``, the group's work-items walk it in strides."""
    prim = primitive_of(node)
    return prim is not None and prim.parallel == "local" and len(node.args) == 2 and only_copies(node.args[0])


def parallel_maps(expr: Node) -> list[ParallelMap]:
    """The parallel maps of a kernel's expression, sizes symbolic or not: what :func:`launch_for` makes the
    NDRange of once they are loops of the kernel IR, and what the parameter space bounds by the device's
    work-group limits before any size is chosen. A map's data is computed outside the work-items of the
    mapLcl that reads it; its function runs inside them."""
    out: list[ParallelMap] = []

    def go(node: Node, group: tuple, staging: bool = False):
        prim = primitive_of(node)
        if prim is not None and prim.parallel:
            extent = node.args[-1].type.size
            inner = group + (extent,) if prim.parallel == "local" else group
            out.append(ParallelMap(node, prim.parallel, node.params[0], extent,
                                   inner if prim.parallel == "local" else (), staging and prim.parallel == "local"))
            for f in node.args[:-1]:
                go(f, inner)
            go(node.args[-1], group)
            return
        if prim is not None and prim.space == "local" and isinstance(node.args[0], Lambda) \
                and stages(node.args[0].body):
            go(node.args[0].body, group, staging=True)
            for arg in node.args[1:]:
                go(arg, group)
            return
        for child in node.children():
            go(child, group)

    go(expr, ())
    return out


def extents(kernel: Kernel) -> dict[str, dict[int, int]]:
    """The longest parallel loop of each level and dimension of a kernel in kernel IR. A local loop that only
    copies a value into local memory (the first loop of a local Produce, a loop of :func:`stages`) counts only
    in a dimension no other local loop has: the group's work-items are those of the loops that compute, and
    walk a longer copy in strides (a convolution's weights copied by a group of 8 pixels need not make it a
    group of 576)."""
    table: dict[str, dict[int, int]] = {"work-group": {}, "local": {}, "global": {}}
    staging: dict[int, int] = {}

    def visit(body: tuple, in_local_produce: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ParFor):
                level = staging if in_local_produce and stmt.stages else table[stmt.level]
                level[stmt.dim] = max(level.get(stmt.dim, 0), stmt.extent)
            for name in BODIES.get(type(stmt), ()):
                visit(getattr(stmt, name), isinstance(stmt, Produce) and stmt.space == "local")

    visit(kernel.body, False)
    for dim, extent in staging.items():
        table["local"].setdefault(dim, extent)
    return table


@dataclass(frozen=True)
class Launch:
    """The NDRange of a kernel: global and local sizes per dimension (local None: the runtime chooses)."""

    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None

    def threads(self, parallel: str, dim: int) -> int:
        """How many work-items ("global", "local") or work-groups ("work-group") run along ``dim``."""
        if parallel == "global":
            return self.global_size[dim]
        assert self.local_size is not None
        if parallel == "local":
            return self.local_size[dim]
        return self.global_size[dim] // self.local_size[dim]


def launch_for(kernel: Kernel, device: Device) -> Launch:
    """The NDRange from the kernel's parallel loops (the paper's table 1): groups from mapWrg, work-items per
    group from mapLcl, global work-items from mapGlb; local sizes shrunk to fit the device (loops take the rest).
    A mapGlb kernel's local size is free: on a CPU it is chosen (:func:`cpu_work_groups`) for work-items with
    the kernel's private memory."""
    table = extents(kernel)
    wrg, lcl, glb = table["work-group"], table["local"], table["global"]
    if not wrg and not glb:
        raise CodegenError(f"kernel {kernel.name} needs a parallel map (mapGlb or mapWrg) at its top")
    dims = max([*wrg, *glb]) + 1
    if glb:
        global_size = tuple(glb.get(d, 1) for d in range(dims))
        return Launch(global_size, cpu_work_groups(global_size, device, private_bytes=kernel.private_bytes)
                      if device.is_cpu else None)
    local = [min(lcl.get(d, 1), device.max_work_item_sizes[d] if d < len(device.max_work_item_sizes) else 1)
             for d in range(dims)]
    while math.prod(local) > device.max_work_group_size:
        biggest = max(range(dims), key=lambda d: local[d])
        local[biggest] = (local[biggest] + 1) // 2
    groups = [wrg.get(d, 1) for d in range(dims)]
    return Launch(tuple(g * l for g, l in zip(groups, local)), tuple(local))


def _divisors(n: int) -> list[int]:
    small = [c for c in range(1, math.isqrt(n) + 1) if n % c == 0]
    return sorted({*small, *(n // c for c in small)})


#: private memory of one work-group on a CPU: PoCL keeps every work-item's private values for the whole group
#: on a worker thread's stack. A group of 392 work-items with 8 KiB each crashed it (SIGSEGV); 56 did not.
CPU_GROUP_PRIVATE_BYTES = 512 * 1024


def cpu_work_groups(global_size: tuple[int, ...], limits: Device, per_unit: int = 8,
                    private_bytes: int = 0) -> tuple[int, ...]:
    """Local sizes for a mapGlb kernel on a CPU, where the code does not depend on them.

    A CPU driver runs each work-group on one thread, so what matters is enough groups to keep every core busy
    to the end: at least ``per_unit`` per compute unit, a multiple of the units where possible (PoCL's own
    choice left a core idle for half a round on VGG-16 layer 19: ``benchmarks/results/notes-compiler.md``). Groups
    are grown from dimension 0 outwards and stop at the first dimension not taken whole, so a group's work-items
    are neighbours in the innermost dimensions (there, the pixels sharing one group of weights). A group's
    private memory (``private_bytes`` per work-item) stays within :data:`CPU_GROUP_PRIVATE_BYTES`."""
    target = per_unit * max(1, limits.compute_units)
    groups = math.prod(global_size)
    local = [1] * len(global_size)
    largest = min(limits.max_work_group_size, max(1, CPU_GROUP_PRIVATE_BYTES // max(1, private_bytes)))
    for d, n in enumerate(global_size):
        cap = min(largest // math.prod(local),
                  limits.max_work_item_sizes[d] if d < len(limits.max_work_item_sizes) else 1)
        fits = [c for c in _divisors(n) if c <= cap and groups // c >= target]
        if not fits:
            break
        balanced = [c for c in fits if (groups // c) % max(1, limits.compute_units) == 0]
        local[d] = max(balanced or fits)
        groups //= local[d]
        if local[d] < n:
            break
    return tuple(local)


__all__ = ["Launch", "launch_for", "cpu_work_groups", "CPU_GROUP_PRIVATE_BYTES", "ParallelMap", "parallel_maps", "extents"]
