"""Cost models: a candidate's time predicted from its features (:mod:`liftpy.tuning.features`) before it runs.

A :class:`CostModel` predicts, for candidates' features, a figure that orders them as their times would (lower is
faster), and learns from measured trials. Two exist:

- :class:`AnalyticModel` needs no measurement. A candidate's time is taken as the cycles of its steps: its
  multiply-add and load instructions (in the device's vector registers) at the rates of a core's vector pipes,
  the slower of the two, and a cycle for each cache line its loads bring from the next level (a step's loads
  that move by a row or a plane wait on a line each; those that stream along a row, on one every few steps);
  on a CPU the multiply-adds stretched where too few independent accumulators leave the pipes waiting on their
  latency (unless each output's chain of updates is short enough that the core's out-of-order window holds the
  next outputs' chains too: a pooling's nine steps); more loads where the accumulators and a step's operands (the
  vectors it loads, a value broadcast) do not fit the registers (the accumulators left out, on a CPU all of
  them, loaded and stored at every update); and the time of the lines that come from memory, on a CPU waiting
  on each of them less the more streams from memory a step reads at once (a matrix's rows walked together, not
  one by one, up to the streams its prefetchers follow); spread over the compute units its work-groups keep
  busy.
  :meth:`~AnalyticModel.block_cycles` is the same count for a register block from its configuration alone (its
  step's new lines estimated), before anything is generated. Its figure orders candidates of one task; it knows
  nothing a device's measurements would teach. (A candidate featurised before the instructions were counted is
  taken as the slower of moving its global bytes and making its multiply-adds.)
- :class:`LearnedModel`: gradient-boosted trees (LightGBM: small, fast to train on a few thousand rows, and the
  model TVM's and Ansor's tuners found to rank candidates well) fitted to the logarithm of the measured times of
  every task of a device, each over its task's fastest, so that what it learns on one layer carries to the
  next; its figure is that time times the analytic model's. It needs the ``model`` extra (``pip install -e
  .[model]``); without it, or before it has seen enough trials, it predicts as the analytic model does.

:func:`io_lower_bound` is the I/O lower bound of a direct convolution (or a product), and
:func:`traffic_lower_bound` the fewest bytes a task's call can move, which ``liftpy report`` sets each trial's
traffic against.
"""

from __future__ import annotations

import math
from typing import Mapping, Protocol, Sequence

from ..codegen.memory import SCALAR_BYTES
from ..rewrite.route.choices import vectors_outer
from .features import CHOICE_NAMES, LINE_BYTES, NAMES, current

#: multiply-adds a compute unit makes per millisecond and vector lane, and global bytes it moves per
#: millisecond: nominal rates (a GHz core, a few GB/s of memory per core), only their ratio orders candidates
NOMINAL_UPDATES_PER_MS = 1.0e6
NOMINAL_BYTES_PER_MS = 4.0e6
#: a core's vector pipes: multiply-add and load instructions it starts a cycle, and a multiply-add's latency in
#: cycles -- what the cores of the last decade have (x86 since Haswell, Arm's big cores); a CPU needs
#: ``FMA_PER_CYCLE * FMA_LATENCY`` independent accumulators to keep its pipes full. Only ratios order candidates.
FMA_PER_CYCLE = 2
LOADS_PER_CYCLE = 2
FMA_LATENCY = 4
#: instructions a core keeps in flight (its reorder buffer: 200 to 600 on the x86 and Arm big cores of the last
#: decade): the independent chains of updates it overlaps are those within this many instructions
OUT_OF_ORDER_WINDOW = 320
#: cache lines a core's first-level cache takes in a cycle from the next level (64 bytes a cycle)
LINES_PER_CYCLE = 1
#: cycles a core takes for a line from memory (not a cache) at best, its share of the memory's bandwidth; and
#: on a CPU those it waits beside, shared by the streams from memory its step reads at once (a core keeps a few
#: lines of each stream in flight: a row walked alone waits on each of its lines, eight walked together once for
#: eight; :func:`~liftpy.tuning.features.program_features`' ``memory_stream_lines``)
MEMORY_LINE = 12
MEMORY_WAIT = 24
#: what a kernel's launch costs, in the figure's milliseconds
LAUNCH_MS = 1e-3
#: the vector registers a step needs beside its accumulators where its features do not say
#: (:func:`~liftpy.tuning.features.choice_features`' ``step_operands``): an input loaded, a value broadcast
STEP_OPERANDS = 2


