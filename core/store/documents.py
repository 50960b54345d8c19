"""Keeping namespace documents: one store over a small key-value interface.

Winners were kept as one document per namespace (``wgtune.cache/1``, see ``format.py``), a file in
a directory: the old native store (``backends/file_store.py``), which the SQLite store migrates
from; today only a migration source (``contract.py``: ``LegacyDocuments``). (The stores in use keep
one row, or one IndexedDB record, per entry; they share this module's check of an import,
``DocumentStore.check_import``.) Everything that decides what
happens to a document lives here:

- **merge on write**: a save re-reads the document under the key-value store's lock and merges
  into it, so the entries another process (or browser tab) wrote since this one loaded are kept;
- **lenient reads**: a damaged entry costs only itself (skipped, logged); a damaged document (not
  JSON, not a wgtune document, another namespace's) is set aside and reads as empty: a read never
  raises for damaged data, since a store that cannot be read is a miss and the tune goes on;
- **the whole cache**: list every document, export them as one ``wgtune.export/1`` document,
  import one (checked whole before anything is written), clear one namespace or all of them.

Problems go to the ``wgtune`` logger as warnings; that is their only channel.

A backend supplies a :class:`KeyValueStore`: named texts, a lock, a way to set a damaged
document aside. Its methods are coroutines, like the device's: in the browser they await
IndexedDB's promises, natively they never suspend, so :class:`InlineStore` runs them to completion
with :func:`~wgtune.runner.run_inline` and offers the synchronous store protocol the tuner uses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import StoreError
from ..runner import run_inline
from .bounded_json import parse_json
from .contract import Store
from .format import (
    StoredEntry,
    canonical_namespace,
    check_namespace,
    decode_document_leniently,
    decode_export,
    document_text,
    encode_document,
    encode_export,
)

# The package's logger by name: the tune wing's log module is above this one.
logger = logging.getLogger("wgtune")

__all__ = ["DocumentStore", "InlineStore", "KeyValueStore", "StoredDocument"]


class KeyValueStore(Protocol):
    """Where documents live: texts under names, one per namespace (what a backend implements).

    Natively the coroutines must never suspend (see :class:`InlineStore`).
    """

    def name_for(self, namespace: dict) -> str:
        """The name of ``namespace``'s document (a file name, a record key)."""
        ...

    def describe(self, name: str) -> str:
        """How messages name the document ``name`` for a person (its path, its record key)."""
        ...

    async def get(self, name: str) -> str | None:
        """The text stored under ``name``, None when there is none. Raises StoreError when what
        is stored there is not text, OSError when it cannot be read."""
        ...

    async def put(self, name: str, text: str) -> None:
        """Store ``text`` under ``name`` all at once: a reader sees the old text or the new one."""
        ...

    async def remove(self, name: str) -> bool:
        """Forget the text under ``name``; whether there was one."""
        ...

    async def names(self) -> list[str]:
        """The names of every stored document, sorted."""
        ...

    def locked(self, name: str) -> AbstractAsyncContextManager[None]:
        """Held around "read, merge, write" of ``name``, so that no other writer (process, tab)
        writes it in between; the store does not take it twice at once."""
        ...

    async def set_aside(self, name: str, *, keep_original: bool) -> str | None:
        """Keep the damaged document ``name`` for a post-mortem, under the lock; say where.

        With ``keep_original`` the document stays where it is (it is about to be rewritten, and
        readers must not see it missing meanwhile); without, it is moved away. None: this store
        keeps no copies (the damaged document stays until the next write replaces it).
        """
        ...


