"""The runner: built candidates checked and timed on a device, in a worker process that can be killed.

A :class:`Batch` is a task's built candidates, the seed of the inputs they are checked on and the
:class:`~liftpy.tuning.measure.Timing`. The worker checks each candidate -- its OpenCL program built, run once
on the batch's inputs with its output and intermediate buffers filled with NaN, compared with the naive
lowering's output on the same inputs within the program's float32 error bound (:mod:`liftpy.tuning.program`,
:mod:`liftpy.tuning.tolerance`) -- then times those that are correct in rounds taken in turns. Each answer is a
future of a result the database records.

A build failure, a runtime error, a wrong result, a run past the time limit or a crash of the OpenCL runtime
is a fault of the device or of the configuration: a recorded failure with its cause, charged to the candidate
that was running, and the rest of the batch goes on in a fresh worker. A Python exception inside liftpy is a
bug (status ``bug``): the tuner stops.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from .measure import Timing


@dataclass(frozen=True)
class Batch:
    """Candidates of one task to check and time together: ``builts`` (each with its generated program, or
    the failure that stopped its build), checked on inputs drawn from ``seed``, timed by ``timing``."""

    task: object
    builts: tuple
    seed: int
    timing: Timing = field(default_factory=Timing)


class Runner(Protocol):
    """Checks and times batches on a device; one future per candidate, of the result the database records
    (``device``: the record of the device it ran on)."""

    def run(self, batch: Batch) -> list[Future]: ...

    def close(self) -> None: ...


def device_record(device) -> dict:
    """The database's record of a device: its name, driver and platform."""
    from ..runtime import device_info, get_device

    info = device_info(get_device(device))
    return {"name": info.name, "driver": info.driver, "platform": info.platform}


# ------------------------------------------------------------------------------------------------ in the worker
def measure_batch(batch: Batch, device, step=lambda index: None, quiet: Sequence[int] = (),
                  host=None) -> dict[int, dict]:
    """Check and time a batch on ``device`` (see the module's docstring): a result per candidate, by its
    position. ``step(i)`` is told before candidate ``i`` runs (what a hang or a crash is charged to);
    ``quiet``: processes of this machine paused while the candidates are timed (a builder's); ``host``: a lock
    held while they are timed, which the tuner's own process holds while it computes (:class:`LocalRunner`)."""
    import pyopencl as cl

    from ..errors import DeviceError
    from ..runtime import CacheFlush, Executable
    from .program import close_to, reference_executable, source_hashes

    task, timing = batch.task, batch.timing
    reference = reference_executable(task, device)
    inputs = task.check_inputs(batch.seed)
    constants = {name: inputs[name] for name in task.constants}
    per_call = {name: value for name, value in inputs.items() if name not in constants}
    expected, tolerance = reference.run(inputs)
    results: dict[int, dict] = {}
    checked = []  # (position, prepared, first ms, the result so far)
    held_bytes, budget = 0, device.global_mem_size // 4
    flush = CacheFlush(device) if timing.cold else None

    def failed(start, status, cause, **more):
        return {"status": status, "cause": cause[:2000], "seconds": time.perf_counter() - start,
                "check_seed": batch.seed, **more}

    for position, built in enumerate(batch.builts):
        if built.failure is not None:
            results[position] = {**built.failure, "seconds": built.seconds, "check_seed": batch.seed}
            continue
        step(position)
        start = time.perf_counter() - built.seconds
        generated = built.generated
        hashes = source_hashes(generated.sources)
        try:
            prepared = Executable(generated, device, built.joint).prepare(constants)
        except DeviceError as e:
            results[position] = failed(start, "build_error", e.message)
            continue
        except cl.Error as e:
            results[position] = failed(start, "runtime_error", f"OpenCL: {e}")
            continue
        try:
            run = prepared.run(per_call, poison=True)
            error = close_to(run.output, expected, tolerance)
        except DeviceError as e:
            results[position] = failed(start, "runtime_error", e.message, source_hashes=hashes)
            continue
        except cl.Error as e:
            results[position] = failed(start, "runtime_error", f"OpenCL: {e}", source_hashes=hashes)
            continue
        memory = sum(b.bytes for b in generated.buffers if b.role != "input")
        result = {"status": "ok" if error <= 1 else "wrong", "cause": "", "max_error": error,
                  "memory_bytes": memory, "moved_bytes": prepared.moved_bytes, "source_hashes": hashes,
                  "check_seed": batch.seed, "time_ms": run.kernel_ms, "times_ms": [run.kernel_ms],
                  "stage_ms": run.per_kernel_ms, "seconds": time.perf_counter() - start}
        if error > 1:
            result["cause"] = (f"output differs from the naive lowering's: largest error {error:.3g} times the "
                               "tolerance" + (" (NaN or infinite elements: never written, or overflowed)"
                                              if error == float("inf") else ""))
            results[position] = result
            continue
        checked.append((position, prepared, run.kernel_ms, result))
        held_bytes += memory
        if held_bytes > budget:  # time what is held, and let its buffers go, before checking more
            _time_in_turns(checked, per_call, timing, step, quiet, results, flush, host)
            checked, held_bytes = [], 0
    _time_in_turns(checked, per_call, timing, step, quiet, results, flush, host)
    return results


