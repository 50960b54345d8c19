"""web/idb.js's and web/tabs.js's helpers on plain Python objects, for the browser store's tests.

:class:`FakeIdb` keeps records in dicts; each helper yields to the loop once (as a promise would)
and then acts all at once, as one IndexedDB transaction does. :class:`FakeTabs` are tabs of one
fake browser: Web Locks as asyncio locks shared by name, and a channel that delivers a tab's
announcements to the other tabs, later on the loop, as BroadcastChannel does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

__all__ = ["FakeBrowser", "FakeIdb", "FakeImporter", "FakeTabs"]


class FakeIdb:
    """The helpers of ``openDocuments`` (web/idb.js), by their JS names, over ``entries`` and
    ``documents`` dicts."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str, str], str] = {}
        self.documents: dict[str, str] = {}
        self.calls: list[str] = []
        self.fail_puts = False

    async def _step(self, call: str) -> None:
        await asyncio.sleep(0)
        self.calls.append(call)

    async def entry(self, namespace, set_name, key):
        await self._step("entry")
        return self.entries.get((namespace, set_name, key))

    async def namespaceSlice(self, namespace, after_set, after_key, limit):
        await self._step("namespaceSlice")
        chosen = [[s, k, text] for (n, s, k), text in sorted(self.entries.items())
                  if n == namespace and (after_set is None or (s, k) > (after_set, after_key))]
        return json.dumps(chosen[:limit])

    async def allEntries(self):
        await self._step("allEntries")
        return json.dumps([[*slot, text] for slot, text in sorted(self.entries.items())])

    async def entriesAfter(self, after_namespace, after_set, after_key, limit):
        await self._step("entriesAfter")
        chosen = [[*slot, text] for slot, text in sorted(self.entries.items())
                  if after_namespace is None or slot > (after_namespace, after_set, after_key)]
        return json.dumps(chosen[:limit])

    def importer(self):
        """A large import staged in memory, then written in one transaction (``idb.importer``)."""
        return FakeImporter(self)

    async def putEntries(self, records):
        await self._step("putEntries")
        if self.fail_puts:
            raise RuntimeError("QuotaExceededError")
        for namespace, set_name, key, text in json.loads(records):
            self.entries[(namespace, set_name, key)] = text

    async def namespaceCounts(self):
        await self._step("namespaceCounts")
        counts: dict[str, int] = {}
        for namespace, _set, _key in sorted(self.entries):
            counts[namespace] = counts.get(namespace, 0) + 1
        return json.dumps(list(counts.items()))

    async def setCounts(self, namespace):
        await self._step("setCounts")
        counts: dict[str, int] = {}
        for found, set_name, _key in sorted(self.entries):
            if found == namespace:
                counts[set_name] = counts.get(set_name, 0) + 1
        return json.dumps(list(counts.items()))

    async def entryPage(self, namespace, set_name, offset, limit):
        await self._step("entryPage")
        chosen = [[*slot, text] for slot, text in sorted(self.entries.items())
                  if slot[0] == namespace and (set_name is None or slot[1] == set_name)]
        return json.dumps({"total": len(chosen), "records": chosen[offset:offset + limit]})

    async def clearNamespace(self, namespace):
        await self._step("clearNamespace")
        self.entries = {slot: text for slot, text in self.entries.items() if slot[0] != namespace}
        self.documents.pop(namespace, None)

    async def clearAll(self):
        await self._step("clearAll")
        count = len({slot[0] for slot in self.entries} | set(self.documents))
        self.entries.clear()
        self.documents.clear()
        return count

    async def oldDocuments(self):
        await self._step("oldDocuments")
        return json.dumps(sorted(self.documents.items()))

    async def migrateDocument(self, name, records, keep):
        """As web/idb.js: a slot given twice is one record, the last copy given, added only where
        none was stored before the call (its counts all see the store as it was)."""
        await self._step("migrateDocument")
        distinct = {(namespace, set_name, key): text for namespace, set_name, key, text in json.loads(records)}
        added = 0
        for slot, text in distinct.items():
            if slot not in self.entries:
                self.entries[slot] = text
                added += 1
        if not keep:
            self.documents.pop(name, None)
        return added


class FakeImporter:
    """``idb.importer()``: rows staged by ``add``, written all at once by ``write``."""

    def __init__(self, idb: FakeIdb) -> None:
        self.idb = idb
        self.rows: list[list] = []
        self.adds = 0

    def add(self, text: str) -> None:
        self.adds += 1
        self.rows.extend(json.loads(text))

    async def write(self, namespaces: str) -> int:
        await self.idb._step("importer.write")
        if self.idb.fail_puts:
            raise RuntimeError("QuotaExceededError")
        known = json.loads(namespaces)
        written = 0
        for doc, set_name, key, text in self.rows:
            if str(doc) in known:
                self.idb.entries[(known[str(doc)], set_name, key)] = text
                written += 1
        return written


class FakeBrowser:
    """What the tabs of one browser share: the locks and the channel's listeners."""

    def __init__(self) -> None:
        self.locks: dict[str, asyncio.Lock] = {}
        self.tabs: list[FakeTabs] = []
        self.held: list[str] = []

    def tab(self) -> FakeTabs:
        tab = FakeTabs(self)
        self.tabs.append(tab)
        return tab


class FakeTabs:
    """The helpers of ``openTabs`` (web/tabs.js) for one tab of ``browser``."""

    def __init__(self, browser: FakeBrowser) -> None:
        self.browser = browser
        self.listeners: list[Callable[[str], None]] = []
        self.announced: list[str] = []

    async def hold(self, name: str) -> Callable[[], None]:
        lock = self.browser.locks.setdefault(name, asyncio.Lock())
        await lock.acquire()
        self.browser.held.append(name)

        def release() -> None:
            self.browser.held.remove(name)
            lock.release()

        return release

    def announce(self, text: str) -> None:
        self.announced.append(text)
        loop = asyncio.get_running_loop()
        for tab in self.browser.tabs:
            if tab is not self:
                for listener in tab.listeners:
                    loop.call_soon(listener, text)

    def listen(self, listener: Callable[[str], None]) -> None:
        self.listeners.append(listener)
