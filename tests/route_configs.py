"""Configurations of a route space for the tests to lower, run and search from: a 2D register block in vectors
(relaid, the padding copied, where the program pads) and a few dozen varied ones -- each kind of vectors, blocks
grown to fill the vector registers, joined rows, rounded levels.

These were the route's hand-written default and a search's starting points until the cost model's guess
replaced them (issue 49); they stay here as fixtures: varied, valid, deterministic configurations that exercise
every rewrite of the route, with no claim to be fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from liftpy.rewrite.route.choices import PAD_COPIED, PAD_ROTATED, PARALLEL, RELAID, Level, Structure, vectors_outer

if TYPE_CHECKING:
    from liftpy.rewrite.route import RouteSpace


def accumulator_targets(device) -> tuple[int, ...]:
    """The vector accumulators a register-filling block aims at: all of the device's vector registers but four (a
    step's operands), three quarters, half and a quarter of them. No target was best on every layer, so the search
    starts from each."""
    registers = device.vector_registers
    return tuple(dict.fromkeys((registers - 4, registers * 3 // 4, registers // 2, registers // 4)))


# ------------------------------------------------------------------------------------------------ blocks
def block_2d(space: "RouteSpace", config: Mapping[str, int]) -> tuple[Level, Level] | None:
    """The two levels a configuration blocks, outer first; None unless it blocks two."""
    blocked = tuple(level for level in space.levels if config[level.key] > 1)
    return blocked if len(blocked) == 2 else None


def widths(space: "RouteSpace") -> tuple[int, ...]:
    """The vector widths the starting points use, narrowest first: 4, 8 and 16 lanes, up to the device's preferred
    width (at least 4: a GPU's preferred 1 says nothing of its registers)."""
    return tuple(w for w in (4, 8, 16) if w <= max(4, space.device.preferred_vector_width_float))


def accumulators(space: "RouteSpace", config: Mapping[str, int]) -> int:
    """The vector accumulators of a configuration's vectorised 2D block (0 without one)."""
    block = block_2d(space, config)
    if block is None or not config["vector"]:
        return 0
    vectorised, other = block if vectors_outer(config["vector_outer"]) else block[::-1]
    return config[vectorised.key] // config["vector"] * config[other.key]


def fits_registers(space: "RouteSpace", config: Mapping[str, int]) -> bool:
    """Whether a step's values fit a CPU's vector registers: the accumulators of a 2D block of outer vectors, the
    vectors the step loads, the value it broadcasts (anything else fits, as far as this knows). Past them the C
    compiler spills an accumulator, and its every step waits on memory."""
    block = block_2d(space, config)
    if not space.device.is_cpu or block is None or not config["vector"] or not vectors_outer(config["vector_outer"]):
        return True
    outer, inner = block
    vectors = config[outer.key] // config["vector"]
    return vectors * config[inner.key] + vectors + 1 <= space.device.vector_registers


def outer_vectors(space: "RouteSpace", base: Mapping[str, int]) -> list[dict[str, int]]:
    """``base``'s 2D block with its outer level's accumulators in vectors, gathered and relaid, where the space has
    them: the outer block the largest divisor of its level up to 16, in vectors of the widest of :func:`widths`
    that divides it."""
    block = block_2d(space, base)
    if block is None:
        return []
    outer = block[0]
    size = max(d for d in outer.divisors if d <= 16)
    width = max((w for w in widths(space) if size % w == 0), default=0)
    kinds = [{**base, outer.key: size, "vector": width, "vector_outer": kind, "unroll": 1} for kind in (1, RELAID)]
    return [config for config in kinds if width and space.valid(config)]


def filled(space: "RouteSpace", base: Mapping[str, int], target: int, narrow: bool = False,
           fitting: bool = False) -> dict[str, int] | None:
    """``base``'s vectorised 2D block grown to fill the vector registers: vectors of the widest width a block of
    the vectorised level can hold; block sizes whose accumulators come closest to ``target`` without passing it
    (past the registers they spill), then read the fewest values per step. ``narrow``: the vectorised level one
    vector wide and the other as long as the target allows (fewer vectors streamed per step, more broadcasts).
    ``fitting``: only blocks whose step fits a CPU's vector registers. None where ``base`` has no vectorised 2D
    block or no such block is valid."""
    block = block_2d(space, base)
    if block is None or not base["vector"]:
        return None
    vectorised, other = block if vectors_outer(base["vector_outer"]) else block[::-1]
    for width in reversed(widths(space)):
        blocks = [{vectorised.key: a, other.key: b} for a in vectorised.divisors[1:] if a % width == 0
                  for b in other.divisors[1:]]

        def held(c):
            return accumulators(space, {**base, **c, "vector": width})

        blocks.sort(key=lambda c: (held(c) > target, narrow and c[vectorised.key] != width, abs(held(c) - target),
                                   c[vectorised.key] // width + c[other.key]))
        for sizes in blocks:
            config = {**base, **sizes, "vector": width}
            if space.valid(config) and (not fitting or fits_registers(space, config)):
                return config
    return None


def fitting_registers(space: "RouteSpace", config: Mapping[str, int]) -> dict[str, int]:
    """``config`` itself where a step's values fit a CPU's vector registers, else its block refilled to half the
    registers."""
    if fits_registers(space, config):
        return dict(config)
    return filled(space, config, space.device.vector_registers // 2) or dict(config)


# ------------------------------------------------------------------------------------------------ one
def inner_default(space: "RouteSpace") -> dict[str, int]:
    """The two innermost levels that can be blocked together (the inner by its largest divisor up to 8, the outer
    by its largest up to 4), unrolled, two parallel levels, the inner level's accumulators in vectors of the
    block's largest width up to 8 (else scalars); else one level, else none."""
    by_name = {level.name: level for level in space.levels}
    for count, caps in ((2, (8, 4)), (1, (8,))):
        for vector in (1, 0):
            for structure in space.structures():
                if len(structure.blocked) != count or (
                        structure.parallel, structure.sequential_outer, structure.unroll, structure.local_size,
                        structure.vector, structure.vector_outer, structure.pad_copy) != (2, 0, 1, 0, vector, 0, 0):
                    continue
                sketch_space = space.space(structure)
                values = {by_name[n].parameter: max(d for d in by_name[n].divisors if d <= cap)
                          for n, cap in zip(structure.blocked, caps)}
                if vector:
                    inner = values[by_name[structure.blocked[0]].parameter]
                    values["vector"] = max((w for w in (2, 4, 8) if inner % w == 0), default=1)
                if sketch_space is not None and all(v >= 2 for v in values.values()) and sketch_space.check(values):
                    return space.config(structure, values)
    return space.config(Structure((), 2, 0, 0), {})


def example_config(space: "RouteSpace") -> dict[str, int]:
    """A blocked configuration (the retired default). Where the program pads: a 2D block's outer level in vectors, its
    inputs relaid, the padding copied (vectors along the inner level would read through the padding, one test per
    lane), its step within a CPU's vector registers; else the inner level's vectors with the padding copied rotated
    (its pixels side by side, as the vectors read them). Elsewhere :func:`inner_default`."""
    inner = inner_default(space)
    if space.pads:
        fitting = (fitting_registers(space, c) for c in outer_vectors(space, inner))
        relaid = [{**c, "pad_copy": PAD_COPIED} for c in fitting if c["vector_outer"] == RELAID]
        rotated = [{**inner, "pad_copy": PAD_ROTATED}] if inner["vector"] and space.rotates else []
        for config in relaid + rotated:
            if space.valid(config):
                return config
    return inner


# ------------------------------------------------------------------------------------------------ many
def example_configs(space: "RouteSpace") -> list[dict[str, int]]:
    """Varied configurations (the retired starting points), each valid and once: :func:`example_config`; each kind of
    vectors with its block grown to fill the registers (for each of :func:`accumulator_targets`, the most first);
    each other kind of vectors and padding copy once; the default with its sum's loops in the other order; the
    rotated copies' blocks grown narrow; then each of these spread over every parallel level (its sum's loops in the
    other order where that is valid); then, where the rows can be joined, the joined rows' starting points whose
    blocks span rows; last, where a register target asks for an innermost block its level does not allow, the blocks
    filled in the level rounded up. The joined and rounded ones also with one parallel level (each work-item walking
    all the windows, its block of weights kept in its cache)."""
    inner = inner_default(space)
    outer = outer_vectors(space, inner)
    relaid = [c for c in outer if c["vector_outer"] == RELAID]
    rotated = [{**c, "pad_copy": PAD_ROTATED} for c in relaid] if space.rotates else []
    rotated_inner = [{**inner, "pad_copy": PAD_ROTATED}] if inner["vector"] and space.rotates else []
    copied = [{**c, "pad_copy": PAD_COPIED} for c in relaid] + rotated + rotated_inner
    first = example_config(space)
    targets = accumulator_targets(space.device)
    grown = [f for target in targets
             for f in (filled(space, base, target) for base in [first, *copied, inner, *outer]) if f is not None]
    narrow = [f for target in targets
              for f in (filled(space, base, target, narrow=True) for base in [*rotated, *rotated_inner])
              if f is not None]
    out: list[dict[str, int]] = []
    for config in [first, *grown, inner, *outer, *copied, {**first, "reorder": 1}, *narrow]:
        if config not in out and space.valid(config):
            out.append(config)
    for config in list(out):  # each spread over every level it has, its sum's loops in the other order
        spread = {**config, "parallel": max(PARALLEL)}
        for candidate in ({**spread, "reorder": 1 - spread["reorder"]}, spread):
            if space.valid(candidate):
                if candidate not in out:
                    out.append(candidate)
                break
    if space._joined_program is not None:  # the joined rows' whose blocks span rows (not spread: a short budget)
        for c in example_configs(space.joined):
            if space.needs_joining(c) and c["parallel"] != max(PARALLEL):
                _add_with_one_parallel_level(space, out, {**c, "join_rows": 1})
    for elements in wanted_roundings(space):  # blocks that need the rounding, hold the target and fit
        rounded = space.rounded(elements)
        for target in targets:
            for base in [first, *copied]:
                c = filled(rounded, base, target, fitting=True)
                if c is None or not space.needs_rounding(c) or accumulators(rounded, c) != target \
                        or space.rounded_blocks.get(c[space.levels[-1].key]) != elements:  # (the least rounding)
                    continue
                _add_with_one_parallel_level(space, out, {**c, "round_up": elements})
    return out


def _add_with_one_parallel_level(space: "RouteSpace", out: list[dict[str, int]], config: dict[str, int]) -> None:
    """Append ``config`` and its twin with one parallel level to ``out``, where valid and not there yet."""
    for candidate in (config, {**config, "parallel": 1}):
        if candidate not in out and space.valid(candidate):
            out.append(candidate)


def wanted_roundings(space: "RouteSpace") -> list[int]:
    """The elements ``round_up`` adds for the blocks that fill the register targets with one to four vectors of
    the other level, where those blocks do not divide the innermost level (on AVX2, 12 accumulators as 2 vectors
    of 8 kernels x 6 windows, where VGG-16's rows are 2^k x 7 windows long)."""
    targets = accumulator_targets(space.device)
    blocks = {t // v for t in targets for v in (1, 2, 3, 4) if t % v == 0}
    wanted = [space.rounded_blocks[b] for b in sorted(blocks) if b in space.rounded_blocks]
    return [e for e in dict.fromkeys(wanted) if space.rounded(e) is not None]
