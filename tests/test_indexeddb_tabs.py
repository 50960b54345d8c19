"""Tabs that cooperate (backends/tabs.py), natively: tuners on fake devices, each with its own
IndexedDB store over one fake database and its own TabCoordinator over one fake browser's locks
and channel. The e2e test (e2e/test_tabs.py) runs the same in two Chromium tabs.
"""

from __future__ import annotations

import asyncio
import json

from fake_idb import FakeBrowser, FakeIdb
from fakes import FakeDevice, call, make_set, make_tuner, settle

from wgtune import PENDING, Hit, Key, MemoryRecords, StoredEntry
from wgtune.backends.indexeddb import IndexedDBStore
from wgtune.backends.tabs import TabCoordinator
from wgtune.coordinator import WinnerFromElsewhere
from wgtune.runner import spawn_task

NAMESPACE = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "d", "driver": "", "backend": "webgpu"},
             "tuner": "default"}
KEY = Key({"n": 4})


class Tab:
    """One tab: a device, a store, a coordinator, a tuner; announcements switch its keys."""

    def __init__(self, browser: FakeBrowser, idb: FakeIdb, store: IndexedDBStore) -> None:
        self.device = FakeDevice(suspend=True)
        self.device.script("slow", duration=3e-3)
        self.device.script("fast", duration=1e-3)
        self.tabs = browser.tab()
        self.coordinator = TabCoordinator(self.tabs, store)
        self.store = store
        self.events: list = []
        self.tuner = make_tuner(self.device, spawn=spawn_task, store=store, records=MemoryRecords(),
                                coordinator=self.coordinator, observer=self.events.append)
        store.on_written = lambda entries, error: error is None and self.coordinator.announce_stored(entries)
        self.rereads = 0
        self.coordinator.listen(self.tuner.take_announced, self.reread)

    async def reread(self) -> None:
        self.rereads += 1

    @classmethod
    async def open(cls, browser: FakeBrowser, idb: FakeIdb) -> Tab:
        return cls(browser, idb, await IndexedDBStore.open(idb, NAMESPACE))


def test_the_same_key_asked_in_two_tabs_at_once_is_tuned_once_and_the_lock_is_let_go():
    browser, idb = FakeBrowser(), FakeIdb()
    tunables = make_set("slow", "fast")

    async def main():
        first, second = await Tab.open(browser, idb), await Tab.open(browser, idb)
        assert first.tuner.check_tune(tunables, KEY, call(first.device, [1.0])) is PENDING
        assert second.tuner.check_tune(tunables, KEY, call(second.device, [1.0])) is PENDING
        assert await settle(first.tuner, tunables, KEY) == Hit(1)
        assert await settle(second.tuner, tunables, KEY) == Hit(1)
        return first, second

    first, second = asyncio.run(main())
    assert first.device.profile_count > 0 and second.device.profile_count == 0
    assert len(first.tuner.records.records) == 1 and second.tuner.records.records == []
    assert [(type(e), e.announced) for e in second.events] == [(WinnerFromElsewhere, False)]
    assert browser.held == []  # every lock released


def test_the_lock_is_let_go_only_once_the_winner_is_in_indexeddb():
    browser, idb = FakeBrowser(), FakeIdb()
    tunables = make_set("slow", "fast")
    seen_when_granted = []

    async def main():
        first, second = await Tab.open(browser, idb), await Tab.open(browser, idb)
        first.tuner.check_tune(tunables, KEY, call(first.device, [1.0]))
        await asyncio.sleep(0)
        holding = asyncio.ensure_future(second.tabs.hold(first.coordinator.lock_name("fake", KEY)))
        release = await holding
        seen_when_granted.append(dict(idb.entries))
        release()

    asyncio.run(main())
    [entries] = seen_when_granted
    assert len(entries) == 1 and json.loads(next(iter(entries.values())))["winner"] == 1


def test_a_key_tuned_in_one_tab_becomes_a_hit_in_the_other_without_a_reload_or_a_tune():
    browser, idb = FakeBrowser(), FakeIdb()
    tunables = make_set("slow", "fast")

    async def main():
        first, second = await Tab.open(browser, idb), await Tab.open(browser, idb)
        second.tuner.fastest(tunables, KEY)  # the second tab uses the set; the key is a Miss there
        await first.tuner.tune_async(tunables, call(first.device, [1.0]))
        for _ in range(100):
            if second.tuner.fastest(tunables, KEY) == Hit(1):
                break
            await asyncio.sleep(0)
        return second

    second = asyncio.run(main())
    assert second.tuner.fastest(tunables, KEY) == Hit(1) and second.device.profile_count == 0
    assert [(type(e), e.announced) for e in second.events] == [(WinnerFromElsewhere, True)]


def test_announcements_of_another_namespace_or_malformed_ones_change_nothing(caplog):
    browser, idb = FakeBrowser(), FakeIdb()
    tunables = make_set("slow", "fast")

    async def main():
        tab = await Tab.open(browser, idb)
        tab.tuner.fastest(tunables, KEY)
        entry = StoredEntry("fake", KEY, tunables.checksum, 1, "fast")
        await tab.store.database.put(NAMESPACE | {"tuner": "other"}, [entry])
        other = json.dumps({"kind": "stored", "namespace": json.dumps(NAMESPACE | {"tuner": "other"}),
                            "slots": [["fake", KEY.to_json()]]})
        for text in (other, "{nope", json.dumps({"kind": "stored"}), json.dumps({"kind": "replaced"})):
            await tab.coordinator.heard(text, tab.tuner.take_announced, tab.reread)
        return tab

    tab = asyncio.run(main())
    assert tab.tuner.fastest(tunables, KEY) != Hit(1) and tab.events == []
    assert tab.rereads == 1  # "replaced": the tab reads its store again
    assert caplog.text.count("ignoring another tab's announcement") == 2


def test_a_wait_cancelled_before_the_lock_is_granted_lets_it_go_once_granted():
    browser, idb = FakeBrowser(), FakeIdb()

    async def main():
        tab = await Tab.open(browser, idb)
        name = tab.coordinator.lock_name("fake", KEY)
        release = await browser.tab().hold(name)  # another tab holds the key
        waiting = asyncio.ensure_future(tab.coordinator.acquire("fake", KEY))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        release()
        for _ in range(10):
            await asyncio.sleep(0)
        return name

    asyncio.run(main())
    assert browser.held == []


def test_a_store_read_anew_while_a_key_is_held_keeps_the_lock_until_the_first_stores_write_commits():
    async def scenario():
        browser, idb = FakeBrowser(), FakeIdb()
        first = await IndexedDBStore.open(idb, NAMESPACE)
        coordinator = TabCoordinator(browser.tab(), first)
        assert await coordinator.acquire("s", KEY) is None
        entry = StoredEntry("s", KEY, "c0ffee", 0, "a", ({"name": "a", "index": 0, "median": 1e-3,
                                                           "samples": [1e-3]},))
        first.save(entry)  # written in the background
        coordinator.store = await IndexedDBStore.open(idb, NAMESPACE)  # another tab's import: read anew
        name = coordinator.lock_name("s", KEY)
        await coordinator.release("s", KEY)
        # The lock went only after the write through the first store committed: the next tab finds it.
        assert name not in browser.held
        assert any(slot[1] == "s" for slot in idb.entries)

    asyncio.run(scenario())
