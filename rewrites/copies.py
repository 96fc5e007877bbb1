"""Copies made on purpose: the strategies ``relayout(input)`` and ``copy_padding()``.

* ``relayout(input)``: an input read from a copy with its outer dimension innermost in memory (the automatic
  route's weights of v kernels, one vector load; a kernel that runs once for constant weights);
* ``copy_padding()``: the padded input copied by a kernel of its own before the computation, which then reads
  without conditions (the automatic route's ``pad_copy``; the copy runs at every call); ``copy_padding(rotate)``
  holds the copy with its innermost dimension outermost (``pad_copy`` 2).

(The other direction, a copy turned back into the view it copies, is a worked derivation:
``examples/derivations/copies.py``.)
"""

from __future__ import annotations

import dataclasses

from liftpy import arith
from liftpy.ir import Lambda, Let, Node, Prim, PTuple, PVar, Var, free_vars, walk
from liftpy.primitives import is_view, primitive_of
from liftpy.rewrite.match import Names, count_uses, replace_node, substitute


def _has(node: Node, trait: str) -> bool:
    """Whether ``node`` applies a primitive with ``trait`` (see :class:`liftpy.primitives.Primitive`)."""
    return getattr(primitive_of(node), trait, False)


def _rearranging_step(node: Node) -> bool:
    """``node`` only rearranges its data argument: split, join, transpose, or a map of a function that does."""
    prim = primitive_of(node)
    if prim is None or not node.args:
        return False
    return prim.rearranges or prim.is_map and prim.is_view and _rearranging_function(node.args[0])


def _rearranges(node: Node, x: str) -> bool:
    """``node`` is ``x`` moved by views that only rearrange it (split, join, transpose, maps of them)."""
    if isinstance(node, Var):
        return node.name == x
    return _rearranging_step(node) and _rearranges(node.args[-1], x)


def _rearranging_function(f: Node) -> bool:
    """A function that only rearranges its argument (``transpose``, ``x -> join(transpose(x))``)."""
    return isinstance(f, Lambda) and isinstance(f.param, PVar) and _rearranges(f.body, f.param.name)


def element_reads(body: Node, name: str) -> list[tuple[Node, Node]] | None:
    """How ``body`` reads each element of the input ``name``'s outer dimension (a kernel's weights), where it
    reads every one through the same view that only rearranges it: for each read, that view (the largest
    around the element) and the element in it (a binder, or a component of one), or None where an element, or
    an array of them, is read any other way (beside the maps that walk it) or through views that differ.

    The elements are followed from ``name`` through the maps that walk them: splits of the outer dimension
    (groups, a work-item's block), zips (each component followed on its own) and the binders of the maps over
    them. A relayout that copies the elements in the order of that view makes the reads walk the copy in
    memory order."""
    levels: dict[str, object] = {name: 1}  # a name -> how many dimensions above an element it holds (0: one
    # element; for a zip's elements, one count per component, None for a component that holds no element)

    def deeper(lv, by: int):
        if lv is None:
            return None
        if isinstance(lv, int):
            return lv + by if lv + by >= 0 else None
        parts = tuple(deeper(p, by) for p in lv)
        return parts if any(p is not None for p in parts) else None

    def level(array: Node):
        """The levels of an array a map walks (None where no element of ``name`` is in it)."""
        if isinstance(array, Var):
            return levels.get(array.name)
        if _has(array, "groups") and len(array.args) == 1:
            return deeper(level(array.args[0]), 1)
        if _has(array, "zips"):
            return deeper(tuple(level(a) for a in array.args), 0)
        return None

    def bind(pattern, lv) -> None:
        if isinstance(pattern, PTuple) and isinstance(lv, tuple) and len(lv) == len(pattern.elems):
            for p, part in zip(pattern.elems, lv):
                bind(p, part)
        elif isinstance(pattern, PVar) and lv is not None:
            levels[pattern.name] = lv

    def occurrences(names, node: Node) -> int:
        return sum(1 for n in walk(node) if isinstance(n, Var) and n.name in names)

    walked = 0  # the reads of arrays of elements as (part of) the array a map walks
    for node in walk(body):
        prim = primitive_of(node)
        if prim is not None and prim.is_map and isinstance(node.args[0], Lambda) and len(node.args) >= 2:
            walks = level(node.args[-1])
            if walks is not None and walks != 0 and not (isinstance(walks, tuple) and set(walks) <= {0, None}):
                walked += occurrences(set(levels), node.args[-1])
                bind(node.args[0].param, deeper(walks, -1))
    holders = {n: lv for n, lv in levels.items() if lv == 0 or isinstance(lv, tuple) and set(lv) <= {0, None}}
    if not holders or occurrences(set(levels) - set(holders), body) != walked:
        return None
    parents: dict[int, Node] = {}
    elements: list[Node] = []  # each read of an element: its binder, or the component of a zip's element

    def visit(node: Node) -> bool:
        for child in node.children():
            parents[id(child)] = node
            if isinstance(child, Var) and child.name in holders:
                lv = holders[child.name]
                if lv == 0:
                    elements.append(child)
                elif not _has(node, "projects"):
                    return False  # a zip's element read whole
                elif lv[node.params[0]] == 0:
                    elements.append(node)
            if not visit(child):
                return False
        return True

    if not visit(body) or not elements:
        return None

    def rearranging_parent(node: Node) -> Node | None:
        parent = parents.get(id(node))
        return parent if parent is not None and _rearranging_step(parent) and parent.args[-1] is node else None

    reads = []
    for element in elements:
        read = element
        while (parent := rearranging_parent(read)) is not None:
            read = parent
        reads.append((read, element))
    views = {Lambda(PVar("\0"), replace_node(read, element, Var("\0"))) for read, element in reads}
    return reads if len(views) == 1 and reads[0][0] is not reads[0][1] else None


