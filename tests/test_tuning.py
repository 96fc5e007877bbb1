"""The auto-tuner on convolution layers (their program through the automatic route): trials measured in a
worker, stored as they finish, resumable, wrong results never chosen."""

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import liftpy
import liftpy.nn as nn
from liftpy.cli import main
from liftpy.nn import winograd
from liftpy.tuning import TuningDB
from liftpy.tuning.report import pareto_front

from .faults import faulty
from .reference import conv2d_hwc
from .conftest import QUIET
from .route_configs import example_configs

# The tuner's mechanics are tested on the direct program of a 3x3 layer (algorithm "direct"); Winograd's program
# of the same layer, tuned stage by stage, and the choice between the two, in tests/test_winograd.py.
SMALL = dict(input_shape=(8, 12, 12), kernel_shape=(8, 3, 3), stride=1, padding=1)
SMALL_ARGS = ["--input", "8x12x12", "--kernels", "8x3x3", "--padding", "1"]
TUNE_SMALL = ["tune", *SMALL_ARGS, "--algorithm", "direct"]


def rows(db_path):
    """(algorithm and configuration, status, cause, time, error, memory, source hashes) of every trial."""
    with sqlite3.connect(db_path) as conn:
        return conn.execute("SELECT algorithm || ' ' || config, status, cause, time_ms, max_error, memory_bytes, "
                            "source_hashes FROM trials").fetchall()


def test_trials_are_recorded_and_resumed_without_repeats(tmp_path):
    db = tmp_path / "t.sqlite"
    first = liftpy.tune(SMALL, algorithm="direct", trials=6, db=db, seed=1, repeat=2, **QUIET).trials
    assert len(first) == 6
    for t in first:
        assert t.status == "ok" and t.time_ms > 0 and t.max_error <= 1 and t.memory_bytes > 0
    assert all(json.loads(r[6]) for r in rows(db))  # kernel source hashes stored
    # what a cost model reads is stored with each trial: 8 kernels x 12 x 12 outputs x 8 channels x 9 taps (and
    # where the sum is split into parts, their sum's updates beside them)
    whole = [t for t in first if not (t.config["partial"] or t.config["chunk"])]
    assert whole and all(t.features["reduction_updates"] == 8 * 12 * 12 * 8 * 9 for t in whole)
    assert all(t.features["reduction_updates"] > 8 * 12 * 12 * 8 * 9 for t in first if t not in whole)
    again = liftpy.tune(SMALL, algorithm="direct", trials=9, db=db, seed=1, repeat=2, **QUIET).trials
    trials = [(t.algorithm, json.dumps(t.config, sort_keys=True)) for t in again]
    assert len(again) == 9 and len(set(trials)) == 9  # three new trials, none repeated
    assert trials[:6] == [(t.algorithm, json.dumps(t.config, sort_keys=True)) for t in first]


@pytest.mark.parametrize("fault", ["first_work_item_returns",  # an unwritten part: stale memory must not pass
                                   *(pytest.param(f, marks=pytest.mark.slow)
                                     for f in ("drop_last_reduction_step", "scale_the_output"))])
def test_planted_faults_are_recorded_as_wrong_and_never_chosen(tmp_path, fault):
    """Kernels that skip outputs, miss the last step of every reduction, or write every output 0.1% too large
    (tests/faults.py: half of the configurations) are caught by the check -- on fresh inputs, in buffers filled
    with NaN, against the naive lowering -- and never chosen."""
    db = tmp_path / "t.sqlite"
    trials = liftpy.tune(SMALL, algorithm="direct", trials=10, db=db, seed=3, repeat=1, **QUIET,
                         fault=f"tests.faults:{fault}", confirm=2).trials
    wrong = [t for t in trials if faulty(t.config)]
    sound = [t for t in trials if not faulty(t.config)]
    assert wrong and sound, "the trials should hold both faulty and sound configurations"
    assert all(t.status == "wrong" and "differs from the naive lowering's" in t.cause for t in wrong)
    assert all(t.status == "ok" and t.max_error <= 1 for t in sound)
    best = TuningDB(db).best(nn.route_task(nn.make_layer(**SMALL)))
    assert not faulty(best.config) and best.trial.status == "ok"


