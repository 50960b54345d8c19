"""The browser's store: winners kept in IndexedDB, one record per entry.

Each record's key is ``[namespace, set, key]`` (the namespace's canonical JSON, the set's name,
the key's canonical JSON), its value the entry's JSON text, ``StoredEntry.to_json()`` as a
``wgtune.cache/1`` document holds it: an export made natively imports in the page and the
reverse, with no conversion. A save writes its entries and nothing else, in one transaction, so
tabs saving at once never lose each other's winners (a whole document per namespace, read,
merged and written in separate transactions, did); an import is one transaction too.

:class:`IndexedDBEntries` (``idb_entries.py``) is every namespace (the page's stored-winners panel,
export, import, clear, the migration of version 1's documents); :class:`IndexedDBStore` is the
tuner's store protocol for one namespace on top. IndexedDB is asynchronous and that protocol is not:
:meth:`IndexedDBStore.open` reads the namespace before the tuner starts; :meth:`IndexedDBStore.save`
updates memory at once and writes in the background, in order; :meth:`IndexedDBStore.read`
reads one key's record (what a tab does once it holds the key's lock, ``tabs.py``).

A store reads, besides its own namespace, every namespace text that reads as it
(:func:`~wgtune.store.format.namespaces_matching`: those written under the earlier namespace rule,
with full wgtune and driver versions), its own entry first; nothing is rewritten. Saves go to its
own namespace; a clear forgets the older texts too.

Damaged data is never trusted and never fatal: a record that does not decode is skipped (logged),
the other winners stay; the next save of its key replaces it.

The requests live in small JS helpers (``web/idb.js``) that return promises and pass lists as
JSON text; this module receives them as ``idb``. Anything with those coroutine methods works, so
the store is tested natively on a dict (``tests/test_indexeddb_store.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from wgtune.errors import StoreError
from wgtune.key import Key
from wgtune.store.contract import IMPORT_LIMIT, Cleared, Listing, NamespaceSummary, Store
from wgtune.store.format import (
    WRITE_PENDING,
    StoredEntry,
    canonical_namespace,
    check_namespace,
    namespace_of,
)
from wgtune.text import shown

from .idb_entries import LOAD_SLICE, IndexedDBEntries, json_rows
from .idb_records import decode_record, record_of, slot_text
from .idb_transfer import export_text

__all__ = ["LOAD_SLICE", "IndexedDBDatabase", "IndexedDBEntries", "IndexedDBStore", "decode_record", "record_of"]

logger = logging.getLogger("wgtune")


class IndexedDBStore(Store):
    """One namespace's winners in IndexedDB (see the module doc): the page tuner's
    :class:`~wgtune.store.contract.Store`. Build with :meth:`open` (or ``IndexedDBDatabase.open``).

    Read at open, then answered from memory: ``read_by_key`` (the tuner asks :meth:`lookup` on a
    key's first claim rather than building its table of every entry). ``save`` answers
    ``WRITE_PENDING``: the write is durable once :meth:`flush` returns.
    """

    read_by_key = True
    where = "IndexedDB"

    def __init__(self, idb: Any, namespace: dict, entries: Iterable[StoredEntry] = (),
                 older: Iterable[str] = (), texts: dict[str, str] | None = None) -> None:
        self.database = IndexedDBEntries(idb)
        self.namespace: dict = check_namespace(namespace)
        self.record_key = canonical_namespace(self.namespace)
        self.older: tuple[str, ...] = tuple(older)
        """Namespace texts of earlier namespace rules that read as this one (read at open, newest
        release first): looked in after the store's own, cleared with it."""
        self._entries = {entry.slot: entry for entry in entries}
        self._texts: dict[str, str] = dict(texts or {})
        """Records read at open, not decoded yet: ``{slot_text(set, key's JSON): text}``. A key's is decoded
        when it is first asked for (:meth:`lookup`), so that opening a namespace of 100k entries
        decodes none of them, and leaves no 100k entries' objects for Python's garbage collector
        to walk (its passes over them were tasks of up to a second, issue 28)."""
        self._unwritten: dict = {}
        self._clear_requested = False
        self._writer: asyncio.Task | None = None
        self.write_error: BaseException | None = None
        """The last background write that failed, if any (also logged as a warning)."""
        self.on_written: Callable[[list[StoredEntry], BaseException | None], None] | None = None
        """Told of each background write as it ends: the entries, and the error if it failed
        (the page turns its records' "pending" into stored or not, and tells the other tabs)."""

    @classmethod
    async def open(cls, idb: Any, namespace: dict) -> IndexedDBStore:
        """Read ``namespace``'s records, and those of the namespace texts that read as it (written
        with full versions before the namespace rule): of a slot two hold, its own namespace's
        entry, then the newest release's. Each is decoded when first asked for; a damaged one is
        then skipped (logged)."""
        records = IndexedDBEntries(idb)
        older = await records.matching(namespace)
        texts: dict[str, str] = {}
        for text in reversed(older):  # the oldest first: a newer one replaces it in its slot
            texts.update(await records.load_texts(text))
        texts.update(await records.load_texts(namespace))
        return cls(idb, namespace, (), older, texts)

    def __repr__(self) -> str:
        return f"IndexedDBStore({self.record_key!r})"

    def load(self) -> list[StoredEntry]:
        self._decode_all()
        return list(self._entries.values())

    def stored(self, set_name: str, key: Key) -> StoredEntry | None:
        """The entry of one key, as this tab knows it."""
        return self.lookup(set_name, key)

    def lookup(self, set_name: str, key: Key) -> StoredEntry | None:
        """The tuner reads the store key by key through this (``TuneCache.lookup``): a key's entry
        when the key is first claimed, so that a namespace of 100k entries costs the tuner nothing
        at open (building its table of them whole was a quarter-second task of the page)."""
        entry = self._entries.get((set_name, key))
        if entry is None and self._texts:
            text = self._texts.pop(slot_text(set_name, key.to_json()), None)
            if text is not None:
                try:
                    entry = self._entries[(set_name, key)] = decode_record(set_name, key.to_json(), text)
                except StoreError as error:
                    logger.warning("ignoring the damaged stored winner of %s [%s]: %s", set_name, key, error)
        return entry

    def count(self) -> int:
        self._decode_all()
        return len(self._entries)

    @property
    def undecoded(self) -> int:
        """Records read at open that no one has asked for yet, so not decoded (see ``_texts``)."""
        return len(self._texts)

    def _decode_all(self) -> None:
        """Decode every record not decoded yet (what :meth:`load` lists); damaged ones skipped, logged."""
        problems = []
        for slot, text in self._texts.items():
            set_name, _, key_text = slot.rpartition("\0")
            try:
                entry = decode_record(set_name, key_text, text)
            except StoreError as error:
                problems.append(f"{shown(set_name)} [{shown(key_text)}]: {error}")
                continue
            self._entries.setdefault(entry.slot, entry)
        self._texts.clear()
        if problems:
            logger.warning("skipped %d damaged entr%s in IndexedDB: %s", len(problems),
                           "y" if len(problems) == 1 else "ies", problems[0])

    async def read(self, set_name: str, key: Key) -> StoredEntry | None:
        """One key's entry as IndexedDB holds it now (another tab's, say), kept in memory too;
        None when none is stored. Raises what IndexedDB raised."""
        entry = await self.database.read(self.namespace, set_name, key)
        for text in self.older if entry is None else ():
            entry = await self.database.read(text, set_name, key)
            if entry is not None:
                break
        if entry is not None and (set_name, key) not in self._unwritten:
            self._entries[entry.slot] = entry
            self._texts.pop(slot_text(set_name, key.to_json()), None)
        return entry

    def save(self, entry: StoredEntry) -> str:
        """Keep ``entry`` now; write it to IndexedDB in the background (needs a running loop):
        answers ``"pending"`` (``store.WRITE_PENDING``), and :attr:`on_written` hears the end."""
        self._entries[entry.slot] = entry
        self._texts.pop(slot_text(entry.set_name, entry.key.to_json()), None)
        self._unwritten[entry.slot] = entry
        self._start_writer()
        return WRITE_PENDING

    def clear(self) -> None:
        """Forget every entry of the namespace (deleted in the background)."""
        self._entries.clear()
        self._texts.clear()
        self._unwritten.clear()
        self._clear_requested = True
        self._start_writer()

    async def flush(self) -> None:
        """Wait until every save and clear so far is in IndexedDB; raise the last failure."""
        await self.settled()
        if self.write_error is not None:
            error, self.write_error = self.write_error, None
            raise error

    async def settled(self) -> None:
        """Wait until every save and clear so far is written or has failed; raises nothing (a
        failure stays for :meth:`flush`). A tab releases a key's lock only after this."""
        while self._writer is not None:
            await asyncio.wait({self._writer})

    def _start_writer(self) -> None:
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        """The single background writer: clears and saves in the order they were asked for,
        the saves so far in one transaction."""
        try:
            while self._unwritten or self._clear_requested:
                if self._clear_requested:
                    self._clear_requested = False
                    await self.database.clear(self.namespace)
                    for text in self.older:  # they would read as this namespace's again
                        await self.database.clear(text)
                if not self._unwritten:
                    continue
                unwritten, self._unwritten = self._unwritten, {}
                try:
                    await self.database.put(self.namespace, unwritten.values())
                except Exception as error:
                    self._tell(list(unwritten.values()), error)
                    raise
                self._tell(list(unwritten.values()), None)
        except Exception as error:
            self.write_error = error
            logger.warning("could not write winners to IndexedDB: %s", error)
        finally:
            self._writer = None

    def _tell(self, entries: list[StoredEntry], error: BaseException | None) -> None:
        if self.on_written is not None:
            try:
                self.on_written(entries, error)
            except Exception as failure:  # a broken listener must not lose the writes after it
                logger.warning("the IndexedDB write listener failed: %s", failure)


class IndexedDBDatabase:
    """Every namespace in IndexedDB as the store contract's :class:`~wgtune.store.contract.Database`,
    over ``idb`` (``web/idb.js``'s helpers), on top of :class:`IndexedDBEntries`."""

    def __init__(self, idb: Any) -> None:
        self.idb = idb
        self.records = IndexedDBEntries(idb)
        self.where = f"IndexedDB {getattr(idb, 'name', 'wgtune')}"

    def __repr__(self) -> str:
        return f"IndexedDBDatabase({self.where!r})"

    async def namespaces(self) -> list[NamespaceSummary]:
        """Every namespace with records (damaged ones included: IndexedDB keeps them in place)."""
        rows = json_rows(await self.idb.namespaceCounts(), 2)
        return [NamespaceSummary(namespace_of(str(text)), int(count)) for text, count in sorted(rows)]

    async def open(self, namespace: dict) -> IndexedDBStore:
        return await IndexedDBStore.open(self.idb, namespace)

    async def entries(self) -> Listing:
        found, problems = [], []
        for namespace_text, set_name, key_text, value in json_rows(await self.idb.allEntries(), 4):
            try:
                found.append((namespace_of(str(namespace_text)), decode_record(set_name, key_text, value)))
            except StoreError as error:
                problems.append(f"{shown(set_name)} [{shown(key_text)}]: {error}")
        return Listing(found, problems)

    async def export_to(self, out: TextIO) -> tuple[int, int]:
        return await export_text(self.idb, out.write)

    async def import_from(self, source: str | os.PathLike | BinaryIO, *, max_bytes: int = IMPORT_LIMIT) -> int:
        if hasattr(source, "read"):
            data = source.read(max_bytes + 1)  # type: ignore[union-attr]
            name = getattr(source, "name", "the input")
        else:
            with Path(source).open("rb") as handle:
                data = handle.read(max_bytes + 1)
            name = os.fspath(source)
        if len(data) > max_bytes:
            raise StoreError(f"{name} is larger than the import limit of {max_bytes} bytes")
        return await self.records.import_document(self.records.check_import(data))

    async def clear(self) -> Cleared:
        entries = sum(int(count) for _text, count in json_rows(await self.idb.namespaceCounts(), 2))
        return Cleared(await self.records.clear_all(), entries)
