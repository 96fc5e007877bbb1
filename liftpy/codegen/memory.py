"""Where values live: the memory plan the lowering follows and the parameter space's resource constraints read.

A kernel computes some values into memory of their own before they are used: a reduction's accumulator, a
``val`` that computes, a map or a copy (``toPrivate``...) whose value is an argument of something else.
:func:`placements` finds each of them, the level it is computed at (the kernel, a work-group, a work-item) and
the address space it goes to (:func:`memory_space`: what the program asks with ``toGlobal``/``toLocal``/
``toPrivate``, else the level's own: global, local, private), with its size as an expression of the
program's sizes. The lowering (:mod:`.lower`) allocates exactly these and refuses any other, so the
parameter space's private- and local-memory constraints (:mod:`liftpy.params`), which read the same
plan with the tuning parameters still free, cannot drift from what the code generator does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import arith
from ..ir import Apply, Lambda, Let, Node, Prim, PVar, ScalarOp, Tuple, UserFun, Var
from ..primitives import is_view, primitive_of
from ..types import ArrayType, TupleType, Type, VectorType

#: the address space of a value computed at a level, when the program does not say
LEVEL_SPACE = {"kernel": "global", "group": "local", "item": "private"}


@dataclass(frozen=True)
class Placement:
    """A value computed into memory of its own: ``elements`` scalars (vector lanes counted) in ``space``."""

    node: Node
    space: str
    level: str

    @property
    def elements(self) -> arith.Expr:
        return scalar_count(self.node.type)


def memory_space(node: Node, level: str, requested: str | None = None) -> str:
    """The address space a value computed at ``level`` goes to: ``requested`` (a reduction's accumulator asks
    for private memory), else the program's choice (:func:`annotated_space`), else the level's."""
    return requested or annotated_space(node) or LEVEL_SPACE[level]


def annotated_space(node: Node) -> str | None:
    """The address space the program chose for a node's result: toX on top, or inside the mapped function."""
    prim = primitive_of(node)
    if prim is not None:
        if prim.space:
            return prim.space
        if prim.is_map:
            f = node.args[-2]
            return annotated_space(f.body) if isinstance(f, Lambda) else None
        if prim.is_reduction:
            return annotated_space(node.args[0])
        if prim.is_view and node.args:
            return annotated_space(node.args[-1])
    if isinstance(node, Let):
        return annotated_space(node.body)
    return None


def level_inside(prim, level: str) -> str:
    """The level a map's function runs at: a work-group's inside mapWrg, a work-item's inside mapGlb or mapLcl;
    a sequential map's function runs where the map does."""
    return {"work-group": "group", "local": "item", "global": "item"}.get(prim.parallel, level)


def placements(body: Node) -> list[Placement]:
    """Every value the lowering of ``body`` (one kernel's expression) computes into memory, in lowering order.

    The walk follows :class:`~.lower.Lowering`: a node is met either where its value is *read* (an argument,
    a ``val``) or where it is *written* to a destination it was given (a map's body, a kernel's result);
    only values read, and computed, get memory."""
    out: list[Placement] = []

    def place(node: Node, level: str, requested: str | None = None):
        out.append(Placement(node, memory_space(node, level, requested), level))
        written(node, level)

    def read(node: Node, level: str):
        if isinstance(node, (Var, Lambda, UserFun)) or node is None:
            return
        if isinstance(node, Tuple):
            for e in node.elems:
                read(e, level)
        elif isinstance(node, ScalarOp):
            for a in node.args:
                read(a, level)
        elif isinstance(node, Apply):
            read(node.arg, level)
            if isinstance(node.fun, Lambda):
                read(node.fun.body, level)
        elif isinstance(node, Let):
            bound(node, level)
            read(node.body, level)
        elif isinstance(node, Prim):
            prim = primitive_of(node)
            if is_layout_map(node):
                read(node.args[1], level)  # the function is a view: applied where elements are read
            elif prim.is_reduction:
                reduction(node, level)
            elif prim.is_map or prim.space:
                place(node, level)
            elif prim.applies_function:
                read(node.args[1], level)
                read_function(node.args[0], level)
            else:
                for a in node.args:
                    read(a, level)

    def read_function(f: Node, level: str):
        if isinstance(f, Lambda):
            read(f.body, level)

    def bound(node: Let, level: str):
        if is_view(node.value):
            read(node.value, level)
        else:
            place(node.value, level)

    def reduction(node: Prim, level: str):
        init, f, xs = node.args
        place(init, level, annotated_space(init) or "private")
        read(xs, level)
        write_function(f, level)

    def write_function(f: Node, level: str):
        if isinstance(f, Lambda):
            written(f.body, level)

    def written(node: Node, level: str):
        prim = primitive_of(node)
        if prim is not None:
            if is_layout_map(node):
                xs = node.args[1]
                return written(xs, level) if not is_view(xs) else read(node, level)
            if prim.is_map:
                read(node.args[-1], level)
                return write_function(node.args[-2], level_inside(prim, level))
            if prim.is_reduction:
                return reduction(node, level)
            if prim.applies_function:
                return applied(node.args[0], node.args[1], level)
            if prim.is_view and not is_view(node) and prim.writes_through:
                return written(node.args[-1], level)
        if isinstance(node, Let):
            bound(node, level)
            return written(node.body, level)
        if isinstance(node, Tuple):
            for e in node.elems:
                written(e, level)
            return
        if isinstance(node, Apply) and isinstance(node.fun, Lambda):
            return applied(node.fun, node.arg, level)
        read(node, level)

    def applied(f: Node, x: Node, level: str):
        if is_identity_function(f):
            return written(x, level)  # toGlobal(id, e): e written straight to its destination
        read(x, level)
        write_function(f, level)

    written(body, "kernel")
    return out