def relayout(name: str, function: str | None = None, tile=None):
    """The input ``name`` (an array of two or more dimensions) read from a copy of it whose outer dimension is
    innermost in memory: ``val nameT = mapGlb(1)(mapGlb(0)(toGlobal(id))) o transpose o map(join^(r-2)) $ name``
    at the top of the function, and every read of ``name`` through the view that gives it back,
    ``map(split(d_{r-2}) ... split(d_{r-1})) o transpose $ nameT`` -- the same values, so the program's
    meaning is unchanged. What changes is which elements sit side by side: a vector whose lanes are
    neighbouring elements of the outer dimension (the weights of v kernels) becomes one vector load instead of
    v scalar loads. The copy is a kernel of its own that reads only ``name``: where ``name`` is a constant
    input (a layer's weights) it runs once, when the program is prepared. (Lift's data layout choice, as a
    copy: a view of ``name`` alone can only reorder indices, never make a strided read contiguous.)

    With ``tile`` (a size: a block of the outer dimension), the copy is tiled, ``map(transpose) o split(tile)``:
    each block's ``tile`` elements innermost, the blocks one after the other, so that what one work-item's
    block reads over a whole reduction is one contiguous run instead of a run of ``tile`` in every row of
    the whole dimension, which spreads over few of the cache's sets.

    Where the program reads every element through one view that only rearranges it (:func:`element_reads`:
    a kernel's weights channels-last, ``join(join(channelsLast(kernelWeights)))``), the copy holds each
    element in that view's order, ``map(V)`` before the flattening, and the reads become the element itself:
    a reduction then walks the copy in memory order, where the element's own order would make each step jump.
    (Measurements: ``benchmarks/results/notes-copies.md``.)"""
    from liftpy.rewrite.strategies import Failure, Step, Strategy, Success, names_in
    from liftpy.typecheck import typecheck
    from liftpy.types import array_dims, scalar_of

    def apply(tree, ctx):
        from liftpy.ir import Program

        if not isinstance(tree, Program):
            return Failure(f"relayout({name}) applies to a program")
        fun = tree.function(function)
        param = next((p for p in fun.data_params if p.name == name), None)
        if param is None:
            return Failure(f"{fun.name} has no input {name}")
        dims, elem = array_dims(param.type)
        if len(dims) < 2 or scalar_of(elem) is None:
            return Failure(f"{name} is not an array of scalars with two or more dimensions")
        names = Names(names_in(tree))
        copy_name = names.fresh(f"{name}T")

        def lam(body_of):
            x = names.fresh("x")
            return Lambda(PVar(x), body_of(Var(x)))

        def copied(rank: int, xs):
            """``xs`` (of ``rank`` dimensions) copied to global memory, one global level per dimension."""
            if rank == 0:
                return Prim("toGlobal", (), (lam(lambda y: Prim("id", (), (y,))), xs))
            return Prim("mapGlb", (rank - 1,), (lam(lambda x: copied(rank - 1, x)), xs))

        def transposed_each(xs):
            return Prim("map", (), (lam(lambda t: Prim("transpose", (), (t,))), xs))

        body = fun.body
        element_dims = dims[1:]  # an element's dimensions, as the copy holds them
        element_view = None  # x -> the element x in the order the program reads it (None: as it is)
        reads = element_reads(body, name)
        if reads is not None:
            read, element = reads[0]
            typed = typecheck(tree).program.function(fun.name)
            element_dims = array_dims(next(n for n in walk(typed.body) if n == read).type)[0]
            element_view = lambda x: replace_node(read, element, x)  # noqa: E731
            for r, e in reads:  # each read is now the element itself, held in the read's order
                body = replace_node(body, r, e)

        def flattened(x):
            x = element_view(x) if element_view else x
            for _ in range(len(element_dims) - 1):
                x = Prim("join", (), (x,))
            return x

        flat = Prim("map", (), (lam(flattened), Var(name))) if element_view or len(dims) > 2 else Var(name)
        if tile is None:
            copy = copied(2, Prim("transpose", (), (flat,)))
            view = Prim("transpose", (), (Var(copy_name),))
        else:
            copy = copied(3, transposed_each(Prim("split", (arith.as_expr(tile),), (flat,))))
            view = Prim("join", (), (transposed_each(Var(copy_name)),))
        if len(element_dims) > 1:
            def split_back(row):
                for d in reversed(element_dims[1:]):
                    row = Prim("split", (d,), (row,))
                return row
            view = Prim("map", (), (lam(split_back), view))
        body = Let(PVar(copy_name), copy, substitute(body, {name: view}, names))
        program = tree.replace_function(dataclasses.replace(fun, body=body))
        return Success(program, (Step("relayout", (name,) if tile is None else (name, tile)),))

    return Strategy(apply, f"relayout({name})" if tile is None else f"relayout({name}, {tile})")


