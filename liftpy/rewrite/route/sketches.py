"""Sketches: the rewrites that turn a high-level program and a :class:`Structure` into a low-level program whose
numeric choices are still tuning parameters.

Every rule is applied where a predicate says (the map binding a level, the maps walking a block), never at a
position. :class:`Sketches` holds what one program's rewrites found (its levels, whether it pads, sums...) and
makes each structure's sketch once, sharing the steps two structures have in common.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, Mapping

from ... import arith
from ...ir import Lambda, Node, Program, PTuple, PVar, Var, walk
from ...primitives import primitive_of
from ...types import array_dims
from .. import rules
from ..nests import loop_nests
from ..strategies import (
    Strategy,
    Success,
    is_compute_map,
    left_choice,
    lowering,
    normalize,
    repeat,
    topDown,
    when,
)
from .choices import (BLOCK_PARAMETER, PAD_COPIED, PAD_ROTATED, PAD_SELECT, RELAID, RELAID_INNER, Level, Structure,
                      block_parameter, vectors_outer)


@dataclass(frozen=True)
class Sketch:
    """A structure's low-level program, its numeric choices still tuning parameters (None, with the reason, where
    the rewrites cannot make it)."""

    structure: Structure
    program: Program | None
    failure: str = ""


# ------------------------------------------------------------------------------------------------ the rewrites
def binds(name: str) -> Strategy:
    """Succeeds on a computing map whose function binds ``name`` (a level of a nest, wherever it now is)."""

    def holds(tree) -> bool:
        return is_compute_map(tree) and isinstance(tree.args[0], Lambda) and name in tree.args[0].param.names()

    return when(holds, f"map binding {name}")


def walks_block(tree) -> bool:
    """A sequential loop over a block: a map, or a reduction (the adding of partial sums), whose length is made
    of the route's block sizes, vector widths and partial sums only."""
    prim = primitive_of(tree)
    if prim is None or not (prim.is_map or prim.is_reduction) or prim.parallel:
        return False
    length = getattr(tree.args[-1].type, "size", None)
    names = arith.as_expr(length).var_names() if length is not None else frozenset()
    return bool(names) and all(n.startswith(BLOCK_PARAMETER) or n in ("vector", "partial") for n in names)


def block_level(name: str, size: arith.Expr) -> Strategy:
    """Block the level binding ``name`` by ``size``: split it, sink the map over a block's elements to the
    reduction (interchanging it with the maps inside it, layout moved out of the way), and walk the block's
    reductions at once (Lift's reuse rules)."""
    split = topDown(binds(name) >> rules.splitJoin(size))
    sink = repeat(topDown(binds(name) >> left_choice(rules.mapMapInterchange, rules.mapMapInterchangeZip,
                                                         rules.mapMapInterchangeSplitZip, rules.mapViewFission)))
    block = topDown(binds(name) >> left_choice(rules.blockReductions, rules.blockReductionsThen))
    return Strategy((split >> sink >> block).fn, f"block({name}, {size})")


def partial_sums(width: arith.Expr) -> Strategy:
    """Split the outermost sum into ``width`` partial sums walked at once (``partialSums``)."""
    return topDown(rules.partialSums(width))


def split_sum(chunk: arith.Expr, function: str | None = None) -> Strategy:
    """Split the outermost sum into chunks of ``chunk`` elements summed by a stage of their own."""
    from liftpy.catalogue.reduction import split_sum as split

    return split(chunk, function)


def vectorize_block(width: arith.Expr, outer: bool = False) -> Strategy:
    """Keep the innermost blocked level's accumulators as vectors of ``width`` lanes (a 2D block's rows, or a 1D
    block, its steps reading pairs or one array), or with ``outer`` a 2D block's outer level's (its columns)."""
    if outer:
        return topDown(rules.vectorizeOuterBlock(width))
    return topDown(left_choice(rules.vectorizeInnerBlock(width), rules.vectorizeBlock(width),
                               rules.vectorizeBlockOf(width)))


def route_lowering(parallel: int, unroll: bool, sequential_outer: int = 0, work_groups: int = 0,
                   unit_levels: frozenset[str] = frozenset()) -> Strategy:
    """The default lowering with ``parallel`` global levels below ``sequential_outer`` sequential ones (as
    work-groups of ``local_size`` work-items with ``work_groups``). The ``unit_levels`` (one element) and the maps
    over a block's elements stay sequential and are not counted (a map over a block's results must not take a
    parallel level: with vectors its lane would become a run-time choice); with ``unroll``, the loops over
    blocks are unrolled (so that the accumulators are registers)."""
    local = arith.Var("local_size") if work_groups else None
    steps = lowering(parallel=parallel, sequential_outer=sequential_outer, local_size=local, unit_levels=unit_levels,
                     stays_sequential=walks_block)
    return steps >> unroll_blocks() if unroll else steps


