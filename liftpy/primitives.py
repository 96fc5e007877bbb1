"""The primitive table: every primitive of the language declared once.

Each primitive is one class: its *signature* (the names and kinds of its arguments, which the parser uses to
read a call and the printer to write it back), its *type rule* (``infer``, following the table of the paper's
section 3.1.1) and its *meaning* (``evaluate``, on the interpreter's batched numpy values). Later stages find
a primitive's code generation from the same class. Argument kinds:

* ``size``: a symbolic size (``split(n, ...)``), ``dim``: an OpenCL dimension 0-2, ``indexfun``: a reorder
  index function (``stride(s)``), ``type``: a type (``Value(0, [float]_k)``) -- these are static parameters;
* ``fun``: a function argument, ``data``: a value; ``data*`` takes two or more values (``zip``).

Scalar arithmetic and math builtins are in :data:`SCALAR_OPS`; reorder index functions in :data:`INDEX_FUNS`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import arith
from .arith import Expr
from .ir import IndexFun, Lambda, Let, Literal, Prim, Tuple, Var
from .types import (
    BOOL,
    FLOAT,
    INT,
    ArrayType,
    ScalarType,
    TupleType,
    Type,
    VectorType,
    scalar_of,
)
from .values import concrete, constant, join_axes, on_leaves, zip_leaves

STATIC_KINDS = ("size", "dim", "indexfun", "type")


@dataclass(frozen=True)
class Slot:
    """One argument of a primitive: its name (for named arguments), kind and, for a ``fun``, a default."""

    name: str
    kind: str
    variadic: bool = False
    default: str | None = None  # "id": ``toGlobal(x)`` on a value means ``toGlobal(id, x)``

    @property
    def static(self) -> bool:
        return self.kind in STATIC_KINDS


def _parse_signature(text: str) -> tuple[Slot, ...]:
    slots = []
    for part in text.split(","):
        name, kind = (s.strip() for s in part.split(":"))
        default = None
        if "=" in kind:
            kind, default = (s.strip() for s in kind.split("="))
        variadic = kind.endswith("*")
        slots.append(Slot(name, kind.rstrip("*"), variadic, default))
    return tuple(slots)


class Primitive:
    """Base of every primitive. Subclasses set ``name``, ``signature`` and a docstring giving the type."""

    name: str = ""
    signature: str = ""
    #: "algorithmic" (paper section 3.1.1), "opencl" (3.1.2) or "layout" (generates no code, only views)
    level: str = "algorithmic"

    # Traits: what the other stages ask of a primitive, instead of testing its name.
    #: applies a function to every element of its last argument (map and its OpenCL forms)
    is_map: bool = False
    #: folds its last argument into an accumulator (reduce and its OpenCL forms)
    is_reduction: bool = False
    #: a parallel map's OpenCL level: "global" (mapGlb), "work-group" (mapWrg) or "local" (mapLcl)
    parallel: str | None = None
    #: for a parallel map, the OpenCL calls giving its index and the count of its work-items (groups)
    index_queries: tuple[str, str] | None = None
    #: a loop one work-item runs element after element (mapSeq, reduceSeq and their unrolled forms)
    sequential: bool = False
    #: a sequential loop written out step by step in the generated code
    unrolled: bool = False
    #: the address space its result is written to (toGlobal, toLocal, toPrivate)
    space: str | None = None
    #: the prefix of the variable the code generator names for its loop index
    loop_name: str | None = None
    #: only rearranges its arguments' elements or names constants -- no arithmetic, no memory, no loop --
    #: provided its arguments (and, for map, its function) are views too: see :func:`is_view`. Layout primitives,
    #: id, Value and the high-level map; not the OpenCL maps (loops) nor the address spaces (copies).
    is_view: bool = False
    #: its value is its function applied to its data argument (vectorize; toGlobal/toLocal/toPrivate, which
    #: also say where the result goes)
    applies_function: bool = False
    #: the identity (id): ``toGlobal(id, e)`` writes e straight to its destination
    identity: bool = False
    #: its first static parameter is a vector width (asVector, vectorize): a tuning parameter that must be one
    #: of OpenCL's widths
    sets_vector_width: bool = False
    #: reading through its view checks a condition per element (pad: inside or the pad value)
    guards_reads: bool = False
    #: an element of its input may stand in several places of its value (slide's overlapping windows): a copy
    #: of the view is larger than what it reads
    repeats_elements: bool = False
    #: its value holds each element of its one data argument exactly once, only moved (split, join,
    #: transpose): a copy of the view is its argument reordered, so a copy may be held in the view's order
    rearranges: bool = False
    #: its value is its input with elements added at the ends of its outer dimension (pad, padClamp): the
    #: dimensions keep their order
    pads: bool = False
    #: its value pairs its arguments' elements position by position (zip): element i of each argument is
    #: component j of element i
    zips: bool = False
    #: its value groups its one data argument's outer dimension into chunks of its first size parameter (split):
    #: element i of the argument is element i % m of chunk i / m
    groups: bool = False
    #: its value is its one data argument with the two outer dimensions swapped (transpose): element (i, j) of
    #: the value is element (j, i) of the argument
    transposes: bool = False
    #: its value is one component of its tuple argument, the one its static parameter names (get)
    projects: bool = False

    def __init__(self):
        self.slots = _parse_signature(self.signature)
        if self.level == "layout":
            self.is_view = True

    @property
    def expr_slots(self) -> tuple[Slot, ...]:
        return tuple(s for s in self.slots if not s.static)

    @property
    def variadic(self) -> bool:
        return any(s.variadic for s in self.slots)

    def infer(self, tc, node: Prim, env) -> Prim:
        raise NotImplementedError

    def evaluate(self, ev, node: Prim, env):
        raise NotImplementedError

    # code generation (liftpy.codegen): a primitive whose value is read where it is used (the views, and dot)
    # gives a view to read, and a view may say how to write through it; maps and reductions are lowered to
    # loops by liftpy.codegen.lower, asking their traits.
    def view(self, cg, node: Prim, level: str):
        raise NotImplementedError(f"{self.name} has no view")

    def dest_for_arg(self, node: Prim, dest):
        """Where to write this primitive's (last) argument so that ``node``'s value lands in ``dest``: the
        output side of a layout primitive (``transpose(mapLcl(...))`` writes transposed). None when it cannot
        be inverted (slide, pad...): the argument is then computed into memory and copied through the view."""
        return None

    @property
    def writes_through(self) -> bool:
        """A view whose result can be written through to its argument (it says how: :meth:`dest_for_arg`)."""
        return type(self).dest_for_arg is not Primitive.dest_for_arg

    def __repr__(self) -> str:
        return f"<primitive {self.name}({self.signature})>"


PRIMITIVES: dict[str, Primitive] = {}


def is_view(node) -> bool:
    """Whether evaluating ``node`` only rearranges data: every element it has is an element of its inputs (or a
    constant) read through index arithmetic -- no arithmetic, no loop, no memory of its own. The one definition
    the rewrite engine (where a map needs lowering, the ``view`` predicate) and the code generator (what is read
    through a view instead of computed into memory) both use."""
    if isinstance(node, (Var, Literal)):
        return True
    if isinstance(node, Tuple):
        return all(is_view(e) for e in node.elems)
    if isinstance(node, Let):
        return is_view(node.value) and is_view(node.body)
    if isinstance(node, Lambda):
        return is_view(node.body)
    if isinstance(node, Prim):
        return PRIMITIVES[node.name].is_view and all(is_view(a) for a in node.args)
    return False  # scalar operators, user functions and their applications compute


def primitive_of(node) -> Primitive | None:
    """The primitive a node applies (its traits), or None for a node that applies none."""
    return PRIMITIVES.get(node.name) if isinstance(node, Prim) else None


def primitive(cls):
    """Register a primitive class in the table (one instance per name)."""
    instance = cls()
    assert instance.name not in PRIMITIVES, instance.name
    PRIMITIVES[instance.name] = instance
    return cls


def _axis(env) -> int:
    return env.depth


# ================================================================================ map and reduce family
class _MapLike(Primitive):
    """map(f: T -> U, in: [T]_n) : [U]_n"""

    is_map = True

    def infer(self, tc, node, env):
        *_, f, xs = node.args
        xs = tc.check(xs, env)
        arr = tc.array(xs.type, node, self.name)
        f = tc.fun(f, arr.elem, env, node)
        return tc.done(node, node.args[:-2] + (f, xs), ArrayType(f.type.result, arr.size))

    def evaluate(self, ev, node, env):
        *_, f, xs = node.args
        return ev.map(f, ev.eval(xs, env), env)


@primitive
class Map(_MapLike):
    name, signature = "map", "f: fun, in: data"
    is_view = True  # when its function is: map(transpose, xs) is read through views, not computed


@primitive
class MapSeq(_MapLike):
    """mapSeq(f, in: [T]_n) : [U]_n -- a sequential loop in one work-item."""

    name, signature, level = "mapSeq", "f: fun, in: data", "opencl"
    sequential, loop_name = True, "i"


@primitive
class MapSeqUnroll(_MapLike):
    """mapSeqUnroll(f, in: [T]_n) : [U]_n -- mapSeq, fully unrolled by the code generator."""

    name, signature, level = "mapSeqUnroll", "f: fun, in: data", "opencl"
    sequential, unrolled, loop_name = True, True, "i"


class _MapParallel(_MapLike):
    """mapX(d, f, in: [T]_n) : [U]_n -- the elements are spread over OpenCL dimension d (0, 1 or 2)."""

    signature, level = "dim: dim, f: fun, in: data", "opencl"

    def infer(self, tc, node, env):
        (dim,) = node.params
        if dim not in (0, 1, 2):
            tc.fail(node, f"{self.name} takes an OpenCL dimension 0, 1 or 2, got {dim}")
        return super().infer(tc, node, env)


@primitive
class MapGlb(_MapParallel):
    name, parallel, loop_name = "mapGlb", "global", "gid"
    index_queries = ("get_global_id", "get_global_size")


@primitive
class MapWrg(_MapParallel):
    name, parallel, loop_name = "mapWrg", "work-group", "wg"
    index_queries = ("get_group_id", "get_num_groups")


@primitive
class MapLcl(_MapParallel):
    name, parallel, loop_name = "mapLcl", "local", "lid"
    index_queries = ("get_local_id", "get_local_size")


class _ReduceLike(Primitive):
    """reduce(init: U, f: (U, T) -> U, in: [T]_n) : [U]_1"""

    signature = "init: data, f: fun, in: data"
    is_reduction = True

    def infer(self, tc, node, env):
        init, f, xs = node.args
        init = tc.check(init, env)
        xs = tc.check(xs, env)
        arr = tc.array(xs.type, node, self.name)
        f = tc.fun(f, TupleType((init.type, arr.elem)), env, node)
        tc.same_type(
            f.type.result,
            init.type,
            node,
            lambda: f"{self.name}'s function returns {f.type.result} but its accumulator is {init.type}",
        )
        return tc.done(node, (init, f, xs), ArrayType(init.type, arith.Const(1)))

    def evaluate(self, ev, node, env):
        init, f, xs = node.args
        result = ev.fold(f, ev.eval(init, env), ev.eval_joined(xs, env), env)
        return on_leaves(result, lambda leaf: np.expand_dims(leaf, _axis(env)))


@primitive
class Reduce(_ReduceLike):
    name = "reduce"


@primitive
class ReduceSeq(_ReduceLike):
    """reduceSeq(init: U, f: (U, T) -> U, in: [T]_n) : [U]_1 -- a sequential loop, accumulator where init puts it."""

    name, level = "reduceSeq", "opencl"
    sequential, loop_name = True, "j"


@primitive
class ReduceSeqUnroll(_ReduceLike):
    """reduceSeqUnroll(init, f, in) -- reduceSeq, fully unrolled by the code generator."""

    name, level = "reduceSeqUnroll", "opencl"
    sequential, unrolled, loop_name = True, True, "j"


# ================================================================================ layout primitives
@primitive
class Zip(Primitive):
    """zip(in1: [T1]_n, ..., ink: [Tk]_n) : [(T1, ..., Tk)]_n"""

    name, signature, level = "zip", "in: data*", "layout"
    zips = True

    def infer(self, tc, node, env):
        if len(node.args) < 2:
            tc.fail(node, f"zip takes two or more arrays, got {len(node.args)}")
        args = tuple(tc.check(a, env) for a in node.args)
        arrays = [tc.array(a.type, node, "zip") for a in args]
        first = arrays[0]
        for other in arrays[1:]:
            tc.equal_sizes(
                first.size,
                other.size,
                node,
                "zip expects arrays of equal length",
                lambda o=other: f"zip expects arrays of equal length, got {first} and {o}",
            )
        return tc.done(node, args, ArrayType(TupleType(tuple(a.elem for a in arrays)), first.size))

    def evaluate(self, ev, node, env):
        return tuple(ev.eval_joined(a, env) for a in node.args)

    def view(self, cg, node, level):
        from .codegen.views import ZipView

        return ZipView(tuple(cg.value(a, level) for a in node.args), node.type)


@primitive
class Split(Primitive):
    """split(m, in: [T]_n) : [[T]_m]_(n/m), requires n % m == 0"""

    name, signature, level = "split", "m: size, in: data", "layout"
    rearranges = groups = True

    def infer(self, tc, node, env):
        (m,) = node.params
        xs = tc.check(node.args[0], env)
        arr = tc.array(xs.type, node, "split")
        tc.positive(m, node, "split's chunk size")
        tc.divides(m, arr.size, node, f"split by {m} needs the length {arr.size} to be a multiple of {m}")
        return tc.done(node, (xs,), ArrayType(ArrayType(arr.elem, m), arr.size // m))

    def evaluate(self, ev, node, env):
        m = concrete(node.params[0])
        a = _axis(env)
        return on_leaves(
            ev.eval(node.args[0], env), lambda l: l.reshape(l.shape[:a] + (l.shape[a] // m, m) + l.shape[a + 1 :])
        )

    def view(self, cg, node, level):
        from .codegen.views import SplitView

        return SplitView(cg.value(node.args[0], level), node.type, node.params[0])

    def dest_for_arg(self, node, dest):
        from .codegen.views import SplitDest

        return SplitDest(dest, node.args[0].type, node.params[0])


@primitive
class Join(Primitive):
    """join(in: [[T]_m]_n) : [T]_(m*n)"""

    name, signature, level = "join", "in: data", "layout"
    rearranges = True

    def infer(self, tc, node, env):
        xs = tc.check(node.args[0], env)
        outer = tc.array(xs.type, node, "join")
        inner = tc.array(outer.elem, node, "join", nested=True)
        return tc.done(node, (xs,), ArrayType(inner.elem, outer.size * inner.size))

    def evaluate(self, ev, node, env):
        a = _axis(env)  # a window's rows joined are no strided view: kept unjoined (values.Joined) for a fold
        return on_leaves(ev.eval_joined(node.args[0], env), lambda l: join_axes(l, a))

    def view(self, cg, node, level):
        from .codegen.views import JoinView

        return JoinView(cg.value(node.args[0], level), node.type, node.args[0].type.elem.size)

    def dest_for_arg(self, node, dest):
        from .codegen.views import JoinDest

        return JoinDest(dest, node.args[0].type, node.args[0].type.elem.size)


@primitive
class Slide(Primitive):
    """slide(size, step, in: [T]_n) : [[T]_size]_((n-size+step)/step); windows that do not fit are dropped"""

    name, signature, level = "slide", "size: size, step: size, in: data", "layout"
    repeats_elements = True

    def infer(self, tc, node, env):
        size, step = node.params
        xs = tc.check(node.args[0], env)
        arr = tc.array(xs.type, node, "slide")
        tc.positive(size, node, "slide's window size")
        tc.positive(step, node, "slide's step")
        tc.at_least(arr.size, size, node, f"slide needs at least one window of {size} in {arr.size} elements")
        count = (arr.size - size + step) // step
        return tc.done(node, (xs,), ArrayType(ArrayType(arr.elem, size), count))

    def evaluate(self, ev, node, env):
        size, step = (concrete(p) for p in node.params)
        a = _axis(env)

        def go(leaf):
            windows = np.lib.stride_tricks.sliding_window_view(leaf, size, axis=a)
            windows = np.moveaxis(windows, -1, a + 1)
            index = (slice(None),) * a + (slice(None, None, step),)
            return windows[index]

        return on_leaves(ev.eval(node.args[0], env), go)

    def view(self, cg, node, level):
        from .codegen.views import SlideView

        return SlideView(cg.value(node.args[0], level), node.type, node.params[1])


def _pad_elem_ok(value_type: Type, elem: Type) -> bool:
    """pad's value is an element, or a scalar broadcast over array elements (the paper pads HWC images with 0)."""
    while True:
        if value_type == elem:
            return True
        if not isinstance(elem, ArrayType):
            return False
        elem = elem.elem


