"""The choices of the automatic route: one table, one name per choice.

A *configuration* is a dict from each choice's name to its value. The *structural* part of a configuration (which
levels are blocked, how many run in parallel, which accumulators are vectors...) picks a *sketch*: a low-level
program whose numeric choices are still tuning parameters, named as the choices are (``vector``, ``partial``,
``chunk``, ``local_size``; a level's block ``block.<level>`` is the parameter ``block_<level>``, a name the language
can spell). A :class:`Structure` holds the structural part, each field named after its choice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

#: what a configuration means: raised when the same configuration comes to lower to another program, so that a
#: database's trials of the earlier meaning are neither resumed nor reported as this one's
ROUTE_VERSION = 6


@dataclass(frozen=True)
class Choice:
    """One choice of the route: its name (a configuration's key, a :class:`Structure`'s field, a sketch's
    tuning parameter where its value is one), its values, what it means and the rewrite it drives. ``kind``:
    ``structure`` (its value picks the sketch), ``parameter`` (0 leaves it out of the sketch, else its value is
    the sketch's tuning parameter) or ``side`` (its value picks another program's space: rows joined, a level
    rounded up). ``absent`` is what a configuration recorded before the choice existed means by its absence."""

    name: str
    values: tuple[int, ...] | str
    kind: str
    rewrite: str
    meaning: str
    absent: int | None = 0


CHOICES: tuple[Choice, ...] = (
    Choice("parallel", (1, 2, 3), "structure", "lowering(parallel=...)",
           "how many of the outermost computing levels run as global maps (a level of one element is not counted)",
           absent=None),
    Choice("sequential_outer", (0, 1), "structure", "lowering(sequential_outer=...)",
           "whether the outermost level runs sequentially above the parallel ones", absent=None),
    Choice("unroll", (0, 1), "structure", "mapSeqUnroll, reduceSeqUnroll",
           "whether the loops over a block are unrolled (its accumulators then registers)", absent=None),
    Choice("local_size", "0, or the work-items of a work-group", "parameter", "lowering(local_size=...): mapWrg/mapLcl",
           "0: global maps (the launch chooses the work-groups); else the parallel levels as work-groups", absent=None),
    Choice("vector", "0, or a width of 2 to 16 lanes", "parameter",
           "vectorizeBlock, vectorizeInnerBlock, vectorizeBlockOf",
           "the width of the OpenCL vectors a blocked level's accumulators are kept in (0: scalars)"),
    Choice("vector_outer", (0, 1, 2, 3), "structure", "vectorizeOuterBlock; 2, 3: relayout",
           "with vectors and a 2D block: 0 the inner level's accumulators are vectors, 1 the outer level's, "
           "2 the outer level's with the inputs it walks copied with that level innermost (one vector load), "
           "3 the inner level's with the inputs it walks so copied"),
    Choice("pad_copy", (0, 1, 2, 3), "structure", "copy_padding; 2: copy_padding(rotate); 3: selectPadding",
           "where the program pads an input: 0 read through the padding view, 1 copy the padded input first, "
           "2 copy it with its innermost dimension outermost, 3 read through the view branch-free (where the "
           "padding adds nothing at the sizes, 0 and 1 only)"),
    Choice("partial", "0, or 2 to 16 partial sums", "parameter", "partialSums",
           "where no level is blocked: a sum split into that many partial sums walked at once (the paper's ω)"),
    Choice("reorder", (0, 1), "structure", "reorderSum",
           "where a sum walks two arrays of arrays in step: 1 walks them column by column (channel first)"),
    Choice("local_memory", (0, 1), "structure", "letLocal",
           "with work-groups: 1 stages in local memory the arrays all of a group's work-items read"),
    Choice("chunk", "0, or the elements of a chunk", "parameter", "split_sum",
           "where no level is blocked: a sum's chunks summed by a stage of their own (the paper's two kernels)"),
    Choice("join_rows", (0, 1), "side", "joinRows",
           "1 maps over a 2D array's joined rows, so that a block of the inner level may span rows"),
    Choice("round_up", "0, or the elements added", "side", "roundUp",
           "the innermost level rounded up by that many elements (results cropped), for a block not dividing it"),
)
#: the choices by name; a configuration also has ``block.<level>`` for each level that can be blocked
CHOICE = {choice.name: choice for choice in CHOICES}
NAMES = tuple(CHOICE)
#: what a configuration recorded before a choice existed means by its absence
ABSENT = {choice.name: choice.absent for choice in CHOICES if choice.absent is not None}

#: the structural choices' values, in the order the structures are enumerated
PARALLEL = CHOICE["parallel"].values
SEQUENTIAL_OUTER = CHOICE["sequential_outer"].values
UNROLL = CHOICE["unroll"].values
VECTOR_OUTER = CHOICE["vector_outer"].values
PAD_COPY = CHOICE["pad_copy"].values
REORDER = CHOICE["reorder"].values
LOCAL_MEMORY = CHOICE["local_memory"].values
#: pad_copy's values that copy the padded input (as read, rotated) and that read it branch-free
PAD_COPIED, PAD_ROTATED, PAD_SELECT = 1, 2, 3
#: vector_outer's values that relay out the inputs the outer level walks and those the inner level walks
RELAID, RELAID_INNER = 2, 3


def vectors_outer(vector_outer: int) -> bool:
    """Whether a 2D block's vectorised level is its outer one (vector_outer 1 and 2; 0 and 3: the inner)."""
    return vector_outer in (1, RELAID)


