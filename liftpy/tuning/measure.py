"""Measuring configurations in a worker process that can be killed and restarted.

A trial (:func:`liftpy.tuning.program.run_program_job`) lowers one configuration of the automatic route, builds
it, runs it once on inputs drawn for that trial (seeded by it, recorded) with its output and intermediate
buffers filled with NaN, checks that output against the naive lowering's on the same inputs, then times it
(warm-up, then repeats; the median of the summed profiling-event times of all its kernels).

A build failure, a runtime error, a wrong result, a run past the time limit or a crash of the OpenCL runtime
is a fault of the device or of the configuration: a recorded failure with its cause, and the search goes on
with a fresh worker when needed. A Python exception inside liftpy is a bug: the worker reports its traceback
(status ``bug``) and the tuner stops.
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


@dataclass(frozen=True)
class Job:
    #: what is tuned: a ProgramTask (see liftpy.tuning.db.Subject)
    subject: object
    algorithm: str
    config: dict
    repeat: int = 5
    warmup: int = 1
    #: "module:function" applied to the generated program before it is built (testing only: planted faults);
    #: called as function(config, generated) and returns the GeneratedProgram to run
    fault: str | None = None
    #: a first run slower than this (ms) is not repeated: a configuration far behind the best is timed once
    cutoff_ms: float | None = None
    #: the seed of the inputs this trial is checked on (see check_seed)
    seed: int = 0


def check_seed(subject, algorithm: str, config: dict, search_seed: int = 0, measurement: int = 0) -> int:
    """The seed of a trial's inputs: every trial (and every later measurement of it) is checked on inputs of
    its own, so that a kernel cannot pass on what an earlier trial left in memory, and the seed is recorded
    with the trial so that its check can be repeated."""
    from .db import config_key

    text = f"{subject.key}|{algorithm}|{config_key(config)}|{search_seed}|{measurement}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def planted(job: Job, executable):
    """The executable with a test's planted fault (``job.fault``, "module:function") in its kernels."""
    from ..runtime import Executable

    module, name = job.fault.split(":")
    generated = getattr(importlib.import_module(module), name)(job.config, executable.generated)
    return Executable(generated, executable.device)


def trial_result(job: Job, start: float, error: float, timed_once: bool, result, stage_ms: dict, reference: str,
                 tolerance: str, memory_bytes: int, hashes: dict, moved_bytes: int | None) -> dict:
    """A measured trial as the database records it: ok or wrong by ``error`` (the largest difference from
    ``reference``, in units of ``tolerance``), its times (``result``: the timed runs, or the checked run alone
    when the trial was ``timed_once``)."""
    ok = error <= 1
    return {
        "status": "ok" if ok else "wrong",
        "cause": ("" if ok else f"output differs from {reference}: largest error {error:.3g} times {tolerance}"
                  + (" (NaN or infinite elements: never written, or overflowed)" if error == float("inf") else ""))
        + ("; timed once: far slower than the best" if timed_once else ""),
        "time_ms": result.kernel_ms,
        "times_ms": [float(t) for t in result.runs_ms],
        "stage_ms": stage_ms,
        "memory_bytes": memory_bytes,
        "moved_bytes": moved_bytes,
        "max_error": error,
        "source_hashes": hashes,
        "check_seed": job.seed,
        "seconds": time.perf_counter() - start,
    }


def _worker(conn, device_spec):
    from ..runtime import get_device

    device = get_device(device_spec)
    from . import program  # imported before "ready": a job's time limit counts the job only

    conn.send("ready")
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        try:
            conn.send(program.run_program_job(job, device))
        except Exception:  # a bug in liftpy, not a fault of the device: the tuner stops and saves the traceback
            conn.send({"status": "bug", "cause": traceback.format_exc()})


#: thread-pool sizes of the host's numerical libraries (numpy's BLAS, OpenMP) in the measuring process
_HOST_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def _single_threaded_host_libraries():
    """The worker's environment: after a multi-threaded BLAS call (the reference check), OpenBLAS's threads
    spin for a while and take a core from the OpenCL runtime's, doubling the next kernel times measured
    (benchmarks/results/notes-tuning.md). One BLAS thread costs the reference a little time."""
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
    """Runs jobs in a child process; a job running past ``timeout`` seconds (counted from when the worker,
    started and ready, receives it) or a crash kills and replaces the worker."""

    #: seconds a new worker may take to import liftpy and open the device before it is ready
    START_TIMEOUT = 300.0

    def __init__(self, device=None, timeout: float = 120.0):
        self.device_spec = device if isinstance(device, (str, int, type(None))) else None
        self.timeout = timeout
        self._ctx = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None
        self._start_failures = 0

    def _start(self) -> dict | None:
        """A fresh worker, waited for until it is ready; a failure to start as a result (None when ready)."""
        from ..errors import InputError

        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_worker, args=(child, self.device_spec), daemon=True)
        try:
            with _single_threaded_host_libraries():
                process.start()
        except RuntimeError as e:  # multiprocessing's refusal when a script tunes as it is imported
            parent.close()
            child.close()
            if "bootstrapping phase" not in str(e):
                raise
            raise InputError("the tuner measures in a process of its own, which imports your script again: call "
                             "liftpy.tune (or tune_program) under `if __name__ == \"__main__\":` in a script") from None
        self._process = process
        child.close()
        self._conn = parent
        try:
            if parent.poll(self.START_TIMEOUT) and parent.recv() == "ready":
                return None
        except (EOFError, ConnectionError):
            pass
        code = self._process.exitcode
        self._kill()
        return {"status": "crash", "cause": f"the measuring process did not start (exit code {code})"}

    def _kill(self):
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
        self._process = None
        self._conn = None

    #: workers that failed to start in a row before the search stops: no trial can be measured
    START_FAILURES = 2

    def measure(self, job: Job) -> dict:
        if self._process is None or not self._process.is_alive():
            failure = self._start()
            if failure is not None:
                self._start_failures += 1
                if self._start_failures >= self.START_FAILURES:
                    from ..errors import DeviceError

                    raise DeviceError(f"{failure['cause']}, {self._start_failures} times in a row: no trial can be "
                                      "measured (its error is printed above)")
                return {**failure, "check_seed": job.seed}
            self._start_failures = 0
        start = time.perf_counter()
        self._conn.send(job)
        if not self._conn.poll(self.timeout):
            self._kill()
            return {"status": "timeout", "cause": f"no result after {self.timeout:g} s (generate, build and run)",
                    "seconds": time.perf_counter() - start, "check_seed": job.seed}
        try:
            return self._conn.recv()
        except (EOFError, ConnectionError):
            code = self._process.exitcode if self._process is not None else None
            self._kill()
            return {"status": "crash", "cause": f"the measuring process died (exit code {code})",
                    "seconds": time.perf_counter() - start, "check_seed": job.seed}

    def close(self):
        if self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
                self._process.join(5)
            except (BrokenPipeError, OSError):
                pass
        self._kill()
