"""Opening the cache database without harming what is there (``sqlite_store.py`` uses these).

- **Looked at first, read-only** (:func:`inspect`): a connection that cannot write reads which
  tables the file has and its schema version before anything else, so that another program's
  SQLite database at the store's path (a collector's, say) is refused untouched: never switched
  to WAL, never given wgtune's tables. A newer schema is refused the same way.
- **Malformed** (:func:`is_malformed`: SQLite's "database disk image is malformed", "file is not
  a database" past a valid header): the file is set aside like garbage, and a fresh one made at
  once, into which every row SQLite can still read in the copy is moved (``sqlite_salvage.py``,
  row by row): a damaged page costs its own rows, not every winner.
- **Read-only** (:func:`is_read_only`: a read-only directory or file), **a full disk** at opening
  (:func:`is_full`: no room for the WAL's shared-memory file) and **a writer stuck on the
  lock** (:func:`is_busy`: past the busy timeout): the database is used read-only for the rest of
  the run (:class:`ReadOnly`): stored winners are served, new ones are kept in the process only.
  Where a read-only directory cannot hold the WAL's shared memory file, the database is read as
  immutable (:func:`connect_read_only`).

How SQLite's errors are sorted, and the read-only looks, are ``sqlite_look.py``; the rows saved
from a malformed file, ``sqlite_salvage.py``.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from wgtune.errors import StoreError
from wgtune.tune.log import logger

from .cache_files import DATABASE_NAME, is_document_name, set_aside_database, set_aside_if_not_sqlite
from .file_store import default_cache_dir
from .sqlite_look import (
    connect_read_only,
    inspect,
    is_busy,
    is_full,
    is_malformed,
    is_read_only,
    retry_while_locked,
    schema_version,
)
from .sqlite_migrate import migrate_documents
from .sqlite_rows import SCHEMA, SCHEMA_VERSION
from .sqlite_salvage import copy_rows, readable_rows

__all__ = ["BUSY_TIMEOUT", "CacheConnection", "Malformed", "ReadOnly", "again_after_salvage"]

T = TypeVar("T")

BUSY_TIMEOUT = 60.0
"""Seconds a writer waits for another process's transaction; past it, the database is read-only
for the rest of the run (:class:`ReadOnly`), so it is waited for once."""

class ReadOnly(OSError):
    """The cache database cannot be written in this run (read-only, or a writer holds its lock):
    what a save raises (the tuner keeps the winner in memory). The store said so once already,
    so the tuner does not say it again for each winner (``explained``)."""

    explained = True


class Malformed(OSError):
    """The cache database was malformed; it was set aside (or could not be) and reads as empty.
    ``salvaged``: a fresh database was made at once with every row of the copy still readable, so
    the operation that met the damage may run again on it (:func:`again_after_salvage`)."""

    salvaged = False


def again_after_salvage(method: Callable[..., T]) -> Callable[..., T]:
    """``method`` (of a :class:`CacheConnection`) run once more where it met a malformed database
    that was set aside and made afresh with every row still readable: the first command after the
    damage reads, lists, bundles or clears what was saved, not nothing (a bundle of no winners, once)."""

    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> T:
        try:
            return method(*args, **kwargs)
        except Malformed as error:
            if not error.salvaged:
                raise
            return method(*args, **kwargs)

    return run


SCHEMA_TABLES = frozenset(("meta", "namespaces", "entries", "damaged", "migrated"))
"""The tables :data:`~wgtune.backends.sqlite_rows.SCHEMA` makes."""


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


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
        self._salvage: Path | None = None  # a malformed copy this process set aside: its rows go into the fresh one
        self._recovering = False
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
            if self._connection is not None and self._pid == os.getpid() and self._moved():
                self._connection.close()  # SQLite neither checkpoints nor deletes side files of a moved database
                self._connection = None
            if self._connection is None or self._pid != os.getpid():
                self._connection = None  # a parent's connection is not used (nor closed) across a fork
                with self.errors():
                    self._connection = self._open()
                self._pid = os.getpid()
            return self._connection

    def _moved(self) -> bool:
        """Whether the file at :attr:`path` is no longer the one the open connection reads: another
        process set it aside (malformed) and made a fresh one, or it was removed. Saves through the
        old connection would go on landing in the copy set aside, or in a file gone, which no later
        run reads: said once, and the connection is made anew on the file at the path."""
        if self._file is None or self._identity() == self._file:
            return False
        logger.warning("%s", f"the cache database {self.path} was moved or removed while this run had it open "
                             "(set aside by another process, or deleted); opening the one at that path now")
        self._file = None
        return True

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
        try:
            aside = set_aside_if_not_sqlite(self.path)
        except OSError as failure:  # a read-only directory, its lock file refused: say what is wrong first
            if failure.filename == str(self.path) and failure.filename2 is None:
                raise  # the path itself cannot be read (a directory, no permission): that is what is wrong
            raise Malformed(f"{self.path} is not an SQLite database, and could not be set aside ({failure}); "
                            "winners are tuned again and kept in this process only") from None
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
                if not (is_read_only(error) or is_busy(error) or is_full(error)) or version != SCHEMA_VERSION:
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
            self._recover(connection)
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
        """Make wgtune's tables in a database that has none; in one of this schema that lacks some
        (dropped by hand, say), make the missing ones, empty, so that every verb works again."""
        if schema_version(connection, self.path) is None:
            with self.transaction(connection):
                if schema_version(connection, self.path) is None:  # another process may have made it meanwhile
                    for statement in SCHEMA:
                        connection.execute(statement)
                    connection.execute("INSERT INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            return
        missing = SCHEMA_TABLES - _tables(connection)
        if missing:
            logger.warning("%s", f"the cache database {self.path} lacked its table(s) {', '.join(sorted(missing))}; "
                                 "made them anew, empty")
            with self.transaction(connection):
                for statement in SCHEMA:  # each IF NOT EXISTS: the tables there are left as they are
                    connection.execute(statement)

    def _now_read_only(self, why: BaseException | str) -> ReadOnly:
        """This run no longer writes the database (said once): the error a write raises."""
        if self.read_only is None:
            if isinstance(why, str):
                self.read_only = why
            elif is_busy(why):
                self.read_only = f"another process held its write lock for over {self.timeout:g} s"
            elif is_full(why):
                self.read_only = f"no room to write it, is the disk full? ({why})"
            else:
                self.read_only = f"it cannot be written: {why}"
            logger.warning("%s", f"the cache database {self.path} is read-only for this run ({self.read_only}): "
                                 "its winners are served, new winners are kept in this process only")
        return ReadOnly(f"the cache database {self.path} is read-only for this run ({self.read_only}); "
                        "the winner is kept in this process only")

    def _recover(self, connection: sqlite3.Connection) -> None:
        """Move every row still readable in the malformed copy this process set aside into the fresh
        database (:func:`readable_rows`), where no row of the same slot was written meanwhile: one
        damaged page costs its own rows, not the cache. Said as a warning, with how many rows were
        lost ("at least" that many, and why, where the copy's damage hides rows: a file cut short);
        the copy stays as it was."""
        aside, self._salvage = self._salvage, None
        if aside is None:
            return
        self._recovering = True  # a fresh database malformed too is set aside, not recovered from in turn
        uncounted: list[str] = []  # why rows of the copy may not have been found at all
        try:
            with self.transaction(connection):
                recovered, lost = copy_rows(connection, readable_rows(aside, self.timeout, uncounted))
        except OSError as error:  # the fresh database cannot take them (full, read-only): they stay in the copy
            logger.warning("%s", f"could not move the rows still readable in {aside.name} into {self.path} "
                                 f"({error}); they stay in the copy")
            return
        finally:
            self._recovering = False
        if not uncounted:  # every row of the copy was found: those lost are counted
            unread = f"{lost} row(s) could not be read: their keys are tuned again"
        else:
            count = f"at least {lost} row(s)" if lost else "an unknown number of rows"
            unread = (f"{count} could not be read: their keys are tuned again ("
                      f"{'not an exact count: ' if lost else ''}{uncounted[0]})")
        logger.warning("%s", f"moved {recovered} stored winner(s) still readable in {aside.name} into the fresh "
                             f"{self.path.name}; {unread}")

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
            self._salvage = self.path.with_name(aside)
            logger.warning("%s", f"the cache database {self.path} is malformed ({error}); set aside as {aside}, "
                                 "starting afresh with every row of it that can still be read")
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
                    if aside is not None and not self._recovering:  # the fresh one now, with what the copy holds
                        try:
                            self.connection()
                        except (OSError, StoreError) as failure:
                            logger.warning("%s", f"could not make a fresh {self.path} yet: {failure}")
                kept = f"set aside as {aside}" if aside is not None else "already set aside"
                malformed = Malformed(f"the cache database {self.path} was malformed ({error}); {kept}")
                malformed.salvaged = aside is not None and not self._recovering and self._connection is not None
                raise malformed from error
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

