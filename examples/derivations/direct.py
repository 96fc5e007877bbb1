"""The direct convolution's derivation: the strategy ``direct(σ, κ, v)``, which derives from the paper's
listing 3 (``examples/conv_layer.lift``) the kind of pipeline ``examples/conv_direct.lift`` is written by hand:
a padding kernel, a kernel copying the weights grouped for vector loads ([K/κ][kh*kw*C][κ], as conv_direct.lift
receives them), then one kernel in which each work-item computes σ output pixels of one row for κ kernels over the
whole window, with σ x κ/v vector accumulators in registers. Its rules are in ``direct.rules`` and, for
``zipGroupView``, which the rule syntax cannot say, here."""

from __future__ import annotations

from liftpy.ir import Lambda, Let, Node, Prim, PTuple, PVar, Var, walk
from liftpy.rewrite.match import Names, free_vars, replace_node
from liftpy.rewrite.rules import python_rule
from .convolution import _size, at_level, in_body, in_stage


def _first_components_of(view: Node, group: str) -> Node | None:
    """The function G of ``transpose(map((w, b) -> G(w), group))``, as ``w -> G(w)``, if ``view`` is one."""
    if not (isinstance(view, Prim) and view.name == "transpose"):
        return None
    (inner,) = view.args
    if not (isinstance(inner, Prim) and inner.name == "map" and inner.args[1] == Var(group)):
        return None
    f = inner.args[0]
    if not (isinstance(f, Lambda) and isinstance(f.param, PTuple) and len(f.param.elems) == 2):
        return None
    first, second = f.param.elems
    if free_vars(f.body) & set(second.names()):
        return None
    return Lambda(first, f.body)


@python_rule("zipGroupView")
def zip_group_view(node: Node, names: Names):
    """zipGroupView: map(g -> F(transpose o map((w, b) -> G(w)) $ g)) o split(n) o zip(ws, bs) == map((gw, g) -> F(gw)) o zip(map(transpose o map(G)) o split(n) $ ws, split(n) o zip(ws, bs))

    A map over groups of n elements of a zip whose function reads the first components of its group arranged
    element by element (transposed: the group's n values of an element side by side) reads that arrangement
    from an array of its own instead, zipped with the groups: ``map(transpose o map(G)) o split(n) $ ws``, which
    mentions no variable of the map, so it can be copied to memory once (``copyGroups``) in the layout the map
    reads it in. F may use the group otherwise (the biases). With ws the kernels' weights and G = join o join:
    [K/κ][kh*kw*C][κ], the κ kernels' weights of a window element side by side, as conv_direct.lift takes them.
    (The rule syntax cannot say it: F mentions the group, which a function pattern with a hole may not.)
    """
    if not (isinstance(node, Prim) and node.name == "map"):
        return
    f, groups = node.args
    if not (isinstance(f, Lambda) and isinstance(f.param, PVar)):
        return
    if not (isinstance(groups, Prim) and groups.name == "split" and isinstance(groups.args[0], Prim)
            and groups.args[0].name == "zip" and len(groups.args[0].args) == 2):
        return
    (n,), (ws, _) = groups.params, groups.args[0].args
    group = f.param.name
    inside = {name for n_ in walk(f.body) if isinstance(n_, (Lambda, Let))
              for name in (n_.param if isinstance(n_, Lambda) else n_.pattern).names()}
    for view in walk(f.body):
        first = _first_components_of(view, group)
        if first is None or free_vars(view) & inside:
            continue
        arranged, g = names.fresh("groupWeights"), names.fresh("group")
        grouped = Prim("map", (), (Lambda(PVar(g), Prim("transpose", (), (Prim("map", (), (first, Var(g))),))),
                                   Prim("split", (n,), (ws,))))
        new_f = Lambda(PTuple((PVar(arranged), f.param)), replace_node(f.body, view, Var(arranged)))
        yield Prim("map", node.params, (new_f, Prim("zip", (), (grouped, groups))))
        return


def in_main(s):
    """``s`` on the body of the program's function (``at_level`` addresses the loops of an expression)."""
    from liftpy.rewrite.strategies import position

    return position((0,), s)


def steps(sigma=None, kappa=None, v=None):
    """The derivation, as a list of (what, strategy): see :func:`direct`."""
    from liftpy.rewrite.strategies import is_compute_map, normalize, repeat, topDown, when

    from . import catalogue

    R = catalogue()
    σ, κ, v_ = _size(sigma, "σ"), _size(kappa, "κ"), _size(v, "v")
    return [
        ("inline the vals", normalize(R.inlineLet)),
        # blocks: σ windows of a row, κ kernels
        ("window blocks", in_main(at_level(1, R.splitJoin(σ)))),
        ("kernel groups", in_main(at_level(2, topDown(R.groupJoin(κ))))),
        ("kernel groups outside windows", in_main(at_level(2, R.mapViewFission) >> at_level(2, R.mapMapInterchange))),
        ("blocks hold kernel groups", in_main(repeat(at_level(1, R.mapViewFission)))),
        # the block's σ x κ sums walked once, with accumulators starting from the biases, as vectors of v kernels
        ("accumulators", in_main(at_level(3, R.reduceBlockBias))),
        ("vector accumulators", topDown(R.vectorAccumulators(v_))),
        # the weight vectors read from an array of their own, grouped as the block reads them
        ("grouped weights", in_main(at_level(2, R.zipGroupView))),
        # lowering
        ("rows to work-items", in_main(at_level(0, R.mapGlb(2)))),
        ("blocks to work-items", in_main(at_level(1, R.mapGlb(1)))),
        ("kernel groups to work-items", in_main(at_level(2, R.mapGlb(0)))),
        ("sequential sum", in_main(at_level(3, R.reduceSeq >> normalize(when(is_compute_map, "computing map") >> R.mapSeq)))),
        ("accumulators in private memory", topDown(R.privateAccumulators)),
        ("results to global memory", topDown(R.storeGlobalBlock)),
        ("registers", normalize(R.mapSeqUnroll)),
        # the padding
        ("padding kernel", topDown(R.copyPadded)),
        ("padding stage", topDown(R.bindVal)),
        ("padding over rows", in_stage(at_level(0, R.mapGlb(1)))),
        ("padding over row elements", in_stage(at_level(1, R.mapGlb(0)))),
        # the grouped weights, copied once by a kernel of their own (the stage after the padding's)
        ("grouped weights kernel", topDown(R.copyGroups)),
        ("grouped weights stage", in_body(topDown(R.bindVal))),
        ("grouped weights over groups", in_body(in_stage(at_level(0, R.mapGlb(1))))),
        ("grouped weights over elements", in_body(in_stage(at_level(1, R.mapGlb(0))))),
    ]


def direct(sigma=None, kappa=None, v=None):
    """The direct convolution derived from listing 3, rule by rule. Parameters left out (``None``) become
    tuning parameters named as in ``conv_direct.lift``: ``σ`` output pixels per work-item (along a row), ``κ``
    kernels per work-item, ``v`` vector width over kernels (σ must divide the output width, κ the number of
    kernels, v divide κ)."""
    from liftpy.rewrite.strategies import Strategy, seq

    s = seq(*(step for _, step in steps(sigma, kappa, v)))
    shown = ", ".join("?" if a is None else str(a) for a in (sigma, kappa, v))
    return Strategy(s.fn, f"direct({shown})")


#: named strategies with parameters, for ``liftpy rewrite --rule-file examples/derivations/direct.rules
#: --strategy "direct(σ, κ, v)"``
STRATEGIES = {"direct": direct}
