"""The builder: candidates lowered and their kernels generated, on a pool of processes, apart from the device.

A :class:`Build` asks for one configuration of a task on a device (its facts, :class:`~liftpy.device.Device`,
not the device itself: a builder needs no OpenCL); a :class:`Built` holds the generated program the runner
builds for its device and times, or why there is none (the configuration cannot be lowered or generated: a
recorded failure; a Python exception inside liftpy: status ``bug``, which stops the tuner).
"""

from __future__ import annotations

import multiprocessing
import os
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
    it; ``seconds``: the time lowering and generating took; ``features``: what a cost model reads of its
    kernels (:mod:`liftpy.tuning.features`)."""

    build: Build
    generated: object | None
    failure: dict | None
    seconds: float
    features: dict | None = None

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
    """Lower ``build``'s configuration in its task's route space and generate its kernels: a failure of the
    configuration is a result (``invalid``, ``codegen_error``), a Python exception a ``bug``."""
    from ..codegen.program import generate
    from ..errors import ConstraintError, LiftError, RewriteError
    from .features import program_features

    start = time.perf_counter()
    task = build.task

    def failed(status: str, cause: str) -> Built:
        return Built(build, None, {"status": status, "cause": cause[:2000]}, time.perf_counter() - start)

    try:
        try:
            program = _space(task, build.device).lower(build.config)
            generated = generate(program, task.size_map, task.function, build.device)
        except (RewriteError, ConstraintError) as e:
            return failed("invalid", e.message)
        except LiftError as e:
            return failed("codegen_error", e.message)
        if build.fault:  # a test's planted fault, in the kernels as a buggy code generator could write them
            import importlib

            module, name = build.fault.split(":")
            generated = getattr(importlib.import_module(module), name)(build.config, generated)
        features = program_features(generated, build.device)
        if build.compile:
            failure = _compile(generated, build.device)
            if failure is not None:
                return failed("build_error", failure)
    except Exception:  # a bug in liftpy, not a fault of the configuration: the tuner stops with the traceback
        return failed("bug", traceback.format_exc())
    return Built(build, generated, None, time.perf_counter() - start, features)


def _compile(generated, device) -> str | None:
    """Compile ``generated``'s kernels for the device of this machine the facts name; why it failed, or None.
    A failure to open the device is no fault of the candidate: the runner builds it then."""
    import pyopencl as cl

    from ..errors import DeviceError
    from ..runtime import build, get_device, launch_one_work_group

    try:
        live = get_device(f"{device.platform_index}:{device.device_index}")
    except (DeviceError, cl.Error):
        return None
    try:
        build(generated.combined_source, live, generated.function)
    except DeviceError as e:
        return e.message
    except cl.Error as e:
        return f"OpenCL: {e}"
    try:  # the runtime's compile at the first launch, done here too; what fails is the runner's to find
        launch_one_work_group(generated, live)
    except (DeviceError, cl.Error):
        pass
    return None


class InlineBuilder:
    """Builds in the calling process, one candidate at a time (the futures are done when returned): for a
    machine of one core, and for debugging."""

    def build(self, builds: Sequence[Build]) -> list[Future]:
        futures = []
        for build in builds:
            future = Future()
            future.set_result(build_candidate(build))
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


def _single_threaded():
    """A builder process's numerical libraries on one thread: it shares the machine with the device."""
    from .runner import _HOST_THREADS

    os.environ.update({name: "1" for name in _HOST_THREADS})


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

    def __init__(self, workers: int | None = None):
        self.workers = workers or min(self.MAX_WORKERS, _usable_cpus())
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_single_threaded)

    def reset(self) -> None:
        """Kill the processes (one is stuck past the tuner's time limit) and start afresh."""
        for process in list((self._pool._processes or {}).values()):
            process.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()

    def build(self, builds: Sequence[Build]) -> list[Future]:
        return [self._pool.submit(build_candidate, build) for build in builds]

    @property
    def process_ids(self) -> tuple[int, ...]:
        return tuple(self._pool._processes or ())  # started on the first build

    @property
    def broken(self) -> bool:
        """Whether a process died under the pool (it takes no builds until :meth:`reset`)."""
        return bool(self._pool._broken)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["Build", "Built", "Builder", "InlineBuilder", "LocalBuilder", "build_candidate"]