def _time_in_turns(checked, per_call, timing: Timing, step, quiet, results, flush, host=None) -> None:
    """Time the checked candidates in rounds taken in turns (:mod:`liftpy.tuning.measure`), each call after
    ``flush`` where the timing is cold, with ``host`` held (the lock first, then the builders paused: the tuner
    may be waiting on them with the lock held); each one's result gets the median of its rounds, the rounds'
    figures, and its kernels' medians. Against ``timing.cutoff_ms``, a candidate is judged by the fastest call of
    its warm-up, not by its checked run, which shares the machine with the builders compiling the next batch,
    nor by one call, which can meet the device's threads waking up."""
    from .measure import median

    if not checked:
        return
    between = flush.ms if flush is not None else 0.0  # a round lasts min_round_ms, its flushes counted
    with _held(host), _paused(quiet):
        checked = _warmed_up(checked, per_call, timing, step, results, flush)
        calls = [timing.calls_for(timing.min_round_ms, first_ms + between) for _, _, first_ms, _ in checked]
        rounds: list[list[float]] = [[] for _ in checked]
        kernels: list[list[dict]] = [[] for _ in checked]
        start, taken, active = time.perf_counter(), 0, range(len(checked))
        while taken < timing.rounds or (taken < timing.max_rounds
                                        and (time.perf_counter() - start) * 1e3 < timing.min_span_ms):
            for i in active:
                position, prepared, _, _ = checked[i]
                step(position)
                run = prepared.run(per_call, repeat=calls[i], cold=flush)
                rounds[i].append(sum(run.runs_ms) / len(run.runs_ms))
                kernels[i].append(run.per_kernel_ms)
            taken += 1
            if taken == 1:  # the race: who lost by far in the first round takes no more
                active = [i for i, on in zip(active, timing.racing([r[0] for r in rounds])) if on]
    for i, (position, _, _, result) in enumerate(checked):
        per_kernel = {name: median([k[name] for k in kernels[i]]) for name in kernels[i][0]}
        results[position] = {**result, "time_ms": median(rounds[i]), "times_ms": rounds[i], "stage_ms": per_kernel,
                             "seconds": result["seconds"] + sum(rounds[i]) * calls[i] / 1e3}
        if len(rounds[i]) < timing.rounds:
            results[position]["cause"] = f"timed for {len(rounds[i])} round(s): over {timing.race:g}x the leader"


def _warmed_up(checked, per_call, timing: Timing, step, results, flush) -> list:
    """The checked candidates after their warm-up (``timing.warmup_ms`` of calls, as the checked run's time
    says; two calls at least where a cutoff judges it), each with its warm-up's fastest call as its first time;
    those slower than ``timing.cutoff_ms`` left out, timed by that call alone, into ``results``."""
    between = flush.ms if flush is not None else 0.0
    kept = []
    for position, prepared, first_ms, result in checked:
        calls = timing.calls_for(timing.warmup_ms, first_ms + between) if timing.warmup_ms > 0 else 0
        if timing.cutoff_ms is not None:
            calls = max(2, calls)
        if not calls:
            kept.append((position, prepared, first_ms, result))
            continue
        step(position)
        run = prepared.run(per_call, repeat=calls, cold=flush)
        fastest = min(run.runs_ms)
        if timing.cutoff_ms is None or fastest <= timing.cutoff_ms:
            kept.append((position, prepared, fastest, result))
        else:
            results[position] = {**result, "time_ms": fastest, "times_ms": [fastest], "stage_ms": run.per_kernel_ms,
                                 "cause": "timed once: far slower than the best"}
    return kept


#: seconds the worker waits for the tuner's process to finish computing before it times anyway
HOST_WAIT = 60.0


@contextlib.contextmanager
def _held(lock, wait: float = HOST_WAIT):
    """``lock`` held for the block (none: nothing to hold); not had within ``wait`` seconds, the block runs
    without it, as it would have before the lock existed."""
    got = lock is not None and lock.acquire(timeout=wait)
    try:
        yield
    finally:
        if got:
            lock.release()


