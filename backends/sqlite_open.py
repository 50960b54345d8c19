"""Opening the cache database without harming what is there (``sqlite_store.py`` uses these).

- **Looked at first, read-only** (:func:`inspect`): a connection that cannot write reads which
  tables the file has and its schema version before anything else, so that another program's
  SQLite database at the store's path (a collector's, say) is refused untouched: never switched
  to WAL, never given wgtune's tables. A newer schema is refused the same way.
- **Malformed** (:func:`is_malformed`: SQLite's "database disk image is malformed", "file is not
  a database" past a valid header): the file is set aside like garbage, and a fresh one made.
- **Read-only** (:func:`is_read_only`: a read-only directory or file) and **a writer stuck on the
  lock** (:func:`is_busy`: past the busy timeout): the database is used read-only for the rest of
  the run (:class:`ReadOnly`): stored winners are served, new ones are kept in the process only.
  Where a read-only directory cannot hold the WAL's shared memory file, the database is read as
  immutable (:func:`connect_read_only`).

SQLite's codes are read from ``sqlite3.Error.sqlite_errorcode`` (Python 3.11+), the message
where there is none.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from wgtune.errors import StoreError
from wgtune.text import shown
from wgtune.tune.log import logger

from .cache_files import DATABASE_NAME, is_document_name, set_aside_database, set_aside_if_not_sqlite
from .file_store import default_cache_dir
from .sqlite_migrate import migrate_documents
from .sqlite_rows import SCHEMA, SCHEMA_VERSION

__all__ = ["BUSY_TIMEOUT", "CacheConnection", "Malformed", "ReadOnly", "connect_read_only", "inspect", "is_busy",
           "is_malformed", "is_read_only", "retry_while_locked", "schema_version", "tables_of"]

BUSY_TIMEOUT = 60.0
"""Seconds a writer waits for another process's transaction; past it, the database is read-only
for the rest of the run (:class:`ReadOnly`), so it is waited for once."""

SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_CANTOPEN, SQLITE_NOTADB = 5, 6, 8, 11, 14, 26

T = TypeVar("T")


class ReadOnly(OSError):
    """The cache database cannot be written in this run (read-only, or a writer holds its lock):
    what a save raises (the tuner keeps the winner in memory). The store said so once already,
    so the tuner does not say it again for each winner (``explained``)."""

    explained = True


class Malformed(OSError):
    """The cache database was malformed; it was set aside (or could not be) and reads as empty."""


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


def connect_read_only(path: Path, timeout: float, queries: tuple[str, ...] = READ_ONLY_QUERIES
                      ) -> sqlite3.Connection:
    """A connection to ``path`` that cannot write it: ``mode=ro``; else, where the directory cannot
    hold the WAL's shared-memory file (read-only), ``immutable=1`` (no locks: nobody can write
    there either). Raises sqlite3.Error (a malformed file, no file)."""
    for query in queries:
        connection = sqlite3.connect(_uri(path, query), uri=True, timeout=timeout, isolation_level=None,
                                     check_same_thread=False)
        try:
            connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return connection
        except sqlite3.Error as error:
            connection.close()
            if query == "immutable=1" or is_malformed(error) or not is_read_only(error):
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


class CacheConnection:
    """The cache directory's database file and its one connection per process (reopened after a
    fork), used under a lock so threads may share the object; opened as the module doc says.
    :class:`~wgtune.backends.sqlite_store.CacheDatabase` reads and writes entries through it.

    ``directory`` None means :func:`~wgtune.backends.file_store.default_cache_dir`. ``timeout``: how
    long a write waits for another process's (once: see :attr:`read_only`).
    """

    def __init__(self, directory: str | os.PathLike | None, *, timeout: float = BUSY_TIMEOUT) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / DATABASE_NAME
        self.timeout = timeout
        self.read_only: str | None = None
        """Why this run cannot write the database (said once when it became so), or None."""
        self._connection: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None  # (device, inode) of the file the connection has open
        self._pid = 0
        self.lock = threading.RLock()

    def __repr__(self) -> str:
        return f"CacheConnection({str(self.path)!r})"

    def __enter__(self) -> CacheConnection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the connection -----------------------------------------------------------------------

    def is_empty_cache(self) -> bool:
        """True when there is neither a database nor an old JSON document: nothing to read, and
        reading should not create anything."""
        if self.path.exists():
            return False
        return not self.directory.is_dir() or not any(is_document_name(p.name) for p in self.directory.iterdir())

    def connection(self) -> sqlite3.Connection:
        """The open connection: made (directory, database, schema, migration) on first use."""
        with self.lock:
            if self._connection is None or self._pid != os.getpid():
                self._connection = None  # a parent's connection is not used (nor closed) across a fork
                with self.errors():
                    self._connection = self._open()
                self._pid = os.getpid()
            return self._connection

    def close(self) -> None:
        """Close the connection (the last one to close folds the WAL back into the database)."""
        with self.lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    def _open(self) -> sqlite3.Connection:
        """Looked at read-only first (a foreign or newer database refused untouched; a malformed one
        set aside), then opened for writing; read-only where it cannot be written."""
        self.directory.mkdir(parents=True, exist_ok=True)  # a file in the way: OSError
        aside = set_aside_if_not_sqlite(self.path)
        if aside is not None:  # garbage where the database should be: kept, and a fresh one made
            logger.warning("%s", f"{self.path} was not an SQLite database; set aside as {aside}, starting afresh")
        for attempt in (1, 2):  # a second time after setting a malformed file aside
            version = None
            try:
                version = inspect(self.path, self.timeout)
                if self.read_only is not None:
                    return self._open_read_only()
                return self._open_for_writing()
            except sqlite3.Error as error:
                if is_malformed(error) and attempt == 1:
                    self._set_aside_malformed(error)
                    continue
                if not (is_read_only(error) or is_busy(error)) or version != SCHEMA_VERSION:
                    raise
                self._now_read_only(error)
                return self._open_read_only()
            except ReadOnly:
                if version != SCHEMA_VERSION:
                    raise
                return self._open_read_only()
        raise AssertionError("unreachable")

    def _open_for_writing(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            mode = connection.execute("PRAGMA journal_mode").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":  # switched once: no lock taken when it is already
                mode = retry_while_locked(lambda: connection.execute("PRAGMA journal_mode=WAL").fetchone(),
                                          self.timeout)
                if mode is None or str(mode[0]).lower() != "wal":
                    logger.warning("%s", f"the cache database {self.path} is not in WAL mode ({mode}); "
                                         "writers may wait")
            self._check_schema(connection)
            self._file = self._identity()
            migrate_documents(self, connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _open_read_only(self) -> sqlite3.Connection:
        connection = connect_read_only(self.path, self.timeout)
        try:
            if schema_version(connection, self.path) != SCHEMA_VERSION:
                raise OSError(f"the cache database {self.path} cannot be written, and has no wgtune tables to read")
        except BaseException:
            connection.close()
            raise
        self._file = self._identity()
        return connection

    def _identity(self) -> tuple[int, int] | None:
        try:
            status = os.stat(self.path)
        except OSError:
            return None
        return status.st_dev, status.st_ino

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        if schema_version(connection, self.path) is None:
            with self.transaction(connection):
                if schema_version(connection, self.path) is None:  # another process may have made it meanwhile
                    for statement in SCHEMA:
                        connection.execute(statement)
                    connection.execute("INSERT INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))

    def _now_read_only(self, why: BaseException | str) -> ReadOnly:
        """This run no longer writes the database (said once): the error a write raises."""
        if self.read_only is None:
            if isinstance(why, str):
                self.read_only = why
            elif is_busy(why):
                self.read_only = f"another process held its write lock for over {self.timeout:g} s"
            else:
                self.read_only = f"it cannot be written: {why}"
            logger.warning("%s", f"the cache database {self.path} is read-only for this run ({self.read_only}): "
                                 "its winners are served, new winners are kept in this process only")
        return ReadOnly(f"the cache database {self.path} is read-only for this run ({self.read_only}); "
                        "the winner is kept in this process only")

    def _set_aside_malformed(self, error: BaseException) -> str | None:
        """Move the malformed file aside (unless another process already did: the file is no longer
        the one this connection had open, or reads well now); the copy's name. Said as a warning."""
        opened = self._file

        def still_bad(path: Path) -> bool:
            if opened is not None:
                return self._identity() == opened
            try:
                inspect(path, self.timeout)
            except sqlite3.Error as again:
                return is_malformed(again)
            except StoreError:
                return False
            return False

        try:
            aside = set_aside_database(self.path, still_bad)
        except OSError as failure:
            logger.warning("%s", f"the cache database {self.path} is malformed ({error}) and could not be set "
                                 f"aside ({failure}); winners are tuned again and kept in this process only")
            raise Malformed(f"the cache database {self.path} is malformed: {error}") from None
        self._file = None
        if aside is not None:
            logger.warning("%s", f"the cache database {self.path} is malformed ({error}); set aside as {aside}, "
                                 "starting afresh: its winners are tuned again")
        return aside

    @contextmanager
    def errors(self) -> Iterator[None]:
        """SQLite's errors as OSError naming the database (the tuner treats OSError as "no store");
        a malformed database is set aside (the connection dropped: the next use makes a fresh
        one) and raised as :class:`~wgtune.backends.sqlite_open.Malformed`."""
        try:
            yield
        except sqlite3.Error as error:
            if is_malformed(error):
                with self.lock:
                    if self._connection is not None and self._pid == os.getpid():
                        self._connection.close()
                    self._connection = None
                    aside = self._set_aside_malformed(error)
                kept = f"set aside as {aside}" if aside is not None else "already set aside"
                raise Malformed(f"the cache database {self.path} was malformed ({error}); {kept}") from error
            raise OSError(f"the cache database {self.path}: {error}") from error

    @contextmanager
    def transaction(self, connection: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: the write lock from the start, waiting up to the
        busy timeout for another writer), committed on success, rolled back on any exception.
        Past the busy timeout, or where the database cannot be written, :class:`ReadOnly`, at once
        from then on."""
        with self.lock, self.errors():
            if self.read_only is not None:
                raise self._now_read_only(self.read_only)
            connection = connection if connection is not None else self.connection()
            try:
                connection.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                if is_busy(error) or is_read_only(error):
                    raise self._now_read_only(error) from None
                raise
            try:
                yield connection
                connection.execute("COMMIT")
            except BaseException as error:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                if isinstance(error, sqlite3.OperationalError) and (is_read_only(error) or is_busy(error)):
                    raise self._now_read_only(error) from None
                raise

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same commit (a consistent export)."""
        with self.lock, self.errors():
            connection = self.connection()
            connection.execute("BEGIN")
            try:
                yield connection
            finally:
                if connection.in_transaction:
                    connection.execute("COMMIT")