def source_dimensions(view: Node, dims: dict[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """Which dimension of its source each dimension of ``view`` walks, outermost first, for a view made of
    transposes, paddings and maps of them (``dims``: each variable's, its source's ``range(rank)`` to begin
    with); None for any other view. ``pad2D(channelsLast(image))`` of a C x H x W image walks (1, 2, 0): its
    innermost dimension steps through the image a plane at a time."""
    if isinstance(view, Var):
        return dims.get(view.name)
    prim = primitive_of(view)
    if prim is None or not view.args:
        return None
    inner = source_dimensions(view.args[-1], dims)
    if inner is None:
        return None
    if prim.transposes and len(inner) >= 2:
        return (inner[1], inner[0]) + inner[2:]
    if prim.pads:
        return inner
    f = view.args[0]
    if prim.is_map and prim.is_view and len(inner) >= 2 and isinstance(f, Lambda) and isinstance(f.param, PVar):
        element = source_dimensions(f.body, {**dims, f.param.name: inner[1:]})
        return None if element is None else (inner[0],) + element
    return None


def _padded_view(body: Node) -> Node | None:
    """The largest view in ``body`` that pads (a primitive whose reads test a condition) and places each
    element of its input once (no slide: a copy of the windows would repeat every element): the padded
    image, not its windows."""

    def has(node: Node, trait: str) -> bool:
        return any(getattr(primitive_of(n), trait, False) for n in walk(node))

    for node in walk(body):
        if isinstance(node, Prim) and is_view(node) and has(node, "guards_reads") and not has(node, "repeats_elements"):
            return node
    return None


def rotated(array: Node, rank: int, names) -> Node:
    """The view of ``array`` (``rank`` dimensions) with its innermost dimension outermost: ``[[[t]_c]_w]_h``
    becomes ``[[[t]_w]_h]_c`` -- ``transpose o map(transpose)``, recursively."""
    if rank < 2:
        return array
    if rank > 2:
        x = names.fresh("x")
        array = Prim("map", (), (Lambda(PVar(x), rotated(Var(x), rank - 1, names)), array))
    return Prim("transpose", (), (array,))


def unrotated(array: Node, rank: int, names) -> Node:
    """The inverse view of :func:`rotated`: the outermost dimension of ``array`` innermost again."""
    if rank < 2:
        return array
    array = Prim("transpose", (), (array,))
    if rank > 2:
        x = names.fresh("x")
        array = Prim("map", (), (Lambda(PVar(x), unrotated(Var(x), rank - 1, names)), array))
    return array


def copy_padding(function: str | None = None, rotate: bool = False, sizes=None):
    """The padded input copied to memory by a kernel of its own, which the program then reads instead of the
    padding view: every read of the copy is unconditional, where each read through ``pad`` tests whether it
    falls in the padding (the paper's convolutions pad with a copy kernel; ``inline_copies`` of
    ``examples/derivations/copies.py`` is the other direction). The padded view reads an input through the maps
    above it -- an image of the batch, a group of its channels (a zip's component, a split) -- and the copy walks
    the same maps, so that each map now walks the copy's elements; each binder on the way must be read only on
    the way to the view. The copy runs at every call (the input changes): one more kernel, and the padded
    input's memory. Applies to a lowered program (its maps already placed).

    With ``rotate``, the copy holds the padded view with its innermost dimension outermost in memory, and the
    program reads it through the view that turns it back (:func:`unrotated`): where the padded view reads its
    input channels-last (``pad2D(channelsLast(image))``), that is the input's own order, so the copy reads and
    writes whole rows instead of gathering a pixel's channels from planes apart (the route's ``pad_copy`` 2;
    which layout the computation reads faster is searched).

    Where the copy's innermost dimension is not its source's (a channels-last copy of an image: each pixel's
    channels planes apart) and ``sizes`` give its length (8 or more), the copy is a tiled transpose: a
    work-item copies one pixel's tile of 4 to 8 channels, its neighbours in dimension 0 the next pixels of
    the row, so that a work-group reads a few planes' rows in order and writes whole tiles
    (:func:`source_dimensions` says which dimension of the source each of the copy's dimensions walks)."""
    from liftpy.ir import Program
    from liftpy.rewrite.strategies import Failure, Step, Strategy, Success, names_in
    from liftpy.typecheck import typecheck
    from liftpy.types import array_dims

    def walked_array(body: Node, name: str) -> tuple[Node, Node] | None:
        """The map whose function binds ``name`` (or a component of a zip it walks) and the array ``name``
        is an element of (None for a map applied partially, ``mapWrg(0, mapLcl(0, f))``)."""
        for node in walk(body):
            prim = primitive_of(node)
            if prim is None or not prim.is_map or not isinstance(node.args[0], Lambda):
                continue
            param, array = node.args[0].param, node.args[-1] if len(node.args) > 1 else None
            if isinstance(param, PVar) and param.name == name:
                return node, array
            if isinstance(param, PTuple) and _has(array, "zips") \
                    and len(array.args) == len(param.elems):
                for p, a in zip(param.elems, array.args):
                    if isinstance(p, PVar) and p.name == name:
                        return node, a
        return None

    def apply(tree, ctx):
        if not isinstance(tree, Program):
            return Failure("copy_padding applies to a program")
        fun = tree.function(function)
        view = _padded_view(fun.body)
        if view is None:
            return Failure(f"{fun.name} reads no padded view of its inputs")
        inputs = {p.name for p in fun.data_params}
        # the way from the view up to an input: (binder, the array whose element it is), innermost first
        way: list[tuple[str, Node]] = []
        read = view
        while not (free_vars(read) <= inputs):
            free = free_vars(read) - inputs
            if len(free) != 1 or free_vars(read) & inputs:
                return Failure("the padded view reads more than one value")
            (binder,) = free
            found = walked_array(fun.body, binder)
            if found is None:
                return Failure(f"{binder}, which the padded view reads, is not the element of a map")
            walker, array = found
            if array is None:
                return Failure(f"{binder} is the element of a map applied by the map above it, whose array has no name")
            if not is_view(array):
                return Failure(f"{binder} is the element of a computed array")
            if binder in free_vars(replace_node(walker.args[0].body, read, Var("\0"))):
                return Failure(f"{binder} is read beside the way to its padded view")
            way.append((binder, array))
            read = array
        # the way ends at the input, or a view of it the outermost map walks (a work-group's images)
        if len(free_vars(read)) != 1 or not is_view(read):
            return Failure("the padded view reads more than one input")
        (padded_input,) = free_vars(read)
        if count_uses(padded_input, fun.body) != 1:
            return Failure(f"the padded input {padded_input} is read elsewhere too")
        typed = typecheck(tree).program.function(fun.name)
        rank = len(array_dims(next(n for n in walk(typed.body) if n == view).type)[0])
        if rotate and rank < 2:
            return Failure("a padded vector has one layout: there is no dimension to rotate")
        names = Names(names_in(tree))
        copy_name = names.fresh("padded")

        def lam(body_of):
            x = names.fresh("x")
            return Lambda(PVar(x), body_of(Var(x)))

        def store(e):
            return Prim("toGlobal", (), (lam(lambda y: Prim("id", (), (y,))), e))

        def sequential(depth, e):
            return store(e) if depth == 0 else Prim("mapSeq", (), (lam(lambda r: sequential(depth - 1, r)), e))

        # the padded view's outer dimensions (two at most) over work-items, its innermost walked sequentially:
        # a work-item copies rows, whose middle, clear of the padding, is a plain loop (peel_padded_loops). Where
        # the copy's innermost dimension is not its source's, a row would gather its elements planes apart, each
        # its own cache line and, where the planes are a multiple of 4 KiB apart, all in one set of the
        # first-level cache: there the copy is a tiled transpose (benchmarks/results/notes-copies.md)
        source = next(iter(free_vars(view)))
        source_rank = len(array_dims(next(n for n in walk(typed.body) if isinstance(n, Var) and n.name == source)
                                     .type)[0])
        walks = source_dimensions(view, {source: tuple(range(source_rank))})
        if walks is not None and rotate:  # rotated: the innermost dimension outermost
            walks = walks[-1:] + walks[:-1]
        # The tiles take all three dimensions of the work-items, so the maps of the way (a batch's images, a
        # convolution's groups) run sequentially in each: only where a tile holds 4 to 8 elements of an
        # innermost dimension of 8 or more (not a depthwise convolution's one channel per group)
        tile = None
        if sizes is not None and rank == 3 and walks is not None and walks[-1] != source_rank - 1:
            at = next(i for i, n in enumerate(walk(fun.body)) if n is view)  # the same node, its sizes given
            sized = list(walk(typecheck(tree, sizes).program.function(fun.name).body))[at]
            innermost = arith.as_expr(array_dims(sized.type)[0][-2 if rotate else -1]).as_int() or 0
            tile = next((d for d in range(8, 3, -1) if innermost % d == 0), None) if innermost >= 8 else None
        parallel_dims = 3 if tile else 1 if rank == 1 else min(rank - 1, 2)

        def copy_of(array):
            if rotate:
                array = rotated(array, rank, names)
            if rank == 1:
                return Prim("mapGlb", (0,), (lam(store), array))
            if tile:  # each row [B][D] walked as [D/tile][B][tile], written back through map(join) o transpose
                def tiles(row):
                    split_rows = Prim("map", (), (lam(lambda x: Prim("split", (arith.as_expr(tile),), (x,))), row))
                    copied = Prim("mapGlb", (1,), (lam(lambda b: Prim("mapGlb", (0,), (lam(lambda p: sequential(1, p)), b))),
                                                   Prim("transpose", (), (split_rows,))))
                    return Prim("map", (), (lam(lambda x: Prim("join", (), (x,))), Prim("transpose", (), (copied,))))

                return Prim("mapGlb", (2,), (lam(tiles), array))

            def over(dim: int, e: Node) -> Node:  # dimension `dim` of the work-items, then the next inside
                if dim < 0:
                    return sequential(rank - parallel_dims, e)
                return Prim("mapGlb", (dim,), (lam(lambda x: over(dim - 1, x)), e))

            return over(parallel_dims - 1, array)

        def copy_along(level: int, array: Node) -> Node:
            """The maps of the way, outermost first: the innermost over work-items too (a channel or a group
            each), the others sequential (an image of the batch)."""
            binder = way[level][0]
            inner = view if level == 0 else way[level - 1][1]
            walk_with = ("mapGlb", (parallel_dims,)) if level == 0 and rank >= 2 and parallel_dims < 3 \
                else ("mapSeq", ())
            return Prim(*walk_with, (lam(lambda x: (
                copy_of(substitute(inner, {binder: x}, names)) if level == 0
                else copy_along(level - 1, substitute(inner, {binder: x}, names)))), array))

        copy = copy_of(view) if not way else copy_along(len(way) - 1, read)
        copied = Var(way[0][0]) if way else Var(copy_name)  # the padded view's elements, as the copy holds them
        body = replace_node(fun.body, view, unrotated(copied, rank, names) if rotate else copied)
        for (_, array), (outer, _) in zip(way, way[1:]):  # each map now walks the copy's elements
            body = replace_node(body, array, Var(outer))
        if way:
            body = replace_node(body, read, Var(copy_name))
        program = tree.replace_function(dataclasses.replace(fun, body=Let(PVar(copy_name), copy, body)))
        return Success(program, (Step("copy_padding", ("rotate",) if rotate else ()),))

    return Strategy(apply, "copy_padding(rotate)" if rotate else "copy_padding")


#: named strategies with parameters, for ``liftpy rewrite --strategy 'relayout("weights")'``
STRATEGIES = {"relayout": relayout, "copy_padding": copy_padding}
