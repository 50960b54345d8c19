"""Which files of a cache directory are wgtune's, and what is done to them beside reading them:
their locks, the set-aside copies of damaged ones, the temp files dead writers leave.

A cache directory may hold other programs' files (it can be a directory the user shares with
other tools): wgtune reads, moves and removes only the files named as it names its own
(:func:`is_wgtune_file`): the database ``wgtune.sqlite3`` (``sqlite_store.py``), the old JSON
documents ``<device>--<tuner>--<version>--<hash>.json`` (``file_store.py``), and their temp files
and ``.corrupt-<timestamp>`` copies. A ``package.json`` beside them is never a document.

Locks are :class:`filelock.FileLock` files beside what they guard (``<name>.lock``), shared with
every process of this machine (:func:`file_lock`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock

from wgtune.tune.log import logger

__all__ = [
    "DATABASE_NAME",
    "KEEP_CORRUPT",
    "LOCK_TIMEOUT",
    "STALE_SECONDS",
    "file_lock",
    "is_document_name",
    "is_wgtune_file",
    "remove_leftovers",
    "set_aside_database",
    "set_aside_if_not_sqlite",
]

DATABASE_NAME = "wgtune.sqlite3"
"""The cache database's file name in the cache directory (``sqlite_store.py``)."""

LOCK_TIMEOUT = 60.0
"""Seconds a write waits for another process's lock; ``filelock.Timeout`` is an OSError."""
STALE_SECONDS = 60.0
"""A temp file this old is a dead writer's (a write takes milliseconds), whoever wrote it."""
KEEP_CORRUPT = 5
"""Set-aside copies kept per document: the newest; older ones are removed."""

# A writer's temp file: ".<document>.<host>-<pid>.<random>.tmp" (see _write_atomic); an older
# wgtune's: ".<document>.<random>.tmp".
_TEMP = re.compile(r"^\.(?P<document>.+)\.(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)\.[^.]+\.tmp$")
_ANY_TEMP = re.compile(r"^\.(?P<document>.+?\.json)\.[^.]+\.tmp$")
_CORRUPT = re.compile(r"^(?P<document>.+\.(?:json|sqlite3))\.corrupt-.+$")
# What document_name makes: three slugs and a hash, so another program's "package.json" is never
# taken for a document (and never migrated, set aside or tidied away).
_DOCUMENT = re.compile(r"^[a-z0-9.-]+--[a-z0-9.-]+--[a-z0-9.-]+--[0-9a-f]{8}\.json$")
SQLITE_MAGIC = b"SQLite format 3\x00"


def is_document_name(name: str) -> bool:
    """Whether ``name`` is a namespace document's file name as ``file_store.document_name`` makes them."""
    return _DOCUMENT.match(name) is not None


def is_wgtune_file(name: str) -> bool:
    """Whether ``name`` is wgtune's own in a cache directory: a document, the database, or a
    temp file or set-aside copy of one of them. Nothing else there is read, moved or removed."""
    temp = _TEMP.match(name) or _ANY_TEMP.match(name)
    corrupt = _CORRUPT.match(name)
    base = temp["document"] if temp else corrupt["document"] if corrupt else name
    return base == DATABASE_NAME or is_document_name(base)


_LOCKS_SAID: set[str] = set()


@contextmanager
def file_lock(path: str | os.PathLike, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """``path`` held as a lock file (:class:`filelock.FileLock`), shared with every process of this
    machine; ``filelock.Timeout`` (an OSError) after ``timeout`` seconds.

    A directory in the lock file's place cannot be locked by anyone (an older wgtune fails on it
    too), so nobody can be writing under it: the lock is gone without, said once per path,
    rather than leaving every run without a store."""
    lock = FileLock(os.fspath(path), timeout=timeout)
    try:
        lock.acquire()
    except IsADirectoryError:
        held = False
        if os.fspath(path) not in _LOCKS_SAID:
            _LOCKS_SAID.add(os.fspath(path))
            logger.warning("%s", f"the lock file {os.fspath(path)} is a directory, which no process can lock; "
                                 "going on without it (left as it is)")
    else:
        held = True
    try:
        yield
    finally:
        if held:
            lock.release()

def _host_tag() -> str:
    """This machine, in a temp file's name: whose processes a pid there names."""
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def _writer_gone(pid: int) -> bool:
    """Whether process ``pid`` of this machine has exited (False when that cannot be told)."""
    if os.name != "posix":  # os.kill(pid, 0) is no probe on Windows
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's; or cannot tell
        return False
    return False


def _is_stale_temp(path: Path, now: float, host: str) -> bool:
    match = _TEMP.match(path.name)
    if match is not None and match["host"] == host:
        pid = int(match["pid"])
        if pid == os.getpid():
            return False  # this process's own write, in another thread
        if _writer_gone(pid):
            return True
    try:
        return now - path.stat().st_mtime > STALE_SECONDS
    except OSError:  # gone meanwhile: its writer renamed it
        return False


def remove_leftovers(directory: Path) -> list[str]:
    """Remove what dead writers and old damage left in ``directory``: temp files of writers gone
    (see the module doc) and set-aside copies beyond the newest :data:`KEEP_CORRUPT` of each
    document, wgtune's own files only (:func:`is_wgtune_file`). Best effort (an entry that cannot
    be removed stays); the names removed."""
    try:
        paths = [path for path in directory.iterdir()
                 if (path.name.endswith(".tmp") or ".corrupt-" in path.name) and is_wgtune_file(path.name)]
    except OSError:  # no directory yet, or not one: nothing to tidy
        return []
    removed, now, host = [], time.time(), _host_tag()
    copies: dict[str, list[Path]] = {}
    for path in paths:
        corrupt = _CORRUPT.match(path.name)
        if corrupt is not None:
            copies.setdefault(corrupt["document"], []).append(path)
        elif path.name.startswith(".") and _is_stale_temp(path, now, host):
            removed.append(path)
    for kept in copies.values():
        removed += sorted(kept, key=lambda path: path.name)[:-KEEP_CORRUPT]
    names = []
    for path in removed:
        try:
            path.unlink()
        except OSError:
            continue
        names.append(path.name)
    return names


def _not_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            header = file.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return False
    return bool(header) and header != SQLITE_MAGIC  # an empty file is a database not yet written


def set_aside_database(path: Path, still_bad: Callable[[Path], bool]) -> str | None:
    """Move the database at ``path`` aside as ``<name>.corrupt-<timestamp>``, with its ``-wal`` and
    ``-shm`` files, if ``still_bad(path)``; the copy's name, or None when it was not (any more).
    Under a lock beside it, asked again under the lock, so that of two processes finding the same
    damage, the second sees the first's fresh database and moves nothing."""
    with file_lock(str(path) + ".lock"):
        if not still_bad(path):
            return None
        aside = path.with_name(f"{path.name}.corrupt-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}")
        os.replace(path, aside)
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(path.with_name(path.name + suffix), aside.with_name(aside.name + suffix))
    remove_leftovers(path.parent)
    return aside.name


def set_aside_if_not_sqlite(path: Path) -> str | None:
    """Move a file at ``path`` that is not an SQLite database (its header is not SQLite's) aside
    (:func:`set_aside_database`); the copy's name, or None when there is nothing to move (no file,
    an empty one, a database)."""
    if not _not_sqlite(path):  # the usual case, and no lock file made for it
        return None
    return set_aside_database(path, _not_sqlite)