@dataclass(frozen=True)
class StoredDocument:
    """One stored document as read for a person (listing, export): never raises, says what is wrong.

    ``damage`` says why the document as a whole could not be read (its namespace and entries are
    then empty); ``problems`` what was wrong with each entry that was skipped.
    """

    name: str
    where: str
    namespace: dict = field(default_factory=dict)
    entries: list[StoredEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    damage: str | None = None


def _entries_word(count: int) -> str:
    return f"{count} damaged entr{'y' if count == 1 else 'ies'}"


class DocumentStore:
    """Namespace documents over ``key_values`` (see the module doc). Every method is a coroutine."""

    def __init__(self, key_values: KeyValueStore) -> None:
        self.key_values = key_values

    def __repr__(self) -> str:
        return f"DocumentStore({self.key_values!r})"

    # -- reading ------------------------------------------------------------------------------

    async def _read(self, name: str, namespace: dict | None = None) -> tuple[dict, list[StoredEntry], list[str]] | None:
        """The namespace, the good entries and what was wrong with the others of document ``name``;
        None when there is none. Raises StoreError when the document as a whole is damaged (or,
        given ``namespace``, is another namespace's), OSError when it cannot be read."""
        text = await self.key_values.get(name)
        if text is None:
            return None
        found, entries, problems = decode_document_leniently(parse_json(text))
        if namespace is not None and canonical_namespace(found) != canonical_namespace(namespace):
            raise StoreError(f"the document is for namespace {canonical_namespace(found)}, not this one")
        return found, entries, problems

    def _report_damage(self, name: str, why: str, aside: str | None) -> None:
        where = self.key_values.describe(name)
        kept = f"kept a copy as {aside}" if aside is not None else "ignoring it"
        logger.warning("%s", f"the cache document {where} is damaged ({why}); {kept}")

    def _report_skipped(self, name: str, problems: list[str]) -> None:
        where = self.key_values.describe(name)
        logger.warning("%s", f"skipped {_entries_word(len(problems))} of {where}: {problems[0]}")

    async def _entries_before_rewrite(self, name: str, namespace: dict) -> list[StoredEntry]:
        """The good entries of document ``name``. Call under its lock, before rewriting it: a
        damaged document is set aside; with damaged entries a copy is set aside, and the
        rewrite that follows drops them."""
        try:
            found = await self._read(name, namespace)
        except StoreError as error:
            self._report_damage(name, str(error), await self.key_values.set_aside(name, keep_original=False))
            return []
        if found is None:
            return []
        _namespace, entries, problems = found
        if problems:
            aside = await self.key_values.set_aside(name, keep_original=True)
            if aside is None:
                self._report_skipped(name, problems)
            else:
                self._report_damage(name, f"{_entries_word(len(problems))}: {problems[0]}", aside)
        return entries

    async def load(self, namespace: dict) -> list[StoredEntry]:
        """Every readable entry of ``namespace``; [] when there is none or the document is damaged.

        Damaged entries are skipped (logged); the other winners stay usable. A damaged document
        is set aside. Raises OSError only when the store itself cannot be read.
        """
        namespace = check_namespace(namespace)
        name = self.key_values.name_for(namespace)
        try:
            found = await self._read(name, namespace)  # no lock: writes are whole, a read sees one document
        except StoreError as error:
            try:
                async with self.key_values.locked(name):  # re-read under the lock: it may have been rewritten
                    return await self._entries_before_rewrite(name, namespace)
            except OSError as failure:  # a read-only cache, say: damaged data still never raises
                where = self.key_values.describe(name)
                logger.warning(
                    "%s", f"the cache document {where} is damaged ({error}) and could not be set aside "
                          f"({failure}); ignoring it"
                )
                return []
        if found is None:
            return []
        _namespace, entries, problems = found
        if problems:
            self._report_skipped(name, problems)
        return entries

    # -- writing ------------------------------------------------------------------------------

    async def save(self, namespace: dict, entries: Iterable[StoredEntry]) -> None:
        """Merge ``entries`` into ``namespace``'s document in one locked write: each replaces the
        stored entry of its set and key (a later one of ``entries`` wins its slot), every other
        stored entry (another writer's, say) is kept. Raises OSError when it cannot be written."""
        namespace = check_namespace(namespace)
        entries = list(entries)
        name = self.key_values.name_for(namespace)
        async with self.key_values.locked(name):
            merged = {entry.slot: entry for entry in await self._entries_before_rewrite(name, namespace)}
            merged.update((entry.slot, entry) for entry in entries)
            await self.key_values.put(name, document_text(encode_document(namespace, merged.values())))

    async def clear(self, namespace: dict) -> None:
        """Forget every entry of ``namespace`` (its document is removed)."""
        name = self.key_values.name_for(check_namespace(namespace))
        async with self.key_values.locked(name):
            await self.key_values.remove(name)

    # -- the whole cache ----------------------------------------------------------------------

    async def documents(self) -> list[StoredDocument]:
        """Every stored document, read leniently and moving nothing: what a listing shows."""
        documents = []
        for name in await self.key_values.names():
            where = self.key_values.describe(name)
            try:
                found = await self._read(name)
            except StoreError as error:
                documents.append(StoredDocument(name, where, damage=str(error)))
                continue
            if found is not None:  # None: removed since it was listed
                namespace, entries, problems = found
                documents.append(StoredDocument(name, where, namespace, entries, problems))
        return documents

    async def export(self) -> dict:
        """Every readable namespace as one ``wgtune.export/1`` document (what ``wgtune cache export``
        writes and the page's import reads, and the reverse). Damaged documents are left out and
        damaged entries skipped, each logged."""
        exported = []
        for document in await self.documents():
            if document.damage is not None:
                logger.warning("%s", f"not exporting {document.where}: {document.damage}")
                continue
            if document.problems:
                self._report_skipped(document.name, document.problems)
            exported.append(encode_document(document.namespace, document.entries))
        return encode_export(exported)

    @staticmethod
    def check_import(text: str | bytes) -> object:
        """Parse an import's text and check all of it; StoreError naming what is wrong.

        The text is parsed with bounds (:func:`~wgtune.store.bounded_json.parse_json`: depth, numbers,
        duplicated keys) and every namespace and entry checked: what comes back is what
        :meth:`import_document` takes.
        """
        try:
            obj = parse_json(text)
        except StoreError as error:
            raise StoreError(f"the file is {error}") from None  # "not JSON: ...", "nested 900 levels deep ..."
        decode_export(obj)
        return obj

    async def import_document(self, obj: object) -> int:
        """Merge an export (or one namespace document) into the store; the number of entries
        stored: a namespace, set and key the document gives twice (in one namespace's entries, or
        in two documents of the same namespace) is one entry, the last given.

        All of ``obj`` is decoded and checked before anything is written: a bad one (StoreError)
        changes nothing. Imported entries replace stored ones of the same set and key. Counted by
        the slot a document keeps an entry in (:attr:`~wgtune.store.format.StoredEntry.slot`, as
        :meth:`save` merges), each namespace's once: not the entries given, which counted a key
        given twice twice (an import said 2 of the one entry it stored).
        """
        decoded = [(check_namespace(namespace), entries) for namespace, entries in decode_export(obj)]
        for namespace, entries in decoded:
            await self.save(namespace, entries)
        return len({(canonical_namespace(namespace), entry.slot)
                    for namespace, entries in decoded for entry in entries})

    async def clear_all(self) -> int:
        """Forget every namespace (each document under its lock); how many documents were removed."""
        removed = 0
        for name in await self.key_values.names():
            async with self.key_values.locked(name):
                removed += bool(await self.key_values.remove(name))
        return removed


class InlineStore(Store):
    """One namespace's document as the store contract's :class:`~wgtune.store.contract.Store`,
    over a key-value store whose coroutines never suspend (natively: files): each call runs to
    completion inline, with no event loop. Read whole (``read_by_key`` False: a lookup would
    read the whole document); ``lookup`` and ``count`` are the contract's defaults."""

    def __init__(self, key_values: KeyValueStore, namespace: dict) -> None:
        self.namespace: dict = check_namespace(namespace)
        self.documents = DocumentStore(key_values)
        self.where = key_values.describe(key_values.name_for(self.namespace))

    def load(self) -> list[StoredEntry]:
        """Every readable entry of the namespace (see :meth:`DocumentStore.load`)."""
        return run_inline(self.documents.load(self.namespace))

    def save(self, entry: StoredEntry) -> None:
        """Keep ``entry``, replacing the one with the same set and key (merged into the document
        under its lock, written whole and atomically before this returns). Raises OSError."""
        self.save_many([entry])

    def save_many(self, entries: Iterable[StoredEntry]) -> None:
        """Merge ``entries`` (later ones win a slot) into the document in one locked write."""
        run_inline(self.documents.save(self.namespace, entries))

    def clear(self) -> None:
        """Forget every entry of the namespace."""
        run_inline(self.documents.clear(self.namespace))
