"""The builder: candidates lowered and their kernels generated, on a pool of processes, apart from the device.

A :class:`Build` asks for one configuration of a task on a device (its facts, :class:`~liftpy.device.Device`,
not the device itself: a builder needs no OpenCL); a :class:`Built` holds the generated program the runner
builds for its device and times, or why there is none (the configuration cannot be lowered or generated: a
recorded failure; a Python exception inside liftpy: status ``bug``, which stops the tuner).
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import os
import threading
import time
import traceback
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Build:
    """A candidate to build: ``task`` (portable: it carries its program's text), the ``device``'s facts, the
    configuration, and a test's planted fault ("module:function", applied to the generated program). With
    ``compile``, the builder also compiles the kernels for the device (one of its own machine, where the facts
    say it is) and launches each over one work-group, which compiles what the runtime compiles at a first
    launch: the OpenCL runtime's disk cache (PoCL's) then hands the runner both, off its path."""

    task: object
    device: object
    config: dict
    fault: str | None = None
    compile: bool = False


@dataclass(frozen=True)
class Built:
    """A built candidate: its generated program, or the failure (a result the database records) that stopped
    it; ``seconds``: the time lowering, generating (and compiling) took; ``features``: what a cost model reads of
    its kernels (:mod:`liftpy.tuning.features`); ``joint``: where it was compiled within a joint program of the
    builder's batch (:class:`~liftpy.codegen.program.Joint`), which the runner then builds too."""

    build: Build
    generated: object | None
    failure: dict | None
    seconds: float
    features: dict | None = None
    joint: object | None = None

    @property
    def config(self) -> dict:
        return self.build.config


class Builder(Protocol):
    """Builds candidates; each answer a future, so that the tuner builds ahead while a runner measures."""

    def build(self, builds: Sequence[Build]) -> list[Future]: ...

    def close(self) -> None: ...


@lru_cache(maxsize=32)  # a network's layers and stages
def _space(task, device):
    return task.space(device)


def build_candidate(build: Build) -> Built:
    """Build one candidate (:func:`build_candidates`)."""
    return build_candidates([build])[0]


def build_candidates(builds: Sequence[Build], space=None) -> list[Built]:
    """Lower each configuration in its task's route space and generate its kernels: a failure of the
    configuration is a result (``invalid``, ``codegen_error``, ``build_error``), a Python exception a ``bug``.
    Those asking to be compiled are compiled together, as one joint OpenCL program
    (:func:`~liftpy.codegen.program.joint_sources`: the compiler's fixed cost paid once for them all), or one by
    one where the joint program does not build or there is one. ``space``: the builds' route space, where the
    caller has made it (all builds then of one task), else made here once a task and device."""
    from ..codegen.program import joint_sources

    builts = [_generated(build, space) for build in builds]
    members = [i for i, built in enumerate(builts) if built.failure is None and built.build.compile]
    joints = [None] * len(members)
    if len(members) > 1:
        start = time.perf_counter()
        try:
            joint = joint_sources([builts[i].generated for i in members])
        except Exception:  # a bug in liftpy: the tuner stops with the traceback
            cause = traceback.format_exc()[:2000]
            for i in members:
                builts[i] = Built(builts[i].build, None, {"status": "bug", "cause": cause}, builts[i].seconds)
            return builts
        if _compile_source(joint[0].source, builts[members[0]].build.device):
            joints = joint
        shared = (time.perf_counter() - start) / len(members)
        for i in members:
            builts[i] = dataclasses.replace(builts[i], seconds=builts[i].seconds + shared)
    for i, joint in zip(members, joints):
        builts[i] = _compiled(builts[i], joint)
    return builts


def _generated(build: Build, space=None) -> Built:
    """``build``'s configuration lowered and its kernels generated (and its features read), not compiled."""
    from ..codegen.program import generate
    from ..errors import ConstraintError, LiftError, RewriteError
    from .features import FEATURES_VERSION, choice_features, program_features

    start = time.perf_counter()
    task = build.task

    def failed(status: str, cause: str) -> Built:
        return Built(build, None, {"status": status, "cause": cause[:2000]}, time.perf_counter() - start)

    try:
        try:
            space = space if space is not None else _space(task, build.device)
            program = space.lower(build.config)
            generated = generate(program, task.size_map, task.function, build.device)
        except (RewriteError, ConstraintError) as e:
            return failed("invalid", e.message)
        except LiftError as e:
            return failed("codegen_error", e.message)
        if build.fault:  # a test's planted fault, in the kernels as a buggy code generator could write them
            import importlib

            module, name = build.fault.split(":")
            generated = getattr(importlib.import_module(module), name)(build.config, generated)
        features = {**program_features(generated, build.device),
                    **choice_features(space, build.config, build.device), "version": FEATURES_VERSION}
    except Exception:  # a bug in liftpy, not a fault of the configuration: the tuner stops with the traceback
        return failed("bug", traceback.format_exc())
    return Built(build, generated, None, time.perf_counter() - start, features)


def _compiled(built: Built, joint) -> Built:
    """``built`` with its kernels compiled for the device (within ``joint``'s program where given), or the
    failure that stopped it."""
    start = time.perf_counter()
    try:
        failure = _compile(built.generated, built.build.device, joint)
    except Exception:
        failure, status = traceback.format_exc(), "bug"
    else:
        status = "build_error"
    seconds = built.seconds + time.perf_counter() - start
    if failure is not None:
        return Built(built.build, None, {"status": status, "cause": failure[:2000]}, seconds)
    return dataclasses.replace(built, seconds=seconds, joint=joint)


