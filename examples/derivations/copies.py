"""Undoing a copy: the strategy ``inline_copies(name)``, the memory/time trade-off of the paper's figure 6.

The hand-written CPU convolutions (``examples/conv_direct.lift``, ``conv_rows.lift``) begin with a kernel that only
copies the padded input to memory (``val padded = mapGlb(...(toGlobal(id))..., pad2D(...))``); the convolution
then reads the copy. ``inline_copies`` turns such a copy back into the view it copies, by the rules of
``copies.rules`` beside this module (loops back to maps, no ``toGlobal``) and the simplification group's
``removeMapCopy`` and ``removeMapId``: the val becomes a view, which the code generator does not make a kernel of,
and the next kernel reads the input through it, the padding becoming a condition at every read. The program has
one kernel and one buffer fewer, at the cost of the conditions and of recomputing the view's indices. (The other
direction, ``copy_padding``, is the catalogue's: ``rewrites/copies.py``.)
"""

from __future__ import annotations

from liftpy.ir import Lambda, Let, Node, Prim, PVar, Var
from liftpy.primitives import primitive_of


def _copy_map(node) -> bool:
    """A map that copies.rules turns back into ``map`` (there is no rule for mapSeqUnroll)."""
    prim = primitive_of(node)
    return prim is not None and prim.is_map and not prim.unrolled


def _copies_argument(body: Node, x: str) -> bool:
    """``body`` is ``id(x)`` or ``toGlobal(y -> id(y), x)`` (``toGlobal(id)`` applied to ``x``), or ``x`` itself."""
    if isinstance(body, Var):
        return body.name == x
    if not (isinstance(body, Prim) and len(body.args) >= 1 and isinstance(body.args[-1], Var)
            and body.args[-1].name == x):
        return False
    prim = primitive_of(body)
    if prim.identity:
        return len(body.args) == 1
    if prim.space == "global" and len(body.args) == 2:
        f = body.args[0]
        return isinstance(f, Lambda) and isinstance(f.param, PVar) and _copies_argument(f.body, f.param.name)
    return False


def copies_a_view(node: Node) -> bool:
    """Whether ``node`` only copies a view to memory: a nest of maps (``map``, ``mapGlb``, ``mapWrg``, ``mapLcl``,
    ``mapSeq``), each over a view (no arithmetic, no copy), whose innermost function is ``toGlobal(id)`` or
    ``id``."""
    from liftpy.rewrite.predicates import PREDICATES

    if not (_copy_map(node) and PREDICATES["view"].fn(node.args[-1])):
        return False
    f = node.args[-2]
    if not (isinstance(f, Lambda) and isinstance(f.param, PVar)):
        return False
    return _copies_argument(f.body, f.param.name) or copies_a_view(f.body)


def at_val(name: str, s):
    """``s`` on the value of the first val (pre-order) that binds ``name``."""
    from liftpy.rewrite.strategies import position, topDown, when

    def binds(t) -> bool:
        return isinstance(t, Let) and isinstance(t.pattern, PVar) and t.pattern.name == name

    return topDown(when(binds, f"val {name}") >> position((0,), s))


def steps(name: str = "padded"):
    """The derivation, as a list of (what, strategy): see :func:`inline_copies`."""
    from liftpy.rewrite.predicates import PREDICATES
    from liftpy.rewrite.strategies import normalize, topDown, when

    from . import catalogue

    R = catalogue()
    return [
        ("a copy of a view", at_val(name, when(copies_a_view, "a copy of a view"))),
        ("loops back to maps",
         at_val(name, normalize(R.mapGlbToMap | R.mapWrgToMap | R.mapLclToMap | R.mapSeqToMap))),
        ("no copy to global memory", at_val(name, normalize(R.removeToGlobal))),  # none if the copy is id
        # at least one map of the identity goes (the innermost one): the copy itself
        ("no copy", at_val(name, topDown(R.removeMapCopy | R.removeMapId) >> normalize(R.removeMapCopy | R.removeMapId))),
        ("a view", at_val(name, when(PREDICATES["view"].fn, "a view"))),
    ]


def inline_copies(name: str = "padded"):
    """The val ``name`` (a nest of maps whose innermost function is ``toGlobal(id)`` or ``id``, over views) turned
    back into the view it copies, rule by rule; fails if there is no such val. Applied to the CPU convolution
    pipelines it removes the padding kernel: the convolution reads the input through the padding view (see
    the module's docstring)."""
    from liftpy.rewrite.strategies import Strategy, seq

    s = seq(*(step for _, step in steps(name)))
    return Strategy(s.fn, "inline_copies" if name == "padded" else f"inline_copies({name})")


#: named strategies with parameters, for ``liftpy rewrite --rule-file examples/derivations/copies.rules --strategy
#: inline_copies`` (the val ``padded``)
STRATEGIES = {"inline_copies": inline_copies}