def unroll_blocks() -> Strategy:
    """The loops over blocks of a lowered program unrolled (their accumulators then registers)."""
    return normalize(when(walks_block, "loop over a block") >> left_choice(rules.mapSeqUnroll, rules.reduceSeqUnroll))


def copy_padding(function: str | None, sizes: Mapping[str, object], rotate: bool = False) -> Strategy:
    """The padded input copied by a kernel of its own (``rotate``: its innermost dimension outermost)."""
    from liftpy.catalogue.copies import copy_padding as copy

    return copy(function, rotate, sizes)


def spatial_loops(program: Program, sizes: Mapping[str, object], function: str | None = None) \
        -> Iterator[tuple[tuple[str, ...], int | None, bool]]:
    """Each spatial loop of the program's nests, outermost first: the names its map binds, its concrete length at
    ``sizes`` (None where they leave it symbolic), and whether its nest reduces."""
    for nest in loop_nests(program, function, sizes):
        for loop in nest.spatial:
            f = loop.node.args[0]
            if isinstance(f, Lambda):
                yield tuple(f.param.names()), arith.as_expr(loop.extent).as_int(), bool(nest.reductions)


def unit_levels(program: Program, sizes: Mapping[str, object], function: str | None = None) -> frozenset[str]:
    """The names bound by the spatial loops of one element at ``sizes`` (a batch of one image, a convolution of
    one group): what :func:`lowering` runs sequentially instead of giving them a parallel dimension."""
    return frozenset(name for names, extent, _ in spatial_loops(program, sizes, function) if extent == 1
                     for name in names)


def reduction_levels(program: Program, sizes: Mapping[str, object], function: str | None = None) -> tuple[Level, ...]:
    """The spatial levels of the nests that reduce, outermost first, with concrete lengths of 2 or more."""
    out: list[Level] = []
    for names, extent, reduces in spatial_loops(program, sizes, function):
        if reduces and names and extent is not None and extent >= 2 and names[0] not in {level.name for level in out}:
            out.append(Level(names[0], extent))
    return tuple(out)


def _result(result, what: str) -> tuple[Program | None, str]:
    """A rewrite's program, or None and why it failed."""
    return (result.program, "") if isinstance(result, Success) else (None, f"{what}: {result.reason}")


