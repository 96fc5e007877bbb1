"""The direct convolution's derivation: the strategy ``direct(σ, κ, v)``, which derives from the paper's
listing 3 (``liftpy/nn/conv_layer.lift``) the kind of pipeline ``liftpy/nn/conv_direct.lift`` is written by hand:
a padding kernel, then one kernel in which each work-item computes σ output pixels of one row for κ kernels over
the whole window, with σ x κ/v vector accumulators in registers. Its rules are in ``direct.rules``."""

from __future__ import annotations

from liftpy.rewrites.convolution import _size, at_level, in_stage


def in_main(s):
    """``s`` on the body of the program's function (``at_level`` addresses the loops of an expression)."""
    from liftpy.rewrite.strategies import position

    return position((0,), s)


def steps(sigma=None, kappa=None, v=None):
    """The derivation, as a list of (what, strategy): see :func:`direct`."""
    from liftpy.rewrite import rules as R
    from liftpy.rewrite.strategies import is_compute_map, normalize, repeat, topDown, when

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


#: named strategies with parameters, for ``liftpy rewrite --strategy "direct(σ, κ, v)"``
STRATEGIES = {"direct": direct}
