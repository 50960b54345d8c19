"""The file store: round trips, several writers, damaged documents, export/import, namespaces.

The document logic is the core's (``wgtune.store.documents``); these tests run it on real files, with
the lock, the atomic writes and the set-aside copies of the file adapter.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import wgtune
from wgtune import Config, DeviceIdentity, Key, StoreError
from wgtune.backends import file_store
from wgtune.backends.file_store import FileStore, namespace_for
from wgtune.runner import run_inline
from wgtune.store.format import StoredEntry, reduced_version

LAVAPIPE = DeviceIdentity("mesa", "llvmpipe", "Mesa 24.0", "vulkan")
OTHER_GPU = DeviceIdentity("nvidia", "H200", "550.54", "vulkan")


def entry(n: int, set_name: str = "matmul", winner: int = 1) -> StoredEntry:
    results = (
        {"name": "cand0", "index": 0, "median": 0.002 + n * 1e-6, "samples": [0.002, 0.0021]},
        {"name": "cand1", "index": 1, "median": 0.001 + n * 1e-6, "samples": [0.001, 0.0011]},
        {"name": "b", "error": "Launch", "reason": "too much workgroup storage"},
    )
    return StoredEntry(set_name, Key({"n": n, "dtype": "f32"}), "c0ffee", winner, f"cand{winner}", results)


def slots(entries) -> dict:
    return {e.slot: e for e in entries}


@pytest.fixture
def store(tmp_path) -> FileStore:
    return FileStore(tmp_path, namespace_for(LAVAPIPE))


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


# The whole cache directory, as the CLI sees it (the core's DocumentStore, run inline).


def list_documents(directory: Path) -> list[Path]:
    return [directory / name for name in run_inline(file_store.CacheDirectory(directory).names())]


def export_all(directory: Path) -> dict:
    return run_inline(file_store.document_store(directory).export())


def import_document(directory: Path, document: object) -> int:
    return run_inline(file_store.document_store(directory).import_document(document))


def clear_all(directory: Path) -> int:
    return run_inline(file_store.document_store(directory).clear_all())


def test_namespace_and_file_name(tmp_path):
    namespace = namespace_for(LAVAPIPE, "bench")
    line = reduced_version(wgtune.__version__)  # the namespace rule: major.minor, the driver's major version
    assert namespace == {"wgtune": line, "device": {**LAVAPIPE.as_dict(), "driver": "Mesa 24"}, "tuner": "bench"}
    store = FileStore(tmp_path, namespace)
    assert store.path.parent == tmp_path
    assert store.path.name.startswith(f"mesa-llvmpipe-vulkan--bench--{line}--")
    assert len(store.path.name.rsplit("--", 1)[1]) == len("12345678.json")
    assert FileStore(tmp_path, dict(namespace)).path == store.path  # stable
    # The driver is not in the slug but is in the hash: another driver, another file.
    driver = DeviceIdentity("mesa", "llvmpipe", "Mesa 25.0", "vulkan")
    assert FileStore(tmp_path, namespace_for(driver, "bench")).path != store.path
    with pytest.raises(StoreError, match="clash"):
        FileStore(tmp_path, {**namespace, "format": "x"})


def test_default_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WGTUNE_CACHE_DIR", str(tmp_path / "env"))
    config = Config.from_env()  # the one reader of the environment
    assert config.cache_dir == str(tmp_path / "env")
    assert FileStore(config.cache_dir, namespace_for(LAVAPIPE)).directory == tmp_path / "env"
    assert FileStore(tmp_path / "arg", namespace_for(LAVAPIPE)).directory == tmp_path / "arg"
    # Given no directory, the store takes the platform's, whatever the environment says.
    assert "wgtune" in str(file_store.default_cache_dir())
    assert file_store.default_cache_dir() != tmp_path / "env"
    assert FileStore(None, namespace_for(LAVAPIPE)).directory == file_store.default_cache_dir()


def test_round_trip(tmp_path, store):
    assert store.load() == []  # nothing yet, and no directory needed
    store.save(entry(1))
    store.save(entry(2, set_name="softmax"))
    store.save(entry(1, winner=0))  # replaces the first: same set and key
    loaded = FileStore(tmp_path, namespace_for(LAVAPIPE)).load()
    assert slots(loaded) == slots([entry(1, winner=0), entry(2, set_name="softmax")])
    document = json.loads(store.path.read_text())
    assert document["format"] == "wgtune.cache/1"
    assert document["device"] == namespace_for(LAVAPIPE)["device"]
    assert len(document["entries"]) == 2
    assert not list(tmp_path.glob("*.tmp"))  # no temp file left behind


def test_two_instances_both_survive(tmp_path):
    first = FileStore(tmp_path, namespace_for(LAVAPIPE))
    second = FileStore(tmp_path, namespace_for(LAVAPIPE))
    assert first.load() == [] and second.load() == []  # both loaded before either wrote
    first.save(entry(1))
    second.save(entry(2))  # must not drop the entry the first one wrote
    first.save(entry(3))
    assert set(slots(FileStore(tmp_path, namespace_for(LAVAPIPE)).load())) == {
        e.slot for e in (entry(1), entry(2), entry(3))
    }


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from wgtune import DeviceIdentity, Key
    from wgtune.backends.file_store import FileStore, namespace_for
    from wgtune.store.format import StoredEntry

    directory, worker, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    store = FileStore(directory, namespace_for(DeviceIdentity("mesa", "llvmpipe", "Mesa 24.0", "vulkan")))
    while not go.exists():
        time.sleep(0.001)
    for i in range(20):
        store.save(StoredEntry("hammer", Key({"worker": worker, "i": i}), "c", i % 3, "x"))
    """
)


