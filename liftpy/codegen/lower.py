"""Lowering: one kernel's typed, size-specialised, low-level expression to kernel IR (:mod:`.kir`).

The first of the kernel IR passes (:func:`liftpy.codegen.passes.compile_kernel`). Code is lowered in
destination-passing style: ``emit(node, dest)`` adds the statements writing the value of ``node`` into
``dest``; ``value(node)`` gives a :class:`~liftpy.codegen.views.View` to read it. Layout primitives only build
views (reading) or destination transforms (writing); computing primitives become loops and stores; a computed
value used as an input is *materialised* into memory first (an :class:`~.kir.Alloc` and a
:class:`~.kir.Produce`), in the address space the program asks for (``toPrivate``/``toLocal``/``toGlobal``)
or, by default, the one of the level it is computed at (private inside a work-item, local inside a
work-group).

``mapGlb/mapWrg/mapLcl(d)`` become :class:`~.kir.ParFor` loops at their level and dimension, sequential maps
and reductions :class:`~.kir.SeqFor` loops, unrolled ones :class:`~.kir.Unrolled` steps. What the lowering
leaves to later passes: where barriers go, splitting loops at their indices' divisors, interior versions of
padded reads, which private arrays live in registers, the launch, and the C text.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

from .. import arith
from ..arith import Range
from ..errors import CodegenError
from ..ir import Apply, Lambda, Let, Literal, Node, Pattern, Prim, PTuple, PVar, ScalarOp, Tuple, UserFun, Var
from ..primitives import PRIMITIVES, SCALAR_OPS, is_view, primitive_of
from ..types import ArrayType, ScalarType, TupleType, Type, VectorType
from ..errors import InternalError
from . import kir
from .launch import stages
from .c import CExpr, Memory, MemRef, VLoad, c_type
from .memory import (Placement, annotated_space, is_identity_function, is_layout_map, level_inside, memory_space,
                     placements)
from .views import (
    ConstView,
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


def _known_length(node: Node) -> int | None:
    t = node.type
    return t.size.as_int() if isinstance(t, ArrayType) else None


def check_nesting(expr: Node) -> None:
    """Legality: mapLcl only inside mapWrg, no parallel map nested on its own dimension, no mixing of mapGlb
    with mapWrg, no parallel map inside a sequential one (unless it has a single step)."""

    def go(node: Node, wrg: frozenset, lcl: frozenset, glb: frozenset, sequential: str | None):
        outer = (wrg, lcl, glb)
        parallel = isinstance(node, Prim) and PRIMITIVES[node.name].parallel
        if parallel:
            d = node.params[0]
            # a sequential loop run by a whole work-group may contain mapLcl (with barriers); a sequential map
            # outside every parallel map may contain any (every work-item walks all its steps, which are
            # independent: no work-item reads what another wrote); any other parallel map inside a sequential
            # loop would need a synchronisation OpenCL does not have
            walks_independent_steps = sequential is not None and sequential[1] == "kernel" and \
                PRIMITIVES[sequential[0]].is_map
            if sequential is not None and not (parallel == "local" and sequential[1] == "group") \
                    and not walks_independent_steps:
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
            if prim.sequential and not (prim.is_map and _known_length(node.args[-1]) == 1):  # one step: no loop to sync
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


# ------------------------------------------------------------------------------------------------ the lowering
@dataclass
class KernelContext:
    """What a kernel shares with the rest of the compilation: the names in use."""

    taken: set[str] = field(default_factory=set)

    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


class Lowering:
    """Lowers one kernel's expression to kernel IR statements (see the module docstring)."""

    def __init__(self, env: dict[str, View], ctx: KernelContext, plan: list[Placement] = ()):
        self.env = dict(env)
        self.ctx = ctx
        self.plan = {id(p.node): p for p in plan}  # the values it may compute into memory (see .memory)
        self.materialized: set[int] = set()
        self.statements: list[list] = [[]]  # the bodies being built, innermost last
        self.user_funs: dict[str, UserFun] = {}
        self.helpers: dict[str, str] = {}  # OpenCL helper functions the kernel calls, by name

    def add(self, stmt: kir.Stmt) -> None:
        self.statements[-1].append(stmt)

    def collect(self, build: Callable[[], None]) -> tuple:
        """The statements ``build()`` adds, as a body (not added here)."""
        self.statements.append([])
        try:
            build()
        finally:
            body = self.statements.pop()
        return tuple(body)

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
            if is_layout_map(node):
                f, scope = node.args[0], dict(self.env)  # elements are built when read: keep this scope

                def element(elem: View) -> View:
                    saved, self.env = self.env, scope
                    try:
                        return self.apply_value(f, elem, level)
                    finally:
                        self.env = saved

                return MapView(self.value(node.args[1], level), node.type, element)
            if prim.is_reduction:
                return SingletonView(self.reduce(node, level), node.type)  # the accumulator is the result
            if prim.is_map or prim.space:
                return self.materialize(node, level)[0]
            if prim.applies_function:
                return self.apply_value(node.args[0], self.value(node.args[1], level), level)
            return prim.view(self, node, level)  # layout primitives, id, Value, dot
        raise CodegenError(f"internal: cannot generate code for {type(node).__name__}", getattr(node, "span", None))

    def builtin_dot(self, node: Prim, level: str) -> View:
        """dot(a, b): OpenCL's builtin up to four lanes, a helper beyond, a product on scalars."""
        a, b = (self.value(x, level).read(()) for x in node.args)
        t = node.args[0].type
        if isinstance(t, VectorType) and t.width.as_int() > 4:  # OpenCL's dot stops at float4
            name = f"liftpy_dot{t.width.as_int()}"
            self.helpers[name] = _wide_dot(name, t.width.as_int())
            return ScalarView(CExpr(f"{name}(", a, ", ", b, ")", atomic=True), node.type)
        if isinstance(t, VectorType):
            return ScalarView(CExpr("dot(", a, ", ", b, ")", atomic=True), node.type)
        return ScalarView(CExpr(a.paren(), " * ", b.paren()), node.type)

    def apply_value(self, fun: Node, arg: View, level: str) -> View:
        if isinstance(fun, UserFun):
            return ScalarView(self.call_user_fun(fun, arg), fun.type.result if fun.type else fun.result_type)
        with self.bound(fun.param, arg):
            return self.value(fun.body, level)

    def let_value(self, node: Let, level: str) -> View:
        """A let's value: a view when it only rearranges data, memory when it computes (fetched once)."""
        if is_view(node.value):
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
        """Compute ``node`` into fresh memory, where the memory plan places it (:mod:`.memory`)."""
        space = memory_space(node, level, space)
        placed = self.plan.get(id(node))
        if placed is None or (placed.space, placed.level) != (space, level):
            raise InternalError(f"the memory plan does not place {type(node).__name__} {node} in {space} memory at "
                                f"{level} level (it says {placed and (placed.space, placed.level)})")
        if space == "local" and level == "kernel":
            raise CodegenError("local memory written outside a work-group (toLocal outside mapWrg)", node.span)
        if space == "global" and level != "kernel":
            raise CodegenError(
                "a temporary in global memory inside a parallel map is not supported: use toPrivate or toLocal",
                node.span,
            )
        self.materialized.add(id(node))
        view, dest = self.allocate(node.type, space, base or _base_name(node))
        self.add(kir.Produce(space, self.collect(lambda: self.emit(node, dest, level))))
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
        self.add(kir.Alloc(mem))
        return MemView(mem, t), MemDest(mem, t)

    # -------------------------------------------------------------------------------- statements
    def emit(self, node: Node, dest: Dest, level: str) -> None:
        """Write the value of ``node`` into ``dest``."""
        if isinstance(node, Prim):
            prim = PRIMITIVES[node.name]
            if is_layout_map(node):
                if not is_view(node.args[1]):
                    return self.emit(node.args[1], MapDest(dest, node.args[1].type, self.layout_dest(node.args[0])), level)
                return self.copy(self.value(node, level), dest, node.type, level)
            if prim.is_map:
                return self.emit_map(node, dest, level)
            if prim.is_reduction:
                return self.emit_reduce(node, dest, level)
            if prim.applies_function:
                if prim.space == "local" and level == "kernel":
                    raise CodegenError("local memory written outside a work-group (toLocal outside mapWrg)", node.span)
                f, x = node.args
                return self.emit_apply(f, x, dest, level)
            if prim.is_view and not is_view(node):
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
        if is_identity_function(fun):
            return self.emit(arg, dest, level)  # toGlobal(id, e): e written straight to its destination
        self.emit_fun(fun, self.value(arg, level), dest, level)

    def emit_fun(self, fun: Node, arg: View, dest: Dest, level: str):
        if isinstance(fun, UserFun):
            dest.write(self, (), self.call_user_fun(fun, arg))
            return
        with self.bound(fun.param, arg):
            self.emit(fun.body, dest, level)

    def copy(self, view: View, dest: Dest, t: Type, level: str):
        """Element-by-element copy of a view into a destination."""
        if isinstance(t, (ScalarType, VectorType)):
            dest.write(self, (), view.read(()))
            return
        if isinstance(t, TupleType):
            for c, e in enumerate(t.elems):
                self.copy(view.component(c), dest.component(c), e, level)
            return
        n = t.size.as_int()
        var = arith.Var(self.ctx.fresh("c"), Range(arith.Const(0), arith.Const(n - 1)))
        body = self.collect(lambda: self.copy(view.access(var), dest.access(var), t.elem, level))
        if _reads_only_private(body):  # a block of private accumulators copied out: unrolled, they stay registers
            steps = self.collect(lambda: [self.copy(view.access(arith.Const(k)), dest.access(arith.Const(k)), t.elem,
                                                    level) for k in range(n)])
            self.add(kir.Unrolled(f"copy of {n}", steps))
            return
        self.add(kir.SeqFor(var, n, "copy", body, splittable=False))

    # -------------------------------------------------------------------------------- loops
    def emit_map(self, node: Prim, dest: Dest, level: str):
        kind, prim = node.name, PRIMITIVES[node.name]
        f, xs = node.args[-2], node.args[-1]
        n = _length(xs)
        xv = self.value(xs, level)
        inner_level = level_inside(prim, level)
        if prim.unrolled:
            steps = self.collect(lambda: [self.emit_fun(f, xv.access(arith.Const(k)), dest.access(arith.Const(k)),
                                                        inner_level) for k in range(n)])
            self.add(kir.Unrolled(f"{kind} over {n}", steps))
            return
        if prim.sequential:
            var = arith.Var(self.ctx.fresh(prim.loop_name), Range(arith.Const(0), arith.Const(n - 1)))
            body = self.collect(lambda: self.emit_fun(f, xv.access(var), dest.access(var), inner_level))
            self.add(kir.SeqFor(var, n, f"{kind} over {n} element(s)", body))
            return
        dim = node.params[0]
        var = arith.Var(self.ctx.fresh(prim.loop_name + str(dim)), Range(arith.Const(0), arith.Const(n - 1)))
        body = self.collect(lambda: self.emit_fun(f, xv.access(var), dest.access(var), inner_level))
        self.add(kir.ParFor(var, n, prim.parallel, dim, f"{kind}({dim}) over {n} element(s)", body,
                            prim.index_queries, stages(node)))

    def reduce(self, node: Prim, level: str) -> View:
        """Run a sequential reduction; its accumulator (memory chosen by init's toX, else private) is the result."""
        init, f, xs = node.args
        n = _length(xs)
        acc_view, acc_dest = self.materialize(init, level, annotated_space(init) or "private", base="acc")
        xv = self.value(xs, level)
        prim = PRIMITIVES[node.name]
        if prim.unrolled:
            steps = self.collect(lambda: [self.emit_fun(f, TupleView((acc_view, xv.access(arith.Const(k)))), acc_dest,
                                                        level) for k in range(n)])
            self.add(kir.Unrolled(f"{node.name} over {n} element(s)", steps))
        else:
            var = arith.Var(self.ctx.fresh(prim.loop_name), Range(arith.Const(0), arith.Const(n - 1)))
            body = self.collect(lambda: self.emit_fun(f, TupleView((acc_view, xv.access(var))), acc_dest, level))
            self.add(kir.SeqFor(var, n, f"{node.name} over {n} element(s)", body))
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
            if isinstance(body, Prim) and PRIMITIVES[body.name].is_view:
                inner = PRIMITIVES[body.name].dest_for_arg(body, dest)
                if inner is not None:
                    return through(body.args[-1], inner)
            raise CodegenError(f"cannot write through {body}: compute the value into memory first", body.span)

        return lambda dest: through(fun.body, dest)


