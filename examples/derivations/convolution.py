"""The convolution's derivation: a rule the rule syntax cannot say (``bindVal``, beside ``convolution.rules``), and
the strategy ``convolution`` that derives the paper's pipeline of kernels from its listing 3."""

from __future__ import annotations

from liftpy.ir import Lambda, Let, Node, PVar, Var, walk
from liftpy.primitives import primitive_of
from liftpy.rewrite.match import Names, free_vars, replace_node
from liftpy.rewrite.rules import python_rule


def _rolled_loop(node, reductions: bool = False) -> bool:
    """A map (and, with ``reductions``, a reduction) that is not unrolled: what the strategy stages."""
    prim = primitive_of(node)
    return prim is not None and not prim.unrolled and (prim.is_map or reductions and prim.is_reduction)


def _stage(node: Node) -> bool:
    """A map that computes or copies to memory: what a kernel of the pipeline does."""
    from liftpy.rewrite.predicates import PREDICATES

    return _rolled_loop(node) and not PREDICATES["view"].fn(node)


@python_rule("bindVal")
def bind_val(node: Node, names: Names):
    """bindVal: E[e] == val stage = e; E[stage]   (e closed in E)

    Names a stage of the computation: the innermost map that computes (or copies to memory) and uses no
    variable bound inside the expression becomes a val of its own, evaluated first. The code generator cuts a
    program's body into kernels at such vals (one kernel per val whose value is parallel). The expression is a
    function's body. On a val, the stage is looked for in its value and named before it: vals stay a chain.
    """
    if isinstance(node, Lambda):
        return
    bound: set[str] = set()
    for n in walk(node):
        if isinstance(n, Lambda):
            bound |= set(n.param.names())
        elif isinstance(n, Let):
            bound |= set(n.pattern.names())
    # post-order: the innermost stage first
    found: list[Node] = []

    def visit(n: Node):
        for k in n.children():
            visit(k)
        if n is not node and _stage(n) and not (free_vars(n) & bound):
            found.append(n)

    visit(node.value if isinstance(node, Let) else node)
    for e in found[:1]:
        x = names.fresh("stage")
        yield Let(PVar(x), e, replace_node(node, e, Var(x)))


# ------------------------------------------------------------------------------------------------ the strategy
def _size(value, name: str):
    from liftpy import arith

    return arith.Var(name) if value is None else arith.as_expr(value)


def in_stage(s):
    """``s`` on the value of the first val (pre-order): the stage bindVal named last is the outermost one."""
    from liftpy.rewrite.strategies import position, topDown, when

    return topDown(when(lambda t: isinstance(t, Let), "val") >> position((0,), s))


def _compute_map(n: Node) -> bool:
    from liftpy.rewrite.predicates import PREDICATES

    return _rolled_loop(n, reductions=True) and not PREDICATES["view"].fn(n.args[-2])


def _level_paths(node: Node, level: int, path=(), depth=0):
    """Paths (child indices) of the maps and reductions that compute, under ``level`` others, in pre-order."""
    here = _compute_map(node)
    if here and depth == level:
        yield path
    for i, k in enumerate(node.children()):
        yield from _level_paths(k, level, path + (i,), depth + here)


def at_level(level: int, s):
    """``s`` at the first map (or reduction) that computes and sits under ``level`` others (0: the outermost),
    in the expression it is applied to: the loops of a nest, addressed by depth."""
    from liftpy.rewrite.strategies import Failure, Strategy, position

    def go(tree, ctx):
        best = None
        for path in _level_paths(tree, level):
            r = position(path, s).apply(tree, ctx)
            if r:
                return r
            best = best or r
        return best or Failure(f"no loop at level {level}")

    return Strategy(go, f"at_level({level}, {s})")


def in_body(s):
    """``s`` on the body of the first val (pre-order): the rest of the program after a stage."""
    from liftpy.rewrite.strategies import position, topDown, when

    return topDown(when(lambda t: isinstance(t, Let), "val") >> position((1,), s))


