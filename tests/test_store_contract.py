"""One suite over every store: each implementation keeps the store contract (``store/contract.py``).

Every test runs over every :class:`~wgtune.store.contract.Store` there is (SQLite, IndexedDB over
``fake_idb.FakeIdb``, the in-memory one, the old JSON documents) through a small harness per
world that knows how to open a second handle (another process, another tab), wait for a write to
be durable, and damage what is stored the way that world can be damaged. The Database tests run
over every :class:`~wgtune.store.contract.Database`. A store added to wgtune gets a harness here;
a member added to a protocol fails :func:`test_every_store_has_every_member_of_the_store_protocol`
until every store has it.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import threading
from dataclasses import replace

import pytest
from fake_idb import FakeIdb

from wgtune import Key, StoredEntry
from wgtune.backends.cache_transfer import SqliteDatabase
from wgtune.backends.file_store import FileStore, LegacyDocuments
from wgtune.backends.indexeddb import IndexedDBDatabase, IndexedDBStore
from wgtune.backends.sqlite_store import SqliteStore
from wgtune.store.contract import WRITE_PENDING, Cleared, Database, Listing, Store, protocol_members
from wgtune.store.format import MemoryStore, canonical_namespace, document_text, encode_document

LAPTOP = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "laptop", "backend": "vulkan"}, "tuner": "default"}
SERVER = {**LAPTOP, "device": {"vendor": "v", "device": "server", "backend": "metal"}}


def entry(n: int, winner: int = 1, set_name: str = "matmul") -> StoredEntry:
    return StoredEntry(set_name, Key({"n": n}), "sum", winner, f"k{winner}",
                       tuple({"name": f"k{i}", "median": 1.0 + i, "samples": [1.0 + i]} for i in range(winner + 1)))


# -- one harness per world -------------------------------------------------------------------------


class Memory:
    """One process's memory: every handle of a namespace is the same store."""

    damageable = False

    def __init__(self, _tmp_path) -> None:
        self.stores: dict[str, MemoryStore] = {}

    def store(self, namespace: dict) -> Store:
        return self.stores.setdefault(canonical_namespace(namespace), MemoryStore(namespace))

    def save(self, store: Store, stored: StoredEntry) -> None:
        assert store.save(stored) in (None, WRITE_PENDING)

    def clear(self, store: Store) -> None:
        store.clear()

    def database(self) -> Database | None:
        return None


class Sqlite:
    """The cache directory's database; each handle its own connection, as another process has."""

    damageable = True

    def __init__(self, tmp_path) -> None:
        self.directory = tmp_path / "cache"

    def store(self, namespace: dict) -> Store:
        return SqliteStore(self.directory, namespace).open()

    def save(self, store: Store, stored: StoredEntry) -> None:
        assert store.save(stored) is None  # durable when it returns

    def clear(self, store: Store) -> None:
        store.clear()

    def database(self) -> Database:
        return SqliteDatabase(self.directory)

    def _rewrite(self, namespace: dict, stored: StoredEntry, text: str) -> None:
        with sqlite3.connect(self.directory / "wgtune.sqlite3") as connection:
            changed = connection.execute(
                "UPDATE entries SET entry = ? WHERE set_name = ? AND key = ? AND namespace_id = "
                "(SELECT id FROM namespaces WHERE namespace = ?)",
                (text, stored.set_name, stored.key.to_json(), canonical_namespace(namespace))).rowcount
        assert changed == 1

    def damage(self, namespace: dict, stored: StoredEntry) -> None:
        self._rewrite(namespace, stored, '{"table": "matmul", "key": {"n": ')

    def misplace(self, namespace: dict, stored: StoredEntry, other: StoredEntry) -> None:
        self._rewrite(namespace, stored, json.dumps(other.to_json()))


