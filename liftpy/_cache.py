"""A disk cache of what liftpy derives from its own data files (the grammar's parse tables, the rule catalogue
read and elaborated), so that each process -- a command, a tuner's builders and runner -- does not derive it
again.

An entry's key is a hash of its input text and of liftpy's own files (each one's path, size and modification
time, as Python's bytecode cache keys a module): an edited rule file or an edited liftpy makes a new entry,
never a stale one. The cache lives in ``$LIFTPY_CACHE`` (default ``$XDG_CACHE_HOME/liftpy`` or
``~/.cache/liftpy``), a folder only its user may write: an entry is read only from a folder and a file that
user owns. A cache that cannot be read or written is no error: the value is derived as without one. A kind keeps
its newest entries (:data:`KEPT`, unless it says otherwise; an edited liftpy leaves the old ones behind).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

#: entries a kind keeps, the newest
KEPT = 16


def cache_dir() -> Path:
    """Where liftpy keeps what it derived (``$LIFTPY_CACHE``, else the user's cache folder)."""
    if os.environ.get("LIFTPY_CACHE"):
        return Path(os.environ["LIFTPY_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "liftpy"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of liftpy's own files (path, size, modification time): it changes when liftpy does."""
    from ._paths import data_dir

    digest = hashlib.sha256()
    roots = [Path(__file__).resolve().parent]
    for folder in ("grammar", "rewrites"):
        try:
            roots.append(Path(str(data_dir(folder))))
        except (TypeError, ValueError):  # not a folder on disk: its files are keyed by their text
            pass
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".lark", ".lift", ".rules", ".json"):
                try:
                    stat = path.stat()
                except OSError:  # a dangling link: not one of liftpy's files
                    continue
                digest.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def entry(kind: str, text: str, kept: int = KEPT) -> Path | None:
    """The file of the entry for ``text`` of ``kind`` (keyed by liftpy's code too), in a folder made this user's
    (the kind's oldest entries pruned to leave ``kept``); None where there is no such folder, or the file is not
    this user's alone."""
    key = hashlib.sha256(f"{kind}\n{code_fingerprint()}\n{text}".encode()).hexdigest()
    folder = cache_dir() / kind
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return None
    path = folder / f"{key}.pickle"
    if not _owned(folder) or (path.exists() and not _owned(path)):
        return None
    if not path.exists():
        _prune(folder, kept)
    return path


def _prune(folder: Path, kept: int) -> None:
    """The kind's oldest entries removed, leaving room for a new one among the ``kept``."""
    try:
        entries = sorted(folder.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[: max(0, len(entries) - kept + 1)]:
            old.unlink()
    except OSError:  # another process pruned it first
        pass


def remembered(kind: str, text: str, derive: Callable[[], T], kept: int = KEPT) -> T:
    """``derive()``, kept on disk under a key of ``kind``, ``text`` (what it is derived from) and liftpy's code;
    the kind keeps its ``kept`` newest entries."""
    path = entry(kind, text, kept)
    if path is not None and path.exists():
        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except Exception:  # unreadable, or written by a liftpy whose classes differ: derived again
            pass
    value = derive()
    if path is not None:
        written = None
        try:
            with tempfile.NamedTemporaryFile("wb", dir=path.parent, suffix=".tmp", delete=False) as f:
                written = f.name
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(written, path)  # whole or not at all, for another process reading it
        except Exception:  # a cache that cannot be written: nothing lost but the time next
            if written is not None and os.path.exists(written):
                os.unlink(written)
    return value


def _owned(path: Path) -> bool:
    """Whether ``path`` exists, is this user's, and no one else may write it."""
    try:
        stat = path.stat()
    except OSError:
        return False
    user = os.getuid() if hasattr(os, "getuid") else stat.st_uid
    return stat.st_uid == user and not stat.st_mode & 0o022