def test_the_check_tolerance_grows_with_the_reduction_length():
    """The tolerance is γ_(n+1)·(‖w‖·‖window‖ + |b|) (liftpy.nn.reference.conv2d_tolerance), computed here
    independently for one output element of a 5-channel 3x3 layer."""
    from liftpy.nn.reference import conv2d_tolerance

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 5, 4, 4)).astype(np.float32)
    w = rng.standard_normal((2, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    tolerance = conv2d_tolerance(x, w, b, (1, 1), (0, 0, 0, 0))
    n = 5 * 3 * 3 + 1
    u = 2.0 ** -24
    window = x[0, :, 1:4, 0:3].astype(np.float64)
    expected = n * u / (1 - n * u) * (np.linalg.norm(w[1].astype(np.float64)) * np.linalg.norm(window) + abs(b[1]))
    assert tolerance[0, 1, 1, 0] == pytest.approx(expected + 45 * 2.0 ** -126, rel=1e-12)


def test_every_batch_is_checked_on_inputs_of_its_own(tmp_path):
    """The candidates of a batch share inputs drawn for that batch (their buffers filled with NaN before each
    checked run); two batches never share theirs, and each trial records its seed, so its check can be
    repeated."""
    from liftpy.interpreter import random_inputs

    db = tmp_path / "t.sqlite"
    trials = liftpy.tune(SMALL, algorithm="direct", trials=6, db=db, seed=0, repeat=1, **QUIET, confirm=0,
                         batch=3).trials
    seeds = [t.check_seed for t in trials]
    # the batches: the first of two (FIRST_BATCH), then of three, then the last trial
    assert None not in seeds and seeds[:2] == [seeds[0]] * 2 and seeds[2:5] == [seeds[2]] * 3
    assert len({seeds[0], seeds[2], seeds[5]}) == 3
    task = nn.route_task(nn.make_layer(**SMALL))

    def inputs(seed):
        return random_inputs(task.load(), task.size_map, seed, task.function)

    first, again, other = inputs(seeds[0]), inputs(seeds[0]), inputs(seeds[2])
    assert all(np.array_equal(first[k], again[k]) for k in first)  # recorded: the check can be repeated
    assert not np.array_equal(first["input"], other["input"])


def test_a_checked_run_sees_only_what_it_wrote():
    """Before a checked run the output buffer is filled with NaN: a kernel that skips outputs shows NaN
    there, whatever an earlier run left in the same memory."""
    from liftpy.runtime import Executable

    from .faults import first_work_item_returns

    layer = nn.make_layer(**SMALL)
    plan = nn.plan(layer, next(c for c in nn.conv_space(layer).sample(20, seed=0) if faulty(c)))
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 8, 12, 12)).astype(np.float32), rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    sound = plan.executable.prepare(plan.constants(w, None)).run({"input": x}).output
    broken = Executable(first_work_item_returns(plan.config, plan.executable.generated), plan.executable.device)
    program = broken.prepare(plan.constants(w, None))
    program.run({"input": x})  # the whole output written once: the next run's buffer holds right answers
    output = program.run({"input": x}, poison=True).output
    unwritten = np.isnan(output)
    assert unwritten.any() and not unwritten.all()  # the first work-item's outputs, and only those
    assert np.array_equal(output[~unwritten], sound[~unwritten])


@pytest.mark.slow
def test_hung_trials_are_recorded_and_the_search_goes_on(tmp_path):
    """A kernel that never ends is killed after the time limit, counted from when the (started, ready)
    worker receives the job; the next trial runs in a fresh worker."""
    db = tmp_path / "t.sqlite"
    trials = liftpy.tune(SMALL, algorithm="direct", trials=6, db=db, seed=3, repeat=1, **QUIET, timeout=5,
                         fault="tests.faults:hang", confirm=0).trials
    hung = [t for t in trials if faulty(t.config)]
    assert hung and all(t.status == "timeout" and "no result after 5 s" in t.cause for t in hung)
    assert any(not faulty(t.config) for t in trials)
    assert all(t.status == "ok" for t in trials if not faulty(t.config))