class IndexedDB:
    """IndexedDB over the fake helpers; each handle a tab of its own."""

    damageable = True

    def __init__(self, _tmp_path) -> None:
        self.idb = FakeIdb()

    def store(self, namespace: dict) -> Store:
        return asyncio.run(IndexedDBStore.open(self.idb, namespace))

    def save(self, store: Store, stored: StoredEntry) -> None:
        async def save_and_flush() -> str | None:
            answer = store.save(stored)
            await store.flush()  # durable once flushed
            return answer

        assert asyncio.run(save_and_flush()) == WRITE_PENDING

    def clear(self, store: Store) -> None:
        async def clear_and_flush() -> None:
            store.clear()
            await store.flush()

        asyncio.run(clear_and_flush())

    def database(self) -> Database:
        return IndexedDBDatabase(self.idb)

    def damage(self, namespace: dict, stored: StoredEntry) -> None:
        self.idb.entries[(canonical_namespace(namespace), stored.set_name, stored.key.to_json())] = '{"table": 5'

    def misplace(self, namespace: dict, stored: StoredEntry, other: StoredEntry) -> None:
        slot = (canonical_namespace(namespace), stored.set_name, stored.key.to_json())
        self.idb.entries[slot] = json.dumps(other.to_json())


class Documents:
    """The old JSON documents of a directory (a migration source, still held to the contract)."""

    damageable = True

    def __init__(self, tmp_path) -> None:
        self.directory = tmp_path / "documents"

    def store(self, namespace: dict) -> Store:
        return FileStore(self.directory, namespace)

    def save(self, store: Store, stored: StoredEntry) -> None:
        assert store.save(stored) is None

    def clear(self, store: Store) -> None:
        store.clear()

    def database(self) -> Database:
        return LegacyDocuments(self.directory)

    def damage(self, namespace: dict, stored: StoredEntry) -> None:
        path = FileStore(self.directory, namespace).path
        document = json.loads(path.read_text())
        for raw in document["entries"]:
            if raw["key"] == stored.key.as_dict() and raw["table"] == stored.set_name:
                raw["winner"] = "not a number"
        path.write_text(json.dumps(document))

    misplace = None  # a document's entries name their own slot: nothing to misplace


WORLDS = [Memory, Sqlite, IndexedDB, Documents]


@pytest.fixture(params=WORLDS, ids=lambda world: world.__name__)
def world(request, tmp_path):
    return request.param(tmp_path)


@pytest.fixture(params=[world for world in WORLDS if world is not Memory], ids=lambda world: world.__name__)
def world_with_database(request, tmp_path):
    return request.param(tmp_path)


# The stores that keep bytes, which can be damaged (a memory store holds values), and those whose
# rows are apart from the entry they hold (a document's entries name their own slot).
@pytest.fixture(params=[world for world in WORLDS if world.damageable], ids=lambda world: world.__name__)
def damageable_world(request, tmp_path):
    return request.param(tmp_path)


MISPLACEABLE = [world for world in WORLDS if getattr(world, "misplace", None) is not None]


@pytest.fixture(params=MISPLACEABLE, ids=lambda world: world.__name__)
def misplaceable_world(request, tmp_path):
    return request.param(tmp_path)


def test_the_narrower_suites_still_cover_the_stores_users_have():
    assert {Sqlite, IndexedDB} <= {world for world in WORLDS if world.damageable}
    assert {Sqlite, IndexedDB} <= set(MISPLACEABLE)


def run(coro):
    return asyncio.run(coro)


# -- the members ---------------------------------------------------------------------------------


def test_every_store_has_every_member_of_the_store_protocol(world):
    store = world.store(LAPTOP)
    missing = sorted(name for name in protocol_members(Store) if not hasattr(store, name))
    assert not missing, f"{type(store).__name__} lacks {missing}"
    assert isinstance(store, Store)
    assert isinstance(store.read_by_key, bool) and isinstance(store.where, str) and store.where
    assert store.namespace == LAPTOP


def test_every_database_has_every_member_of_the_database_protocol(world_with_database):
    database = world_with_database.database()
    missing = sorted(name for name in protocol_members(Database) if not hasattr(database, name))
    assert not missing, f"{type(database).__name__} lacks {missing}"
    assert isinstance(database, Database)
    for name in protocol_members(Database) - {"where"}:
        assert asyncio.iscoroutinefunction(getattr(database, name)), f"{type(database).__name__}.{name} is not async"