# ------------------------------------------------------------------------------------------------ one program's
class Sketches:
    """One program's sketches at given sizes: what its rewrites allow (:attr:`levels`, :attr:`pads`...) and each
    structure's sketch, made when first asked for. A reordered, staged or rotated-copy sketch is made only when
    needed (:meth:`exists` answers without making it), so that those choices do not double the time to build a
    space."""

    def __init__(self, program: Program, sizes: Mapping[str, object], function: str | None = None):
        self.program = program
        self.sizes = dict(sizes)
        self.function = function
        self.made: dict[Structure, Sketch] = {}
        self._blocks: dict[tuple, tuple[Program | None, str]] = {}
        self._rewrites: dict[tuple, tuple[Program | None, str]] = {}
        self._lowerings: dict[tuple, object] = {}
        self._staged: dict[Structure, arith.Expr | None] = {}
        reordered = topDown(rules.reorderSum)(program)
        #: the program with its sum walked by columns, where it has such a sum
        self.reordered = reordered.program if isinstance(reordered, Success) else None
        #: the levels the rewrites can block (a level whose map reads its own elements' arrays -- the rows of an
        #: image, whose windows come from the row -- cannot be sunk past them, and is left alone)
        self.levels = tuple(level for level in reduction_levels(program, sizes, function)
                            if self._blocked((level.name,), 0)[0] is not None)
        #: the spatial levels of one element at these sizes: sequential, and not counted by ``parallel``
        self.unit_levels = unit_levels(program, sizes, function)
        #: whether the program pads an input that a copy can take the place of, and a copy rotated too (the
        #: padded view has two dimensions or more)
        self.pads = isinstance(copy_padding(function, sizes)(program), Success)
        #: whether that padding adds any element at these sizes: where it adds none, a copy rotated is the input as
        #: it lies and reading branch-free is reading, so that only the plain view and the copy remain to choose
        self.padding = self.pads and self._adds_padding()
        self.rotates = self.padding and isinstance(copy_padding(function, sizes, rotate=True)(program), Success)
        #: whether the program has a sum that partial sums can split
        self.sums = isinstance(partial_sums(arith.Var("partial"))(program), Success)
        #: the length of the sum ``split_sum`` would split (None where it cannot)
        self.sum_length = self._sum_length()

    def _adds_padding(self) -> bool:
        """Whether a view of the program that pads (its reads guarded) adds or crops an element at these sizes."""
        from ...typecheck import typecheck

        body = typecheck(self.program, self.sizes).program.function(self.function).body
        return any(arith.as_expr(p).as_int() != 0 for node in walk(body)
                   if getattr(primitive_of(node), "guards_reads", False) for p in node.params)

    def _sum_length(self) -> int | None:
        from ...typecheck import typecheck

        split = split_sum(arith.Var("chunk"), self.function)(self.program)
        if not isinstance(split, Success):
            return None
        body = typecheck(split.program, self.sizes).program.function(self.function).body
        return next(arith.as_expr(n.args[-1].type.size).as_int() for n in walk(body)
                    if getattr(primitive_of(n), "groups", False) and n.params[0] == arith.Var("chunk"))

    def walked_inputs(self, level: str) -> tuple[str, ...]:
        """The inputs of two or more dimensions whose outer dimension the map binding ``level`` walks: its array,
        followed through zips, splits (groups of the dimension) and the binders of the maps above it that are
        such groups (a residual's image, one element of it, is not: its kernels are its second dimension)."""
        fun = self.program.function(self.function)
        ranks = {p.name: len(array_dims(p.type)[0]) for p in fun.data_params}
        bound: dict[str, Node] = {}  # a map's binder (or a tuple component of it) -> the array it walks

        def zipped(array: Node) -> bool:
            return getattr(primitive_of(array), "zips", False)

        def bind(pattern, array: Node):
            if isinstance(pattern, PVar):
                bound[pattern.name] = array
            elif isinstance(pattern, PTuple) and zipped(array) and len(array.args) == len(pattern.elems):
                for p, a in zip(pattern.elems, array.args):
                    bind(p, a)

        def sources(array: Node) -> list[str]:
            if isinstance(array, Var):
                if array.name in bound:  # one element of the array its map walks: a group of a split array
                    walked = bound[array.name]  # walks that array's outer dimension, any other element its second
                    return sources(walked.args[-1]) if getattr(primitive_of(walked), "groups", False) else []
                return [array.name] if ranks.get(array.name, 0) >= 2 else []
            if zipped(array):
                return [n for a in array.args for n in sources(a)]
            if getattr(primitive_of(array), "groups", False):
                return sources(array.args[-1])
            return []

        for node in walk(fun.body):
            if is_compute_map(node) and isinstance(node.args[0], Lambda):
                bind(node.args[0].param, node.args[-1])
                if level in node.args[0].param.names():
                    return tuple(dict.fromkeys(sources(node.args[-1])))
        return ()

    def sketch(self, structure: Structure) -> Sketch:
        """A structure's sketch; with ``pad_copy``, made from the viewed structure's (no new parameter); with
        ``local_memory``, from the sketch without it, staged."""
        if structure not in self.made:
            if structure.local_memory:
                unstaged = self.sketch(dataclasses.replace(structure, local_memory=0))
                staged = topDown(rules.letLocal)(unstaged.program) if unstaged.program is not None else None
                self.made[structure] = Sketch(structure, staged.program) if isinstance(staged, Success) \
                    else Sketch(structure, None, unstaged.failure or f"local memory: {staged.reason}")
            elif not structure.pad_copy:
                self.made[structure] = self._make(structure)
            elif (viewed := self.sketch(structure.viewed)).program is None:
                self.made[structure] = dataclasses.replace(viewed, structure=structure)
            elif structure.pad_copy == PAD_SELECT:
                program, failure = _result(normalize(rules.selectPadding)(viewed.program), "branch-free padding")
                self.made[structure] = Sketch(structure, program, failure)
            else:
                copied = copy_padding(self.function, self.sizes, structure.pad_copy == PAD_ROTATED)(viewed.program)
                program, failure = _result(copied, "padding copy")
                self.made[structure] = Sketch(structure, program, failure)
        return self.made[structure]

    def exists(self, structure: Structure) -> bool:
        """Whether a structure has a sketch; for a reordered, staged or rotated-copy one, without making it."""
        if structure.local_memory and structure not in self.made:
            return self.exists(dataclasses.replace(structure, local_memory=0)) \
                and self.staged_words(structure) is not None
        if structure.pad_copy == PAD_ROTATED and structure not in self.made:  # where the copy is, rotated or not
            return self.rotates and self.exists(dataclasses.replace(structure, pad_copy=PAD_COPIED))
        if structure.pad_copy == PAD_SELECT and structure not in self.made:  # where the view is
            return self.exists(structure.viewed)
        if structure.reorder and structure not in self.made:
            return self._rewritten(structure)[0] is not None \
                and self.sketch(dataclasses.replace(structure, reorder=0)).program is not None
        return self.sketch(structure).program is not None

    def staged_words(self, structure: Structure) -> arith.Expr | None:
        """The floats ``letLocal`` stages per work-group in a structure with ``local_memory`` (read off the sketch
        without the padding's copy: they stage the same arrays), None where it stages nothing."""
        from liftpy.catalogue.memory import shared_arrays

        from ...codegen.memory import scalar_count

        key = structure.shared
        if key not in self._staged:
            words = None
            program = self.sketch(key).program
            for node in walk(program.function(self.function).body) if program is not None else ():
                arrays = [t for _, found in shared_arrays(node) for t in found.values()]
                if arrays:  # the first group in pre-order, where topDown applies the rule
                    words = sum((scalar_count(t) for t in arrays), arith.Const(0))
                    break
            self._staged[key] = words
        return self._staged[key]

    def _blocked(self, blocked: tuple[str, ...], reorder: int) -> tuple[Program | None, str]:
        """The high-level program (its sum walked by columns with ``reorder``) with ``blocked`` levels blocked
        (innermost first), or why it cannot be."""
        key = (blocked, reorder)
        if key not in self._blocks:
            if not blocked:
                self._blocks[key] = (self.reordered if reorder else self.program, "")
            else:
                tree, failure = self._blocked(blocked[:-1], reorder)
                if tree is not None:
                    name = blocked[-1]
                    tree, failure = _result(block_level(name, arith.Var(block_parameter(name)))(tree),
                                            f"blocking {name}")
                self._blocks[key] = (tree, failure)
        return self._blocks[key]

    def _rewritten(self, structure: Structure) -> tuple[Program | None, str]:
        """The high-level part of a structure's sketch: its sum reordered, its levels blocked, the sum split into
        chunks or partial sums, the accumulators in vectors; or why it cannot be made."""
        outer = int(vectors_outer(structure.vector_outer))
        key = (structure.blocked, structure.reorder, structure.partial, structure.vector, outer, structure.chunk)
        if key not in self._rewrites:
            tree, failure = self._blocked(structure.blocked, structure.reorder)
            if tree is not None and structure.chunk:
                tree, failure = _result(split_sum(arith.Var("chunk"), self.function)(tree),
                                        "the sum's chunks in a stage of their own")
            if tree is not None and structure.partial:
                tree, failure = _result(partial_sums(arith.Var("partial"))(tree), "partial sums")
            if tree is not None and structure.vector:
                tree, failure = _result(vectorize_block(arith.Var("vector"), outer=bool(outer))(tree), "vectors")
            self._rewrites[key] = (tree, failure)
        return self._rewrites[key]

    def _lowered(self, structure: Structure):
        """The structure's rewritten program lowered (a Success or a Failure; None where the rewrites fail), shared
        by the structures that differ only in the relaid copy (made after it); the unrolled lowering made from the
        plain one."""
        key = (structure.blocked, structure.reorder, structure.partial, structure.vector,
               int(vectors_outer(structure.vector_outer)), structure.chunk, structure.parallel,
               structure.sequential_outer, structure.local_size, structure.unroll)
        if key not in self._lowerings:
            tree, _ = self._rewritten(structure)
            if tree is None:
                self._lowerings[key] = None
            elif structure.unroll:
                plain = self._lowered(dataclasses.replace(structure, unroll=0))
                self._lowerings[key] = plain if not plain else unroll_blocks()(plain)
            else:
                self._lowerings[key] = route_lowering(structure.parallel, False, structure.sequential_outer,
                                                      structure.local_size, self.unit_levels)(tree)
        return self._lowerings[key]

    def _make(self, structure: Structure) -> Sketch:
        tree, failure = self._rewritten(structure)
        if tree is None:
            return Sketch(structure, None, failure)
        lowered = self._lowered(structure)
        if not isinstance(lowered, Success):
            return Sketch(structure, None, f"lowering: {lowered.reason}")
        program = lowered.program
        if structure.vector_outer in (RELAID, RELAID_INNER):
            from liftpy.catalogue.copies import relayout

            level = structure.blocked[-1 if structure.vector_outer == RELAID else 0]  # blocked: inner level first
            for name in self.walked_inputs(level):  # tiled by the block: each work-item's weights contiguous
                relaid = relayout(name, self.function, arith.Var(block_parameter(level)))(program)
                if not isinstance(relaid, Success):
                    return Sketch(structure, None, f"layout: {relaid.reason}")
                program = relaid.program
        if structure.sequential_outer and not any(getattr(primitive_of(n), "parallel", None)
                                                  for n in walk(program.function(self.function).body)):
            return Sketch(structure, None, "no level left to run in parallel below the sequential one")
        params = tuple(dict.fromkeys(program.tuning_params + structure.parameters))
        return Sketch(structure, dataclasses.replace(program, tuning_params=params))
