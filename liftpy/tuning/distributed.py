"""Tuning on a Ray cluster: one runner per OpenCL device of each node, the database on the driver.

:class:`RayRunner` starts a Ray actor for each OpenCL device a node lends -- a GPU for one of the node's ``GPU``
resources, a CPU device for one of its ``opencl_cpu`` (CPU_RESOURCE) resources, ``ray start --resources
'{"opencl_cpu": 1}'`` -- pinned to that node, so that two trials never share a device. Each actor measures
with a :class:`~liftpy.tuning.runner.LocalRunner` of its own (a worker process per device: a kernel that hangs
or crashes costs that process, not the actor). Batches wait in a queue for an idle actor; several run at once.

A batch's results are resolved only when a whole result arrives: if its actor dies or its node leaves the
cluster mid-batch, the batch is run again on another actor, so no partial result is ever recorded. The driver
alone holds the database (the tuner records what the futures answer); each job carries all it needs (a
:class:`~liftpy.tuning.runner.Batch` with a portable task, its generated programs, the seed and the timing), so
a node needs liftpy and nothing else. :class:`RayBuilder` lowers and generates on any node's CPUs.

Ray is imported here only, when a runner is made: ``import liftpy.tuning`` never imports it.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Sequence

from ..errors import DeviceError, InputError
from .builder import build_candidate
from .runner import Batch, LocalRunner

#: the custom resource a node offers for each OpenCL CPU device it lends (a GPU takes Ray's ``GPU``)
CPU_RESOURCE = "opencl_cpu"
#: seconds the runners may take to start on their nodes and open their devices
START_TIMEOUT = 120.0
#: runs of one batch whose runner died before its futures fail: a batch that kills every runner it meets (or
#: a cluster losing its nodes) is not sent on forever
ATTEMPTS = 3
#: seconds between looks for nodes that joined the cluster (or came back) with a device and no runner
REJOIN_S = 30.0
#: seconds the driver's thread waits on Ray at a time before it looks at its queue again
POLL_S = 0.1
#: the variables by which Ray hides the GPUs it did not give a task; the node's devices are listed, and a runner
#: opens its device, without them, so that both see the same devices in the same order
_VISIBLE = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ONEAPI_DEVICE_SELECTOR")


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("tuning on a Ray cluster needs Ray: pip install -e '.[ray]' (or pip install 'ray>=2.9')") \
            from None
    return ray


#: seconds a cluster's head may take to accept a connection before it is said unreachable (Ray itself would
#: try for minutes)
CONNECT_TIMEOUT = 10.0


def _check_reachable(address) -> None:
    """Refuse at once a ``host:port`` where nothing listens."""
    import socket

    text = str(address or "")
    host, _, port = text.rpartition(":")
    if "://" in text or not host or not port.isdigit():  # "auto", ray://..., a bare host: left to Ray
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        raise InputError(f"--ray {address}: no Ray cluster answers there ({e.strerror or e}); start its head "
                         "with `ray start --head --port PORT`") from None


def _affinity(node_id: str):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


# ------------------------------------------------------------------------------------------------ on the nodes
def _node_devices() -> list:
    """The OpenCL devices of the node this runs on (none where it has no OpenCL platform)."""
    from ..runtime import list_devices

    for name in _VISIBLE:
        os.environ.pop(name, None)
    try:
        return list_devices()
    except DeviceError:
        return []


class _DeviceRunner:
    """A Ray actor: a :class:`LocalRunner` on one device of its node, ``spec`` its "P:D" index there."""

    def __init__(self, spec: str, timeout: float):
        for name in _VISIBLE:
            os.environ.pop(name, None)
        self.runner = LocalRunner(spec, timeout)

    def describe(self) -> tuple[dict, object]:
        """The device's record and facts."""
        return self.runner.device, self.runner.device_facts

    def measure(self, batch: Batch) -> tuple[str, object]:
        """("done", every candidate's result in order), or ("device", why) where the device could not measure
        (its worker failed to start again and again): the batch is then run elsewhere."""
        futures = self.runner.run(batch)
        try:
            return "done", [future.result() for future in futures]
        except DeviceError as e:
            return "device", e.message

    def close(self) -> None:
        """Stop the measuring process (a batch being measured ends at once): before the actor is killed, which
        would leave it running."""
        self.runner.close()


