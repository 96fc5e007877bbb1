"""The tuning database: one SQLite file, a row per trial, written as each trial finishes; and a task's best.

Nothing is lost on a crash or Ctrl-C: every trial is committed on its own. The schema is versioned
(``meta.schema_version``): an older database is migrated when it is opened for writing and read as it is when
opened to read (``readonly``: the results shipped in ``benchmarks/results/`` stay as they were measured); a newer
one is refused rather than misread.

Nor is a measurement lost to the database itself: a damaged file, or one that cannot be written, is refused when
it is opened (a check of its pages; a write taken back), before any trial; a write that fails mid-run keeps its
trial in ``<db>.recovered.jsonl``, stored when the database is next opened to write; every sqlite error becomes a
:class:`~liftpy.errors.DatabaseError` naming the file.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import statistics
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Protocol, Sequence

from ..errors import DatabaseError, InputError
from .program import JOINED, ROUTE

if TYPE_CHECKING:
    from .program import ProgramTask

SCHEMA_VERSION = 5
#: how long a statement waits for another connection's lock before SQLite says the database is locked
BUSY_TIMEOUT_S = 30.0
#: the pauses (seconds) before a write refused as locked is tried again; then its trial is kept aside
WRITE_RETRIES = (0.1, 0.5, 2.0)
#: what each older schema lacks, changed in place when such a database is opened for writing (no trial is lost)
_MIGRATIONS = {
    1: ["ALTER TABLE trials ADD COLUMN check_seed INTEGER"],
    2: ["ALTER TABLE trials ADD COLUMN moved_bytes INTEGER"],
    # the column held any task's key, not only a layer's
    3: ["ALTER TABLE trials RENAME COLUMN layer TO task_key", "ALTER TABLE trials RENAME COLUMN layer_name TO label"],
    4: ["ALTER TABLE trials ADD COLUMN features TEXT"],
}
#: the trials' columns by their names before schema 4, for reading an older database as it is
_OLD_NAMES = {"task_key": "layer", "label": "layer_name"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    task_key TEXT NOT NULL,         -- what was tuned (Subject.key): a program's key; a layer's shape before the
                                    -- hand-written pipelines were retired (schema 3 and older: column layer)
    label TEXT NOT NULL,            -- Subject.label: a program's file, vgg16.7, or '' (before 4: layer_name)
    algorithm TEXT NOT NULL,        -- how it was lowered: ROUTE, or a retired pipeline's name
    config TEXT NOT NULL,           -- JSON, keys sorted
    device TEXT NOT NULL,
    driver TEXT NOT NULL,
    platform TEXT NOT NULL,
    liftpy_version TEXT NOT NULL,
    status TEXT NOT NULL,           -- ok | wrong | build_error | runtime_error | codegen_error | invalid | timeout | crash
    cause TEXT NOT NULL,            -- why, for every status but ok
    time_ms REAL,                   -- median over repeats of the sum of the pipeline's kernel times
    times_ms TEXT,                  -- JSON: every timing round's figure (before issue 48: every repeat's total)
    stage_ms TEXT,                  -- JSON: median per kernel
    memory_bytes INTEGER,           -- global memory the pipeline allocates
    max_error REAL,                 -- largest error against the reference, in units of the float32 tolerance
                                    -- (the naive lowering's at tuning.tolerance's bound; before 64a0cfc at the
                                    -- output's scale; schema 1: relative to the float64 reference)
    source_hashes TEXT,             -- JSON: kernel name -> sha256 of its OpenCL source
    seconds REAL,                   -- wall time of the whole trial (generate, build, run, check)
    created TEXT NOT NULL,
    check_seed INTEGER,             -- the seed of the inputs the trial (its batch) was checked on
    moved_bytes INTEGER,            -- global bytes a call's kernels ask for (codegen.traffic; not in schema 2)
    features TEXT,                  -- JSON: what a cost model reads of its kernels (tuning.features; from 5)
    UNIQUE (task_key, algorithm, config, device)
);
CREATE TABLE IF NOT EXISTS baselines (
    layer TEXT NOT NULL,            -- ConvLayer.key: a baseline is a layer's (liftpy.nn)
    device TEXT NOT NULL,
    name TEXT NOT NULL,
    time_ms REAL NOT NULL,
    memory_bytes INTEGER,
    created TEXT NOT NULL,
    PRIMARY KEY (layer, device, name)
);
"""