def _pad_indices(n: int, left: int, right: int) -> tuple[np.ndarray, np.ndarray]:
    index = np.arange(-left, n + right)
    inside = (index >= 0) & (index < n)
    return np.clip(index, 0, max(n - 1, 0)), inside


@primitive
class Pad(Primitive):
    """pad(l, r, value: T, in: [T]_n) : [T]_(l+n+r); negative l or r crop (paper section 4.2.4)"""

    name, signature, level = "pad", "l: size, r: size, value: data, in: data", "layout"
    guards_reads = True
    pads = True
    #: whether the code generator prints the reads branch-free (padSelect) or with a branch
    branch_free = False

    def infer(self, tc, node, env):
        left, right = node.params
        value = node.args[0]
        xs = tc.check(node.args[1], env)
        arr = tc.array(xs.type, node, "pad")
        leaf = scalar_of(_leaf_type(arr.elem))
        if isinstance(value, Literal) and value.scalar == "int" and leaf == FLOAT:
            value = dataclasses.replace(value, value=float(value.value), scalar="float")  # pad(.., 0, floats)
        value = tc.check(value, env)
        if not _pad_elem_ok(value.type, arr.elem):
            tc.fail(node, f"pad's value has type {value.type} but the array holds {arr.elem}")
        new_size = left + arr.size + right
        tc.at_least(new_size, 0, node, "pad cannot crop more elements than the array has")
        return tc.done(node, (value, xs), ArrayType(arr.elem, new_size))

    def evaluate(self, ev, node, env):
        left, right = (concrete(p) for p in node.params)
        value = ev.eval(node.args[0], env)
        a = _axis(env)

        def go(leaf, fill):  # one array of the padded size, filled, the elements kept copied in
            n = leaf.shape[a]
            kept = slice(max(0, -left), n - max(0, -right))  # a negative size crops
            if left <= 0 and right <= 0:
                return leaf[(slice(None),) * a + (kept,)]  # only cropped: a view
            padded = np.empty(leaf.shape[:a] + (left + n + right,) + leaf.shape[a + 1 :], leaf.dtype)
            fill = fill.reshape(fill.shape[:a] + (1,) + fill.shape[a:])  # broadcast along the padded axis
            padded[...] = fill.reshape(fill.shape + (1,) * (leaf.ndim - fill.ndim))  # a scalar over array elements
            if kept.stop > kept.start:
                start = max(0, left)
                padded[(slice(None),) * a + (slice(start, start + kept.stop - kept.start),)] = \
                    leaf[(slice(None),) * a + (kept,)]
            return padded

        return zip_leaves([ev.eval(node.args[1], env), value], go)

    def view(self, cg, node, level):
        from .codegen.views import PadView

        inner = cg.value(node.args[1], level)
        return PadView(inner, node.type, node.params[0], node.args[1].type.size, cg.value(node.args[0], level),
                       self.branch_free)

    def dest_for_arg(self, node, dest):
        return _crop_dest(node, dest)


