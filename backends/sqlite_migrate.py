"""Moving the old store's JSON documents into the cache database, once, losing nothing.

Before the database, each namespace's winners were one ``wgtune.cache/1`` document, a ``.json``
file of the cache directory (:class:`~wgtune.backends.file_store.CacheDirectory`). When a database
is opened in a directory that still has such files, :func:`migrate_documents` merges them in:

- in one write transaction (SQLite's lock: a second process opening at the same time waits, then
  finds the files gone and migrates nothing twice), holding each document's old file lock (a
  process of an older wgtune writing the document at that moment finishes first);
- a stored row wins over the document's entry of the same set and key (the document is older
  than anything written to the database); every other entry is added;
- an entry the document holds but that does not decode goes to the ``damaged`` table; a document
  that cannot be read at all (not JSON, nested too deep, a number of thousands of digits where
  the namespace is, fields of the wrong types) is set aside as ``<name>.corrupt``, as the file
  store did: damage costs the document, never the database;
- only documents named as wgtune names them (``cache_files.is_document_name``) are taken: another
  program's ``.json`` in the directory is left alone; an old document's lock file that is a
  directory (nobody can hold it) is gone without (``cache_files.file_lock``);
- after the commit, each document is renamed ``<name>.migrated`` (never deleted: it stays for a
  post-mortem or a downgrade). A crash before the renames only means the next open merges the
  same entries again, which changes nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import AbstractContextManager, ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from wgtune.errors import StoreError
from wgtune.store.bounded_json import parse_json
from wgtune.store.format import StoredEntry, canonical_namespace, check_namespace, decode_document_leniently
from wgtune.tune.log import logger

from .cache_files import file_lock, is_document_name

__all__ = ["legacy_documents", "migrate_documents", "now"]


class CacheDatabase(Protocol):
    """What the migration uses of :class:`~wgtune.backends.sqlite_store.CacheDatabase` (which
    imports this module: the protocol keeps the import one way)."""

    directory: Path
    path: Path

    def transaction(self, connection: sqlite3.Connection | None = None) -> AbstractContextManager: ...

    def namespace_id(self, connection: sqlite3.Connection, namespace: dict) -> int: ...

    def put(self, connection: sqlite3.Connection, namespace_id: int, entries: list[StoredEntry], *,
            replace: bool = True) -> None: ...


def now() -> str:
    """A timestamp for the ``damaged`` and ``migrated`` tables (UTC, ISO 8601)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def legacy_documents(directory: Path) -> list[Path]:
    """The old store's documents in ``directory`` (what ``CacheDirectory.names`` lists), sorted:
    only files named as wgtune names its documents."""
    if not directory.is_dir():
        return []
    return sorted(path for path in directory.iterdir() if is_document_name(path.name) and path.is_file())


def _unused(path: Path, suffix: str) -> Path:
    """``path`` + ``suffix``, or with a timestamp too where that name is taken (never overwrite a copy)."""
    target = path.with_name(path.name + suffix)
    if target.exists():
        target = path.with_name(f"{path.name}{suffix}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}")
    return target


def _read(path: Path) -> tuple[dict, list[StoredEntry], list[tuple[object, str]]]:
    """The document's namespace, good entries and (raw entry, why) of the others; StoreError when
    the document as a whole is damaged."""
    obj = parse_json(path.read_bytes())
    try:
        namespace, entries, problems = decode_document_leniently(obj)
        namespace = check_namespace(namespace)
        canonical_namespace(namespace)
    except (TypeError, ValueError, RecursionError) as error:  # past the checks: still the document's damage
        raise StoreError(f"its namespace cannot be read: {error!r}"[:300]) from None
    damaged = []
    if problems:
        for raw in obj["entries"]:
            try:
                StoredEntry.from_json(raw)
            except StoreError as error:
                damaged.append((raw, str(error)))
    return namespace, entries, damaged


def _raw_text(raw: object) -> str:
    """A damaged entry as the ``damaged`` table keeps it: its JSON, with what the parser refused
    (``bounded_json.Unreadable``: a repeated key, a number too long) named in its place; never a crash
    (one did: the whole migration, and the database with it, failed on a repeated key)."""
    try:
        return json.dumps(raw, default=lambda value: {"unreadable": str(getattr(value, "reason", value))})
    except (TypeError, ValueError, RecursionError):
        return repr(raw)[:100_000]


def migrate_documents(database: CacheDatabase, connection: sqlite3.Connection) -> int:
    """Merge the directory's old documents into the database (see the module doc); the number of
    entries read from them. Raises OSError (the database or a file cannot be written)."""
    if not legacy_documents(database.directory):
        return 0
    merged = 0
    renames: list[tuple[Path, Path, str | None]] = []
    notes: list[str] = []
    with ExitStack() as locks:
        with database.transaction(connection):
            for path in legacy_documents(database.directory):  # again, under the lock: another may have moved them
                locks.enter_context(file_lock(str(path) + ".lock"))
                if not path.exists():
                    continue
                try:
                    namespace, entries, damaged = _read(path)
                except StoreError as error:
                    renames.append((path, _unused(path, ".corrupt"), str(error)))
                    continue
                except OSError as error:  # unreadable (its mode, say): left as it is, tried again next open
                    notes.append(f"could not read the old cache document {path} ({error}); left it as it is")
                    continue
                namespace_id = database.namespace_id(connection, namespace)
                database.put(connection, namespace_id, entries, replace=False)
                stamp = now()
                namespace_text = canonical_namespace(namespace)
                connection.executemany(
                    "INSERT INTO damaged (namespace, set_name, key, entry, reason, at) VALUES (?, NULL, NULL, ?, ?, ?)",
                    [(namespace_text, _raw_text(raw), f"{path.name}: {why}", stamp) for raw, why in damaged])
                connection.execute("INSERT INTO migrated (file, entries, at) VALUES (?, ?, ?)",
                                   (path.name, len(entries), stamp))
                merged += len(entries)
                renames.append((path, _unused(path, ".migrated"), None))
                if damaged:
                    notes.append(f"{len(damaged)} damaged entr{'y' if len(damaged) == 1 else 'ies'} of {path} "
                                 f"({damaged[0][1]}): moved to the 'damaged' table of {database.path}")
        for path, target, damage in renames:  # committed: the entries are safe in the database
            os.replace(path, target)
            if damage is not None:
                logger.warning("%s", f"the cache document {path} is damaged ({damage}); kept it as {target.name}")
    for note in notes:
        logger.warning("%s", note)
    migrated = sum(damage is None for _path, _target, damage in renames)
    if migrated:
        logger.info("%s", f"moved {merged} stored winner(s) from {migrated} JSON document(s) into {database.path}")
    return merged
