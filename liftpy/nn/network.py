"""A network: operator calls (:class:`liftpy.nn.operators.Step`) in order on one device, its activations kept in
device buffers between them.

A :class:`Network` is what a front end (:mod:`liftpy.onnx`) makes: steps, the views between tensors (a flatten
or a reshape reads the same memory), the network's inputs and outputs. :meth:`Network.prepare` compiles each
step's program -- the tuning database's best for its task on the device, else its device's cost model's guess --
and plans the device memory once: each activation gets a buffer, which a later activation reuses once the last
step reading it has run (:class:`MemoryPlan`); a concatenation of one image runs no kernel where the device
aligns its pieces: their steps write into regions of its buffer (:meth:`Network.concat_parts`). A call copies
the inputs in, launches every kernel without waiting, and copies the outputs out. The first call is checked
step by step: every activation in a buffer of its own, filled with NaN first, each step's output compared with
its float64 reference on the inputs the device read (:meth:`Step.expected`).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from ..errors import InputError, LiftError
from .operators import DIRECT, WINOGRAD, Step

SETTLE_S = 0.3
"""Seconds of calls before :meth:`PreparedNetwork.timed` times any: the checked first call's references leave
OpenBLAS's threads spinning on the cores for about a tenth of a second, which doubled the first calls' times."""


@dataclass(frozen=True)
class Network:
    """Steps in an order that runs (each reads tensors written before it), ``inputs`` (name -> shape),
    ``outputs`` (names), ``views`` (a tensor -> the tensor whose memory it reads, as a flatten does), ``shapes``
    of every tensor, and ``notes``: what the front end fused, and what it could not."""

    name: str
    inputs: Mapping[str, tuple[int, ...]]
    outputs: tuple[str, ...]
    steps: tuple[Step, ...]
    views: Mapping[str, str]
    shapes: Mapping[str, tuple[int, ...]]
    notes: tuple[str, ...] = ()

    def root(self, tensor: str) -> str:
        """The tensor whose memory ``tensor`` is (itself unless it is a view)."""
        while tensor in self.views:
            tensor = self.views[tensor]
        return tensor

    def concat_parts(self, align: int = 4) -> dict[str, tuple[str, int]]:
        """The tensors a concatenation's producers write straight into its output: a piece (its root) -> (the
        concatenation's output, byte offset). A concatenation of the channels of one image (nothing before the
        channels) has its pieces whole and in order in its output; each piece must be a step's output no other
        concatenation takes, not the network's input or output, and start at a multiple of ``align`` bytes (the
        device's alignment of a sub-buffer). A concatenation whose pieces do not all qualify keeps its kernel."""
        parts: dict[str, tuple[str, int]] = {}
        ends = {self.root(t) for t in (*self.inputs, *self.outputs)}
        for step in self.steps:
            if step.function != "concat2" or step.shape[0] != 1:
                continue
            pieces = [self.root(tensor) for _, tensor in step.reads]
            offsets = [0, 4 * int(np.prod(self.shapes[pieces[0]]))]
            if len(set(pieces)) == len(pieces) and all(
                    piece not in parts and piece not in ends and offset % align == 0
                    for piece, offset in zip(pieces, offsets)):
                parts.update({piece: (step.output, offset) for piece, offset in zip(pieces, offsets)})
        return parts

    def elided(self, parts: Mapping[str, tuple[str, int]]) -> frozenset[int]:
        """The steps that run no kernel with these ``parts``: concatenations their pieces' producers write."""
        return frozenset(index for index, step in enumerate(self.steps)
                         if step.reads and all(parts.get(self.root(t), ("",))[0] == step.output for _, t in step.reads))

    def tasks(self) -> list[tuple[object, int]]:
        """The distinct steps' tasks (identical operators at identical sizes are one) and how often each runs a
        call."""
        return list(Counter(step.task for step in self.steps).items())

    def groups(self, elided: frozenset[int] = frozenset()) -> list[tuple[tuple[tuple[str, object], ...], int]]:
        """For each distinct step, its programs -- (algorithm, task), the direct one first -- and how often it
        runs a call (the ``elided`` steps not counted, a task only they have left out): what :meth:`tune` gives
        one budget."""
        first, counts = {}, Counter()
        for index, step in enumerate(self.steps):
            first.setdefault(step.task, step)
            counts[step.task] += index not in elided
        return [(first[task].programs, counts[task]) for task, _ in self.tasks() if counts[task]]

    def in_place(self, device) -> tuple[dict[str, tuple[str, int]], frozenset[int]]:
        """What is written in place on an OpenCL ``device`` (its sub-buffers' alignment): the concatenations'
        pieces (:meth:`concat_parts`) and the steps that then run no kernel (:meth:`elided`)."""
        parts = self.concat_parts(_alignment(device))
        return parts, self.elided(parts)

    def tuning_groups(self, device=None, here: bool = True) -> list[tuple[tuple[tuple[str, object], ...], int]]:
        """The :meth:`groups` a tuning on ``device`` gives its budget: those of the steps that run a kernel there
        (a concatenation its pieces write in place runs none). Not ``here`` (runners elsewhere: no device on this
        machine says what is written in place), every step's."""
        from ..runtime import get_device

        return self.groups(self.in_place(get_device(device))[1] if here else frozenset())

    def describe(self) -> str:
        """A few lines: the inputs and outputs, the steps by operator, the distinct tasks, the notes."""
        ops = Counter(step.op for step in self.steps)
        programs = sum(len(programs) for programs, _ in self.groups())
        lines = [f"{self.name}: inputs {_shapes_text({n: s for n, s in self.inputs.items()})}; outputs "
                 f"{_shapes_text({n: self.shapes[n] for n in self.outputs})}",
                 f"{len(self.steps)} steps ({len(self.tasks())} distinct tasks"
                 + (f", {programs} programs with Winograd's" if programs > len(self.tasks()) else "") + "): "
                 + ", ".join(f"{n} {op}" for op, n in ops.most_common())]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)

    # ------------------------------------------------------------------------------------------ running
    def prepare(self, device=None, db=None, check: bool = True) -> "PreparedNetwork":
        """The network compiled for ``device``: each step's program with the best configuration the tuning
        database at ``db`` (default: the user's) holds for its task, else the cost model's guess."""
        return PreparedNetwork(self, device, db, check)

    def __call__(self, x) -> np.ndarray:
        """Run a network of one input and one output on an array (numpy in, numpy out), prepared on the
        default device at the first call."""
        if len(self.inputs) != 1 or len(self.outputs) != 1:
            raise InputError(f"{self.name} has inputs {', '.join(self.inputs)} and outputs "
                             f"{', '.join(self.outputs)}: call run({{name: array}})")
        return self.run({next(iter(self.inputs)): x})[self.outputs[0]]

    def run(self, feeds: Mapping[str, object]) -> dict[str, np.ndarray]:
        """Run on ``feeds`` (input name -> array); every output by name. Prepared at the first call on the
        default device, with the database :meth:`tune` last wrote (else the user's)."""
        prepared = self.__dict__.get("_prepared")
        if prepared is None:
            prepared = self.prepare(db=self.__dict__.get("_tuned_in"))
            object.__setattr__(self, "_prepared", prepared)
        return prepared.run(feeds)

    # ------------------------------------------------------------------------------------------ tuning
    def tune(self, trials: int = 100, db="tuning.sqlite", device=None, seed: int = 0, **options) -> list:
        """Tune the network's distinct steps' programs (:meth:`tuning_groups`) with one budget of ``trials`` trials
        in all, which the task scheduler gives where the network's time gains the most (each weighted by how often
        it runs; ``options``: :class:`liftpy.tuning.Tuner`'s). Each step's fastest program's best; the next call
        (and :meth:`prepare` with the same ``db``) runs them. A step with no correct trial is None, said on
        stderr: it keeps the cost model's guess (checked at its first call) and the other steps their bests."""
        from ..tuning import tune_groups

        groups = self.tuning_groups(device, here=options.get("runner") is None)
        if trials < len(groups):
            raise InputError(f"{self.name} has {len(groups)} distinct tasks: tune it with at least that many trials")
        bests = tune_groups([list(programs) for programs, _ in groups], trials, db, device, seed,
                            weights=[count for _, count in groups], every_group=False, **options)
        self.__dict__.pop("_prepared", None)
        object.__setattr__(self, "_tuned_in", db)
        return bests