class CostModel(Protocol):
    """Predicts a figure per candidate that orders them as their times would (lower: faster); learns from
    measured ones."""

    def predict(self, features: Sequence[Mapping[str, float]]) -> list[float]: ...

    def fit(self, features: Sequence[Mapping[str, float]], times_ms: Sequence[float],
            tasks: Sequence | None = None) -> None: ...


def io_lower_bound(updates: float, reuse: float, fast_memory: float) -> float:
    """The least elements any schedule moves between slow memory and a fast memory of ``fast_memory`` elements
    to make ``updates`` multiply-adds whose inputs each serve at most ``reuse`` of them -- Zhang et al.,
    PPoPP'21, Theorem 4.9, for a direct convolution: ``Q >= U / (4 sqrt(2 R S))`` with ``U = W_ker H_ker C_in
    W_out H_out C_out`` and ``R = W_ker H_ker / stride^2`` (a product of matrices: ``R = 1``). It holds for
    processors working in parallel, each with its own fast memory of ``S``: each one's share obeys it."""
    if updates <= 0:
        return 0.0
    return updates / (4.0 * math.sqrt(2.0 * max(reuse, 1e-9) * max(fast_memory, 1.0)))


def window_reuse(task) -> float | None:
    """The ``R`` of :func:`io_lower_bound` for a task (a :class:`~liftpy.tuning.program.ProgramTask`): 1 where
    its program slides no window (a product, a 1x1 or element-wise nest: no input meets a multiply-add twice
    through overlapping windows); ``kernelHeight kernelWidth / stride^2`` for a whole program whose sizes name
    its window (liftpy's convolutions and the example programs do); None where it cannot tell (a stage that
    slides tiles, a window named otherwise)."""
    from ..ir import Prim, walk

    program = task.load()
    slides = any(isinstance(n, Prim) and n.name == "slide" for n in walk(program.function(task.function).body))
    if not slides:
        return 1.0
    sizes = task.size_map
    if task.stage is not None or "kernelHeight" not in sizes or "kernelWidth" not in sizes:
        return None
    stride = sizes.get("stride", (1, 1))
    stride = (stride, stride) if isinstance(stride, int) else tuple(stride)
    return sizes["kernelHeight"] * sizes["kernelWidth"] / (stride[0] * stride[1])


def traffic_lower_bound(task, updates: float, device) -> float:
    """The fewest global bytes a call of ``task`` making ``updates`` multiply-adds can move on ``device`` (a
    :class:`~liftpy.device.Device`): each input read once and the output written once, or
    :func:`io_lower_bound` in floats where :func:`window_reuse` knows ``R``, its fast memory a work-item's private
    budget and a work-group's local memory, whichever is more."""
    from ..codegen.memory import footprint
    from ..typecheck import typecheck

    program = task.load()
    parts = footprint(typecheck(program, task.size_map), program.function(task.function).name)
    compulsory = sum(p.bytes for p in parts if p.role in ("input", "output"))
    reuse = window_reuse(task)
    if reuse is None:
        return float(compulsory)
    fast_memory = device.private_mem_budget + device.local_mem_size / 4
    return max(float(compulsory), 4.0 * io_lower_bound(updates, reuse, fast_memory))


