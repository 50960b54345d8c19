"""The browser's store: winners kept in IndexedDB, one record per namespace.

Each record's key is the namespace's canonical JSON, its value the very document the native file
store writes (``wgtune.cache/1``), as text: an export made natively imports in the page and the
reverse, with no conversion.

What happens to documents (merging, damaged data, export, import) is the core's
(:mod:`wgtune.documents`); this module gives it a key-value store over IndexedDB,
:class:`IndexedDBRecords`, and keeps the tuner's store protocol on top, :class:`IndexedDBStore`.
IndexedDB is asynchronous and that protocol is not: :meth:`IndexedDBStore.open` reads the
namespace before the tuner starts; :meth:`IndexedDBStore.save` updates memory at once and writes
in the background, in order, merging with what another tab may have written meanwhile.
:meth:`IndexedDBStore.flush` waits for the writes.

The requests themselves live in small JS helpers (``web/idb.js``) that return promises; this
module receives them as ``idb``, an object with ``get(key)``, ``put(key, text)``,
``remove(key)`` and ``entries()``. Anything with those coroutine methods works, so the store is
tested natively on a dict.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from wgtune.documents import DocumentStore
from wgtune.key import Key
from wgtune.store import WRITE_PENDING, StoredEntry, canonical_namespace, check_namespace

__all__ = ["IndexedDBRecords", "IndexedDBStore", "document_store"]

logger = logging.getLogger("wgtune")


class IndexedDBRecords:
    """The core's key-value store (:class:`~wgtune.documents.KeyValueStore`) over ``idb``
    (``web/idb.js``'s helpers): one record per document, keyed by the namespace's canonical JSON.

    IndexedDB offers no lock that spans tabs through these helpers, so :meth:`locked` holds
    nothing: a write re-reads the record just before writing it, which keeps another tab's
    entries unless both write one namespace at the same moment. No copies of damaged records are
    kept: a damaged record reads as empty and the next write replaces it.
    """

    def __init__(self, idb: Any) -> None:
        self.idb = idb

    def __repr__(self) -> str:
        return f"IndexedDBRecords({getattr(self.idb, 'name', '?')!r})"

    def name_for(self, namespace: dict) -> str:
        return canonical_namespace(namespace)

    def describe(self, name: str) -> str:
        return name

    async def get(self, name: str) -> str | None:
        text = await self.idb.get(name)
        return str(text) if text else None  # JS undefined (no record) arrives as None

    async def put(self, name: str, text: str) -> None:
        await self.idb.put(name, text)

    async def remove(self, name: str) -> bool:
        existed = await self.get(name) is not None
        await self.idb.remove(name)
        return existed

    async def names(self) -> list[str]:
        return sorted(str(pair[0]) for pair in await self.idb.entries())

    @asynccontextmanager
    async def locked(self, name: str) -> AsyncIterator[None]:
        yield

    async def set_aside(self, name: str, *, keep_original: bool) -> None:
        return None


def document_store(idb: Any) -> DocumentStore:
    """Every namespace's documents in IndexedDB: the page's cache view, export, import, clear."""
    return DocumentStore(IndexedDBRecords(idb))


class IndexedDBStore:
    """One namespace's winners in IndexedDB (see the module doc). Build with :meth:`open`."""

    def __init__(self, idb: Any, namespace: dict, entries: Iterable[StoredEntry] = ()) -> None:
        self.idb = idb
        self.documents = document_store(idb)
        self.namespace: dict = check_namespace(namespace)
        self.record_key = canonical_namespace(self.namespace)
        self._entries = {entry.slot: entry for entry in entries}
        self._unwritten: dict = {}
        self._clear_requested = False
        self._writer: asyncio.Task | None = None
        self.write_error: BaseException | None = None
        """The last background write that failed, if any (also logged as a warning)."""
        self.on_written: Callable[[list[StoredEntry], BaseException | None], None] | None = None
        """Told of each background write as it ends: the entries, and the error if it failed
        (the page turns its records' "pending" into stored or not)."""

    @classmethod
    async def open(cls, idb: Any, namespace: dict) -> IndexedDBStore:
        """Read ``namespace``'s document; a damaged one reads as empty (logged)."""
        return cls(idb, namespace, await document_store(idb).load(namespace))

    def __repr__(self) -> str:
        return f"IndexedDBStore({self.record_key!r})"

    def load(self) -> list[StoredEntry]:
        return list(self._entries.values())

    def stored(self, set_name: str, key: Key) -> StoredEntry | None:
        """The entry of one key, if stored."""
        return self._entries.get((set_name, key))

    def save(self, entry: StoredEntry) -> str:
        """Keep ``entry`` now; write it to IndexedDB in the background (needs a running loop):
        answers ``"pending"`` (``store.WRITE_PENDING``), and :attr:`on_written` hears the end."""
        self._entries[entry.slot] = entry
        self._unwritten[entry.slot] = entry
        self._start_writer()
        return WRITE_PENDING

    def clear(self) -> None:
        """Forget every entry of the namespace (the record is deleted in the background)."""
        self._entries.clear()
        self._unwritten.clear()
        self._clear_requested = True
        self._start_writer()

    async def flush(self) -> None:
        """Wait until every save and clear so far is in IndexedDB; raise the last failure."""
        while self._writer is not None:
            await asyncio.shield(self._writer)
        if self.write_error is not None:
            error, self.write_error = self.write_error, None
            raise error

    def _start_writer(self) -> None:
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        """The single background writer: clears and saves in the order they were asked for,
        each save merged into what is stored (another tab's winners stay)."""
        try:
            while self._unwritten or self._clear_requested:
                if self._clear_requested:
                    self._clear_requested = False
                    await self.documents.clear(self.namespace)
                if not self._unwritten:
                    continue
                unwritten, self._unwritten = self._unwritten, {}
                try:
                    await self.documents.save(self.namespace, unwritten.values())
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
