"""The browser's store: winners kept in IndexedDB, one record per namespace.

Each record's key is the namespace's canonical JSON, its value the very document the native file
store writes (``wgtune.cache/1``), as text: an export made natively imports in the page and the
reverse, with no conversion.

IndexedDB is asynchronous and the store protocol is not: :meth:`IndexedDBStore.open` reads the
namespace before the tuner starts; :meth:`IndexedDBStore.save` updates memory at once and writes
in the background, in order, merging with what another tab may have written meanwhile.
:meth:`IndexedDBStore.flush` waits for the writes.

The requests themselves live in small JS helpers (``web/idb.js``) that return promises; this
module receives them as ``idb``, an object with ``get(key)``, ``put(key, text)``,
``remove(key)``, ``entries()`` and ``clear()``. Anything with those coroutine methods works, so
the store is tested natively on a dict.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from typing import Any

from wgtune.errors import StoreError
from wgtune.store import (
    StoredEntry,
    canonical_namespace,
    decode_document_leniently,
    decode_export,
    encode_document,
    encode_export,
)

__all__ = ["IndexedDBStore", "check_document", "clear_all", "export_all", "import_document", "list_documents"]

logger = logging.getLogger("wgtune")


def _dump(document: dict) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def _entries_of(text: Any, where: str) -> list[StoredEntry]:
    """The readable entries of a stored document's text; damaged parts are warned of, not fatal."""
    if not text:
        return []
    try:
        _namespace, entries, problems = decode_document_leniently(json.loads(str(text)))
    except (ValueError, StoreError) as error:
        logger.warning("wgtune: the stored document %s is damaged (%s); ignoring it", where, error)
        return []
    if problems:
        logger.warning("wgtune: skipped %d damaged entries of %s: %s", len(problems), where, problems[0])
    return entries


class IndexedDBStore:
    """One namespace's winners in IndexedDB (see the module doc). Build with :meth:`open`."""

    def __init__(self, idb: Any, namespace: dict, entries: Iterable[StoredEntry] = ()) -> None:
        self.idb = idb
        self.namespace: dict = json.loads(canonical_namespace(namespace))
        self.record_key = canonical_namespace(self.namespace)
        self._entries = {entry.slot: entry for entry in entries}
        self._unwritten: dict = {}
        self._clear_requested = False
        self._writer: asyncio.Task | None = None
        self.write_error: BaseException | None = None
        """The last background write that failed, if any (also logged as a warning)."""

    @classmethod
    async def open(cls, idb: Any, namespace: dict) -> IndexedDBStore:
        """Read ``namespace``'s document; a damaged one reads as empty, with a warning."""
        key = canonical_namespace(namespace)
        return cls(idb, namespace, _entries_of(await idb.get(key), key))

    def __repr__(self) -> str:
        return f"IndexedDBStore({self.record_key!r})"

    def load(self) -> list[StoredEntry]:
        return list(self._entries.values())

    def stored(self, table: str, key: Any) -> StoredEntry | None:
        """The entry of one key, if stored."""
        return self._entries.get((table, key))

    def save(self, entry: StoredEntry) -> None:
        """Keep ``entry`` now; write it to IndexedDB in the background (needs a running loop)."""
        self._entries[entry.slot] = entry
        self._unwritten[entry.slot] = entry
        self._start_writer()

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
        try:
            while self._unwritten or self._clear_requested:
                if self._clear_requested:
                    self._clear_requested = False
                    await self.idb.remove(self.record_key)
                if not self._unwritten:
                    continue
                unwritten, self._unwritten = self._unwritten, {}
                stored = _entries_of(await self.idb.get(self.record_key), self.record_key)
                merged = {entry.slot: entry for entry in stored}  # another tab's winners stay
                merged.update(unwritten)
                await self.idb.put(self.record_key, _dump(encode_document(self.namespace, merged.values())))
        except Exception as error:
            self.write_error = error
            logger.warning("wgtune: could not write winners to IndexedDB: %s", error)
        finally:
            self._writer = None


# -- every namespace, for the page's cache view ----------------------------------------------------


async def list_documents(idb: Any) -> list[tuple[dict, list[StoredEntry]]]:
    """Every stored namespace and its readable entries; damaged documents are warned of and left out."""
    documents = []
    for pair in await idb.entries():
        key, text = str(pair[0]), pair[1]
        try:
            namespace, entries, problems = decode_document_leniently(json.loads(str(text)))
        except (ValueError, StoreError) as error:
            logger.warning("wgtune: not listing the damaged document %s: %s", key, error)
            continue
        if problems:
            logger.warning("wgtune: skipped %d damaged entries of %s: %s", len(problems), key, problems[0])
        documents.append((namespace, entries))
    return documents


async def export_all(idb: Any) -> dict:
    """Every namespace as one export document (``wgtune.export/1``), as ``wgtune cache export`` writes."""
    return encode_export(encode_document(namespace, entries) for namespace, entries in await list_documents(idb))


async def import_document(idb: Any, obj: object) -> int:
    """Merge an export (or one namespace document) into IndexedDB; the number of entries.

    All of ``obj`` is decoded before anything is written: a bad one (StoreError) changes nothing.
    Imported entries replace stored ones of the same table and key.
    """
    decoded = decode_export(obj)
    count = 0
    for namespace, entries in decoded:
        key = canonical_namespace(namespace)
        merged = {entry.slot: entry for entry in _entries_of(await idb.get(key), key)}
        merged.update((entry.slot, entry) for entry in entries)
        await idb.put(key, _dump(encode_document(namespace, merged.values())))
        count += len(entries)
    return count


async def clear_all(idb: Any) -> int:
    """Forget every namespace; how many documents there were."""
    count = len(await idb.entries())
    await idb.clear()
    return count


def check_document(text: str) -> object:
    """Parse an import's text, or raise StoreError naming what is wrong (before anything is written)."""
    try:
        obj = json.loads(text)
    except ValueError as error:
        raise StoreError(f"the file is not JSON: {error}") from None
    decode_export(obj)
    return obj