class AnalyticModel:
    """Time from the features with no measurement (see the module's docstring): the slower of traffic and
    arithmetic at nominal rates, stretched by idle compute units and by private values over the budget."""

    def predict(self, features: Sequence[Mapping[str, float]]) -> list[float]:
        return [self._time(f) for f in features]

    def fit(self, features, times_ms, tasks=None) -> None:
        """Nothing to learn."""

    @staticmethod
    def block_cycles(f: Mapping[str, float], is_cpu: bool) -> float:
        """Cycles per multiply-add of a candidate's register block on a CPU or not, from its configuration's
        features alone (:func:`~liftpy.tuning.features.choice_features`, nothing generated): a step's updates
        (its vector accumulators), loads and new cache lines (:func:`_block_lines`), as :meth:`_time` counts a
        kernel's, over the multiply-adds the step makes. It knows nothing of the memory traffic, the copies or
        the parallelism: it ranks hundreds of candidates before the best of them are generated and ranked by the
        whole model."""
        accumulators = max(1.0, f["accumulators"])
        cycles = _step_cycles(accumulators, f["step_loads"], accumulators, f["accumulator_share"], is_cpu,
                              _block_lines(f), operands=_known(f.get("step_operands"), STEP_OPERANDS))
        return cycles / max(1.0, f["block_outputs"])

    @staticmethod
    def _time(f: Mapping[str, float]) -> float:
        units = max(1.0, f["compute_units"])
        busy = min(1.0, f["work_groups"] / units) if f["work_groups"] else 1.0  # units with a group to run
        if not math.isnan(f.get("update_instructions", math.nan)):
            cache_lines = f.get("cache_lines", math.nan)
            updates, accumulators = max(1.0, f["update_instructions"]), max(1.0, f.get("accumulators", 1.0))
            cycles = _step_cycles(updates, f["load_instructions"], accumulators, f.get("accumulator_share", 0.0),
                                  f["is_cpu"], 0.0 if math.isnan(cache_lines) else cache_lines,
                                  _known(f.get("step_operands"), STEP_OPERANDS),
                                  _overlapped(f.get("reduction_chain"), accumulators,
                                              1 + f["load_instructions"] / updates),
                                  _known(f.get("memory_lines"), 0.0), _known(f.get("memory_stream_lines"), 0.0))
            return cycles / NOMINAL_UPDATES_PER_MS / units / busy + LAUNCH_MS * f["kernels"]
        lanes = max(1.0, min(f["vector_width"], f["preferred_vector"]))
        arithmetic = f["reduction_updates"] / (units * lanes * NOMINAL_UPDATES_PER_MS)
        moving = (f["global_read_bytes"] + f["global_written_bytes"]) / (units * NOMINAL_BYTES_PER_MS)
        spilled = max(1.0, f["private_share"])  # what exceeds the private budget goes to slower memory
        return max(arithmetic, moving) / busy * spilled + LAUNCH_MS * f["kernels"]


def block_figures(space, configs: Sequence[Mapping[str, int]]) -> list[float]:
    """:meth:`AnalyticModel.block_cycles` of configurations of a route space on its device: a search's prefilter,
    which ranks hundreds of them before the best are generated."""
    from .features import choice_features

    device = space.device
    return [AnalyticModel.block_cycles(choice_features(space, c, device), device.is_cpu) for c in configs]


def _block_lines(f: Mapping[str, float]) -> float:
    """Cache lines a step of a two-level register block brings, from its configuration's features: the step
    moves along the reduction, so the contiguous values it loads as vectors (its vectorised level's extent) are
    new lines each step, and each value it broadcasts streams along a row, a new line every line's worth of
    steps. Without it every block that keeps the multiply-add pipes busy ties, though one loading 4 vectors a
    step for 2 broadcasts brings twice the lines per multiply-add of one loading 4 for 4 (the whole model,
    which counts them in the generated kernel, ranks it behind). None for a one-level block or a block kept
    in memory (no register holds it)."""
    if f["blocked_levels"] < 2 or f["accumulator_share"] <= 0:
        return 0.0
    vectorised, broadcast = ((f["block_outer"], f["block_inner"]) if vectors_outer(f["vector_outer"])
                             else (f["block_inner"], f["block_outer"]))
    return math.ceil(vectorised * SCALAR_BYTES / LINE_BYTES) + broadcast * SCALAR_BYTES / LINE_BYTES