class Subject(Protocol):
    """What the database keys trials by: a :class:`~liftpy.tuning.program.ProgramTask` (in databases written
    before the hand-written pipelines were retired, also a layer). ``key`` is its identity (a program's
    structure and sizes), ``label`` a readable name kept beside it."""

    @property
    def key(self) -> str: ...

    @property
    def label(self) -> str: ...

    def describe(self) -> str: ...

    def complete(self, config: dict) -> dict:
        """A configuration as the subject's space writes it now: one recorded before a choice existed gets
        that choice's value by absence (so a resumed search knows it was measured)."""
        ...


def config_key(config: dict) -> str:
    return json.dumps({k: int(v) for k, v in sorted(config.items())}, ensure_ascii=False)


@dataclass(frozen=True)
class Trial:
    """One measured configuration, as the database holds it (see the schema's comments)."""

    task_key: str
    label: str
    algorithm: str
    config: dict
    device: str
    status: str
    cause: str
    time_ms: float | None
    memory_bytes: int | None
    max_error: float | None
    stage_ms: dict
    seconds: float | None
    check_seed: int | None = None
    moved_bytes: int | None = None
    #: the figures its time is the median of: its timing rounds (older databases: its repeats)
    times_ms: tuple[float, ...] = ()
    #: what a cost model reads of its kernels (:mod:`liftpy.tuning.features`; empty before schema 5)
    features: dict = field(default_factory=dict)

    @property
    def measured_again(self) -> bool:
        """Whether the trial was measured again in turns with its rivals (:meth:`TuningDB.remeasured`)."""
        return MEASURED_AGAIN in self.cause


#: what :meth:`TuningDB.remeasured` writes into a trial's cause
MEASURED_AGAIN = "measured again"


#: the resolution of a search's figures: measured-again trials whose times are within this share of the
#: fastest's are not told apart, nor are data movements within it (6%: the median spread of the nine VGG-16
#: layers' three passes, e04a4bd, Zen 4; benchmarks/results/notes-tuning.md)
TIED = 0.06


def ranked_by_time(trials: Iterable[Trial]) -> list[Trial]:
    """The correct trials, those measured again in turns with their rivals first, each by time: a first median
    alone can come from a fast spell of the machine."""
    return sorted(iter_ok(trials), key=lambda t: (not t.measured_again, t.time_ms))


def ranked(trials: Iterable[Trial]) -> list[Trial]:
    """The correct trials, best first: :func:`ranked_by_time`, except that measured-again trials within
    :data:`TIED` of the fastest's time whose kernels move fewer global bytes by more than :data:`TIED`
    (:mod:`liftpy.codegen.traffic`) go before it, fewest bytes first (by time alone where one lacks the
    figure). Of kernels the machine cannot tell apart, the one asking less of the shared caches holds up better
    beside other tenants (benchmarks/results/notes-tuning.md)."""
    by_time = ranked_by_time(trials)
    if not by_time or not by_time[0].measured_again:
        return by_time
    lighter = lighter_rivals(by_time[0], [t for t in by_time if t.measured_again])
    chosen = {id(t) for t in lighter}
    return lighter + [t for t in by_time if id(t) not in chosen]


def lighter_rivals(fastest: Trial, trials: Iterable[Trial]) -> list[Trial]:
    """Of ``trials``, those within :data:`TIED` of ``fastest``'s time whose kernels move fewer global bytes by
    more than :data:`TIED`, fewest bytes first; none where one within that time lacks the figure."""
    near = [t for t in trials if t is not fastest and t.time_ms <= fastest.time_ms * (1 + TIED)]
    if fastest.moved_bytes is None or any(t.moved_bytes is None for t in near):
        return []
    return sorted((t for t in near if t.moved_bytes < fastest.moved_bytes * (1 - TIED)),
                  key=lambda t: (t.moved_bytes, t.time_ms))


def chosen(alternatives: Sequence["Best"]) -> "Best | None":
    """Of the bests of programs computing the same thing (a layer's direct and Winograd programs), the one to
    run: the fastest, unless another within :data:`TIED` of its time allocates less device memory beside its
    inputs by more than :data:`TIED` (the least then). Each best was timed alone, its data in the caches; in a
    network the steps around it evict what a program keeps (its intermediates, its transformed weights), which
    it then reads from memory (benchmarks/results/networks-72ad178-zen4.txt). None if there is none."""
    if not alternatives:
        return None
    fastest = min(alternatives, key=lambda best: best.time_ms)
    near = [b for b in alternatives if b is not fastest and b.time_ms <= fastest.time_ms * (1 + TIED)]
    lighter = [b for b in near if b.memory_bytes < fastest.memory_bytes * (1 - TIED)]
    return min(lighter, key=lambda best: (best.memory_bytes, best.time_ms)) if lighter else fastest


