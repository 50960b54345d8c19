"""Export and import of the cache database as ``wgtune.export/1`` JSON, in bounded memory; and
the database as the store contract's ``Database`` (:class:`SqliteDatabase`, on top of both).

The format is the one the page and the old file store read and write (``store.encode_export``):
``{"format": "wgtune.export/1", "namespaces": [{"format": "wgtune.cache/1", <namespace fields>,
"entries": [...]}, ...]}``. A cache of hundreds of megabytes must not become one string or one tree
of Python objects, so:

- :func:`export_cache` writes the document to a file as it reads rows (one read transaction: a
  consistent copy while writers go on), checking each row (a damaged one is skipped, logged);
- :func:`import_cache` reads a file of at most ``max_bytes``. It parses it as a stream
  (``export_stream.py``: the document's structure by hand, each entry and namespace field with
  ``json``), checks each entry as it comes and stages it in a temporary table; only when the
  whole file has been read and checked does one write transaction merge the staged entries (each
  replaces the stored one of its set and key). Anything the stream parser does not expect (a bad
  entry, an odd shape, repeated fields) sends the file through the plain path instead
  (``DocumentStore.check_import`` and ``store.decode_export`` on the whole text), which gives the
  exact error, or imports the odd but valid file. Either way a bad file writes nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import BinaryIO, TextIO

from wgtune.errors import StoreError
from wgtune.store.contract import IMPORT_LIMIT, Cleared, Listing, NamespaceSummary
from wgtune.store.documents import DocumentStore
from wgtune.store.format import (
    DOCUMENT_FORMAT,
    EXPORT_FORMAT,
    StoredEntry,
    canonical_namespace,
    check_namespace,
    decode_export,
)
from wgtune.tune.log import logger

from .export_stream import ExportStream, Unusual, read_export
from .sqlite_open import Malformed
from .sqlite_rows import decode_row, entry_text
from .sqlite_store import CacheDatabase, SqliteStore

__all__ = ["IMPORT_LIMIT", "SqliteDatabase", "export_cache", "import_cache"]

CHUNK = 1 << 20
BATCH = 2000


# -- export ---------------------------------------------------------------------------------------


def export_cache(database: CacheDatabase | None, out: TextIO) -> tuple[int, int]:
    """Write every namespace with entries to ``out`` as one ``wgtune.export/1`` document; (entries,
    namespaces) written. Rows that do not decode are left out, with a warning. ``database`` None:
    nothing is stored (an empty export, and no database made)."""
    written = namespaces = skipped = 0
    current = None
    out.write(json.dumps({"format": EXPORT_FORMAT})[:-1] + ', "namespaces": [')
    if database is None:
        out.write("]}\n")
        return 0, 0
    with database.reading() as connection:
        for namespace, set_name, key_text, text in database.rows(connection):
            try:
                decode_row(text, set_name, key_text)
            except StoreError as error:
                skipped += 1
                if skipped == 1:
                    logger.warning("%s", f"not exporting a damaged entry of {database.path}: {error}")
                continue
            if namespace != current:
                fields = json.dumps({"format": DOCUMENT_FORMAT, **json.loads(namespace)})
                out.write(("\n]},\n" if current is not None else "\n") + fields[:-1] + ', "entries": [\n')
                namespaces += 1
            else:
                out.write(",\n")
            out.write(text)
            written += 1
            current = namespace
    out.write("\n]}\n]}\n" if current is not None else "]}\n")
    if skipped > 1:
        logger.warning("%s", f"left {skipped} damaged entries of {database.path} out of the export")
    return written, namespaces


# -- import ---------------------------------------------------------------------------------------


class _Staging:
    """Checked entries in temporary tables of the database's connection, before the one write."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.batch: list[tuple[int, str, str, str]] = []
        connection.execute("CREATE TEMP TABLE IF NOT EXISTS staged (seq INTEGER PRIMARY KEY, doc INTEGER, "
                           "set_name TEXT, key TEXT, entry TEXT)")
        connection.execute("CREATE TEMP TABLE IF NOT EXISTS staged_docs (doc INTEGER PRIMARY KEY, namespace TEXT)")
        connection.execute("DELETE FROM temp.staged")
        connection.execute("DELETE FROM temp.staged_docs")
        connection.execute("BEGIN")  # writes only the temporary database: no lock on the cache's

    def entry(self, doc: int, entry: StoredEntry) -> None:
        self.batch.append((doc, entry.set_name, entry.key.to_json(), entry_text(entry)))
        if len(self.batch) >= BATCH:
            self.flush()

    def flush(self) -> None:
        self.connection.executemany(
            "INSERT INTO temp.staged (doc, set_name, key, entry) VALUES (?, ?, ?, ?)", self.batch)
        self.batch.clear()

    def document(self, doc: int, namespace: dict) -> None:
        self.connection.execute("INSERT INTO temp.staged_docs (doc, namespace) VALUES (?, ?)",
                                (doc, canonical_namespace(namespace)))

    def close(self) -> None:
        if self.connection.in_transaction:
            self.connection.execute("COMMIT")
        self.connection.execute("DROP TABLE IF EXISTS temp.staged")
        self.connection.execute("DROP TABLE IF EXISTS temp.staged_docs")