# ------------------------------------------------------------------------------------------------ the driver
@dataclass
class _Actor:
    """A runner actor as the driver knows it."""

    handle: object
    node_id: str
    spec: str
    ready: object = None  # the ref of its describe() while it starts
    record: dict | None = None
    facts: object = None
    address: str = ""
    busy: bool = False

    def describe(self) -> str:
        return f"node {self.address} [{self.node_id[:8]}] device {self.spec}"


@dataclass
class _Job:
    """A batch and its futures, with the runs that died under it."""

    batch: Batch
    futures: list
    failures: list = field(default_factory=list)


def _matches(spec, device) -> bool:
    """Whether a node's device is the one ``spec`` names: "P:D" (its index on the node) or a substring of its
    name or platform (as :func:`liftpy.runtime.get_device` reads it)."""
    if spec is None or spec == "":
        return True
    text = str(spec)
    if ":" in text or text.isdigit():
        parts = text.split(":")
        try:
            return (int(parts[0] or 0), int(parts[1] or 0) if len(parts) > 1 else 0) == \
                (device.platform_index, device.device_index)
        except ValueError:
            return False
    return text.lower() in device.name.lower() or text.lower() in device.platform.lower()


def _lends(node: dict, devices: Sequence, spec) -> list[tuple[object, dict]]:
    """The devices of a node it lends (each with the resources its runner takes): as many GPUs as it has
    ``GPU`` resources, as many CPU devices as ``opencl_cpu`` resources, those ``spec`` names only."""
    out, left = [], {name: int(node["Resources"].get(name, 0)) for name in ("GPU", CPU_RESOURCE)}
    for device in devices:
        kinds = device.kind.split("/")
        resource = "GPU" if "gpu" in kinds else CPU_RESOURCE if "cpu" in kinds else None
        if resource is None or left[resource] < 1 or not _matches(spec, device):
            continue
        left[resource] -= 1
        out.append((device, {"num_gpus": 1} if resource == "GPU" else {"resources": {CPU_RESOURCE: 1}}))
    return out


def _check_one_name(actors: Sequence[_Actor], address) -> None:
    """Refuse runners whose devices have different names: the database records trials per device name."""
    if len({a.record["name"] for a in actors}) > 1:
        found = "; ".join(f"{a.record['name']} on {a.describe()}" for a in actors)
        raise InputError(f"the Ray cluster at {address} lends devices of different names ({found}): a tuning "
                         "measures one device; choose it with --device NAME (a substring of its name)")


def _common_facts(facts: Sequence):
    """The facts a builder generates for when runners' devices of one name differ in their limits (nodes
    with different drivers or memory): the smallest of each."""
    first = facts[0]
    smaller = {}
    for name in ("compute_units", "max_work_group_size", "local_mem_size", "global_mem_size", "max_mem_alloc_size",
                 "preferred_vector_width_float", "private_mem_budget"):
        smaller[name] = min(getattr(f, name) for f in facts)
    smaller["max_work_item_sizes"] = tuple(min(sizes) for sizes in zip(*(f.max_work_item_sizes for f in facts)))
    return dataclasses.replace(first, **smaller)


