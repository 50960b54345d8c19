"""The page's calls on stored winners: the panel's pages, export and import of the cache, clearing
it, and seeding the tuner from a bundle. :class:`~wgtune.backends.page.PageSession` has them; each
waits for the page's pending writes first where it reads or replaces what IndexedDB holds, and
after a change the page's keys (and the other tabs', through the coordinator) see it at once.

Importable only in Pyodide (it builds JavaScript objects).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import js

from wgtune.errors import ConfigError
from wgtune.key import Key
from wgtune.store.bundle import entries_for, parse_bundle
from wgtune.store.format import StoredEntry, canonical_namespace, namespace_of
from wgtune.tuner import Tuner

from . import idb_transfer, indexeddb
from .js_errors import js_value
from .page_events import PageRecords
from .tabs import TabCoordinator

__all__ = ["StoredWinnersCalls"]


class StoredWinnersCalls:
    """What JavaScript calls on the stored winners (``wgtune.storedPage``, ``exportCache``,
    ``cache``, ``importCache``, ``clearCache``, ``loadBundle``); the session provides the rest."""

    idb: Any
    store: indexeddb.IndexedDBStore | None
    tuner: Tuner | None
    coordinator: TabCoordinator | None
    namespace: dict
    seeds: list[StoredEntry]
    records: PageRecords
    _label: Callable[[str, Key], str]
    _page_key: Callable[[str, Key], tuple[str, str]]
    _notify: Callable[[dict], None]
    reload: Callable[[], Awaitable[None]]
    """Reread the store, so that the page's keys see what changed in it."""

    async def stored_page(self, namespace: str | None = None, set_name: str | None = None, offset: int = 0,
                          limit: int = 50) -> str:
        """One page of the stored winners, for the panel (``stored_view.py``): this device's by
        default; only that page is read."""
        from .stored_view import stored_page

        page = await stored_page(self.idb, canonical_namespace(self.namespace), self._label, namespace=namespace,
                                 set_name=set_name, offset=int(offset), limit=int(limit))
        return json.dumps(page)

    async def export_pieces(self) -> Any:
        """Every stored namespace (after this page's pending writes) as export text, laid out as
        ``wgtune cache export`` writes it: a JavaScript array of its pieces, read and checked a
        slice at a time (``idb_transfer.py``), for JavaScript to join (``wgtune.exportCache``)."""
        await self.store.flush()
        pieces = js.Array.new()
        await idb_transfer.export_text(self.idb, pieces.push)
        return pieces

    async def export_document(self) -> Any:
        """Every stored namespace as an export document: a JavaScript object, built a slice at a
        time (``wgtune.cache()``)."""
        await self.store.flush()
        return await idb_transfer.export_document(self.idb, idb_transfer.JsExportDocument(js))

    async def import_cache(self, text: Any) -> int:
        """Merge an export into IndexedDB: read and checked a slice at a time, then written in one
        transaction (``idb_transfer.py``: a bad one writes nothing); this page's keys, and the other
        tabs', see imported winners at once. ``text``: a str, or JavaScript text as ``{length,
        slice(start, end)}``, taken a piece at a time."""
        await self.store.flush()
        count = await idb_transfer.import_export(self.idb, text)
        await self._replaced()
        return count

    async def clear_cache(self, device: str | None = None, every: bool = False) -> int:
        """Forget stored winners: this device's (its namespace, and the older texts that read as
        it), or the namespace ``device`` (its text, as :meth:`stored_page` lists them), or with
        ``every`` every namespace's. How many winners went; the keys they served (here and in the
        other tabs) are tuned again."""
        await self.store.flush()
        database = indexeddb.IndexedDBEntries(self.idb)
        if every:
            count = (await indexeddb.IndexedDBDatabase(self.idb).clear()).entries
        elif device is None:
            count = await database.clear_namespaces([self.store.record_key, *self.store.older])
        elif isinstance(namespace_of(str(device)).get("device"), dict):
            count = await database.clear_namespaces([str(device)])
        else:
            raise ConfigError("clearCache: device must be a namespace as storedPage() lists them, "
                              f"got {js_value(device)}")
        await self._replaced()
        return count

    def load_bundle(self, text: str) -> str:
        """Seed the tuner's cache from a bundle's winners for this device (``bundle.py``): its keys
        are Hits at once (a key whose winner this page stored keeps that one; a stale winner is
        tuned as usual). Kept in memory like natively (``TuneCache.seed``), not written to
        IndexedDB. Answers JSON: how many winners were this device's, of how many in how many
        namespaces. A bundle that is not valid raises StoreError naming what is wrong, and
        seeds nothing.
        """
        documents = parse_bundle(str(text))  # over BUNDLE_LIMIT: refused before it is parsed
        mine = entries_for(documents, self.namespace)
        self.seeds = list({entry.slot: entry for entry in [*self.seeds, *mine]}.values())
        self.tuner.cache.seed(mine)
        total = sum(len(entries) for _namespace, entries in documents)
        return json.dumps({"seeded": len(mine), "entries": total, "namespaces": len(documents)})

    async def _replaced(self) -> None:
        """What IndexedDB holds was replaced here: this page's keys and the other tabs' read it again
        (after the writes under way: a winner stored during a clear is read as stored)."""
        await self.store.settled()
        await self.reload()
        self.mark_cleared(elsewhere=False)
        if self.coordinator is not None:
            self.coordinator.announce_replaced()

    def mark_cleared(self, elsewhere: bool) -> None:
        """After the store was read again (a clear or an import, here or in another tab:
        ``elsewhere``): this page's records that said their winner is stored, and whose key the
        store no longer holds, say "cleared" (the record stays: the tune ran, only its winner is
        gone), and the page hears which (a ``cleared`` event a key, its label the records'). A
        write still pending is left to say for itself whether it is stored."""
        heard = set()
        for item in self.records.items:
            record = item["record"]
            if record["stored"] is not True:
                continue
            key = Key.from_json(record["entry"]["key"])
            if self.store.lookup(record["table"], key) is None:
                record["stored"] = "cleared"
                if (record["table"], item["label"]) not in heard:
                    heard.add((record["table"], item["label"]))
                    name = self._page_key(record["table"], key)[0]
                    self._notify({"type": "cleared", "set": name, "table": record["table"], "key": item["label"],
                                  "elsewhere": elsewhere})