@contextlib.contextmanager
def _paused(pids: Sequence[int]):
    """Processes of this machine stopped while the block runs (SIGSTOP, SIGCONT after): a builder compiling
    beside the device would take a core from the kernels being timed. Their parent continues them too, should
    this process die inside the block."""
    stopped = []
    if hasattr(signal, "SIGSTOP"):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            except OSError:  # gone: nothing to pause
                pass
    try:
        yield
    finally:
        _continue(stopped)


def _continue(pids: Sequence[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass


def _worker(conn, device_spec, host=None):
    from ..runtime import get_device

    device = get_device(device_spec)
    from . import program  # noqa: F401  imported before "ready": a batch's time limit counts the batch only

    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        if message[0] == "prepare":  # the task's reference made ahead of its first batch; a failure is met there
            try:
                program.reference_executable(message[1], device)
            except Exception:
                pass
            conn.send(("prepared",))
            continue
        _, batch, quiet = message
        try:
            results = measure_batch(batch, device, lambda position: conn.send(("step", position)), quiet, host)
            conn.send(("done", results))
        except Exception:  # a bug in liftpy, not a fault of the device: the tuner stops and saves the traceback
            conn.send(("bug", traceback.format_exc()))


#: thread-pool sizes of the host's numerical libraries (numpy's BLAS, OpenMP) in the measuring process
_HOST_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def _single_threaded_host_libraries():
    """The worker's environment: after a multi-threaded BLAS call (drawing inputs, the reference), OpenBLAS's
    threads spin for a while and take a core from the OpenCL runtime's, doubling the next kernel times measured
    (benchmarks/results/notes-tuning.md)."""
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


# ------------------------------------------------------------------------------------------------ the runner
class LocalRunner:
    """Measures batches on a device of this machine, one batch at a time, in a child process; a candidate
    running past ``timeout`` seconds (counted from when the started, ready worker begins it) or a crash kills
    and replaces the worker, and the batch goes on without that candidate. ``quiet``: a callable giving the ids
    of processes paused while candidates are timed (a :class:`~liftpy.tuning.builder.LocalBuilder`'s); the
    tuner's own computing (a search ranking its candidates, a model learning) is kept apart from the timing by
    :meth:`host_work`: on 2 cores it took one of the device's, and a batch's first rounds ran at 1.5-2x."""

    #: its device is one of this machine's (a local builder may compile for it)
    on_this_machine = True
    #: seconds a new worker may take to import liftpy and open the device before it is ready
    START_TIMEOUT = 300.0
    #: workers that failed to start in a row before the tuner stops: no trial can be measured
    START_FAILURES = 2

    def __init__(self, device=None, timeout: float = 120.0, quiet=lambda: ()):
        from ..runtime import device_info, get_device

        leave_if_importing_the_script()
        self.device_spec = device if isinstance(device, (str, int, type(None))) else None
        #: the device's record in the database, and its facts (what a builder generates for)
        self.device = device_record(device)
        self.device_facts = device_info(get_device(device))
        self.timeout = timeout
        self.quiet = quiet
        self._ctx = multiprocessing.get_context("spawn")
        self._host = None  # the worker's timing lock (a new one a worker: one that died may hold the last)
        self._process = None
        self._conn = None
        self._start_failures = 0
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="liftpy-runner")
        self._closing = False

    def prepare(self, task) -> None:
        """Start the worker and make ``task``'s reference (the naive lowering, checked and built) before its
        first batch comes: while the builder builds it."""
        self._thread.submit(self._prepare, task)

    def _prepare(self, task) -> None:
        if self._closing or ((self._process is None or not self._process.is_alive()) and self._start() is not None):
            return  # a worker that cannot start: the first batch says why
        try:
            self._conn.send(("prepare", task))
            if self._conn.poll(self.timeout) and self._conn.recv() == ("prepared",):
                return
        except (EOFError, ConnectionError, BrokenPipeError):
            pass
        self._kill()

    @contextlib.contextmanager
    def host_work(self):
        """A block of this process's own computing, never while the worker times candidates: it waits for a
        timing under way to end (``timeout`` seconds at most: a hung worker is the time limit's to meet), and a
        timing waits for the block. Not around waiting for the runner's results: the worker would wait for it."""
        with _held(self._host, self.timeout):
            yield

    def run(self, batch: Batch) -> list[Future]:
        futures = [Future() for _ in batch.builts]
        self._thread.submit(self._serve, batch, futures)
        return futures

    def _serve(self, batch: Batch, futures: list[Future]) -> None:
        try:
            for position, result in self._measure(batch).items():
                futures[position].set_result({**result, "device": self.device})
        except BaseException as e:  # the tuner sees it where it waits
            for future in futures:
                if not future.done():
                    future.set_exception(e)

    def _measure(self, batch: Batch) -> dict[int, dict]:
        """Every candidate's result; after a hang or a crash, the candidates not measured yet again in a fresh
        worker, the one it is charged to recorded as such."""
        results: dict[int, dict] = {}
        todo = list(range(len(batch.builts)))
        while todo:
            if self._closing:
                from ..errors import DeviceError

                raise DeviceError("the runner was closed before the batch was measured")
            part = Batch(batch.task, tuple(batch.builts[i] for i in todo), batch.seed, batch.timing)
            got, culprit = self._measure_part(part)
            results.update({todo[i]: r for i, r in got.items()})
            if culprit is None:
                missing = [i for i in todo if i not in results]
                for i in missing:  # a worker that answered for less than its batch: never expected
                    results[i] = {"status": "bug", "cause": f"the measuring process gave no result for candidate {i}"}
                return results
            position, failure = culprit
            results[todo[position]] = {**failure, "check_seed": batch.seed}
            todo = [i for i in todo if i not in results]
        return results

    def _measure_part(self, batch: Batch) -> tuple[dict[int, dict], tuple[int, dict] | None]:
        """One worker's run of a batch: its results, and the candidate a hang or crash is charged to."""
        if self._process is None or not self._process.is_alive():
            failure = self._start()
            if failure is not None:
                self._start_failures += 1
                if self._start_failures >= self.START_FAILURES:
                    from ..errors import DeviceError

                    raise DeviceError(f"{failure['cause']}, {self._start_failures} times in a row: no trial can be "
                                      "measured (its error is printed above)")
                return {}, (0, failure)
            self._start_failures = 0
        quiet = tuple(self.quiet())
        current, start = 0, time.perf_counter()
        try:
            self._conn.send(("batch", batch, quiet))
            while True:
                if not self._conn.poll(self.timeout):
                    self._kill()
                    return {}, (current, {"status": "timeout", "cause": f"no result after {self.timeout:g} s "
                                          "(build, check and time)", "seconds": time.perf_counter() - start})
                message = self._conn.recv()
                if message[0] == "step":
                    current, start = message[1], time.perf_counter()
                elif message[0] == "done":
                    return message[1], None
                else:  # a bug: every candidate of the batch carries its traceback
                    return {i: {"status": "bug", "cause": message[1]} for i in range(len(batch.builts))}, None
        except (EOFError, ConnectionError, BrokenPipeError):
            code = self._process.exitcode if self._process is not None else None
            self._kill()
            return {}, (current, {"status": "crash", "cause": f"the measuring process died (exit code {code})",
                                  "seconds": time.perf_counter() - start})
        finally:
            _continue(quiet)  # paused by a worker that died while timing: never left stopped

    def _start(self) -> dict | None:
        """A fresh worker, waited for until it is ready; a failure to start as a result (None when ready)."""
        from ..errors import InputError

        parent, child = self._ctx.Pipe()
        self._host = self._ctx.Lock()
        process = self._ctx.Process(target=_worker, args=(child, self.device_spec, self._host), daemon=True)
        try:
            with _single_threaded_host_libraries():
                process.start()
        except RuntimeError as e:  # multiprocessing's refusal when a script tunes as it is imported
            parent.close()
            child.close()
            if "bootstrapping phase" not in str(e):
                raise
            raise InputError(SCRIPT_GUARD) from None
        self._process = process
        child.close()
        self._conn = parent
        try:
            if parent.poll(self.START_TIMEOUT) and parent.recv() == ("ready",):
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

    def close(self):
        """Stop the worker; a batch being measured (the tuner interrupted) ends at once, unrecorded."""
        self._closing = True
        process = self._process
        if process is not None:
            process.kill()  # the thread measuring a batch sees its pipe close, and stops
        self._thread.shutdown(wait=True, cancel_futures=True)
        self._kill()


#: what a script that tunes as it is imported is told (the tuner's processes import it again)
SCRIPT_GUARD = ("the tuner builds and measures in processes of its own, which import your script again: call "
                "liftpy.tune (or tune_program) under `if __name__ == \"__main__\":` in a script")


def leave_if_importing_the_script() -> None:
    """In a process the tuner spawned, importing the user's script again (which tunes at its top level): leave
    at once, quietly, before that second tuning starts processes of its own; the tuner's process, seeing it
    gone, says why in one line (SCRIPT_GUARD)."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(1)


__all__ = ["Batch", "Runner", "LocalRunner", "device_record", "measure_batch"]
