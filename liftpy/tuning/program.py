"""A tuning task -- a program file at given sizes -- and the reference its trials are checked against.

A :class:`ProgramTask`'s key in the database is the program's structure (its text as the printer writes it,
hashed), the sizes and what a configuration means (``ROUTE_VERSION``), so that renaming the file or
reformatting it keeps its trials; :meth:`ProgramTask.portable` makes it carry its text, for a builder or a
runner on another machine. Every trial's output is compared with the *naive lowering*'s (:func:`naive_program`:
no choice made, every reduction a sequential loop) run on the device on the same inputs -- as loopy's
``auto_test_vs_ref`` does, the interpreter being too slow at real sizes. The naive lowering is itself checked
against the interpreter, at reduced sizes, before a runner uses it (:func:`reference_executable`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Mapping

import numpy as np

from ..errors import InputError, InternalError, LiftError
from .tolerance import magnitude_program, rounding_depth, tolerance


#: the ``algorithm`` of a program's trials in the database: lowered by the automatic route, every choice in the
#: configuration (older databases also hold the retired hand-written pipelines' names there)
ROUTE = "route"
#: the ``algorithm`` of a staged task's trial of its stages' bests joined, timed whole: the stages, each timed
#: alone with its data in the caches, can take longer run one after another (:meth:`TuningDB.best` reads it)
JOINED = "joined"


@dataclass(frozen=True)
class ProgramTask:
    """A program file, the function to tune, its sizes, and the inputs that stay fixed across calls (a
    layer's weights: uploaded once, kernels that read only them hoisted); with ``stage``, one stage of the
    function (:mod:`liftpy.rewrite.stages`), tuned on its own."""

    path: str
    sizes: tuple[tuple[str, object], ...]
    function: str | None = None
    constants: tuple[str, ...] = ()
    stage: str | None = None
    #: the program's text, where the task travels to a machine without its file (:meth:`portable`); the task
    #: is the same task with or without it
    text: str | None = dataclasses.field(default=None, compare=False, repr=False)
    #: scalar inputs a check gives as they are, not drawn (a network's clamp bounds: drawn, a low above the high
    #: would make the output constant and the check blind); the task is the same task with any
    values: tuple[tuple[str, float], ...] = dataclasses.field(default=(), compare=False, repr=False)
    #: timed as a network's step: each call with the device's caches holding other data (the runner's
    #: ``Timing.cold``), not back to back; its trials are kept apart from the warm task's
    cold: bool = False

    @classmethod
    def make(cls, path, sizes: Mapping[str, object], function: str | None = None,
             constants=()) -> "ProgramTask":
        """A task, checked: the file parses and type-checks at the sizes, every size is given, and the
        constants are inputs of the function."""
        path = str(path)
        if not Path(path).is_file():
            raise InputError(f"{path}: no such program file")
        task = cls(path, tuple(sorted(dict(sizes).items())), function, tuple(constants))
        program = task.load()
        fun = program.function(function)
        names = {p.name for p in fun.data_params}
        unknown = [c for c in task.constants if c not in names]
        if unknown:
            raise InputError(f"{', '.join(unknown)}: not an input of {fun.name} (its inputs: {', '.join(sorted(names))})")
        from ..interpreter import input_shapes

        input_shapes(program, task.size_map, function)  # every size given: else a clear error now (nothing drawn)
        return task

    def check_inputs(self, seed: int, sizes: Mapping[str, object] | None = None) -> dict[str, np.ndarray]:
        """The inputs a check runs on at ``sizes`` (default: the task's): standard normal, drawn at ``seed``,
        but for the scalars :attr:`values` gives."""
        from ..interpreter import random_inputs

        program = self.load()
        names = {p.name for p in program.function(self.function).data_params}
        given = {name: np.float32(value) for name, value in self.values if name in names}
        return random_inputs(program, self.size_map if sizes is None else sizes, seed, self.function, given)

    def check_memory(self, device=None) -> None:
        """Refuse (:class:`~liftpy.errors.ResourceError`) a task whose trials cannot fit, before any is run: the
        host holds a trial's inputs (drawn in double precision) and two outputs (the trial's and the reference's),
        and the device each input and the output, every one within its largest allocation."""
        from ..codegen.memory import footprint
        from ..device import Device
        from ..interpreter import check_host_memory, drawing_needs
        from ..runtime import check_device_memory, get_device
        from ..typecheck import typecheck

        fun = self.load().function(self.function)
        parts = footprint(typecheck(self.load(), self.size_map), fun.name)
        inputs = [(p.name, p.bytes) for p in parts if p.role == "input"]
        output = next(p.bytes for p in parts if p.role == "output")
        check_host_memory(f"tuning {fun.name}", self.size_map,
                          drawing_needs(inputs) + [("output", output), ("the reference's output", output)])
        facts = device if isinstance(device, Device) else get_device(device)  # a runner's facts, or a live one
        check_device_memory(f"tuning {fun.name}", self.size_map, inputs + [("output", output)], facts)

    def load(self):
        """The program tuned: the file's (or the text's it carries), or the stage's program."""
        if self.stage is None:
            return _load(self.path, self.text)
        return next(s.program for s in self._stages if s.name == self.stage)

    def portable(self) -> "ProgramTask":
        """The task carrying its program's text: what a job sends to a runner or a builder on another machine,
        which needs liftpy and nothing else."""
        if self.text is not None:
            return self
        try:
            text = Path(self.path).read_text(encoding="utf-8")
        except OSError as e:
            raise InputError(f"{self.path}: cannot read the program ({e.strerror or e})") from None
        return dataclasses.replace(self, text=text)

    @property
    def _stages(self):
        return _stages(self.path, self.function, self.constants, self.text)

    def stages(self) -> tuple["ProgramTask", ...]:
        """A task for each stage of the function, in the order they run (each with the constants it reads:
        inputs that stay fixed and earlier stages that read only such inputs); one task, this one, where the
        function is one stage."""
        stages = self._stages
        if self.stage is not None or len(stages) == 1:
            return (self,)
        fixed = set(self.constants) | {s.name for s in stages if s.hoisted}
        return tuple(dataclasses.replace(self, stage=s.name, constants=tuple(n for n in s.reads if n in fixed))
                     for s in stages)

    @property
    def hoisted(self) -> bool:
        """Whether this stage reads only inputs that stay fixed (it runs once, when the program is prepared)."""
        return self.stage is not None and next(s.hoisted for s in self._stages if s.name == self.stage)

    @property
    def size_map(self) -> dict[str, object]:
        return dict(self.sizes)

    @cached_property
    def key(self) -> str:
        from ..pretty import pretty

        text = pretty(self.load())
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        sizes = " ".join(f"{k}={_size_text(v)}" for k, v in self.sizes)
        from ..rewrite.route import ROUTE_VERSION

        stage = f" stage {self.stage}" if self.stage is not None else ""
        cold = " cold" if self.cold else ""
        return (f"program {digest} {self.load().function(self.function).name}{stage} {sizes} "
                f"route{ROUTE_VERSION}{cold}")

    @property
    def label(self) -> str:
        return self.path

    @property
    def name(self) -> str:
        return Path(self.path).stem

    def complete(self, config: dict) -> dict:
        """The route's choices a configuration lacks (recorded before they existed) as their absence means."""
        from ..rewrite.route import RouteSpace

        return {**RouteSpace.ABSENT, **config}

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={_size_text(v)}" for k, v in self.sizes)
        stage = f", stage {self.stage}" if self.stage is not None else ""
        cold = ", timed cold" if self.cold else ""
        return f"{self.path} ({self.load().function(self.function).name}{stage}{cold}) at {sizes}"

    def space(self, device=None):
        """The automatic route's space for this program on ``device``."""
        from ..rewrite.route import RouteSpace

        return RouteSpace(self.load(), self.size_map, device, self.function)


def _size_text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


@lru_cache(maxsize=16)
def _load(path: str, text: str | None = None):
    from .. import load, parse

    return load(path) if text is None else parse(text, path)


@lru_cache(maxsize=16)
def _stages(path: str, function: str | None, constants: tuple[str, ...], text: str | None = None):
    from ..rewrite.stages import split_stages

    return split_stages(_load(path, text), function, constants)


# ------------------------------------------------------------------------------------------------ the reference
def naive_program(task: ProgramTask):
    """The naive lowering (the reference every trial is compared with): no choice made, its levels of one
    element at the task's sizes run sequentially so that two levels that have more run in parallel (a naive
    kernel run as one work-item took most of a trial's time: benchmarks/results/notes-tuning.md)."""
    return naive_lowering(task.load(), task.size_map, task.function, task.path)


def naive_lowering(program, sizes: Mapping[str, object], function: str | None, where: str):
    """:func:`naive_program`'s lowering of any program (a task's, or its magnitude program's:
    :mod:`liftpy.tuning.tolerance`); ``where`` names it in the error where it cannot be lowered."""
    from ..rewrite.route import unit_levels
    from ..rewrite.strategies import lowering

    program = program.only(function)
    result = lowering(unit_levels=unit_levels(program, sizes, function))(program)
    if not result:
        raise InputError(f"{where}: the naive lowering cannot lower this program ({result.reason})")
    return result.program


def reduced_sizes(task: ProgramTask, target: int = 6) -> dict[str, object]:
    """The task's sizes, each integer size shrunk towards ``target`` as far as the program still type-checks and
    keeps its levels of one element (:func:`~liftpy.rewrite.route.unit_levels`): where the naive lowering --
    made for the task's sizes, those levels sequential -- is checked against the interpreter in seconds. (A
    depthwise layer's groups shrunk to fewer made its one kernel a group several, a sequential loop around a
    parallel map that the code generator refuses.)"""
    from ..rewrite.route import unit_levels
    from ..typecheck import typecheck

    program = task.load()
    sizes = task.size_map
    units = unit_levels(program.only(task.function), sizes, task.function)
    for name, value in task.sizes:
        if not isinstance(value, int) or value <= target:
            continue
        for smaller in sorted({target, value // 4, value // 2}):
            if not 0 < smaller < value:
                continue
            trial = {**sizes, name: smaller}
            try:
                typecheck(program, trial)
            except LiftError:  # a size the program's constraints refuse: try the next
                continue
            if unit_levels(program.only(task.function), trial, task.function) != units:
                continue
            sizes = trial
            break
    return sizes


def kinds_differ(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Where two arrays of one shape hold values of different kinds -- the rule of every check against a
    reference: NaN and infinity are data, so a NaN matches a NaN, an infinity the same-signed infinity, a
    number a number (whose difference the check's tolerance judges); anything else is a wrong result."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    same = (np.isfinite(got) & np.isfinite(expected)) | (np.isnan(got) & np.isnan(expected)) \
        | (np.isinf(got) & (got == expected))
    return ~same


def close_to(got: np.ndarray, expected: np.ndarray, tolerance: np.ndarray | None = None) -> float:
    """The largest difference in units of the tolerance, the values compared by kind first
    (:func:`kinds_differ`: a kind that differs, such as a never-written NaN where a number is expected, is
    inf). ``tolerance``: each element's, from the program's error bound (:mod:`liftpy.tuning.tolerance`);
    without it (a program with no magnitude program), float32 rounding at the output's scale, the scale the
    finite values'."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    if got.shape != expected.shape or kinds_differ(got, expected).any():
        return float("inf")
    finite = np.isfinite(expected)
    scale = max(1.0, float(np.abs(expected[finite]).max(initial=0.0)))
    at_scale = 1e-4 * np.abs(expected) + 1e-5 * scale
    if tolerance is None:
        tolerance = at_scale
    else:  # a magnitude that overflowed bounds nothing: that element is held at the output's scale
        tolerance = np.asarray(tolerance, np.float64).reshape(expected.shape)
        tolerance = np.where(np.isfinite(tolerance), tolerance, at_scale)
    difference = np.abs(got[finite] - expected[finite])
    return float(np.max(difference / tolerance[finite], initial=0.0))


def check_reference(task: ProgramTask, device=None, seed: int = 0) -> dict[str, object]:
    """The naive lowering at reduced sizes against the interpreter, at the program's error bound (the
    interpreter computing the magnitudes), and so the magnitude program's, whose elements are their own
    magnitudes; the sizes they were checked at. A difference is a bug in liftpy's code generator
    (InternalError): no trial may be compared with a wrong reference, nor at a wrong tolerance."""
    from .. import compile as compile_program
    from ..interpreter import evaluate

    sizes = reduced_sizes(task)
    program = task.load()
    inputs = task.check_inputs(seed, sizes)
    expected = evaluate(program, inputs, sizes, function=task.function)
    got = compile_program(naive_program(task), sizes, device, task.function).run(inputs, poison=True).output
    checks = [("", got, expected, None)]
    magnitude = _magnitude(task)
    if magnitude is not None:
        written, lowered = magnitude
        magnitudes = evaluate(written, _absolute(inputs), sizes, function=task.function)
        bound = tolerance(magnitudes, rounding_depth(program, sizes, task.function))
        magnitudes_got = compile_program(lowered, sizes, device, task.function).run(_absolute(inputs), poison=True)
        checks = [("", got, expected, bound), ("'s magnitude program", magnitudes_got.output, magnitudes, bound)]
    for what, got, expected, bound in checks:
        error = close_to(got, expected, bound)
        if error > 1:
            raise InternalError(f"the naive lowering of {task.path}{what} disagrees with the interpreter at {sizes} "
                                f"(largest error {error:.3g} times the tolerance): no trial can be checked against it")
    return sizes


# ------------------------------------------------------------------------------------------------ a trial
@dataclass(frozen=True)
class Reference:
    """What a trial is compared with, prepared on a device: the naive lowering, and the naive lowering of the
    program's magnitude program with its rounding depth (:mod:`liftpy.tuning.tolerance`; None where the
    program has none)."""

    naive: object
    magnitude: object | None
    depth: int

    def run(self, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
        """The expected output on ``inputs`` and each element's tolerance (None: at the output's scale)."""
        expected = self.naive.run(inputs, poison=True).output
        if self.magnitude is None:
            return expected, None
        magnitudes = self.magnitude.run(_absolute(inputs), poison=True).output
        return expected, tolerance(magnitudes, self.depth)


@lru_cache(maxsize=4)
def reference_executable(task: ProgramTask, device) -> Reference:
    """:class:`Reference` of ``task`` prepared on ``device``, once per process (a runner's worker), after the
    naive lowering is checked against the interpreter (:func:`check_reference`)."""
    from .. import compile as compile_program

    check_reference(task, device)
    naive = compile_program(naive_program(task), task.size_map, device, task.function).prepare()
    magnitude = _magnitude(task)
    if magnitude is None:
        return Reference(naive, None, 0)
    return Reference(naive, compile_program(magnitude[1], task.size_map, device, task.function).prepare(),
                     rounding_depth(task.load(), task.size_map, task.function))


@lru_cache(maxsize=16)
def _magnitude(task: ProgramTask):
    """The task's magnitude program (:mod:`liftpy.tuning.tolerance`) as written and its naive lowering (made at
    the task's sizes, as :func:`naive_program`'s), for the check at reduced sizes and the trials; None where the
    program has none."""
    written = magnitude_program(task.load(), task.function)
    if written is None:
        return None
    return written, naive_lowering(written, task.size_map, task.function, f"{task.path} (its magnitude program)")


def _absolute(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: np.abs(value) for name, value in inputs.items()}


def source_hashes(sources: Mapping[str, str]) -> dict[str, str]:
    """Kernel name -> sha256 of its OpenCL source: what a trial records of the kernels it ran."""
    return {name: hashlib.sha256(source.encode()).hexdigest() for name, source in sources.items()}


__all__ = ["ROUTE", "JOINED", "ProgramTask", "Reference", "check_reference", "close_to", "naive_lowering",
           "naive_program", "reduced_sizes", "reference_executable", "source_hashes"]