def is_layout_map(node: Node) -> bool:
    """``map(f, xs)`` with a function that only rearranges its argument: a view, not a loop."""
    prim = primitive_of(node)
    return prim is not None and prim.is_map and prim.is_view and is_view(node.args[0])


def is_identity_function(f: Node) -> bool:
    """``x -> id(x)``: what ``toGlobal(id, e)`` applies."""
    if not (isinstance(f, Lambda) and isinstance(f.param, PVar)):
        return False
    prim = primitive_of(f.body)
    return (prim is not None and prim.identity and isinstance(f.body.args[0], Var)
            and f.body.args[0].name == f.param.name)


def only_copies(f: Node) -> bool:
    """A map's function that copies its argument and computes nothing: ``id``, or a sequential map of such
    (the work-items' part of a copy into local memory, ``toLocal(mapLcl(d, mapSeq(id)))``)."""
    if is_identity_function(f) or (getattr(primitive_of(f), "identity", False) and not f.args):
        return True
    if not (isinstance(f, Lambda) and isinstance(f.param, PVar)):
        return False
    prim = primitive_of(f.body)
    return (prim is not None and prim.is_map and prim.sequential and len(f.body.args) == 2
            and isinstance(f.body.args[1], Var) and f.body.args[1].name == f.param.name
            and only_copies(f.body.args[0]))


def scalar_count(t: Type) -> arith.Expr:
    """How many scalars a value of type ``t`` holds (vector lanes counted), as an expression of its sizes."""
    if isinstance(t, TupleType):
        return sum((scalar_count(e) for e in t.elems), arith.Const(0))
    n: arith.Expr = arith.Const(1)
    while isinstance(t, ArrayType):
        n = n * t.size
        t = t.elem
    if isinstance(t, TupleType):
        return n * scalar_count(t)
    if isinstance(t, VectorType):
        n = n * t.width
    return n


# ------------------------------------------------------------------------------------------------ footprint
#: bytes of one scalar: float and int are 32-bit, and a bool is counted as the int a kernel keeps it in
SCALAR_BYTES = 4


@dataclass(frozen=True)
class Footprint:
    """The memory one value of a function takes at concrete sizes."""

    name: str
    role: str  # "input", "output" or "intermediate" (a ``val`` that computes)
    bytes: int


def value_bytes(t: Type) -> int:
    """The bytes of a value of type ``t``, every size in it concrete."""
    count = scalar_count(t).as_int()
    if count is None:
        raise ValueError(f"the size of {t} is not known")
    return SCALAR_BYTES * max(count, 0)


def footprint(typed, function: str | None = None) -> tuple[Footprint, ...]:
    """What a function of a program type-checked at concrete sizes (a :class:`~liftpy.typecheck.TypedProgram`)
    holds in memory: each input, each ``val`` of its body that computes (a view holds nothing) and its output,
    from their types alone -- nothing is allocated. The one estimate the interpreter, its random inputs and the
    tuner check against the memory there is before they allocate."""
    fun = typed.program.function(function)
    out = [Footprint(p.name, "input", value_bytes(p.type)) for p in fun.data_params]
    body = fun.body
    while isinstance(body, Let):
        if not is_view(body.value):
            out.append(Footprint(getattr(body.pattern, "name", "val"), "intermediate", value_bytes(body.value.type)))
        body = body.body
    out.append(Footprint("output", "output", value_bytes(fun.body.type)))
    return tuple(out)


def format_bytes(n: int) -> str:
    """``n`` bytes for people: ``14.6 TiB``, ``512 bytes``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


__all__ = ["Placement", "placements", "memory_space", "annotated_space", "is_layout_map", "is_identity_function",
           "level_inside", "scalar_count", "LEVEL_SPACE", "Footprint", "footprint", "value_bytes", "format_bytes"]