#: the most levels blocked at once (a 2D register block)
MAX_BLOCKED = 2
#: the widest vectors and the most partial sums a sketch's space allows
MAX_LANES = 16
#: the largest block a joined level must allow for the rows to be joined: a register block's length
MAX_JOINED_BLOCK = 16
#: the largest block ``round_up`` rounds the innermost level up to
MAX_ROUNDED_BLOCK = 16
#: the most elements ``round_up`` adds, as a share of the level's length (they are computed for nothing): a
#: quarter, so that the short rows of a network's late layers (7, 13, 14, 28 wide) can take register blocks
#: that do not divide them -- the search weighs the waste against the block's gain
MAX_ROUNDING_WASTE = 1 / 4

#: the sketch's tuning parameter of a level's block: ``block.<level>`` in a configuration
BLOCK_PARAMETER = "block_"
#: the numeric choices that are a sketch's tuning parameters under their own names
PARAMETERS = ("local_size", "vector", "partial", "chunk")


def block_key(level: str) -> str:
    """A level's block in a configuration."""
    return f"block.{level}"


def block_parameter(level: str) -> str:
    """A level's block as a sketch's tuning parameter."""
    return BLOCK_PARAMETER + level


@dataclass(frozen=True)
class Level:
    """A spatial level of a nest that reduces: the name its map binds and its length."""

    name: str
    extent: int

    @property
    def key(self) -> str:
        return block_key(self.name)

    @property
    def parameter(self) -> str:
        return block_parameter(self.name)

    @property
    def divisors(self) -> tuple[int, ...]:
        """The block sizes this level allows: its length's divisors, 1 included, smallest first."""
        return tuple(d for d in range(1, self.extent + 1) if self.extent % d == 0)


@dataclass(frozen=True)
class Structure:
    """The structural part of a configuration, each field named after its choice: the blocked levels (innermost
    first); for a numeric choice (``local_size``, ``vector``, ``partial``, ``chunk``) 1 where it is used (its value
    is then the sketch's parameter), else 0."""

    blocked: tuple[str, ...]
    parallel: int
    sequential_outer: int
    unroll: int
    local_size: int = 0
    vector: int = 0
    vector_outer: int = 0
    pad_copy: int = 0
    partial: int = 0
    reorder: int = 0
    local_memory: int = 0
    chunk: int = 0

    @property
    def viewed(self) -> "Structure":
        """The same structure reading the padding as a view (whose sketch a copy is made from)."""
        return dataclasses.replace(self, pad_copy=0)

    @property
    def shared(self) -> "Structure":
        """The structure whose parameter space this one shares: without the padding's copy, the reorder and the
        staging in local memory (which adds one constraint: the device's local memory holds it)."""
        return dataclasses.replace(self, pad_copy=0, reorder=0, local_memory=0)

    @property
    def parameters(self) -> tuple[str, ...]:
        """The route's tuning parameters of this structure's sketch, blocks first."""
        return tuple(block_parameter(n) for n in self.blocked) + tuple(p for p in PARAMETERS if getattr(self, p))


def structure_of(config, levels: tuple[Level, ...]) -> tuple[Structure, dict[str, int]]:
    """A well-formed configuration's structure and its sketch's parameter values."""
    blocked = tuple(level.name for level in reversed(levels) if config[level.key] > 1)
    values = {block_parameter(n): int(config[block_key(n)]) for n in blocked}
    values.update({p: int(config[p]) for p in PARAMETERS if config[p]})
    structure = Structure(blocked, int(config["parallel"]), int(config["sequential_outer"]), int(config["unroll"]),
                          int(config["local_size"] > 0), int(config["vector"] > 0),
                          int(config["vector_outer"]) if config["vector"] else 0, int(config["pad_copy"]),
                          int(config["partial"] > 0), int(config["reorder"]), int(config["local_memory"]),
                          int(config["chunk"] > 0))
    return structure, values


def config_of(structure: Structure, values, levels: tuple[Level, ...]) -> dict[str, int]:
    """The configuration of a structure and its sketch's parameter values."""
    config = {"parallel": structure.parallel, "sequential_outer": structure.sequential_outer,
              "unroll": structure.unroll, **{p: int(values.get(p, 0)) for p in PARAMETERS},
              "vector_outer": structure.vector_outer, "pad_copy": structure.pad_copy, "reorder": structure.reorder,
              "local_memory": structure.local_memory, "join_rows": 0, "round_up": 0}
    config = {name: config[name] for name in NAMES}  # the table's order
    for level in levels:
        config[level.key] = int(values.get(level.parameter, 1))
    return config


def describe_choices() -> str:
    """The table as text: one line per choice."""
    return "\n".join(f"{c.name:17s} {c.values if isinstance(c.values, str) else c.values}: {c.meaning} ({c.rewrite})"
                     for c in CHOICES)
