"""Measuring configurations in a worker process that can be killed and restarted.

A trial generates the pipeline for one configuration, builds it, runs it (warm-up, then repeats; the median
of the summed profiling-event times of all its kernels) and checks the output against the float64
reference. A build failure, a runtime error, a wrong result, a run past the time limit or a crash of the
OpenCL runtime is a recorded failure with its cause; the search goes on with a fresh worker when needed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import multiprocessing
import os
import time
import traceback
from dataclasses import dataclass

import numpy as np

from ..nn.layers import ConvLayer


@dataclass(frozen=True)
class Job:
    layer: ConvLayer
    algorithm: str
    config: dict
    repeat: int = 5
    warmup: int = 1
    fault: str | None = None  # "module:function" applied to the output before the check (testing only)
    #: a first run slower than this (ms) is not repeated: a configuration far behind the best is timed once
    cutoff_ms: float | None = None


def _inputs(layer: ConvLayer, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((layer.batch, layer.channels, layer.height, layer.width)).astype(np.float32)
    fan_in = layer.channels * layer.kernel_height * layer.kernel_width
    w = (rng.standard_normal((layer.kernels, layer.channels, layer.kernel_height, layer.kernel_width))
         / np.sqrt(fan_in)).astype(np.float32)
    b = rng.standard_normal(layer.kernels).astype(np.float32)
    return x, w, b


def run_job(job: Job, device, cache: dict) -> dict:
    """One trial, in the current process. ``cache`` keeps each layer's inputs and reference."""
    from ..errors import ConstraintError, DeviceError, LiftError
    from ..nn import conv
    from ..nn.reference import conv2d_reference

    start = time.perf_counter()
    if job.layer not in cache:
        x, w, b = _inputs(job.layer)
        cache.clear()
        cache[job.layer] = (x, w, b, conv2d_reference(x, w, b, job.layer.stride, job.layer.padding))
    x, w, b, reference = cache[job.layer]
    try:
        plan = conv.plan(job.layer, job.config, device=device, algorithm=job.algorithm)
    except DeviceError as e:
        return {"status": "build_error", "cause": e.message[:2000], "seconds": time.perf_counter() - start}
    except ConstraintError as e:  # the worker's device (or liftpy version) rules the configuration out
        return {"status": "invalid", "cause": e.message[:2000], "seconds": time.perf_counter() - start}
    except LiftError as e:
        return {"status": "codegen_error", "cause": e.message[:2000], "seconds": time.perf_counter() - start}
    hashes = {k: hashlib.sha256(s.encode()).hexdigest() for k, s in plan.sources.items()}
    try:
        result = plan.run(x, w, b, repeat=1, warmup=0, check=False)
        timed_once = job.cutoff_ms is not None and result.kernel_ms > job.cutoff_ms
        if not timed_once:
            result = plan.run(x, w, b, repeat=job.repeat, warmup=job.warmup, check=False)
    except DeviceError as e:
        status = "build_error" if "build" in e.message else "runtime_error"
        return {"status": status, "cause": e.message[:2000], "source_hashes": hashes,
                "seconds": time.perf_counter() - start}
    output = result.output
    if job.fault:
        module, name = job.fault.split(":")
        output = getattr(importlib.import_module(module), name)(job.config, output.copy())
    scale = max(1.0, float(np.abs(reference).max()))
    error = float(np.abs(output - reference).max()) / scale
    ok = bool(np.isfinite(error) and error <= conv.TOLERANCE)
    return {
        "status": "ok" if ok else "wrong",
        "cause": ("" if ok else f"output differs from the reference: max relative error {error:.3g}")
        + ("; timed once: far slower than the best" if timed_once else ""),
        "time_ms": result.kernel_ms,
        "times_ms": [float(t) for t in result.runs_ms],
        "stage_ms": result.stage_ms,
        "memory_bytes": plan.memory_bytes,
        "max_error": error,
        "source_hashes": hashes,
        "seconds": time.perf_counter() - start,
    }


def _worker(conn, device_spec):
    from ..runtime import get_device

    device = get_device(device_spec)
    cache: dict = {}
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        try:
            conn.send(run_job(job, device, cache))
        except Exception:  # a bug in liftpy: record it, keep measuring
            conn.send({"status": "crash", "cause": traceback.format_exc()[-2000:]})


#: thread-pool sizes of the host's numerical libraries (numpy's BLAS, OpenMP) in the measuring process
_HOST_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def _single_threaded_host_libraries():
    """The worker's environment: after a multi-threaded BLAS call (the reference check), OpenBLAS's threads
    spin for a while and took a core from PoCL's, doubling the next kernel times measured (vgg16.12: 34 ms
    instead of 17). One BLAS thread costs the reference a little time and keeps the timings clean."""
    saved = {name: os.environ.get(name) for name in _HOST_THREADS}
    os.environ.update({name: "1" for name in _HOST_THREADS})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Measurer:
    """Runs jobs in a child process; a hang past ``timeout`` seconds or a crash kills and replaces it."""

    def __init__(self, device=None, timeout: float = 120.0):
        self.device_spec = device if isinstance(device, (str, int, type(None))) else None
        self.timeout = timeout
        self._ctx = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None

    def _start(self):
        parent, child = self._ctx.Pipe()
        self._process = self._ctx.Process(target=_worker, args=(child, self.device_spec), daemon=True)
        with _single_threaded_host_libraries():
            self._process.start()
        child.close()
        self._conn = parent

    def _kill(self):
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
        self._process = None
        self._conn = None

    def measure(self, job: Job) -> dict:
        if self._process is None or not self._process.is_alive():
            self._start()
        start = time.perf_counter()
        self._conn.send(job)
        if not self._conn.poll(self.timeout):
            self._kill()
            return {"status": "timeout", "cause": f"no result after {self.timeout:.0f} s (generate, build and run)",
                    "seconds": time.perf_counter() - start}
        try:
            return self._conn.recv()
        except (EOFError, ConnectionError):
            code = self._process.exitcode if self._process is not None else None
            self._kill()
            return {"status": "crash", "cause": f"the measuring process died (exit code {code})",
                    "seconds": time.perf_counter() - start}

    def close(self):
        if self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
                self._process.join(5)
            except (BrokenPipeError, OSError):
                pass
        self._kill()
