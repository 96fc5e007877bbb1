"""Fusion rules that need computation the rule syntax cannot say (beside ``fusion.rules``)."""

from __future__ import annotations

from liftpy.ir import Let, Node, Prim, PVar, Tuple, Var
from liftpy.rewrite.match import Names, substitute
from liftpy.rewrite.rules import python_rule


@python_rule("inlineLet")
def inline_let(node: Node, names: Names):
    """inlineLet: let(x -> body, e) == body[x := e]

    Replaces a let-bound variable by its value wherever it is used (the value is then computed at each use).
    A tuple pattern takes a tuple value apart, or reads a tuple variable's components. Lets with a declared
    type (type assertions) stay.
    """
    if not isinstance(node, Let) or node.declared is not None:
        return
    mapping: dict[str, Node] = {}

    def bind(p, value) -> bool:
        if isinstance(p, PVar):
            mapping[p.name] = value
            return True
        if isinstance(value, Tuple) and len(value.elems) == len(p.elems):
            return all(bind(sub, v) for sub, v in zip(p.elems, value.elems))
        if isinstance(value, Var):
            return all(bind(sub, Prim("get", (i,), (value,))) for i, sub in enumerate(p.elems))
        return False

    if bind(node.pattern, node.value):
        yield substitute(node.body, mapping, names)
