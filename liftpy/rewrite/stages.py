"""A program's stages: the values its body computes one after another, each a program of its own.

A function whose body computes several arrays in turn (``val v = ...; val m = ...(v); result(m)``) runs as one
kernel per value at least, and the kernels' times add up: the fastest program is the fastest kernel for each
value, found on its own. One configuration for the whole program gives every stage the same register block,
vectors and loop order, where a small transform and a matrix product want different ones: Winograd's F(2x2,
3x3) for VGG-16's layer 19 ran its input transform at 6-14 ms under the product's block, 0.5-0.9 ms tuned on
its own (``benchmarks/results/winograd-stages-2af6886-zen4.txt``). So the automatic route tunes a staged
program stage by stage (:func:`liftpy.tuning.tune_task`) and joins the lowered stages back into one
program (:func:`join_stages`).

A *stage* is a ``val`` of the function's outermost chain of vals whose value computes (a map that is not a
view, or a reduction), or the chain's result. A ``val`` that only rearranges data is no stage: it goes with the
stages that read it. Each stage becomes a function of the same name as the original (so that its kernels and
its database entries name the program it comes from) whose parameters are the original's inputs and the
earlier stages it reads, typed as the type checker infers them (symbolic sizes, given when it is tuned).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from ..ir import Function, Let, Node, Param, Pattern, Program, PVar, free_vars, walk
from ..typecheck import typecheck
from .match import Names, freshen
from .nests import computes


@dataclass(frozen=True)
class Stage:
    """One stage: the value it names (the function's name for the result), the program computing it from
    ``reads`` (the original's inputs and earlier stages), and whether it reads only inputs that stay fixed
    across calls, directly or through earlier stages (a layer's transformed weights: run once, when prepared)."""

    name: str
    program: Program
    reads: tuple[str, ...]
    hoisted: bool


def split_stages(program: Program, function: str | None = None, constants=()) -> tuple[Stage, ...]:
    """The function's stages in the order they run; one stage (the whole function) where its body computes
    one value only, or its result only rearranges the values before it. ``constants``: the inputs that stay
    fixed across calls."""
    fun = program.function(function)
    typed = typecheck(program.only(fun.name)).program.function(fun.name)
    chain: list[Let] = []
    body = typed.body
    while isinstance(body, Let) and isinstance(body.pattern, PVar):
        chain.append(body)
        body = body.body
    computing = [let for let in chain if computes(let.value)]
    if not computing or not computes(body):  # one value (or a result that only rearranges): one stage
        return (Stage(fun.name, program.only(fun.name), tuple(p.name for p in fun.params),
                      _reads_only(fun.params, constants)),)
    views = [let for let in chain if not computes(let.value)]
    params = {p.name: p for p in fun.params}
    fixed = set(constants)
    stages = []
    for name, value in [(let.pattern.name, let.value) for let in computing] + [(fun.name, body)]:
        value = _with_views(value, views)
        free = free_vars(value)
        reads = [n for n in params if n in free]  # the function's inputs, then the stages, in order
        sizes = tuple(p for p in fun.size_params if p.name not in free)  # every stage takes the function's sizes
        stage_fun = Function(fun.name, tuple(params[n] for n in reads) + sizes, None, value)
        hoisted = bool(reads) and all(n in fixed or params[n].is_size for n in reads)
        stages.append(Stage(name, dataclasses.replace(program, functions=(stage_fun,)), tuple(reads), hoisted))
        if name != fun.name:
            typed_value = next(let.value for let in computing if let.pattern.name == name)
            params[name] = Param(name, typed_value.type)
            if hoisted:
                fixed.add(name)
    return tuple(stages)


def join_stages(program: Program, function: str | None, lowered: Mapping[str, Program]) -> Program:
    """The function with each stage's value replaced by ``lowered[stage]`` (the stage's program as the automatic
    route lowered it): one chain of vals, the stages' own vals (a padded copy) before the stage, every binder renamed
    apart so that no stage's val hides another's."""
    fun = program.function(function)
    stages = split_stages(program, fun.name)
    taken = {p.name for p in fun.params} | {s.name for s in stages}
    names = Names(taken)  # the same set: a fresh name is never one a stage's val already has
    chain: list[tuple[Pattern, Node]] = []
    for stage in stages:
        body = freshen(lowered[stage.name].function(fun.name).body, set(taken), names)
        taken |= {n for node in walk(body) if isinstance(node, Let) for n in node.pattern.names()}
        while isinstance(body, Let):
            chain.append((body.pattern, body.value))
            body = body.body
        chain.append((PVar(stage.name), body))
    *lets, (_, result) = chain
    for pattern, value in reversed(lets):
        result = Let(pattern, value, result)
    return program.replace_function(dataclasses.replace(fun, body=result))


def _with_views(value: Node, views: list[Let]) -> Node:
    """``value`` inside the vals that only rearrange data that it reads, directly or through each other."""
    needed = free_vars(value)
    kept = []
    for let in reversed(views):
        if let.pattern.name in needed:
            kept.append(let)
            needed |= free_vars(let.value)
    for let in kept:
        value = Let(let.pattern, let.value, value, let.declared)
    return value


def _reads_only(params, constants) -> bool:
    data = [p for p in params if not p.is_size]
    return bool(data) and all(p.name in constants for p in data)


__all__ = ["Stage", "join_stages", "split_stages"]