@dataclass(frozen=True)
class Best:
    """A task's best: its best correct trial (:func:`ranked`), or for a task tuned stage by stage each stage's
    best, joined. What the tuner returns and :meth:`TuningDB.best` answers.

    ``config``: the route's choices (a staged task's: each stage's, by the stage's name); ``time_ms``: the
    trial's median kernel time (a staged task's: the joined program's, timed whole, else :func:`per_call_ms`);
    ``trials``: every trial of the task (of its stages) on the device; ``name``: what a caller choosing among
    several tasks called this one (liftpy.nn: the layer's algorithm), else ''. The low-level program is lowered
    when first asked for, in ``space`` (by default the task's on the default device)."""

    task: "ProgramTask"
    config: dict
    time_ms: float
    trials: tuple[Trial, ...]
    stages: tuple["Best", ...] = ()
    name: str = ""
    space: object = field(default=None, compare=False, repr=False)
    #: a staged task's trial of its stages joined, timed whole (:data:`~.program.JOINED`), where there is one
    whole: Trial | None = None

    def timed_whole(self, whole: Trial | None) -> "Best":
        """This staged best with its time the joined program's ``whole`` trial's (itself where there is none)."""
        return self if whole is None else replace(self, time_ms=whole.time_ms, whole=whole)

    @property
    def trial(self) -> Trial:
        """The trial that measured the best configuration; a staged task has one per stage (``stages``)."""
        if self.stages:
            raise InputError(f"{self.task.describe()} was tuned stage by stage: each stage has its best trial")
        key = config_key(self.config)
        return next(t for t in self.trials if t.status == "ok" and config_key(t.config) == key)

    @property
    def device(self) -> str:
        """The device the best was measured on."""
        return self.stages[0].device if self.stages else self.trial.device

    @property
    def memory_bytes(self) -> int:
        """The global memory the program allocates beside its inputs (a staged task's: its stages')."""
        if self.stages:
            return sum(stage.memory_bytes for stage in self.stages)
        return self.trial.memory_bytes or 0

    @cached_property
    def program(self):
        """The low-level program the best stands for (a staged task's: its stages' joined)."""
        if self.stages:
            from ..rewrite.stages import join_stages

            lowered = {stage.task.stage: stage.program for stage in self.stages}
            return join_stages(self.task.load(), self.task.function, lowered)
        return (self.space or self.task.space()).lower(self.config)

    def compile(self, device=None):
        """The best program compiled for ``device`` (an Executable: ``.run(inputs)``, ``.prepare(constants)``)."""
        from .. import compile as compile_program

        return compile_program(self.program, self.task.size_map, device, self.task.function)


def per_call_ms(stages: Iterable[Best]) -> float:
    """A staged program's time per call: its stages' times, less those of the stages run once when it is
    prepared (``hoisted``)."""
    return sum(stage.time_ms for stage in stages if not stage.task.hoisted)


def best_of(task: "ProgramTask", trials: Sequence[Trial], space=None) -> Best | None:
    """The best correct trial of a one-stage task among ``trials`` (:func:`ranked`); None if none is correct."""
    ok = ranked(trials)
    if not ok:
        return None
    return Best(task, dict(ok[0].config), ok[0].time_ms, tuple(trials), space=space)


def joined(task: "ProgramTask", stages: Sequence[Best]) -> Best:
    """A staged task's best from its stages' (in the order they run), its time their :func:`per_call_ms` until
    it is timed whole (:meth:`Best.timed_whole`)."""
    return Best(task, {stage.task.stage: stage.config for stage in stages}, per_call_ms(stages),
                tuple(trial for stage in stages for trial in stage.trials), tuple(stages))


