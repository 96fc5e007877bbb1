"""The route's space of one program at given sizes on a device: every structure, each sketch's parameter space,
and which configurations are valid.

A configuration names a structure and the values of its sketch's parameters (:mod:`.choices`); its sketch's
space (:func:`liftpy.params.parameters`) adds what the types and the device require (a block divides its level,
the block fits the private memory). ``join_rows`` and ``round_up`` pick the space of another program -- the rows
joined, the innermost level rounded up -- made when first asked for; a configuration of theirs is written here
with that choice set.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Iterator, Mapping

from ...errors import RewriteError, SizeError
from ...ir import Program
from ..strategies import Success, topDown
from . import moves
from .choices import (
    ABSENT,
    LOCAL_MEMORY,
    MAX_BLOCKED,
    MAX_JOINED_BLOCK,
    MAX_LANES,
    MAX_ROUNDED_BLOCK,
    MAX_ROUNDING_WASTE,
    NAMES,
    PAD_COPIED,
    PAD_COPY,
    PARALLEL,
    RELAID,
    RELAID_INNER,
    REORDER,
    SEQUENTIAL_OUTER,
    UNROLL,
    VECTOR_OUTER,
    Structure,
    config_of,
    structure_of,
)
from .sketches import Sketch, Sketches, binds, spatial_loops


#: the most configurations one sample draws from the other sides: each drawn one makes a sketch of a space
#: of its own, and a search's pool of a thousand would make hundreds
SIDE_DRAWS = 32


class RouteSpace:
    """The space of one program at given sizes on a device. ``sample(n)`` draws configurations (dicts of every
    choice of :data:`~.choices.CHOICES` and ``block.<level>``), ``lower(config)`` gives the low-level program a
    configuration stands for, ``plain()`` the one that chooses nothing and ``neighbours(config)`` those one move
    away. Which is fast is the cost model's to say (:mod:`liftpy.tuning.guess`), not the space's.
    ``join_rows=False`` leaves the rows unjoined (the joined rows' own space is made so), ``round_up=False`` the
    innermost level as long as it is (a rounded level's own space)."""

    CHOICES = NAMES
    ABSENT = ABSENT

    def __init__(self, program: Program, sizes: Mapping[str, object], device=None, function: str | None = None,
                 join_rows: bool = True, round_up: bool = True):
        from ...params import resolve_device

        self.program = program.only(function)  # the route's rewrites walk the whole program
        self.sizes = dict(sizes)
        self.device = resolve_device(device)
        self.function = function
        self.sketcher = Sketches(self.program, self.sizes, function)
        self.levels = self.sketcher.levels
        self.unit_levels = self.sketcher.unit_levels
        self.pads, self.rotates = self.sketcher.pads, self.sketcher.rotates
        self.sums, self.sum_length = self.sketcher.sums, self.sketcher.sum_length
        self._spaces: dict[Structure, object] = {}
        self._structure_set: frozenset[Structure] = frozenset(self.structures())
        #: the program with its rows joined, where that allows a block the rows do not (its space, made when first
        #: asked for: :attr:`joined`); else None
        self._joined_program = self._joined_rows() if join_rows else None
        self._joined_space: RouteSpace | None = None
        #: the innermost level's blocks that do not divide it, and the elements ``round_up`` adds for each
        self.rounded_blocks = self._rounded_blocks() if round_up else {}
        self._rounded_spaces: dict[int, RouteSpace | None] = {}

    @property
    def _sketches(self) -> dict[Structure, Sketch]:
        """The sketches made so far (the cost of a space)."""
        return self.sketcher.made

    # ------------------------------------------------------------------------------------------ structures
    def structures(self) -> list[Structure]:
        """Every structure: up to MAX_BLOCKED levels blocked (each tuple inner level first, the innermost levels'
        tuples first); partial sums and chunks only without a block (a block's accumulators are independent
        already; its levels would have to be sunk past the chunks); unrolled only with a block or partial sums;
        vectors only unrolled (a lane is chosen by a constant), along the outer level only of a 2D block."""
        inner_first = [level.name for level in reversed(self.levels)]
        blocks = [b for r in range(MAX_BLOCKED + 1) for b in itertools.combinations(inner_first, r)]
        relaid = {name: bool(self.sketcher.walked_inputs(name)) for name in inner_first}
        pad_copy = PAD_COPY if self.sketcher.padding else (0, PAD_COPIED) if self.pads else (0,)
        partial = (0, 1) if self.sums else (0,)
        reorder = REORDER if self.sketcher.reordered is not None else (0,)
        local_memory = (0,) if self.device.is_cpu else LOCAL_MEMORY
        chunk = (0, 1) if self.sum_length else (0,)
        vectors = [(0, 0)] + [(1, outer) for outer in VECTOR_OUTER]
        return [Structure(b, p, q, u, g, v, o, c, s, r, m, k) for b in blocks for p in PARALLEL
                for q in SEQUENTIAL_OUTER for u in UNROLL for g in (0, 1) for v, o in vectors for c in pad_copy
                for s in partial for r in reorder for m in local_memory for k in chunk
                if not (b and s) and (b or s or not u) and (u or not v)
                and (not o or len(b) == 2) and (o != RELAID or relaid[b[-1]])
                and (o != RELAID_INNER or relaid[b[0]]) and (g or not m) and not (b and k)]

    def sketch(self, structure: Structure) -> Sketch:
        return self.sketcher.sketch(structure)

    def space(self, structure: Structure):
        """The parameter space of a structure's sketch (None where there is no sketch or no valid configuration):
        block sizes of at least 2 that divide their level, within the device's limits."""
        if structure.pad_copy or structure.reorder or structure.local_memory:  # the same parameters as without
            if not self.sketcher.exists(structure):
                return None
            space = self.space(structure.shared)
            if space is None or not structure.local_memory:
                return space
            staged = dataclasses.replace(structure, pad_copy=0, reorder=0)
            if staged not in self._spaces:
                self._spaces[staged] = self._fits_local_memory(space, self.sketcher.staged_words(structure))
            return self._spaces[staged]
        if structure not in self._spaces:
            sketch = self.sketch(structure)
            space = None
            if sketch.program is not None:
                from ...params import parameters

                ranges = {level.parameter: (2, level.extent) for level in self.levels
                          if level.name in structure.blocked}
                if structure.vector:
                    ranges["vector"] = (2, MAX_LANES)
                if structure.partial:
                    ranges["partial"] = (2, MAX_LANES)
                if structure.chunk:
                    ranges["chunk"] = (2, self.sum_length)
                space = parameters(sketch.program, self.sizes, self.device, function=self.function, ranges=ranges)
                if not space.satisfiable():
                    space = None
            self._spaces[structure] = space
        return self._spaces[structure]

    def _fits_local_memory(self, space, words):
        """``space`` with the staged ``words`` floats within the device's local memory (None where they never
        fit)."""
        from ...constraints import Constraint
        from ...params import NamedConstraint

        limit = self.device.local_mem_size // 4
        fits = NamedConstraint("device.local_memory", Constraint(
            "at_least", limit, words, f"{words} floats staged in local memory: the device has {limit}", None, "device"))
        fitting = dataclasses.replace(space, constraints=[*space.constraints, fits], _domains=None)
        return fitting if fitting.satisfiable() else None

    def sketches(self) -> Iterator[tuple[Structure, object]]:
        """Every structure with a non-empty space, and that space."""
        for structure in self.structures():
            space = self.space(structure)
            if space is not None:
                yield structure, space

    # ------------------------------------------------------------------------------------------ the other sides
    def _joined_rows(self) -> Program | None:
        """The program with its rows joined (``joinRows``), where a level of its nests that reduce allows a block
        of up to MAX_JOINED_BLOCK elements that the same level of the rows does not."""
        from .. import rules

        joined = topDown(rules.joinRows)(self.program)
        if not isinstance(joined, Success):
            return None
        spans = any(self._spans_rows(names[0], d) for names, extent, reduces
                    in spatial_loops(joined.program, self.sizes, self.function) if reduces and names and extent
                    for d in range(2, min(extent, MAX_JOINED_BLOCK) + 1) if extent % d == 0)
        return joined.program if spans else None

    @property
    def joined(self) -> "RouteSpace | None":
        """The space of the program with its rows joined (``join_rows`` 1), where that allows a block the rows do
        not; else None."""
        if self._joined_program is not None and self._joined_space is None:
            self._joined_space = RouteSpace(self._joined_program, self.sizes, self.device, self.function,
                                            join_rows=False)
        return self._joined_space

    def _spans_rows(self, name: str, block: int) -> bool:
        """Whether a block of the joined level ``name`` is one the rows do not allow (it spans rows)."""
        extents = {level.name: level.extent for level in self.levels}
        return name in extents and block > 1 and extents[name] % block != 0

    def needs_joining(self, config: Mapping[str, int]) -> bool:
        """Whether a configuration of the joined rows' space blocks a level as the rows do not allow (else it is
        the twin of one of this space's: the same computation, other index arithmetic)."""
        return any(self._spans_rows(level.name, config[level.key]) for level in self.joined.levels)

    def _rounded_blocks(self) -> dict[int, int]:
        """Block -> the elements ``round_up`` adds to the innermost level for it: the blocks up to
        MAX_ROUNDED_BLOCK that do not divide the level's length n, where rounding adds at most n *
        MAX_ROUNDING_WASTE."""
        if not self.levels:
            return {}
        n = self.levels[-1].extent
        return {b: -n % b for b in range(2, min(n, MAX_ROUNDED_BLOCK) + 1)
                if n % b and -n % b <= n * MAX_ROUNDING_WASTE}

    def rounded(self, elements: int) -> "RouteSpace | None":
        """The space of the program with its innermost level rounded up by ``elements`` (``roundUp``: the last
        element repeated, the extra results cropped), where that is one of :attr:`rounded_blocks`'; else None."""
        from .. import rules

        if elements not in self.rounded_blocks.values():
            return None
        if elements not in self._rounded_spaces:
            name = self.levels[-1].name
            rounded = topDown(binds(name) >> rules.roundUp(elements))(self.program)
            self._rounded_spaces[elements] = RouteSpace(rounded.program, self.sizes, self.device, self.function,
                                                        join_rows=False, round_up=False) \
                if isinstance(rounded, Success) else None
        return self._rounded_spaces[elements]

    def needs_rounding(self, config: Mapping[str, int]) -> bool:
        """Whether a configuration (as a rounded space of this one writes it) blocks the innermost level as this
        space's length does not allow."""
        level = self.levels[-1]
        return config[level.key] > 1 and level.extent % config[level.key] != 0

    def side(self, config: Mapping[str, int]) -> tuple["RouteSpace", dict[str, int]]:
        """The space a configuration is one of -- the joined rows' for ``join_rows`` 1, the rounded level's for
        ``round_up`` r, else this one -- and the configuration as that space writes it. The joined rows' space may
        round its own level: the choices nest."""
        config = {**ABSENT, **config}
        if config["join_rows"] and self._joined_program is not None:
            return self.joined, {**config, "join_rows": 0}
        if config["round_up"] and (rounded := self.rounded(config["round_up"])) is not None:
            return rounded, {**config, "round_up": 0}
        return self, config

    # ------------------------------------------------------------------------------------------ configurations
    def config(self, structure: Structure, values: Mapping[str, int]) -> dict[str, int]:
        """The configuration of a structure and its sketch's parameter values."""
        return config_of(structure, values, self.levels)

    def structure_of(self, config: Mapping[str, int]) -> tuple[Structure, dict[str, int]]:
        """The structure and the sketch's parameter values of a configuration; a malformed one is refused. (A
        configuration recorded before a choice existed lacks it: ABSENT says what that means.)"""
        expected = set(NAMES) | {level.key for level in self.levels}
        config = {**ABSENT, **config}
        if set(config) != expected:
            raise SizeError(f"a configuration of this program's route has the choices {', '.join(sorted(expected))}; "
                            f"got {', '.join(sorted(config)) or 'none'}")
        if config["join_rows"]:
            raise SizeError("join_rows: this program's rows cannot be joined here (or joining allows no other block)")
        if config["round_up"]:
            raise SizeError(f"round_up: this program's innermost level cannot be rounded up by {config['round_up']} "
                            f"here (the elements it may add: {sorted(set(self.rounded_blocks.values())) or 'none'})")
        return structure_of(config, self.levels)

    def lower(self, config: Mapping[str, int]) -> Program:
        """The low-level program of a configuration, its block sizes bound."""
        side, own = self.side(config)
        if side is not self:
            return side.lower(own)
        structure, values = self.structure_of(config)
        sketch = self.sketch(structure)
        if sketch.program is None:
            raise RewriteError(f"the route cannot make {dict(config)}: {sketch.failure}")
        space = self.space(structure)
        if space is None:
            raise RewriteError(f"the route's sketch for {dict(config)} has no valid configuration here")
        checked = space.check(values)
        if not checked:
            raise RewriteError(f"configuration {dict(config)}: {checked}")
        return space.specialize(values, sketch.program)  # a padding copy's sketch shares its space

    def valid(self, config: Mapping[str, int]) -> bool:
        """Whether a configuration is one of the space's, as the space writes it (its sketch exists and its values
        satisfy it), or one of the joined rows' space (``join_rows`` 1) or a rounded level's (``round_up``)."""
        side, own = self.side(config)
        if side is not self:
            return side.valid(own)
        try:
            structure, values = self.structure_of(config)
        except SizeError:
            return False
        if structure not in self._structure_set or self.config(structure, values) != {**ABSENT, **config}:
            return False
        space = self.space(structure)
        return space is not None and bool(space.check(values))

    def count(self) -> int:
        """The configurations of this space's own structures (the joined rows' and the rounded levels' not among
        them)."""
        return sum(space.count().value if space.parameters else 1 for _, space in self.sketches())

    def sample(self, n: int, seed: int = 0, structures: int | None = None) -> list[dict[str, int]]:
        """Up to ``n`` distinct configurations: :meth:`_sample_own`'s, and among them, evenly spread, an eighth
        (at most :data:`SIDE_DRAWS`) drawn from at most two of the other sides (the joined rows', a rounded
        level's: each space made when first drawn from, seconds for a large program), only those that block as
        this space cannot. ``structures``: the most structures each side draws from, each then giving several
        configurations (a structure's sketch costs a tenth of a second or more to make; a prefilter's draw wants
        many configurations, not all of other structures)."""
        sides = [({"join_rows": 1}, lambda: self.joined)] if self._joined_program is not None else []
        sides += [({"round_up": e}, lambda e=e: self.rounded(e)) for e in sorted(set(self.rounded_blocks.values()))]
        own = self._sample_own(n, seed, structures)
        wanted = min(n // 8, SIDE_DRAWS) if sides else 0
        if not wanted:
            return own
        rng = random.Random(seed + 1)
        rng.shuffle(sides)
        drawn: list[dict[str, int]] = []
        for overrides, make in sides[:2]:
            space = make()
            if space is None:
                continue
            for config in space.sample(-(-wanted // min(2, len(sides))), seed=rng.randrange(2**31),
                                       structures=structures):
                if self.needs_joining(config) if "join_rows" in overrides else self.needs_rounding(config):
                    drawn.append({**config, **overrides})
        drawn = drawn[:wanted]
        out = own[:n - len(drawn)]
        for i, config in enumerate(drawn):  # spread evenly: a search that takes the first few meets some
            out.insert((i + 1) * len(out) // (len(drawn) + 1), config)
        return out

    def _sample_own(self, n: int, seed: int, structures: int | None = None) -> list[dict[str, int]]:
        """Up to ``n`` distinct configurations of this space, the structures taking turns in a seeded random
        order. The structures' spaces are made in that order, only until ``n`` of them (or ``structures``) have
        given one configuration each (making them all costs seconds); where fewer than ``n`` exist, each is asked
        for a share of ``n``, the share doubled while some space could give more and ``n`` is not reached."""
        if n <= 0:
            return []
        every = self.structures()
        rng = random.Random(seed)
        seeds = [rng.randrange(2**31) for _ in every]
        order = list(range(len(every)))
        rng.shuffle(order)
        sketches: list[tuple[Structure, object, int]] = []
        for i in order:
            space = self.space(every[i])
            if space is not None:
                sketches.append((every[i], space, seeds[i]))
                if len(sketches) == min(n, structures or n):  # one from each: the first round's share, no more made
                    break
        share = -(-n // max(1, len(sketches)))
        while True:
            streams = [[self.config(structure, value) for value in
                        (space.sample(share, seed=space_seed) if space.parameters else [{}])]
                       for structure, space, space_seed in sketches]
            out: list[dict[str, int]] = []
            for step in range(max((len(s) for s in streams), default=0)):
                out += [s[step] for s in streams if step < len(s)]
            if len(out) >= n or all(len(s) < share for s in streams):
                return out[:n]
            share *= 2

    # ------------------------------------------------------------------------------------------ the search's view
    def plain(self) -> dict[str, int]:
        """The configuration that chooses nothing: no level blocked, unrolled or in vectors, the padding read
        where it lies, two levels parallel -- every program's route lowers it."""
        return self.config(Structure((), 2, 0, 0), {})

    def neighbours(self, config: Mapping[str, int]) -> list[dict[str, int]]:
        """The valid configurations one move away from ``config`` (:func:`.moves.neighbours`)."""
        return moves.neighbours(self, config)

    def adapted(self, config: Mapping[str, int]) -> dict[str, int] | None:
        """Another task's configuration of the same levels made one of this space's (:func:`.moves.adapted`)."""
        return moves.adapted(self, config)

    def describe(self, made: bool = True) -> str:
        """The levels that can be blocked and how many sketches the space holds -- each made to know it (seconds
        for a small convolution, minutes for Winograd's stages), unless ``made`` is False: then how many
        structures there are, for a search's first line, which makes only the sketches it reaches."""
        def count(space):
            return f"{len(list(space.sketches()))} sketches" if made else f"{len(space.structures())} structures"

        levels = ", ".join(f"{level.name} ({level.extent})" for level in self.levels) or "none"
        text = f"levels that can be blocked: {levels}; {count(self)}"
        if self._joined_program is not None:
            joined = ", ".join(f"{level.name} ({level.extent})" for level in self.joined.levels)
            text += f"; with its rows joined (join_rows 1): {joined}, {count(self.joined)}"
        if self.rounded_blocks:
            text += f"; {self.levels[-1].name} rounded up (round_up) by " + \
                ", ".join(f"{e} for blocks of {', '.join(str(b) for b, x in self.rounded_blocks.items() if x == e)}"
                          for e in sorted(set(self.rounded_blocks.values())))
        return text