def _shapes_text(shapes: Mapping[str, Sequence[int]]) -> str:
    return ", ".join(f"{name} {'x'.join(map(str, shape))}" for name, shape in shapes.items())


# ------------------------------------------------------------------------------------------------ memory
@dataclass(frozen=True)
class MemoryPlan:
    """Which device buffer holds each activation (by its root tensor), and each buffer's bytes. With reuse, a
    buffer no step reads any more holds the next activation of its size (the queue runs in order, so every
    kernel that read it has run before the next writes); the network's outputs keep theirs. ``parts``
    (:meth:`Network.concat_parts`) lie inside another tensor's buffer, which is taken when the first is
    written and kept until the last reader of any of them has run."""

    slot: Mapping[str, int]
    sizes: tuple[int, ...]
    parts: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    @staticmethod
    def home(network: Network, tensor: str, parts: Mapping[str, tuple[str, int]] | None) -> tuple[str, int]:
        """The tensor whose buffer holds ``tensor``, and the byte offset there."""
        root, offset = network.root(tensor), 0
        while parts and root in parts:
            whole, at = parts[root]
            root, offset = network.root(whole), offset + at
        return root, offset

    def place(self, network: Network, tensor: str) -> tuple[int, int, int]:
        """A tensor's buffer, byte offset and bytes."""
        root, offset = self.home(network, tensor, self.parts)
        return self.slot[root], offset, 4 * int(np.prod(network.shapes[tensor]))

    def whole(self, slot: int, offset: int, size: int) -> bool:
        """Whether a place (:meth:`place`) is its buffer whole, not a region of it."""
        return offset == 0 and size == self.sizes[slot]

    @classmethod
    def make(cls, network: Network, reuse: bool = True,
             parts: Mapping[str, tuple[str, int]] | None = None) -> "MemoryPlan":
        parts = dict(parts or {})
        home = lambda tensor: cls.home(network, tensor, parts)[0]  # noqa: E731 - the tensor owning the buffer
        nbytes = {name: 4 * int(np.prod(shape)) for name, shape in network.shapes.items()}
        last_read: dict[str, int] = {}
        for index, step in enumerate(network.steps):
            for _, tensor in step.reads:
                last_read[home(tensor)] = index
        kept = {home(t) for t in network.outputs} | {home(t) for t in network.inputs}
        slot: dict[str, int] = {}
        sizes: list[int] = []
        free: dict[int, list[int]] = {}
        for name in network.inputs:
            slot[name] = len(sizes)
            sizes.append(nbytes[name])
        for index, step in enumerate(network.steps):
            out = home(step.output)
            if out not in slot:  # a concatenation's buffer is taken when its first piece is written
                want = nbytes[out]
                if reuse and free.get(want):
                    slot[out] = free[want].pop()
                else:
                    slot[out] = len(sizes)
                    sizes.append(want)
            if not reuse:
                continue
            for _, tensor in step.reads:  # released after this step: its output is never its input's buffer
                root = home(tensor)
                if last_read.get(root) == index and root not in kept:
                    free.setdefault(sizes[slot[root]], []).append(slot[root])
                    last_read.pop(root)
        return cls(slot, tuple(sizes), parts)


