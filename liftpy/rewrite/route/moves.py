"""The moves of the local search: the valid configurations one step away from a configuration.

A step changes one choice (a block one divisor smaller or larger, a width halved or doubled, a structural choice
switched), doubles or halves the vectors with a block as many vectors long, moves a prime factor from one block of a
2D block to the other (its shape changed, its accumulators kept, as Ansor mutates tile sizes), rounds the innermost
level up for a block that does not divide it, or joins or unjoins the rows. :func:`adapted` makes another task's
configuration one of a space's (the same choices, its blocks the nearest the space allows): how a search starts from
what won on a similar task.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Mapping

from .choices import ABSENT, LOCAL_MEMORY, NAMES, PAD_COPY, PARALLEL, REORDER, SEQUENTIAL_OUTER, UNROLL, VECTOR_OUTER

if TYPE_CHECKING:
    from .space import RouteSpace


def neighbours(space: "RouteSpace", config: Mapping[str, int]) -> list[dict[str, int]]:
    """The moves in the configuration's own space (the joined rows', a rounded level's or this one), the innermost
    block one larger or smaller where rounding the level up allows it, and the same choices with the rows joined
    or not, where that is a configuration."""
    config = {**ABSENT, **config}
    if config["join_rows"] and space._joined_program is not None:
        out = [{**c, "join_rows": 1} for c in neighbours(space.joined, {**config, "join_rows": 0})]
        other = {**config, "join_rows": 0, "round_up": 0}
    else:
        side, own = space.side(config)
        out = [{**c, "round_up": config["round_up"]} for c in one_choice(side, own)
               if space.needs_rounding(c)] if side is not space else one_choice(space, config)
        out += [c for c in rounding_moves(space, config) if c not in out]
        other = {**config, "join_rows": 1, "round_up": 0}
    if space._joined_program is not None and other not in out and space.valid(other):
        out.append(other)
    return out


def rounding_moves(space: "RouteSpace", config: Mapping[str, int]) -> list[dict[str, int]]:
    """The innermost level's block one larger or one smaller, the level rounded up where the block does not divide
    it (``round_up``) and not where it does: from 4 windows of a 224-wide row to 5 (225 computed) and 3 (225),
    from 5 to 6 (228)."""
    if not space.levels:
        return []
    level = space.levels[-1]
    out = []
    for block in (config[level.key] - 1, config[level.key] + 1):
        if block < 2:
            continue
        elements = 0 if level.extent % block == 0 else space.rounded_blocks.get(block)
        changed = {**config, level.key: block, "round_up": elements}
        if elements is not None and changed != config and space.valid(changed):
            out.append(changed)
    return out


def one_choice(space: "RouteSpace", config: Mapping[str, int]) -> list[dict[str, int]]:
    """The valid configurations of ``space`` that differ from ``config`` in one choice -- a block one divisor
    smaller or larger (or unblocked), a width, work-group size, number of partial sums or chunk halved or doubled
    (or none), any other value of a structural choice -- in the vector width doubled or halved with a block as
    many vectors long, or in a prime factor moved between the blocks of a 2D block."""
    base = {**ABSENT, **config}
    candidates: dict[str, list[int]] = {
        "parallel": list(PARALLEL), "sequential_outer": list(SEQUENTIAL_OUTER), "unroll": list(UNROLL),
        "vector_outer": list(VECTOR_OUTER), "pad_copy": list(PAD_COPY), "reorder": list(REORDER),
        "local_memory": list(LOCAL_MEMORY)}
    for level in space.levels:
        divisors = level.divisors
        at = divisors.index(base[level.key]) if base[level.key] in divisors else 0
        candidates[level.key] = [1, *divisors[max(0, at - 1):at + 2]]
    for key in ("vector", "local_size", "partial", "chunk"):
        value = base[key]
        candidates[key] = [0, value // 2, value * 2] if value else [2, 4, 8]
    out: list[dict[str, int]] = []
    for key, values in candidates.items():
        for value in dict.fromkeys(values):
            if value == base[key]:
                continue
            changed = {**base, key: value}
            if space.valid(changed) and changed not in out:
                out.append(changed)
    blocked = [level.key for level in space.levels if base[level.key] > 1]
    if base["vector"]:  # wider or narrower vectors, a block's as many of them: its accumulators kept
        for key in blocked:
            for changed in ({**base, "vector": base["vector"] * 2, key: base[key] * 2},
                            {**base, "vector": base["vector"] // 2, key: base[key] // 2}):
                if changed["vector"] >= 2 and space.valid(changed) and changed not in out:
                    out.append(changed)
    for source, target in itertools.permutations(blocked, 2):
        for factor in prime_factors(base[source]):
            changed = {**base, source: base[source] // factor, target: base[target] * factor}
            if space.valid(changed) and changed not in out:
                out.append(changed)
    return out


def prime_factors(n: int) -> list[int]:
    """The distinct prime factors of ``n`` (at least 1), smallest first."""
    factors, d = [], 2
    while d * d <= n:
        if n % d == 0:
            factors.append(d)
            while n % d == 0:
                n //= d
        d += 1
    return factors + ([n] if n > 1 else [])


def adapted(space: "RouteSpace", config: Mapping[str, int]) -> dict[str, int] | None:
    """A configuration of another space with the same levels (the same program, or one whose nest binds the same
    names, at other sizes) made one of ``space``'s, its choices kept where they are valid: each block the nearest
    its level allows (the innermost kept, or the nearest a rounded level allows, where rounding the level up
    allows it; else the nearest divisor, by ratio), the rows joined as before and else not, a vector width
    halved until it fits its block, scalars last. None where the levels differ or nothing such is valid."""
    base = {**ABSENT, **config}
    if set(base) != set(NAMES) | {level.key for level in space.levels}:
        return None
    if space.valid(base):
        return base
    widths = [base["vector"] >> halved for halved in range(8) if base["vector"] >> halved >= 2]
    for vectors in ([widths, [0]] if widths else [[base["vector"]]]):
        for join_rows in dict.fromkeys((base["join_rows"], 0)):
            side = space.joined if join_rows and space._joined_program is not None else space
            if (join_rows and side is space) or not side.levels:
                continue
            for block, round_up in _blocks(side, base):
                for vector in vectors:
                    candidate = {**base, **block, "round_up": round_up, "join_rows": 0, "vector": vector}
                    if side.valid(candidate):
                        return {**candidate, "join_rows": join_rows}
    return None


def _blocks(side: "RouteSpace", base: Mapping[str, int]) -> list[tuple[dict[str, int], int]]:
    """The blocks :func:`adapted` tries, with the rounding each needs: the innermost kept (rounded where it does
    not divide), every block the nearest divisor, the innermost the nearest block a rounding allows."""
    snapped = {level.key: _nearest(level.divisors, base[level.key]) for level in side.levels}
    innermost = side.levels[-1]
    block = base[innermost.key]
    out = [({**snapped, innermost.key: block}, 0 if innermost.extent % block == 0
            else side.rounded_blocks.get(block, -1)), (snapped, 0)]
    if block > 1 and side.rounded_blocks:
        near = _nearest((1, *sorted(side.rounded_blocks)), block)
        out.append(({**snapped, innermost.key: near}, side.rounded_blocks[near]))
    return [(b, r) for b, r in out if r >= 0]


def _nearest(divisors: tuple[int, ...], block: int) -> int:
    """The divisor nearest ``block`` by ratio, the smaller of two as near (1 stays 1: the level unblocked)."""
    if block <= 1:
        return block
    return min(divisors[1:] or divisors, key=lambda d: (abs(math.log(d / block)), d))
