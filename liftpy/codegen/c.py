"""OpenCL C expressions: the values of the kernel IR (:mod:`liftpy.codegen.kir`).

An expression is a tree of *fragments*: C syntax as strings, index expressions of :mod:`liftpy.arith`, and
the reads the passes reason about -- a load from memory (:class:`MemRef`), a vector load (:class:`VLoad`), a
vector built lane by lane (:class:`VectorOf`), a read through padding (:class:`Guarded`). Indices stay
arithmetic until printing, so a pass can substitute a loop variable and the reads simplify again
(:func:`substitute`). How a private array prints (one register per element, or an array) is decided by a
pass and given to :meth:`CExpr.render` as the set of memories kept in registers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from ..arith import Expr, as_expr, c_name, prove_eq, prove_lt, prove_nonneg, to_c
from ..types import BOOL, FLOAT, INT, ScalarType, Type, VectorType

Fragment = object  # str, Expr (rendered with to_c), CExpr or one of the reads below
Registers = frozenset  # of Memory: private arrays printed as one variable per element


class CExpr:
    """A C expression made of fragments."""

    __slots__ = ("parts", "atomic")

    def __init__(self, *parts: Fragment, atomic: bool = False):
        self.parts = parts
        self.atomic = atomic  # needs no parentheses when used as an operand

    def render(self, registers: Registers = frozenset(), index: str = "int") -> str:
        return "".join(render(p, registers, index) for p in self.parts)

    def __str__(self) -> str:
        return self.render()

    def paren(self) -> "CExpr":
        return self if self.atomic else CExpr("(", self, ")", atomic=True)


def render(p: Fragment, registers: Registers = frozenset(), index: str = "int") -> str:
    if isinstance(p, str):
        return p
    if isinstance(p, Expr):
        return to_c(p, index)
    if hasattr(p, "render"):
        return p.render(registers, index)
    return str(p)


def _index_paren(e: Expr, index: str) -> str:
    """An index expression as C, in brackets unless it is a constant or a name."""
    text = to_c(e, index)
    return text if text.replace("_", "a").isalnum() else f"({text})"


def c_type(t: Type) -> str:
    if isinstance(t, ScalarType):
        return {"float": "float", "int": "int", "bool": "int"}[t.name]
    if isinstance(t, VectorType):
        width = t.width.as_int()
        if width is None:
            raise ValueError(f"vector width {t.width} is not known")
        base = c_type(t.scalar)
        return base if width == 1 else f"{base}{width}"
    raise ValueError(f"no C type for {t}")


def literal(value, t: Type) -> CExpr:
    """A constant of scalar or vector type."""
    scalar = t.scalar if isinstance(t, VectorType) else t
    if scalar == FLOAT:
        v = float(value)
        text = repr(v)
        if "inf" in text or "nan" in text:
            text = {"inf": "INFINITY", "-inf": "(-INFINITY)", "nan": "NAN"}[text]
        else:
            if "e" not in text and "." not in text:
                text += ".0"
            text += "f"
    elif scalar == BOOL:
        text = "1" if value else "0"
    else:
        text = str(int(value))
    if isinstance(t, VectorType) and (t.width.as_int() or 1) > 1:
        return CExpr(f"(({c_type(t)})({text}))", atomic=True)
    return CExpr(text, atomic=not text.startswith("-"))


# ------------------------------------------------------------------------------------------------ memory
@dataclass(frozen=True, eq=False)
class Memory:
    """A buffer, a local or private array, or a private variable (equal only to itself).

    Sizes and offsets count *leaf elements* (the scalar or vector type the memory holds).
    """

    name: str
    space: str  # "global", "local" or "private"
    leaf: Type  # ScalarType or VectorType
    size: int  # number of leaf elements
    readonly: bool = False

    @property
    def c_name(self) -> str:
        return c_name(self.name)

    @property
    def leaf_bytes(self) -> int:
        """Bytes of one element (a float, or a vector of them)."""
        return 4 * (self.leaf.width.as_int() if isinstance(self.leaf, VectorType) else 1)

    @property
    def bytes(self) -> int:
        return self.size * self.leaf_bytes

    @property
    def is_variable(self) -> bool:
        return self.space == "private" and self.size == 1

    def declaration(self, registers: Registers = frozenset()) -> str:
        """``float acc[4];``, or ``float acc_0, acc_1, acc_2, acc_3;`` when kept in registers."""
        t = c_type(self.leaf)
        if self.space == "local":
            return f"local {t} {self.c_name}[{self.size}];"
        if self.is_variable:
            return f"{t} {self.c_name};"
        if self in registers:
            return f"{t} " + ", ".join(f"{self.c_name}_{i}" for i in range(self.size)) + ";"
        return f"{t} {self.c_name}[{self.size}];"


class MemRef:
    """A load (or a store's target): ``mem[offset]``, ``mem_3`` in registers, ``mem`` for a private variable."""

    __slots__ = ("mem", "offset")

    def __init__(self, mem: Memory, offset: Expr):
        self.mem, self.offset = mem, as_expr(offset)

    def render(self, registers: Registers = frozenset(), index: str = "int") -> str:
        m = self.mem
        if m.is_variable:
            return m.c_name
        if m in registers:
            return f"{m.c_name}_{self.offset.as_int()}"
        return f"{m.c_name}[{to_c(self.offset, index)}]"

    __str__ = render


class VLoad:
    """``vloadN(0, mem + offset)``: N neighbouring elements of a global or local memory in one load; with
    ``pick``, the components of it a vector takes (``vload16(0, x + i).s02468ace``: lanes a stride apart, a
    pooling's windows, read as one load instead of one each)."""

    __slots__ = ("mem", "offset", "width", "pick")

    def __init__(self, mem: Memory, offset: Expr, width: int, pick: tuple[int, ...] | None = None):
        self.mem, self.offset, self.width, self.pick = mem, as_expr(offset), width, pick

    def render(self, registers: Registers = frozenset(), index: str = "int") -> str:
        loaded = f"vload{self.width}(0, {self.mem.c_name} + {to_c(self.offset, index)})"
        return loaded if self.pick is None else loaded + ".s" + "".join(f"{k:x}" for k in self.pick)

    __str__ = render


class VectorOf:
    """A vector built from its lanes' values: ``((float4)(a, b, c, d))``, or ``((float4)(a))`` where every
    lane is the same value."""

    __slots__ = ("ctype", "lanes")

    def __init__(self, ctype: str, lanes: tuple[CExpr, ...]):
        self.ctype, self.lanes = ctype, tuple(lanes)

    def render(self, registers: Registers = frozenset(), index: str = "int") -> str:
        lanes = [lane.render(registers, index) for lane in self.lanes]
        if len(set(lanes)) == 1:  # one value broadcast (a weight a block of pixels shares): OpenCL's splat
            return f"(({self.ctype})({lanes[0]}))"
        return f"(({self.ctype})(" + ", ".join(lanes) + "))"

    __str__ = render


class Guarded:
    """A read of a padded array: the element when ``0 <= index < n``, else the border value. The pass that
    versions kernels into interior and border parts looks for these.

    With ``safe`` (``padSelect``'s reads: the same read with the index clamped into ``[0, n)``, an element that
    exists whatever the index) it is printed branch-free, ``select(border, safe, condition)``, the element
    loaded whatever the condition says; without, as a branch around the load of ``inside``."""

    __slots__ = ("index", "n", "inside", "border", "safe")

    def __init__(self, index: Expr, n: Expr, inside: CExpr, border: CExpr, safe: CExpr | None = None):
        self.index, self.n, self.inside, self.border, self.safe = as_expr(index), as_expr(n), inside, border, safe

    def render(self, registers: Registers = frozenset(), index: str = "int") -> str:
        j = _index_paren(self.index, index)
        condition = f"(0 <= {j} && {j} < {self.n.as_int()})"
        border = self.border.render(registers, index)
        if self.safe is not None:
            return f"select({border}, {self.safe.render(registers, index)}, {condition})"
        return f"({condition} ? {self.inside.render(registers, index)} : {border})"

    __str__ = render


class Param:
    """A scalar parameter of the kernel (the printer makes it an argument where the kernel uses it)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def render(self, registers: Registers = frozenset(), index: str = "int") -> str:
        return self.name

    __str__ = render


def load(mem: Memory, offset: Expr) -> CExpr:
    return CExpr(MemRef(mem, offset), atomic=True)


def guarded(index: Expr, n: Expr, inside: CExpr, border: CExpr, safe: CExpr | None = None) -> CExpr:
    """A padded read (branch-free with ``safe``), or just ``inside`` where the index is provably within
    ``[0, n)``, or ``border`` where it is provably outside."""
    if prove_nonneg(index) and prove_lt(index, n):
        return inside
    if _outside(index, n):
        return border
    return CExpr(Guarded(index, n, inside, border, safe), atomic=True)


def _outside(index: Expr, n: Expr) -> bool:
    """Whether ``index`` is provably outside ``[0, n)``: below 0 for every binding, or at least ``n``."""
    return prove_lt(index, 0) or prove_nonneg(as_expr(index) - as_expr(n))


def _same_value(inside: CExpr, border: CExpr) -> bool:
    """Whether a padded read gives the same value either way: its element is itself the padding's value (an
    inner condition that cannot hold), so no memory is read."""
    return not any(isinstance(f, (MemRef, VLoad)) for f in fragments(inside)) and inside.render() == border.render()


#: the widths of OpenCL's vectors, which ``vloadN`` loads
VECTOR_WIDTHS = (2, 3, 4, 8, 16)


def vector_of(ctype: str, lanes: tuple[CExpr, ...]) -> CExpr:
    """A vector of lanes: one vector load when they are loads of neighbouring elements of one global or local
    memory (private arrays may live in registers, where vloadN does not apply); of elements a constant stride
    apart within 16 of them, one load of the span and its components (:func:`_strided_load`)."""
    refs = [_sole_load(lane) for lane in lanes]
    first = refs[0]
    if len(lanes) > 1 and first is not None and first.mem.space != "private" and all(
        r is not None and r.mem is first.mem for r in refs
    ):
        if all(prove_eq(r.offset, first.offset + k) for k, r in enumerate(refs)):
            return CExpr(VLoad(first.mem, first.offset, len(lanes)), atomic=True)
        strided = _strided_load(refs)
        if strided is not None:
            return CExpr(strided, atomic=True)
    return CExpr(VectorOf(ctype, lanes), atomic=True)


def _strided_load(refs: list[MemRef]) -> VLoad | None:
    """Loads of one memory a constant stride apart as one vector load of the elements they span and the
    components they take, where the span fits a vector and a load of its width provably stays inside the
    memory (it reads an element or so beside the lanes: the load starts at the first lane or ends at the last);
    None otherwise."""
    first, count = refs[0], len(refs)
    stride = (refs[1].offset - first.offset).as_int()
    if count not in VECTOR_WIDTHS or stride is None or stride < 2 or not isinstance(first.mem.leaf, ScalarType):
        return None
    span = (count - 1) * stride + 1
    width = next((w for w in VECTOR_WIDTHS if w >= span), None)
    if width is None or not all(prove_eq(r.offset, first.offset + k * stride) for k, r in enumerate(refs)):
        return None
    for start in (0, width - span):  # the load's first element, before the first lane's
        base = first.offset - start
        if prove_nonneg(base) and prove_lt(base + (width - 1), first.mem.size):
            return VLoad(first.mem, base, width, tuple(start + k * stride for k in range(count)))
    return None


def _sole_load(e: CExpr) -> MemRef | None:
    while isinstance(e, CExpr) and len(e.parts) == 1:
        e = e.parts[0]
    return e if isinstance(e, MemRef) else None


# ------------------------------------------------------------------------------------------------ traversal
def fragments(e: Fragment) -> Iterator[Fragment]:
    """Every fragment of an expression, outermost first."""
    stack = [e]
    while stack:
        f = stack.pop()
        yield f
        if isinstance(f, CExpr):
            stack.extend(reversed(f.parts))
        elif isinstance(f, Guarded):
            if f.safe is not None:
                stack.append(f.safe)
            stack.append(f.border)
            stack.append(f.inside)
        elif isinstance(f, VectorOf):
            stack.extend(reversed(f.lanes))


def indices(e: Fragment) -> Iterator[Expr]:
    """The index expressions an expression reads through."""
    for f in fragments(e):
        if isinstance(f, Expr):
            yield f
        elif isinstance(f, (MemRef, VLoad)):
            yield f.offset
        elif isinstance(f, Guarded):
            yield f.index


def substitute(e: CExpr, change: Callable[[Expr], Expr]) -> CExpr:
    """``e`` with every index expression changed by ``change``; reads simplify again (a padding condition that
    now holds goes, lanes that are now neighbours become one vector load)."""

    def go(p: Fragment):
        if isinstance(p, str):
            return p
        if isinstance(p, Expr):
            return change(p)
        if isinstance(p, CExpr):
            return CExpr(*(go(q) for q in p.parts), atomic=p.atomic)
        if isinstance(p, MemRef):
            return MemRef(p.mem, change(p.offset))
        if isinstance(p, VLoad):
            return VLoad(p.mem, change(p.offset), p.width, p.pick)
        if isinstance(p, Guarded):
            index = change(p.index)
            if prove_nonneg(index) and prove_lt(index, p.n):
                return go(p.inside).paren()  # the condition holds now: the read is the element
            if _outside(index, p.n):
                return go(p.border).paren()  # it cannot hold: the padding's value
            inside, border = go(p.inside), go(p.border)
            if _same_value(inside, border):
                return border.paren()
            return Guarded(index, p.n, inside, border, go(p.safe) if p.safe is not None else None)
        if isinstance(p, VectorOf):
            return vector_of(p.ctype, tuple(go(lane) for lane in p.lanes))
        return p

    return go(e)


# ------------------------------------------------------------------------------------------------ code builder
class Code:
    """Lines of C with indentation; each line is a list of fragments rendered at the end."""

    def __init__(self):
        self.lines: list[tuple[int, tuple[Fragment, ...]]] = []
        self.depth = 0

    def line(self, *parts: Fragment):
        self.lines.append((self.depth, parts))

    def comment(self, text: str):
        self.line(f"// {text}")

    def open(self, *parts: Fragment):
        """A line ending in ``{`` and an indent."""
        self.line(*parts, " {")
        self.depth += 1

    def close(self, suffix: str = ""):
        self.depth -= 1
        self.line("}" + suffix)

    def render(self, base_indent: int = 0, registers: Registers = frozenset(), index: str = "int") -> str:
        """The lines as C; ``index`` is the C type of the kernel's loop indices (see :func:`~liftpy.arith.to_c`)."""
        out = []
        for depth, parts in self.lines:
            text = "".join(render(p, registers, index) for p in parts)
            out.append("    " * (depth + base_indent) + text if text else "")
        return "\n".join(out)


__all__ = ["CExpr", "Code", "Memory", "MemRef", "VLoad", "VectorOf", "Guarded", "c_type", "literal",
           "Param", "load", "guarded", "vector_of", "fragments", "indices", "substitute", "render", "INT", "FLOAT"]