def _stage(stream: ExportStream, staging: _Staging) -> None:
    """Parse the whole file into ``staging``, raising Unusual for anything but the usual shapes.
    Entries of a document that gets no namespace (an export's own top-level ``entries``) are
    staged but left out of the merge, which joins entries to their documents."""
    for doc, item in read_export(stream):
        if isinstance(item, StoredEntry):
            staging.entry(doc, item)
        else:
            staging.document(doc, item)
    staging.flush()


def _merge_staged(database: CacheDatabase, staging: _Staging) -> int:
    """Write the staged entries in one transaction, each replacing the stored one of its namespace,
    set and key (of one the file gives twice, the last given stays); how many entries it stored,
    each namespace, set and key once. Not the upsert's ``rowcount``: that counts a key given twice
    twice, and ``wgtune cache import`` said "imported 2" of the one row it stored."""
    staging.connection.execute("COMMIT")
    stored = staging.connection.execute(  # counted before the write: the database's lock is held no longer for it
        "SELECT COUNT(*) FROM (SELECT DISTINCT d.namespace, s.set_name, s.key FROM temp.staged s "
        "JOIN temp.staged_docs d ON d.doc = s.doc)").fetchone()[0]
    with database.transaction(staging.connection) as connection:
        connection.execute("INSERT INTO namespaces (namespace) SELECT DISTINCT namespace FROM temp.staged_docs "
                           "WHERE true ON CONFLICT (namespace) DO NOTHING")
        connection.execute(
            "INSERT INTO entries (namespace_id, set_name, key, entry) "
            "SELECT n.id, s.set_name, s.key, s.entry FROM temp.staged s JOIN temp.staged_docs d ON d.doc = s.doc "
            "JOIN namespaces n ON n.namespace = d.namespace WHERE true ORDER BY s.seq "
            "ON CONFLICT (namespace_id, set_name, key) DO UPDATE SET entry = excluded.entry")
    return stored


def import_document(database: CacheDatabase, obj: object) -> int:
    """Merge a decoded export (or one namespace document) in one transaction; the number of entries
    stored: a namespace, set and key the document gives twice is one entry (the last given).
    Everything is checked first (StoreError): a bad one writes nothing."""
    decoded = [(check_namespace(namespace), entries) for namespace, entries in decode_export(obj)]
    with database.transaction() as connection:
        for namespace, entries in decoded:
            database.put(connection, database.namespace_id(connection, namespace), entries)
    return len({(canonical_namespace(namespace), entry.set_name, entry.key.to_json())
                for namespace, entries in decoded for entry in entries})


def _size_checked(handle: BinaryIO, name: str, max_bytes: int) -> bytes:
    data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise StoreError(f"{name} is larger than the import limit of {max_bytes} bytes (see --max-bytes)")
    return data


