"""A sum split into partial sums computed by work-items of their own: the strategy ``split_sum(ω)``, the paper's
two-stage convolution (sections 4.2.2-4.2.3) for any program whose nest ends in a sum.

``partialReduce(ω)`` (``reduction.rules``) cuts a sum into chunks of ω elements, each reduced from 0, and adds
the chunks' sums to the initial value. Inside one work-item that changes only the order of the additions; for
the chunks to be reduced by work-items of their own, their sums must go to memory and a second kernel must add
them. :func:`hoist_stage` does that for any computation inside a nest of maps: the computation leaves each map
around it, innermost first, by fission -- ``map(x -> F[G(x)], xs) == map((x, g) -> F[g], zip(xs, map(x -> G(x),
xs)))``, ``F`` reading ``G``'s result where it read ``G`` -- until nothing binds what it reads, and becomes a
``val`` of the function's body: a stage, which the code generator makes a kernel of once it is lowered. A view
bound by a ``val`` on the way (the windows of a convolution) is inlined into the stage.

The result is the paper's pipeline shape: the first kernel writes, for every output element, its ω-element
chunks' sums (a buffer n/ω times the output's size: the memory end of the paper's figure 6), the second adds
them to the initial value and applies what followed the sum (a bias, an activation). Which of the stage's levels
run in parallel -- the chunks among them -- is the lowering's choice (``liftpy.rewrite.route``).
"""

from __future__ import annotations

import dataclasses

from liftpy import arith
from liftpy.ir import Lambda, Let, Node, Prim, PTuple, PVar, Var
from liftpy.primitives import is_view, primitive_of


def _path(tree: Node, target: Node) -> list[Node] | None:
    """The nodes from ``tree`` down to ``target``'s parent (``target`` itself compared by identity)."""
    if tree is target:
        return []
    for child in tree.children():
        below = _path(child, target)
        if below is not None:
            return [tree, *below]
    return None


def hoist_stage(find, name: str = "partials", function: str | None = None):
    """The computation ``find(function body)`` returns made a stage of its own, a ``val`` named after
    ``name`` at the top of the function's body, by fission of every map around it (see the module's
    docstring). Fails where the computation reads an accumulator or the binder of a function that is not a
    map's, where a map it leaves walks a computed array (fission would compute it twice), or where a val it
    reads computes."""
    from liftpy.ir import Program
    from liftpy.rewrite.match import Names, free_vars, replace_node, substitute
    from liftpy.rewrite.strategies import Failure, Step, Strategy, Success, names_in

    def apply(tree, ctx):
        if not isinstance(tree, Program):
            return Failure("hoist_stage applies to a program")
        fun = tree.function(function)
        body = fun.body
        target = find(body)
        if target is None:
            return Failure("no computation to make a stage of")
        names = Names(names_in(tree))

        def staged(body: Node, rest: Node, computation: Node) -> Success:
            """The computation a val at the top of ``rest`` (the body, or what follows the stage it reads), ``rest``
            reading the val instead."""
            stage = names.fresh(name)
            val = Let(PVar(stage), computation, _without_unread(replace_node(rest, computation, Var(stage))))
            program = tree.replace_function(dataclasses.replace(fun, body=replace_node(body, rest, val)))
            return Success(program, (Step("hoist_stage", (name,)),))

        while True:
            ancestors = _path(body, target)
            read = free_vars(target)
            for i in reversed(range(len(ancestors))):
                node, child = ancestors[i], (ancestors[i + 1] if i + 1 < len(ancestors) else target)
                if isinstance(node, Lambda) and read & set(node.param.names()):
                    break
                if isinstance(node, Let) and child is node.body and read & set(node.pattern.names()):
                    break
            else:  # nothing around it binds what it reads: a stage of the function's body
                return staged(body, body, target)
            if isinstance(node, Let) and not is_view(node.value) and all(isinstance(a, Let) for a in ancestors[:i]):
                return staged(body, node.body, target)  # a stage it reads: the new stage comes next
            if isinstance(node, Let):  # a val it reads: a view, read through its definition
                if not (isinstance(node.pattern, PVar) and is_view(node.value)):
                    return Failure(f"the computation reads {', '.join(sorted(read & set(node.pattern.names())))}, "
                                   "a val that computes inside a map")
                inlined = substitute(target, {node.pattern.name: node.value}, names)
                body, target = replace_node(body, target, inlined), inlined
                continue
            around = ancestors[i - 1] if i else None
            prim = primitive_of(around) if around is not None else None
            if not (prim is not None and prim.is_map and prim.is_view and len(around.args) == 2
                    and around.args[0] is node):
                return Failure(f"the computation reads {', '.join(sorted(read & set(node.param.names())))}, bound "
                               "by a function that is not a map's (an accumulator, say)")
            xs = around.args[1]
            if not is_view(xs):
                return Failure("a map around the computation walks a computed array")
            part = names.fresh("part")
            produced = Prim("map", (), (Lambda(node.param, target), xs))
            consumer = Prim("map", around.params,
                            (Lambda(PTuple((node.param, PVar(part))), replace_node(node.body, target, Var(part))),
                             Prim("zip", (), (xs, produced))))
            body, target = replace_node(body, around, consumer), produced

    return Strategy(apply, f"hoist_stage({name})")


