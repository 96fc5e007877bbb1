"""OpenCL C text: expressions, memories and an indented code builder.

Text is assembled from *fragments* that render late, so a decision taken after a statement was written can
still change how it prints: a private array whose every index turned out constant is printed as separate
scalars (registers) -- ``acc_0``, ``acc_1`` -- instead of ``acc[0]``, ``acc[1]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..arith import Const, Expr, as_expr, c_name, to_c
from ..types import BOOL, FLOAT, INT, ScalarType, Type, VectorType

Fragment = object  # str, Expr (rendered with to_c) or any object with __str__


class CExpr:
    """A C expression made of fragments; ``__str__`` renders it."""

    __slots__ = ("parts", "atomic")

    def __init__(self, *parts: Fragment, atomic: bool = False):
        self.parts = parts
        self.atomic = atomic  # needs no parentheses when used as an operand

    def __str__(self) -> str:
        return "".join(_render(p) for p in self.parts)

    def paren(self) -> "CExpr":
        return self if self.atomic else CExpr("(", self, ")", atomic=True)


def _render(p: Fragment) -> str:
    if isinstance(p, str):
        return p
    if isinstance(p, Expr):
        return to_c(p)
    return str(p)


def index_text(e: Expr) -> CExpr:
    """An index expression (arith) as C, atomic when it is a constant or a name."""
    e = as_expr(e)
    text = to_c(e)
    return CExpr(text, atomic=text.replace("_", "a").isalnum())


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
@dataclass(eq=False)
class Memory:
    """A buffer, a local or private array, or a private variable.

    Sizes and offsets count *leaf elements* (the scalar or vector type the memory holds). A private array whose
    accesses all have constant indices is printed as separate variables (kept in registers).
    """

    name: str
    space: str  # "global", "local" or "private"
    leaf: Type  # ScalarType or VectorType
    size: int  # number of leaf elements
    readonly: bool = False
    offsets: set = field(default_factory=set)  # private memories: every index used, to decide promotion

    @property
    def c_name(self) -> str:
        return c_name(self.name)

    @property
    def bytes(self) -> int:
        width = self.leaf.width.as_int() if isinstance(self.leaf, VectorType) else 1
        return self.size * width * 4

    @property
    def is_variable(self) -> bool:
        return self.space == "private" and self.size == 1

    @property
    def promoted(self) -> bool:
        """A private array indexed only by constants becomes one variable per element."""
        return self.space == "private" and self.size > 1 and all(isinstance(o, Const) for o in self.offsets)

    def ref(self, offset: Expr) -> "MemRef":
        offset = as_expr(offset)
        if self.space == "private":
            self.offsets.add(offset)
        return MemRef(self, offset)

    def declaration(self) -> "MemDecl":
        return MemDecl(self)


class MemRef:
    """``mem[offset]``, or ``mem_3`` for a promoted private array, or ``mem`` for a private variable."""

    __slots__ = ("mem", "offset")

    def __init__(self, mem: Memory, offset: Expr):
        self.mem, self.offset = mem, offset

    def __str__(self) -> str:
        m = self.mem
        if m.is_variable:
            return m.c_name
        if m.promoted:
            return f"{m.c_name}_{self.offset.as_int()}"
        return f"{m.c_name}[{to_c(self.offset)}]"


class MemDecl:
    """The declaration of a private or local memory, rendered once promotion is decided."""

    def __init__(self, mem: Memory):
        self.mem = mem

    def __str__(self) -> str:
        m = self.mem
        t = c_type(m.leaf)
        if m.space == "local":
            return f"local {t} {m.c_name}[{m.size}];"
        if m.is_variable:
            return f"{t} {m.c_name};"
        if m.promoted:
            return f"{t} " + ", ".join(f"{m.c_name}_{i}" for i in range(m.size)) + ";"
        return f"{t} {m.c_name}[{m.size}];"


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

    def render(self, base_indent: int = 0) -> str:
        out = []
        for depth, parts in self.lines:
            text = "".join(_render(p) for p in parts)
            out.append("    " * (depth + base_indent) + text if text else "")
        return "\n".join(out)


__all__ = ["CExpr", "Code", "Memory", "MemRef", "c_type", "literal", "index_text", "INT", "FLOAT"]
