"""The interpreter: the meaning of every program, high- or low-level, computed with numpy.

It is the semantic ground truth that generated kernels and rewrites are checked against. Low-level forms mean
the same as their high-level counterparts (``mapGlb`` is ``map``, ``toPrivate(f)`` is ``f``). Values are
batched (see :mod:`liftpy.values`): the body of a ``map`` is evaluated once for all elements, so the
interpreter's cost is a Python step per *node* and per *reduction step*, not per element.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .errors import InputError, ResourceError, SizeError
from .ir import Apply, Lambda, Let, Literal, Node, Pattern, Prim, Program, PVar, ScalarOp, Tuple, UserFun, Var
from .primitives import PRIMITIVES, evaluate_scalar_op
from .typecheck import TypedProgram, size_bindings, typecheck
from .types import ArrayType, ScalarType, TupleType, Type, VectorType
from .values import DTYPES, Value, align, constant, first_leaf, materialized, take


@dataclass(frozen=True)
class Env:
    """Variables in scope (each with the map depth it was computed at) and the current batch shape."""

    variables: Mapping[str, tuple[Value, int]] = field(default_factory=dict)
    batch: tuple[int, ...] = ()

    @property
    def depth(self) -> int:
        return len(self.batch)

    def bind(self, pattern: Pattern, value: Value) -> "Env":
        new = dict(self.variables)
        _bind(new, pattern, value, self.depth)
        return Env(new, self.batch)

    def lookup(self, name: str) -> Value:
        value, depth = self.variables[name]
        return align(value, depth, self.batch)

    def enter(self, n: int) -> "Env":
        return Env(self.variables, self.batch + (n,))


def _bind(variables: dict, pattern: Pattern, value: Value, depth: int) -> None:
    # a function of the module, not a closure in bind: a recursive closure is a reference cycle, and the values
    # it holds (a reduction's every accumulator) would live until the garbage collector ran
    if isinstance(pattern, PVar):
        variables[pattern.name] = (value, depth)
    else:
        for sub, sub_value in zip(pattern.elems, value):
            _bind(variables, sub, sub_value, depth)


class Interpreter:
    """Evaluates typed nodes. Primitives evaluate themselves (:mod:`liftpy.primitives`) using ``eval``,
    ``call``, ``map`` and ``fold`` from here."""

    def eval(self, node: Node, env: Env) -> Value:
        """The value of ``node``, every leaf a numpy array."""
        return materialized(self.eval_joined(node, env))

    def eval_joined(self, node: Node, env: Env) -> Value:
        """The value of ``node``, whose leaves may be :class:`~liftpy.values.Joined` (a window's rows joined,
        kept unjoined): for what only passes them on (zip, get, join) or reads them element by element (a
        fold's array)."""
        if isinstance(node, Var):
            return env.lookup(node.name)
        if isinstance(node, Literal):
            return constant(node.value, node.type, env.batch)
        if isinstance(node, Tuple):
            return tuple(self.eval(e, env) for e in node.elems)
        if isinstance(node, Prim):
            return PRIMITIVES[node.name].evaluate(self, node, env)
        if isinstance(node, ScalarOp):
            return evaluate_scalar_op(self, node, env)
        if isinstance(node, Let):
            return self.eval(node.body, env.bind(node.pattern, self.eval(node.value, env)))
        if isinstance(node, Apply):
            return self.call(node.fun, self.eval(node.arg, env), env)
        raise TypeError(f"cannot evaluate {node!r}")  # pragma: no cover - the type checker rules this out

    def call(self, fun: Node, arg: Value, env: Env) -> Value:
        """Apply a function node to a value computed at the current depth."""
        if isinstance(fun, Lambda):
            return self.eval(fun.body, env.bind(fun.param, arg))
        if isinstance(fun, UserFun):
            inner = Env({}, env.batch).bind(fun.param, arg)
            return self.eval(fun.body, inner)
        raise TypeError(f"cannot call {fun!r}")  # pragma: no cover

    def map(self, fun: Node, xs: Value, env: Env) -> Value:
        """Apply ``fun`` to every element of ``xs`` at once: the array axis becomes a batch axis."""
        n = first_leaf(xs).shape[env.depth]
        inner = env.enter(n)
        result = self.call(fun, xs, inner)
        return _broadcast(result, inner.batch)

    def fold(self, fun: Node, init: Value, xs: Value, env: Env) -> Value:
        """Sequential left fold of ``fun`` over the array axis of ``xs``, as reduceSeq does."""
        axis = env.depth
        n = first_leaf(xs).shape[axis]
        acc = init
        for i in range(n):
            elem = materialized(take(xs, i, axis))  # views: a step copies none of the array
            acc = self.call(fun, (acc, elem), env)
        return acc


def _broadcast(value: Value, batch: tuple[int, ...]) -> Value:
    """A map body that did not depend on its element still yields one result per element."""
    if isinstance(value, tuple):
        return tuple(_broadcast(v, batch) for v in value)
    if value.shape[: len(batch)] == batch:
        return value
    return np.broadcast_to(value, batch + value.shape[len(batch) :])


# ------------------------------------------------------------------------------------------------ entry point
def evaluate(
    program: Program | TypedProgram,
    inputs: Mapping[str, object],
    sizes: Mapping[str, object] | None = None,
    function: str | None = None,
):
    """Run a program on numpy inputs. Sizes not given are read off the inputs' shapes.

    Returns a numpy array (float32 for float results), or a tuple of arrays for a tuple result.
    """
    if isinstance(program, TypedProgram):
        program = program.program
    fun = program.function(function)
    given = size_bindings(program, dict(sizes or {}))
    arrays = _check_inputs(fun, inputs)
    inferred = _sizes_from_inputs(fun, arrays, given)
    all_sizes = {**given, **inferred}
    missing = [name for name in _needed_sizes(program, fun) if name not in all_sizes]
    if missing:
        raise SizeError(f"give a value for size(s) {', '.join(dict.fromkeys(missing))} (--size NAME=VALUE)")
    typed = typecheck(program, all_sizes)
    typed_fun = typed.program.function(fun.name)
    check_host_memory(f"evaluating {fun.name}", all_sizes, evaluation_needs(typed, fun.name, arrays))
    env = Env()
    for p in typed_fun.data_params:
        env = env.bind(PVar(p.name), _to_value(arrays[p.name], p.type))
    return _from_value(Interpreter().eval(typed_fun.body, env))


def _needed_sizes(program: Program, fun) -> list[str]:
    names: list[str] = []
    for p in fun.params:
        if p.is_size:
            names += [p.name] if not isinstance(p.type, TupleType) else [f"{p.name}._{i}" for i in range(1, len(p.type.elems) + 1)]
        else:
            names += sorted(p.type.size_names())
    names += program.tuning_params
    return list(dict.fromkeys(names))


def _check_inputs(fun, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
    names = [p.name for p in fun.data_params]
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        raise InputError(f"{fun.name} has no parameter {', '.join(unknown)} (its parameters: {', '.join(names)})")
    missing = [n for n in names if n not in inputs]
    if missing:
        raise InputError(f"no input given for {', '.join(missing)}")
    return {name: inputs[name] for name in names}


def _sizes_from_inputs(fun, arrays, given: dict[str, int]) -> dict[str, int]:
    """Bind size variables from the shapes of the inputs; report any shape that contradicts its type."""
    found: dict[str, int] = {}
    for p in fun.data_params:
        shape = np.shape(arrays[p.name])
        dims = _type_dims(p.type)
        if len(shape) != len(dims):
            raise InputError(
                f"input {p.name} has {len(shape)} dimension(s) {tuple(shape)} but its type {p.type} has {len(dims)}",
                p.span,
            )
        for size, actual in zip(dims, shape):
            known = {**given, **found}
            value = size.subs(known) if size.var_names() & known.keys() else size
            if value.as_int() is not None:
                if value.as_int() != actual:
                    raise InputError(
                        f"input {p.name} has shape {tuple(shape)} but its type {p.type} needs {size} = {value} "
                        f"where it has {actual}",
                        p.span,
                    )
            elif len(value.var_names()) == 1 and str(value) in value.var_names():
                found[str(value)] = actual
    return found


def _type_dims(t: Type) -> list:
    dims = []
    while isinstance(t, ArrayType):
        dims.append(t.size)
        t = t.elem
    if isinstance(t, VectorType):
        dims.append(t.width)
    return dims


def _to_value(x, t: Type) -> Value:
    leaf = t
    while isinstance(leaf, ArrayType):
        leaf = leaf.elem
    if isinstance(leaf, TupleType):
        raise InputError(f"inputs of type {t} (arrays of tuples) are not supported; pass the arrays and zip them")
    scalar = leaf.scalar if isinstance(leaf, VectorType) else leaf
    assert isinstance(scalar, ScalarType)
    return np.asarray(x, dtype=DTYPES[scalar.name])


def _from_value(value: Value):
    if isinstance(value, tuple):
        return tuple(_from_value(v) for v in value)
    return np.ascontiguousarray(value)


def input_shapes(program: Program, sizes: Mapping[str, object], function: str | None = None
                 ) -> dict[str, tuple[int, ...]]:
    """The shape of each data parameter of a function at ``sizes`` (a scalar's is ``()``), from the types alone:
    a missing size or a negative length is refused here, and nothing is allocated."""
    from .typecheck import specialize

    fun = program.function(function)
    concrete = specialize(program, dict(sizes)).function(fun.name)
    shapes = {}
    for p in concrete.data_params:
        shape = []
        for d in _type_dims(p.type):
            if d.as_int() is None:
                raise InputError(f"give --size values for {', '.join(sorted(d.var_names()))} to make a random {p.name}")
            shape.append(d.as_int())
        if any(n < 0 for n in shape):
            declared = next(q.type for q in fun.data_params if q.name == p.name)
            raise InputError(f"--size: {p.name} : {declared} would have the shape {tuple(shape)}; "
                             f"a length cannot be negative")
        shapes[p.name] = tuple(shape)
    return shapes


def drawing_needs(inputs: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The host memory drawing random ``inputs`` (name, float32 bytes) takes: each, and the largest once more,
    drawn in double precision before it is rounded."""
    if not inputs:
        return []
    name, largest = max(inputs, key=lambda need: need[1])
    return [*inputs, (f"drawing {name} (float64)", 2 * largest)]


def random_inputs(program: Program, sizes: Mapping[str, object], seed: int, function: str | None = None,
                  given: Mapping[str, object] | None = None) -> dict[str, np.ndarray]:
    """Standard-normal float32 inputs for a function's array parameters not ``given``, their shapes from the
    types at ``sizes`` (for ``liftpy run``, ``eval --random`` and the tuner's checks); refused before any is
    drawn where the host's memory cannot hold them."""
    from .codegen.memory import SCALAR_BYTES

    inputs = dict(given or {})
    shapes = {name: shape for name, shape in input_shapes(program, sizes, function).items() if name not in inputs}
    needs = drawing_needs([(name, SCALAR_BYTES * math.prod(shape)) for name, shape in shapes.items()])
    check_host_memory(f"random inputs of {program.function(function).name}", sizes, needs)
    rng = np.random.default_rng(seed)
    for name, shape in shapes.items():
        inputs[name] = rng.standard_normal(shape).astype(np.float32)
    return inputs


# ------------------------------------------------------------------------------------------------ memory
#: the interpreter's working memory beyond a program's values, in outputs: a reduction's step holds its
#: accumulator, the element it combines and their combination at once, each of the result's size
WORKING_OUTPUTS = 2


def evaluation_needs(typed: TypedProgram, function: str, arrays: Mapping[str, object]) -> list[tuple[str, int]]:
    """The host memory evaluating a function at its sizes takes, (what, bytes), from its types
    (:func:`liftpy.codegen.memory.footprint`): its output and working memory, each ``val`` that computes, and the
    inputs it must convert (an array already of its type is read where it is)."""
    from .codegen.memory import footprint

    fun = typed.program.function(function)
    dtypes = {p.name: _dtype_of_param(p.type) for p in fun.data_params}
    needs = []
    for part in footprint(typed, function):
        if part.role == "input":
            given = arrays.get(part.name)
            if isinstance(given, np.ndarray) and given.dtype == dtypes[part.name]:
                continue
        needs.append((part.name, part.bytes))
        if part.role == "output":
            needs.append(("working memory", WORKING_OUTPUTS * part.bytes))
    return needs


def _dtype_of_param(t: Type):
    leaf = t
    while isinstance(leaf, ArrayType):
        leaf = leaf.elem
    scalar = leaf.scalar if isinstance(leaf, VectorType) else leaf
    return np.dtype(DTYPES[scalar.name]) if isinstance(scalar, ScalarType) else None


def available_host_memory() -> int | None:
    """The bytes the host can give without swapping (``MemAvailable`` of /proc/meminfo); None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def sizes_text(sizes: Mapping[str, object]) -> str:
    """``height=24000, width=24000``."""
    return ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, (tuple, list)) else v}" for k, v in sizes.items())


def check_host_memory(what: str, sizes: Mapping[str, object], needs: list[tuple[str, int]]) -> None:
    """Refuse, in one line (:class:`~liftpy.errors.ResourceError`), memory the host does not have: ``needs``
    are (what, bytes), together more than :func:`available_host_memory`."""
    from .codegen.memory import format_bytes

    total = sum(n for _, n in needs)
    available = available_host_memory()
    if available is None or total <= available:
        return
    largest = ", ".join(f"{name} {format_bytes(n)}" for name, n in sorted(needs, key=lambda need: -need[1])[:3])
    raise ResourceError(f"{what} at {sizes_text(sizes)} needs {total} bytes ({format_bytes(total)}: {largest}) of "
                        f"host memory; {available} bytes ({format_bytes(available)}) are available (MemAvailable)")
