"""The tuning database: one SQLite file, a row per trial, written as each trial finishes.

Nothing is lost on a crash or Ctrl-C: every trial is committed on its own. The schema is versioned
(``meta.schema_version``); a database of another version is refused rather than misread.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Protocol

from ..errors import InputError

SCHEMA_VERSION = 3
#: what each older schema lacks, added in place when such a database is opened (no trial is lost)
_MIGRATIONS = {
    1: ["ALTER TABLE trials ADD COLUMN check_seed INTEGER"],
    2: ["ALTER TABLE trials ADD COLUMN moved_bytes INTEGER"],
}

_SCHEMA = """
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


class Subject(Protocol):
    """What the tuner tunes: a program at given sizes (:class:`liftpy.tuning.program.ProgramTask`; a
    convolution layer is its program's). ``key`` is its identity in the database (a program's structure and
    sizes; in databases written before the hand-written pipelines were retired, also a layer's shape:
    :class:`liftpy.nn.layers.ConvLayer`), ``label`` a readable name kept beside it."""

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
    layer: str
    layer_name: str
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

    @property
    def measured_again(self) -> bool:
        """Whether the trial was measured again in turns with its rivals (:meth:`TuningDB.remeasured`)."""
        return MEASURED_AGAIN in self.cause


#: what :meth:`TuningDB.remeasured` writes into a trial's cause
MEASURED_AGAIN = "measured again"


#: the resolution of a search's figures: measured-again trials whose times are within this share of the
#: fastest's are not told apart (the three passes of the nine VGG-16 layers' fastest route trials differed by
#: 6%: the median of their ranges, e04a4bd, Zen 4), nor are data movements within it
TIED = 0.06


def ranked_by_time(trials: Iterable[Trial]) -> list[Trial]:
    """The correct trials, those measured again in turns with their rivals first, each by time. A first median
    alone can come from a fast spell of the machine: VGG-16 layer 10's fastest trial timed once (8.46 ms,
    6df01bd, Zen 4) ran 11.7 ms in nn.Conv2d's calls where the fastest measured again (8.47) ran 10.3."""
    return sorted(iter_ok(trials), key=lambda t: (not t.measured_again, t.time_ms))


def ranked(trials: Iterable[Trial]) -> list[Trial]:
    """The correct trials, best first: :func:`ranked_by_time`, except that measured-again trials within
    :data:`TIED` of the fastest's time whose kernels move fewer global bytes by more than :data:`TIED`
    (:mod:`liftpy.codegen.traffic`) go before it, fewest bytes first. By time alone where one of those lacks
    the figure (measured before schema 3).

    Of kernels the machine cannot tell apart, the one asking more of the shared caches pays more when other
    tenants use them: VGG-16 layer 19's fastest trial measured again (16.34 ms, 2210 MiB moved per call) ran
    19.6 ms in calls minutes later where the next one (17.27 ms, 698 MiB) ran 16.8 (e04a4bd, Zen 4)."""
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


