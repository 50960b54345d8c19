"""Every namespace's winners in IndexedDB, one record per entry: what the page's stored-winners
panel, export, import and clear read and write, and the migration of version 1's documents
(one per namespace) into records. ``indexeddb.py`` builds the tuner's store for one namespace
(:class:`~wgtune.backends.indexeddb.IndexedDBStore`) and the store contract's ``Database`` on top
of :class:`IndexedDBEntries`; the record layout is ``idb_records.py``'s.

The requests live in ``web/idb.js``, which answers lists as JSON text (:func:`json_rows` reads
them). Damaged records are skipped and logged, never trusted and never fatal.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from wgtune.errors import StoreError
from wgtune.key import Key
from wgtune.store.bounded_json import parse_json
from wgtune.store.documents import DocumentStore
from wgtune.store.format import (
    StoredEntry,
    canonical_namespace,
    check_namespace,
    decode_document_leniently,
    decode_export,
    namespaces_matching,
)
from wgtune.text import shown

from .idb_records import decode_record, record_of, slot_text
from .idb_transfer import ExportDocument, export_document
from .slices import Slices

__all__ = ["LOAD_SLICE", "IndexedDBEntries", "json_rows", "namespace_text"]

LOAD_SLICE = 1000
"""Records a namespace is read in at a time (one request, and its text through JSON)."""

logger = logging.getLogger("wgtune")


def namespace_text(namespace: dict | str) -> str:
    """A namespace's canonical text (given as a dict, checked; or already as its text)."""
    return namespace if isinstance(namespace, str) else canonical_namespace(check_namespace(namespace))


def json_rows(text: object, width: int) -> list[list]:
    """A helper's JSON list of rows, each of ``width`` items (a page bug otherwise: StoreError)."""
    rows = json.loads(str(text))
    if not isinstance(rows, list) or not all(isinstance(row, list) and len(row) == width for row in rows):
        raise StoreError(f"IndexedDB answered rows that are not lists of {width}")
    return rows