@primitive
class PadSelect(Pad):
    """padSelect(l, r, value: T, in: [T]_n) : [T]_(l+n+r) -- pad, its scalar reads printed branch-free: the element
    at the index clamped into the array is loaded whatever the index, and the value selected where the index
    falls outside (the automatic route's ``pad_copy`` 3). Which of the two forms is faster depends on the
    kernel around the read (PoCL, kernel times of one configuration each: a dilated 3 x 3 convolution, 64
    kernels x 7 pixels per work-item, its channels innermost, 1.31 ms with a branch around each padded read,
    1.11 ms with selects; conv+bias+ReLU with 16 kernels x 8 pixels, 1.05 against 1.09), so the search
    chooses it."""

    name = "padSelect"
    branch_free = True


@primitive
class PadClamp(Primitive):
    """padClamp(l, r, in: [T]_n) : [T]_(l+n+r) -- pads by repeating the edge elements (clamped reads)"""

    name, signature, level = "padClamp", "l: size, r: size, in: data", "layout"
    pads = True

    def infer(self, tc, node, env):
        left, right = node.params
        xs = tc.check(node.args[0], env)
        arr = tc.array(xs.type, node, "padClamp")
        tc.at_least(arr.size, 1, node, "padClamp needs a non-empty array")
        return tc.done(node, (xs,), ArrayType(arr.elem, left + arr.size + right))

    def evaluate(self, ev, node, env):
        left, right = (concrete(p) for p in node.params)
        a = _axis(env)
        return on_leaves(
            ev.eval(node.args[0], env), lambda l: np.take(l, _pad_indices(l.shape[a], left, right)[0], axis=a)
        )

    def view(self, cg, node, level):
        from .codegen.views import PadView

        return PadView(cg.value(node.args[0], level), node.type, node.params[0], node.args[0].type.size, None)

    def dest_for_arg(self, node, dest):
        return _crop_dest(node, dest)


