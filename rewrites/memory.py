"""Memory rules that need computation the rule syntax cannot say (beside ``memory.rules``)."""

from __future__ import annotations

from liftpy.ir import Lambda, Let, Node, Prim, PVar, Var, walk
from liftpy.primitives import primitive_of
from liftpy.rewrite.match import Names, free_vars, substitute
from liftpy.rewrite.rules import python_rule
from liftpy.types import ArrayType, ScalarType, VectorType



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