class GuessProgress:
    """Says on stderr that a network's untuned steps run their cost model's guesses and, once the guessing takes a
    while, how far it is: a guess is made once a task and device (then kept in liftpy's cache), 15-60 s on 2
    cores, and a network of untuned steps would otherwise be prepared for many minutes in silence."""

    #: seconds of preparing untuned steps the progress says nothing of (their guesses were in the cache)
    QUIET_S = 2.0

    def __init__(self, name: str, total: int, device_name: str):
        self.total, self.done, self.spent = total, 0, 0.0
        if total:
            print(f"liftpy: {name}: {total} distinct steps have no tuned configuration on {device_name}; each "
                  f"runs its cost model's guess, made once a task (15-60 s on 2 cores, then kept in liftpy's "
                  f"cache). Network.tune measures them instead.", file=sys.stderr)

    def prepared(self, seconds: float) -> None:
        """One more distinct untuned step prepared (its guess made and its program built), in ``seconds``."""
        self.done += 1
        self.spent += seconds
        if self.spent >= self.QUIET_S:
            left = self.spent / self.done * (self.total - self.done)
            print(f"\r  untuned steps prepared {self.done}/{self.total} in {self.spent:.0f} s, about {left:.0f} s "
                  f"left   ", end="\n" if self.done == self.total else "", file=sys.stderr, flush=True)


