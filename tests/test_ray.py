"""Tuning on a Ray cluster (liftpy.tuning.distributed): a head and two worker nodes started on this machine with
the ``ray`` command line, each worker lending its OpenCL CPU device (PoCL) through the ``opencl_cpu`` resource.

A worker node is killed (SIGKILL to every process of its session: its raylet, its agents, the runner actor and
the actor's measuring process) once a few trials are recorded; the search must finish on the other node, every
trial recorded once and whole. Ray's processes are found and stopped by their ids: each ``ray start --block``
is started in a session of its own, and every process of those sessions is killed at the end, never a global
``ray stop`` (another user's cluster may run on the machine)."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

import liftpy.nn as nn  # noqa: E402
from liftpy.errors import DeviceError, InputError  # noqa: E402
from liftpy.tuning import Batch, Build, LocalSearch, TuningDB, tune_task  # noqa: E402
from liftpy.tuning.builder import build_candidate  # noqa: E402
from liftpy.tuning.db import config_key  # noqa: E402
from .conftest import QUIET

pytestmark = pytest.mark.ray

RAY = str(Path(sys.executable).with_name("ray"))
SMALL = dict(input_shape=(8, 12, 12), kernel_shape=(8, 3, 3), stride=1, padding=1)
TRIALS, SEED, BATCH = 12, 3, 2
#: how fast the head notices a dead node (Ray's defaults take ~15 s): its health checks every 0.5 s, 4 missed
FAST_HEALTH = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "4",
               "RAY_health_check_initial_delay_ms": "0", "RAY_USAGE_STATS_ENABLED": "0"}


_GIVEN: set[int] = set()


def _free_port() -> int:
    """A port free now on 127.0.0.1 that this module has not given before: each is drawn and let go at once, and
    the system may draw the same one twice (Ray refuses to start a node with two components on one port)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def _session_pids(sid: int) -> list[int]:
    """The ids of the live processes of session ``sid`` (a ``ray start`` started with a session of its own,
    and what it started: raylet, agents, workers, and their children)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after the command's name: state, ppid, pgrp, session
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


class Node:
    """One ``ray start --block`` of this test, its processes in a session of their own (the session's id is
    the ``ray start`` process's)."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict):
        self.name = name
        self.manager_port = int(next(a for a in args if a.startswith("--node-manager-port=")).split("=")[1])
        self.log = log
        self.process = subprocess.Popen([RAY, "start", "--block", *args], start_new_session=True, env=env,
                                        stdout=open(log, "w"), stderr=subprocess.STDOUT)

    @property
    def pids(self) -> list[int]:
        return _session_pids(self.process.pid)

    def started(self) -> bool:
        return "Ray runtime started" in self.log.read_text(errors="replace")

    def kill(self) -> list[int]:
        """SIGKILL every process of the node, by its id; the ids killed."""
        pids = self.pids
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(10)
        return pids

    def stop(self) -> None:
        """``ray start --block``'s own shutdown (SIGTERM), then SIGKILL to what is left of its session."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


@pytest.fixture(scope="module")
def cluster():
    """A Ray head (no device) and two worker nodes lending their OpenCL CPU device, on 127.0.0.1; stopped at
    the end, by the ids of their processes, even on failure."""
    temp = Path(f"/tmp/ray-liftpy-test-{os.getpid()}")  # short: Ray's socket paths have a length limit
    temp.mkdir(exist_ok=True)
    env = {**os.environ, **FAST_HEALTH}
    port = _free_port()
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--object-store-memory=80000000",
              "--disable-usage-stats", f"--temp-dir={temp}"]

    def ports():
        return [f"--node-manager-port={_free_port()}", f"--object-manager-port={_free_port()}",
                f"--metrics-export-port={_free_port()}", f"--dashboard-agent-listen-port={_free_port()}",
                f"--dashboard-agent-grpc-port={_free_port()}", f"--runtime-env-agent-port={_free_port()}"]

    nodes = []
    try:
        nodes.append(Node("head", ["--head", f"--port={port}", "--include-dashboard=false",
                                   f"--dashboard-port={_free_port()}",
                                   "--resources={}", *common, *ports()], temp / "head.log", env))
        for i in range(2):  # one after the other: nodes starting together raced for a port
            _wait_started(nodes[-1])
            nodes.append(Node(f"worker{i}", [f"--address=127.0.0.1:{port}", '--resources={"opencl_cpu": 1}',
                                             *common, *ports()], temp / f"worker{i}.log", env))
        _wait_started(nodes[-1])
        print(f"cluster at 127.0.0.1:{port}: " + ", ".join(f"{n.name} (ray start {n.process.pid}, processes "
                                                           f"{n.pids})" for n in nodes))
        yield f"127.0.0.1:{port}", nodes
    finally:
        for node in reversed(nodes):
            node.stop()
        left = [pid for node in nodes for pid in node.pids]
        print(f"cluster stopped; processes left: {left}")
        subprocess.run(["rm", "-rf", str(temp)], check=False)


def _wait_started(node: Node, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not node.started():
        if node.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{node.name} did not start: {node.log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)


def _rows(path) -> list[tuple]:
    """The database's trials, in the order they were stored: (id, config key, status, time_ms, device)."""
    db = TuningDB(path, readonly=True)
    try:
        return [(row[0], row[1], row[2], row[3], row[4]) for row in db.conn.execute(
            "SELECT id, config, status, time_ms, device FROM trials ORDER BY id")]
    finally:
        db.close()


@pytest.mark.parametrize("spec, lent", [(None, ["gpu a 0:0", "gpu b 0:1", "cpu c 1:0"]), ("gpu", ["gpu a 0:0",
                                                                                         "gpu b 0:1"]),
                                         ("1:0", ["cpu c 1:0"]), ("B", ["gpu b 0:1"])])
def test_what_a_node_lends(spec, lent):
    """A node lends a GPU per Ray GPU resource and a CPU device per opencl_cpu resource, those ``--device``
    names only (a substring of the name, or "P:D"); its runner takes that resource."""
    from liftpy.device import Device
    from liftpy.tuning.distributed import _lends

    devices = [Device(name="gpu a", kind="gpu", platform_index=0, device_index=0),
               Device(name="gpu b", kind="gpu", platform_index=0, device_index=1),
               Device(name="gpu c", kind="gpu", platform_index=0, device_index=2),  # a third, no third resource
               Device(name="cpu c", kind="cpu", platform_index=1, device_index=0),
               Device(name="accelerator", kind="accelerator", platform_index=2, device_index=0)]
    node = {"Resources": {"CPU": 8.0, "GPU": 2.0, "opencl_cpu": 1.0}}
    got = _lends(node, devices, spec)
    assert [f"{d.name} {d.platform_index}:{d.device_index}" for d, _ in got] == lent
    assert all(r == ({"num_gpus": 1} if d.kind == "gpu" else {"resources": {"opencl_cpu": 1}}) for d, r in got)


def test_devices_of_different_names_are_refused():
    from liftpy.tuning.distributed import _Actor, _check_one_name

    actors = [_Actor(None, "a" * 16, "0:0", record={"name": "gpu x"}, address="10.0.0.1"),
              _Actor(None, "b" * 16, "0:0", record={"name": "cpu y"}, address="10.0.0.2")]
    _check_one_name(actors[:1], "head:6379")
    with pytest.raises(InputError, match=r"lends devices of different names \(gpu x on node 10.0.0.1 \[aaaaaaaa\] "
                                         r"device 0:0; cpu y on node 10.0.0.2 .*--device NAME"):
        _check_one_name(actors, "head:6379")


def test_no_cluster_there():
    """An address where no Ray cluster listens: refused at once (Ray itself would try for minutes)."""
    from liftpy.tuning.distributed import RayRunner

    with pytest.raises(InputError, match=r"no Ray cluster answers there .*ray start --head"):
        RayRunner(f"127.0.0.1:{_free_port()}")


@pytest.mark.slow
@pytest.mark.opencl
def test_no_device_to_tune_on(cluster):
    """A cluster lending no device that ``device`` names: refused before any trial, saying what a node must
    offer."""
    from liftpy.tuning.distributed import RayRunner

    address, _ = cluster
    with pytest.raises(InputError, match=r"no OpenCL device to tune on in the Ray cluster .* matching --device "
                                         r"no such device.*opencl_cpu.*ray start"):
        RayRunner(address, device="no such device")


@pytest.mark.slow
@pytest.mark.opencl
def test_tuning_survives_a_node_lost_mid_batch(cluster, tmp_path, monkeypatch):
    """The search finishes after a worker node is killed mid-tuning, every trial recorded exactly once (one
    ``record`` per configuration, no partial result) and whole (``ok``, a time), on the same device.

    Compared with a local run of the same seed: the configurations measured first -- the random ones,
    which a :class:`LocalSearch` draws from its seed alone -- are the same, in the same order. The best is only
    printed: it follows the measured times (and a local search's later proposals do too), which differ from run
    to run by timing noise, here with a node killed beside the kernels."""
    import ray

    from liftpy.tuning.distributed import RayRunner

    address, nodes = cluster
    task = nn.route_task(nn.make_layer(**SMALL))
    recorded: list[str] = []
    real_record = TuningDB.record

    def record(self, subject, algorithm, config, device, result):
        recorded.append(config_key(config))
        return real_record(self, subject, algorithm, config, device, result)

    monkeypatch.setattr(TuningDB, "record", record)
    ray_db = tmp_path / "ray.sqlite"
    start = time.perf_counter()
    runner = RayRunner(address, timeout=60.0)
    killed = {}
    try:
        print(runner.describe())
        assert len(runner._actors) == 2
        by_port = {node.manager_port: node for node in nodes}
        node_of = {n["NodeID"]: by_port[n["NodeManagerPort"]] for n in ray.nodes()}

        def kill_when_a_few_are_recorded():
            """Once 4 trials are recorded, the node of the runner measuring a batch killed (mid-batch)."""
            while not done.is_set():
                with runner._lock:
                    busy = [actor.node_id for actor, _ in runner._running.values()]
                if len(recorded) >= 4 and busy:
                    victim = node_of[busy[0]]
                    killed.update(node=victim.name, at=len(recorded), pids=victim.kill())
                    return
                time.sleep(0.02)

        done = threading.Event()
        killer = threading.Thread(target=kill_when_a_few_are_recorded)
        killer.start()
        try:
            best = tune_task(task, trials=TRIALS, db=ray_db, runner=runner, seed=SEED, repeat=1, batch=BATCH,
                             **QUIET)
        finally:
            done.set()
            killer.join()
        lost = list(runner._deaths)
        left = len(runner._actors)
        last = node_of[runner._actors[0].node_id]
        last.kill()  # the last runner's node: a batch then fails, naming the cluster
        portable = task.portable()
        built = build_candidate(Build(portable, runner.device_facts, best.config))
        with pytest.raises(DeviceError, match=f"no runner is left on the Ray cluster at {address}"):
            runner.run(Batch(portable, (built,), seed=0))[0].result(timeout=120)
        print(f"killed {last.name} too: a batch then failed with a DeviceError")
    finally:
        runner.close()
    ray_seconds = time.perf_counter() - start
    print(f"killed {killed.get('node')} (processes {killed.get('pids')}) mid-batch after {killed.get('at')} trials "
          f"recorded; runners lost: {lost}; runners left: {left}; tuned in {ray_seconds:.1f} s; best "
          f"{best.time_ms:.3f} ms {best.config}")
    assert killed, "the node was not killed: the tuning ended before 4 trials were recorded"
    assert left == 1 and lost, "the killed node's runner was not dropped"

    rows = _rows(ray_db)
    assert len(recorded) == len(set(recorded)) == TRIALS, recorded  # each trial recorded once
    assert [r[1] for r in rows] == recorded and [r[0] for r in rows] == list(range(1, TRIALS + 1))
    assert all(status == "ok" and time_ms > 0 for _, _, status, time_ms, _ in rows), rows
    assert {r[4] for r in rows} == {runner.device["name"]}

    monkeypatch.setattr(TuningDB, "record", real_record)
    local_db = tmp_path / "local.sqlite"
    start = time.perf_counter()
    local = tune_task(task, trials=TRIALS, db=local_db, seed=SEED, repeat=1, batch=BATCH, **QUIET)
    print(f"local run in {time.perf_counter() - start:.1f} s: best {local.time_ms:.3f} ms {local.config} "
          f"({'the same' if local.config == best.config else 'not the same'} as the cluster's)")
    space = task.space(runner.device_facts)
    search = LocalSearch(space, TRIALS, SEED)
    first = min(TRIALS, search.random_trials)
    expected = [config_key(c) for c in search.propose(first)]
    assert [r[1] for r in rows[:first]] == expected
    assert [r[1] for r in _rows(local_db)[:first]] == expected