def test_a_bug_in_liftpy_stops_the_search_with_its_traceback_saved(tmp_path, capsys, monkeypatch):
    """A Python exception inside liftpy while preparing a trial (here: a fault hook that does not exist) is no
    device fault: nothing is recorded for it, its traceback goes to a file, and the run stops, non-zero."""
    from liftpy.errors import InternalError
    from liftpy.tuning import runner

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the report's folder: not left in the system's
    db = tmp_path / "t.sqlite"
    with pytest.raises(InternalError) as caught:
        liftpy.tune(SMALL, algorithm="direct", trials=3, db=db, seed=0, repeat=1, **QUIET, fault="tests.faults:no_such_fault")
    assert caught.value.path.parent == tmp_path
    assert "a bug in liftpy" in caught.value.message and str(caught.value.path) in caught.value.message
    report = caught.value.path.read_text()
    assert "Traceback" in report and "no_such_fault" in report
    assert rows(db) == []  # a bug is not a trial's result

    # from the command line: one line naming the saved traceback, a non-zero exit (the worker is spawned,
    # so the bug is planted in this process's runner)
    monkeypatch.setattr(runner.LocalRunner, "_measure", lambda self, batch: {
        i: {"status": "bug", "cause": "Traceback (most recent call last):\nKeyError: 'σ'"} for i in range(len(batch.builts))})
    assert main([*TUNE_SMALL, "--trials", "3", "--db", str(tmp_path / "u.sqlite"), "--repeat", "1"]) not in (0, None)
    err = capsys.readouterr().err
    assert "error: a bug in liftpy" in err and "KeyError" in err and "Traceback" not in err