class PreparedNetwork:
    """A network compiled for a device, its weights uploaded and its memory planned: ``run(feeds)``.
    ``step_ms`` (after a call with ``profile``) gives each step's kernels' span; ``peak_bytes`` the device
    memory it holds: activations, weights and each program's intermediates."""

    def __init__(self, network: Network, device=None, db=None, check: bool = True):
        from ..runtime import context_and_queue, device_info, get_device

        self.network = network
        self.device = get_device(device)
        self.device_name = device_info(self.device).name
        self.context, self.queue = context_and_queue(self.device)
        self.checked = not check
        self.bests = _bests(network, self.device_name, db)
        self.parts, self.elided = network.in_place(self.device)
        self.programs = []  # None for an elided step
        spaces: dict = {}
        start = time.perf_counter()
        waiting = {step.task for index, step in enumerate(network.steps)  # untuned: guessed once a task
                   if index not in self.elided and step.task not in self.bests}
        progress = GuessProgress(network.name, len(waiting), self.device_name)
        for index, step in enumerate(network.steps):
            begun = time.perf_counter()
            self.programs.append(None if index in self.elided
                                 else _compile(step, self.bests.get(step.task), self.device, spaces, db))
            if step.task in waiting:
                waiting.remove(step.task)
                progress.prepared(time.perf_counter() - begun)
        self.compile_s = time.perf_counter() - start
        self.plan = MemoryPlan.make(network, parts=self.parts)
        self.buffers = self._buffers(self.plan)
        self._bound = None  # the buffers the steps' kernels were last bound to, and their launches
        self.step_ms: list[float] | None = None

    @property
    def weight_bytes(self) -> int:
        """The device memory the programs keep: their constant inputs and intermediates."""
        return sum(buffer.size for program in self.programs if program is not None
                   for buffer in program.buffers.values())

    @property
    def peak_bytes(self) -> int:
        """The device memory a call uses at most: the activations' buffers, the inputs' and the outputs'
        included, and what the programs keep."""
        return self.plan.bytes + self.weight_bytes

    def run(self, feeds: Mapping[str, object], profile: bool = False) -> dict[str, np.ndarray]:
        """Copy the inputs in, run every step, copy the outputs out; the first call is checked step by step."""
        network = self.network
        hosts = _inputs(network, feeds)
        if not self.checked:
            self._checked_run(hosts)
            self.checked = True
        return self._run(hosts, self.buffers, profile)

    def timed(self, feeds: Mapping[str, object], calls: int = 5) -> tuple[float, list[float]]:
        """``calls`` calls after the checked first one and :data:`SETTLE_S` of others: the whole call's median in
        ms (numpy in, numpy out) and each step's median kernel time."""
        import statistics

        self.run(feeds)
        settled = time.perf_counter() + SETTLE_S
        while time.perf_counter() < settled:
            self.run(feeds)
        whole, steps = [], []
        for _ in range(calls):
            start = time.perf_counter()
            self.run(feeds, profile=True)
            whole.append((time.perf_counter() - start) * 1e3)
            steps.append(self.step_ms)
        return statistics.median(whole), [statistics.median(column) for column in zip(*steps)]

    def report(self, feeds: Mapping[str, object], calls: int = 5) -> list[str]:
        """Lines: per step its program, where its configuration came from, its kernel time and share of the
        kernels' total; then the whole call's time and the device memory."""
        from ..codegen.memory import format_bytes

        call_ms, step_ms = self.timed(feeds, calls)
        total = sum(step_ms) or 1.0
        width = min(max(len(step.name) for step in self.network.steps), 60)
        lines = [f"{'step':<{width}}  {'operator':<34} {'program':<15} {'configuration':<22} {'ms':>8} {'share':>6}"]
        for index, (step, ms) in enumerate(zip(self.network.steps, step_ms)):
            best = self.bests.get(step.task)
            source = "route default" if best is None else f"tuned ({best.time_ms:.3f} ms)"
            program = "winograd" if best is not None and best.name == WINOGRAD else step.function
            if index in self.elided:
                program, source = "none", "written in place"
            name = step.name if len(step.name) <= width else "..." + step.name[-width + 3:]
            lines.append(f"{name:<{width}}  {step.op:<34} {program:<15} {source:<22} {ms:8.3f} "
                         f"{100 * ms / total:5.1f}%")
        tuned = sum(1 for index, step in enumerate(self.network.steps)
                    if step.task in self.bests and index not in self.elided)
        run = len(self.network.steps) - len(self.elided)
        lines.append(f"kernels {sum(step_ms):.3f} ms; the whole call (numpy in, numpy out) {call_ms:.3f} ms, median "
                     f"of {calls}; {tuned} of {run} steps tuned on {self.device_name}"
                     + (f"; {len(self.elided)} concatenations written in place by their inputs' steps"
                        if self.elided else ""))
        lines.append(f"device memory: {format_bytes(self.peak_bytes)} (activations {format_bytes(self.plan.bytes)} "
                     f"in {len(self.plan.sizes)} buffers; weights and intermediates {format_bytes(self.weight_bytes)})")
        return lines

    def export(self, directory) -> list:
        """Write each step's kernels (``stepNN.cl``), its constant arrays (``stepNN_NAME.npy``) and ``host.py``,
        a script running the whole network with numpy and pyopencl only; the paths written."""
        from pathlib import Path

        from ..codegen.host import network_script

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        network, plan = self.network, self.plan
        written, steps = [], []
        for index, (step, program) in enumerate(zip(network.steps, self.programs)):
            if program is None:  # a concatenation its inputs' steps write
                continue
            generated = program.executable.generated
            best = self.bests.get(step.task)
            constants = step.constants_of(WINOGRAD if best is not None and best.name == WINOGRAD else DIRECT)
            source = directory / f"step{index:02d}.cl"
            source.write_text(generated.combined_source)
            written.append(source)
            slots = {param: plan.place(network, tensor) for param, tensor in step.reads}
            slots[generated.output] = plan.place(network, step.output)
            kinds = {b.name: b for b in generated.buffers}
            kernels = []
            for kernel in generated.kernels:
                arguments = []
                for name in kernel.args:
                    if name in slots:
                        slot, offset, size = slots[name]
                        arguments.append(["slot", slot] if plan.whole(slot, offset, size)
                                         else ["part", slot, offset, size])
                    elif name in dict(generated.scalar_params):
                        arguments.append(["scalar", dict(generated.scalar_params)[name],
                                          str(float(constants[name]))])
                    elif name in constants:
                        array = directory / f"step{index:02d}_{name}.npy"
                        if array not in written:
                            np.save(array, np.asarray(constants[name], np.float32))
                            written.append(array)
                        arguments.append(["constant", array.name])
                    else:
                        arguments.append(["temp", name, kinds[name].bytes])
                kernels.append([kernel.name, list(kernel.launch.global_size),
                                None if kernel.launch.local_size is None else list(kernel.launch.local_size),
                                arguments])
            steps.append([step.name, source.name, kernels, list(program.hoisted)])
        inputs = [[name, plan.place(network, name)[0], list(shape)] for name, shape in network.inputs.items()]
        outputs = [[name, plan.place(network, name)[0], list(network.shapes[name])] for name in network.outputs]
        host = directory / "host.py"
        host.write_text(network_script(network.name, plan.sizes, inputs, outputs, steps))
        written.append(host)
        return written

    def _run(self, hosts, buffers: Mapping[str, object], profile: bool, every: bool = False) -> dict[str, np.ndarray]:
        """One call on ``buffers`` (each tensor's, :meth:`_buffers`); with ``every``, every step's output read."""
        from ..errors import DeviceError
        from ..runtime import _cl, kernels_span_ms, launch

        cl = _cl()
        network = self.network
        for name, host in hosts.items():
            cl.enqueue_copy(self.queue, buffers[name], host, is_blocking=False)
        if self._bound is None or self._bound[0] is not buffers:  # each kernel's arguments set once per buffers
            self._bound = (buffers, [() if program is None else program.bind(
                {**{param: buffers[tensor] for param, tensor in step.reads},
                 program.executable.generated.output: buffers[step.output]})
                for step, program in zip(network.steps, self.programs)])
        events = [launch(self.queue, launches) for launches in self._bound[1]]
        wanted = [step.output for step in network.steps] if every else list(network.outputs)
        results = {}
        try:
            for tensor in wanted:
                out = np.empty(network.shapes[tensor], np.float32)
                cl.enqueue_copy(self.queue, out, buffers[tensor], is_blocking=False)
                results[tensor] = out
            self.queue.finish()
        except cl.Error as e:
            raise DeviceError(f"running {network.name} failed: {e}") from None
        if profile:
            self.step_ms = [kernels_span_ms(step_events) for step_events in events]
        return results

    def _buffers(self, plan: MemoryPlan) -> dict[str, object]:
        """Each tensor's device memory under ``plan``: its buffer, or the region of it a part of a concatenation
        is (a sub-buffer)."""
        from ..runtime import _cl

        cl = _cl()
        buffers = [cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(n, 4)) for n in plan.sizes]
        regions = {}
        for tensor in self.network.shapes:
            if MemoryPlan.home(self.network, tensor, plan.parts)[0] not in plan.slot:
                continue  # never in memory: a fused step's intermediate
            slot, offset, size = plan.place(self.network, tensor)
            regions[tensor] = (buffers[slot] if plan.whole(slot, offset, size)
                               else buffers[slot].get_sub_region(offset, max(size, 4)))
        return regions

    def _checked_run(self, hosts) -> None:
        """A run with every activation in a buffer of its own, filled with NaN first, and each step's output
        compared with its reference on the inputs the device read; a wrong one raises, naming the step."""
        from ..runtime import _cl
        from ..tuning.program import kinds_differ

        cl = _cl()
        network = self.network
        plan = MemoryPlan.make(network, reuse=False, parts=self.parts)
        buffers = self._buffers(plan)
        filled = set()
        for tensor in buffers:  # every buffer, through a tensor it holds whole
            slot, offset, size = plan.place(network, tensor)
            if plan.whole(slot, offset, size) and slot not in filled:
                filled.add(slot)
                cl.enqueue_fill_buffer(self.queue, buffers[tensor], np.float32(np.nan), 0, max(size, 4))
        values = {name: host.reshape(network.shapes[name]) for name, host in hosts.items()}
        values.update(self._run(hosts, buffers, profile=False, every=True))
        self._bound = None  # the next call binds the planned buffers; these are released
        for step in network.steps:
            inputs = {param: _read(values, network, tensor) for param, tensor in step.reads}
            expected, tolerance = step.expected(inputs)
            got = values[step.output].astype(np.float64).reshape(step.shape)
            wrong = kinds_differ(got, expected)
            finite = np.isfinite(got) & np.isfinite(expected)
            over = np.abs(got - expected) > tolerance
            bad = wrong | (finite & over)
            if bad.any():
                where = tuple(int(i) for i in np.argwhere(bad)[0])
                raise LiftError(f"{network.name}: step {step.name} ({step.op}, {step.function} with "
                                f"{_config_text(self.bests.get(step.task))}) differs from its reference at "
                                f"{list(where)}: {got[where]!r} where {expected[where]!r} is expected "
                                f"(tolerance {tolerance[where]:.3g}; {int(bad.sum())} elements wrong)")
        del buffers


