"""The moves of the local search: the valid configurations one step away from a configuration.

A step changes one choice (a block one divisor smaller or larger, a width halved or doubled, a structural
choice switched), moves a prime factor from one block of a 2D block to the other (its shape changed, its
accumulators kept, as Ansor mutates tile sizes), rounds the innermost level up for a block that does not divide
it, or joins or unjoins the rows.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Mapping

from .choices import ABSENT, LOCAL_MEMORY, PAD_COPY, PARALLEL, REORDER, SEQUENTIAL_OUTER, UNROLL, VECTOR_OUTER

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
    (or none), any other value of a structural choice -- or in a prime factor moved between the blocks of a 2D
    block."""
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