def _step_cycles(updates: float, loads: float, accumulators: float, share: float, is_cpu: float,
                 cache_lines: float = 0.0, operands: float = STEP_OPERANDS, overlapped: float = 1.0,
                 memory_lines: float = 0.0, memory_stream_lines: float = 0.0) -> float:
    """Cycles of ``updates`` multiply-add and ``loads`` load instructions into ``accumulators`` vector
    accumulators (``share``: of the device's vector registers) with ``operands`` registers of a step's values
    beside them, and ``cache_lines`` new lines: the slower of the pipes, a cycle a new line; the accumulators
    that do not fit the registers beside the operands loaded and stored at every update -- on a CPU all of them
    once any does not (the C compiler's spills in the inner loop cost about that, not only the values past the
    registers; a GPU's registers per work-item are not known to that precision). On a CPU the multiply-adds
    wait on their latency where too few accumulators -- ``overlapped`` times as many where the core runs several
    outputs' chains at once (:func:`_overlapped`) -- leave the pipes idle (the loads do not wait on them). Then
    ``memory_lines`` from memory (:data:`MEMORY_LINE` each), on a CPU with :data:`MEMORY_WAIT` for each of
    ``memory_stream_lines`` (those lines over the streams of their step); a GPU hides the waits behind its other
    work-items. Added, not overlapped: where memory's time is most of a kernel's, its instructions still order
    candidates that read memory alike."""
    registers = accumulators / share if share > 0 else math.inf
    spilled = min(accumulators, max(0.0, accumulators + operands - registers))
    if spilled and is_cpu:
        spilled = accumulators
    loads = loads + 2 * updates * spilled / accumulators
    waiting = max(1.0, FMA_PER_CYCLE * FMA_LATENCY / (accumulators * overlapped)) if is_cpu else 1.0
    pipes = max(updates / FMA_PER_CYCLE * waiting, loads / LOADS_PER_CYCLE) + cache_lines / LINES_PER_CYCLE
    return pipes + MEMORY_LINE * memory_lines + (MEMORY_WAIT * memory_stream_lines if is_cpu else 0.0)


def _overlapped(chain, accumulators: float, instructions_per_update: float) -> float:
    """How many blocks' chains of updates a core runs at once: those within its out-of-order window, where a
    chain of ``chain`` updates into each of ``accumulators`` spans ``chain * accumulators *
    instructions_per_update`` instructions (1 where the chain is not known, or longer than the window)."""
    chain = _known(chain, math.inf)
    return max(1.0, OUT_OF_ORDER_WINDOW / (max(1.0, chain) * accumulators * instructions_per_update))


def _known(value, otherwise: float) -> float:
    """``value``, unless a trial featurised before it existed lacks it (None or NaN)."""
    return otherwise if value is None or (isinstance(value, float) and math.isnan(value)) else value


class LearnedModel:
    """Gradient-boosted trees on the device's measured trials (see the module's docstring); the analytic model
    until ``least`` trials have been seen, or where LightGBM is not installed. Its figure is the trees' time
    (over the task's fastest) times the analytic model's: the trees learn from a few tasks, and the analytic
    figure keeps a candidate unlike any of theirs where the formula puts it (their first picks on a held-out task
    are nearer its best than the trees' alone: ``benchmarks/results/cost-model-loto-*``)."""

    def __init__(self, least: int = 24, seed: int = 0):
        self.least, self.seed = least, seed
        self.fallback = AnalyticModel()
        self._booster = None

    @staticmethod
    def available() -> bool:
        try:
            import lightgbm  # noqa: F401
        except ImportError:
            return False
        return True

    @property
    def trained(self) -> bool:
        return self._booster is not None

    def fit(self, features: Sequence[Mapping[str, float]], times_ms: Sequence[float],
            tasks: Sequence | None = None) -> None:
        """Fit to these trials (all of a device's, each call afresh: a few thousand rows take a second). With
        ``tasks`` (each trial's task), to each trial's time over its task's fastest: a search ranks one task's
        candidates, and a task's scale -- its size, the device's speed in its minutes -- is then no part of what
        the trees must learn."""
        tasks = list(tasks) if tasks is not None else [None] * len(features)
        rows = [(f, t, k) for f, t, k in zip(features, times_ms, tasks) if t is not None and t > 0 and f]
        if len(rows) < self.least or not self.available():
            return
        import lightgbm
        import numpy as np

        fastest: dict = {}
        for _, t, k in rows:
            fastest[k] = min(t, fastest.get(k, t))
        x = np.array([_row(f) for f, _, _ in rows])
        y = np.log(np.array([t / fastest[k] if k is not None else t for _, t, k in rows]))
        params = {"objective": "regression", "learning_rate": 0.1, "num_leaves": 15, "min_data_in_leaf": 3,
                  "feature_fraction": 0.9, "bagging_fraction": 0.9, "bagging_freq": 1, "seed": self.seed,
                  "num_threads": 1, "deterministic": True, "verbose": -1}
        self._booster = lightgbm.train(params, lightgbm.Dataset(x, y, feature_name=list(_COLUMNS)),
                                       num_boost_round=150)

    def predict(self, features: Sequence[Mapping[str, float]]) -> list[float]:
        if self._booster is None:
            return self.fallback.predict(features)
        import numpy as np

        learned = np.exp(self._booster.predict(np.array([_row(f) for f in features])))
        return [float(v) for v in learned * np.array(self.fallback.predict(features))]