def _crop_dest(node: Prim, dest):
    """Where to write the argument of a pad that only crops (both sizes at most 0: no element is made up, so
    the argument's elements can be written where they land, those cropped away not at all); None otherwise."""
    from .arith import prove_nonneg
    from .codegen.views import CropDest

    left, right = node.params[:2]
    if not (prove_nonneg(0 - arith.as_expr(left)) and prove_nonneg(0 - arith.as_expr(right))):
        return None
    return CropDest(dest, node.args[-1].type, left)


@primitive
class Transpose(Primitive):
    """transpose(in: [[T]_n]_m) : [[T]_m]_n"""

    name, signature, level = "transpose", "in: data", "layout"
    rearranges = transposes = True

    def infer(self, tc, node, env):
        xs = tc.check(node.args[0], env)
        outer = tc.array(xs.type, node, "transpose")
        inner = tc.array(outer.elem, node, "transpose", nested=True)
        return tc.done(node, (xs,), ArrayType(ArrayType(inner.elem, outer.size), inner.size))

    def evaluate(self, ev, node, env):
        a = _axis(env)
        return on_leaves(ev.eval(node.args[0], env), lambda l: np.swapaxes(l, a, a + 1))

    def view(self, cg, node, level):
        from .codegen.views import TransposeView

        return TransposeView(cg.value(node.args[0], level), node.type)

    def dest_for_arg(self, node, dest):
        from .codegen.views import TransposeDest

        return TransposeDest(dest, node.args[0].type)


