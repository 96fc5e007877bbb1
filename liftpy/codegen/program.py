"""From a typed low-level program to OpenCL kernels and a launch plan: the code generator in one function.

``generate(program, sizes)`` specialises the program to the sizes, type-checks it, checks the legality of
its parallel maps, cuts it into kernels, and takes each through the kernel IR passes of
:func:`liftpy.codegen.passes.compile_kernel`.

A program's body is a chain of ``val``s; each ``val`` whose value contains a ``mapGlb`` or ``mapWrg`` is one
kernel writing a global buffer that stays on the device for the kernels after it (a padded copy, then the
convolution reading it), a ``val`` that only rearranges data is a view over earlier buffers, and the final
expression is the last kernel, writing the output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..arith import c_name
from ..device import Device
from ..errors import CodegenError, SizeError
from ..ir import Let, Node, Prim, PVar, walk
from ..primitives import PRIMITIVES, is_view
from ..typecheck import TypedProgram, typecheck
from ..types import ArrayType, ScalarType, TupleType, Type, VectorType
from . import kir
from .c import CExpr, Memory, Param, c_type
from .launch import Launch
from .lower import KernelContext, Lowering, check_nesting
from .passes import compile_kernel
from .views import MemView, ScalarView, View, elem_count, leaf_type


@dataclass(frozen=True)
class KernelPlan:
    """One kernel: its standalone OpenCL C source, NDRange and arguments (buffer or scalar names, in order)."""

    name: str
    source: str
    launch: Launch
    args: tuple[str, ...]
    produces: str  # the buffer it writes
    ir: kir.Kernel | None = field(default=None, compare=False, repr=False)  # its kernel IR, after the passes


@dataclass(frozen=True)
class BufferPlan:
    """A global buffer: an input, the output, or an intermediate result kept on the device."""

    name: str
    role: str  # "input", "output" or "temp"
    shape: tuple[int, ...]  # numpy shape of its contents (array lengths, then vector width)
    dtype: str = "float32"  # numpy dtype of its elements
    space: str = "global"

    @property
    def bytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return 4 * n


@dataclass(frozen=True)
class GeneratedProgram:
    """Everything the host needs to run a program: kernels in launch order and the buffers they use."""

    function: str
    kernels: tuple[KernelPlan, ...]
    buffers: tuple[BufferPlan, ...]
    scalar_params: tuple[tuple[str, str], ...]  # (name, C type) of scalar data parameters
    output: str
    output_type: Type
    local_bytes: dict[str, int] = field(default_factory=dict)  # local memory per kernel
    filename: str = "<string>"

    @property
    def sources(self) -> dict[str, str]:
        return {k.name: k.source for k in self.kernels}

    @property
    def launch(self) -> dict[str, tuple[tuple[int, ...], tuple[int, ...] | None]]:
        return {k.name: (k.launch.global_size, k.launch.local_size) for k in self.kernels}

    def buffer(self, name: str) -> BufferPlan:
        return next(b for b in self.buffers if b.name == name)

    @property
    def combined_source(self) -> str:
        """All kernels in one OpenCL program (user functions once), for one build."""
        seen: set[str] = set()
        out = []
        for k in self.kernels:
            for block in k.source.split("\n\n"):
                if block not in seen:
                    seen.add(block)
                    out.append(block)
        return "\n\n".join(out)


@dataclass(frozen=True)
class Joint:
    """A generated program's place in a *joint* OpenCL program, several programs' kernels built by one compiler
    call (:func:`joint_sources`): its ``source`` (shared by every member) and ``symbols``, each of this program's
    kernel names mapped to its name there."""

    source: str
    symbols: Mapping[str, str]


#: a definition at program scope, as the code generator writes one: a line at column 0 (not a comment or a
#: directive) naming a function before its parameters
_PROGRAM_SCOPE_DEFINITION = re.compile(r"^(?!//|#)[A-Za-z_][\w ]*?\b([A-Za-z_]\w*)\s*\(", re.M)


def joint_sources(programs: Sequence[GeneratedProgram]) -> list[Joint]:
    """The programs' kernels in one OpenCL source: an OpenCL compiler's fixed cost per build (PoCL on a CPU: about
    0.25 s of headers a call) is then paid once for a tuner's batch of candidates, not once per candidate. Member
    ``i``'s program-scope names (kernels, user functions, helpers) are renamed apart by the preprocessor
    (``#define add add__joint3`` ... ``#undef add``); the kernels' code is theirs unchanged. A name missed here
    would be defined twice: the build fails, and the caller builds the members one by one."""
    parts, joints = [], []
    for i, program in enumerate(programs):
        source = program.combined_source
        names = sorted(set(_PROGRAM_SCOPE_DEFINITION.findall(source)) | {k.name for k in program.kernels})
        renamed = {name: f"{name}__joint{i}" for name in names}
        parts.append("".join(f"#define {a} {b}\n" for a, b in renamed.items()) + source
                     + "".join(f"\n#undef {a}" for a in renamed) + "\n")
        joints.append({k.name: renamed[k.name] for k in program.kernels})
    source = "\n".join(parts)
    return [Joint(source, symbols) for symbols in joints]


def shape_of(t: Type) -> tuple[int, ...]:
    dims = []
    while isinstance(t, ArrayType):
        dims.append(t.size.as_int())
        t = t.elem
    if isinstance(t, VectorType):
        dims.append(t.width.as_int())
    return tuple(dims)


def _unknown_sizes(typed: TypedProgram, fun_name: str) -> set[str]:
    fun = typed.program.function(fun_name)
    names: set[str] = set()
    for p in fun.data_params:
        names |= p.type.size_names()
    for node in walk(fun.body):
        if node.type is not None:
            names |= node.type.size_names()
    return names


def generate(
    program,
    sizes: Mapping[str, object] | None = None,
    function: str | None = None,
    device: Device | None = None,
) -> GeneratedProgram:
    """Compile a low-level program (with every size bound) to OpenCL kernels and a launch plan."""
    device = device or Device()
    for name, value in (sizes or {}).items():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, int) and not -2**63 <= v < 2**63:
                raise SizeError(f"size {name} = {v} is not a machine integer (a kernel's sizes are 64-bit)")
    typed = typecheck(program, sizes or {})
    fun = typed.program.function(function)
    unknown = _unknown_sizes(typed, fun.name)
    if unknown:
        raise CodegenError(
            f"sizes unknown at compile time: {', '.join(sorted(unknown))} (give them with --size NAME=VALUE)", fun.span
        )
    check_nesting(fun.body)

    ctx = KernelContext()
    env: dict[str, View] = {}
    buffers: list[BufferPlan] = []
    scalars: list[tuple[str, str]] = []
    memories: dict[str, Memory] = {}
    for p in fun.data_params:
        name = c_name(p.name)
        ctx.taken.add(name)
        if isinstance(p.type, (ScalarType, VectorType)):
            env[p.name] = ScalarView(CExpr(Param(name), atomic=True), p.type)
            scalars.append((name, c_type(p.type)))
            continue
        if isinstance(leaf_type(p.type), TupleType) or isinstance(p.type, TupleType):
            raise CodegenError(f"parameter {p.name}: arrays of tuples are not supported as kernel inputs", p.span)
        mem = Memory(name, "global", leaf_type(p.type), elem_count(p.type), readonly=True)
        memories[name] = mem
        env[p.name] = MemView(mem, p.type)
        buffers.append(BufferPlan(name, "input", shape_of(p.type), _dtype(p.type)))

    # cut the body into kernels
    stages: list[tuple[str, Node]] = []
    body = fun.body
    while isinstance(body, Let):
        value = body.value
        if _has_kernel(value):
            if not isinstance(body.pattern, PVar):
                raise CodegenError("a kernel's result must be bound to one name", body.span)
            stages.append((body.pattern.name, value))
        elif is_view(value):
            stages.append(("", body))  # a view: bound when the kernels are emitted
        else:
            break
        body = body.body
    if not _has_kernel(body):
        raise CodegenError(
            "the program's result must be computed by a kernel: put mapGlb or mapWrg at its top", body.span
        )
    stages.append(("output", body))

    kernels: list[KernelPlan] = []
    local_bytes: dict[str, int] = {}
    kernel_count = sum(1 for name, _ in stages if name)
    base = c_name(fun.name)
    for name, expr in stages:
        if not name:  # a view binding between kernels
            env[expr.pattern.name] = Lowering(env, ctx).value(expr.value, "kernel")
            continue
        out_name = ctx.fresh(c_name(name))
        t = expr.type
        if isinstance(t, TupleType) or isinstance(leaf_type(t), TupleType):
            raise CodegenError(f"{name}: a kernel cannot produce tuples yet; produce one array per kernel", expr.span)
        out_mem = Memory(out_name, "global", leaf_type(t), elem_count(t))
        buffers.append(BufferPlan(out_name, "output" if name == "output" else "temp", shape_of(t), _dtype(t)))
        kernel_name = base if kernel_count == 1 else f"{base}_{c_name(name)}"
        header = f"// generated by liftpy from {typed.program.filename}: kernel {kernel_name} computes {name}"
        try:
            compiled = compile_kernel(kernel_name, expr, out_mem, env, ctx, device, memories, scalars, header)
        except CodegenError as e:
            raise e.with_span(expr.span)
        memories[out_name] = out_mem
        local_bytes[kernel_name] = sum(m.bytes for m in compiled.kernel.locals)
        kernels.append(KernelPlan(kernel_name, compiled.source, compiled.kernel.launch, compiled.args, out_name,
                                  compiled.kernel))
        if name != "output":
            env[name] = MemView(out_mem, t)
    return GeneratedProgram(
        fun.name,
        tuple(kernels),
        tuple(buffers),
        tuple(scalars),
        kernels[-1].produces,
        fun.body.type,
        local_bytes,
        typed.program.filename,
    )


def _dtype(t: Type) -> str:
    leaf = leaf_type(t)
    scalar = leaf.scalar if isinstance(leaf, VectorType) else leaf
    return "float32" if scalar.name == "float" else "int32"


def _has_kernel(node: Node) -> bool:
    """A global or work-group map: the top of a kernel."""
    return any(isinstance(n, Prim) and PRIMITIVES[n.name].parallel in ("global", "work-group") for n in walk(node))


__all__ = ["generate", "GeneratedProgram", "KernelPlan", "BufferPlan", "Joint", "joint_sources", "shape_of"]
