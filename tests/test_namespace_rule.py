"""The namespace rule (``core/store/format.py``): winners survive a wgtune patch release and a driver
point update, stores and bundles written with the full versions still answer, another minor
wgtune or driver branch starts afresh, and a bundle's winner must be named as its index says.

The ``core`` tests use the standard library and the fake device only, so they run inside Pyodide
too; the stores' tests (SQLite, IndexedDB on ``fake_idb``) import their backends inside them.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from fakes import FakeDevice, Script, call, make_set, make_tuner

from wgtune import Hit, Key, StoredEntry
from wgtune.gpu.device import DeviceIdentity
from wgtune.store.bounded_json import parse_json
from wgtune.store.bundle import build_bundle, bundle_text, entries_for, read_bundle
from wgtune.store.format import (
    canonical_namespace,
    namespace_for,
    namespace_key,
    namespaces_matching,
    reduced_driver,
    reduced_namespace,
    reduced_version,
)

BUILT = "2026-12-01T02:30:00Z"
N4 = Key({"n": 4})


def old_namespace(identity: DeviceIdentity, wgtune: str = "0.1.0", tuner: str = "default") -> dict:
    """A namespace as wgtune wrote it before the rule: the full wgtune and driver versions."""
    return {"wgtune": wgtune, "device": identity.as_dict(), "tuner": tuner}


def fake_identity(driver: str = "1.0") -> DeviceIdentity:
    return DeviceIdentity("fake", "fake-gpu", driver, "test")  # the fake device's, with any driver


def scripted() -> FakeDevice:
    return FakeDevice({"k0": Script(duration=2e-3), "k1": Script(duration=1e-3)})


def winner(tunables, index: int = 0, name: str | None = None, n: int = 4) -> StoredEntry:
    return StoredEntry(tunables.name, Key({"n": n}), tunables.checksum, index,
                       f"k{index}" if name is None else name)


# -- the rule --------------------------------------------------------------------------------------


@pytest.mark.core
@pytest.mark.parametrize(("reported", "kept"), [
    ("580.95.05", "580"),                                   # NVIDIA (Vulkan's driver description)
    ("580.159.04", "580"),
    ("Mesa 25.0.7", "Mesa 25"),
    ("Mesa 22.3.6 (LLVM 15.0.6)", "Mesa 22 (LLVM 15)"),     # lavapipe
    ("", ""),                                               # Chrome: GPUAdapterInfo.description is empty
    ("D3D11-31.0.15.3623", "D3D11-31"),                     # an ANGLE-style description
    ("550", "550"),
    ("256 bits", "256 bits"),                               # numbers that are no versions stay
])
def test_a_driver_keeps_its_major_version_only(reported, kept):
    assert reduced_driver(reported) == kept
    assert reduced_driver(kept) == kept


@pytest.mark.core
@pytest.mark.parametrize(("version", "line"), [("0.1.0", "0.1"), ("0.1.7", "0.1"), ("0.2.0rc1", "0.2"),
                                               ("1.10.3.dev1", "1.10"), ("0.1", "0.1"), ("dev", "dev")])
def test_a_wgtune_version_keeps_its_major_and_minor(version, line):
    assert reduced_version(version) == line


@pytest.mark.core
def test_a_patch_release_or_a_driver_point_update_keeps_the_namespace_another_branch_does_not():
    here = namespace_for(DeviceIdentity("NVIDIA", "NVIDIA H200", "580.95.05", "Vulkan"))
    assert here["wgtune"] == "0.1" and here["device"]["driver"] == "580"
    assert namespace_for(DeviceIdentity("NVIDIA", "NVIDIA H200", "580.159.04", "Vulkan")) == here
    assert namespace_for(DeviceIdentity("NVIDIA", "NVIDIA H200", "590.12.01", "Vulkan")) != here
    assert namespace_for(DeviceIdentity("NVIDIA", "NVIDIA H100", "580.95.05", "Vulkan")) != here
    full = old_namespace(DeviceIdentity("NVIDIA", "NVIDIA H200", "580.95.05", "Vulkan"), "0.1.7")
    assert reduced_namespace(full) == here and namespace_key(full) == canonical_namespace(here)
    assert namespace_key({**full, "wgtune": "0.2.0"}) != namespace_key(here)


@pytest.mark.core
def test_matching_namespaces_come_own_first_then_newest_release():
    identity = fake_identity()
    mine = namespace_for(identity)
    stored = [canonical_namespace(ns) for ns in (
        old_namespace(fake_identity("1.0.2"), "0.1.0"), old_namespace(fake_identity("1.0.9"), "0.1.3"),
        old_namespace(identity, "0.2.0"), mine, old_namespace(fake_identity("2.0"), "0.1.0"))]
    assert namespaces_matching(mine, stored) == [stored[3], stored[1], stored[0]]


# -- stores written under the full versions --------------------------------------------------------


def test_a_database_written_with_full_version_namespaces_is_read_as_hits(tmp_path):
    from wgtune.backends.sqlite_store import CacheDatabase, SqliteStore

    device, tunables = scripted(), make_set("k0", "k1")
    with CacheDatabase(tmp_path) as database:  # what wgtune 0.1.0 and 0.1.3 stored, on drivers 1.0 and 1.0.4
        database.save(old_namespace(device.identity, "0.1.0"), [winner(tunables, 0)])
        database.save(old_namespace(fake_identity("1.0.4"), "0.1.3"), [winner(tunables, 0, n=8)])
        database.save(old_namespace(device.identity, "0.2.0"), [winner(tunables, 1, n=16)])  # another line
    store = SqliteStore(tmp_path, namespace_for(device.identity))
    assert store.count() == 2
    tuner = make_tuner(device, store=store)
    assert tuner.check_tune(tunables, N4, call(device, [1.0])) == Hit(0)  # k0 is the slower: only the store says so
    assert tuner.check_tune(tunables, Key({"n": 8}), call(device, [1.0], n=8)) == Hit(0)
    assert device.profiles == {}  # nothing measured
    assert {e.key for e in store.load()} == {N4, Key({"n": 8})}


def test_the_stores_own_namespace_comes_first_and_a_clear_forgets_the_old_ones_too(tmp_path):
    from wgtune.backends.sqlite_store import CacheDatabase, SqliteStore

    tunables = make_set("k0", "k1")
    identity = fake_identity()
    with CacheDatabase(tmp_path) as database:
        database.save(old_namespace(identity, "0.1.0"), [winner(tunables, 0)])
        database.save(old_namespace(identity, "0.1.5"), [winner(tunables, 1)])
    store = SqliteStore(tmp_path, namespace_for(identity))
    assert store.lookup(tunables.name, N4).winner == 1  # the newest release's
    store.save(winner(tunables, 0))
    assert store.lookup(tunables.name, N4).winner == 0 and store.count() == 1  # its own, saved under the rule
    assert [e.winner for e in store.load()] == [0]
    other_line = SqliteStore(tmp_path, {**old_namespace(identity, "0.2.0")})
    other_line.save(winner(tunables, 1))
    store.clear()
    assert store.load() == [] and store.lookup(tunables.name, N4) is None
    with CacheDatabase(tmp_path) as database:  # only the namespaces that read as the store's are gone
        assert [summary.namespace["wgtune"] for summary in database.namespaces()] == ["0.2.0"]


def test_an_export_of_full_version_namespaces_imports_and_reads_as_hits(tmp_path):
    from wgtune.backends.cache_transfer import SqliteDatabase
    from wgtune.runner import run_inline
    from wgtune.store.format import encode_document, encode_export

    device, tunables = scripted(), make_set("k0", "k1")
    export = tmp_path / "old.json"
    export.write_text(bundle_text(encode_export([encode_document(old_namespace(device.identity, "0.1.0"),
                                                                 [winner(tunables, 0)])])))
    database = SqliteDatabase(tmp_path / "cache")
    assert run_inline(database.import_from(export)) == 1
    tuner = make_tuner(device, store=run_inline(database.open(namespace_for(device.identity))))
    assert tuner.check_tune(tunables, N4, call(device, [1.0])) == Hit(0)
    assert device.profiles == {}


def test_indexeddb_records_of_full_version_namespaces_read_as_the_stores_own():
    from fake_idb import FakeIdb  # not shipped to the Pyodide run, which runs the core tests only

    from wgtune.backends.indexeddb import IndexedDBEntries, IndexedDBStore

    tunables = make_set("k0", "k1")
    identity = fake_identity()
    idb = FakeIdb()

    async def scenario():
        records = IndexedDBEntries(idb)
        await records.put(old_namespace(identity, "0.1.0"), [winner(tunables, 0), winner(tunables, 0, n=8)])
        await records.put(old_namespace(identity, "0.1.2"), [winner(tunables, 1, n=8)])
        store = await IndexedDBStore.open(idb, namespace_for(identity))
        assert {(e.key, e.winner) for e in store.load()} == {(N4, 0), (Key({"n": 8}), 1)}  # newest first
        assert (await store.read(tunables.name, N4)).winner == 0  # looked for under the old text too
        store.clear()
        await store.flush()
        return store

    store = asyncio.run(scenario())
    assert store.load() == [] and idb.entries == {}


# -- bundles ---------------------------------------------------------------------------------------


def bundle_of(namespace: dict, entries: list[StoredEntry], wgtune: str) -> list[tuple[dict, list[StoredEntry]]]:
    """A bundle another wgtune wrote (``wgtune`` its version, the namespace as it wrote it), read back."""
    bundle = build_bundle([], built=BUILT)
    bundle["wgtune"] = wgtune
    bundle["namespaces"] = [{**namespace, "entries": [e.to_json() for e in entries]}]
    return read_bundle(parse_json(bundle_text(bundle)))


def seeded_tune(namespace: dict, wgtune: str = "0.1.7", **winner_fields):
    device, tunables = scripted(), make_set("k0", "k1")
    tuner = make_tuner(device)
    tuner.cache.seed(entries_for(bundle_of(namespace, [winner(tunables, **winner_fields)], wgtune),
                                 namespace_for(device.identity)))
    return tuner.check_tune(tunables, N4, call(device, [1.0])), device


@pytest.mark.core
def test_a_bundle_of_a_newer_wgtune_patch_release_seeds():
    state, device = seeded_tune(old_namespace(fake_identity(), "0.1.7"))
    assert state == Hit(0) and device.profiles == {}
    state, device = seeded_tune(namespace_for(fake_identity()))  # one written under the rule: "0.1"
    assert state == Hit(0) and device.profiles == {}


@pytest.mark.core
def test_a_bundle_of_another_driver_point_release_of_the_same_gpu_seeds():
    state, device = seeded_tune(old_namespace(fake_identity("1.0.12"), "0.1.0"), wgtune="0.1.0")
    assert state == Hit(0) and device.profiles == {}


@pytest.mark.core
@pytest.mark.parametrize("other", [{"wgtune": "0.2.0"}, {"wgtune": "1.1.0"},
                                   {"device": fake_identity("2.0").as_dict()}])
def test_a_bundle_of_another_minor_or_major_wgtune_or_driver_branch_does_not_seed(other):
    state, device = seeded_tune({**old_namespace(fake_identity()), **other})
    assert state == Hit(1) and set(device.profiles) == {"k0", "k1"}  # tuned: k1 is the faster


@pytest.mark.core
def test_a_bundle_entry_whose_name_is_not_its_indexs_candidate_is_ignored_with_the_reason(caplog):
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        state, device = seeded_tune(namespace_for(fake_identity()), index=0, name="k1")
    assert state == Hit(1) and set(device.profiles) == {"k0", "k1"}  # tuned, not the seed's candidate 0
    assert "candidate 0 named 'k1', but the set's candidate 0 is 'k0'" in caplog.text


@pytest.mark.core
def test_a_bundle_built_from_two_point_releases_holds_one_reduced_namespace():
    tunables = make_set("k0", "k1")
    older, newer = old_namespace(fake_identity("1.0.2"), "0.1.0"), old_namespace(fake_identity("1.0.9"), "0.1.3")
    bundle = build_bundle([(older, [winner(tunables, 0)]), (newer, [winner(tunables, 1, n=8)])], built=BUILT)
    assert [{k: v for k, v in ns.items() if k != "entries"} for ns in bundle["namespaces"]] == [
        namespace_for(fake_identity())]
    assert len(bundle["namespaces"][0]["entries"]) == 2


@pytest.mark.core
def test_of_a_slot_two_matching_namespaces_hold_the_own_one_seeds():
    tunables = make_set("k0", "k1")
    documents = [(old_namespace(fake_identity("1.0.9"), "0.1.3"), [winner(tunables, 1)]),
                 (namespace_for(fake_identity()), [winner(tunables, 0)])]
    assert [e.winner for e in entries_for(documents, namespace_for(fake_identity()))] == [0]
