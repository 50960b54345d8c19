"""The IndexedDB store's logic, natively, on dicts that behave like web/idb.js's helpers.

The JS helpers only move text in and out of IndexedDB, one transaction a call; everything that
decides (one record per entry, order of writes, damaged records, export, import, the migration of
version 1's documents) is Python and tested without a browser. The browser tests (e2e/) run the
same code against real IndexedDB.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from fake_idb import FakeIdb

from wgtune import Key, StoredEntry, StoreError
from wgtune.backends import file_store
from wgtune.backends.file_store import FileStore
from wgtune.backends.indexeddb import LOAD_SLICE, IndexedDBEntries, IndexedDBStore
from wgtune.runner import run_inline
from wgtune.store.format import canonical_namespace, document_text, encode_document, encode_export

NAMESPACE = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "d", "driver": "", "backend": "webgpu"},
             "tuner": "default"}
OTHER = {**NAMESPACE, "tuner": "other"}
NS = canonical_namespace(NAMESPACE)


def entry(n: int, winner: int = 1, set_name: str = "matmul") -> StoredEntry:
    return StoredEntry(set_name, Key({"n": n}), "sum", winner, f"k{winner}",
                       tuple({"name": f"k{i}", "median": 1.0, "samples": [1.0]} for i in range(winner + 1)))


def numbers(entries) -> list[int]:
    return sorted(e.key.as_dict()["n"] for e in entries)


def run(coro):
    return asyncio.run(coro)


async def reopened(idb, namespace=NAMESPACE) -> list[StoredEntry]:
    return (await IndexedDBStore.open(idb, namespace)).load()


def test_each_entry_is_one_record_keyed_by_namespace_set_and_key_holding_the_entrys_json():
    idb = FakeIdb()

    async def scenario():
        store = await IndexedDBStore.open(idb, NAMESPACE)
        store.save(entry(1))
        store.save(entry(2, set_name="fma"))
        assert store.load() == [entry(1), entry(2, set_name="fma")]  # memory first: the next check sees it
        await store.flush()
        return await reopened(idb)

    assert sorted(run(scenario()), key=lambda e: e.set_name) == [entry(2, set_name="fma"), entry(1)]
    assert set(idb.entries) == {(NS, "matmul", '{"n":1}'), (NS, "fma", '{"n":2}')}
    assert json.loads(idb.entries[(NS, "matmul", '{"n":1}')]) == entry(1).to_json()


def test_saves_in_a_burst_are_written_in_order_in_few_transactions_and_none_is_lost():
    idb = FakeIdb()

    async def scenario():
        store = await IndexedDBStore.open(idb, NAMESPACE)
        for n in range(5):
            store.save(entry(n, winner=0))
        store.save(entry(2, winner=3))  # a later save of one slot wins
        await store.flush()
        return await reopened(idb)

    assert {e.key.as_dict()["n"]: e.winner for e in run(scenario())} == {0: 0, 1: 0, 2: 3, 3: 0, 4: 0}
    assert 1 <= idb.calls.count("putEntries") < 6


def test_two_tabs_saving_at_once_keep_each_others_winners():
    idb = FakeIdb()

    async def scenario():
        mine, other_tab = await IndexedDBStore.open(idb, NAMESPACE), await IndexedDBStore.open(idb, NAMESPACE)
        for n in range(20):
            (mine if n % 2 else other_tab).save(entry(n))
        await asyncio.gather(mine.flush(), other_tab.flush())
        return await reopened(idb)

    assert numbers(run(scenario())) == list(range(20))


def test_clear_forgets_one_namespace_and_a_later_save_starts_afresh():
    idb = FakeIdb()

    async def scenario():
        store, other = await IndexedDBStore.open(idb, NAMESPACE), await IndexedDBStore.open(idb, OTHER)
        store.save(entry(1))
        other.save(entry(9))
        await asyncio.gather(store.flush(), other.flush())
        store.clear()
        store.save(entry(2))
        await store.flush()
        return await reopened(idb), await reopened(idb, OTHER)

    assert run(scenario()) == ([entry(2)], [entry(9)])


def test_a_damaged_record_costs_only_itself_and_the_next_save_of_its_key_replaces_it(caplog):
    idb = FakeIdb()
    idb.entries[(NS, "matmul", '{"n":1}')] = "{not json"
    idb.entries[(NS, "matmul", '{"n":2}')] = json.dumps({**entry(2).to_json(), "winner": -4})
    idb.entries[(NS, "matmul", '{"n":5}')] = json.dumps(entry(3).to_json())  # another key's entry
    idb.entries[(NS, "matmul", '{"n":3}')] = json.dumps(entry(3).to_json())

    async def scenario():
        store = await IndexedDBStore.open(idb, NAMESPACE)
        loaded = store.load()
        assert await store.read("matmul", Key({"n": 1})) is None
        store.save(entry(1))
        await store.flush()
        return loaded, await reopened(idb)

    loaded, after = run(scenario())
    assert loaded == [entry(3)] and numbers(after) == [1, 3]
    assert "skipped 3 damaged entries" in caplog.text and "damaged stored winner of matmul" in caplog.text


def test_read_gives_one_keys_record_as_another_tab_just_wrote_it():
    idb = FakeIdb()

    async def scenario():
        mine, other_tab = await IndexedDBStore.open(idb, NAMESPACE), await IndexedDBStore.open(idb, NAMESPACE)
        other_tab.save(entry(7, winner=2))
        await other_tab.flush()
        assert mine.stored("matmul", Key({"n": 7})) is None
        calls = len(idb.calls)
        found = await mine.read("matmul", Key({"n": 7}))
        assert idb.calls[calls:] == ["entry"]  # one record, not the namespace
        return found, mine.stored("matmul", Key({"n": 7})), await mine.read("matmul", Key({"n": 8}))

    assert run(scenario()) == (entry(7, winner=2), entry(7, winner=2), None)


def test_a_failed_background_write_keeps_the_winner_in_memory_and_flush_raises_it():
    idb = FakeIdb()
    idb.fail_puts = True

    async def scenario():
        store = await IndexedDBStore.open(idb, NAMESPACE)
        store.save(entry(1))
        await store.settled()  # waits, raises nothing: flush reports it
        with pytest.raises(RuntimeError, match="Quota"):
            await store.flush()
        return store.load()

    assert run(scenario()) == [entry(1)]
    assert idb.entries == {}


def test_a_save_is_pending_until_its_background_write_ends_and_the_listener_hears_how():
    async def scenario():
        idb = FakeIdb()
        store = await IndexedDBStore.open(idb, NAMESPACE)
        heard: list = []
        store.on_written = lambda entries, error: heard.append(([e.key for e in entries], error))
        assert store.save(entry(1)) == "pending"
        assert heard == [] and idb.entries == {}  # nothing written yet: the record must not say stored
        await store.flush()
        assert heard == [([Key({"n": 1})], None)]
        idb.fail_puts = True
        store.save(entry(2))
        with pytest.raises(RuntimeError, match="QuotaExceededError"):
            await store.flush()
        assert heard[1][0] == [Key({"n": 2})] and "QuotaExceededError" in str(heard[1][1])

    run(scenario())


# -- export, import, clear ------------------------------------------------------------------------


def test_export_from_indexeddb_imports_into_the_file_store_and_the_reverse(tmp_path):
    idb = FakeIdb()
    native = {**NAMESPACE, "device": {"vendor": "mesa", "device": "llvmpipe", "driver": "x", "backend": "vulkan"}}
    FileStore(tmp_path, native).save(entry(3))

    async def scenario():
        store = await IndexedDBStore.open(idb, NAMESPACE)
        store.save(entry(1))
        await store.flush()
        native_export = run_inline(file_store.document_store(tmp_path).export())
        assert await IndexedDBEntries(idb).import_document(native_export) == 1
        return await IndexedDBEntries(idb).export()

    exported = run(scenario())
    assert exported["format"] == "wgtune.export/1"
    assert [len(doc["entries"]) for doc in exported["namespaces"]] == [1, 1]
    assert run_inline(file_store.document_store(tmp_path / "back").import_document(exported)) == 2
    assert FileStore(tmp_path / "back", NAMESPACE).load() == [entry(1)]
    assert FileStore(tmp_path / "back", native).load() == [entry(3)]


def test_an_import_is_one_transaction_and_two_at_once_into_a_namespace_of_2000_keep_all_60():
    idb = FakeIdb()
    database = IndexedDBEntries(idb)

    async def scenario():
        await database.import_document(encode_document(NAMESPACE, [entry(n) for n in range(2000)]))
        first = encode_export([encode_document(NAMESPACE, [entry(n) for n in range(2000, 2030)])])
        second = encode_export([encode_document(NAMESPACE, [entry(n) for n in range(2030, 2060)])])
        calls = len(idb.calls)
        counts = await asyncio.gather(database.import_document(first), database.import_document(second))
        assert idb.calls[calls:] == ["putEntries", "putEntries"]
        return counts, await database.load(NAMESPACE)

    counts, loaded = run(scenario())
    assert counts == [30, 30] and numbers(loaded) == list(range(2060))


def test_an_imported_entry_replaces_the_stored_one_of_its_key_and_keeps_the_others():
    idb = FakeIdb()

    async def scenario():
        database = IndexedDBEntries(idb)
        await database.put(NAMESPACE, [entry(1, winner=0), entry(2, winner=0)])
        await database.import_document(encode_document(NAMESPACE, [entry(2, winner=3)]))
        return {e.key.as_dict()["n"]: e.winner for e in await database.load(NAMESPACE)}

    assert run(scenario()) == {1: 0, 2: 3}


def test_a_bad_import_is_refused_whole_and_changes_nothing():
    idb = FakeIdb()
    good = encode_document(NAMESPACE, [entry(1)])
    bad = {"format": "wgtune.export/1", "namespaces": [good, {"format": "wgtune.cache/1", "entries": [{}]}]}

    with pytest.raises(StoreError, match="lacks the field"):
        run(IndexedDBEntries(idb).import_document(bad))
    assert idb.entries == {} and "putEntries" not in idb.calls
    with pytest.raises(StoreError, match="not JSON"):
        IndexedDBEntries.check_import("[1, 2")
    with pytest.raises(StoreError, match="not a wgtune export"):
        IndexedDBEntries.check_import('{"format": "something else"}')


def test_export_leaves_out_damaged_records_and_says_so(caplog):
    idb = FakeIdb()
    idb.entries[(NS, "matmul", '{"n":1}')] = json.dumps(entry(1).to_json())
    idb.entries[(NS, "matmul", '{"n":2}')] = "{not json"
    idb.entries[("not a namespace", "matmul", '{"n":3}')] = json.dumps(entry(3).to_json())
    exported = run(IndexedDBEntries(idb).export())
    assert [[e["key"] for e in doc["entries"]] for doc in exported["namespaces"]] == [[{"n": 1}]]
    assert "not exporting 2 damaged record(s)" in caplog.text


def test_clear_all_forgets_every_namespace_and_counts_them():
    idb = FakeIdb()

    async def scenario():
        database = IndexedDBEntries(idb)
        await database.put(NAMESPACE, [entry(1), entry(2)])
        await database.put(OTHER, [entry(3)])
        idb.documents["old"] = "{}"
        return await database.clear_all()

    assert run(scenario()) == 3
    assert idb.entries == {} and idb.documents == {}


# -- version 1's documents ------------------------------------------------------------------------


def test_version_1_documents_move_into_records_keeping_newer_winners_and_nothing_is_lost(caplog):
    idb = FakeIdb()
    idb.documents[NS] = document_text(encode_document(NAMESPACE, [entry(1, winner=0), entry(2, winner=0)]))
    idb.documents[canonical_namespace(OTHER)] = document_text(encode_document(OTHER, [entry(5)]))
    idb.entries[(NS, "matmul", '{"n":2}')] = json.dumps(entry(2, winner=3).to_json())  # a newer winner
    damaged = encode_document(NAMESPACE | {"tuner": "damaged"}, [entry(7), entry(8)])
    damaged["entries"][1]["winner"] = -1
    idb.documents["damaged entries"] = json.dumps(damaged)
    idb.documents["not json"] = "{nope"

    async def scenario():
        database = IndexedDBEntries(idb)
        moved = await database.migrate()
        again = await database.migrate()
        return (moved, again, await database.load(NAMESPACE), await database.load(OTHER),
                await database.load(NAMESPACE | {"tuner": "damaged"}))

    moved, again, mine, other, partly = run(scenario())
    assert moved == 3  # n=1, n=5 and the good n=7; n=2 was stored already
    assert again == 0  # the damaged documents stay, but add nothing twice
    assert {e.key.as_dict()["n"]: e.winner for e in mine} == {1: 0, 2: 3}
    assert other == [entry(5)] and partly == [entry(7)]
    assert set(idb.documents) == {"damaged entries", "not json"}  # kept for a post-mortem
    assert "kept the damaged cache document not json" in caplog.text
    assert "kept the cache document damaged entries" in caplog.text


def test_a_large_namespace_is_read_in_slices_and_every_entry_comes_back():
    idb = FakeIdb()
    namespace = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "d", "driver": "", "backend": "webgpu"},
                 "tuner": "default"}
    other = {**namespace, "tuner": "other"}
    database = IndexedDBEntries(idb)
    results = ({"name": "a", "index": 0, "median": 1e-3, "samples": [1e-3]},)
    count = 2 * LOAD_SLICE + 7
    asyncio.run(database.put(namespace, [StoredEntry("s", Key({"n": n}), "c0ffee", 0, "a", results)
                                         for n in range(count)]))
    asyncio.run(database.put(other, [StoredEntry("s", Key({"n": 0}), "c0ffee", 0, "a", results)]))
    idb.calls.clear()
    loaded = asyncio.run(database.load(namespace))
    assert sorted(dict(entry.key)["n"] for entry in loaded) == list(range(count))  # once each, no other's
    assert idb.calls == ["namespaceSlice"] * 3