@dataclass(frozen=True)
class IndexFunction:
    """A reorder index function: ``index(i, n, *params)`` is the input position read for output position i."""

    name: str
    arity: int
    index: Callable[..., Expr]
    doc: str
    #: (divisor, reason) pairs the array length n must satisfy, as a function of the parameters
    divides: Callable[..., list[tuple[Expr, str]]] = lambda n, *p: []


def _stride_index(i, n, s):
    chunk = n // s
    return i // chunk + s * (i % chunk)


INDEX_FUNS: dict[str, IndexFunction] = {
    f.name: f
    for f in [
        IndexFunction(
            "stride",
            1,
            _stride_index,
            "stride(s): output i reads input i/(n/s) + s*(i%(n/s)) (the paper's stridedIndex, for coalescing)",
            lambda n, s: [(s, f"reorder by stride({s}) needs the length {n} to be a multiple of {s}")],
        ),
        IndexFunction("reverse", 0, lambda i, n: n - 1 - i, "reverse: output i reads input n-1-i"),
    ]
}
INDEX_FUNS["stridedIndex"] = INDEX_FUNS["stride"]  # the paper's name


@primitive
class Reorder(Primitive):
    """reorder(f: int -> int, in: [T]_n) : [T]_n -- output element i is input element f(i)"""

    name, signature, level = "reorder", "f: indexfun, in: data", "layout"

    def infer(self, tc, node, env):
        (fun,) = node.params
        xs = tc.check(node.args[0], env)
        arr = tc.array(xs.type, node, "reorder")
        spec = INDEX_FUNS.get(fun.name)
        if spec is None:
            tc.fail(node, f"unknown index function {fun.name!r} (known: {', '.join(sorted(INDEX_FUNS))})")
        if len(fun.params) != spec.arity:
            tc.fail(node, f"index function {fun.name} takes {spec.arity} size(s), got {len(fun.params)}")
        for divisor, reason in spec.divides(arr.size, *fun.params):
            tc.positive(divisor, node, f"{fun.name}'s parameter")
            tc.divides(divisor, arr.size, node, reason)
        return tc.done(node, (xs,), arr)

    def evaluate(self, ev, node, env):
        (fun,) = node.params
        spec = INDEX_FUNS[fun.name]
        a = _axis(env)

        def go(leaf):
            n = leaf.shape[a]
            expr = spec.index(arith.Var("i", arith.Range(arith.Const(0), arith.Const(n - 1))), arith.Const(n), *fun.params)
            index = np.array([expr.evaluate({"i": i}) for i in range(n)], dtype=np.int64)
            return np.take(leaf, index, axis=a)

        return on_leaves(ev.eval(node.args[0], env), go)

    def view(self, cg, node, level):
        from .codegen.views import ReorderView

        (fun,) = node.params
        spec, n = INDEX_FUNS[fun.name], node.type.size
        return ReorderView(cg.value(node.args[0], level), node.type, lambda i: spec.index(i, n, *fun.params))


