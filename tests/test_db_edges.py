"""The tuning database at its edges (issue 47): a database that is read-only, locked, damaged, or whose write fails
mid-run ends in one ``error:`` line naming the file and the cause -- never a traceback -- and no measurement is
lost: a failed write keeps its trial in ``<db>.recovered.jsonl``, stored when the database is next opened."""

import json
import sqlite3
import subprocess
from dataclasses import dataclass

import pytest

from liftpy.cli import main
from liftpy.errors import DatabaseError, LiftError
from liftpy.tuning import db as dbmodule
from liftpy.tuning.db import TuningDB

from .conftest import EXAMPLES

MATMUL = [str(EXAMPLES / "programs" / "matmul.lift"), "--size", "n=4", "--size", "k=4", "--size", "m=4"]
DEVICE = {"name": "test device", "driver": "1", "platform": "test"}


@dataclass(frozen=True)
class Subject:
    key: str = "task"
    label: str = "a test task"


def ok(time_ms: float) -> dict:
    return {"status": "ok", "time_ms": time_ms, "times_ms": [time_ms], "memory_bytes": 64, "max_error": 0.1}


def make_db(path, trials: int = 1) -> None:
    """A tuning database holding ``trials`` correct trials of one task."""
    db = TuningDB(path)
    for i in range(trials):
        db.record(Subject(), "route", {"x": i}, DEVICE, {**ok(1.0 + i), "cause": "padding " * 20})
    db.close()


def run_cli(argv, capsys):
    """main's status and its stderr, checked to end in exactly one ``error:`` line when it fails."""
    status = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if status:
        assert [line for line in err.splitlines() if "error:" in line] == err.strip().splitlines()[-1:], err
    return status, err.strip().splitlines()[-1] if err.strip() else ""


class FailingConnection:
    """A connection whose statements starting with ``prefix`` raise ``error`` (``times`` times; None: always)."""

    def __init__(self, conn, prefix: str, error: Exception, times: int | None = None):
        self.conn, self.prefix, self.error, self.times = conn, prefix, error, times

    def execute(self, sql, *args):
        if sql.startswith(self.prefix) and (self.times is None or self.times > 0):
            self.times = None if self.times is None else self.times - 1
            raise self.error
        return self.conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.conn, name)


# ------------------------------------------------------------------------------------------------ case 1: read-only
@pytest.fixture
def immutable(tmp_path):
    """A tuning database the file system will not let even root write (chattr +i); skipped where it cannot."""
    path = tmp_path / "t.sqlite"
    make_db(path)
    try:
        subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("chattr +i is not available here")
    yield path
    subprocess.run(["chattr", "-i", str(path)], check=True)


def test_an_immutable_database_is_refused_before_any_trial(immutable, capsys):
    with pytest.raises(DatabaseError, match=r"t.sqlite: cannot write it \(attempt to write a readonly database\)"):
        TuningDB(immutable)
    assert TuningDB(immutable, readonly=True).trials()  # still read, by report and export
    status, line = run_cli(["tune", *MATMUL, "--trials", "2", "--db", str(immutable)], capsys)
    assert status == 1
    assert line == f"error: --db {immutable}: cannot write it (attempt to write a readonly database)"


def test_a_database_sqlite_opens_read_only_is_refused_before_any_trial(tmp_path, monkeypatch):
    """As a file without write permission is for a user who is not root: SQLite opens it, read-only."""
    path = tmp_path / "t.sqlite"
    make_db(path)
    monkeypatch.setattr(TuningDB, "_connect",
                        lambda self: sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True))
    with pytest.raises(DatabaseError, match=r"cannot write it \(attempt to write a readonly database\)") as caught:
        TuningDB(path)
    assert str(path) in caught.value.message


