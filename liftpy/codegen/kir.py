"""The kernel IR: one OpenCL kernel as loops, allocations and assignments, between the functional IR and C.

Lowering (:mod:`liftpy.codegen.lower`) turns a kernel's expression into a :class:`Kernel`; the passes of
:mod:`liftpy.codegen.passes` transform it (each returns a new kernel: nodes are frozen) and the last one prints
OpenCL C. Statements:

* :class:`ParFor` -- a parallel map's loop over work-items or work-groups: its level (``"global"``,
  ``"work-group"``, ``"local"``) and dimension. Whether it prints as a loop depends on the launch.
* :class:`SeqFor` -- a sequential loop; :class:`Unrolled` -- the steps of an unrolled one, written out.
* :class:`Alloc` -- a private, local or global memory comes into existence here; :class:`Produce` -- the
  statements computing a value into memory that the work-items after it read (where barriers go).
* :class:`Store` / :class:`VStore` -- an assignment (one element, or a vector of neighbours) through an index
  expression of :mod:`liftpy.arith`; values are :class:`~liftpy.codegen.c.CExpr` trees whose loads,
  vector loads and padded reads stay structured (:mod:`liftpy.codegen.c`). Its ``guards`` (index, bound)
  make it conditional: written only where each index is below its bound (the elements a cropped result
  drops: a map rounded up to a multiple of its block, ``roundUp``).
* :class:`Barrier`, :class:`If` (only the padding versions).

:func:`format_kernel` prints a kernel for people (``liftpy compile --show-ir``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Union

from .. import arith
from .c import CExpr, Memory, MemRef, VLoad, c_type, fragments, indices, substitute


# ------------------------------------------------------------------------------------------------ statements
@dataclass(frozen=True)
class Alloc:
    """A private, local or global memory starts here (local ones are declared at the kernel's top)."""

    mem: Memory


@dataclass(frozen=True)
class Store:
    """``mem[offset] = value`` (``lane``: one lane of a vector element), only where each of ``guards``'
    indices is below its bound."""

    mem: Memory
    offset: arith.Expr
    value: CExpr
    lane: int | None = None
    guards: tuple[tuple[arith.Expr, arith.Expr], ...] = ()


@dataclass(frozen=True)
class VStore:
    """``vstoreN(value, 0, mem + offset)``: N neighbouring elements in one store (``guards`` as a Store's)."""

    mem: Memory
    offset: arith.Expr
    width: int
    value: CExpr
    guards: tuple[tuple[arith.Expr, arith.Expr], ...] = ()


@dataclass(frozen=True)
class Barrier:
    space: str  # "local" or "global": the memory fence


@dataclass(frozen=True)
class Produce:
    """Statements computing a value into memory of ``space`` that what follows reads."""

    space: str
    body: tuple


@dataclass(frozen=True)
class ParFor:
    """A parallel map's loop: ``var`` over ``extent`` elements, spread over the work-items (``"global"``,
    ``"local"``) or work-groups (``"work-group"``) of dimension ``dim``."""

    var: arith.Var
    extent: int
    level: str
    dim: int
    label: str
    body: tuple
    queries: tuple[str, str] = ("get_global_id", "get_global_size")  # the index and the count, in OpenCL
    stages: bool = False  # a mapLcl that only copies (into local memory): walked in strides by the group


@dataclass(frozen=True)
class SeqFor:
    """A sequential loop ``for var in [start, start + extent)``; ``splittable``: its steps may be regrouped into
    a nest. Lowering makes every loop start at 0; only :func:`~.passes.peel_padded_loops` moves the start."""

    var: arith.Var
    extent: int
    label: str | None
    body: tuple
    splittable: bool = True
    start: int = 0


@dataclass(frozen=True)
class Unrolled:
    """An unrolled loop: its steps, written out with constant indices."""

    label: str
    body: tuple


@dataclass(frozen=True)
class If:
    """``if (lo <= var && var <= hi) then else orelse``; only the interior/border versions use it."""

    var: arith.Var
    lo: int | None
    hi: int | None
    label: str
    then: tuple
    orelse: tuple


Stmt = Union[Alloc, Store, VStore, Barrier, Produce, ParFor, SeqFor, Unrolled, If]
BODIES = {Produce: ("body",), ParFor: ("body",), SeqFor: ("body",), Unrolled: ("body",), If: ("then", "orelse")}


@dataclass(frozen=True)
class Kernel:
    """One kernel. ``locals``: local memories declared at its top; ``registers``: private arrays printed as one
    variable per element; ``private_bytes``: private memory over all its code (both padding versions);
    ``launch``: the NDRange, once chosen."""

    name: str
    body: tuple
    output: Memory
    user_funs: dict = field(default_factory=dict)  # UserFun by name
    helpers: dict = field(default_factory=dict)  # OpenCL helper functions by name
    locals: tuple = ()
    registers: frozenset = frozenset()
    private_bytes: int = 0
    launch: object = None  # a liftpy.codegen.launch.Launch
    long_indices: bool = False  # every index 64-bit, work-items' too: its arithmetic can leave 32 bits


# ------------------------------------------------------------------------------------------------ traversal
def walk(body: tuple) -> Iterator[Stmt]:
    """Every statement of a body, outer first, in program order."""
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        yield s
        for name in reversed(BODIES.get(type(s), ())):
            stack.extend(reversed(getattr(s, name)))


def map_bodies(stmt: Stmt, f: Callable[[tuple], tuple]) -> Stmt:
    """``stmt`` with ``f`` applied to each body it holds."""
    names = BODIES.get(type(stmt))
    if not names:
        return stmt
    return replace(stmt, **{name: f(getattr(stmt, name)) for name in names})


def values(stmt: Stmt) -> tuple[CExpr, ...]:
    if isinstance(stmt, (Store, VStore)):
        return (stmt.value,)
    return ()


def index_exprs(body: tuple) -> Iterator[arith.Expr]:
    """Every index expression of a body: store offsets, their guards and what the values read through."""
    for s in walk(body):
        if isinstance(s, (Store, VStore)):
            yield s.offset
            for index, bound in s.guards:
                yield index
                yield bound
            yield from indices(s.value)


def substitute_body(body: tuple, change: Callable[[arith.Expr], arith.Expr]) -> tuple:
    """``body`` with ``change`` (a pure function) applied to every index expression (reads simplify again).
    Each distinct expression is changed once: an unrolled block repeats its indices in every step (a 16 x 14
    block's loop split by its divisors spent seconds substituting the same few indices)."""
    memo: dict[arith.Expr, arith.Expr] = {}

    def changed(e: arith.Expr) -> arith.Expr:
        out = memo.get(e)
        if out is None:
            out = memo[e] = change(e)
        return out

    def go(s: Stmt) -> Stmt:
        if isinstance(s, (Store, VStore)):
            return replace(s, offset=changed(s.offset), value=substitute(s.value, changed),
                           guards=tuple((changed(i), changed(b)) for i, b in s.guards))
        return map_bodies(s, lambda b: tuple(go(x) for x in b))

    return tuple(go(s) for s in body)


def value_fragments(body: tuple) -> Iterator[object]:
    """Every fragment of every value the body stores (its loads, padded reads, parameters...)."""
    for s in walk(body):
        for v in values(s):
            yield from fragments(v)


def memories(body: tuple) -> Iterator[Memory]:
    """The memories a body reads or writes, in order of first use (with repetitions)."""
    for s in walk(body):
        if isinstance(s, (Store, VStore)):
            yield s.mem
    for f in value_fragments(body):
        if isinstance(f, (MemRef, VLoad)):
            yield f.mem


# ------------------------------------------------------------------------------------------------ for people
def _guards_text(guards) -> str:
    return "".join(f"if {index} < {bound}: " for index, bound in guards)


def format_kernel(kernel: Kernel) -> str:
    """The kernel IR as indented text (not C: loops say their level, memories their space)."""
    lines = [f"kernel {kernel.name} -> {kernel.output.name}[{kernel.output.size}]"]
    if kernel.launch is not None:
        lines[0] += f"  launch global={kernel.launch.global_size} local={kernel.launch.local_size}"
    if kernel.private_bytes:
        lines.append(f"  // private memory: {kernel.private_bytes} bytes per work-item (all versions)")
    for mem in kernel.locals:
        lines.append(f"  local {c_type(mem.leaf)} {mem.name}[{mem.size}]")

    def go(body: tuple, depth: int):  # loads and stores as the C will print them (registers, variables)
        pad = "  " * depth
        for s in body:
            if isinstance(s, Alloc):
                reg = " (registers)" if s.mem in kernel.registers else ""
                lines.append(f"{pad}{s.mem.space} {c_type(s.mem.leaf)} {s.mem.name}[{s.mem.size}]{reg}")
            elif isinstance(s, Store):
                lane = f".s{s.lane:x}" if s.lane is not None else ""
                target = MemRef(s.mem, s.offset).render(kernel.registers)
                lines.append(f"{pad}{_guards_text(s.guards)}{target}{lane} = {s.value.render(kernel.registers)}")
            elif isinstance(s, VStore):
                lines.append(f"{pad}{_guards_text(s.guards)}{s.mem.name}[{s.offset} : +{s.width}] = "
                             f"{s.value.render(kernel.registers)}")
            elif isinstance(s, Barrier):
                lines.append(f"{pad}barrier {s.space}")
            elif isinstance(s, Produce):
                lines.append(f"{pad}produce {s.space}:")
                go(s.body, depth + 1)
            elif isinstance(s, ParFor):
                lines.append(f"{pad}for {s.var.name} < {s.extent} parallel {s.level}({s.dim}):  // {s.label}")
                go(s.body, depth + 1)
            elif isinstance(s, SeqFor):
                label = f"  // {s.label}" if s.label else ""
                bounds = f"{s.start} <= {s.var.name} < {s.start + s.extent}" if s.start else f"{s.var.name} < {s.extent}"
                lines.append(f"{pad}for {bounds}:{label}")
                go(s.body, depth + 1)
            elif isinstance(s, Unrolled):
                lines.append(f"{pad}unrolled:  // {s.label}")
                go(s.body, depth + 1)
            elif isinstance(s, If):
                lines.append(f"{pad}if {s.lo} <= {s.var.name} <= {s.hi}:  // {s.label}")
                go(s.then, depth + 1)
                lines.append(f"{pad}else:")
                go(s.orelse, depth + 1)
    go(kernel.body, 1)
    return "\n".join(lines)


__all__ = ["Kernel", "Stmt", "Alloc", "Store", "VStore", "Barrier", "Produce", "ParFor", "SeqFor",
           "Unrolled", "If", "walk", "map_bodies", "index_exprs", "substitute_body", "memories", "values", "value_fragments", "format_kernel"]
