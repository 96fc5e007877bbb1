"""Data movement: the bytes a kernel asks of global memory, counted from its kernel IR.

The model is the simplest one that sees blocking: every distinct global load of a straight-line region (a
loop's step, an unrolled block, a padding version's branch) is counted once each time the region runs --
what a C compiler keeps in a register after common-subexpression elimination -- and no cache is modelled.
A guarded store (a rounded map's cropped results) counts as written: the few a crop drops are not told apart.
So a block of 16 kernels x 28 pixels, reading a vector of weights once for 28 pixels, asks for fewer bytes
than one of 16 x 4 pixels, which reads the same weights seven times as often.

Why, before a full analytic model exists: on a machine shared with other tenants, two kernels whose measured
times cannot be told apart are not equally exposed to the others' use of the caches (VGG-16 layer 19, e04a4bd,
in ``benchmarks/results/README.md``). The tuning database keeps each trial's figure, and
:func:`liftpy.tuning.db.ranked` prefers the kernel moving less data among those the machine cannot tell apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from .c import MemRef, VLoad, fragments
from .kir import If, Kernel, ParFor, Produce, SeqFor, Store, Unrolled, VStore


@dataclass(frozen=True)
class Traffic:
    """Bytes read from and written to global memory by one launch."""

    read: int
    written: int

    @property
    def total(self) -> int:
        return self.read + self.written

    def __add__(self, other: "Traffic") -> "Traffic":
        return Traffic(self.read + other.read, self.written + other.written)


NO_TRAFFIC = Traffic(0, 0)


def kernel_traffic(kernel: Kernel) -> Traffic:
    """The global bytes one launch of ``kernel`` reads and writes (see the module's docstring)."""
    extents: dict = {}  # loop variable -> (start, extent), for the share of a loop a padding branch covers

    def region(body: tuple, times: float) -> Traffic:
        loads: set = set()  # (memory, offset, elements): one straight-line region's distinct loads
        nested = NO_TRAFFIC
        written = 0.0

        def straight(stmts: tuple):
            nonlocal nested, written
            for s in stmts:
                if isinstance(s, (Store, VStore)):
                    if s.mem.space == "global":
                        written += times * (s.width if isinstance(s, VStore) else 1) * s.mem.leaf_bytes
                    for f in fragments(s.value):
                        if isinstance(f, (MemRef, VLoad)) and f.mem.space == "global":
                            loads.add((f.mem, f.offset, f.width if isinstance(f, VLoad) else 1))
                elif isinstance(s, (ParFor, SeqFor)):
                    extents[s.var] = (s.start if isinstance(s, SeqFor) else 0, s.extent)
                    nested += region(s.body, times * s.extent)
                elif isinstance(s, (Unrolled, Produce)):
                    straight(s.body)
                elif isinstance(s, If):
                    inside = branch_share(s, extents.get(s.var))
                    nested += region(s.then, times * inside) + region(s.orelse, times * (1 - inside))

        straight(body)
        read = times * sum(elements * mem.leaf_bytes for mem, _, elements in loads)
        return nested + Traffic(read, written)

    total = region(kernel.body, 1)
    return Traffic(round(total.read), round(total.written))


def branch_share(branch: If, loop: tuple[int, int] | None) -> float:
    """The share of its loop's steps that take an interior/border branch's ``then`` side (all, when the loop
    is unknown: the interior version is the one that runs most)."""
    if loop is None:
        return 1.0
    start, extent = loop
    lo = start if branch.lo is None else max(start, branch.lo)
    hi = start + extent - 1 if branch.hi is None else min(start + extent - 1, branch.hi)
    return max(0, hi - lo + 1) / extent if extent else 1.0


__all__ = ["Traffic", "kernel_traffic", "NO_TRAFFIC"]