@pytest.mark.slow
def test_killed_tuner_loses_no_finished_trial_and_resumes(tmp_path):
    db = tmp_path / "t.sqlite"
    command = [sys.executable, "-m", "liftpy.cli", *TUNE_SMALL, "--trials", "200", "--db", str(db),
               "--repeat", "1", "--search", "local"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            time.sleep(0.5)
            if db.exists() and len(rows(db)) >= 4:
                break
        os.killpg(process.pid, signal.SIGKILL)  # the tuner and its measuring worker, mid-run
        process.wait(10)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    before = rows(db)
    assert len(before) >= 4
    configs = [r[0] for r in before]
    assert len(set(configs)) == len(configs)
    assert all(r[1] == "ok" and r[3] > 0 for r in before)  # every stored trial is complete
    assert main([*TUNE_SMALL, "--trials", str(len(before) + 3), "--db", str(db), "--repeat", "1"]) == 0
    after = rows(db)
    assert len(after) == len(before) + 3
    assert [r[0] for r in after[: len(before)]] == configs
    assert len({r[0] for r in after}) == len(after)


def test_report_export_and_default_configuration(tmp_path, capsys):
    db = tmp_path / "t.sqlite"
    liftpy.tune(SMALL, algorithm="direct", trials=5, db=db, seed=2, repeat=2, **QUIET)
    assert main(["report", "--db", str(db), *SMALL_ARGS, "-o", str(tmp_path / "figures")]) == 0
    out = capsys.readouterr().out
    assert "5 trials, 5 correct" in out and "GFLOP/s" in out
    assert list((tmp_path / "figures").glob("pareto-*.png"))

    # conv2d without a configuration uses the best one the database knows
    layer = nn.make_layer(**SMALL)
    best = TuningDB(db).best(nn.route_task(layer))
    assert nn.plan(layer, db=db).config == nn.route_task(layer).complete(best.config)

    # the exported program runs on its own, on PyTorch's layouts, and matches the reference
    out_dir = tmp_path / "best"
    assert main(["export", "--db", str(db), *SMALL_ARGS, "-o", str(out_dir)]) == 0
    capsys.readouterr()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    prepared = nn.plan(layer, best.config).prepare(x, w, b)
    assert set(prepared) == {"input", "weights", "biases"} and prepared["weights"].shape == w.shape
    for name, array in prepared.items():
        np.save(tmp_path / f"{name}.npy", array)
    result = subprocess.run(
        [sys.executable, str(out_dir / "host.py"), *sum((["--input", f"{n}={tmp_path / (n + '.npy')}"]
                                                         for n in prepared), []),
         "--output", str(tmp_path / "y.npy"), "--repeat", "1"],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    y = np.load(tmp_path / "y.npy").reshape(1, 8, 12, 12)
    expected = conv2d_hwc(x[0].transpose(1, 2, 0), w.transpose(0, 2, 3, 1), b, (1, 1), (1, 1, 1, 1))
    np.testing.assert_allclose(y[0], expected, atol=1e-4 * max(1, np.abs(expected).max()))
    assert "weights" in (out_dir / "README.txt").read_text()


def test_network_report_against_baselines(tmp_path, capsys):
    """The per-layer table and figure, from recorded trials of the layers' program and baselines (numbers put
    in by the test)."""
    db = TuningDB(tmp_path / "t.sqlite")
    device = {"name": "test device", "driver": "1", "platform": "test"}
    for i, layer in enumerate(nn.VGG16.values()):
        db.record(nn.route_task(layer), "route", {"parallel": 2, "block.window": 4}, device,
                  {"status": "ok", "time_ms": 10.0 + i, "memory_bytes": 2**20 * (i + 1), "max_error": 1e-6})
        db.record_baseline(layer, "test device", "naive OpenCL", 200.0 + i, None)
    # the last layer's Winograd stages: 2 + 5 + 1 ms a call (u, the kernels' transform, runs once), 4 MiB
    stage_ms = {"v": 2.0, "u": 50.0, "m": 5.0, "conv2dWinograd": 1.0}
    for stage in winograd.winograd_task(nn.VGG16["vgg16.24"]).stages():
        db.record(stage, "route", {"parallel": 2}, device, {"status": "ok", "time_ms": stage_ms[stage.stage],
                                                            "memory_bytes": 2**20, "max_error": 1e-6})
    db.close()
    assert main(["report", "--db", str(tmp_path / "t.sqlite"), "--network", "vgg16", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "vgg16.24" in out and "naive OpenCL ms" in out and "total" in out and "not tuned" not in out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("vgg16.")}
    assert lines["vgg16.0"][1:3] == ["direct", "10.000"] and lines["vgg16.0"][4] == "1.0"  # MiB
    assert lines["vgg16.19"][1:3] == ["direct", "17.000"]
    assert lines["vgg16.24"][1:3] == ["winograd", "8.000"] and lines["vgg16.24"][4] == "4.0"
    assert lines["vgg16.24"][6] == f"{208.0 / 8.0:.2f}"  # naive OpenCL's 208 ms against Winograd's 8
    assert (tmp_path / "throughput-vgg16.png").exists()


def test_a_trial_measured_again_outranks_a_faster_one_timed_once(tmp_path, capsys):
    """A first median can come from a fast spell of the machine: the best is the fastest trial measured again in
    turns with its rivals, wherever a best is read (the database, nn's default, the report's ranking)."""
    from liftpy.tuning.db import ranked

    layer = nn.make_layer(**SMALL)
    task = nn.route_task(layer)
    db = TuningDB(tmp_path / "t.sqlite")
    device = {"name": "test device", "driver": "1", "platform": "test"}
    lucky, steady = nn.conv_space(layer).sample(2, seed=1)
    db.record(task, "route", lucky, device, {"status": "ok", "time_ms": 8.0, "max_error": 0.1})
    db.record(task, "route", steady, device, {"status": "ok", "time_ms": 9.0, "max_error": 0.1})
    db.remeasured(task, "route", steady, "test device",
                  [{"status": "ok", "time_ms": t, "times_ms": [t]} for t in (9.5, 9.1, 9.3)])
    best = db.best(task)
    assert task.complete(best.config) == task.complete(steady) and best.time_ms == 9.3 and best.trial.measured_again
    assert nn.conv.best_in_database(db, layer, "test device").config == best.config
    assert [t.time_ms for t in ranked(db.trials(task))] == [9.3, 8.0]
    db.close()
    assert main(["report", "--db", str(tmp_path / "t.sqlite"), *SMALL_ARGS, "-o", str(tmp_path)]) == 0
    table = [line.split() for line in capsys.readouterr().out.splitlines() if line[:4].strip() in ("1", "2")]
    # rounds 9.1, 9.3, 9.5: the halves' medians 9.1 and 9.5 lie 4% of 9.3 apart; the other has no rounds
    assert [row[1:4] for row in table] == [["9.300", "4%", "again"], ["8.000", "-", "once"]]


def test_of_trials_the_machine_cannot_tell_apart_the_one_moving_less_data_ranks_first(tmp_path):
    """Measured again within TIED of the fastest, a trial whose kernels move fewer global bytes by more than TIED
    ranks first; one moving about as much, or further off in time, stays behind the fastest; and a tie where a
    trial lacks the figure goes by time."""
    from liftpy.tuning.db import TIED, config_key, ranked

    layer = nn.make_layer(**SMALL)
    db = TuningDB(tmp_path / "t.sqlite")
    device = {"name": "test device", "driver": "1", "platform": "test"}
    fast, close, far = {"σ": 4, "κ": 8, "v": 8}, {"σ": 2, "κ": 8, "v": 8}, {"σ": 1, "κ": 8, "v": 8}
    alike = {"σ": 8, "κ": 8, "v": 8}  # as fast as `close`, moving about as much as the fastest
    for config, time_ms, moved in ((fast, 10.0, 3000), (close, 10.0 * (1 + TIED / 2), 1000),
                                   (alike, 10.0 * (1 + TIED / 2), 3000 * (1 - TIED / 2)),
                                   (far, 10.0 * (1 + 2 * TIED), 500)):
        db.record(layer, "direct", config, device, {"status": "ok", "time_ms": time_ms, "max_error": 0.1,
                                                    "moved_bytes": moved})
        db.remeasured(layer, "direct", config, "test device", [{"status": "ok", "time_ms": time_ms}] * 3)
    assert [t.config for t in ranked(db.trials(layer))] == [close, fast, alike, far]
    assert ranked(db.trials(layer))[0].config == close and ranked(db.trials(layer))[0].moved_bytes == 1000
    db.conn.execute("UPDATE trials SET moved_bytes = NULL WHERE config = ?", (config_key(close),))
    assert [t.config for t in ranked(db.trials(layer))] == [fast, close, alike, far]
    db.close()


def test_the_lighter_rivals_of_the_fastest_are_those_near_it_moving_fewer_bytes():
    """What the search measures again beside the fastest, and the ranking prefers once measured again."""
    from liftpy.tuning.db import TIED, Trial, lighter_rivals

    def trial(time_ms, moved):
        return Trial("k", "", "route", {"x": time_ms}, "d", "ok", "", time_ms, 1, 0.0, {}, 1.0, None, moved)

    fastest = trial(10.0, 3000)
    near_light, near_lighter = trial(10.0 * (1 + TIED / 2), 2000), trial(10.0 * (1 + TIED / 3), 1000)
    near_heavy, far_light = trial(10.2, 3000 * (1 - TIED / 2)), trial(10.0 * (1 + 2 * TIED), 10)
    trials = [fastest, near_light, near_heavy, near_lighter, far_light]
    assert lighter_rivals(fastest, trials) == [near_lighter, near_light]
    assert lighter_rivals(fastest, trials + [trial(10.1, None)]) == []  # a near one without the figure


#: the tables as schema 3 wrote them (the trials' key in ``layer``, their label in ``layer_name``)
SCHEMA_3 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    layer TEXT NOT NULL,            -- what was tuned: a layer's shape or a program's key (Subject.key)
    layer_name TEXT NOT NULL,       -- Subject.label: vgg16.7, a program's file, or ''
    algorithm TEXT NOT NULL,
    config TEXT NOT NULL,           -- JSON, keys sorted
    device TEXT NOT NULL,
    driver TEXT NOT NULL,
    platform TEXT NOT NULL,
    liftpy_version TEXT NOT NULL,
    status TEXT NOT NULL,           -- ok | wrong | build_error | runtime_error | codegen_error | invalid | timeout | crash
    cause TEXT NOT NULL,            -- why, for every status but ok
    time_ms REAL,                   -- median over repeats of the sum of the pipeline's kernel times
    times_ms TEXT,                  -- JSON: every repeat's total
    stage_ms TEXT,                  -- JSON: median per kernel
    memory_bytes INTEGER,           -- global memory the pipeline allocates
    max_error REAL,                 -- largest error against the float64 reference, in units of the float32
                                    -- tolerance (liftpy.nn.reference.conv2d_tolerance; schema 1: relative)
    source_hashes TEXT,             -- JSON: kernel name -> sha256 of its OpenCL source
    seconds REAL,                   -- wall time of the whole trial (generate, build, run, check)
    created TEXT NOT NULL,
    check_seed INTEGER,             -- the seed of the inputs the trial was checked on (tuning.measure)
    moved_bytes INTEGER,            -- global bytes a call's kernels ask for (codegen.traffic; not in schema 2)
    UNIQUE (layer, algorithm, config, device)
);
CREATE TABLE IF NOT EXISTS baselines (
    layer TEXT NOT NULL,
    device TEXT NOT NULL,
    name TEXT NOT NULL,
    time_ms REAL NOT NULL,
    memory_bytes INTEGER,
    created TEXT NOT NULL,
    PRIMARY KEY (layer, device, name)
);
"""


def test_a_database_of_schema_2_opens_with_its_trials_and_gains_the_data_movement_column(tmp_path):
    from liftpy.tuning.db import SCHEMA_VERSION

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_3.replace("    moved_bytes INTEGER,            -- global bytes a call's kernels ask "
                                       "for (codegen.traffic; not in schema 2)\n", ""))
    assert "moved_bytes" not in {r[1] for r in conn.execute("PRAGMA table_info(trials)")}
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    conn.execute("INSERT INTO trials (layer, layer_name, algorithm, config, device, driver, platform, liftpy_version, "
                 "status, cause, time_ms, created) VALUES ('k', '', 'direct', '{}', 'd', '1', 'p', '0', 'ok', '', "
                 "2.5, 'now')")
    conn.commit()
    conn.close()
    db = TuningDB(path)
    (trial,) = db.trials()
    assert trial.time_ms == 2.5 and trial.moved_bytes is None
    assert db.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()


def test_an_older_database_is_read_as_it_is_and_migrated_when_opened_for_writing(tmp_path):
    """Schema 3 keyed trials by a column named ``layer`` (any task's key) and ``layer_name``: opened to read, it is
    read and left byte for byte; opened to write, the columns become ``task_key`` and ``label``, trials kept."""
    from liftpy.tuning.db import SCHEMA_VERSION

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_3)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    conn.execute("INSERT INTO trials (layer, layer_name, algorithm, config, device, driver, platform, liftpy_version, "
                 "status, cause, time_ms, created, moved_bytes) VALUES ('k', 'a.lift', 'route', '{\"x\": 1}', 'd', "
                 "'1', 'p', '0', 'ok', '', 2.5, 'now', 7)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    db = TuningDB(path, readonly=True)
    (trial,) = db.trials()
    assert (trial.task_key, trial.label, trial.config, trial.time_ms, trial.moved_bytes) == ("k", "a.lift", {"x": 1},
                                                                                            2.5, 7)
    db.close()
    assert path.read_bytes() == before
    db = TuningDB(path)
    assert db.trials() == [trial]
    columns = {r[1] for r in db.conn.execute("PRAGMA table_info(trials)")}
    assert {"task_key", "label"} <= columns and not {"layer", "layer_name"} & columns
    assert db.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()


def test_the_shipped_databases_are_read_without_being_changed(tmp_path, capsys):
    """liftpy report opens a database only to read it: the results of benchmarks/results/ (schemas 1 to 3) stay as
    they were measured."""
    from pathlib import Path

    results = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
    for name in ("vgg16.24-paper.sqlite", "vgg16-route-vs-pipelines-e04a4bd-zen4.sqlite",
                 "vgg16-route-5dd702f-zen4.sqlite"):
        before = (results / name).read_bytes()
        assert main(["report", "--db", str(results / name), "--network", "vgg16", "-o", str(tmp_path)]) == 0
        assert "total" in capsys.readouterr().out
        assert (results / name).read_bytes() == before


def test_pareto_front():
    points = [(1.0, 5.0), (2.0, 3.0), (3.0, 4.0), (4.0, 1.0), (1.5, 5.0)]
    assert pareto_front(points) == [0, 1, 3]


def test_the_pareto_figure_tells_the_memory_choices_apart():
    """Its colours: a sum's chunks in memory, then how the padding is read where the program pads (trials
    that differ in it), else the blocked levels."""
    from liftpy.tuning.db import Trial
    from liftpy.tuning.report import _group

    def trial(**config):
        return Trial("k", "", "route", {"pad_copy": 0, "chunk": 0, "block.window": 1, **config}, "d", "ok", "", 1.0,
                     1, 0.0, {}, 1.0)

    assert _group(trial(chunk=16, pad_copy=1), True) == "chunks' sums in memory"
    assert _group(trial(pad_copy=1), True) == "padding copied" and _group(trial(), True) == "padding read through the view"
    assert _group(trial(**{"block.window": 4}), False) == "blocks window" and _group(trial(), False) == "no block"


def test_refusing_a_bad_database(tmp_path):
    path = tmp_path / "bad.sqlite"
    path.write_text("not a database")
    assert main(["report", "--db", str(path), *SMALL_ARGS]) == 1


def test_far_slower_configurations_are_timed_once(tmp_path):
    db = tmp_path / "t.sqlite"
    trials = liftpy.tune(SMALL, algorithm="direct", trials=12, db=db, seed=4, repeat=3, **QUIET, cutoff=1.0, confirm=0).trials
    once = [t for t in trials if "timed once" in t.cause]
    assert once, "with a cutoff of 1x the best, slower configurations are timed once"
    assert all(t.status == "ok" and t.max_error <= 1 for t in once)  # still checked against the reference
    with sqlite3.connect(db) as conn:
        runs = {(a, c): json.loads(t) for a, c, t in conn.execute("SELECT algorithm, config, times_ms FROM trials")}
    assert all(len(runs[t.algorithm, json.dumps(t.config, ensure_ascii=False)]) == 1 for t in once)


def test_the_fastest_trials_are_measured_again_in_turns(tmp_path, monkeypatch):
    db = tmp_path / "t.sqlite"
    # no race: a trial whose first round is 2x its leader's would keep one round of its own, and this test counts
    # two (a tiny kernel's span, its waits between kernels included, varies that much)
    monkeypatch.setattr("liftpy.tuning.tuner.RACE", None)
    # no cutoff: a tiny kernel's first run can jitter past 10x the best and be timed once
    trials = liftpy.tune(SMALL, algorithm="direct", trials=6, db=db, seed=5, repeat=2, **QUIET, confirm=2, cutoff=None).trials
    assert len([t for t in trials if t.status == "ok"]) == 6
    again = [t for t in trials if "measured again" in t.cause]
    assert 2 <= len(again) <= 6  # the fastest two not measured yet, a pass, until the fastest is one of them
    assert "measured again" in min((t for t in trials if t.status == "ok"), key=lambda t: t.time_ms).cause
    with sqlite3.connect(db) as conn:
        runs = {(a, c): json.loads(t) for a, c, t in conn.execute("SELECT algorithm, config, times_ms FROM trials")}
    for t in again:
        times = runs[t.algorithm, json.dumps(t.config, ensure_ascii=False)]
        # two rounds in the search's batch, then at least two in turns with its rivals (as many as fill the span)
        assert len(times) >= 4
        assert t.time_ms == pytest.approx(statistics.median(times[2:]), rel=1e-6)
    # a later run does not measure again what has been measured again (a trial newly among the fastest it does)
    more = liftpy.tune(SMALL, algorithm="direct", trials=6, db=db, seed=5, repeat=2, **QUIET, confirm=2, cutoff=None).trials
    assert {(t.algorithm, str(t.config), t.time_ms) for t in again} <= \
        {(t.algorithm, str(t.config), t.time_ms) for t in more if "measured again" in t.cause}
    with sqlite3.connect(db) as conn:
        later = {(a, c): json.loads(t) for a, c, t in conn.execute("SELECT algorithm, config, times_ms FROM trials")}
    for t in again:  # their rounds as they were: not measured a third time
        key = (t.algorithm, json.dumps(t.config, ensure_ascii=False))
        assert later[key] == runs[key]


@pytest.mark.parametrize("content", [b"short notes\n", b"x" * 4096])
def test_a_file_that_is_not_a_database_is_left_untouched(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(liftpy.errors.InputError, match="not a liftpy tuning database"):
        TuningDB(path)
    assert path.read_bytes() == content


def test_another_programs_database_is_not_written_into(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    before = path.read_bytes()
    with pytest.raises(liftpy.errors.InputError, match="not a liftpy tuning database"):
        TuningDB(path)
    assert path.read_bytes() == before


def test_a_configuration_given_first_near_the_fastest_is_measured_again_with_it(tmp_path):
    """One median can come from a slow spell of the machine: a configuration the search was given first (what
    its caller expects to be good) whose first median is within SECOND_LOOK of the fastest's is measured again
    in turns with the fastest; a configuration as near that was not given first is not."""
    from liftpy.tuning import LocalSearch
    from liftpy.tuning.runner import device_record
    from liftpy.tuning.tuner import SECOND_LOOK

    layer = nn.make_layer(**SMALL)
    task = nn.route_task(layer)
    space = task.space()
    starts = [task.complete(c) for c in example_configs(space)]
    others = [c for c in (task.complete(c) for c in space.sample(40, seed=3)) if c not in starts]
    db = TuningDB(tmp_path / "t.sqlite")
    device = device_record(None)
    near = 1.0 * (SECOND_LOOK - 0.05)
    for config, time_ms in ((others[0], 1.0), (starts[1], near), (others[1], near), (starts[2], SECOND_LOOK + 0.1)):
        db.record(task, "route", config, device, {"status": "ok", "time_ms": time_ms, "max_error": 0.1})
    db.close()
    options = {**QUIET, "strategy": lambda space, trials, seed, first: LocalSearch(space, trials, seed, starts)}
    trials = liftpy.tune(SMALL, algorithm="direct", trials=4, db=tmp_path / "t.sqlite", repeat=1, confirm=1,
                         **options).trials
    again = [task.complete(t.config) for t in trials if t.measured_again]
    assert others[0] in again and starts[1] in again
    assert others[1] not in again and starts[2] not in again


def test_a_model_guided_tuning_ranks_its_pool_and_records_checked_trials_with_their_features(tmp_path, monkeypatch):
    """The model search end to end on a device: a pool featurised by the builder, ranked by the device's model
    (the analytic one until trials come), every trial checked and stored with its features; resumed, the
    trials of the database train the model and none is measured twice."""
    from liftpy.tuning import tuner

    monkeypatch.setattr(tuner, "MODEL_POOL", 6)  # a small pool: each candidate is generated to be ranked
    db = tmp_path / "t.sqlite"
    best = liftpy.tune(SMALL, algorithm="direct", trials=5, db=db, seed=2, repeat=1, progress=False, confirm=0,
                       strategy="model")
    assert len(best.trials) == 5 and all(t.status == "ok" and t.features for t in best.trials)
    again = liftpy.tune(SMALL, algorithm="direct", trials=8, db=db, seed=2, repeat=1, progress=False, confirm=0,
                        strategy="model")
    keys = [json.dumps(t.config, sort_keys=True) for t in again.trials]
    assert len(keys) == 8 == len(set(keys))
    with pytest.raises(liftpy.errors.InputError, match="no search strategy"):
        liftpy.tune(SMALL, algorithm="direct", trials=1, db=db, progress=False, strategy="annealing")
