"""Running generated kernels with PyOpenCL: device choice, builds (cached), buffers, launches, timing.

Device choice follows pyopencl's convention: ``PYOPENCL_CTX`` (``"0"``, ``"0:1"``) or a ``device`` argument
(an index ``"P:D"``, a name substring, or a ``pyopencl.Device``); the default is the first GPU if there is one,
else the first CPU. Kernel time comes from profiling events, summed over every kernel a program launches
(the paper's section 6).
"""

from __future__ import annotations

import hashlib
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Mapping

import numpy as np

from .codegen.program import GeneratedProgram, Joint
from .codegen.traffic import NO_TRAFFIC, kernel_traffic
from .device import PRIVATE_BUDGET, Device
from .errors import ConstraintError, DeviceError, InputError, InternalError, ResourceError


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:  # pragma: no cover - pyopencl is a dependency
        raise DeviceError(f"pyopencl is not installed ({e}); run scripts/setup.sh") from None
    return cl


# ------------------------------------------------------------------------------------------------ devices
def _pin_pocl_threads() -> None:
    """Ask PoCL's CPU device to pin its worker threads, thread i to CPU i (``POCL_AFFINITY``), unless the user
    chose or the process may not run on every CPU (PoCL pins by index, not by the process's mask). Unpinned,
    Linux at times runs both workers of a 2-core machine on one core, and a kernel takes twice its time (up to
    45% of a 1 ms kernel's calls in a run: ``benchmarks/results/pocl-affinity-*``). PoCL reads it when it
    starts: before the first platform query."""
    if "POCL_AFFINITY" in os.environ or not hasattr(os, "sched_getaffinity"):
        return
    if os.sched_getaffinity(0) == set(range(os.cpu_count() or 0)):
        os.environ["POCL_AFFINITY"] = "1"


def _platforms():
    cl = _cl()
    _pin_pocl_threads()
    try:
        return cl.get_platforms()
    except cl.Error as e:
        raise DeviceError(
            f"no OpenCL platform found ({e}); install one (on Debian: apt-get install pocl-opencl-icd, "
            "or run scripts/setup.sh)"
        ) from None


def _info(pi: int, di: int, platform, device) -> Device:
    cl = _cl()
    kinds = [n for n, flag in (("gpu", cl.device_type.GPU), ("cpu", cl.device_type.CPU),
                               ("accelerator", cl.device_type.ACCELERATOR)) if device.type & flag]
    kind = "/".join(kinds) or "other"
    return Device(
        name=device.name.strip(), kind=kind, compute_units=device.max_compute_units,
        max_work_group_size=device.max_work_group_size, max_work_item_sizes=tuple(device.max_work_item_sizes),
        local_mem_size=device.local_mem_size, global_mem_size=device.global_mem_size,
        max_mem_alloc_size=device.max_mem_alloc_size,
        preferred_vector_width_float=device.preferred_vector_width_float,
        private_mem_budget=PRIVATE_BUDGET["cpu" if "cpu" in kinds else "gpu"],
        platform=platform.name.strip(), driver=device.driver_version.strip(), platform_index=pi, device_index=di,
    )


def list_devices() -> list[Device]:
    """Every OpenCL device of every platform."""
    out = []
    for pi, platform in enumerate(_platforms()):
        for di, device in enumerate(platform.get_devices()):
            out.append(_info(pi, di, platform, device))
    return out


def get_device(spec=None):
    """The device named by ``spec`` (or ``PYOPENCL_CTX``), else the first GPU, else the first CPU."""
    cl = _cl()
    if spec is not None and not isinstance(spec, (str, int)):
        return spec  # already a pyopencl.Device
    spec = spec if spec is not None else os.environ.get("PYOPENCL_CTX")
    platforms = _platforms()
    devices = [(pi, di, d) for pi, p in enumerate(platforms) for di, d in enumerate(p.get_devices())]
    if not devices:
        raise DeviceError("OpenCL platforms exist but have no devices")
    if spec not in (None, ""):
        text = str(spec)
        if ":" in text or text.isdigit():
            parts = text.split(":")
            try:
                pi = int(parts[0]) if parts[0] else 0
                di = int(parts[1]) if len(parts) > 1 and parts[1] else 0
                return platforms[pi].get_devices()[di]
            except (ValueError, IndexError):
                raise DeviceError(f"no OpenCL device {text!r}; see `liftpy devices`") from None
        for pi, di, d in devices:
            if text.lower() in d.name.lower() or text.lower() in platforms[pi].name.lower():
                return d
        raise DeviceError(f"no OpenCL device matches {text!r}; see `liftpy devices`")
    for want in (cl.device_type.GPU, cl.device_type.CPU):
        for pi, di, d in devices:
            if d.type & want:
                return d
    return devices[0][2]