def _without_unread(node: Node) -> Node:
    """``node`` without the arrays it zips but never reads (the components of a map's zip whose names its
    function does not use) nor the views it binds but never reads: what fission left the second stage of
    arrays only the first reads, so that an input the first stage pads is read once (``copy_padding`` needs
    that)."""
    from liftpy.rewrite.match import free_vars

    kids = tuple(_without_unread(child) for child in node.children())
    if any(k is not c for k, c in zip(kids, node.children())):
        node = node.with_children(kids)
    if isinstance(node, Let) and isinstance(node.pattern, PVar) and node.pattern.name not in free_vars(node.body) \
            and is_view(node.value):
        return node.body
    prim = primitive_of(node)
    if prim is None or not prim.is_map or len(node.args) != 2 or not isinstance(node.args[0], Lambda):
        return node
    f, array = node.args
    kept = _read_part(f.param, array, free_vars(f.body))
    if kept is None or kept[1] is array:
        return node
    return Prim(node.name, node.params, (Lambda(kept[0], f.body), kept[1]))


def _read_part(pattern, array: Node, read: frozenset[str]):
    """The part of ``pattern`` (binding the elements of ``array``) whose names are ``read``, and the part of
    ``array`` it binds -- components of zips dropped, nested zips included; ``array`` itself where all of it
    is read; None where none of it is."""
    if not read & set(pattern.names()):
        return None
    if not (isinstance(pattern, PTuple) and getattr(primitive_of(array), "zips", False)
            and len(array.args) == len(pattern.elems)):
        return pattern, array
    parts = [_read_part(p, a, read) for p, a in zip(pattern.elems, array.args)]
    kept = [part for part in parts if part is not None]
    if len(kept) == 1:
        return kept[0]
    if len(kept) == len(parts) and all(part[1] is a for part, a in zip(kept, array.args)):
        return pattern, array
    return PTuple(tuple(p for p, _ in kept)), Prim("zip", (), tuple(a for _, a in kept))


def _chunk_sums(size):
    """A finder for :func:`hoist_stage`: the first (pre-order) map of reductions over ``split(size, ...)``, as
    ``partialReduce(size)`` writes the chunks' sums."""
    from liftpy.ir import walk

    def find(body: Node):
        for node in walk(body):
            prim = primitive_of(node)
            if prim is None or not prim.is_map or not isinstance(node.args[-2], Lambda):
                continue
            array, f = node.args[-1], node.args[-2]
            if getattr(primitive_of(array), "groups", False) and array.params[0] == size \
                    and primitive_of(f.body) is not None and primitive_of(f.body).is_reduction:
                return node
        return None

    return find


def split_sum(chunk, function: str | None = None):
    """The outermost sum (pre-order) split into chunks of ``chunk`` elements (a size or a tuning parameter),
    the chunks' sums computed in a stage of their own and added by the rest of the program (see the module's
    docstring)."""
    from liftpy.rewrite import rules
    from liftpy.rewrite.strategies import Strategy, topDown

    size = arith.as_expr(chunk)
    split = topDown(rules.partialReduce(size)) >> hoist_stage(_chunk_sums(size), function=function)
    return Strategy(split.fn, f"split_sum({size})")


#: named strategies with parameters, for ``liftpy rewrite --strategy "split_sum(16)"``
STRATEGIES = {"split_sum": split_sum}
