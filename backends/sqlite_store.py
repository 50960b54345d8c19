"""The native store: every namespace's winners as rows of one SQLite database in the cache directory.

Why not one JSON document per namespace (``file_store.py``)? Every save there re-reads and
rewrites the namespace's whole document under one exclusive lock, so saves and loads grow with
the cache (13.8 MB documents, writers waiting a minute). Here one entry is one row: a save is a
short transaction that writes that row and nothing else, and readers never wait for writers.

The database is ``wgtune.sqlite3`` in the cache directory (``WGTUNE_CACHE_DIR``, or the user cache
directory), in WAL mode (readers see the last commit while one writer writes), with a busy
timeout (a writer waits for another's transaction instead of failing). Its schema::

    meta(name PRIMARY KEY, value)              'schema' -> the schema version (SCHEMA_VERSION)
    namespaces(id, namespace UNIQUE)            canonical_namespace() text of each namespace
    entries(namespace_id, set_name, key, entry) one row per (namespace, set, key); entry is
                                                StoredEntry.to_json() as JSON text, key Key.to_json()
    damaged(namespace, set_name, key, entry, reason, at)   rows a load refused, kept for a post-mortem
    migrated(file, entries, at)                 old JSON documents already imported

Every write is one ``BEGIN IMMEDIATE`` transaction (an upsert per entry), so a process killed
mid-write leaves the last commit whole and nothing behind. On first open, the old JSON documents
of the directory are merged in (:mod:`wgtune.backends.sqlite_migrate`).

Damage never stops a run (:mod:`wgtune.backends.sqlite_open`): the file is looked at read-only
before anything is written, so a database of a newer schema, or another program's SQLite
database, is refused (StoreError) and left exactly as it was; garbage or a database SQLite calls
malformed is set aside as ``wgtune.sqlite3.corrupt-<timestamp>`` and a fresh one made; a cache
that cannot be written (a read-only directory), or whose write lock another process holds past
the busy timeout, is used read-only for the rest of the run: its winners are served, new ones
stay in the process (said once). A row is read as its own slot's entry only: one that does not
decode, or that holds another slot's entry, is moved to ``damaged`` with a warning naming the
slot, and the key is tuned again.

Export and import are in :mod:`wgtune.backends.cache_transfer`, with
:class:`~wgtune.backends.cache_transfer.SqliteDatabase`, the database as the store contract's
``Database`` (what the commands and the farm use).

A namespace reads the rows of every namespace text that reduces to it
(:func:`~wgtune.store.format.namespaces_matching`): those written under the earlier namespace rule
(the full wgtune version and driver version) are read as its own, its own first, then the newest
release's; nothing is rewritten, so an older wgtune still finds its rows. Saves go to the store's
own namespace, and a clear forgets the older texts too (they read as the store's).

Database failures raise OSError (:class:`~wgtune.backends.sqlite_open.ReadOnly` for a save the run
cannot make; ``StoreError`` only for a database that is not wgtune's or is newer).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence

from wgtune.errors import StoreError
from wgtune.key import Key
from wgtune.store.contract import NamespaceSummary, Store
from wgtune.store.format import (
    StoredEntry,
    canonical_namespace,
    check_namespace,
    namespace_of,
    namespaces_matching,
    read_namespace,
)
from wgtune.text import shown
from wgtune.tune.log import logger

from .cache_files import DATABASE_NAME
from .sqlite_migrate import now
from .sqlite_open import BUSY_TIMEOUT, CacheConnection, Malformed, ReadOnly, again_after_salvage
from .sqlite_rows import INSERT_IF_ABSENT, UPSERT, decode_row, entry_text

__all__ = ["BUSY_TIMEOUT", "DATABASE_NAME", "CacheDatabase", "NamespaceSummary", "ReadOnly", "SqliteStore"]


class CacheDatabase(CacheConnection):
    """The cache directory's database: every namespace's entries (see the module doc).

    The directory and the database are made, and old JSON documents migrated, at the first use
    that needs the database (:meth:`connection`); how it is opened, and what damage does, is
    :class:`~wgtune.backends.sqlite_open.CacheConnection`'s.
    """

    def __repr__(self) -> str:
        return f"CacheDatabase({str(self.path)!r})"

    # -- namespaces and entries ---------------------------------------------------------------

    @staticmethod
    def namespace_id(connection: sqlite3.Connection, namespace: dict) -> int:
        """The id of ``namespace``'s row, made if missing. Call inside a write transaction."""
        text = canonical_namespace(namespace)
        connection.execute("INSERT INTO namespaces (namespace) VALUES (?) ON CONFLICT (namespace) DO NOTHING", (text,))
        return connection.execute("SELECT id FROM namespaces WHERE namespace = ?", (text,)).fetchone()[0]

    @staticmethod
    def put(connection: sqlite3.Connection, namespace_id: int, entries: Iterable[StoredEntry], *,
            replace: bool = True) -> None:
        """Write ``entries`` into namespace ``namespace_id``: each replaces the row of its set and key
        (``replace=False``: only where there is none). Call inside a write transaction."""
        rows = ((namespace_id, e.set_name, e.key.to_json(), entry_text(e)) for e in entries)
        connection.executemany(UPSERT if replace else INSERT_IF_ABSENT, rows)

    @again_after_salvage
    def save(self, namespace: dict, entries: Iterable[StoredEntry]) -> None:
        """Keep ``entries`` under ``namespace`` in one short transaction; other rows are not touched."""
        text_namespace = check_namespace(namespace)
        with self.transaction() as connection:  # entries are read as they are written: any number
            self.put(connection, self.namespace_id(connection, text_namespace), entries)

    @again_after_salvage
    def matching(self, namespace: dict) -> list[str]:
        """The canonical texts this database holds rows under that read as ``namespace``, in
        preference order (:func:`~wgtune.store.format.namespaces_matching`): its own text first
        (also when it has no row yet: a save makes it), then older rules' texts of the same GPU
        and wgtune line, newest release first."""
        own = canonical_namespace(check_namespace(namespace))
        with self.lock, self.errors():
            stored = [row[0] for row in self.connection().execute("SELECT namespace FROM namespaces")]
        return [own, *(text for text in namespaces_matching(namespace, stored) if text != own)]

    @again_after_salvage
    def load(self, namespace: dict | Sequence[str]) -> list[StoredEntry]:
        """Every readable entry of ``namespace`` (or of those canonical texts, in preference order:
        of a slot two of them hold, the first's entry): by default every text that reads as it
        (:meth:`matching`). A row that does not decode is skipped with a warning and moved to the
        ``damaged`` table (where the database can be written), never dropped silently: its key is
        tuned again."""
        texts = self.matching(namespace) if isinstance(namespace, dict) else list(namespace)
        rank = {text: position for position, text in enumerate(texts)}
        chosen: dict[tuple, tuple[int, StoredEntry]] = {}
        bad: dict[str, list] = {}
        with self.lock, self.errors():
            rows = self.connection().execute(
                "SELECT n.namespace, e.rowid, e.set_name, e.key, e.entry FROM entries e "
                "JOIN namespaces n ON n.id = e.namespace_id "
                f"WHERE n.namespace IN ({', '.join('?' * len(texts))})", texts)
            for text, rowid, set_name, key_text, row in rows:
                try:
                    entry = decode_row(row, set_name, key_text)
                except StoreError as error:
                    bad.setdefault(text, []).append((rowid, row, _slot(set_name, key_text), str(error)))
                    continue
                known = chosen.get(entry.slot)
                if known is None or rank[text] < known[0]:
                    chosen[entry.slot] = (rank[text], entry)
        for text, rows_of_text in bad.items():
            self._set_aside(text, rows_of_text)
        return [entry for _rank, entry in chosen.values()]

    @again_after_salvage
    def lookup(self, namespace: str | Sequence[str], set_name: str, key: Key) -> StoredEntry | None:
        """The entry of one slot of ``namespace`` (its canonical text, or several in preference
        order: the first that holds a readable entry answers), or None: one indexed query, what the
        tuner asks on a key's first miss instead of reading every row at open. A row that does not
        decode, or holds another slot's entry, is set aside as :meth:`load` does, and reads as None."""
        texts = [namespace] if isinstance(namespace, str) else list(namespace)
        with self.lock, self.errors():
            found = {text: (rowid, row) for text, rowid, row in self.connection().execute(
                "SELECT n.namespace, e.rowid, e.entry FROM entries e JOIN namespaces n ON n.id = e.namespace_id "
                f"WHERE n.namespace IN ({', '.join('?' * len(texts))}) AND e.set_name = ? AND e.key = ?",
                (*texts, set_name, key.to_json()))}
        for text in texts:
            if text not in found:
                continue
            rowid, row = found[text]
            try:
                return decode_row(row, set_name, key.to_json())
            except StoreError as error:
                self._set_aside(text, [(rowid, row, _slot(set_name, key.to_json()), str(error))])
        return None

    @again_after_salvage
    def count(self, namespace: str | Sequence[str]) -> int:
        """How many slots ``namespace`` (its canonical text, or several: a slot two hold counts once) has."""
        texts = [namespace] if isinstance(namespace, str) else list(namespace)
        with self.lock, self.errors():
            return self.connection().execute(
                "SELECT COUNT(*) FROM (SELECT DISTINCT e.set_name, e.key FROM entries e "
                f"JOIN namespaces n ON n.id = e.namespace_id WHERE n.namespace IN ({', '.join('?' * len(texts))}))",
                texts).fetchone()[0]

    def _set_aside(self, namespace: str, bad: list[tuple[int, object, str, str]]) -> None:
        """Move rows a read refused to ``damaged`` (each only if nobody rewrote it meanwhile), saying
        so with the slot of the first: (rowid, entry text, slot, why) each."""
        count = len(bad)
        first = f"{bad[0][2]}: {bad[0][3]}" if count == 1 else f"the first, {bad[0][2]}: {bad[0][3]}"
        what = f"{count} damaged entr{'y' if count == 1 else 'ies'} of {self.path} ({first})"
        try:
            with self.transaction() as connection:
                stamp = now()
                for rowid, row, _slot_of, reason in bad:
                    moved = connection.execute(
                        "INSERT INTO damaged (namespace, set_name, key, entry, reason, at) "
                        "SELECT ?, set_name, key, entry, ?, ? FROM entries WHERE rowid = ? AND entry IS ?",
                        (namespace, reason, stamp, rowid, row))
                    if moved.rowcount:
                        connection.execute("DELETE FROM entries WHERE rowid = ?", (rowid,))
        except OSError as error:
            logger.warning("%s", f"skipped {what}, tuned again; could not move them aside: {error}")
            return
        logger.warning("%s", f"skipped {what}, tuned again; moved to its 'damaged' table")

    @again_after_salvage
    def clear(self, namespace: dict) -> int:
        """Forget every entry of ``namespace``, those of the texts that read as it included
        (:meth:`matching`: else they would read as its again); how many there were."""
        texts = self.matching(namespace)
        removed = 0
        with self.transaction() as connection:
            for text in texts:
                row = connection.execute("SELECT id FROM namespaces WHERE namespace = ?", (text,)).fetchone()
                if row is None:
                    continue
                removed += connection.execute("DELETE FROM entries WHERE namespace_id = ?", row).rowcount
                connection.execute("DELETE FROM namespaces WHERE id = ?", row)
        return removed

    @again_after_salvage
    def clear_all(self) -> tuple[int, int, int]:
        """Forget every namespace's entries and the damaged rows kept aside; (namespaces, entries,
        damaged rows) removed."""
        with self.transaction() as connection:
            namespaces = connection.execute(
                "SELECT COUNT(*) FROM namespaces WHERE id IN (SELECT namespace_id FROM entries)").fetchone()[0]
            removed = connection.execute("DELETE FROM entries").rowcount
            connection.execute("DELETE FROM namespaces")
            damaged = connection.execute("DELETE FROM damaged").rowcount
        return namespaces, removed, damaged

    @again_after_salvage
    def namespaces(self) -> list[NamespaceSummary]:
        """Every namespace with entries or damaged rows, sorted by its canonical text."""
        with self.lock, self.errors():
            rows = self.connection().execute(
                "SELECT namespace, SUM(entries), SUM(damaged) FROM ("
                " SELECT n.namespace AS namespace, COUNT(e.rowid) AS entries, 0 AS damaged"
                " FROM namespaces n LEFT JOIN entries e ON e.namespace_id = n.id GROUP BY n.id"
                " UNION ALL SELECT namespace, 0, COUNT(*) FROM damaged GROUP BY namespace"
                ") GROUP BY namespace HAVING SUM(entries) + SUM(damaged) > 0 ORDER BY namespace").fetchall()
        return [NamespaceSummary(namespace_of(text), entries, damaged) for text, entries, damaged in rows]

    def rows(self, connection: sqlite3.Connection, namespace: str | None = None,
             problems: list[str] | None = None) -> Iterator[tuple[str, str, str, str]]:
        """(canonical namespace, set, key text, entry text) of every row (of ``namespace``), in
        export order: namespace, set, key. A cursor: rows are read as they are consumed.

        Rows under a namespace text that is not a namespace (:func:`~wgtune.store.format.read_namespace`:
        not JSON, nested too deep, a number of thousands of digits, fields of the wrong types) are
        left out: no store reads them, and a listing or an export must not fail on them; each such
        namespace is said in ``problems`` (None: as a warning)."""
        query = ("SELECT n.namespace, e.set_name, e.key, e.entry "
                 "FROM entries e JOIN namespaces n ON n.id = e.namespace_id"
                 + (" WHERE n.namespace = ?" if namespace is not None else "")
                 + " ORDER BY n.namespace, e.set_name, e.key")
        current, readable = None, False
        for row in connection.execute(query, (namespace,) if namespace is not None else ()):
            if row[0] != current or current is None:
                current, readable = row[0], True
                try:
                    read_namespace(current)
                except StoreError as error:
                    readable = False
                    note = f"left out the entries of a damaged namespace of {self.path} ({error})"
                    if problems is None:
                        logger.warning("%s", note)
                    else:
                        problems.append(note)
            if readable:
                yield row

    def entries(self) -> tuple[list[tuple[dict, StoredEntry]], list[str]]:
        """Every readable (namespace, entry) in export order, and what was wrong with the others
        (left where they are: a listing moves nothing)."""
        fields: dict[str, dict] = {}
        for attempt in (1, 2):
            found: list[tuple[dict, StoredEntry]] = []
            problems: list[str] = []
            try:
                with self.reading() as connection:
                    for namespace, set_name, key_text, text in self.rows(connection, problems=problems):
                        try:
                            entry = decode_row(text, set_name, key_text)
                            if namespace not in fields:
                                fields[namespace] = namespace_of(namespace)
                            found.append((fields[namespace], entry))
                        except StoreError as error:
                            problems.append(str(error))
            except Malformed as error:
                if attempt == 1 and error.salvaged:  # the fresh database holds every row still readable: list it
                    continue
                problems.append(str(error))  # set aside (said); what was read before is still shown
            break
        return found, problems


