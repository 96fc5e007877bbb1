"""From a typed program to OpenCL kernels and a launch plan: the code generator's route in one function.

``generate(program, sizes)`` specialises the program to the sizes, type-checks it, checks the legality of
its parallel maps, cuts it into kernels, and emits each one. A program's body is a chain of ``val``s; each
``val`` whose value contains a ``mapGlb`` or ``mapWrg`` is one kernel writing a global buffer that stays on
the device for the kernels after it (the convolution pipeline has four), a ``val`` that only rearranges data
is a view over earlier buffers, and the final expression is the last kernel, writing the output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from ..arith import c_name
from ..device import Device
from ..errors import CodegenError
from ..ir import Let, Node, Prim, PVar, walk
from ..primitives import PRIMITIVES
from ..typecheck import TypedProgram, typecheck
from ..types import ArrayType, ScalarType, TupleType, Type, VectorType
from .c import CExpr, Memory, c_type
from .kernel import (
    KernelContext,
    KernelEmitter,
    Launch,
    check_nesting,
    is_layout_only,
    launch_for,
    user_fun_source,
)
from .views import MemDest, MemView, ScalarView, View, elem_count, leaf_type


@dataclass(frozen=True)
class KernelPlan:
    """One kernel: its standalone OpenCL C source, NDRange and arguments (buffer or scalar names, in order)."""

    name: str
    source: str
    launch: Launch
    args: tuple[str, ...]
    produces: str  # the buffer it writes


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
    typed = typecheck(program, sizes or {})
    fun = typed.program.function(function)
    unknown = _unknown_sizes(typed, fun.name)
    if unknown:
        raise CodegenError(
            f"sizes unknown at compile time: {', '.join(sorted(unknown))} (give them with --size NAME=VALUE)", fun.span
        )
    check_nesting(fun.body)
    # a padding view in the program: its kernels may read through it (directly or through a val bound to it)
    reads_padding = any(isinstance(n, Prim) and PRIMITIVES[n.name].guards_reads for n in walk(fun.body))

    ctx = KernelContext()
    env: dict[str, View] = {}
    buffers: list[BufferPlan] = []
    scalars: list[tuple[str, str]] = []
    memories: dict[str, Memory] = {}
    for p in fun.data_params:
        name = c_name(p.name)
        ctx.taken.add(name)
        if isinstance(p.type, (ScalarType, VectorType)):
            env[p.name] = ScalarView(CExpr(name, atomic=True), p.type)
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
        elif is_layout_only(value):
            stages.append(("", body))  # a view: bound when the stages are emitted
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
            env[expr.pattern.name] = _emitter_for_views(env, ctx).value(expr.value, "kernel")
            continue
        out_name = ctx.fresh(c_name(name))
        t = expr.type
        if isinstance(t, TupleType) or isinstance(leaf_type(t), TupleType):
            raise CodegenError(f"{name}: a kernel cannot produce tuples yet; produce one array per kernel", expr.span)
        out_mem = Memory(out_name, "global", leaf_type(t), elem_count(t))
        memories[out_name] = out_mem
        buffers.append(BufferPlan(out_name, "output" if name == "output" else "temp", shape_of(t), _dtype(t)))
        kernel_name = base if kernel_count == 1 else f"{base}_{c_name(name)}"
        launch = launch_for(expr, device)
        emitter = KernelEmitter(kernel_name, launch, env, ctx)
        emitter.reads_padding = reads_padding
        emitter.emit(expr, MemDest(out_mem, t), "kernel")
        launch = launch_for(expr, device, emitter.private_bytes)  # a CPU's work-groups sized by the private memory
        source, args = _assemble(emitter, out_mem, memories, scalars, program_file=typed.program.filename, what=name)
        local_bytes[kernel_name] = sum(m.bytes for m in emitter.local_decls)
        if local_bytes[kernel_name] > device.local_mem_size:
            raise CodegenError(
                f"kernel {kernel_name} needs {local_bytes[kernel_name]} bytes of local memory; the device has "
                f"{device.local_mem_size}",
                expr.span,
            )
        kernels.append(KernelPlan(kernel_name, source, launch, args, out_name))
        if name != "output":
            env[name] = MemView(out_mem, t)
        for temp in ctx.temp_buffers:
            if temp.name not in memories:
                raise CodegenError(f"internal: global temporary {temp.name} escaped its kernel")
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


def _emitter_for_views(env, ctx) -> KernelEmitter:
    return KernelEmitter("views", Launch((1,), None), env, ctx)


def _assemble(emitter: KernelEmitter, out_mem: Memory, memories: dict[str, Memory], scalars, program_file: str, what: str):
    body = emitter.code.render(base_indent=1)
    used = set(re.findall(r"\b\w+\b", body))
    args: list[str] = []
    params: list[str] = []
    for name, mem in memories.items():
        if name not in used or mem is out_mem:
            continue
        args.append(name)
        params.append(f"const global {c_type(mem.leaf)}* restrict {name}")
    for name, ctype in scalars:
        if name in used:
            args.append(name)
            params.append(f"const {ctype} {name}")
    args.append(out_mem.name)
    params.append(f"global {c_type(out_mem.leaf)}* restrict {out_mem.name}")
    header = f"// generated by liftpy from {program_file}: kernel {emitter.name} computes {what}"
    funs = "".join(user_fun_source(f) + "\n" for f in emitter.user_funs.values())
    funs = "".join(h + "\n" for h in emitter.helpers.values()) + funs
    decls = "".join(f"    {m.declaration()}\n" for m in emitter.local_decls)
    signature = f"kernel void {emitter.name}(" + ",\n        ".join(params) + ")"
    source = f"{header}\n\n{funs}{signature} {{\n{decls}{body}\n}}\n"
    return source, tuple(args)


__all__ = ["generate", "GeneratedProgram", "KernelPlan", "BufferPlan", "shape_of"]
