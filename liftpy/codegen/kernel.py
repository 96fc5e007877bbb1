"""One OpenCL kernel from one typed, size-specialised, low-level expression.

Code is generated in destination-passing style: ``emit(node, dest)`` writes the value of ``node`` into
``dest``, ``value(node)`` gives a :class:`~liftpy.codegen.views.View` to read it. Layout primitives only
build views (reading) or destination transforms (writing); computing primitives emit loops and
assignments; a computed value used as an input is *materialised* into memory first, in the address space
the program asks for (``toPrivate``/``toLocal``/``toGlobal``) or, by default, the one of the level it is
computed at (private inside a work-item, local inside a work-group).

``mapGlb/mapWrg/mapLcl(d)`` become loops over ``get_global_id/get_group_id/get_local_id(d)``; the loop is
dropped when the launch has exactly as many work-items (or groups) as elements, as in the paper's listing 2.
A barrier follows every write to local memory that other work-items read, at work-group level where every
work-item reaches it. A kernel of mapGlb only leaves the local size free; on a CPU it is chosen so that every
core has work-groups to the end (:func:`cpu_work_groups`). Sequential loops whose index is divided by a chain
of divisors become loop nests (:meth:`KernelEmitter.sequential_loop`).
"""

from __future__ import annotations

import copy
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

from .. import arith
from ..arith import Range
from ..device import Device
from ..errors import CodegenError
from ..ir import Apply, Lambda, Let, Literal, Node, Pattern, Prim, PTuple, PVar, ScalarOp, Tuple, UserFun, Var, walk
from ..primitives import PRIMITIVES, SCALAR_OPS, primitive_of
from ..types import ArrayType, ScalarType, TupleType, Type, VectorType
from .c import CExpr, Code, Memory, c_type
from .views import (
    ConstView,
    Guarded,
    Dest,
    MapDest,
    MapView,
    MemDest,
    MemView,
    ScalarView,
    SingletonView,
    TupleDest,
    TupleView,
    View,
    ZipView,
    elem_count,
    leaf_type,
)



def _length(node: Node) -> int:
    t = node.type
    if not isinstance(t, ArrayType) or t.size.as_int() is None:
        raise CodegenError(f"the length of {t} is not known at compile time", node.span)
    return t.size.as_int()


# ------------------------------------------------------------------------------------------------ launch geometry
@dataclass(frozen=True)
class Launch:
    """The NDRange of a kernel: global and local sizes per dimension (local None: the runtime chooses)."""

    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None

    @property
    def work_items(self) -> int:
        return math.prod(self.global_size)

    def threads(self, parallel: str, dim: int) -> int:
        """How many work-items ("global", "local") or work-groups ("work-group") run along ``dim``."""
        if parallel == "global":
            return self.global_size[dim]
        assert self.local_size is not None
        if parallel == "local":
            return self.local_size[dim]
        return self.global_size[dim] // self.local_size[dim]