def flat_config(config: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """A staged task's configuration (each stage's choices by the stage's name) as one row's: ``stage/choice``."""
    return {f"{stage}/{choice}": value for stage, choices in config.items() for choice, value in choices.items()}


def _guarded(doing: str):
    """A TuningDB method whose sqlite errors become a DatabaseError naming the file, what was being done and why."""
    def wrap(method):
        @functools.wraps(method)
        def guarded(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except sqlite3.Error as e:
                raise self._failed(doing, e) from None
        return guarded
    return wrap


def _locked(error: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds the database (worth trying again)."""
    return getattr(error, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or \
        "database is locked" in str(error)


def _plain(value):
    """A value JSON cannot write (a numpy number) as one it can."""
    return value.item() if hasattr(value, "item") else str(value)


class TuningDB:
    """The database at ``path``: made when missing and migrated to this schema, unless opened ``readonly``
    (then read as it is, whatever schema it has, and never written). Opened to write, it is checked writable and
    the trials kept aside by a failed write (:meth:`record`) are brought back (how many: ``recovered``)."""

    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self.recovered = 0
        if not readonly and self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._refuse_foreign_file()
        self.conn = None
        try:
            self._open()
            if not readonly:
                self._probe_write()
                self.recovered = self._bring_back()
        except BaseException as e:
            if self.conn is not None:
                self.conn.close()
            if isinstance(e, sqlite3.Error):
                raise self._unopened(e) from None
            raise

    def _open(self) -> None:
        """Connect, check the pages, refuse another program's database or a newer schema, migrate an older one."""
        readonly = self.readonly
        self.conn = self._connect()
        self._check_intact()
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "meta" not in tables:  # another program's database: never write into it
            raise DatabaseError(f"{self.path}: an SQLite database, but not a liftpy tuning database (its tables: "
                                f"{', '.join(sorted(tables))}); give another --db")
        if readonly and not tables:  # an empty file: read as an empty database
            self.conn.close()
            self.conn = sqlite3.connect(":memory:")
        if not readonly or not tables:
            self.conn.executescript(_SCHEMA)
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = SCHEMA_VERSION if row is None else int(row[0])
        if version > SCHEMA_VERSION or (version < SCHEMA_VERSION and version not in _MIGRATIONS):
            raise DatabaseError(f"{self.path}: tuning database schema {version}, this liftpy reads {SCHEMA_VERSION}")
        if row is None and not readonly:
            self.conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.conn.commit()
        elif version < SCHEMA_VERSION and not readonly:
            for older in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[older]:
                    self.conn.execute(statement)
            self.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            self.conn.commit()
        self._columns = {r[1] for r in self.conn.execute("PRAGMA table_info(trials)")}

    def _connect(self) -> sqlite3.Connection:
        if not self.readonly:
            return sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S)
        if not self.path.is_file():
            raise DatabaseError(f"{self.path}: no such tuning database")
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)

    def _check_intact(self) -> None:
        """SQLite's check of every page, before anything is read or written: a damaged page is refused at once
        rather than met mid-run (a read may miss it and answer from the rest; a write into it spreads it).
        Milliseconds: 16 ms for the largest file in benchmarks/results/."""
        problems = [row[0] for row in self.conn.execute("PRAGMA quick_check(1)")]
        if problems != ["ok"]:  # "*** in database main ***\nPage 12: btreeInitPage() returns error code 11"
            where = "; ".join(line for line in problems[0].splitlines() if not line.startswith("***"))
            raise sqlite3.DatabaseError(f"database disk image is malformed: {where}")

    def _probe_write(self) -> None:
        """A write taken back, before any trial: a file SQLite reads but cannot write (read-only or immutable,
        on a read-only disk, in a directory where its journal cannot be made, locked by another connection) is
        refused here, not at the first trial's record."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('write_probe', '')")
        except sqlite3.Error as e:
            raise self._failed("write it", e) from None
        finally:
            self._rollback()

    def _failed(self, doing: str, error: sqlite3.Error) -> DatabaseError:
        """``error``, met while ``doing``, as a liftpy error naming the file."""
        cause = str(error)
        if "malformed" in cause:
            return DatabaseError(f"{self.path}: the file is damaged ({cause}); restore it from a copy, or give "
                                 f"another --db")
        if _locked(error):
            cause += " by another connection"
        return DatabaseError(f"{self.path}: cannot {doing} ({cause})")

    def _unopened(self, error: sqlite3.Error) -> DatabaseError:
        """An sqlite error met while opening the database, as a liftpy error naming the file."""
        if "unable to open database file" in str(error):  # a path it can neither open nor create (/proc/x)
            return DatabaseError(f"{self.path}: cannot open or create it")
        if "file is not a database" in str(error):
            return DatabaseError(f"{self.path}: not a liftpy tuning database ({error})")
        # making or migrating the schema writes: a read-only file is refused as the write probe refuses it
        return self._failed("write it" if "readonly" in str(error) else "open it", error)

    def _rollback(self) -> None:
        try:
            self.conn.rollback()
        except sqlite3.Error:  # nothing to take back, or the connection is past it: the error at hand says why
            pass

    def _column(self, name: str) -> str:
        """A trials column as this database names it (an older schema's name, or NULL where it lacks it)."""
        if name in self._columns:
            return name
        return _OLD_NAMES[name] if _OLD_NAMES.get(name) in self._columns else "NULL"

    def _refuse_foreign_file(self) -> None:
        """A file that is not an SQLite database is refused before sqlite touches it: sqlite would take a file
        shorter than its header for an empty database and write over it."""
        if self.path.is_file() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as f:
                header = f.read(16)
            if header != b"SQLite format 3\x00":
                raise DatabaseError(f"{self.path}: not a liftpy tuning database (not an SQLite file); give another "
                                    f"--db")

    @_guarded("close it")
    def close(self):
        self.conn.close()

    # -------------------------------------------------------------------------------- writing
    @property
    def recovery_path(self) -> Path:
        """Where a write that fails keeps its trial, a line of JSON each: ``<db>.recovered.jsonl``."""
        return self.path.with_name(self.path.name + ".recovered.jsonl")

    def record(self, subject: Subject, algorithm: str, config: dict, device: dict, result: dict) -> None:
        """Store one finished trial and commit it at once (:meth:`_store`: a failed write keeps it aside)."""
        self._store({"op": "record", "task_key": subject.key, "label": subject.label, "algorithm": algorithm,
                     "config": dict(config), "device": dict(device), "result": dict(result),
                     "created": time.strftime("%Y-%m-%d %H:%M:%S")})

    def _store(self, entry: dict) -> None:
        """Write ``entry`` (a trial, or a trial's new measurements) and commit it. Refused because another
        connection holds the database, it is tried again after each of WRITE_RETRIES' pauses; failing still, it
        is kept as a line of JSON in :attr:`recovery_path` (else in the working directory, else in the message)
        and a DatabaseError says where: a measurement is never lost to the database, and the run stops."""
        for pause in (*WRITE_RETRIES, None):
            try:
                self._apply(entry)
                self.conn.commit()
                return
            except sqlite3.Error as e:
                error = e
                self._rollback()
                if pause is None or not _locked(e):
                    break
                time.sleep(pause)
        what = "the trial" if entry["op"] == "record" else "the trial's new measurements"
        raise DatabaseError(f"{self._failed(f'store {what}', error).message}; {self._keep_aside(entry, what)}")

    def _keep_aside(self, entry: dict, what: str) -> str:
        """Append ``entry`` to the recovery file beside the database, else to one of that name in the working
        directory; where it went, for the message."""
        line = json.dumps(entry, default=_plain, ensure_ascii=False)
        for place in (self.recovery_path, Path.cwd() / self.recovery_path.name):
            try:
                with open(place, "a", encoding="utf-8") as f:
                    f.write(line + "\n")
            except OSError:
                continue
            if place == self.recovery_path:
                return f"{what} is kept in {place}, and stored when the database is next opened to write"
            return f"{what} is kept in {place}: move it to {self.recovery_path} to store it there"
        return f"it could not be kept in a file either: {line}"

    def _bring_back(self) -> int:
        """Store what failed writes kept in :attr:`recovery_path`, in the order they were kept, in one
        transaction, then remove the file; how many entries. A line that is no such entry refuses the database,
        the file left to be mended: nothing is dropped."""
        kept = self.recovery_path
        if not kept.is_file():
            return 0
        try:
            lines = [line for line in kept.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, UnicodeDecodeError) as e:
            raise DatabaseError(f"{kept}: cannot read the trials kept there ({getattr(e, 'strerror', None) or e})") \
                from None
        number = 0
        try:
            for number, line in enumerate(lines, 1):
                self._apply(json.loads(line))
            self.conn.commit()
        except sqlite3.Error as e:
            self._rollback()
            raise self._failed(f"store the trials kept in {kept}", e) from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            self._rollback()
            raise DatabaseError(f"{kept}:{number}: not a trial kept by liftpy ({e!r}); mend or remove the line") \
                from None
        try:
            kept.unlink()
        except OSError as e:
            raise DatabaseError(f"{kept}: its trials are stored in {self.path} now, but it cannot be removed "
                                f"({e.strerror or e}): remove it, or they are stored again") from None
        return len(lines)

    def _apply(self, entry: dict) -> None:
        """Execute a kept write (uncommitted)."""
        {"record": self._insert, "remeasured": self._remeasure}[entry["op"]](entry)

    def _insert(self, entry: dict) -> None:
        from .. import __version__

        config, device, result = entry["config"], entry["device"], entry["result"]
        self.conn.execute(
            "INSERT OR REPLACE INTO trials (task_key, label, algorithm, config, device, driver, platform, "
            "liftpy_version, status, cause, time_ms, times_ms, stage_ms, memory_bytes, max_error, source_hashes, "
            "seconds, created, check_seed, moved_bytes, features) VALUES (" + ", ".join("?" * 21) + ")",
            (entry["task_key"], entry["label"], entry["algorithm"], config_key(config),
             device["name"], device["driver"], device["platform"], __version__, result["status"],
             result.get("cause", ""), result.get("time_ms"), json.dumps(result.get("times_ms", [])),
             json.dumps(result.get("stage_ms", {})), result.get("memory_bytes"), result.get("max_error"),
             json.dumps(result.get("source_hashes", {})), result.get("seconds"),
             entry["created"], result.get("check_seed"), result.get("moved_bytes"),
             json.dumps(result["features"]) if result.get("features") else None),
        )

    def remeasured(self, subject: Subject, algorithm: str, config: dict, device: str, results: list[dict]) -> None:
        """New measurements of a correct trial, taken in rounds, in turns with its rivals: its time becomes the
        median of the new medians (taken at the same times as its rivals'; the median, not the slowest: one slow
        spell would sink a trial, benchmarks/results/notes-tuning.md), its runs those of all; a wrong new result
        makes it wrong. Stored as :meth:`record` stores a trial."""
        self._store({"op": "remeasured", "task_key": subject.key, "label": subject.label, "algorithm": algorithm,
                     "config": dict(config), "device": device, "results": [dict(r) for r in results]})

    def _remeasure(self, entry: dict) -> None:
        where = "task_key = ? AND algorithm = ? AND config = ? AND device = ?"
        trial = (entry["task_key"], entry["algorithm"], config_key(entry["config"]), entry["device"])
        algorithm, config, results = entry["algorithm"], entry["config"], entry["results"]
        row = self.conn.execute(f"SELECT time_ms, times_ms, cause FROM trials WHERE {where}", trial).fetchone()
        if row is None:
            raise KeyError(f"no trial of {algorithm} {config} to measure again")
        time_ms, times, cause = row[0], json.loads(row[1] or "[]"), row[2] or ""
        failed = [r for r in results if r["status"] != "ok"]
        if failed:
            status, cause = failed[0]["status"], f"{MEASURED_AGAIN}: {failed[0].get('cause', '')}"
        else:
            status = "ok"
            first, medians = time_ms, [r["time_ms"] for r in results]
            time_ms = statistics.median(medians)
            times += [t for r in results for t in r.get("times_ms", [])]
            cause = (cause + "; " if cause else "") + f"first median {first:.3f} ms; {MEASURED_AGAIN} in turns with " \
                f"its rivals, medians " + ", ".join(f"{m:.3f}" for m in medians) + " ms"
        self.conn.execute(f"UPDATE trials SET status = ?, cause = ?, time_ms = ?, times_ms = ? WHERE {where}",
                          (status, cause, time_ms, json.dumps(times), *trial))

    @_guarded("store a trial's data movement")
    def set_moved_bytes(self, subject: Subject, algorithm: str, config: dict, device: str, moved: int) -> None:
        """A trial's data-movement figure, computed after it was measured (``scripts/fill_moved_bytes.py``)."""
        self.conn.execute("UPDATE trials SET moved_bytes = ? WHERE task_key = ? AND algorithm = ? AND config = ? "
                          "AND device = ?", (moved, subject.key, algorithm, config_key(config), device))
        self.conn.commit()

    @_guarded("store trials' features")
    def set_features(self, subject: Subject, algorithm: str, device: str, rows: Sequence[tuple[dict, dict]]) -> None:
        """Trials' features read again by a newer liftpy (:mod:`liftpy.tuning.features`), their measurements
        unchanged: (configuration, features) each, in one transaction."""
        self.conn.executemany(f"UPDATE trials SET features = ? WHERE {self._column('task_key')} = ? AND "
                              "algorithm = ? AND config = ? AND device = ?",
                              [(json.dumps(features), subject.key, algorithm, config_key(config), device)
                               for config, features in rows])
        self.conn.commit()

    @_guarded("store a baseline")
    def record_baseline(self, subject: Subject, device: str, name: str, time_ms: float, memory_bytes: int | None):
        self.conn.execute("INSERT OR REPLACE INTO baselines VALUES (?, ?, ?, ?, ?, ?)",
                          (subject.key, device, name, time_ms, memory_bytes, time.strftime("%Y-%m-%d %H:%M:%S")))
        self.conn.commit()

    # -------------------------------------------------------------------------------- reading
    @_guarded("read it")
    def trials(self, subject: Subject | None = None, device: str | None = None, status: str | None = None,
               algorithm: str | None = None) -> list[Trial]:
        columns = ("task_key", "label", "algorithm", "config", "device", "status", "cause", "time_ms",
                   "memory_bytes", "max_error", "stage_ms", "seconds", "check_seed", "moved_bytes", "times_ms",
                   "features")
        query, args = f"SELECT {', '.join(map(self._column, columns))} FROM trials WHERE 1", []
        for column, value in (("task_key", subject.key if subject else None), ("device", device),
                              ("status", status), ("algorithm", algorithm)):
            if value is not None:
                query += f" AND {self._column(column)} = ?"
                args.append(value)
        out = []
        for row in self.conn.execute(query + " ORDER BY id", args):
            out.append(Trial(row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6], row[7], row[8],
                             row[9], json.loads(row[10] or "{}"), row[11], row[12], row[13],
                             tuple(json.loads(row[14] or "[]")), json.loads(row[15] or "{}")))
        return out

    @_guarded("read it")
    def source_hashes(self, subject: Subject, algorithm: str, config: dict, device: str) -> dict[str, str]:
        """The hashes of the kernel sources a trial ran, as recorded with it (empty if none were)."""
        row = self.conn.execute(f"SELECT source_hashes FROM trials WHERE {self._column('task_key')} = ? AND "
                                "algorithm = ? AND config = ? AND device = ?",
                                (subject.key, algorithm, config_key(config), device)).fetchone()
        return json.loads(row[0] or "{}") if row else {}

    def best(self, task: "ProgramTask", device: str | None = None) -> Best | None:
        """The task's best on the device named (any device: None) through the automatic route: its best correct
        trial, or a staged task's stages' best joined; None where a stage (or the task) has no correct trial. A
        wrong result never counts; nothing is lowered until the program is asked for."""
        stages = task.stages()
        if len(stages) > 1:
            found = [self.best(stage, device) for stage in stages]
            if None in found:
                return None
            best = joined(task, found)
            return best.timed_whole(self.whole(task, best.config, device))
        return best_of(task, self.trials(task, device, algorithm=ROUTE))

    def whole(self, task: "ProgramTask", config: Mapping[str, Mapping[str, int]], device: str | None = None
              ) -> Trial | None:
        """The correct :data:`~.program.JOINED` trial of a staged task's stages at ``config`` (each stage's
        choices by its name), timed whole on the device; None if there is none."""
        key = config_key(flat_config(config))
        found = [t for t in self.trials(task, device, "ok", JOINED)
                 if t.time_ms is not None and config_key(t.config) == key]
        return min(found, key=lambda t: t.time_ms) if found else None

    @_guarded("read it")
    def baselines(self, subject: Subject, device: str) -> dict[str, tuple[float, int | None]]:
        rows = self.conn.execute("SELECT name, time_ms, memory_bytes FROM baselines WHERE layer = ? AND device = ?",
                                 (subject.key, device))
        return {r[0]: (r[1], r[2]) for r in rows}


def default_db_path() -> Path:
    """Where conv2d looks for tuning results: $LIFTPY_TUNING_DB, else ~/.cache/liftpy/tuning.sqlite."""
    import os

    return Path(os.environ.get("LIFTPY_TUNING_DB", Path.home() / ".cache" / "liftpy" / "tuning.sqlite"))


def iter_ok(trials: Iterable[Trial]) -> list[Trial]:
    return [t for t in trials if t.status == "ok" and t.time_ms is not None]