#: the columns a learned model reads: every feature (a choice's missing from a trial featurised before they
#: were), counts as their logarithms (sizes differ by orders of magnitude between tasks), and the analytic
#: model's figure, which carries what the formula knows
_COUNTS = {"global_read_bytes", "global_written_bytes", "reduction_updates", "private_stores", "local_stores",
           "global_stores", "work_items", "work_groups", "group_size", "private_bytes", "local_bytes",
           "reduction_chain", "stream_lines", "memory_lines", "memory_stream_lines"}
_COLUMNS = (*NAMES, *CHOICE_NAMES, "analytic")


def _row(f: Mapping[str, float]) -> list[float]:
    values = [math.log1p(f.get(n, math.nan)) if n in _COUNTS else f.get(n, math.nan) for n in (*NAMES, *CHOICE_NAMES)]
    return values + [math.log(AnalyticModel._time(f))]


class DeviceModel:
    """A device's model as a tuning uses it: trained on the device's trials (every task's, from the database)
    and on each result as it comes (:meth:`learn`), fitted again before a prediction when results came since."""

    def __init__(self, rows: Sequence[tuple[Mapping[str, float], float, object]] = (), model: CostModel | None = None):
        self.model = model or LearnedModel()
        self.rows = list(rows)  # (features, time in ms, its task)
        self._fitted = -1

    @classmethod
    def of(cls, database, device_name: str) -> "DeviceModel":
        """The device's model, to be trained on every correct trial of the device in ``database`` (a
        :class:`~liftpy.tuning.db.TuningDB`, or None) that carries its features."""
        return cls.of_trials([] if database is None else database.trials(device=device_name, status="ok"))

    @classmethod
    def of_trials(cls, trials) -> "DeviceModel":
        """The model to be trained on those of a device's correct ``trials`` that carry their features, read as
        this liftpy reads them (:func:`~.features.current`)."""
        return cls([(t.features, t.time_ms, t.task_key) for t in trials if current(t.features) and t.time_ms])

    def learn(self, features: Mapping[str, float], time_ms: float, task=None) -> None:
        self.rows.append((features, time_ms, task))

    def predict(self, features: Sequence[Mapping[str, float]]) -> list[float]:
        if self._fitted != len(self.rows):
            self.model.fit([f for f, _, _ in self.rows], [t for _, t, _ in self.rows], [k for _, _, k in self.rows])
            self._fitted = len(self.rows)
        return self.model.predict(features)


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-a of two orderings of the same items: +1 the same order, -1 reversed."""
    n, score = len(a), 0
    for i in range(n):
        for j in range(i + 1, n):
            score += (a[i] - a[j]) * (b[i] - b[j]) > 0
            score -= (a[i] - a[j]) * (b[i] - b[j]) < 0
    return score / (n * (n - 1) / 2) if n > 1 else 0.0


def top_recall(predicted: Sequence[float], measured: Sequence[float], true_top: int = 5,
               predicted_top: int = 20) -> float:
    """The share of the ``true_top`` fastest measured that are among the ``predicted_top`` predicted fastest."""
    best = set(sorted(range(len(measured)), key=measured.__getitem__)[:true_top])
    guessed = set(sorted(range(len(predicted)), key=predicted.__getitem__)[:predicted_top])
    return len(best & guessed) / max(1, len(best))


__all__ = ["CostModel", "AnalyticModel", "LearnedModel", "DeviceModel", "block_figures", "io_lower_bound",
           "window_reuse", "traffic_lower_bound", "kendall_tau", "top_recall"]