def device_info(device) -> Device:
    """The description of a live device (a pyopencl.Device)."""
    for pi, platform in enumerate(_platforms()):
        for di, d in enumerate(platform.get_devices()):
            if d.int_ptr == device.int_ptr:
                return _info(pi, di, platform, d)
    raise DeviceError(f"unknown device {device}")  # pragma: no cover


# ------------------------------------------------------------------------------------------------ builds
_CONTEXTS: dict[int, tuple] = {}
_BUILDS: dict[tuple[str, int], object] = {}


def context_and_queue(device):
    cl = _cl()
    key = device.int_ptr
    if key not in _CONTEXTS:
        ctx = cl.Context([device])
        queue = cl.CommandQueue(ctx, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
        _CONTEXTS[key] = (ctx, queue)
    return _CONTEXTS[key]


def failed_source_dir() -> Path:
    """Where the source of a failed build is saved: in liftpy's cache folder (:func:`liftpy._cache.cache_dir`),
    or the temporary folder where that cannot be made."""
    from ._cache import cache_dir

    for path in (cache_dir() / "failed-builds", Path(tempfile.gettempdir()) / "liftpy-failed-builds"):
        try:
            path.mkdir(parents=True, exist_ok=True)
            return path
        except OSError:
            continue
    return Path(tempfile.gettempdir())


def build(source: str, device, name: str = "program"):
    """Build OpenCL C for a device, cached by source and device; a failure shows the log and the saved source."""
    cl = _cl()
    key = (hashlib.sha256(source.encode()).hexdigest(), device.int_ptr)
    if key in _BUILDS:
        return _BUILDS[key]
    ctx, _ = context_and_queue(device)
    try:
        program = cl.Program(ctx, source).build(options=["-cl-std=CL1.2"])
    except cl.RuntimeError as e:
        path = failed_source_dir() / f"{name}-{key[0][:12]}.cl"
        path.write_text(source)
        log = str(e)  # pyopencl's message carries the compiler's build log
        raise DeviceError(f"OpenCL build of {name} failed on {device.name.strip()}; source saved to {path}\n{log}") from None
    _BUILDS[key] = program
    return program


#: PoCL compiles a kernel's work-group function at its first launch of each local size, one variant for grids
#: narrower than this in every dimension (``-smallgrid``) and one for wider; a launch of one work-group compiles
#: the narrow one
_NARROW_GRID = 65535


def launch_one_work_group(generated: GeneratedProgram, device, joint: Joint | None = None) -> None:
    """Launch each kernel of ``generated`` (built within ``joint``'s program, where given) over one work-group,
    on scratch buffers, and wait: a runtime that compiles per launch shape at the first launch (PoCL: 0.1-1.4 s a
    kernel on a CPU) does that now, into its disk cache, so that a process running the program later, as a
    tuner's runner, finds it compiled. Kernels whose launch shape the runtime would compile apart (no local
    size, a wide grid) are left alone."""
    cl = _cl()
    ctx, queue = context_and_queue(device)
    executable = Executable(generated, device, joint)
    program = executable.build()
    buffers = {b.name: cl.Buffer(ctx, cl.mem_flags.READ_WRITE, max(b.bytes, 4)) for b in generated.buffers}
    scalars = {name: _scalar(ctype, 0) for name, ctype in generated.scalar_params}
    events = []
    for plan in generated.kernels:
        local = plan.launch.local_size
        if local is None or max(plan.launch.global_size) >= _NARROW_GRID:
            continue
        kernel = cl.Kernel(program, executable.symbol(plan.name))
        for position, name in enumerate(plan.args):
            kernel.set_arg(position, buffers[name] if name in buffers else scalars[name])
        events.append(cl.enqueue_nd_range_kernel(queue, kernel, tuple(local), tuple(local)))
    cl.wait_for_events(events)


# ------------------------------------------------------------------------------------------------ running
class KernelTimes:
    """A run's kernels' times, read from their profiling events when first asked for, not inside the call
    (there, on caches the kernels had just filled, reading them cost VGG-16 layers 0.01-0.08 ms a call on PoCL).
    It holds the events, not the run's output, so that a caller keeping the times (a layer's ``last_run``) does
    not keep an output from being reused. A repeat's time is its kernels' span (:func:`kernels_span_ms`): the
    wait between two kernels is paid by every call, and a program of more kernels pays it more often."""

    def __init__(self, kernels: tuple[tuple[str, str], ...], runs: list[list]):
        self._kernels = kernels  # (name, what it computes) per kernel, in launch order
        self._runs = runs  # each measured iteration's events, one per kernel

    @cached_property
    def runs_ms(self) -> tuple[float, ...]:
        """Every repeat's span over the kernels."""
        return tuple(kernels_span_ms(events) for events in self._runs)

    @cached_property
    def kernel_ms(self) -> float:
        """The span over the kernels, median over the repeats."""
        return _median(list(self.runs_ms))

    @cached_property
    def per_kernel_ms(self) -> dict[str, float]:
        return {name: _median([_event_ms(events[k]) for events in self._runs])
                for k, (name, _) in enumerate(self._kernels)}

    @property
    def per_result_ms(self) -> dict[str, float]:
        """Each kernel's median by what it computes (a buffer's name)."""
        produces = dict(self._kernels)
        return {produces[name]: ms for name, ms in self.per_kernel_ms.items()}


class TimedByKernels:
    """What a run's result says of its kernels' time, read through its ``times`` (:class:`KernelTimes`):
    shared by :class:`RunResult`, a convolution's result and a layer's ``last_run``."""

    @property
    def kernel_ms(self) -> float:
        """The span over the kernels (:func:`kernels_span_ms`), median over the repeats."""
        return self.times.kernel_ms

    @property
    def runs_ms(self) -> tuple[float, ...]:
        """Every repeat's span."""
        return self.times.runs_ms

    @property
    def per_kernel_ms(self) -> dict[str, float]:
        return self.times.per_kernel_ms

    @property
    def stage_ms(self) -> dict[str, float]:
        """Each kernel's time by the buffer it computes (``stage`` in the name is an older word for a kernel)."""
        return self.times.per_result_ms


@dataclass(frozen=True)
class RunResult(TimedByKernels):
    output: np.ndarray
    times: KernelTimes


def shares_host_memory(device) -> bool:
    """Whether the device computes in the host's memory (a CPU): then buffers are made over the caller's numpy
    arrays (``USE_HOST_PTR``) and read back by mapping, instead of copied in and out (on PoCL 4.4 ms of
    vgg16.2's 26 ms call: ``benchmarks/results/zero-copy.txt``)."""
    return bool(device.type & _cl().device_type.CPU)


#: the alignment PoCL asks of a host pointer it may use as device memory without copying it (its largest
#: vector type); other devices ignore it
HOST_ALIGNMENT = 128


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised array whose data starts on a :data:`HOST_ALIGNMENT` boundary."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + HOST_ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % HOST_ALIGNMENT
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def _poison(dtype: str):
    """The fill of a buffer before a checked run: NaN for floats, so an element no kernel writes cannot pass
    the check on what an earlier run left in the same memory; the same bits for integers."""
    return np.float32(np.nan) if dtype.startswith("float") else np.int32(0x7FC00000)


class _ReturnedOutput:
    """An output array a call returned, with the device buffer made over it (zero-copy), kept so that a later
    call can reuse both once the caller holds no reference to the array or to a view of it: a new array and
    buffer cost a small call several percent on PoCL, and a buffer PoCL has seen costs less to launch with."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.buffer = None
        self.baseline = (0, 0)
        #: whether the device computes in the array's own memory, so that the kernels' writes are there once
        #: they complete (learned at the first map, where the device shares the host's memory; until then, and
        #: on any other device, each call maps)
        self.device_memory = False

    def references(self) -> tuple[int, int]:
        """References to the array and to the memory's owner (a numpy view of a view refers to the owner)."""
        return sys.getrefcount(self.array), sys.getrefcount(self.array.base)

    def unreferenced(self) -> bool:
        return self.references() == self.baseline


class _InputSeen:
    """The zero-copy buffer made over the array last given as an input, and whether the device reads that
    array's own memory (None until the array is given again and a map of the buffer tells)."""

    def __init__(self, array: np.ndarray, buffer):
        self.array = array
        self.buffer = buffer
        self.device_memory: bool | None = None


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _maps_own_memory(queue, buffer, host: np.ndarray, blocking: bool) -> bool:
    """Whether a map of ``buffer``, made over ``host`` (``USE_HOST_PTR``), gives ``host``'s own memory. Only where
    the device shares the host's memory does that say the kernels work in it: the specification has such a map
    return the host pointer on every device, after copying the device's data there (NVIDIA's OpenCL does, and
    without a map its kernels' results never reached the array)."""
    mapped, _ = _cl().enqueue_map_buffer(queue, buffer, _cl().map_flags.READ, 0, host.shape, host.dtype,
                                         is_blocking=blocking)
    own = _address(mapped) == _address(host)
    mapped.base.release()
    return own


def check_device_memory(what: str, sizes: Mapping[str, object] | None, buffers, device) -> None:
    """Refuse, in one line (:class:`~liftpy.errors.ResourceError`), buffers -- (name, bytes) -- that ``device`` (a
    pyopencl or a liftpy Device) cannot hold: one larger than its largest allocation (``max_mem_alloc_size``), or
    all of them more than its global memory (``global_mem_size``). Nothing is allocated to find out."""
    from .codegen.memory import format_bytes
    from .interpreter import sizes_text

    at = f" at {sizes_text(sizes)}" if sizes else ""
    name = device.name.strip()
    for buffer, n in buffers:
        if n > device.max_mem_alloc_size:
            limit = device.max_mem_alloc_size
            raise ResourceError(f"{what}{at}: buffer {buffer} needs {n} bytes ({format_bytes(n)}); {name} allocates "
                                f"at most {limit} bytes ({format_bytes(limit)}) at once (max_mem_alloc_size)")
    total = sum(n for _, n in buffers)
    if total > device.global_mem_size:
        limit = device.global_mem_size
        raise ResourceError(f"{what}{at}: its buffers need {total} bytes ({format_bytes(total)}); {name} has "
                            f"{limit} bytes ({format_bytes(limit)}) of global memory (global_mem_size)")


def _check_work_groups(kernels, device) -> None:
    """Each kernel's work-groups within what the device allows that kernel, which only the built kernel tells
    (its registers and local memory lower the device's maximum): NVIDIA's OpenCL allows 1024 work-items a group
    but refused a kernel's groups of 928 at launch (``OUT_OF_RESOURCES``). The configuration is then out of
    this device's space, as a constraint would have ruled it."""
    cl = _cl()
    for plan, kernel in kernels:
        local = plan.launch.local_size
        if local is None:
            continue
        size = int(np.prod(local))
        limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
        if size > limit:
            raise ConstraintError(
                f"{plan.name} runs work-groups of {size} work-items {tuple(local)}; built for "
                f"{device.name.strip()}, it allows at most {limit} (its registers or local memory)")


def launch(queue, launches) -> list:
    """Enqueue ``launches`` ((kernel, global size, local size, name), their arguments set:
    :meth:`PreparedProgram.bind`) and return their events without waiting."""
    cl = _cl()
    events = []
    for kernel, global_size, local_size, name in launches:
        try:
            events.append(cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size))
        except cl.Error as e:
            raise DeviceError(f"launching {name} with global size {global_size} and local size {local_size} "
                              f"failed: {e}") from None
    return events