def check_nesting(expr: Node) -> None:
    """Legality: mapLcl only inside mapWrg, no parallel map nested on its own dimension, no mixing of mapGlb
    with mapWrg, no parallel map inside a sequential one."""

    def go(node: Node, wrg: frozenset, lcl: frozenset, glb: frozenset, sequential: str | None):
        outer = (wrg, lcl, glb)
        parallel = isinstance(node, Prim) and PRIMITIVES[node.name].parallel
        if parallel:
            d = node.params[0]
            # a sequential loop run by a whole work-group may contain mapLcl (with barriers); any other
            # parallel map inside a sequential loop would need a synchronisation OpenCL does not have
            if sequential is not None and not (parallel == "local" and sequential[1] == "group"):
                raise CodegenError(f"{node.name}({d}) inside {sequential[0]}: a parallel map cannot be nested in "
                                   "this sequential loop", node.span)
            if parallel == "local":
                if not wrg:
                    raise CodegenError(f"mapLcl({d}) outside any mapWrg: work-items belong to work-groups", node.span)
                if d in lcl:
                    raise CodegenError(f"mapLcl({d}) nested inside mapLcl({d}): each dimension can be used once",
                                       node.span)
                lcl = lcl | {d}
            elif parallel == "work-group":
                if d in wrg:
                    raise CodegenError(f"mapWrg({d}) nested inside mapWrg({d})", node.span)
                if glb:
                    raise CodegenError("mapWrg inside mapGlb: use mapWrg/mapLcl or mapGlb, not both", node.span)
                if lcl:
                    raise CodegenError(f"mapWrg({d}) inside mapLcl", node.span)
                wrg = wrg | {d}
            else:
                if wrg:
                    raise CodegenError("mapGlb inside mapWrg: use mapWrg/mapLcl or mapGlb, not both", node.span)
                if d in glb:
                    raise CodegenError(f"mapGlb({d}) nested inside mapGlb({d})", node.span)
                glb = glb | {d}
        prim = primitive_of(node)
        if prim is not None and (prim.is_map or prim.is_reduction) and prim.level != "opencl" \
                and not is_layout_map(node):
            raise CodegenError(f"{node.name} has not been lowered: use mapGlb/mapWrg/mapLcl/mapSeq or reduceSeq "
                               "(or rewrite with lower_to_opencl)", node.span)
        if isinstance(node, Prim):
            # only function arguments run inside this primitive; data arguments are computed before it
            inside = sequential
            if prim.sequential:
                here = "item" if (lcl or glb) else "group" if wrg else "kernel"
                inside = (node.name, here)
            expr_slots = [s for s in PRIMITIVES[node.name].slots if not s.static] if not PRIMITIVES[node.name].variadic else []
            for i, child in enumerate(node.args):
                is_fun = i < len(expr_slots) and expr_slots[i].kind == "fun"
                if is_fun:
                    go(child, wrg, lcl, glb, inside)
                else:
                    go(child, outer[0], outer[1], outer[2], sequential)
            return
        for child in node.children():
            go(child, wrg, lcl, glb, sequential)

    go(expr, frozenset(), frozenset(), frozenset(), None)


def launch_for(expr: Node, limits: Device, private_bytes: int = 0) -> Launch:
    """The NDRange from the kernel's parallel maps (the paper's table 1): groups from mapWrg, work-items per
    group from mapLcl, global work-items from mapGlb; local sizes shrunk to fit the device (loops take the rest).
    A mapGlb kernel's local size is free: on a CPU it is chosen (:func:`cpu_work_groups`) for work-items with
    ``private_bytes`` of private memory each, known once the kernel is emitted."""
    wrg: dict[int, int] = {}
    lcl: dict[int, int] = {}
    glb: dict[int, int] = {}
    for node in walk(expr):
        parallel = isinstance(node, Prim) and PRIMITIVES[node.name].parallel
        if parallel:
            d, n = node.params[0], _length(node)
            table = {"work-group": wrg, "local": lcl, "global": glb}[parallel]
            table[d] = max(table.get(d, 0), n)
    if not wrg and not glb:
        raise CodegenError("a kernel needs a parallel map (mapGlb or mapWrg) at its top", expr.span)
    dims = max([*wrg, *glb]) + 1
    if glb:
        global_size = tuple(glb.get(d, 1) for d in range(dims))
        return Launch(global_size, cpu_work_groups(global_size, limits, private_bytes=private_bytes)
                      if limits.is_cpu else None)
    local = [min(lcl.get(d, 1), limits.max_work_item_sizes[d] if d < len(limits.max_work_item_sizes) else 1)
             for d in range(dims)]
    while math.prod(local) > limits.max_work_group_size:
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
    to the end: at least ``per_unit`` per compute unit, a multiple of the units where possible. PoCL's own
    choice for VGG-16 layer 19's direct convolution (global 7 x 28 x 8) was 7 groups of 1 x 28 x 8 for 2
    cores: 4 rounds of work where 3.5 would do; 16 groups of 7 x 14 x 1 ran the kernel 14% faster. Groups
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


# ------------------------------------------------------------------------------------------------ the emitter
@dataclass
class KernelContext:
    """What a kernel shares with the rest of the compilation: names in use and global buffers."""

    taken: set[str] = field(default_factory=set)
    temp_buffers: list[Memory] = field(default_factory=list)

    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


