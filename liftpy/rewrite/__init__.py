"""Rewriting: rules as data (``rewrites/*.rules``), Elevate-style strategies, and exploration.

::

    import liftpy
    from liftpy.rewrite import rules, topDown, normalize, explore
    from liftpy.rewrite.strategies import lower_to_opencl

    program = liftpy.load("examples/conv_layer.lift")
    tiled = topDown(rules.tile2D(4, 4))(program)        # Success(program, steps) or Failure(reason)
    lowered = lower_to_opencl(tiled)
    variants = explore(program, rules=[rules.splitJoin(4), rules.mapFusion], depth=3)

Modules, in the order a rule meets them: :mod:`.reader` (rule files to patterns; the format is in
:mod:`.rules`), :mod:`.predicates` (``where`` conditions), :mod:`.match` (matching, instantiation,
capture-avoiding substitution), :mod:`.check` (a replacement's binders, scope and type), :mod:`.rules` (rules
as strategies, the catalogue), :mod:`.strategies` (combinators, traversals, ``lower_to_opencl``),
:mod:`.explore` (enumerating rewrites), :mod:`.cli` (the ``rewrite`` and ``explore`` commands).
"""

from __future__ import annotations

from . import rules
from .explore import Variant, explore, replay
from .strategies import (
    Context,
    Failure,
    Step,
    Strategy,
    Success,
    all_,
    bottomUp,
    fail,
    function_arg,
    id_,
    left_choice,
    lower_to_opencl,
    normalize,
    one,
    position,
    repeat,
    seq,
    simplify,
    some,
    strategy,
    topDown,
    try_,
    when,
)

__all__ = [
    "rules",
    "explore",
    "replay",
    "Variant",
    "Context",
    "Failure",
    "Step",
    "Strategy",
    "Success",
    "all_",
    "bottomUp",
    "fail",
    "function_arg",
    "id_",
    "left_choice",
    "lower_to_opencl",
    "normalize",
    "one",
    "position",
    "repeat",
    "seq",
    "simplify",
    "some",
    "strategy",
    "topDown",
    "try_",
    "when",
]