class PreparedProgram:
    """An executable with its device state kept between calls: kernels created once, the constant inputs (a
    layer's weights) uploaded once, intermediate buffers allocated once. ``run`` takes the other inputs and
    returns an output array that is the caller's (the memory of an earlier output the caller dropped is
    reused); with ``zero_copy`` (a device that shares host memory) the input and output buffers are made over
    the caller's arrays instead of copied in and out.

    Kernels that read only constant inputs (and what such kernels computed) -- a layout change of the
    weights -- are *hoisted*: run once here, their results kept on the device, and left out of every ``run``
    (``hoisted`` names them, ``hoisted_ms`` is their time). Their buffers are filled with NaN before they run,
    so an element they fail to write shows in every checked output after."""

    def __init__(self, executable: "Executable", constants: Mapping[str, object] | None = None,
                 zero_copy: bool | None = None):
        cl = _cl()
        self.executable = executable
        generated = executable.generated
        check_device_memory(f"running {generated.function}", None,
                            [(f"{b.name} {list(b.shape)}", b.bytes) for b in generated.buffers], executable.device)
        self.context, self.queue = context_and_queue(executable.device)
        program = executable.build()
        #: whether a zero-copy buffer can be the caller's array itself: only on a device that shares the host's
        #: memory (elsewhere each call's buffers are made anew and its output mapped)
        self._host_memory_shared = shares_host_memory(executable.device)
        self.zero_copy = self._host_memory_shared if zero_copy is None else zero_copy
        self.kernels = [(plan, cl.Kernel(program, executable.symbol(plan.name))) for plan in generated.kernels]
        _check_work_groups(self.kernels, executable.device)
        self.inputs = {b.name: b for b in generated.buffers if b.role == "input"}
        self.scalars = dict(generated.scalar_params)
        constants = dict(constants or {})
        _check_names(generated, constants)
        self.constant_names = frozenset(constants)
        mf = cl.mem_flags
        self.buffers: dict[str, object] = {}  # device buffers kept between calls
        self.scalar_values: dict[str, object] = {}
        for name, value in constants.items():
            if name in self.scalars:
                self.scalar_values[name] = _scalar(self.scalars[name], value)
            else:  # copied once: the caller may change its array afterwards
                host = _host_array(self.inputs[name], value)
                self.buffers[name] = cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
        for b in generated.buffers:
            if b.role == "temp" or (b.role == "output" and not self.zero_copy):
                self.buffers[b.name] = cl.Buffer(self.context, mf.READ_WRITE, max(b.bytes, 4))
            elif b.role == "input" and b.name not in constants and not self.zero_copy:
                self.buffers[b.name] = cl.Buffer(self.context, mf.READ_ONLY, max(b.bytes, 4))
        self.hoisted, self.hoisted_ms = self._run_constant_kernels()
        self._timed = tuple((plan.name, plan.produces) for plan, _ in self.kernels)  # a call's, in launch order
        per_call = {plan.produces for plan, _ in self.kernels}  # the output and the temporaries not hoisted
        self.poisoned = [b for b in generated.buffers if b.name in per_call]
        self._returned: list[_ReturnedOutput] = []  # the latest outputs, newest last
        self._inputs_seen: dict[str, _InputSeen] = {}  # zero-copy: per input, the array last given
        self.output_plan = generated.buffer(generated.output)
        #: the names a call gives: every input and scalar that is not a constant
        self.call_inputs = frozenset(set(self.inputs) | set(self.scalars)) - self.constant_names
        self._call_args = self._set_fixed_args()

    def _set_fixed_args(self) -> list[tuple[tuple[int, str], ...]]:
        """Each kernel's arguments that are the same at every call (constants, temporaries, buffers kept), set
        once here; returned per kernel: the (position, name) of those a call sets (the inputs and scalars
        it gives; with zero-copy, the buffers over its arrays and the output's): a call then sets only those
        (about 20 us less per call on PoCL: ``benchmarks/results/notes-compiler.md``)."""
        varying = []
        for plan, kernel in self.kernels:
            mine = []
            for position, name in enumerate(plan.args):
                if name in self.buffers:
                    kernel.set_arg(position, self.buffers[name])
                elif name in self.scalar_values:
                    kernel.set_arg(position, self.scalar_values[name])
                else:
                    mine.append((position, name))
            varying.append(tuple(mine))
        return varying

    @property
    def moved_bytes(self) -> int | None:
        """The global bytes a call's kernels ask for (:mod:`liftpy.codegen.traffic`; the hoisted ones left out),
        or None when a kernel came without its kernel IR."""
        if any(plan.ir is None for plan, _ in self.kernels):
            return None
        return sum((kernel_traffic(plan.ir) for plan, _ in self.kernels), NO_TRAFFIC).total

    #: outputs kept for reuse: two serve ``y = run(x)`` in a loop (the previous output is still held during a call)
    REUSED_OUTPUTS = 2

    def _input_buffer(self, name: str, host: np.ndarray):
        """A zero-copy buffer over the input ``host``: the one made at an earlier call for the same array where
        the device reads the array's own memory -- what the caller wrote into it since is what the kernels
        read -- else a new one, whose first launch costs more on PoCL. The array last given is kept alive for it,
        one per input."""
        cl = _cl()
        seen = self._inputs_seen.get(name)
        if seen is not None and seen.array is host:
            if seen.device_memory is None:  # given again: is the buffer the array's memory? (asked once)
                seen.device_memory = (self._host_memory_shared
                                      and _maps_own_memory(self.queue, seen.buffer, host, blocking=False))
            if seen.device_memory:
                return seen.buffer
        buffer = cl.Buffer(self.context, cl.mem_flags.READ_ONLY | cl.mem_flags.USE_HOST_PTR, hostbuf=host)
        if seen is None or seen.array is not host:  # a copy's answer, once known, is kept for the array
            self._inputs_seen[name] = _InputSeen(host, buffer)
        return buffer

    def _output(self) -> _ReturnedOutput:
        """The output array of a call: one an earlier call returned and nothing refers to any more, else a new
        one (the oldest kept is then forgotten: it stays the caller's)."""
        for returned in self._returned:
            if returned.unreferenced():
                return returned
        plan = self.output_plan
        returned = _ReturnedOutput(aligned_empty(plan.shape, plan.dtype))
        if self.zero_copy:
            cl = _cl()
            returned.buffer = cl.Buffer(self.context, cl.mem_flags.WRITE_ONLY | cl.mem_flags.USE_HOST_PTR,
                                        hostbuf=returned.array)
        returned.baseline = returned.references()
        self._returned = (self._returned + [returned])[-self.REUSED_OUTPUTS:]
        return returned

    def _run_constant_kernels(self) -> tuple[tuple[str, ...], float]:
        """Run, once, the kernels whose every argument is a constant or a hoisted kernel's result."""
        cl = _cl()
        g = self.executable.generated
        known = set(self.constant_names)
        hoisted = []
        for plan, kernel in self.kernels:
            if plan.produces != g.output and all(a in known for a in plan.args if a != plan.produces):
                hoisted.append((plan, kernel))
                known.add(plan.produces)
        if not hoisted:
            return (), 0.0
        events = []
        for plan, kernel in hoisted:
            produced = g.buffer(plan.produces)
            cl.enqueue_fill_buffer(self.queue, self.buffers[plan.produces], _poison(produced.dtype), 0,
                                   max(produced.bytes, 4))
            args = [self.buffers[a] if a in self.buffers else self.scalar_values[a] for a in plan.args]
            try:
                events.append(kernel(self.queue, plan.launch.global_size, plan.launch.local_size, *args))
            except cl.Error as e:
                raise DeviceError(f"launching {plan.name} (run once, on the constant inputs) failed: {e}") from None
        try:
            cl.wait_for_events(events)
        except cl.Error as e:
            raise DeviceError(f"running the constant kernels of {g.function} failed: {e}") from None
        self.kernels = [(plan, kernel) for plan, kernel in self.kernels if plan.produces not in known]
        read = {name for plan, _ in self.kernels for name in plan.args}
        for name in [n for n in self.buffers if n not in read]:  # read only by the hoisted kernels, which have run
            del self.buffers[name]
        return tuple(plan.name for plan, _ in hoisted), sum(_event_ms(e) for e in events)

    @staticmethod
    def _wait(events, function: str) -> None:
        try:
            _cl().wait_for_events(events)
        except _cl().Error as e:
            raise DeviceError(f"running {function} failed: {e}") from None

    def run(self, inputs: Mapping[str, object] | None = None, repeat: int = 1, warmup: int = 0,
            poison: bool = False, cold: "CacheFlush | None" = None) -> RunResult:
        """Run every kernel in order on ``inputs`` (the non-constant ones); ``kernel_ms`` is the median over
        ``repeat`` runs after ``warmup``. With ``poison``, the output and intermediate buffers are filled with
        NaN first, so that what the check sees was written by this run. With ``cold``, each run starts as a
        network's step does: the caches filled with other data, then its inputs written again, as the steps
        producing them leave them (:class:`CacheFlush`; its copies' time is not the kernels')."""
        cl = _cl()
        if repeat < 1 or warmup < 0:
            raise InputError(f"repeat must be at least 1 and warmup at least 0, got {repeat} and {warmup}")
        g = self.executable.generated
        inputs = inputs or {}
        if inputs.keys() != self.call_inputs:
            self._check_given(inputs)
        values: dict[str, object] = {}  # what this call sets: buffers and scalars by name
        keep_alive: dict[str, np.ndarray] = {}  # host arrays a pending command reads, by input
        for name, value in inputs.items():
            if name in self.scalars:
                values[name] = _scalar(self.scalars[name], value)
                continue
            host = _host_array(self.inputs[name], value)
            keep_alive[name] = host
            if self.zero_copy:
                values[name] = self._input_buffer(name, host)
            else:
                cl.enqueue_copy(self.queue, self.buffers[name], host, is_blocking=False)
        returned = self._output()
        output = returned.array
        if self.zero_copy:
            values[g.output] = returned.buffer
        for (plan, kernel), mine in zip(self.kernels, self._call_args):
            for position, name in mine:
                kernel.set_arg(position, values[name])
        if poison:  # what this call computes (a hoisted kernel's result is kept)
            for b in self.poisoned:
                buffer = values[b.name] if b.name in values else self.buffers[b.name]
                cl.enqueue_fill_buffer(self.queue, buffer, _poison(b.dtype), 0, max(b.bytes, 4))
        runs: list[list] = []  # each measured iteration's kernel events
        written = [] if cold is None else [  # each input's buffer and a copy of what this call gave it
            (values[name] if self.zero_copy else self.buffers[name], cold.kept(host))
            for name, host in keep_alive.items()]
        for iteration in range(warmup + repeat):
            if cold is not None:
                cold(written)
            events = []
            for plan, kernel in self.kernels:
                try:
                    events.append(cl.enqueue_nd_range_kernel(self.queue, kernel, plan.launch.global_size,
                                                             plan.launch.local_size))
                except cl.Error as e:
                    raise DeviceError(
                        f"launching {plan.name} with global size {plan.launch.global_size} and local size "
                        f"{plan.launch.local_size} failed: {e}"
                    ) from None
            # the last iteration's kernels are waited for by the blocking read of the output below (the queue
            # runs in order): one round trip to the driver less per call
            if iteration < warmup + repeat - 1:
                self._wait(events, g.function)
            if iteration >= warmup:
                runs.append(events)
        # the one wait of the call: a blocking map or read completes after every kernel before it. The unmap is
        # left queued: a map for reading writes nothing back, and the in-order queue runs it before the next
        # call's commands (a finish here would cost a second round trip). Where the device shares the host's
        # memory and an earlier map gave the output's own memory, the kernels write there and waiting for them
        # is enough
        try:
            if self.zero_copy and not returned.device_memory:
                own = _maps_own_memory(self.queue, returned.buffer, output, blocking=True)
                returned.device_memory = self._host_memory_shared and own
            elif not self.zero_copy:
                cl.enqueue_copy(self.queue, output, self.buffers[g.output], is_blocking=True)
        except cl.Error as e:
            raise DeviceError(f"running {g.function} failed: {e}") from None
        self._wait(runs[-1], g.function)  # the call's wait where the output is the device's memory; else
        # complete by now, and an error of theirs is said here
        del keep_alive, returned
        return RunResult(output, KernelTimes(self._timed, runs))

    def enqueue(self, buffers: Mapping[str, object]) -> list:
        """Launch every kernel on device buffers the caller owns -- each input given at a call, and the output,
        by name -- and return their events without waiting: no host copy, no wait, so that a network chains
        programs with its activations on the device (the queue runs in order). The program must be prepared
        with ``zero_copy`` (it then keeps no buffer of its own for its inputs and output)."""
        return launch(self.queue, self.bind(buffers))

    def bind(self, buffers: Mapping[str, object]) -> tuple:
        """Set the arguments :meth:`enqueue` sets to ``buffers`` and return the launches that run the program on
        them (for :func:`launch`): a caller that runs again on the same buffers launches those alone, its
        arguments set once (a network's call then costs its host a launch per kernel, not a step's Python)."""
        if not self.zero_copy:
            raise InternalError(f"{self.executable.generated.function}: enqueue needs a program prepared with "
                                "zero_copy=True")
        for (plan, kernel), mine in zip(self.kernels, self._call_args):
            for position, name in mine:
                kernel.set_arg(position, buffers[name])
        return tuple((kernel, plan.launch.global_size, plan.launch.local_size, plan.name) for plan, kernel in
                     self.kernels)

    def _check_given(self, inputs: Mapping[str, object]) -> None:
        """The error for inputs other than the call's: an unknown name, one missing, or a constant again."""
        g = self.executable.generated
        _check_names(g, inputs)
        missing = sorted(self.call_inputs - set(inputs))
        if missing:
            raise InputError(f"no input given for {', '.join(missing)}")
        twice = sorted(self.constant_names & set(inputs))
        if twice:
            raise InputError(f"{', '.join(twice)} was given when the program was prepared; it cannot change")