class KernelEmitter:
    """Emits the body of one kernel (see the module docstring)."""

    def __init__(self, name: str, launch: Launch, env: dict[str, View], ctx: KernelContext):
        self.name = name
        self.launch = launch
        self.env = dict(env)
        self.ctx = ctx
        self.code = Code()
        self.local_decls: list[Memory] = []
        self.user_funs: dict[str, UserFun] = {}
        self.helpers: dict[str, str] = {}  # OpenCL helper functions the kernel calls, by name
        self.barriers = 0
        self.probing = False  # emitting a loop body only to see its index expressions (see sequential_loop)
        self.reads_padding = False  # the kernel reads through a padding view: worth versioning (see interior)
        self.private_bytes = 0  # private memory declared, over every version of the code (see cpu_work_groups)

    # -------------------------------------------------------------------------------- binding
    @contextmanager
    def bound(self, pattern: Pattern, view: View):
        saved = dict(self.env)

        def go(p: Pattern, v: View):
            if isinstance(p, PVar):
                self.env[p.name] = v
            else:
                for c, sub in enumerate(p.elems):
                    go(sub, v.component(c))

        go(pattern, view)
        try:
            yield
        finally:
            self.env = saved

    # -------------------------------------------------------------------------------- values
    def value(self, node: Node, level: str) -> View:
        """A view of the node's value; computations are materialised first."""
        if isinstance(node, Var):
            view = self.env.get(node.name)
            if view is None:
                raise CodegenError(f"internal: no view for {node.name}", node.span)
            return view
        if isinstance(node, Literal):
            return ConstView(node.value, node.type)
        if isinstance(node, Tuple):
            return TupleView(tuple(self.value(e, level) for e in node.elems))
        if isinstance(node, ScalarOp):
            return ScalarView(self.scalar_op(node, level), node.type)
        if isinstance(node, Apply):
            if isinstance(node.fun, UserFun):
                return ScalarView(self.call_user_fun(node.fun, self.value(node.arg, level)), node.type)
            with self.bound(node.fun.param, self.value(node.arg, level)):
                return self.value(node.fun.body, level)
        if isinstance(node, Let):
            with self.bound(node.pattern, self.let_value(node, level)):
                return self.value(node.body, level)
        if isinstance(node, Prim):
            prim = PRIMITIVES[node.name]
            if prim.level == "layout":
                return prim.view(self, node, level)
            if is_layout_map(node):
                f, scope = node.args[0], dict(self.env)  # elements are built when read: keep this scope

                def element(elem: View) -> View:
                    saved, self.env = self.env, scope
                    try:
                        return self.apply_value(f, elem, level)
                    finally:
                        self.env = saved

                return MapView(self.value(node.args[1], level), node.type, element)
            if node.name == "id":
                return self.value(node.args[0], level)
            if node.name == "Value":
                return ConstView(node.args[0].value, node.type)
            if node.name == "dot":
                a, b = (self.value(x, level).read(()) for x in node.args)
                t = node.args[0].type
                if isinstance(t, VectorType) and t.width.as_int() > 4:  # OpenCL's dot stops at float4
                    name = f"liftpy_dot{t.width.as_int()}"
                    self.helpers[name] = _wide_dot(name, t.width.as_int())
                    return ScalarView(CExpr(f"{name}(", a, ", ", b, ")", atomic=True), node.type)
                if isinstance(t, VectorType):
                    return ScalarView(CExpr("dot(", a, ", ", b, ")", atomic=True), node.type)
                return ScalarView(CExpr(a.paren(), " * ", b.paren()), node.type)
            if node.name == "vectorize":
                return self.apply_value(node.args[0], self.value(node.args[1], level), level)
            if PRIMITIVES[node.name].is_reduction:
                return SingletonView(self.reduce(node, level), node.type)  # the accumulator is the result
            return self.materialize(node, level)[0]
        raise CodegenError(f"internal: cannot generate code for {type(node).__name__}", getattr(node, "span", None))

    def apply_value(self, fun: Node, arg: View, level: str) -> View:
        if isinstance(fun, UserFun):
            return ScalarView(self.call_user_fun(fun, arg), fun.type.result if fun.type else fun.result_type)
        with self.bound(fun.param, arg):
            return self.value(fun.body, level)

    def let_value(self, node: Let, level: str) -> View:
        """A let's value: a view when it only rearranges data, memory when it computes (fetched once)."""
        if is_layout_only(node.value):
            return self.value(node.value, level)
        return self.materialize(node.value, level)[0]

    def scalar_op(self, node: ScalarOp, level: str) -> CExpr:
        spec = SCALAR_OPS[node.op]
        args = [self.value(a, level).read(()) for a in node.args]
        if spec.infix:
            a, b = args
            return CExpr("(", a, f" {spec.c} ", b, ")", atomic=True)
        if node.op == "neg":
            return CExpr("(-", args[0].paren(), ")", atomic=True)
        if node.op == "!":
            return CExpr("(!", args[0].paren(), ")", atomic=True)
        if node.op == "select":
            c, a, b = args
            return CExpr("(", c.paren(), " ? ", a.paren(), " : ", b.paren(), ")", atomic=True)
        name = spec.c
        if node.op in ("min", "max") and _scalar(node.type) == "float":
            name = "f" + name
        parts: list = [f"{name}("]
        for i, a in enumerate(args):
            parts += [", " if i else "", _converted(a, node.args[i].type, node.type) if spec.kind == "math" else a]
        parts.append(")")
        return CExpr(*parts, atomic=True)

    def call_user_fun(self, fun: UserFun, arg: View) -> CExpr:
        self.user_funs[fun.name] = fun
        values = [arg.read(path) for path in _leaf_paths(fun.param_type)]
        parts: list = [f"{_fun_name(fun)}("]
        for i, v in enumerate(values):
            parts += [", " if i else "", v]
        parts.append(")")
        return CExpr(*parts, atomic=True)

    # -------------------------------------------------------------------------------- memory
    def materialize(self, node: Node, level: str, space: str | None = None, base: str | None = None) -> tuple[View, Dest]:
        """Compute ``node`` into fresh memory; the space is the program's choice or the level's default."""
        space = space or annotated_space(node) or {"kernel": "global", "group": "local", "item": "private"}[level]
        if space == "local" and level == "kernel":
            raise CodegenError("local memory written outside a work-group (toLocal outside mapWrg)", node.span)
        if space == "global" and level != "kernel":
            raise CodegenError(
                "a temporary in global memory inside a parallel map is not supported: use toPrivate or toLocal",
                node.span,
            )
        view, dest = self.allocate(node.type, space, base or _base_name(node))
        self.emit(node, dest, level)
        if level == "group" and space in ("local", "global"):
            self.barrier(space)  # work-items of the group read what the others wrote
        return view, dest

    def allocate(self, t: Type, space: str, base: str) -> tuple[View, Dest]:
        if isinstance(t, TupleType):
            parts = [self.allocate(e, space, f"{base}{i}") for i, e in enumerate(t.elems)]
            return TupleView(tuple(v for v, _ in parts)), TupleDest(tuple(d for _, d in parts), t)
        dims_t, leaf = t, leaf_type(t)
        if isinstance(leaf, TupleType):  # an array of tuples: one array per component
            parts = []
            for i, e in enumerate(leaf.elems):
                parts.append(self.allocate(_replace_leaf(dims_t, e), space, f"{base}{i}"))
            return ZipView(tuple(v for v, _ in parts), t), TupleDest(tuple(d for _, d in parts), t)
        mem = Memory(self.ctx.fresh(base), space, leaf, elem_count(t))
        if space == "private":
            self.private_bytes += mem.bytes
        if space == "local":
            self.local_decls.append(mem)
        elif space == "private":
            self.code.line(mem.declaration())
        else:
            self.ctx.temp_buffers.append(mem)
        return MemView(mem, t), MemDest(mem, t)

    def barrier(self, space: str):
        fence = "CLK_LOCAL_MEM_FENCE" if space == "local" else "CLK_GLOBAL_MEM_FENCE"
        self.code.line(f"barrier({fence});")
        self.barriers += 1

    # -------------------------------------------------------------------------------- statements
    def emit(self, node: Node, dest: Dest, level: str) -> None:
        """Write the value of ``node`` into ``dest``."""
        if isinstance(node, Prim):
            prim = PRIMITIVES[node.name]
            if is_layout_map(node):
                if has_computation(node.args[1]):
                    return self.emit(node.args[1], MapDest(dest, node.args[1].type, self.layout_dest(node.args[0])), level)
                return self.copy(self.value(node, level), dest, node.type, level)
            if prim.is_map:
                return self.emit_map(node, dest, level)
            if prim.is_reduction:
                return self.emit_reduce(node, dest, level)
            if prim.space:
                if prim.space == "local" and level == "kernel":
                    raise CodegenError("local memory written outside a work-group (toLocal outside mapWrg)", node.span)
                f, x = node.args
                return self.emit_apply(f, x, dest, level)
            if node.name == "id":
                return self.emit(node.args[0], dest, level)
            if node.name == "vectorize":
                return self.emit_apply(node.args[0], node.args[1], dest, level)
            if prim.level == "layout" and has_computation(node):
                arg_dest = prim.dest_for_arg(node, dest)
                if arg_dest is not None:
                    return self.emit(node.args[-1], arg_dest, level)
        if isinstance(node, Let):
            with self.bound(node.pattern, self.let_value(node, level)):
                return self.emit(node.body, dest, level)
        if isinstance(node, Tuple):
            for c, e in enumerate(node.elems):
                self.emit(e, dest.component(c), level)
            return
        if isinstance(node, Apply) and isinstance(node.fun, Lambda):
            return self.emit_apply(node.fun, node.arg, dest, level)
        self.copy(self.value(node, level), dest, node.type, level)

    def emit_apply(self, fun: Node, arg: Node, dest: Dest, level: str):
        if isinstance(fun, Lambda) and isinstance(fun.body, Prim) and fun.body.name == "id" and (
            isinstance(fun.body.args[0], Var) and isinstance(fun.param, PVar) and fun.body.args[0].name == fun.param.name
        ):
            return self.emit(arg, dest, level)  # toGlobal(id, e): e written straight to its destination
        self.emit_fun(fun, self.value(arg, level), dest, level)

    def emit_fun(self, fun: Node, arg: View, dest: Dest, level: str):
        if isinstance(fun, UserFun):
            dest.write(self.code, (), self.call_user_fun(fun, arg))
            return
        with self.bound(fun.param, arg):
            self.emit(fun.body, dest, level)

    def copy(self, view: View, dest: Dest, t: Type, level: str):
        """Element-by-element copy of a view into a destination."""
        if isinstance(t, (ScalarType, VectorType)):
            dest.write(self.code, (), view.read(()))
            return
        if isinstance(t, TupleType):
            for c, e in enumerate(t.elems):
                self.copy(view.component(c), dest.component(c), e, level)
            return
        n = t.size.as_int()
        var = arith.Var(self.ctx.fresh("c"), Range(arith.Const(0), arith.Const(n - 1)))
        self.code.open(f"for (int {var.name} = 0; {var.name} < {n}; {var.name}++)")
        self.code.comment("copy")
        self.copy(view.access(var), dest.access(var), t.elem, level)
        self.code.close()

    # -------------------------------------------------------------------------------- loops
    def emit_map(self, node: Prim, dest: Dest, level: str):
        kind, prim = node.name, PRIMITIVES[node.name]
        f, xs = node.args[-2], node.args[-1]
        n = _length(xs)
        xv = self.value(xs, level)
        # the body of a mapWrg runs for a work-group, that of a mapGlb or mapLcl for a work-item
        inner_level = {"work-group": "group", "local": "item", "global": "item"}.get(prim.parallel, level)
        if prim.unrolled:
            self.code.comment(f"{kind} over {n}")
            for k in range(n):
                self.emit_fun(f, xv.access(arith.Const(k)), dest.access(arith.Const(k)), inner_level)
            return
        before = self.barriers

        def body(emitter: "KernelEmitter", i: arith.Expr):
            emitter.emit_fun(f, xv.access(i), dest.access(i), inner_level)
            if level == "group" and prim.sequential and emitter.barriers > before:
                emitter.barrier("local")  # the next iteration overwrites what this one shared

        if prim.sequential:
            self.sequential_loop(kind, n, body)
            return
        dim = node.params[0]
        index = self.ctx.fresh(prim.loop_name + str(dim))
        var = arith.Var(index, Range(arith.Const(0), arith.Const(n - 1)))
        with self.loop(var, n, kind, dim, f"{kind}({dim}) over {n} element(s)"):
            self.interior(var, n, body)

    def interior(self, var: arith.Var, n: int, body) -> None:
        """``body(emitter, var)``, versioned when it reads padded arrays: an interior version for the values of
        ``var`` at which every padding condition that depends on it holds, the general one for the border.

        Reading an input through its padding view (no padded copy) puts a condition at every read of a
        reduction's inner loop; for most work-items the window lies inside the input. In the interior
        version ``var`` carries the narrower range, so the views prove the conditions and drop them (and
        vector reads become vector loads). The interval comes from a scratch emission of the body; the
        conditions that stay are still checked, so it only decides how much code is fast."""
        if self.probing or not self.reads_padding:
            body(self, var)
            return
        guards, (lo, hi) = self._interior_interval(var, n, body)
        if not guards:  # no padding condition in this body: the maps nested in it need not look again
            self.reads_padding = False
            try:
                body(self, var)
            finally:
                self.reads_padding = True
            return
        if lo > hi or (lo == 0 and hi == n - 1):
            body(self, var)
            return
        inside = arith.Var(var.name, Range(arith.Const(lo), arith.Const(hi)))
        tests = ([f"{lo} <= {var.name}"] if lo > 0 else []) + ([f"{var.name} <= {hi}"] if hi < n - 1 else [])
        self.code.open(f"if ({' && '.join(tests)})")
        self.code.comment(f"interior: no padding condition depends on {var.name}")
        body(self, inside)
        self.code.close()
        self.code.open("else")
        body(self, var)
        self.code.close()

    def _interior_interval(self, var: arith.Var, n: int, body) -> tuple[int, tuple[int, int]]:
        """How many padding conditions a scratch emission of the body has, and the values of ``var`` for which
        every one ``0 <= a*var + rest < m`` holds whatever the other variables."""
        probe = self._probe()
        body(probe, var)
        lo, hi = 0, n - 1
        guards = list(_guards(probe.code))
        for guard in guards:
            index, m = guard.index, guard.n.as_int()
            if var not in index.free_vars() or m is None:
                continue
            at0, at1, at2 = (index.subs({var: k}) for k in (0, 1, 2))
            step = (at1 - at0).as_int()
            if step is None or step <= 0 or (at2 - at1).as_int() != step:
                continue  # not increasing linearly in var: this condition stays in both versions
            rest_lo, rest_hi = (b.as_int() if b is not None else None for b in arith.bounds(at0))
            if rest_lo is None or rest_hi is None:
                continue
            lo = max(lo, -(rest_lo // step))  # step*var + rest_lo >= 0
            hi = min(hi, (m - 1 - rest_hi) // step)  # step*var + rest_hi <= m - 1
        return len(guards), (lo, hi)

    def _probe(self) -> "KernelEmitter":
        """A scratch copy of this emitter: code emitted into it only shows what the real emission would be."""
        probe = copy.copy(self)
        probe.code, probe.env, probe.probing = Code(), dict(self.env), True
        probe.ctx = KernelContext(set(self.ctx.taken), list(self.ctx.temp_buffers))
        probe.local_decls, probe.user_funs, probe.helpers = list(self.local_decls), dict(self.user_funs), dict(self.helpers)
        return probe

    def sequential_loop(self, kind: str, n: int, body) -> None:
        """A sequential loop over ``n`` elements, ``body(emitter, index)`` emitting one step.

        Views of joined arrays index them with divisions: a reduction over a flattened 3 x 3 x 512 window
        reads ``in[15360*(j/1536) + 512*(j/512%3) + j%512]``, a division and two remainders per step of a
        loop whose step is a handful of vector FMAs. When the divisors of the index form a chain dividing
        ``n``, the loop becomes a nest of loops, one per factor, and the index their weighted sum, which the
        arithmetic simplifies (``in[15360*ky + 512*kx + c]``). The steps run in the same order, so the result
        is the same to the bit. The divisors are found by emitting the body once into a scratch emitter."""
        base = PRIMITIVES[kind].loop_name
        bounds = [] if self.probing else self._index_divisors(kind, n, body)
        cuts = [1, *bounds, n]
        loop_vars = [arith.Var(self.ctx.fresh(base), Range(arith.Const(0), arith.Const(cuts[k + 1] // cuts[k] - 1)))
                     for k in reversed(range(len(cuts) - 1))]  # outermost first
        index = sum((cuts[len(cuts) - 2 - k] * v for k, v in enumerate(loop_vars)), arith.Const(0))
        shape = " x ".join(str(cuts[k + 1] // cuts[k]) for k in reversed(range(len(cuts) - 1)))
        comment = f"{kind} over {n} element(s)" + (f", as {shape}" if bounds else "")
        for k, v in enumerate(loop_vars):
            extent = v.range.hi.as_int() + 1
            self.code.open(f"for (int {v.name} = 0; {v.name} < {extent}; {v.name}++)")
            if k == 0:
                self.code.comment(comment)
        body(self, index)
        for _ in loop_vars:
            self.code.close()

    def _index_divisors(self, kind: str, n: int, body) -> list[int]:
        """The divisors d (1 < d < n, d | n, each dividing the next) of ``j/d`` and ``j%d`` in the body's code."""
        probe = self._probe()
        var = arith.Var(probe.ctx.fresh(PRIMITIVES[kind].loop_name), Range(arith.Const(0), arith.Const(n - 1)))
        body(probe, var)
        text = probe.code.render()
        found = set()
        for m in re.finditer(rf"(?<![\w.]){re.escape(var.name)}([/%])(\d+)(?:%(\d+))?", text):
            d = int(m.group(2))
            found.add(d)
            if m.group(1) == "/" and m.group(3):
                found.add(d * int(m.group(3)))  # j/a%b == (j % (a*b))/a
        chain: list[int] = []
        for d in sorted(found):
            if 1 < d < n and n % d == 0 and (not chain or d % chain[-1] == 0):
                chain.append(d)
        return chain

    @contextmanager
    def loop(self, var: arith.Var, n: int, kind: str, dim: int, comment: str):
        """A parallel map's loop over the work-items (groups) of dimension ``dim``, dropped when they match."""
        name = var.name
        query, count = PRIMITIVES[kind].index_queries
        threads = self.launch.threads(PRIMITIVES[kind].parallel, dim)
        if threads == n:  # as many work-items (groups) as elements: no loop
            self.code.line(f"int {name} = {query}({dim});  // {comment}")
            yield
            return
        elif threads > n:
            self.code.open(f"for (int {name} = {query}({dim}); {name} < {n}; {name} += {threads})")
            self.code.comment(f"{comment} ({threads} in the launch: at most one each)")
        else:
            self.code.open(f"for (int {name} = {query}({dim}); {name} < {n}; {name} += {count}({dim}))")
            self.code.comment(comment)
        try:
            yield
        finally:
            self.code.close()

    def reduce(self, node: Prim, level: str) -> View:
        """Run a sequential reduction; its accumulator (memory chosen by init's toX, else private) is the result."""
        init, f, xs = node.args
        n = _length(xs)
        acc_view, acc_dest = self.materialize(init, level, annotated_space(init) or "private", base="acc")
        xv = self.value(xs, level)
        before = self.barriers
        if PRIMITIVES[node.name].unrolled:
            self.code.comment(f"{node.name} over {n} element(s)")
            for k in range(n):
                self.emit_fun(f, TupleView((acc_view, xv.access(arith.Const(k)))), acc_dest, level)
        else:
            def body(emitter: "KernelEmitter", j: arith.Expr):
                emitter.emit_fun(f, TupleView((acc_view, xv.access(j))), acc_dest, level)
                if level == "group" and emitter.barriers > before:
                    emitter.barrier("local")  # the next step overwrites what this one shared

            self.sequential_loop(node.name, n, body)
        return acc_view

    def emit_reduce(self, node: Prim, dest: Dest, level: str):
        acc_view = self.reduce(node, level)
        self.copy(acc_view, dest.access(arith.Const(0)), node.args[0].type, level)

    def layout_dest(self, fun: Lambda):
        """For a layout function f (``transpose``): element destination -> destination for f's argument."""

        def through(body: Node, dest: Dest) -> Dest:
            if isinstance(body, Var) and isinstance(fun.param, PVar) and body.name == fun.param.name:
                return dest
            if is_layout_map(body):
                return through(body.args[1], MapDest(dest, body.args[1].type, self.layout_dest(body.args[0])))
            if isinstance(body, Prim) and PRIMITIVES[body.name].level == "layout":
                inner = PRIMITIVES[body.name].dest_for_arg(body, dest)
                if inner is not None:
                    return through(body.args[-1], inner)
            raise CodegenError(f"cannot write through {body}: compute the value into memory first", body.span)

        return lambda dest: through(fun.body, dest)


# ------------------------------------------------------------------------------------------------ helpers
def _guards(code: Code):
    """The padding conditions (:class:`Guarded` reads) in emitted code."""

    def walk_parts(parts):
        for p in parts:
            if isinstance(p, CExpr):
                if isinstance(p, Guarded):
                    yield p
                yield from walk_parts(p.parts)

    for _, parts in code.lines:
        yield from walk_parts(parts)


def is_layout_only(node: Node) -> bool:
    """True when a node computes nothing: it only rearranges data (views), maps a layout function over an
    array (``map(transpose, xs)``, as slide2D does) or names constants."""
    if isinstance(node, (Var, Literal)):
        return True
    if isinstance(node, Tuple):
        return all(is_layout_only(e) for e in node.elems)
    if isinstance(node, Let):
        return is_layout_only(node.value) and is_layout_only(node.body)
    if isinstance(node, Prim):
        if is_layout_map(node):
            return is_layout_only(node.args[1])
        if PRIMITIVES[node.name].level == "layout" or node.name in ("id", "Value"):
            return all(is_layout_only(a) for a in node.args)
    return False


def is_layout_map(node: Node) -> bool:
    """``map(f, xs)`` with a function that only rearranges its argument: a view, not a loop."""
    if not (isinstance(node, Prim) and node.name == "map"):
        return False
    f = node.args[0]
    return isinstance(f, Lambda) and _layout_body(f.body)


def _layout_body(node: Node) -> bool:
    if isinstance(node, Var):
        return True
    if isinstance(node, Tuple):
        return all(_layout_body(e) for e in node.elems)
    if isinstance(node, Let):
        return _layout_body(node.value) and _layout_body(node.body)
    if isinstance(node, Prim):
        if is_layout_map(node):
            return _layout_body(node.args[1])
        if PRIMITIVES[node.name].level == "layout" and node.name not in ("zip", "pad"):
            return all(_layout_body(a) for a in node.args)
        if node.name in ("zip", "pad"):
            return all(is_layout_only(a) for a in node.args)
    return False


def has_computation(node: Node) -> bool:
    return not is_layout_only(node)


def annotated_space(node: Node) -> str | None:
    """The address space the program chose for a node's result: toX on top, or inside the mapped function."""
    if isinstance(node, Prim):
        prim = PRIMITIVES[node.name]
        if prim.space:
            return prim.space
        if prim.is_map:
            f = node.args[-2]
            return annotated_space(f.body) if isinstance(f, Lambda) else None
        if prim.is_reduction:
            return annotated_space(node.args[0])
        if node.name == "id":
            return None
        if PRIMITIVES[node.name].level == "layout" and node.args:
            return annotated_space(node.args[-1])
    if isinstance(node, Let):
        return annotated_space(node.body)
    return None


def _wide_dot(name: str, width: int) -> str:
    """dot for float8/float16 (OpenCL's builtin takes at most four lanes): the products, summed by halves."""
    half = width // 2
    inner = "dot" if half <= 4 else f"liftpy_dot{half}"
    prelude = _wide_dot(inner, half) + "\n" if half > 4 else ""
    return (f"{prelude}float {name}(float{width} a, float{width} b) {{\n"
            f"    return {inner}(a.lo, b.lo) + {inner}(a.hi, b.hi);\n}}\n")


def _base_name(node: Node) -> str:
    if isinstance(node, Prim) and PRIMITIVES[node.name].is_reduction:
        return "acc"
    return "tmp"


def _replace_leaf(t: Type, leaf: Type) -> Type:
    if isinstance(t, ArrayType):
        return ArrayType(_replace_leaf(t.elem, leaf), t.size)
    return leaf


def _leaf_paths(t: Type, prefix: tuple = ()) -> list[tuple]:
    from .views import Get

    if isinstance(t, TupleType):
        out = []
        for c, e in enumerate(t.elems):
            out += _leaf_paths(e, prefix + (Get(c),))
        return out
    return [prefix]


def _scalar(t: Type) -> str:
    return (t.scalar if isinstance(t, VectorType) else t).name


def _converted(value: CExpr, from_t: Type, to_t: Type) -> CExpr:
    if _scalar(from_t) == "int" and _scalar(to_t) == "float":
        return CExpr(f"({c_type(to_t)})", value.paren(), atomic=True)
    return value


def _fun_name(fun: UserFun) -> str:
    from ..arith import c_name

    return "uf_" + c_name(fun.name)


def user_fun_source(fun: UserFun) -> str:
    """A user function as an OpenCL function (its body is a scalar expression)."""
    from .views import ScalarView as SV

    names = list(fun.param.names())
    types = list(fun.param_type.elems) if isinstance(fun.param, PTuple) else [fun.param_type]
    if any(isinstance(t, TupleType) for t in types) or isinstance(fun.result_type, TupleType):
        raise CodegenError(f"user function {fun.name}: nested tuples are not supported in OpenCL functions", fun.span)
    from ..arith import c_name

    emitter = KernelEmitter(fun.name, Launch((1,), None), {}, KernelContext())
    env = {}
    params = []
    for name, t in zip(names, types):
        env[name] = SV(CExpr(c_name(name), atomic=True), t)
        params.append(f"{c_type(t)} {c_name(name)}")
    emitter.env = env
    body = emitter.value(fun.body, "item").read(())
    deps = "".join(user_fun_source(f) + "\n" for f in emitter.user_funs.values())
    return f"{deps}{c_type(fun.result_type)} {_fun_name(fun)}({', '.join(params)}) {{\n    return {body};\n}}\n"


__all__ = ["KernelEmitter", "KernelContext", "Launch", "launch_for", "cpu_work_groups", "check_nesting",
           "user_fun_source", "is_layout_only", "is_layout_map", "annotated_space"]