def test_the_protocols_declare_what_the_tuner_and_the_commands_use():
    assert protocol_members(Store) == {"namespace", "where", "read_by_key", "load", "lookup", "save", "clear",
                                       "count"}
    assert protocol_members(Database) == {"where", "namespaces", "open", "entries", "export_to", "import_from",
                                          "clear"}


# -- one namespace -------------------------------------------------------------------------------


def test_a_saved_entry_reads_back_from_another_handle_by_load_and_by_lookup(world):
    mine = world.store(LAPTOP)
    world.save(mine, entry(1))
    world.save(mine, entry(2, winner=2, set_name="softmax"))
    other = world.store(LAPTOP)
    assert sorted(other.load(), key=lambda e: e.set_name) == [entry(1), entry(2, winner=2, set_name="softmax")]
    assert other.lookup("matmul", Key({"n": 1})) == entry(1)
    assert other.count() == 2


def test_lookup_answers_one_slot_or_nothing_never_another_sets_or_keys_entry(world):
    store = world.store(LAPTOP)
    world.save(store, entry(1))
    again = world.store(LAPTOP)
    assert again.lookup("matmul", Key({"n": 2})) is None
    assert again.lookup("softmax", Key({"n": 1})) is None
    assert world.store(SERVER).lookup("matmul", Key({"n": 1})) is None  # nor another namespace's


def test_a_save_replaces_its_slot_only(world):
    store = world.store(LAPTOP)
    world.save(store, entry(1))
    world.save(store, entry(2))
    world.save(store, entry(1, winner=2))
    assert sorted((e.key.as_dict()["n"], e.winner) for e in world.store(LAPTOP).load()) == [(1, 2), (2, 1)]


def test_two_handles_saving_at_once_keep_each_others_entries(world):
    first, second = world.store(LAPTOP), world.store(LAPTOP)  # both opened before either saves
    world.save(first, entry(1))
    world.save(second, entry(2))
    world.save(first, entry(3))
    assert sorted(e.key.as_dict()["n"] for e in world.store(LAPTOP).load()) == [1, 2, 3]


def test_clear_forgets_one_namespace_and_no_other(world):
    laptop, server = world.store(LAPTOP), world.store(SERVER)
    world.save(laptop, entry(1))
    world.save(server, entry(2))
    world.clear(laptop)
    assert world.store(LAPTOP).load() == [] and world.store(LAPTOP).count() == 0
    assert world.store(SERVER).load() == [entry(2)]
    world.save(laptop, entry(3))
    assert world.store(LAPTOP).load() == [entry(3)]


def test_a_damaged_entry_is_a_miss_not_a_crash_and_costs_only_its_key(damageable_world, caplog):
    world = damageable_world
    store = world.store(LAPTOP)
    world.save(store, entry(1))
    world.save(store, entry(2))
    world.damage(LAPTOP, entry(1))
    assert world.store(LAPTOP).lookup("matmul", Key({"n": 1})) is None
    assert world.store(LAPTOP).load() == [entry(2)]
    assert world.store(LAPTOP).lookup("matmul", Key({"n": 2})) == entry(2)
    assert "damaged" in caplog.text
    again = world.store(LAPTOP)
    world.save(again, entry(1, winner=2))  # its key tuned again: the new winner replaces it
    assert sorted((e.key.as_dict()["n"], e.winner) for e in world.store(LAPTOP).load()) == [(1, 2), (2, 1)]


def test_an_entry_stored_under_another_slot_is_damaged_not_served_for_it(misplaceable_world):
    world = misplaceable_world
    store = world.store(LAPTOP)
    world.save(store, entry(1))
    world.save(store, entry(2))
    world.misplace(LAPTOP, entry(1), entry(2, winner=2))
    assert world.store(LAPTOP).lookup("matmul", Key({"n": 1})) is None
    assert world.store(LAPTOP).lookup("matmul", Key({"n": 2})) == entry(2)


