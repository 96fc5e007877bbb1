"""A network: operator calls (:class:`liftpy.nn.operators.Step`) in order on one device, its activations kept in
device buffers between them.

A :class:`Network` is what a front end (:mod:`liftpy.onnx`) makes: steps, the views between tensors (a flatten
or a reshape reads the same memory), the network's inputs and outputs. :meth:`Network.prepare` compiles each
step's program -- the tuning database's best for its task on the device, else the automatic route's default --
and plans the device memory once: each activation gets a buffer, which a later activation reuses once the last
step reading it has run (:class:`MemoryPlan`). A call copies the inputs in, launches every kernel without
waiting, and copies the outputs out. The first call is checked step by step: every activation in a buffer of
its own, filled with NaN first, each step's output compared with its float64 reference on the inputs the device
read (:meth:`Step.expected`).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from ..errors import InputError, LiftError
from .operators import DIRECT, WINOGRAD, Step


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

    def tasks(self) -> list[tuple[object, int]]:
        """The distinct steps' tasks (identical operators at identical sizes are one) and how often each runs a
        call."""
        return list(Counter(step.task for step in self.steps).items())

    def groups(self) -> list[tuple[tuple[tuple[str, object], ...], int]]:
        """For each distinct step, its programs -- (algorithm, task), the direct one first -- and how often it
        runs a call: what :meth:`tune` gives one budget."""
        first = {}
        for step in self.steps:
            first.setdefault(step.task, step)
        return [(first[task].programs, count) for task, count in self.tasks()]

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
        database at ``db`` (default: the user's) holds for its task, else the route's default."""
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
        """Tune the network's distinct steps' programs (:meth:`groups`) with one budget of ``trials`` trials in
        all, which the task scheduler gives where the network's time gains the most (each weighted by how often
        it runs; ``options``: :class:`liftpy.tuning.Tuner`'s). Each step's fastest program's best; the next call
        (and :meth:`prepare` with the same ``db``) runs them. A step with no correct trial is None, said on
        stderr: it keeps the route's default (checked at its first call) and the other steps their bests."""
        from ..tuning import tune_groups

        groups = self.groups()
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
    kernel that read it has run before the next writes); the network's outputs keep theirs."""

    slot: Mapping[str, int]
    sizes: tuple[int, ...]

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    @classmethod
    def make(cls, network: Network, reuse: bool = True) -> "MemoryPlan":
        nbytes = {name: 4 * int(np.prod(shape)) for name, shape in network.shapes.items()}
        last_read: dict[str, int] = {}
        for index, step in enumerate(network.steps):
            for _, tensor in step.reads:
                last_read[network.root(tensor)] = index
        kept = {network.root(t) for t in network.outputs} | {network.root(t) for t in network.inputs}
        slot: dict[str, int] = {}
        sizes: list[int] = []
        free: dict[int, list[int]] = {}
        for name in network.inputs:
            slot[name] = len(sizes)
            sizes.append(nbytes[name])
        for index, step in enumerate(network.steps):
            out = network.root(step.output)
            want = nbytes[out]
            if reuse and free.get(want):
                slot[out] = free[want].pop()
            else:
                slot[out] = len(sizes)
                sizes.append(want)
            if not reuse:
                continue
            for _, tensor in step.reads:  # released after this step: its output is never its input's buffer
                root = network.root(tensor)
                if last_read.get(root) == index and root not in kept:
                    free.setdefault(sizes[slot[root]], []).append(slot[root])
                    last_read.pop(root)
        return cls(slot, tuple(sizes))