# ------------------------------------------------------------------------------------------------ helpers
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

    lowering = Lowering({}, KernelContext())
    env = {}
    params = []
    for name, t in zip(names, types):
        env[name] = SV(CExpr(c_name(name), atomic=True), t)
        params.append(f"{c_type(t)} {c_name(name)}")
    lowering.env = env
    body = lowering.value(fun.body, "item").read(())
    deps = "".join(user_fun_source(f) + "\n" for f in lowering.user_funs.values())
    return f"{deps}{c_type(fun.result_type)} {_fun_name(fun)}({', '.join(params)}) {{\n    return {body};\n}}\n"


def lower(name: str, expr: Node, output: Memory, env: dict[str, View], ctx: KernelContext) -> kir.Kernel:
    """The kernel computing ``expr`` into ``output``, in kernel IR, with the views of ``env`` in scope."""
    plan = placements(expr)
    lowering = Lowering(env, ctx, plan)
    body = lowering.collect(lambda: lowering.emit(expr, MemDest(output, expr.type), "kernel"))
    unused = [p for p in plan if id(p.node) not in lowering.materialized]
    if unused:
        raise InternalError(f"the memory plan places {unused[0].node} in {unused[0].space} memory; the lowering "
                            "computed it without memory of its own")
    return kir.Kernel(name, body, output, dict(lowering.user_funs), dict(lowering.helpers))


__all__ = ["Lowering", "KernelContext", "lower", "check_nesting", "user_fun_source"]


def _reads_only_private(body: tuple) -> bool:
    """Whether a body reads memory, and only private memory (what allocate_private can make registers of,
    once every index is a constant)."""
    read = [f.mem for f in kir.value_fragments(body) if isinstance(f, (MemRef, VLoad))]
    return bool(read) and all(m.space == "private" for m in read)