def test_two_processes_hammer(tmp_path):
    go = tmp_path / "go"
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path / "cache"), str(w), str(go)]) for w in range(2)
    ]
    go.touch()  # both start saving at about the same time
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    loaded = FileStore(tmp_path / "cache", namespace_for(LAVAPIPE)).load()
    assert {(e.key.as_dict()["worker"], e.key.as_dict()["i"]) for e in loaded} == {
        (w, i) for w in range(2) for i in range(20)
    }


def _negative_winner() -> bytes:
    document = {"format": "wgtune.cache/1", **namespace_for(LAVAPIPE), "entries": [entry(1).to_json()]}
    document["entries"][0]["winner"] = -1
    return json.dumps(document).encode()


DAMAGED = {
    "garbage-bytes": b"\x00\xff\xfe{ not json at all \x80",
    "truncated": json.dumps({"format": "wgtune.cache/1", "entries": []}).encode()[:-5],
    "wrong-format": json.dumps({"format": "someone-else/3", "entries": []}).encode(),
    "not-an-object": b"[1, 2, 3]",
    "other-namespace": json.dumps(
        {"format": "wgtune.cache/1", **namespace_for(OTHER_GPU), "entries": [entry(1).to_json()]}
    ).encode(),
}


def test_one_damaged_entry_costs_only_itself(tmp_path, store, caplog):
    document = {"format": "wgtune.cache/1", **namespace_for(LAVAPIPE),
                "entries": [entry(1).to_json(), entry(2).to_json(), entry(3).to_json()]}
    document["entries"][1]["winner"] = -1
    original = json.dumps(document).encode()
    store.path.write_bytes(original)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert slots(store.load()) == slots([entry(1), entry(3)])
    assert "skipped 1 damaged" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        store.save(entry(4))
    assert "kept a copy" in caplog.text
    assert slots(store.load()) == slots([entry(1), entry(3), entry(4)])
    (aside,) = tmp_path.glob(store.path.name + ".corrupt-*")
    assert aside.read_bytes() == original  # the damaged entry survives for a post-mortem


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_damaged_document_is_set_aside(tmp_path, store, caplog, damage):
    store.path.write_bytes(DAMAGED[damage])
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert store.load() == []
    assert any(r.name == "wgtune" and "damaged" in r.getMessage() for r in caplog.records)
    assert not store.path.exists()
    aside = list(tmp_path.glob(store.path.name + ".corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == DAMAGED[damage]  # kept for a post-mortem
    assert list_documents(tmp_path) == []  # not taken for a document
    store.save(entry(7))  # the store works again
    assert slots(store.load()) == slots([entry(7)])


def test_save_over_damaged_document(tmp_path, store, caplog):
    store.path.write_bytes(DAMAGED["garbage-bytes"])
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        store.save(entry(3))
    assert "damaged" in caplog.text
    assert slots(store.load()) == slots([entry(3)])
    assert len(list(tmp_path.glob("*.corrupt-*"))) == 1


def test_io_failures_raise_oserror(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    store = FileStore(blocker, namespace_for(LAVAPIPE))
    with pytest.raises(OSError):
        store.load()
    with pytest.raises(OSError):
        store.save(entry(1))


def test_namespace_separation(tmp_path):
    ours = FileStore(tmp_path, namespace_for(LAVAPIPE))
    theirs = FileStore(tmp_path, namespace_for(OTHER_GPU))
    other_tuner = FileStore(tmp_path, namespace_for(LAVAPIPE, "other"))
    ours.save(entry(1))
    theirs.save(entry(2))
    assert len({ours.path, theirs.path, other_tuner.path}) == 3
    assert list_documents(tmp_path) == sorted([ours.path, theirs.path])
    assert slots(ours.load()) == slots([entry(1)])
    assert slots(theirs.load()) == slots([entry(2)])
    assert other_tuner.load() == []


def test_clear(tmp_path):
    ours = FileStore(tmp_path, namespace_for(LAVAPIPE))
    theirs = FileStore(tmp_path, namespace_for(OTHER_GPU))
    FileStore(tmp_path / "missing", namespace_for(LAVAPIPE)).clear()  # nothing to clear: fine
    ours.save(entry(1))
    theirs.save(entry(2))
    ours.clear()
    assert ours.load() == []
    assert slots(theirs.load()) == slots([entry(2)])  # only our namespace forgotten
    ours.save(entry(3))
    assert clear_all(tmp_path) == 2
    assert list_documents(tmp_path) == []
    assert ours.load() == [] and theirs.load() == []
    assert clear_all(tmp_path / "missing") == 0


def test_read_document(tmp_path, store):
    store.save(entry(1))
    [document] = run_inline(file_store.document_store(tmp_path).documents())
    assert document.name == store.path.name and document.where == str(store.path)
    assert document.namespace == namespace_for(LAVAPIPE)
    assert document.entries == [entry(1)]
    assert document.problems == [] and document.damage is None
    store.path.write_bytes(_negative_winner())
    [document] = run_inline(file_store.document_store(tmp_path).documents())
    assert document.entries == [] and "winner" in document.problems[0]
    store.path.write_bytes(b"{nope")
    [document] = run_inline(file_store.document_store(tmp_path).documents())
    assert "not JSON" in document.damage
    assert store.path.exists()  # reading for the CLI moves nothing


def test_export_then_import_reproduces_entries(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    FileStore(source, namespace_for(LAVAPIPE)).save_many([entry(1), entry(2, set_name="softmax")])
    FileStore(source, namespace_for(OTHER_GPU)).save(entry(3))
    exported = json.loads(json.dumps(export_all(source)))  # as if through a file
    assert exported["format"] == "wgtune.export/1" and len(exported["namespaces"]) == 2
    assert import_document(target, exported) == 3
    names = [p.name for p in list_documents(source)]
    assert [p.name for p in list_documents(target)] == names
    for identity in (LAVAPIPE, OTHER_GPU):
        before = FileStore(source, namespace_for(identity))
        after = FileStore(target, namespace_for(identity))
        assert slots(after.load()) == slots(before.load())
        assert after.path.read_bytes() == before.path.read_bytes()


def test_import_merges_and_accepts_a_single_document(tmp_path, store):
    store.save_many([entry(1), entry(2)])
    document = json.loads(store.path.read_text())
    document["entries"] = [entry(2, winner=0).to_json(), entry(4).to_json()]
    assert import_document(tmp_path, document) == 2
    assert slots(store.load()) == slots([entry(1), entry(2, winner=0), entry(4)])


def test_export_skips_damaged_documents(tmp_path, store, caplog):
    store.save(entry(1))
    (tmp_path / "junk--default--0.1.0--00000000.json").write_bytes(b"{nope")
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        exported = export_all(tmp_path)
    assert "not exporting" in caplog.text
    assert [len(ns["entries"]) for ns in exported["namespaces"]] == [1]


def _bad_export() -> dict:
    good = {"format": "wgtune.cache/1", **namespace_for(OTHER_GPU), "entries": [entry(5).to_json()]}
    bad = json.loads(_negative_winner())
    return {"format": "wgtune.export/1", "namespaces": [good, bad]}  # the good one comes first


@pytest.mark.parametrize(
    "document",
    [_bad_export(), {"format": "wgtune.export/9", "namespaces": []}, [1, 2], "text", {"format": "wgtune.export/1"}],
    ids=["bad-entry-after-good", "wrong-format", "list", "string", "no-namespaces"],
)
def test_bad_import_writes_nothing(tmp_path, store, document):
    store.save_many([entry(1), entry(2)])
    before = snapshot(tmp_path)
    with pytest.raises(StoreError):
        import_document(tmp_path, document)
    assert snapshot(tmp_path) == before  # byte-identical, and no new file
    empty = tmp_path / "empty"
    with pytest.raises(StoreError):
        import_document(empty, document)
    assert not empty.exists() or not any(empty.iterdir())


def test_tuner_contract_save_errors_are_oserror(tmp_path, monkeypatch, store):
    """The tuner logs a failed save; make sure a failing write surfaces as OSError, not silently."""

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    store.save(entry(1))
    before = store.path.read_bytes()
    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="No space"):
        store.save(entry(2))
    assert store.path.read_bytes() == before  # the old document is whole
    assert not list(tmp_path.glob("*.tmp"))