def test_sqlite_saves_from_many_threads_and_handles_all_land(tmp_path):
    world = Sqlite(tmp_path)
    stores = [world.store(LAPTOP) for _ in range(4)]
    threads = [threading.Thread(target=lambda s=s, i=i: [s.save(entry(i * 100 + n)) for n in range(20)])
               for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert world.store(LAPTOP).count() == 80


# -- the whole database --------------------------------------------------------------------------


def test_export_then_import_through_the_database_round_trips_every_namespace(world_with_database, tmp_path):
    world = world_with_database
    world.save(world.store(LAPTOP), entry(1))
    world.save(world.store(LAPTOP), replace(entry(2), checked=True))
    world.save(world.store(SERVER), entry(3, set_name="softmax"))
    out = io.StringIO()
    assert run(world.database().export_to(out)) == (3, 2)
    elsewhere = type(world)(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    assert run(elsewhere.database().import_from(io.BytesIO(out.getvalue().encode()))) == 3
    listing = run(elsewhere.database().entries())
    assert isinstance(listing, Listing) and listing.problems == []
    got = {(canonical_namespace(ns), e.set_name, e.key.as_dict()["n"]): e for ns, e in listing.entries}
    assert got[(canonical_namespace(LAPTOP), "matmul", 2)] == entry(2)  # imported: not checked here
    assert len(got) == 3
    summaries = run(elsewhere.database().namespaces())
    assert sorted(s.entries for s in summaries) == [1, 2]
    assert {canonical_namespace(s.namespace) for s in summaries} == {canonical_namespace(LAPTOP),
                                                                    canonical_namespace(SERVER)}
    opened = run(elsewhere.database().open(LAPTOP))
    assert isinstance(opened, Store) and opened.lookup("matmul", Key({"n": 1})) == entry(1)


def test_a_bad_import_through_the_database_changes_nothing(world_with_database):
    world = world_with_database
    world.save(world.store(LAPTOP), entry(1))
    bad = json.dumps({"format": "wgtune.export/1", "namespaces": [
        json.loads(document_text(encode_document(SERVER, [entry(2)]))), {"format": "nope"}]})
    from wgtune.errors import StoreError

    with pytest.raises(StoreError):
        run(world.database().import_from(io.BytesIO(bad.encode())))
    assert [canonical_namespace(s.namespace) for s in run(world.database().namespaces())] == [
        canonical_namespace(LAPTOP)]


def test_clear_through_the_database_forgets_every_namespace(world_with_database):
    world = world_with_database
    world.save(world.store(LAPTOP), entry(1))
    world.save(world.store(LAPTOP), entry(2))
    world.save(world.store(SERVER), entry(3))
    cleared = run(world.database().clear())
    assert isinstance(cleared, Cleared) and (cleared.namespaces, cleared.entries) == (2, 3)
    assert run(world.database().namespaces()) == []
    assert run(world.database().entries()).entries == []


def test_an_empty_sqlite_cache_is_listed_and_exported_without_creating_a_database(tmp_path):
    database = SqliteDatabase(tmp_path / "nothing")
    out = io.StringIO()
    assert run(database.namespaces()) == [] and run(database.entries()).entries == []
    assert run(database.export_to(out)) == (0, 0)
    assert json.loads(out.getvalue()) == {"format": "wgtune.export/1", "namespaces": []}
    assert tuple(run(database.clear())) == (0, 0, 0)
    assert not (tmp_path / "nothing").exists()


def test_a_tuner_refuses_a_store_that_lacks_members_of_the_contract_naming_them():
    from fakes import FakeDevice

    from wgtune import Config, ConfigError, Tuner

    class HalfAStore:  # an older store of one's own: no lookup, count, where, read_by_key
        namespace: dict = {}

        def load(self):
            return []

        def save(self, entry):
            return None

        def clear(self):
            return None

    lacks = r"HalfAStore is not a wgtune store: it lacks count, lookup, read_by_key, where"
    with pytest.raises(ConfigError, match=lacks):
        Tuner(FakeDevice(), store=HalfAStore(), config=Config())

    class Whole(HalfAStore, Store):  # inheriting the protocol gives the optional members' defaults
        where = "mine"

    tuner = Tuner(FakeDevice(), store=Whole(), config=Config())
    assert tuner.store is not None and tuner.store.read_by_key is False and tuner.store.count() == 0