def test_a_database_another_connection_is_writing_is_refused_before_any_trial(tmp_path, monkeypatch):
    path = tmp_path / "t.sqlite"
    make_db(path)
    monkeypatch.setattr(dbmodule, "BUSY_TIMEOUT_S", 0.05)
    locked = "database is locked by another connection"
    other = sqlite3.connect(path)
    other.execute("BEGIN IMMEDIATE")  # a writer's lock: reading goes on, writing waits
    try:
        assert TuningDB(path, readonly=True).trials()
        with pytest.raises(DatabaseError, match=rf"t.sqlite: cannot write it \({locked}\)"):
            TuningDB(path)
        other.execute("COMMIT")
        other.execute("BEGIN EXCLUSIVE")  # now not even read
        with pytest.raises(DatabaseError, match=rf"t.sqlite: cannot open it \({locked}\)"):
            TuningDB(path, readonly=True)
    finally:
        other.close()


# ------------------------------------------------------------------------------------------------ case 2: damaged
@pytest.fixture
def damaged(tmp_path):
    """A tuning database with a page of garbage in the middle (its header and first page intact)."""
    path = tmp_path / "t.sqlite"
    make_db(path, trials=200)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    middle = (len(data) // page // 2) * page
    data[middle:middle + page] = bytes((i * 37 + 11) % 256 for i in range(page))
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("readonly", [False, True])
def test_a_damaged_database_is_refused_when_opened(damaged, readonly):
    with pytest.raises(DatabaseError, match=r"t.sqlite: the file is damaged \(database disk image is malformed"):
        TuningDB(damaged, readonly=readonly)


def test_report_and_tune_refuse_a_damaged_database_in_one_line(damaged, capsys):
    before = damaged.read_bytes()
    for argv in (["report", "--db", str(damaged), "--program", *MATMUL],
                 ["tune", *MATMUL, "--trials", "2", "--db", str(damaged)]):
        status, line = run_cli(argv, capsys)
        assert status == 1
        assert line.startswith(f"error: --db {damaged}: the file is damaged (database disk image is malformed")
        assert line.endswith("; restore it from a copy, or give another --db")
    assert damaged.read_bytes() == before  # nothing written into it


# ------------------------------------------------------------------------------------------------ case 3: mid-run
def test_a_write_refused_as_locked_is_tried_again(tmp_path, monkeypatch):
    monkeypatch.setattr(dbmodule, "WRITE_RETRIES", (0, 0, 0))
    db = TuningDB(tmp_path / "t.sqlite")
    db.conn = FailingConnection(db.conn, "INSERT OR REPLACE INTO trials",
                                sqlite3.OperationalError("database is locked"), times=3)
    db.record(Subject(), "route", {"x": 1}, DEVICE, ok(2.0))
    assert [t.time_ms for t in db.trials()] == [2.0]
    assert not db.recovery_path.exists()


def test_a_failed_write_keeps_its_trial_and_the_next_open_stores_it(tmp_path, monkeypatch):
    monkeypatch.setattr(dbmodule, "WRITE_RETRIES", (0, 0, 0))
    path = tmp_path / "t.sqlite"
    db = TuningDB(path)
    db.record(Subject(), "route", {"x": 1}, DEVICE, ok(2.0))
    db.conn = FailingConnection(db.conn, "INSERT OR REPLACE INTO trials", sqlite3.OperationalError("disk I/O error"))
    with pytest.raises(DatabaseError) as caught:
        db.record(Subject(), "route", {"x": 2}, DEVICE, ok(1.0))
    kept = tmp_path / "t.sqlite.recovered.jsonl"
    assert caught.value.message == f"{path}: cannot store the trial (disk I/O error); the trial is kept in {kept}, " \
                                   f"and stored when the database is next opened to write"
    db.conn = FailingConnection(db.conn.conn, "UPDATE trials SET status", sqlite3.OperationalError("disk I/O error"))
    with pytest.raises(DatabaseError, match="cannot store the trial's new measurements"):
        db.remeasured(Subject(), "route", {"x": 1}, DEVICE["name"], [ok(3.0)] * 3)
    db.close()
    assert len(kept.read_text().splitlines()) == 2

    assert [t.config for t in TuningDB(path, readonly=True).trials()] == [{"x": 1}]  # read: nothing stored
    again = TuningDB(path)
    assert again.recovered == 2 and not kept.exists()
    trials = {t.config["x"]: t for t in again.trials()}
    assert trials[2].time_ms == 1.0 and trials[2].status == "ok"
    assert trials[1].time_ms == 3.0 and trials[1].measured_again


def test_a_trial_that_cannot_be_kept_beside_the_database_is_kept_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = TuningDB(tmp_path / "t.sqlite")
    db.path = tmp_path / "gone" / "t.sqlite"  # as if its directory had gone: no file can be made beside it
    db.conn = FailingConnection(db.conn, "INSERT", sqlite3.OperationalError("disk I/O error"))
    with pytest.raises(DatabaseError, match=f"kept in {tmp_path / 't.sqlite.recovered.jsonl'}: move it to "):
        db.record(Subject(), "route", {"x": 1}, DEVICE, ok(2.0))
    assert json.loads((tmp_path / "t.sqlite.recovered.jsonl").read_text())["result"]["time_ms"] == 2.0


def test_a_kept_line_that_is_no_trial_refuses_the_database_and_stays(tmp_path):
    path = tmp_path / "t.sqlite"
    make_db(path)
    kept = tmp_path / "t.sqlite.recovered.jsonl"
    kept.write_text('{"op": "record", "task_key": "t"\n')  # cut short
    with pytest.raises(DatabaseError, match=r"t.sqlite.recovered.jsonl:1: not a trial kept by liftpy"):
        TuningDB(path)
    assert kept.exists()


def test_tune_stops_cleanly_when_a_write_fails_and_the_next_run_stores_the_trial(tmp_path, capsys, monkeypatch):
    """End to end: the second trial's write fails; the run ends in one error line naming the file kept; the
    next run stores that trial before it measures anything, and does not measure it again."""
    path, kept = tmp_path / "t.sqlite", tmp_path / "t.sqlite.recovered.jsonl"
    insert, written = TuningDB._insert, []

    def second_fails(self, entry):
        written.append(entry)
        if len(written) == 2:
            raise sqlite3.OperationalError("disk I/O error")
        insert(self, entry)

    monkeypatch.setattr(TuningDB, "_insert", second_fails)
    argv = ["tune", *MATMUL, "--trials", "2", "--repeat", "1", "--db", str(path)]
    status, line = run_cli(argv, capsys)
    assert status == 1
    assert line == f"error: {path}: cannot store the trial (disk I/O error); the trial is kept in {kept}, and " \
                   f"stored when the database is next opened to write"
    assert len(TuningDB(path, readonly=True).trials()) == 1
    measured = json.loads(kept.read_text())["result"]

    monkeypatch.setattr(TuningDB, "_insert", insert)
    assert main(argv) == 0
    assert f"stored 1 measurements kept in {kept}" in capsys.readouterr().err
    assert not kept.exists()
    trials = TuningDB(path, readonly=True).trials()
    assert len(trials) == 2
    assert measured["status"] in {t.status for t in trials} and measured.get("seconds") in {t.seconds for t in trials}


# ------------------------------------------------------------------------------------------------ case 4: wrapped
@pytest.mark.parametrize("call, doing", [
    (lambda db: db.trials(), "read it"),
    (lambda db: db.source_hashes(Subject(), "route", {"x": 0}, "test device"), "read it"),
    (lambda db: db.baselines(Subject(), "test device"), "read it"),
    (lambda db: db.set_moved_bytes(Subject(), "route", {"x": 0}, "test device", 8), "store a trial's data movement"),
    (lambda db: db.record_baseline(Subject(), "test device", "clblast", 1.0, None), "store a baseline"),
])
def test_every_sqlite_error_is_a_liftpy_error_naming_the_file(tmp_path, call, doing):
    path = tmp_path / "t.sqlite"
    make_db(path)
    db = TuningDB(path)
    db.conn = FailingConnection(db.conn, "", sqlite3.OperationalError("disk I/O error"))
    with pytest.raises(LiftError) as caught:
        call(db)
    assert caught.value.message == f"{path}: cannot {doing} (disk I/O error)"
    db.conn = FailingConnection(db.conn.conn, "", sqlite3.DatabaseError("database disk image is malformed"))
    with pytest.raises(DatabaseError, match="t.sqlite: the file is damaged"):
        call(db)

