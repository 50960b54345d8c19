"""The IndexedDB store's logic, natively, on a dict that behaves like web/idb.js's helpers.

The JS helpers only move text in and out of IndexedDB; everything that decides (merging, order
of writes, damaged documents, export and import) is Python (the core's document store and this
adapter) and tested without a browser. The browser tests (e2e/) run the same code against real
IndexedDB.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from wgtune import Key, StoredEntry, StoreError
from wgtune.backends import file_store, indexeddb
from wgtune.backends.file_store import FileStore
from wgtune.documents import DocumentStore
from wgtune.runner import run_inline
from wgtune.store import canonical_namespace, encode_document

NAMESPACE = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "d", "driver": "", "backend": "webgpu"},
             "tuner": "default"}


class FakeIdb:
    """web/idb.js's helpers on a dict; each call yields to the loop, as a promise would."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.calls: list[str] = []
        self.fail_puts = False

    async def get(self, key):
        await asyncio.sleep(0)
        self.calls.append("get")
        return self.data.get(key)

    async def put(self, key, text):
        await asyncio.sleep(0)
        if self.fail_puts:
            raise RuntimeError("QuotaExceededError")
        self.calls.append("put")
        self.data[key] = text

    async def remove(self, key):
        await asyncio.sleep(0)
        self.calls.append("remove")
        self.data.pop(key, None)

    async def entries(self):
        return [[key, text] for key, text in self.data.items()]


def entry(n: int, winner: int = 1) -> StoredEntry:
    return StoredEntry("matmul", Key({"n": n}), "sum", winner, f"k{winner}",
                       tuple({"name": f"k{i}", "median": 1.0, "samples": [1.0]} for i in range(winner + 1)))


def run(coro):
    return asyncio.run(coro)


def test_a_save_is_visible_at_once_and_in_indexeddb_after_flush():
    idb = FakeIdb()

    async def scenario():
        store = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        store.save(entry(1))
        assert store.load() == [entry(1)]  # memory first: the tuner's next check sees it
        await store.flush()
        reopened = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        return reopened.load()

    assert run(scenario()) == [entry(1)]
    document = json.loads(idb.data[canonical_namespace(NAMESPACE)])
    assert document["format"] == "wgtune.cache/1" and document["tuner"] == "default"


def test_saves_in_a_burst_are_written_in_order_and_none_is_lost():
    idb = FakeIdb()

    async def scenario():
        store = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        for n in range(5):
            store.save(entry(n, winner=0))
        store.save(entry(2, winner=3))  # a later save of one slot wins
        await store.flush()
        return (await indexeddb.IndexedDBStore.open(idb, NAMESPACE)).load()

    loaded = {e.key.as_dict()["n"]: e.winner for e in run(scenario())}
    assert loaded == {0: 0, 1: 0, 2: 3, 3: 0, 4: 0}
    assert idb.calls.count("put") < 6  # batched by the single writer, not one write per save


def test_a_write_merges_with_what_another_tab_stored_meanwhile():
    idb = FakeIdb()

    async def scenario():
        mine = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        other_tab = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        other_tab.save(entry(7))
        await other_tab.flush()
        mine.save(entry(8))
        await mine.flush()
        return (await indexeddb.IndexedDBStore.open(idb, NAMESPACE)).load()

    assert sorted(e.key.as_dict()["n"] for e in run(scenario())) == [7, 8]


def test_clear_forgets_the_namespace_and_a_later_save_starts_afresh():
    idb = FakeIdb()

    async def scenario():
        store = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        store.save(entry(1))
        await store.flush()
        store.clear()
        store.save(entry(2))
        await store.flush()
        return (await indexeddb.IndexedDBStore.open(idb, NAMESPACE)).load()

    assert run(scenario()) == [entry(2)]


def test_a_damaged_document_reads_as_empty_and_one_damaged_entry_costs_only_itself(caplog):
    idb = FakeIdb()
    key = canonical_namespace(NAMESPACE)

    async def scenario():
        idb.data[key] = "{not json"
        empty = (await indexeddb.IndexedDBStore.open(idb, NAMESPACE)).load()
        document = encode_document(NAMESPACE, [entry(1), entry(2)])
        document["entries"][0]["winner"] = -4
        idb.data[key] = json.dumps(document)
        return empty, (await indexeddb.IndexedDBStore.open(idb, NAMESPACE)).load()

    empty, partial = run(scenario())
    assert empty == [] and partial == [entry(2)]
    assert "damaged" in caplog.text


def test_a_failed_background_write_keeps_the_winner_in_memory_and_flush_raises_it():
    idb = FakeIdb()
    idb.fail_puts = True

    async def scenario():
        store = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        store.save(entry(1))
        with pytest.raises(RuntimeError, match="Quota"):
            await store.flush()
        return store.load()

    assert run(scenario()) == [entry(1)]


def test_export_from_indexeddb_imports_into_the_file_store_and_the_reverse(tmp_path):
    idb = FakeIdb()
    native = {**NAMESPACE, "device": {"vendor": "mesa", "device": "llvmpipe", "driver": "x", "backend": "vulkan"}}
    FileStore(tmp_path, native).save(entry(3))

    async def scenario():
        store = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        store.save(entry(1))
        await store.flush()
        native_export = run_inline(file_store.document_store(tmp_path).export())
        assert await indexeddb.document_store(idb).import_document(native_export) == 1
        return await indexeddb.document_store(idb).export()

    exported = run(scenario())
    assert [len(doc["entries"]) for doc in exported["namespaces"]] == [1, 1]
    assert run_inline(file_store.document_store(tmp_path / "back").import_document(exported)) == 2
    assert FileStore(tmp_path / "back", NAMESPACE).load() == [entry(1)]
    assert FileStore(tmp_path / "back", native).load() == [entry(3)]


def test_a_bad_import_is_refused_whole_and_changes_nothing():
    idb = FakeIdb()
    good = encode_document(NAMESPACE, [entry(1)])
    bad = {"format": "wgtune.export/1", "namespaces": [good, {"format": "wgtune.cache/1", "entries": [{}]}]}

    with pytest.raises(StoreError, match="lacks the field"):
        run(indexeddb.document_store(idb).import_document(bad))
    assert idb.data == {}
    with pytest.raises(StoreError, match="not JSON"):
        DocumentStore.check_import("[1, 2")
    with pytest.raises(StoreError, match="not a wgtune export"):
        DocumentStore.check_import('{"format": "something else"}')


def test_clear_all_forgets_every_namespace():
    idb = FakeIdb()
    idb.data = {"a": "{}", "b": "{}"}
    assert run(indexeddb.document_store(idb).clear_all()) == 2
    assert idb.data == {}


def test_a_save_is_pending_until_its_background_write_ends_and_the_listener_hears_how():
    async def scenario():
        idb = FakeIdb()
        store = await indexeddb.IndexedDBStore.open(idb, NAMESPACE)
        heard: list = []
        store.on_written = lambda entries, error: heard.append(([e.key for e in entries], error))
        assert store.save(entry(1)) == "pending"
        assert heard == [] and "put" not in idb.calls  # nothing written yet: the record must not say stored
        await store.flush()
        assert heard == [([Key({"n": 1})], None)]
        idb.fail_puts = True
        store.save(entry(2))
        with pytest.raises(RuntimeError, match="QuotaExceededError"):
            await store.flush()
        assert heard[1][0] == [Key({"n": 2})] and "QuotaExceededError" in str(heard[1][1])

    asyncio.run(scenario())