def _slot(set_name: object, key_text: object) -> str:
    """A row's slot as a warning names it: ``set [key]``, escaped and cut short."""
    return f"{shown(set_name, 80)} [{shown(key_text, 200)}]"


class SqliteStore(Store):
    """One namespace of the cache directory's database: the :class:`~wgtune.store.contract.Store`
    of the native tuner (see the module doc). Read key by key (``read_by_key``): a key's row is
    read on its first claim, so that opening a cache of any size costs the same.

    ``database`` shares one :class:`CacheDatabase` (and its connection) between namespaces; else
    one is made for ``directory``. Raises OSError when the database cannot be used.
    """

    read_by_key = True

    def __init__(self, directory: str | os.PathLike | None, namespace: dict, *,
                 database: CacheDatabase | None = None) -> None:
        self.namespace: dict = check_namespace(namespace)
        self._reading: list[str] | None = None
        self.database = database if database is not None else CacheDatabase(directory)
        self.directory = self.database.directory
        self.path = self.database.path
        self.where = str(self.path)

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def open(self) -> SqliteStore:
        """Open the database now (make it, migrate old documents): its errors surface here."""
        self.database.connection()
        return self

    def _texts(self) -> list[str]:
        """The namespace texts this store reads (:meth:`CacheDatabase.matching`), found once: its
        own, and those of earlier namespace rules that read as it."""
        if self._reading is None:
            self._reading = self.database.matching(self.namespace)
        return self._reading

    def load(self) -> list[StoredEntry]:
        """Every readable entry of the namespace (see :meth:`CacheDatabase.load`); none where the
        database was malformed (set aside, said: every key is tuned again)."""
        try:
            return self.database.load(self._texts())
        except Malformed:
            return []

    def lookup(self, set_name: str, key: Key) -> StoredEntry | None:
        """One entry, or None (see :meth:`CacheDatabase.lookup`): one indexed query. None too where
        the database was malformed (set aside, said: the key is tuned again)."""
        try:
            return self.database.lookup(self._texts(), set_name, key)
        except Malformed:
            return None

    def count(self) -> int:
        """How many entries the namespace has (rows: a damaged one counts until a read sets it aside);
        none where the database was malformed (set aside, said)."""
        try:
            return self.database.count(self._texts())
        except Malformed:
            return 0

    def save(self, entry: StoredEntry) -> None:
        """Keep ``entry``, replacing the one of the same set and key: one row, one transaction,
        committed when this returns. :class:`~wgtune.backends.sqlite_open.ReadOnly` (an OSError) at
        once where this run cannot write the database (see the module doc)."""
        self.database.save(self.namespace, [entry])

    def save_many(self, entries: Iterable[StoredEntry]) -> None:
        """Keep ``entries`` (a later one wins its slot) in one transaction."""
        self.database.save(self.namespace, entries)

    def clear(self) -> None:
        """Forget every entry of the namespace."""
        if not self.database.is_empty_cache():
            self.database.clear(self.namespace)
            self._reading = None