def steps(theta=None, rho_h=None, rho_w=None, kappa=None, sigma=None, omega=None, v=None, unroll=False,
          theta_w=None, square=True):
    """The derivation, as a list of (what, strategy): see :func:`convolution`."""
    from liftpy.rewrite.strategies import bottomUp, normalize, position, repeat, topDown

    from . import catalogue

    R = catalogue()
    θ, ρh, ρw = _size(theta, "θ"), _size(rho_h, "ρh"), _size(rho_w, "ρw")
    θw = θ if square and theta_w is None else _size(theta_w, "θw")
    κ, σ, ω, v_ = _size(kappa, "κ"), _size(sigma, "σ"), _size(omega, "ω"), _size(v, "v")
    chunk = ω // v_
    return [
        ("inline the vals", normalize(R.inlineLet)),
        ("optimisational padding", topDown(R.padOptimisational(ρh, ρw))),
        ("one padding", topDown(R.pad2DPad2D)),
        ("vectorise", topDown(R.dotBuiltin(v_))),
        ("coalesce", topDown(R.coalesceChunks(chunk))),
        ("coalesce both", topDown(R.reorderZip)),
        ("partial sums", topDown(R.partialReduce(chunk))),
        ("separate the sums", topDown(R.reduceFission)),
        ("separate the sums (windows)", topDown(R.mapFissionZip)),
        ("separate the sums (rows)", topDown(R.mapMapFission)),
        ("crop when reading", topDown(R.cropMap2D)),
        ("tile", topDown(R.tileMap2D(θ, θw))),
        ("partial convolution stage", topDown(R.bindVal)),
        ("flatten the tiles", in_stage(topDown(R.joinSplit))),
        ("flatten the windows", in_stage(topDown(R.joinSplit))),
        ("window groups", in_stage(at_level(1, R.splitJoin(σ)))),
        ("kernel groups", in_stage(at_level(3, R.splitJoin(κ)))),
        ("kernel groups outside windows", in_stage(at_level(2, R.mapViewFission) >> at_level(2, R.mapMapInterchange))),
        ("kernel groups outside window groups", in_stage(repeat(at_level(1, R.mapViewFission)) >> at_level(1, R.mapMapInterchange))),
        ("tiles hold kernel groups", in_stage(repeat(at_level(0, R.mapViewFission)))),
        ("chunks of both", in_stage(at_level(5, R.mapSplitZip))),
        ("chunks outside", in_stage(at_level(3, R.chunkInterchange))),
        ("private accumulators", in_stage(at_level(4, R.reduceBlock))),
        # lowering the partial convolution (listing 4)
        ("tiles to work-groups", in_stage(at_level(0, R.mapWrg(1)))),
        ("kernel groups to work-groups", in_stage(at_level(1, R.mapWrg(0)))),
        ("window groups to work-items", in_stage(at_level(2, R.mapLcl(1)))),
        ("chunks to work-items", in_stage(at_level(3, R.mapLcl(0)))),
        ("sequential sums", in_stage(at_level(4, R.reduceSeq >> normalize(R.mapSeq)))),
        ("accumulators in private memory", in_stage(at_level(4, position((0,), bottomUp(R.privateMemory))))),
        ("results to global memory", in_stage(topDown(R.storeGlobal))),
        ("fetch inputs once", in_stage(at_level(6, R.letPrivate))),
    ] + ([("unroll", in_stage(normalize(R.mapSeqUnroll) >> normalize(R.reduceSeqUnroll)))] if unroll else []) + [
        # the sums of the partial results, plus the bias
        ("sums over output rows", in_body(at_level(0, R.mapGlb(1)))),
        ("sums over output columns", in_body(at_level(1, R.mapGlb(0)))),
        ("sums for each kernel", in_body(at_level(2, R.mapSeq))),
        ("sequential sum", in_body(at_level(3, R.reduceSeq >> R.privateAccumulator))),
        ("sums to global memory", in_body(at_level(2, R.globalMemory))),
        # the padding
        ("padding kernel", in_stage(topDown(R.copyPadded))),
        ("padding stage", topDown(R.bindVal)),
        ("padding over rows", in_stage(at_level(0, R.mapGlb(1)))),
        ("padding over row elements", in_stage(at_level(1, R.mapGlb(0)))),
    ]


def convolution(theta=None, rho_h=None, rho_w=None, kappa=None, sigma=None, omega=None, v=None, unroll=False,
                theta_w=None, square=True):
    """The paper's convolution pipeline (sections 3.4 and 4.2) derived from its listing 3
    (``examples/conv_layer.lift``), rule by rule. Parameters left out (``None``) become tuning parameters of
    the program, named as in the paper: ``θ`` tile size, ``ρh``/``ρw`` optimisational padding (rows at the
    bottom, columns on the right), ``κ`` kernels per work-group, ``σ`` windows per work-item, ``ω`` input
    elements per chunk (each work-item reduces one chunk of σ windows and κ kernels), ``v`` vector width;
    ``unroll`` unrolls the sequential loops of the partial convolution. The paper's tiles are square; with
    ``square=False`` (or a ``theta_w``) they are θ x θw, which rectangular kernels with strides need (their
    rows and columns may need tiles of different parities to start on the window grid).

    The result has three kernels: the padding (layer padding and ρ, ``val stage_1``), the partial
    convolution of listing 4 (``val stage``: mapWrg over tiles and kernel groups, mapLcl over window groups
    and chunks, κ x σ private accumulators, dot products of vectors of v read in a coalescing order, the σ
    input vectors fetched once into private memory) and the sum of the partial results plus the bias, which
    reads them through a view that crops the extra windows of the optimisational padding.
    """
    from liftpy.rewrite.strategies import Strategy, seq

    s = seq(*(step for _, step in steps(theta, rho_h, rho_w, kappa, sigma, omega, v, unroll, theta_w, square)))
    shown = ", ".join("?" if a is None else str(a) for a in (theta, rho_h, rho_w, kappa, sigma, omega, v))
    return Strategy(s.fn, f"convolution({shown}{', unroll' if unroll else ''})")


#: named strategies with parameters, for ``liftpy rewrite --rule-file examples/derivations/convolution.rules
#: --strategy "convolution(...)"``
STRATEGIES = {"convolution": convolution}