class TuningDB:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._refuse_foreign_file()
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=30)
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "meta" not in tables:  # another program's database: never write into it
                self.conn.close()
                raise InputError(f"{self.path}: an SQLite database, but not a liftpy tuning database (its tables: "
                                 f"{', '.join(sorted(tables))}); give another --db")
            self.conn.executescript(_SCHEMA)
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as e:
            if "unable to open database file" in str(e):  # sqlite: a path it can neither open nor create (/proc/x)
                raise InputError(f"{self.path}: cannot open or create it") from None
            raise InputError(f"{self.path}: not a liftpy tuning database ({e})") from None
        if row is None:
            self.conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.conn.commit()
        elif int(row[0]) in _MIGRATIONS:
            for version in range(int(row[0]), SCHEMA_VERSION):
                for statement in _MIGRATIONS[version]:
                    self.conn.execute(statement)
            self.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            self.conn.commit()
        elif int(row[0]) != SCHEMA_VERSION:
            raise InputError(f"{self.path}: tuning database schema {row[0]}, this liftpy reads {SCHEMA_VERSION}")

    def _refuse_foreign_file(self) -> None:
        """A file that is not an SQLite database is refused before sqlite touches it: sqlite would take a file
        shorter than its header for an empty database and write over it."""
        if self.path.is_file() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as f:
                header = f.read(16)
            if header != b"SQLite format 3\x00":
                raise InputError(f"{self.path}: not a liftpy tuning database (not an SQLite file); give another --db")

    def close(self):
        self.conn.close()

    # -------------------------------------------------------------------------------- writing
    def record(self, subject: Subject, algorithm: str, config: dict, device: dict, result: dict) -> None:
        """Store one finished trial and commit it at once."""
        from .. import __version__

        self.conn.execute(
            "INSERT OR REPLACE INTO trials (layer, layer_name, algorithm, config, device, driver, platform, "
            "liftpy_version, status, cause, time_ms, times_ms, stage_ms, memory_bytes, max_error, source_hashes, "
            "seconds, created, check_seed, moved_bytes) VALUES (" + ", ".join("?" * 20) + ")",
            (subject.key, subject.label, algorithm, config_key(config),
             device["name"], device["driver"], device["platform"], __version__, result["status"],
             result.get("cause", ""), result.get("time_ms"), json.dumps(result.get("times_ms", [])),
             json.dumps(result.get("stage_ms", {})), result.get("memory_bytes"), result.get("max_error"),
             json.dumps(result.get("source_hashes", {})), result.get("seconds"),
             time.strftime("%Y-%m-%d %H:%M:%S"), result.get("check_seed"), result.get("moved_bytes")),
        )
        self.conn.commit()

    def remeasured(self, subject: Subject, algorithm: str, config: dict, device: str, results: list[dict]) -> None:
        """New measurements of a correct trial, taken in rounds, in turns with its rivals: its time becomes the
        median of the new medians -- measured at the same times as its rivals', where its first median was taken
        while the machine may have run at another speed -- its runs those of all; a wrong new result makes it
        wrong. The median, not the slowest: kept the slowest, VGG-16 layer 10's rivals (8.1-8.3 ms in the search)
        each met the machine's slow spells in one round or two (16.5, 8.4, 9.6 ms), 22 of 24 then ranked below
        trials never measured again, and an unconfirmed trial won (bbc73e1, Zen 4)."""
        row = self.conn.execute(
            "SELECT time_ms, times_ms, cause FROM trials WHERE layer = ? AND algorithm = ? AND config = ? "
            "AND device = ?", (subject.key, algorithm, config_key(config), device)).fetchone()
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
        self.conn.execute(
            "UPDATE trials SET status = ?, cause = ?, time_ms = ?, times_ms = ? WHERE layer = ? AND algorithm = ? "
            "AND config = ? AND device = ?",
            (status, cause, time_ms, json.dumps(times), subject.key, algorithm, config_key(config), device))
        self.conn.commit()

    def set_moved_bytes(self, subject: Subject, algorithm: str, config: dict, device: str, moved: int) -> None:
        """A trial's data-movement figure, computed after it was measured (``scripts/fill_moved_bytes.py``)."""
        self.conn.execute("UPDATE trials SET moved_bytes = ? WHERE layer = ? AND algorithm = ? AND config = ? "
                          "AND device = ?", (moved, subject.key, algorithm, config_key(config), device))
        self.conn.commit()

    def record_baseline(self, subject: Subject, device: str, name: str, time_ms: float, memory_bytes: int | None):
        self.conn.execute("INSERT OR REPLACE INTO baselines VALUES (?, ?, ?, ?, ?, ?)",
                          (subject.key, device, name, time_ms, memory_bytes, time.strftime("%Y-%m-%d %H:%M:%S")))
        self.conn.commit()

    # -------------------------------------------------------------------------------- reading
    def trials(self, subject: Subject | None = None, device: str | None = None, status: str | None = None,
               algorithm: str | None = None) -> list[Trial]:
        query, args = "SELECT layer, layer_name, algorithm, config, device, status, cause, time_ms, memory_bytes, " \
                      "max_error, stage_ms, seconds, check_seed, moved_bytes FROM trials WHERE 1", []
        for column, value in (("layer", subject.key if subject else None), ("device", device),
                              ("status", status), ("algorithm", algorithm)):
            if value is not None:
                query += f" AND {column} = ?"
                args.append(value)
        out = []
        for row in self.conn.execute(query + " ORDER BY id", args):
            out.append(Trial(row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6], row[7], row[8],
                             row[9], json.loads(row[10] or "{}"), row[11], row[12], row[13]))
        return out

    def source_hashes(self, subject: Subject, algorithm: str, config: dict, device: str) -> dict[str, str]:
        """The hashes of the kernel sources a trial ran, as recorded with it (empty if none were)."""
        row = self.conn.execute("SELECT source_hashes FROM trials WHERE layer = ? AND algorithm = ? AND config = ? "
                                "AND device = ?", (subject.key, algorithm, config_key(config), device)).fetchone()
        return json.loads(row[0] or "{}") if row else {}

    def best(self, subject: Subject, device: str | None = None, algorithm: str | None = None) -> Trial | None:
        """The best correct trial (:func:`ranked`); a wrong result never counts."""
        ok = ranked(self.trials(subject, device, "ok", algorithm))
        return ok[0] if ok else None

    def baselines(self, subject: Subject, device: str) -> dict[str, tuple[float, int | None]]:
        rows = self.conn.execute("SELECT name, time_ms, memory_bytes FROM baselines WHERE layer = ? AND device = ?",
                                 (subject.key, device))
        return {r[0]: (r[1], r[2]) for r in rows}

    def layers(self) -> list[tuple[str, str]]:
        return list(self.conn.execute("SELECT DISTINCT layer, layer_name FROM trials ORDER BY id"))


def default_db_path() -> Path:
    """Where conv2d looks for tuning results: $LIFTPY_TUNING_DB, else ~/.cache/liftpy/tuning.sqlite."""
    import os

    return Path(os.environ.get("LIFTPY_TUNING_DB", Path.home() / ".cache" / "liftpy" / "tuning.sqlite"))


def iter_ok(trials: Iterable[Trial]) -> list[Trial]:
    return [t for t in trials if t.status == "ok" and t.time_ms is not None]