class PreparedNetwork:
    """A network compiled for a device, its weights uploaded and its memory planned: ``run(feeds)``.
    ``step_ms`` (after a call with ``profile``) gives each step's kernel time; ``peak_bytes`` the device
    memory it holds: activations, weights and each program's intermediates."""

    def __init__(self, network: Network, device=None, db=None, check: bool = True):
        from ..runtime import _cl, context_and_queue, device_info, get_device

        self.network = network
        self.device = get_device(device)
        self.device_name = device_info(self.device).name
        self.context, self.queue = context_and_queue(self.device)
        self.checked = not check
        self.bests = _bests(network, self.device_name, db)
        self.programs = []
        spaces: dict = {}
        start = time.perf_counter()
        for step in network.steps:
            self.programs.append(_compile(step, self.bests.get(step.task), self.device, spaces))
        self.compile_s = time.perf_counter() - start
        self.plan = MemoryPlan.make(network)
        cl = _cl()
        self.buffers = [cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(n, 4)) for n in self.plan.sizes]
        self.step_ms: list[float] | None = None

    @property
    def weight_bytes(self) -> int:
        """The device memory the programs keep: their constant inputs and intermediates."""
        return sum(buffer.size for program in self.programs for buffer in program.buffers.values())

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
        return self._run(hosts, self.plan, self.buffers, profile)

    def timed(self, feeds: Mapping[str, object], calls: int = 5) -> tuple[float, list[float]]:
        """``calls`` calls after the checked first one: the whole call's median in ms (numpy in, numpy out) and
        each step's median kernel time."""
        import statistics

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
        for step, ms in zip(self.network.steps, step_ms):
            best = self.bests.get(step.task)
            source = "route default" if best is None else f"tuned ({best.time_ms:.3f} ms)"
            program = "winograd" if best is not None and best.name == WINOGRAD else step.function
            name = step.name if len(step.name) <= width else "..." + step.name[-width + 3:]
            lines.append(f"{name:<{width}}  {step.op:<34} {program:<15} {source:<22} {ms:8.3f} "
                         f"{100 * ms / total:5.1f}%")
        tuned = sum(1 for step in self.network.steps if step.task in self.bests)
        lines.append(f"kernels {sum(step_ms):.3f} ms; the whole call (numpy in, numpy out) {call_ms:.3f} ms, median "
                     f"of {calls}; {tuned} of {len(self.network.steps)} steps tuned on {self.device_name}")
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
            generated = program.executable.generated
            best = self.bests.get(step.task)
            constants = step.constants_of(WINOGRAD if best is not None and best.name == WINOGRAD else DIRECT)
            source = directory / f"step{index:02d}.cl"
            source.write_text(generated.combined_source)
            written.append(source)
            slots = {param: plan.slot[network.root(tensor)] for param, tensor in step.reads}
            slots[generated.output] = plan.slot[network.root(step.output)]
            kinds = {b.name: b for b in generated.buffers}
            kernels = []
            for kernel in generated.kernels:
                arguments = []
                for name in kernel.args:
                    if name in slots:
                        arguments.append(["slot", slots[name]])
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
        inputs = [[name, plan.slot[name], list(shape)] for name, shape in network.inputs.items()]
        outputs = [[name, plan.slot[network.root(name)], list(network.shapes[name])] for name in network.outputs]
        host = directory / "host.py"
        host.write_text(network_script(network.name, plan.sizes, inputs, outputs, steps))
        written.append(host)
        return written

    def _run(self, hosts, plan: MemoryPlan, buffers, profile: bool, every: bool = False) -> dict[str, np.ndarray]:
        from ..errors import DeviceError
        from ..runtime import _cl, _event_ms

        cl = _cl()
        network = self.network
        of = lambda tensor: buffers[plan.slot[network.root(tensor)]]  # noqa: E731 - the buffer of a tensor
        for name, host in hosts.items():
            cl.enqueue_copy(self.queue, of(name), host, is_blocking=False)
        events = []
        for step, program in zip(network.steps, self.programs):
            given = {param: of(tensor) for param, tensor in step.reads}
            given[program.executable.generated.output] = of(step.output)
            events.append(program.enqueue(given))
        wanted = [step.output for step in network.steps] if every else list(network.outputs)
        results = {}
        try:
            for tensor in wanted:
                out = np.empty(network.shapes[tensor], np.float32)
                cl.enqueue_copy(self.queue, out, of(tensor), is_blocking=False)
                results[tensor] = out
            self.queue.finish()
        except cl.Error as e:
            raise DeviceError(f"running {network.name} failed: {e}") from None
        if profile:
            self.step_ms = [sum(_event_ms(e) for e in step_events) for step_events in events]
        return results

    def _checked_run(self, hosts) -> None:
        """A run with every activation in a buffer of its own, filled with NaN first, and each step's output
        compared with its reference on the inputs the device read; a wrong one raises, naming the step."""
        from ..runtime import _cl
        from ..tuning.program import kinds_differ

        cl = _cl()
        network = self.network
        plan = MemoryPlan.make(network, reuse=False)
        buffers = [cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(n, 4)) for n in plan.sizes]
        for buffer, n in zip(buffers, plan.sizes):
            cl.enqueue_fill_buffer(self.queue, buffer, np.float32(np.nan), 0, max(n, 4))
        values = {name: host.reshape(network.shapes[name]) for name, host in hosts.items()}
        values.update(self._run(hosts, plan, buffers, profile=False, every=True))
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
    """Each distinct step's fastest program's best in the tuning database at ``db`` (default: the user's), where
    it holds one, by the step's task, its algorithm in ``name``; the database is only read."""
    from pathlib import Path

    from ..tuning import TuningDB, default_db_path

    path = db or default_db_path()
    if not path or not Path(path).exists():
        return {}
    database = TuningDB(path, readonly=True)
    found = {}
    try:
        for programs, _ in network.groups():
            bests = [replace(best, name=algorithm) for algorithm, task in programs
                     if (best := database.best(task, device_name)) is not None]
            if bests:
                found[programs[0][1]] = min(bests, key=lambda best: best.time_ms)
    finally:
        database.close()
    return found


def _compile(step: Step, best, device, spaces: dict):
    """A step's program prepared on the device with its constants: the best's program (Winograd's, its stages
    joined, where that is the faster) and configuration, else the route's default for the direct program; a
    configuration the route refuses here is said and the default used."""
    from ..runtime import compile as compile_program, device_info

    if best is not None and best.name == WINOGRAD:
        task = best.task
        executable = compile_program(best.program, task.size_map, device, task.function)
        return executable.prepare(step.constants_of(WINOGRAD), zero_copy=True)
    task = step.task
    if task not in spaces:
        spaces[task] = task.space(device_info(device))
    space = spaces[task]
    config = space.default() if best is None else task.complete(best.config)
    try:
        lowered = space.lower(config)
    except LiftError as e:
        if best is None:
            raise
        print(f"note: step {step.name}: the database's best for {task.describe()} does not lower here "
              f"({e.message}); the route's default runs", file=sys.stderr)
        lowered = space.lower(space.default())
    executable = compile_program(lowered, task.size_map, device, task.function)
    return executable.prepare(dict(step.constants), zero_copy=True)


def _config_text(best) -> str:
    return "the route's default" if best is None else f"the tuned configuration {best.config}"


__all__ = ["Network", "PreparedNetwork", "MemoryPlan"]