def _read(values: Mapping[str, np.ndarray], network: Network, tensor: str) -> np.ndarray:
    """A tensor's value from a checked run: its own, or its root's read in its shape (a view)."""
    if tensor in values:
        return values[tensor]
    return values[network.root(tensor)].reshape(network.shapes[tensor])


def _inputs(network: Network, feeds: Mapping[str, object]) -> dict[str, np.ndarray]:
    """The feeds as the network's inputs: every one given, float32, of its shape."""
    unknown = sorted(set(feeds) - set(network.inputs))
    missing = sorted(set(network.inputs) - set(feeds))
    if unknown or missing:
        raise InputError(f"{network.name} takes {', '.join(network.inputs)}"
                         + (f"; {', '.join(missing)} not given" if missing else "")
                         + (f"; it has no input {', '.join(unknown)}" if unknown else ""))
    hosts = {}
    for name, shape in network.inputs.items():
        value = np.asarray(feeds[name])
        if tuple(value.shape) != tuple(shape):
            raise InputError(f"{network.name}: input {name} has shape {tuple(value.shape)}, the network takes "
                             f"{tuple(shape)}")
        if value.dtype != np.float32:
            raise InputError(f"{network.name}: input {name} has dtype {value.dtype}; liftpy computes in float32: "
                             f"pass it .astype(np.float32)")
        hosts[name] = np.ascontiguousarray(value)
    return hosts