# ================================================================================ tuples, identity, values
@primitive
class Get(Primitive):
    """get(i, in: (T0, ..., Tk)) : Ti -- also written in._(i+1), as the paper's kernelStride._1"""

    name, signature, level = "get", "i: dim, in: data", "layout"
    projects = True

    def infer(self, tc, node, env):
        (i,) = node.params
        t = tc.check(node.args[0], env)
        if not isinstance(t.type, TupleType):
            tc.fail(node, f"get expects a tuple, got {t.type}")
        if not 0 <= i < len(t.type.elems):
            tc.fail(node, f"get({i}) out of range for a tuple of {len(t.type.elems)}: {t.type}")
        return tc.done(node, (t,), t.type.elems[i])

    def evaluate(self, ev, node, env):
        return ev.eval_joined(node.args[0], env)[node.params[0]]

    def view(self, cg, node, level):
        return cg.value(node.args[0], level).component(node.params[0])


@primitive
class Id(Primitive):
    """id(in: T) : T -- used with toGlobal/toPrivate to copy a value into memory"""

    name, signature = "id", "in: data"
    is_view = identity = True

    def infer(self, tc, node, env):
        x = tc.check(node.args[0], env)
        return tc.done(node, (x,), x.type)

    def evaluate(self, ev, node, env):
        return ev.eval(node.args[0], env)

    def view(self, cg, node, level):
        return cg.value(node.args[0], level)

    def dest_for_arg(self, node, dest):
        return dest


@primitive
class Value(Primitive):
    """Value(v: S, T) : T -- a constant of type T (a scalar S, or an array of S) filled with v"""

    name, signature = "Value", "value: data, t: type"
    is_view = True  # a constant: read, never stored

    def infer(self, tc, node, env):
        (t,) = node.params
        v = node.args[0]
        if not isinstance(v, Literal):
            tc.fail(node, "Value's first argument must be a literal")
        leaf = scalar_of(_leaf_type(t))
        if leaf is None:
            tc.fail(node, f"Value builds scalars, vectors or arrays of them, not {t}")
        if v.scalar != leaf.name:
            v = dataclasses.replace(v, value=_convert(v.value, leaf.name), scalar=leaf.name)
        v = tc.check(v, env)
        return tc.done(node, (v,), t)

    def evaluate(self, ev, node, env):
        (t,) = node.params
        dims = []
        elem = t
        while isinstance(elem, ArrayType):
            dims.append(concrete(elem.size))
            elem = elem.elem
        return constant(node.args[0].value, elem, env.batch, tuple(dims))

    def view(self, cg, node, level):
        from .codegen.views import ConstView

        return ConstView(node.args[0].value, node.type)


class _AddressSpace(Primitive):
    """toX(f: T -> U, in: T) : U -- f's result is written to X memory; on a value alone, toX(id, value)"""

    signature, level = "f: fun = id, in: data", "opencl"
    applies_function = True

    def infer(self, tc, node, env):
        f, x = node.args
        x = tc.check(x, env)
        f = tc.fun(f, x.type, env, node)
        return tc.done(node, (f, x), f.type.result)

    def evaluate(self, ev, node, env):
        f, x = node.args
        return ev.call(f, ev.eval(x, env), env)

    def view(self, cg, node, level):
        from .codegen.views import ConstView

        return ConstView(node.args[0].value, node.type)


@primitive
class ToGlobal(_AddressSpace):
    name, space = "toGlobal", "global"


@primitive
class ToLocal(_AddressSpace):
    name, space = "toLocal", "local"


@primitive
class ToPrivate(_AddressSpace):
    name, space = "toPrivate", "private"


