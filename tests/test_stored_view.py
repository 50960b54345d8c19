"""The stored-winners panel's pages (backends/stored_view.py) over the fake IndexedDB helpers:
one device's entries a page at a time, its sets, labels, and only the page read."""

from __future__ import annotations

import asyncio

import pytest
from fake_idb import FakeIdb

from wgtune import DeviceIdentity, Key, StoreError
from wgtune.backends.indexeddb import IndexedDBEntries
from wgtune.backends.stored_view import MAX_PAGE, stored_page
from wgtune.store.format import StoredEntry, canonical_namespace, namespace_for

HERE = namespace_for(DeviceIdentity("google", "swiftshader", "", "webgpu"))
THERE = namespace_for(DeviceIdentity("nvidia", "H200", "550", "webgpu"))


def entry(set_name: str, n: int) -> StoredEntry:
    results = ({"name": "a", "index": 0, "median": 1e-3, "samples": [1e-3]},)
    return StoredEntry(set_name, Key({"n": n}), "c0ffee", 0, "a", results)


def label(set_name: str, key: Key) -> str:
    return f"{dict(key)['n']} elements" if set_name == "fma" else str(key)


@pytest.fixture
def idb() -> FakeIdb:
    idb = FakeIdb()
    database = IndexedDBEntries(idb)
    asyncio.run(database.put(HERE, [entry("fma", n) for n in range(120)] + [entry("matmul", n) for n in range(5)]))
    asyncio.run(database.put(THERE, [entry("fma", n) for n in range(3)]))
    return idb


def page(idb, **options) -> dict:
    return asyncio.run(stored_page(idb, canonical_namespace(HERE), label, **options))


def test_a_page_is_this_devices_first_entries_with_every_devices_count_and_its_sets(idb):
    first = page(idb, limit=50)
    assert first["namespace"] == canonical_namespace(HERE)
    assert [(n["fields"]["device"]["device"], n["entries"], n["current"]) for n in first["namespaces"]] == sorted(
        [("swiftshader", 125, True), ("H200", 3, False)], key=lambda row: row[2])
    assert first["sets"] == [{"name": "fma", "entries": 120}, {"name": "matmul", "entries": 5}]
    assert first["total"] == 125 and len(first["entries"]) == 50
    assert first["entries"][0]["label"] == "0 elements" and first["entries"][0]["winner_name"] == "a"
    assert idb.calls[-3:] == ["namespaceCounts", "setCounts", "entryPage"]  # no whole-store read


def test_pages_move_on_filter_by_set_and_by_device(idb):
    last = page(idb, offset=100, limit=50)
    assert len(last["entries"]) == 25 and last["offset"] == 100
    matmul = page(idb, set_name="matmul")
    assert matmul["set"] == "matmul" and matmul["total"] == 5 and {e["table"] for e in matmul["entries"]} == {"matmul"}
    there = page(idb, namespace=canonical_namespace(THERE))
    assert there["total"] == 3 and there["sets"] == [{"name": "fma", "entries": 3}]
    unknown = page(idb, namespace="nobody", set_name="nothing")  # gone meanwhile: this device, every set
    assert unknown["namespace"] == canonical_namespace(HERE) and unknown["set"] is None


def test_an_empty_store_and_bad_bounds(idb):
    assert page(FakeIdb())["namespaces"] == [] and page(FakeIdb())["entries"] == []
    for bad in ({"offset": -1}, {"limit": 0}, {"limit": MAX_PAGE + 1}, {"offset": True}):
        with pytest.raises(StoreError):
            page(idb, **bad)


def test_a_damaged_record_costs_only_itself(idb):
    slot = next(slot for slot in idb.entries if slot[1] == "matmul")
    idb.entries[slot] = "{not json"
    matmul = page(idb, set_name="matmul")
    assert len(matmul["entries"]) == 4 and matmul["damaged"] == 1