class CacheFlush:
    """What a network's other steps leave in the device's caches, for timing one step as the network runs it:
    a device copy that passes as many bytes through the caches as the global memory cache holds
    (``CL_DEVICE_GLOBAL_MEM_CACHE_SIZE``, half read, half written; TVM's ``enable_cpu_cache_flush``), then the
    step's inputs written again by the device, as the steps producing them leave them: its weights cold, its
    inputs warm. ``ms`` is one copy's time, measured when it is made."""

    #: what a device that reports no cache size is taken to have
    DEFAULT_CACHE_BYTES = 32 << 20

    def __init__(self, device):
        cl = _cl()
        context, self.queue = context_and_queue(device)
        self.bytes = max(4096, (device.global_mem_cache_size or self.DEFAULT_CACHE_BYTES) // 2)
        self._context = context
        self._source = cl.Buffer(context, cl.mem_flags.READ_WRITE, self.bytes)
        self._target = cl.Buffer(context, cl.mem_flags.READ_WRITE, self.bytes)
        cl.enqueue_fill_buffer(self.queue, self._source, np.float32(0), 0, self.bytes)
        self()
        event = self()
        event.wait()
        self.ms = _event_ms(event)

    def kept(self, host: np.ndarray):
        """A device buffer holding a copy of ``host`` as it is now: what :meth:`__call__` writes an input from."""
        cl = _cl()
        return cl.Buffer(self._context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)

    def __call__(self, inputs=()):
        """Enqueue the copy, then for each (input's buffer, :meth:`kept` copy) of ``inputs`` a device copy of the
        one into the other (without waiting); the flush's event."""
        cl = _cl()
        event = cl.enqueue_copy(self.queue, self._target, self._source, byte_count=self.bytes)
        for buffer, kept in inputs:
            cl.enqueue_copy(self.queue, buffer, kept, byte_count=kept.size)
        return event


def _event_ms(event) -> float:
    """A kernel event's time on the device, from its profiling information (asked directly: pyopencl's
    ``event.profile`` wrapper cost a call 6 us)."""
    info = _cl().profiling_info
    return (event.get_profiling_info(info.END) - event.get_profiling_info(info.START)) * 1e-6


def kernels_span_ms(events) -> float:
    """The time from the first of a call's kernel events (launched in order on an in-order queue) starting to
    the last ending, in ms: their times and the device's waits between them (PoCL on a CPU: 15-30 us a kernel),
    which a user's call pays as well (none: 0, a program whose kernels all ran once, when it was prepared)."""
    if len(events) <= 1:
        return _event_ms(events[0]) if events else 0.0
    info = _cl().profiling_info
    return (events[-1].get_profiling_info(info.END) - events[0].get_profiling_info(info.START)) * 1e-6


def _median(values: list[float]) -> float:
    return values[0] if len(values) == 1 else statistics.median(values)


def _check_names(g: GeneratedProgram, given: Mapping[str, object]) -> None:
    expected = {b.name for b in g.buffers if b.role == "input"} | {name for name, _ in g.scalar_params}
    unknown = sorted(set(given) - expected)
    if unknown:
        raise InputError(f"{g.function} has no input {', '.join(unknown)} (inputs: {', '.join(sorted(expected))})")


def _host_array(plan, value) -> np.ndarray:
    """An input as the kernels read it: C-contiguous, of the buffer's dtype and shape (no copy if it is)."""
    x = np.asarray(value)
    if tuple(x.shape) != plan.shape:
        raise InputError(f"input {plan.name} has shape {tuple(x.shape)}, the program was compiled for {plan.shape}")
    return np.ascontiguousarray(x, dtype=plan.dtype)


def _scalar(ctype: str, value):
    return (np.float32 if ctype == "float" else np.int32)(value)


class Executable:
    """A generated program bound to a device: ``sources``, ``launch``, ``buffers``, ``run``, and ``prepare`` for
    repeated calls that keep their device buffers."""

    def __init__(self, generated: GeneratedProgram, device=None, joint: Joint | None = None):
        self.generated = generated
        self.device = get_device(device)
        #: where the kernels are built within a joint program of several (a tuner's batch), or None
        self.joint = joint
        self._program = None

    @property
    def sources(self) -> dict[str, str]:
        return self.generated.sources

    @property
    def launch(self):
        return self.generated.launch

    @property
    def buffers(self) -> list[tuple[str, str, int]]:
        """(name, address space, bytes) of every buffer, plus local memory per kernel."""
        out = [(b.name, b.space, b.bytes) for b in self.generated.buffers]
        out += [(f"{k} (local)", "local", n) for k, n in self.generated.local_bytes.items() if n]
        return out

    @property
    def memory_bytes(self) -> int:
        """Global memory the program allocates: inputs, intermediates and output."""
        return sum(b.bytes for b in self.generated.buffers)

    def build(self):
        if self._program is None:
            source = self.joint.source if self.joint is not None else self.generated.combined_source
            self._program = build(source, self.device, self.generated.function)
        return self._program

    def symbol(self, kernel: str) -> str:
        """A kernel's name in the built OpenCL program."""
        return self.joint.symbols[kernel] if self.joint is not None else kernel

    def prepare(self, constants: Mapping[str, object] | None = None, zero_copy: bool | None = None) -> PreparedProgram:
        """The program ready for repeated calls, ``constants`` (inputs that stay fixed) uploaded once; ``zero_copy``
        (default: when the device shares the host's memory) makes buffers over the caller's arrays."""
        return PreparedProgram(self, constants, zero_copy)

    def run(self, inputs: Mapping[str, object], repeat: int = 1, warmup: int = 0, poison: bool = False) -> RunResult:
        """Run every kernel in order on the inputs; ``kernel_ms`` is the median over ``repeat`` runs."""
        return self.prepare().run(inputs, repeat=repeat, warmup=warmup, poison=poison)


def compile(program, sizes: Mapping[str, object] | None = None, device=None, function: str | None = None) -> Executable:
    """Generate OpenCL for a low-level program with every size bound, ready to run on ``device``."""
    from .codegen.program import generate

    dev = get_device(device)
    generated = generate(program, sizes, function, device_info(dev))
    return Executable(generated, dev)