def _bests(network: Network, device_name: str, db) -> dict:
    """Each distinct step's chosen program's best (:func:`~liftpy.tuning.db.chosen`) in the tuning database at
    ``db`` (default: the user's), where it holds one, by the step's task, its algorithm in ``name`` -- timed cold,
    else (a database tuned before steps were) warm; the database is only read."""
    from pathlib import Path

    from ..tuning import TuningDB, default_db_path
    from ..tuning.db import chosen

    path = db or default_db_path()
    if not path or not Path(path).exists():
        return {}
    database = TuningDB(path, readonly=True)
    found = {}
    try:
        for programs, _ in network.groups():
            warm = [(algorithm, replace(task, cold=False)) for algorithm, task in programs]
            for timed in (programs, warm):  # a database tuned before a network's steps were timed cold: its trials
                bests = [replace(best, name=algorithm) for algorithm, task in timed
                         if (best := database.best(task, device_name)) is not None]
                if bests:
                    found[programs[0][1]] = chosen(bests)
                    break
    finally:
        database.close()
    return found


def _compile(step: Step, best, device, spaces: dict, db=None):
    """A step's program prepared on the device with its constants: the best's program (Winograd's, its stages
    joined, where that is the faster) and configuration, else the direct program at its device's cost model's
    guess (:func:`~liftpy.tuning.guess.best_guess`, the model trained on the tuning database at ``db``, default
    the user's); a configuration the route refuses here is said and the guess used."""
    from ..runtime import compile as compile_program, device_info
    from ..tuning import default_db_path
    from ..tuning.guess import best_guess

    if best is not None and best.name == WINOGRAD:
        task = best.task
        executable = compile_program(best.program, task.size_map, device, task.function)
        return executable.prepare(step.constants_of(WINOGRAD), zero_copy=True)
    task = step.task
    if task not in spaces:
        spaces[task] = task.space(device_info(device))
    space = spaces[task]

    def guess():
        return best_guess(task, device_info(device), db or default_db_path(), space=space)

    config = guess() if best is None else task.complete(best.config)
    try:
        lowered = space.lower(config)
    except LiftError as e:
        if best is None:
            raise
        print(f"note: step {step.name}: the database's best for {task.describe()} does not lower here "
              f"({e.message}); the cost model's guess runs", file=sys.stderr)
        lowered = space.lower(guess())
    executable = compile_program(lowered, task.size_map, device, task.function)
    return executable.prepare(dict(step.constants), zero_copy=True)


def _alignment(device) -> int:
    """The bytes a sub-buffer's start must be a multiple of on a live device."""
    return max(4, int(device.mem_base_addr_align) // 8)


def _config_text(best) -> str:
    return "the cost model's guess" if best is None else f"the tuned configuration {best.config}"


__all__ = ["Network", "PreparedNetwork", "MemoryPlan", "GuessProgress"]