class RayRunner:
    """Measures batches on a Ray cluster (``address``: its head's host:port, or "auto"): one runner actor per
    OpenCL device of each node (see the module's docstring), ``device`` (a name's substring, or "P:D") choosing
    among them; ``timeout``: each runner's limit per candidate (:class:`LocalRunner`'s). All the runners'
    devices must have one name: the database records trials per device name. ``init``: more of ``ray.init``'s
    options (when this runner connects)."""

    def __init__(self, address: str | None, device=None, timeout: float = 120.0, *,
                 start_timeout: float = START_TIMEOUT, attempts: int = ATTEMPTS, rejoin_s: float | None = REJOIN_S,
                 init: dict | None = None):
        ray = _ray()
        self._ray = ray
        self.address, self.device_spec, self.timeout = address, device, timeout
        self.start_timeout, self.attempts, self.rejoin_s = start_timeout, attempts, rejoin_s
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            _check_reachable(address)
            try:
                ray.init(address=address, log_to_driver=False, ignore_reinit_error=True,
                         logging_level=logging.ERROR, **(init or {}))
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise InputError(f"--ray {address}: no Ray cluster could be reached there ({e})") from None
        self._lock = threading.Condition()
        self._queue: collections.deque[_Job] = collections.deque()
        self._running: dict = {}  # ref -> (actor, job)
        self._starting: dict = {}  # ref -> actor, runners that joined later
        self._actors: list[_Actor] = []
        self._deaths: list[str] = []
        self._seen_nodes: set[str] = set()
        self._closing = False
        try:
            self._actors = self._start_all()
            _check_one_name(self._actors, address)
        except BaseException:
            self._kill(self._actors)
            self._shutdown()
            raise
        #: the database's record of the device, and its facts (what a builder generates for)
        self.device = dict(self._actors[0].record)
        self.device_facts = _common_facts([a.facts for a in self._actors])
        self._last_look = time.monotonic()
        self._thread = threading.Thread(target=self._serve, name="liftpy-ray-runner", daemon=True)
        self._thread.start()

    # -------------------------------------------------------------------------------- starting the runners
    def _nodes(self) -> list[dict]:
        """The cluster's live nodes that offer a device resource and were not looked at yet."""
        nodes = [n for n in self._ray.nodes() if n.get("Alive") and n["NodeID"] not in self._seen_nodes]
        return [n for n in nodes if n["Resources"].get("GPU", 0) >= 1 or n["Resources"].get(CPU_RESOURCE, 0) >= 1]

    def _launch(self, nodes: list[dict], timeout: float) -> list[_Actor]:
        """Runner actors (starting) for the devices ``nodes`` lend: each node's devices listed on it first."""
        ray = self._ray
        probe = ray.remote(num_cpus=0, max_retries=0)(_node_devices)
        refs = {n["NodeID"]: probe.options(scheduling_strategy=_affinity(n["NodeID"])).remote() for n in nodes}
        if refs:
            ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
        actor_class = ray.remote(_DeviceRunner)
        actors = []
        for node in nodes:
            self._seen_nodes.add(node["NodeID"])
            try:
                devices = ray.get(refs[node["NodeID"]], timeout=0)
            except Exception:  # gone, or too slow to answer: its devices are not lent
                ray.cancel(refs[node["NodeID"]], force=True)
                continue
            for device, resources in _lends(node, devices, self.device_spec):
                spec = f"{device.platform_index}:{device.device_index}"
                # two threads: close() stops the measuring process while a batch runs
                handle = actor_class.options(num_cpus=0, max_restarts=0, max_task_retries=0, max_concurrency=2,
                                             scheduling_strategy=_affinity(node["NodeID"]), **resources)\
                    .remote(spec, self.timeout)
                actor = _Actor(handle, node["NodeID"], spec, address=node.get("NodeManagerAddress", ""))
                actor.ready = handle.describe.remote()
                actors.append(actor)
        return actors

    def _started(self, actor: _Actor) -> bool:
        """Whether ``actor`` answered: its device's record and facts filled in."""
        try:
            actor.record, actor.facts = self._ray.get(actor.ready, timeout=0)
        except Exception as e:
            self._deaths.append(f"{actor.describe()}: did not start ({_cause(e)})")
            self._kill([actor])
            return False
        actor.ready = None
        return True

    def _start_all(self) -> list[_Actor]:
        ray = self._ray
        nodes = self._nodes()
        actors = self._launch(nodes, self.start_timeout)
        if actors:
            ray.wait([a.ready for a in actors], num_returns=len(actors), timeout=self.start_timeout)
        started = [a for a in actors if self._started(a)]
        if not started:
            found = ", ".join(f"{n.get('NodeManagerAddress', '?')}: " + ", ".join(f"{k} {v:g}" for k, v in
                              sorted(n['Resources'].items()) if k in ("GPU", CPU_RESOURCE))
                              for n in nodes) or "none"
            raise InputError(
                f"no OpenCL device to tune on in the Ray cluster at {self.address}"
                + (f" matching --device {self.device_spec}" if self.device_spec else "")
                + f" (nodes offering a device resource: {found}"
                + (f"; {'; '.join(self._deaths)}" if self._deaths else "") + "). A node lends a GPU for each of its "
                "Ray GPU resources and a CPU device for each of its opencl_cpu resources: start it with `ray start "
                "--address HEAD:PORT --num-gpus 1` or `ray start --address HEAD:PORT --resources "
                "'{\"opencl_cpu\": 1}'` (and an OpenCL driver installed there, PoCL for a CPU)")
        return started

    def _look_for_nodes(self) -> None:
        """Runners started for the devices of nodes that joined the cluster since (a node come back has a new
        id); they join the others when they answer, if their device has the same name."""
        self._last_look = time.monotonic()
        try:
            nodes = self._nodes()
        except Exception:  # the cluster's head unreachable for now: looked at again later
            return
        if nodes:
            actors = self._launch(nodes, min(30.0, self.start_timeout))
            with self._lock:
                self._starting.update({actor.ready: actor for actor in actors})

    # -------------------------------------------------------------------------------- measuring
    def run(self, batch: Batch) -> list[Future]:
        futures = [Future() for _ in batch.builts]
        with self._lock:
            if self._closing or not self._thread.is_alive():
                _fail(futures, DeviceError(f"the Ray runner of the cluster at {self.address} was closed"
                                           + (f" ({self._deaths[-1]})" if self._deaths else "")))
                return futures
            self._queue.append(_Job(batch, futures))
            self._dispatch()
            self._lock.notify_all()
        return futures

    def _dispatch(self) -> None:
        """Queued batches handed to idle runners, the one idle longest first (the lock held)."""
        while self._queue:
            idle = next((a for a in self._actors if not a.busy), None)
            if idle is None:
                return
            job = self._queue.popleft()
            idle.busy = True
            self._actors.remove(idle)
            self._actors.append(idle)
            self._running[idle.handle.measure.remote(job.batch)] = (idle, job)

    def _serve(self) -> None:
        """The driver's thread: waits on the runners' answers, resolves the futures, sends batches again, and
        now and then looks for nodes that joined. Should Ray itself fail here (the cluster's head gone), every
        batch waiting fails with that cause rather than hang."""
        try:
            self._loop()
        except BaseException as e:
            error = DeviceError(f"the Ray cluster at {self.address} failed: {_cause(e)}")
            with self._lock:
                jobs = [job for _, job in self._running.values()] + list(self._queue)
                self._running.clear()
                self._queue.clear()
                self._actors = []
                self._deaths.append(error.message)
            for job in jobs:
                _fail(job.futures, error)

    def _loop(self) -> None:
        ray = self._ray
        while True:
            with self._lock:
                if self._closing:
                    return
                self._dispatch()
                stranded = not self._actors and not self._starting and bool(self._queue)
                refs = list(self._running) + list(self._starting)
                if not refs and not stranded:
                    self._lock.wait(POLL_S * 10)
            if stranded or (self.rejoin_s is not None and time.monotonic() - self._last_look > self.rejoin_s):
                self._look_for_nodes()
                with self._lock:
                    if stranded and not self._starting and not self._actors:
                        self._fail_queue()
                continue
            if not refs:
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=POLL_S)
            with self._lock:
                for ref in ready:
                    if ref in self._starting:
                        self._joined(self._starting.pop(ref))
                    elif ref in self._running:
                        self._answered(ref, *self._running.pop(ref))

    def _joined(self, actor: _Actor) -> None:
        if not self._started(actor):
            return
        if actor.record["name"] != self.device["name"]:
            self._kill([actor])
            return
        self._actors.append(actor)

    def _answered(self, ref, actor: _Actor, job: _Job) -> None:
        """A runner's answer: the batch's results, or its runner lost (dropped) and the batch queued again."""
        ray = self._ray
        try:
            kind, answer = ray.get(ref)
        except ray.exceptions.RayTaskError as e:  # a Python exception in the actor's code: a bug, the tuner stops
            actor.busy = False
            _fail(job.futures, e)
            return
        except Exception as e:  # the actor, its worker or its node died (RayActorError, NodeDiedError, ...)
            self._lost(actor, job, _cause(e))
            return
        if kind == "device":
            self._lost(actor, job, answer)
            return
        actor.busy = False
        for future, result in zip(job.futures, answer):
            future.set_result(result)

    def _lost(self, actor: _Actor, job: _Job, cause: str) -> None:
        """A runner that can no longer measure: dropped, and its batch queued first again (up to ``attempts``
        runs)."""
        self._deaths.append(f"{actor.describe()}: {cause}")
        if actor in self._actors:
            self._actors.remove(actor)
        self._kill([actor])
        job.failures.append(f"{actor.describe()}: {cause}")
        if len(job.failures) >= self.attempts:
            _fail(job.futures, DeviceError(f"a batch was run {len(job.failures)} times on the Ray cluster at "
                                           f"{self.address} and lost each time: {'; '.join(job.failures)}"))
            return
        self._queue.appendleft(job)

    def _fail_queue(self) -> None:
        error = DeviceError(f"no runner is left on the Ray cluster at {self.address}: "
                            + ("; ".join(self._deaths) or "none started"))
        while self._queue:
            _fail(self._queue.popleft().futures, error)

    # -------------------------------------------------------------------------------- the rest
    @property
    def parallelism(self) -> int:
        """Batches measured at once: one per live runner (the tuner keeps that many in flight)."""
        with self._lock:
            return max(1, len(self._actors))

    def builder(self) -> "RayBuilder":
        """A builder on the cluster's CPUs (the tuner's default with this runner)."""
        return RayBuilder()

    def describe(self) -> str:
        with self._lock:
            actors = list(self._actors)
        where = "; ".join(a.describe() for a in actors)
        return (f"a Ray cluster at {self.address}: {len(actors)} runner{'s' * (len(actors) != 1)} of "
                f"{self.device['name']} ({self.device['platform']}, driver {self.device['driver']}): {where}")

    def close(self) -> None:
        """Stop the runners (a batch being measured ends at once, unrecorded), and disconnect from the
        cluster if this runner connected."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            self._lock.notify_all()
            jobs = [job for _, job in self._running.values()] + list(self._queue)
            self._queue.clear()
            self._running.clear()
        for job in jobs:
            _fail(job.futures, DeviceError("the Ray runner was closed before the batch was measured"))
        self._thread.join(5)
        closing = []
        for actor in self._actors:
            try:
                closing.append(actor.handle.close.remote())
            except Exception:  # gone
                pass
        if closing:
            self._ray.wait(closing, num_returns=len(closing), timeout=10)
        self._kill(self._actors + list(self._starting.values()))
        self._actors, self._starting = [], {}
        self._shutdown()

    def _kill(self, actors: Sequence[_Actor]) -> None:
        for actor in actors:
            try:
                self._ray.kill(actor.handle, no_restart=True)
            except Exception:  # already gone
                pass

    def _shutdown(self) -> None:
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns_ray = False


def _fail(futures: Sequence[Future], error: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)


def _cause(error: BaseException) -> str:
    """A Ray error in one line: its class and the first line of its message."""
    text = str(error).strip().splitlines()
    return type(error).__name__ + (f": {text[0][:300]}" if text else "")


# ------------------------------------------------------------------------------------------------ the builder
class RayBuilder:
    """Builds candidates as Ray tasks on any node's CPUs (one each), so that building grows with the cluster;
    a task lost with its node is run again by Ray (``max_retries``), and one failing still fails its future
    with a :class:`~liftpy.errors.DeviceError`."""

    def __init__(self, max_retries: int = 3):
        ray = _ray()
        self._ray = ray
        self._remote = ray.remote(num_cpus=1, max_retries=max_retries)(build_candidate)
        self._refs: list = []

    def build(self, builds) -> list[Future]:
        refs = [self._remote.remote(build) for build in builds]
        self._refs = [r for r in self._refs if not _done(r)] + refs
        return [_translated(ref.future()) for ref in refs]

    def reset(self) -> None:
        """Cancel the builds not done (one is stuck past the tuner's time limit)."""
        for ref in self._refs:
            if not _done(ref):
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:
                    pass
        self._refs = []

    def close(self) -> None:
        if self._ray.is_initialized():
            self.reset()

    @property
    def process_ids(self) -> tuple[int, ...]:
        return ()


def _done(ref) -> bool:
    import ray

    return bool(ray.wait([ref], timeout=0)[0])


def _translated(future: Future) -> Future:
    """``future``, a Ray failure of the task (its node lost past its retries) a DeviceError."""
    out = Future()

    def done(f: Future):
        error = f.exception()
        if error is None:
            out.set_result(f.result())
        else:
            out.set_exception(DeviceError(f"a build on the Ray cluster failed: {_cause(error)}"))

    future.add_done_callback(done)
    return out


__all__ = ["RayRunner", "RayBuilder", "CPU_RESOURCE"]
