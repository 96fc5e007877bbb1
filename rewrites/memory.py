"""Memory rules that need computation the rule syntax cannot say (beside ``memory.rules``)."""

from __future__ import annotations

from liftpy.ir import Lambda, Let, Node, Prim, PVar, Var, walk
from liftpy.primitives import primitive_of
from liftpy.rewrite.match import Names, free_vars, replace_node, substitute
from liftpy.rewrite.rules import python_rule
from liftpy.types import ArrayType, ScalarType, VectorType, array_dims



@python_rule("letPrivate")
def let_private(node: Node, names: Names):
    """letPrivate: loop(x -> ... v ..., xs) == let(vPrivate -> loop(x -> ... vPrivate ..., xs), mapSeq(toPrivate(id), v))

    Fetches a value v that a loop's function reads on every iteration (a variable bound outside the loop: an
    array of scalars or vectors, or one scalar or vector) into private memory once, before the loop, and reads
    the private copy inside: the let of the paper's listing 4, line 27, which reads the σ input values once and
    reuses them for each of the κ kernels. One match per such variable.
    """
    prim = primitive_of(node)
    if not (prim is not None and (prim.is_map or prim.is_reduction)):  # a loop, once lowered
        return
    f = node.args[-2]
    if not isinstance(f, Lambda):
        return
    types = {n.name: n.type for n in walk(f) if isinstance(n, Var) and n.type is not None}
    for v in sorted(free_vars(f)):
        t = types.get(v)
        if isinstance(t, ArrayType) and isinstance(t.elem, (ScalarType, VectorType)):
            x = names.fresh("x")
            copy = Prim("mapSeq", (), (Lambda(PVar(x), _to_private(Var(x), names)), Var(v)))
        elif isinstance(t, (ScalarType, VectorType)):
            copy = _to_private(Var(v), names)
        else:
            continue
        private = names.fresh(v + "Private")
        new_f = substitute(f, {v: Var(private)}, names)
        args = node.args[:-2] + (new_f, node.args[-1])
        yield Let(PVar(private), copy, Prim(node.name, node.params, args))


def _to_private(value: Node, names: Names) -> Node:
    y = names.fresh("y")
    return Prim("toPrivate", (), (Lambda(PVar(y), Prim("id", (), (Var(y),))), value))


def _outermost_local_maps(node: Node) -> list[Prim]:
    """The mapLcl nodes in ``node`` that no other mapLcl contains (every work-item of the group runs what is
    around them)."""
    out: list[Prim] = []

    def visit(n: Node) -> None:
        prim = primitive_of(n)
        if prim is not None and prim.is_map and prim.parallel == "local":
            out.append(n)
            return
        for child in n.children():
            visit(child)

    visit(node)
    return out


def _scalar_array(t) -> bool:
    """An array of one or more dimensions of scalars (what a copy of nested loops of ``id`` can stage)."""
    dims, elem = array_dims(t)
    return bool(dims) and isinstance(elem, ScalarType)


def _local_copy(value: Node, dim, rank: int, names: Names) -> Node:
    """``toLocal(mapLcl(dim, mapSeq(... id)), value)``: the work-items of the group share the outer dimension
    of the copy, each copying its rows sequentially."""
    def inner(x: Node, depth: int) -> Node:
        if depth == 0:
            return Prim("id", (), (x,))
        y = names.fresh("y")
        return Prim("mapSeq", (), (Lambda(PVar(y), inner(Var(y), depth - 1)), x))

    a, x = names.fresh("a"), names.fresh("x")
    copy = Prim("mapLcl", (dim,), (Lambda(PVar(x), inner(Var(x), rank - 1)), Var(a)))
    return Prim("toLocal", (), (Lambda(PVar(a), copy), value))


def shared_arrays(node: Node) -> list[tuple[Prim, dict[str, ArrayType]]]:
    """For a work-group's map, each outermost mapLcl of the group with the arrays of scalars its function
    reads but does not bind (what every work-item of the group reads: what ``letLocal`` stages)."""
    prim = primitive_of(node)
    if not (prim is not None and prim.is_map and prim.parallel == "work-group" and len(node.args) >= 2):
        return []
    group = node.args[-2]
    if not isinstance(group, Lambda):
        return []
    out = []
    for lcl in _outermost_local_maps(group.body):
        f = lcl.args[0]
        if len(lcl.args) != 2 or not isinstance(f, Lambda):
            continue
        types = {n.name: n.type for n in walk(f) if isinstance(n, Var) and n.type is not None}
        arrays = {v: types[v] for v in sorted(free_vars(f)) if _scalar_array(types.get(v))}
        if arrays:
            out.append((lcl, arrays))
    return out


@python_rule("letLocal")
def let_local(node: Node, names: Names):
    """letLocal: mapWrg(d, g -> F(mapLcl(e, x -> G(x, v), xs))) == mapWrg(d, g -> F(let(vLocal -> mapLcl(e, x -> G(x, vLocal), xs), toLocal(mapLcl(e, mapSeq(id)), v))))

    Stages in local memory what every work-item of a work-group reads: an array of scalars v that the
    function of the group's mapLcl reads but does not bind (a matrix product's row of a, shared by the group's
    columns; a convolution's weights, shared by its pixels). The group copies v once, its work-items sharing
    the outer dimension, and each then reads the copy in local memory instead of global memory (the barrier
    between copy and reads is the code generator's). Every such array of every outermost mapLcl of the group
    is staged in one application.
    """
    staged = shared_arrays(node)
    if not staged:
        return
    group = node.args[-2]
    body = group.body
    for lcl, arrays in staged:
        f, xs = lcl.args
        renamed = {v: names.fresh(v + "Local") for v in arrays}
        reads_copy = substitute(f, {v: Var(local) for v, local in renamed.items()}, names)
        new: Node = Prim(lcl.name, lcl.params, (reads_copy, xs))
        for v, local in reversed(renamed.items()):
            new = Let(PVar(local), _local_copy(Var(v), lcl.params[0], len(array_dims(arrays[v])[0]), names), new)
        body = replace_node(body, lcl, new)
    yield Prim(node.name, node.params, node.args[:-2] + (Lambda(group.param, body), node.args[-1]))