def import_cache(database: CacheDatabase, source: str | os.PathLike | BinaryIO, *,
                 max_bytes: int = IMPORT_LIMIT) -> int:
    """Merge the export in ``source`` (a path, or a binary file such as standard input) into the
    database, all in one transaction after all of it was checked; the number of entries imported
    (stored: a namespace, set and key the file gives twice counts once).
    Raises StoreError for a file over ``max_bytes`` or one that is not a valid export."""
    if not hasattr(source, "read"):
        path = Path(source)
        size = path.stat().st_size
        if size > max_bytes:
            raise StoreError(f"{path} is {size} bytes, over the import limit of {max_bytes} (see --max-bytes)")
        with path.open("rb") as handle:
            return import_cache(database, handle, max_bytes=max_bytes)
    handle: BinaryIO = source  # type: ignore[assignment]
    name = getattr(handle, "name", "the input")
    seekable = handle.seekable()
    if not seekable:  # standard input: read it (within the limit) so the plain path can read it again
        import io

        handle = io.BytesIO(_size_checked(handle, str(name), max_bytes))
    start = handle.tell()
    with database.lock, database.errors():
        staging = _Staging(database.connection())
        try:
            _stage(ExportStream(handle.read, chunk=CHUNK), staging)
            return _merge_staged(database, staging)
        except Unusual:
            pass
        finally:
            if staging.connection.in_transaction:
                staging.connection.execute("ROLLBACK")
            staging.close()
    handle.seek(start)
    return import_document(database, DocumentStore.check_import(_size_checked(handle, str(name), max_bytes)))


# -- the database as the store contract's Database -------------------------------------------------


class SqliteDatabase:
    """The cache directory's database as a :class:`~wgtune.store.contract.Database`: what
    ``wgtune cache``, ``wgtune bundle``, the farm and :func:`~wgtune.backends.local.open_tuner`
    use. Its coroutines never suspend: run them with :func:`~wgtune.runner.run_inline`.

    A cache with nothing stored (no database, no old document: ``is_empty_cache``) is read
    without creating anything: no namespaces, no entries, an empty export, nothing to clear.
    ``engine`` is the :class:`CacheDatabase` underneath (its connection, shared by the stores
    :meth:`open` gives).
    """

    def __init__(self, directory: str | os.PathLike | None = None, *, engine: CacheDatabase | None = None) -> None:
        self.engine = engine if engine is not None else CacheDatabase(directory)
        self.path = self.engine.path
        self.where = str(self.path)

    def __repr__(self) -> str:
        return f"SqliteDatabase({self.where!r})"

    def __enter__(self) -> SqliteDatabase:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.close()

    def is_empty_cache(self) -> bool:
        """Nothing stored, and reading should not create anything (see :meth:`CacheDatabase.is_empty_cache`)."""
        return self.engine.is_empty_cache()

    async def namespaces(self) -> list[NamespaceSummary]:
        return [] if self.engine.is_empty_cache() else self.engine.namespaces()

    async def open(self, namespace: dict) -> SqliteStore:
        return SqliteStore(None, namespace, database=self.engine).open()

    async def entries(self) -> Listing:
        if self.engine.is_empty_cache():
            return Listing([], [])
        return Listing(*self.engine.entries())

    async def export_to(self, out: TextIO) -> tuple[int, int]:
        if self.engine.is_empty_cache():
            return export_cache(None, out)
        try:
            return export_cache(self.engine, out)
        except Malformed as error:  # made afresh with what could be read: export that, from the start
            if not error.salvaged or not out.seekable():
                raise
            out.seek(0)
            out.truncate()
            return export_cache(self.engine, out)

    async def import_from(self, source: str | os.PathLike | BinaryIO, *, max_bytes: int = IMPORT_LIMIT) -> int:
        return import_cache(self.engine, source, max_bytes=max_bytes)

    async def clear(self) -> Cleared:
        if self.engine.is_empty_cache():
            return Cleared(0, 0, 0)
        return Cleared(*self.engine.clear_all())