class IndexedDBEntries:
    """Every namespace's winners in IndexedDB, over ``idb`` (``web/idb.js``'s helpers)."""

    check_import = staticmethod(DocumentStore.check_import)

    def __init__(self, idb: Any) -> None:
        self.idb = idb

    def __repr__(self) -> str:
        return f"IndexedDBEntries({getattr(self.idb, 'name', '?')!r})"

    # -- one namespace ------------------------------------------------------------------------

    async def load(self, namespace: dict | str) -> list[StoredEntry]:
        """Every readable entry of ``namespace`` (or of its canonical text), read in slices of
        :data:`LOAD_SLICE` records (a request each) and decoded a few tens of milliseconds at a
        time (``slices.py``), so that a namespace of 100k entries is many short tasks of the page,
        not one of seconds; damaged records are skipped, logged."""
        entries, problems = [], []
        slices = Slices()
        for slot, value in (await self.load_texts(namespace)).items():
            set_name, _, key_text = slot.rpartition("\0")
            try:
                entries.append(decode_record(set_name, key_text, value))
            except StoreError as error:
                problems.append(f"{shown(set_name)} [{shown(key_text)}]: {error}")
            if slices.due():
                await slices.pause()
        if problems:
            logger.warning("skipped %d damaged entr%s in IndexedDB: %s", len(problems),
                           "y" if len(problems) == 1 else "ies", problems[0])
        return entries

    async def load_texts(self, namespace: dict | str) -> dict[str, str]:
        """Every record of ``namespace`` (or of its canonical text) as it is stored, not decoded:
        ``{slot_text(set, key's JSON): entry's text}``, read in slices of :data:`LOAD_SLICE` records."""
        text = namespace_text(namespace)
        texts: dict[str, str] = {}
        after: list | None = None
        while True:
            rows = json_rows(await self.idb.namespaceSlice(text, *(after or (None, None)), LOAD_SLICE), 3)
            texts.update((slot_text(set_name, key_text), value) for set_name, key_text, value in rows)
            if len(rows) < LOAD_SLICE:
                return texts
            after = rows[-1][:2]

    async def read(self, namespace: dict | str, set_name: str, key: Key) -> StoredEntry | None:
        """One key's entry (one request), None when none is stored; a damaged one is None, logged."""
        text = await self.idb.entry(namespace_text(namespace), set_name, key.to_json())
        if text is None:  # JS undefined arrives as None
            return None
        try:
            return decode_record(set_name, key.to_json(), text)
        except StoreError as error:
            logger.warning("ignoring the damaged stored winner of %s [%s]: %s", set_name, key, error)
            return None

    async def put(self, namespace: dict, entries: Iterable[StoredEntry]) -> None:
        """Write ``entries`` in one transaction, each replacing the stored entry of its set and
        key; every other entry stays. Raises what IndexedDB raised (nothing written then)."""
        text = canonical_namespace(check_namespace(namespace))
        records = [record_of(text, entry) for entry in entries]
        if records:
            await self.idb.putEntries(json.dumps(records, ensure_ascii=False))

    async def clear(self, namespace: dict | str) -> None:
        """Forget every entry of ``namespace`` (or of its canonical text), in one transaction."""
        await self.idb.clearNamespace(namespace_text(namespace))

    async def matching(self, namespace: dict) -> list[str]:
        """The namespace texts IndexedDB holds records under that read as ``namespace`` but are
        not its own (earlier namespace rules' texts of the same GPU and wgtune line), newest
        release first (:func:`~wgtune.store.format.namespaces_matching`)."""
        own = canonical_namespace(check_namespace(namespace))
        stored = [str(text) for text, _count in json_rows(await self.idb.namespaceCounts(), 2)]
        return [text for text in namespaces_matching(namespace, stored) if text != own]

    # -- every namespace ----------------------------------------------------------------------

    async def export(self) -> dict:
        """Every readable entry as one ``wgtune.export/1`` document, a ``wgtune.cache/1`` document
        per namespace (what ``wgtune cache export`` writes and reads), read a slice at a time
        (``idb_transfer.py``). Damaged records and namespaces are left out, logged."""
        return await export_document(self.idb, ExportDocument())

    async def import_document(self, obj: object) -> int:
        """Merge an export (or one namespace document) into IndexedDB; the number of entries
        stored: a namespace, set and key the document gives twice (in one namespace's entries, or
        in two documents of the same namespace) is one entry, the last given.

        All of ``obj`` is checked first (a StoreError changes nothing), then written in one
        transaction: each entry replaces the stored one of its namespace, set and key, every
        other stored entry stays, and another tab importing at the same time loses nothing.
        Not ``len(records)``: ``putEntries`` puts each record in order (a key given twice is one
        record, the last put), and ``IndexedDBDatabase.import_from`` said 2 of the one it stored.
        """
        records = []
        for namespace, entries in decode_export(obj):
            text = canonical_namespace(check_namespace(namespace))
            records.extend(record_of(text, entry) for entry in entries)
        if records:
            await self.idb.putEntries(json.dumps(records, ensure_ascii=False))
        return len({(text, set_name, key) for text, set_name, key, _entry_text in records})

    async def clear_all(self) -> int:
        """Forget every namespace, in one transaction; how many namespaces had winners."""
        return int(await self.idb.clearAll())

    async def clear_namespaces(self, texts: Iterable[str]) -> int:
        """Forget the entries of each namespace text of ``texts`` (a transaction each: a device's
        own and its older texts, as a store reads them); how many entries they held."""
        counts = {str(text): int(count) for text, count in json_rows(await self.idb.namespaceCounts(), 2)}
        wanted = list(dict.fromkeys(texts))
        for text in wanted:
            await self.clear(text)
        return sum(counts.get(text, 0) for text in wanted)

    async def migrate(self) -> int:
        """Move the documents of version 1 (one per namespace) into records; how many entries.

        Each document in one transaction: its entries are added where no entry is stored (a
        winner another tab wrote since is newer), then the document is deleted. A document that
        cannot be read, or has damaged entries, is kept where it is (logged) after its good
        entries moved: nothing is lost, and a person can look at it.
        """
        moved = 0
        for name, text in json_rows(await self.idb.oldDocuments(), 2):
            try:
                namespace, entries, problems = decode_document_leniently(parse_json(str(text)))
                namespace_text = canonical_namespace(check_namespace(namespace))
            except StoreError as error:
                logger.warning("kept the damaged cache document %s in IndexedDB: %s", name, error)
                continue
            records = [record_of(namespace_text, entry) for entry in entries]
            if problems:
                logger.warning("kept the cache document %s in IndexedDB: %d damaged entr%s: %s", name,
                               len(problems), "y" if len(problems) == 1 else "ies", problems[0])
            moved += int(await self.idb.migrateDocument(str(name), json.dumps(records, ensure_ascii=False),
                                                        bool(problems)))
        return moved