def _live_device(device):
    """The OpenCL device of this machine the facts name, or None where it cannot be opened (no fault of a
    candidate: the runner builds it then)."""
    import pyopencl as cl

    from ..errors import DeviceError
    from ..runtime import get_device

    try:
        return get_device(f"{device.platform_index}:{device.device_index}")
    except (DeviceError, cl.Error):
        return None


def _compile_source(source: str, device) -> bool:
    """Whether ``source`` builds for the device of this machine the facts name."""
    import pyopencl as cl

    from ..errors import DeviceError
    from ..runtime import build

    live = _live_device(device)
    if live is None:
        return False
    try:
        build(source, live, "joint")
    except (DeviceError, cl.Error):
        return False
    return True


def _compile(generated, device, joint=None) -> str | None:
    """Compile ``generated``'s kernels (within ``joint``'s program, where given) for the device of this machine
    the facts name; why it failed, or None."""
    import pyopencl as cl

    from ..errors import DeviceError
    from ..runtime import Executable, launch_one_work_group

    live = _live_device(device)
    if live is None:
        return None
    try:
        Executable(generated, live, joint).build()
    except DeviceError as e:
        return e.message
    except cl.Error as e:
        return f"OpenCL: {e}"
    try:  # the runtime's compile at the first launch, done here too; what fails is the runner's to find
        launch_one_work_group(generated, live, joint)
    except (DeviceError, cl.Error):
        pass
    return None


class InlineBuilder:
    """Builds in the calling process, one candidate at a time (the futures are done when returned): for a
    machine of one core, and for debugging."""

    def build(self, builds: Sequence[Build]) -> list[Future]:
        futures = []
        for built in build_candidates(builds):
            future = Future()
            future.set_result(built)
            futures.append(future)
        return futures

    def close(self) -> None:
        pass

    @property
    def process_ids(self) -> tuple[int, ...]:
        return ()


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _builder_process():
    """A builder process's start: its numerical libraries on one thread (it shares the machine with the device),
    and a watch that ends it once the process that started it is gone -- killed, the tuner never closes the
    pool's queue, and the builder would wait on it for ever, holding its route spaces' memory."""
    from .runner import _HOST_THREADS

    os.environ.update({name: "1" for name in _HOST_THREADS})
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(PARENT_WATCH_S)
        os._exit(0)

    threading.Thread(target=watch, name="liftpy-builder-parent-watch", daemon=True).start()


#: how often a builder process looks whether the process that started it is still there
PARENT_WATCH_S = 1.0


class LocalBuilder:
    """Builds on ``workers`` processes of this machine (default: one a CPU, at most ``MAX_WORKERS``; spawned,
    so that no OpenCL state is shared), each keeping the route spaces of the tasks it built last; a build asking
    to (``Build.compile``) compiles its kernels too, off the runner's path. Their ids (``process_ids``) let a
    runner on the same machine pause them while it times (:class:`~liftpy.tuning.runner.LocalRunner`'s
    ``quiet``)."""

    #: a local builder compiles for a device of its machine
    compiles = True

    #: the most processes a builder starts by default (each holds its tasks' route spaces)
    MAX_WORKERS = 8
    #: parts of a batch a process builds (:meth:`build`)
    PARTS = 2

    def __init__(self, workers: int | None = None):
        self.workers = workers or min(self.MAX_WORKERS, _usable_cpus())
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_builder_process)

    def reset(self) -> None:
        """Kill the processes (one is stuck past the tuner's time limit) and start afresh."""
        for process in list((self._pool._processes or {}).values()):
            process.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()

    def build(self, builds: Sequence[Build]) -> list[Future]:
        """A future per candidate; the candidates are cut into parts, each built (and compiled) together
        (:func:`build_candidates`): two parts a process, so that one that takes longer (a candidate's
        kernels can take ten times another's to compile) leaves the other processes the rest."""
        builds = list(builds)
        size = max(1, -(-len(builds) // (self.PARTS * self.workers)))
        futures = []
        for first in range(0, len(builds), size):
            part = builds[first:first + size]
            mine = [Future() for _ in part]
            self._pool.submit(build_candidates, part).add_done_callback(functools.partial(_hand_out, mine))
            futures += mine
        return futures

    @property
    def process_ids(self) -> tuple[int, ...]:
        return tuple(self._pool._processes or ())  # started on the first build

    @property
    def broken(self) -> bool:
        """Whether a process died under the pool (it takes no builds until :meth:`reset`)."""
        return bool(self._pool._broken)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _hand_out(futures: list[Future], whole: Future) -> None:
    """A part's answer handed to its candidates' futures: each its own result, or the part's fate (cancelled,
    or its process died)."""
    if whole.cancelled():
        for future in futures:
            future.cancel()
        return
    error = whole.exception()
    for position, future in enumerate(futures):
        if future.done():  # cancelled by its waiter
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(whole.result()[position])


__all__ = ["Build", "Built", "Builder", "InlineBuilder", "LocalBuilder", "build_candidate", "build_candidates"]
