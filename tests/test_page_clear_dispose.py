"""The page's clear per device (``IndexedDBEntries.clear_namespaces``) and its dispose
(``backends/page_dispose.py``), natively on fakes of the browser's IndexedDB and device. The
browser tests (``e2e/test_js_api.py``) run the same through ``wgtune.clearCache`` and
``wgtune.dispose``."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from fake_idb import FakeIdb
from fakes import FakeDevice, call, make_set, make_tuner

from wgtune import PENDING, Args, Key, StoredEntry, WgtuneError
from wgtune.backends.indexeddb import IndexedDBEntries, IndexedDBStore
from wgtune.backends.page_dispose import DISPOSED_MESSAGE, dispose_session
from wgtune.runner import spawn_task
from wgtune.store.format import canonical_namespace
from wgtune.store.record import MemoryRecords

NAMESPACE = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "d", "driver": "", "backend": "webgpu"},
             "tuner": "default"}
OTHER = {**NAMESPACE, "device": {**NAMESPACE["device"], "device": "e"}}
KEY = Key({"n": 4})


def entry(n: int, set_name: str = "fake") -> StoredEntry:
    return StoredEntry(set_name, Key({"n": n}), "sum", 0, "slow", ({"name": "slow", "median": 1.0, "samples": [1.0]},))


def test_clearing_namespaces_forgets_only_theirs_and_counts_their_entries():
    idb = FakeIdb()

    async def scenario():
        database = IndexedDBEntries(idb)
        await database.put(NAMESPACE, [entry(1), entry(2)])
        await database.put(OTHER, [entry(3)])
        mine = canonical_namespace(NAMESPACE)
        return await database.clear_namespaces([mine, mine, '{"device":{}}'])  # repeated, and one not stored

    assert asyncio.run(scenario()) == 2
    assert {slot[0] for slot in idb.entries} == {canonical_namespace(OTHER)}


class Destroyable:
    def __init__(self) -> None:
        self.destroyed = 0

    def destroy(self) -> None:
        self.destroyed += 1


def test_dispose_cancels_the_running_tune_keeps_queued_winners_frees_its_buffers_and_refuses_later_use():
    idb = FakeIdb()
    closed = []
    idb.close = lambda: closed.append("idb")
    tabs = SimpleNamespace(close=lambda: closed.append("tabs"))
    device = FakeDevice(suspend=True)
    device.script("slow", duration=3e-3)
    device.script("fast", duration=1e-3)
    tunables = make_set("slow", "fast")
    buffers = [Destroyable(), Destroyable()]
    uniform = Destroyable()

    async def scenario():
        store = await IndexedDBStore.open(idb, NAMESPACE)
        tuner = make_tuner(device, spawn=spawn_task, store=store, records=MemoryRecords())
        args = Args(tuple(buffers), (4,))
        args.cache[("params", b"x")] = uniform
        session = SimpleNamespace(tuner=tuner, store=store, idb=idb, cases=["demo"], seeds=[],
                                  problems={("fake", "4"): SimpleNamespace(args=args)},
                                  coordinator=SimpleNamespace(tabs=tabs))
        assert tuner.check_tune(tunables, KEY, call(device, [1.0])) is PENDING
        await asyncio.sleep(0)
        assert tuner.running == 1
        store.save(entry(7))  # a winner tuned before the dispose, its write still queued
        cancelled = await dispose_session(session)
        return session, tuner, cancelled, await dispose_session(session)

    session, tuner, cancelled, again = asyncio.run(scenario())
    assert cancelled == 1 and again == 0
    assert tuner.running == 0 and tuner.fastest(tunables, KEY) is not PENDING
    stored = [json.loads(text)["key"] for (_ns, _set, _key), text in idb.entries.items()]
    assert stored == [{"n": 7}]
    assert [b.destroyed for b in buffers] == [1, 1] and uniform.destroyed == 1
    assert session.problems == {} and session.cases == []
    assert closed == ["idb", "tabs"]  # once: the second dispose closes nothing again
    for use in (lambda: session.tuner.check_tune(tunables, KEY, None), lambda: session.store.flush(),
                lambda: session.idb.namespaceCounts()):
        with pytest.raises(WgtuneError, match="wgtune was disposed"):
            use()
    assert DISPOSED_MESSAGE.startswith("wgtune was disposed")