# ================================================================================ vectors
@primitive
class AsVector(Primitive):
    """asVector(v, in: [S]_n) : [S_v]_(n/v) for a scalar S, requires n % v == 0"""

    name, signature, level = "asVector", "v: size, in: data", "layout"
    sets_vector_width = True

    def infer(self, tc, node, env):
        (v,) = node.params
        xs = tc.check(node.args[0], env)
        arr = tc.array(xs.type, node, "asVector")
        if not isinstance(arr.elem, ScalarType):
            tc.fail(node, f"asVector expects an array of scalars, got {xs.type}")
        tc.positive(v, node, "asVector's width")
        tc.divides(v, arr.size, node, f"asVector({v}) needs the length {arr.size} to be a multiple of {v}")
        return tc.done(node, (xs,), ArrayType(VectorType(arr.elem, v), arr.size // v))

    def evaluate(self, ev, node, env):
        v = concrete(node.params[0])
        return on_leaves(ev.eval(node.args[0], env), lambda l: l.reshape(l.shape[:-1] + (l.shape[-1] // v, v)))

    def view(self, cg, node, level):
        from .codegen.views import AsVectorView

        return AsVectorView(cg.value(node.args[0], level), node.type, node.params[0])


@primitive
class AsScalar(Primitive):
    """asScalar(in: [S_v]_n) : [S]_(n*v)"""

    name, signature, level = "asScalar", "in: data", "layout"

    def infer(self, tc, node, env):
        xs = tc.check(node.args[0], env)
        arr = tc.array(xs.type, node, "asScalar")
        if not isinstance(arr.elem, VectorType):
            tc.fail(node, f"asScalar expects an array of vectors, got {xs.type}")
        return tc.done(node, (xs,), ArrayType(arr.elem.scalar, arr.size * arr.elem.width))

    def evaluate(self, ev, node, env):
        return on_leaves(ev.eval(node.args[0], env), lambda l: l.reshape(l.shape[:-2] + (l.shape[-2] * l.shape[-1],)))

    def view(self, cg, node, level):
        from .codegen.views import AsScalarView

        return AsScalarView(cg.value(node.args[0], level), node.type, node.args[0].type.elem.width)

    def dest_for_arg(self, node, dest):
        from .codegen.views import AsScalarDest

        return AsScalarDest(dest, node.args[0].type, node.args[0].type.elem.width)


@primitive
class Vectorize(Primitive):
    """vectorize(v, f: S -> S, in: S_v) : S_v -- f applied lane by lane to vectors of width v"""

    name, signature = "vectorize", "v: size, f: fun, in: data"
    sets_vector_width = applies_function = True

    def infer(self, tc, node, env):
        (v,) = node.params
        f, x = node.args
        x = tc.check(x, env)
        leaves = _tuple_leaves(x.type)
        if not all(isinstance(t, VectorType) for t in leaves):
            tc.fail(node, f"vectorize({v}) expects vectors, got {x.type}")
        for t in leaves:
            tc.equal_sizes(t.width, v, node, f"vectorize({v}) expects vectors of width {v}, got {x.type}")
        f = tc.fun(f, x.type, env, node)
        return tc.done(node, (f, x), f.type.result)

    def evaluate(self, ev, node, env):
        f, x = node.args
        return ev.call(f, ev.eval(x, env), env)


@primitive
class Dot(Primitive):
    """dot(a: S_v, b: S_v) : S -- the OpenCL dot builtin (on scalars, a product)"""

    name, signature = "dot", "a: data, b: data"

    def view(self, cg, node, level):
        return cg.builtin_dot(node, level)

    def infer(self, tc, node, env):
        a, b = (tc.check(x, env) for x in node.args)
        if not (isinstance(a.type, (VectorType, ScalarType)) and a.type.__class__ is b.type.__class__):
            tc.fail(node, f"dot expects two vectors (or two scalars) of floats, got {a.type} and {b.type}")
        if scalar_of(a.type) != FLOAT or scalar_of(b.type) != FLOAT:
            tc.fail(node, f"dot expects floats, got {a.type} and {b.type}")
        if isinstance(a.type, VectorType):
            tc.equal_sizes(a.type.width, b.type.width, node, f"dot expects vectors of one width, got {a.type} and {b.type}")
        return tc.done(node, (a, b), FLOAT)

    def evaluate(self, ev, node, env):
        a, b = (ev.eval(x, env) for x in node.args)
        if isinstance(node.args[0].type, VectorType):
            return np.sum(a * b, axis=-1, dtype=np.float32)
        return a * b


# ================================================================================ scalar operations
@dataclass(frozen=True)
class ScalarOpSpec:
    """An arithmetic operator or math builtin on scalars and vectors (lane-wise)."""

    name: str
    arity: int
    kind: str  # "arith", "int", "compare", "logic", "math" (float only), "minmax"
    numpy: Callable
    c: str  # how OpenCL C spells it: an infix operator or a function name
    infix: bool = False
    precedence: int = 100  # for printing: higher binds tighter


def _c_div(a, b):
    if np.issubdtype(np.asarray(a).dtype, np.integer) and np.issubdtype(np.asarray(b).dtype, np.integer):
        q = np.abs(a) // np.abs(b)
        return (np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))  # C truncates towards zero
    return np.divide(a, b)


def _c_mod(a, b):
    return a - _c_div(a, b) * b  # C's % has the sign of the dividend


SCALAR_OPS: dict[str, ScalarOpSpec] = {
    s.name: s
    for s in [
        ScalarOpSpec("+", 2, "arith", np.add, "+", True, 5),
        ScalarOpSpec("-", 2, "arith", np.subtract, "-", True, 5),
        ScalarOpSpec("*", 2, "arith", np.multiply, "*", True, 6),
        ScalarOpSpec("/", 2, "arith", _c_div, "/", True, 6),
        ScalarOpSpec("%", 2, "int", _c_mod, "%", True, 6),
        ScalarOpSpec("neg", 1, "arith", np.negative, "-", False, 7),
        ScalarOpSpec("<", 2, "compare", np.less, "<", True, 4),
        ScalarOpSpec("<=", 2, "compare", np.less_equal, "<=", True, 4),
        ScalarOpSpec(">", 2, "compare", np.greater, ">", True, 4),
        ScalarOpSpec(">=", 2, "compare", np.greater_equal, ">=", True, 4),
        ScalarOpSpec("==", 2, "compare", np.equal, "==", True, 4),
        ScalarOpSpec("!=", 2, "compare", np.not_equal, "!=", True, 4),
        ScalarOpSpec("&&", 2, "logic", np.logical_and, "&&", True, 3),
        ScalarOpSpec("||", 2, "logic", np.logical_or, "||", True, 2),
        ScalarOpSpec("!", 1, "logic", np.logical_not, "!", False, 7),
        # OpenCL's max and min of floats are fmax and fmin: a NaN operand gives the other operand
        ScalarOpSpec("max", 2, "minmax", np.fmax, "max"),
        ScalarOpSpec("min", 2, "minmax", np.fmin, "min"),
        ScalarOpSpec("exp", 1, "math", np.exp, "exp"),
        ScalarOpSpec("log", 1, "math", np.log, "log"),
        ScalarOpSpec("sqrt", 1, "math", np.sqrt, "sqrt"),
        ScalarOpSpec("fabs", 1, "math", np.abs, "fabs"),
        ScalarOpSpec("tanh", 1, "math", np.tanh, "tanh"),
        ScalarOpSpec("select", 3, "select", lambda c, a, b: np.where(c, a, b), "select"),
    ]
}


def infer_scalar_op(tc, node, env):
    """The type rule of every scalar operation: lane-wise on vectors, int promoted to float when mixed."""
    spec = SCALAR_OPS[node.op]
    args = tuple(tc.check(a, env) for a in node.args)
    types = [a.type for a in args]
    for t in types:
        if scalar_of(t) is None:
            shown = node.op if spec.infix or spec.arity == 1 and spec.kind != "math" else f"{node.op}(...)"
            tc.fail(node, f"{shown} works on scalars and vectors, got {t}")
    widths = [t.width for t in types if isinstance(t, VectorType)]
    for w in widths[1:]:
        tc.equal_sizes(widths[0], w, node, f"{node.op} on vectors of different widths: {types}")
    scalars = [scalar_of(t) for t in types]
    if spec.kind == "select":
        if scalars[0] != BOOL:
            tc.fail(node, f"select's condition must be a bool, got {types[0]}")
        scalars = scalars[1:]
    if spec.kind == "int" and any(s != INT for s in scalars):
        tc.fail(node, f"% works on ints, got {', '.join(map(str, types))}")
    if spec.kind == "logic":
        if any(s != BOOL for s in scalars):
            tc.fail(node, f"{node.op} works on bools, got {', '.join(map(str, types))}")
        result = BOOL
    elif spec.kind == "compare":
        if any(s == BOOL for s in scalars) and any(s != BOOL for s in scalars):
            tc.fail(node, f"cannot compare {types[0]} with {types[1]}")
        result = BOOL
    elif spec.kind == "math":
        result = FLOAT
    else:
        if any(s == BOOL for s in scalars):
            tc.fail(node, f"{node.op} works on numbers, got {', '.join(map(str, types))}")
        result = FLOAT if FLOAT in scalars else INT
    t = VectorType(result, widths[0]) if widths else result
    return tc.done(node, args, t)


def evaluate_scalar_op(ev, node, env):
    spec = SCALAR_OPS[node.op]
    vector = isinstance(node.type, VectorType)
    values = []
    for a in node.args:
        v = ev.eval(a, env)
        if vector and not isinstance(a.type, VectorType):
            v = np.asarray(v)[..., None]  # a scalar used with vectors applies to every lane
        values.append(v)
    if spec.kind in ("arith", "minmax", "math"):
        dtype = np.float32 if scalar_of(node.type) == FLOAT else np.int32
        values = [np.asarray(v).astype(dtype, copy=False) for v in values]
    out = spec.numpy(*values)
    result_scalar = scalar_of(node.type)
    return np.asarray(out).astype(
        {"float": np.float32, "int": np.int32, "bool": np.bool_}[result_scalar.name], copy=False
    )


# ================================================================================ helpers
def _leaf_type(t: Type) -> Type:
    while isinstance(t, ArrayType):
        t = t.elem
    return t


def _tuple_leaves(t: Type) -> list[Type]:
    if isinstance(t, TupleType):
        return [leaf for e in t.elems for leaf in _tuple_leaves(e)]
    return [t]


def _convert(value, scalar: str):
    return {"float": float, "int": int, "bool": bool}[scalar](value)


def describe() -> str:
    """The table as text: one line per primitive with its signature and type rule."""
    lines = []
    for p in PRIMITIVES.values():
        doc = (type(p).__doc__ or "").strip().splitlines()[0] if type(p).__doc__ else ""
        lines.append(f"{p.name:16} {doc}")
    return "\n".join(lines)


__all__ = [
    "PRIMITIVES",
    "SCALAR_OPS",
    "INDEX_FUNS",
    "Primitive",
    "Slot",
    "IndexFun",
    "infer_scalar_op",
    "evaluate_scalar_op",
    "describe",
]
