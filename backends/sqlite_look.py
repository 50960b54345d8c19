"""Reading an SQLite file without writing it, and what SQLite's errors mean for a store.

- :func:`inspect` and :func:`tables_of` look at a file through a connection that cannot write it
  (:func:`connect_read_only`), leaving no side file behind, so that another program's database
  at a store's path is looked at untouched.
- :func:`is_malformed`, :func:`is_read_only`, :func:`is_full` and :func:`is_busy` sort SQLite's
  errors into what a store does about them (``sqlite_open.py``).

SQLite's codes are read from ``sqlite3.Error.sqlite_errorcode`` (Python 3.11+), the message
where there is none.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from wgtune.errors import StoreError
from wgtune.text import shown

from .sqlite_rows import SCHEMA_VERSION

__all__ = ["connect_read_only", "inspect", "is_busy", "is_full", "is_malformed", "is_read_only", "retry_while_locked",
           "schema_version", "tables_of"]

SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_CANTOPEN, SQLITE_NOTADB = 5, 6, 8, 11, 14, 26


T = TypeVar("T")


def _code(error: BaseException) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_malformed(error: BaseException) -> bool:
    """SQLite says the file is damaged: a store sets it aside."""
    text = str(error).lower()
    return _code(error) in (SQLITE_CORRUPT, SQLITE_NOTADB) or "malformed" in text or "not a database" in text


def is_read_only(error: BaseException) -> bool:
    """The database or its directory cannot be written (or the WAL's files made there)."""
    if isinstance(error, PermissionError):
        return True
    text = str(error).lower()
    return _code(error) in (SQLITE_READONLY, SQLITE_CANTOPEN) or "readonly" in text or "unable to open" in text


SQLITE_FULL = 13
SQLITE_IOERR_SHM = (10 | 18 << 8, 10 | 19 << 8, 10 | 21 << 8)  # SQLITE_IOERR_SHMOPEN, _SHMSIZE, _SHMMAP


def is_full(error: BaseException) -> bool:
    """No room to open the database for writing: the disk is full (SQLite's "disk I/O error" where
    the WAL's shared-memory file cannot be made or grown, "database or disk is full" elsewhere)."""
    code = getattr(error, "sqlite_errorcode", None)
    return _code(error) == SQLITE_FULL or code in SQLITE_IOERR_SHM or "disk is full" in str(error).lower()


def is_busy(error: BaseException) -> bool:
    """Another connection held the lock past the busy timeout."""
    return _code(error) in (SQLITE_BUSY, SQLITE_LOCKED) or "locked" in str(error).lower()


def retry_while_locked(action: Callable[[], T], timeout: float) -> T:
    """``action()``, again while the database is locked (switching to WAL takes a lock that the
    busy handler does not always wait for), for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except sqlite3.OperationalError as error:
            if not is_busy(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


READ_ONLY_QUERIES = ("mode=ro", "immutable=1")
"""How ``connect_read_only`` opens a file, in order of preference."""


def _uri(path: Path, query: str) -> str:
    return f"{Path(os.path.abspath(path)).as_uri()}?{query}"


def connect_read_only(path: Path, timeout: float, queries: tuple[str, ...] = READ_ONLY_QUERIES,
                      truncated: bool = False) -> sqlite3.Connection:
    """A connection to ``path`` that cannot write it: ``mode=ro``; else, where the directory cannot
    hold the WAL's shared-memory file (read-only), ``immutable=1`` (no locks: nobody can write
    there either). Raises sqlite3.Error (a malformed file, no file).

    ``truncated``: the file may be shorter than its header says (a copy cut short), which SQLite
    otherwise refuses whole as malformed; ``writable_schema`` has it read the pages that are
    there (it relaxes that check only: the connection still cannot write)."""
    for query in queries:
        connection = sqlite3.connect(_uri(path, query), uri=True, timeout=timeout, isolation_level=None,
                                     check_same_thread=False)
        try:
            if truncated:
                connection.execute("PRAGMA writable_schema = ON")
            connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return connection
        except sqlite3.Error as error:
            connection.close()
            if query == "immutable=1" or is_malformed(error) or not (is_read_only(error) or is_full(error)):
                raise
    raise AssertionError("unreachable")


def _connect_to_look(path: Path, timeout: float) -> sqlite3.Connection:
    """A read-only connection for one look at ``path``'s schema that leaves no file behind.

    Any reader of a database in WAL mode gets SQLite's -wal and -shm files beside it, which a
    read-only connection cannot remove on closing: a look at another program's database would
    leave them there. Where the file's header says WAL (bytes 18-19) and neither file is there,
    no connection holds the database in WAL mode and the file alone holds every page: it is read
    ``immutable`` (no locks, no side files). Otherwise as :func:`connect_read_only`."""
    try:
        with open(path, "rb") as file:
            header = file.read(20)
    except OSError:
        header = b""
    in_wal = header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"
    sidecars = any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
    return connect_read_only(path, timeout, ("immutable=1",) if in_wal and not sidecars else READ_ONLY_QUERIES)


def schema_version(connection: sqlite3.Connection, path: Path) -> int | None:
    """The schema version of wgtune's database on ``connection``; None when it has no table yet.
    StoreError for a database that is not wgtune's (other tables, no schema row: another
    program's, a collector's) or of a schema this wgtune does not know."""
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None
    row = connection.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone() if "meta" in tables else None
    if row is None:  # wgtune writes its tables and the schema row in one transaction: it is someone else's
        listed = ", ".join(sorted(shown(name, 40) for name in tables)[:8])
        raise StoreError(f"{path} is not a wgtune cache database (its tables: {listed}); not touching it: "
                         "give wgtune another cache directory (WGTUNE_CACHE_DIR)")
    try:
        version = int(row[0])
    except (TypeError, ValueError):
        raise StoreError(f"{path} has a schema version {shown(row[0], 60)} that is not a number; "
                         "not touching it") from None
    if version != SCHEMA_VERSION:
        newer = "a newer wgtune" if version > SCHEMA_VERSION else "another wgtune"
        raise StoreError(
            f"the cache database {path} has schema version {version}, this wgtune knows {SCHEMA_VERSION} "
            f"(written by {newer}); not touching it: use that wgtune, or another cache directory"
        )
    return version


def tables_of(path: Path, timeout: float = 30.0) -> set[str]:
    """The tables of the SQLite file at ``path``, read through a connection that cannot write
    (none where there is no file, or an empty one). Raises sqlite3.Error (not a database)."""
    try:
        if path.stat().st_size == 0:
            return set()
    except FileNotFoundError:
        return set()
    connection = _connect_to_look(path, timeout)
    try:
        return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        connection.close()


def inspect(path: Path, timeout: float) -> int | None:
    """:func:`schema_version` of the file at ``path``, read through a connection that cannot write
    (nothing is changed, whatever the answer); None where there is no file or no table yet.
    Raises StoreError (not wgtune's, a newer schema), sqlite3.Error (malformed, unreadable)."""
    try:
        if path.stat().st_size == 0:
            return None
    except FileNotFoundError:
        return None
    connection = _connect_to_look(path, timeout)
    try:
        return schema_version(connection, path)
    finally:
        connection.close()
