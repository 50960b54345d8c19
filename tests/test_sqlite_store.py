"""The SQLite store: one row per entry, short transactions, many processes, kills, damaged rows,
a newer schema refused. Real files in ``tmp_path``; migration and export/import are in
``test_sqlite_transfer.py``."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from wgtune import DeviceIdentity, Key, StoreError
from wgtune.backends.local import open_store
from wgtune.backends.sqlite_store import DATABASE_NAME, CacheDatabase, SqliteStore
from wgtune.store.format import StoredEntry, namespace_for

LAVAPIPE = DeviceIdentity("mesa", "llvmpipe", "Mesa 24.0", "vulkan")
OTHER_GPU = DeviceIdentity("nvidia", "H200", "550.54", "vulkan")


def entry(n: int, set_name: str = "matmul", winner: int = 0, worker: int | None = None) -> StoredEntry:
    results = (
        {"name": "a", "index": 0, "median": 0.002 + n * 1e-6, "samples": [0.002, 0.0021]},
        {"name": "b", "index": 1, "median": 0.003, "samples": [0.003, 0.0031]},
    )
    key = {"n": n, "dtype": "f32"} if worker is None else {"n": n, "worker": worker}
    return StoredEntry(set_name, Key(key), "c0ffee", winner, "ab"[winner], results)


def slots(entries) -> dict:
    return {e.slot: e for e in entries}


def rows(directory) -> dict[int, tuple]:
    connection = sqlite3.connect(directory / DATABASE_NAME)
    try:
        return {r[0]: r[1:] for r in connection.execute("SELECT rowid, set_name, key, entry FROM entries")}
    finally:
        connection.close()


@pytest.fixture
def store(tmp_path) -> SqliteStore:
    return SqliteStore(tmp_path, namespace_for(LAVAPIPE))


def test_round_trip_namespaces_and_clear(tmp_path, store):
    assert store.load() == []
    store.save(entry(1))
    store.save(entry(2, set_name="softmax"))
    store.save(entry(1, winner=1))  # replaces the first: same set and key
    again = SqliteStore(tmp_path, namespace_for(LAVAPIPE))
    assert slots(again.load()) == slots([entry(1, winner=1), entry(2, set_name="softmax")])
    theirs = SqliteStore(tmp_path, namespace_for(OTHER_GPU))
    other_tuner = SqliteStore(tmp_path, namespace_for(LAVAPIPE, "other"))
    theirs.save_many([entry(3), entry(4), entry(3, winner=1)])  # a later one wins its slot
    assert slots(theirs.load()) == slots([entry(3, winner=1), entry(4)])
    assert other_tuner.load() == []
    assert [(s.namespace, s.entries) for s in again.database.namespaces()] == sorted(
        [(namespace_for(LAVAPIPE), 2), (namespace_for(OTHER_GPU), 2)],
        key=lambda pair: json.dumps(pair[0], sort_keys=True))
    store.clear()
    assert store.load() == [] and len(theirs.load()) == 2
    assert CacheDatabase(tmp_path).clear_all() == (1, 2, 0)
    assert theirs.load() == []
    SqliteStore(tmp_path / "missing", namespace_for(LAVAPIPE)).clear()  # nothing stored: nothing made
    assert not (tmp_path / "missing").exists()
    assert (tmp_path / DATABASE_NAME).exists() and not list(tmp_path.glob("*.json"))


def test_one_save_rewrites_no_other_row(tmp_path, store):
    store.save_many(entry(n) for n in range(2000))
    before = rows(tmp_path)
    store.database.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL empty: what follows is in it
    store.save(entry(5, winner=1))  # replace one
    store.save(entry(9999))  # add one
    after = rows(tmp_path)
    assert len(after) == len(before) + 1
    changed = {rowid for rowid in before if after[rowid] != before[rowid]}
    assert len(changed) == 1 and json.loads(after[changed.pop()][2])["winner"] == 1  # same rowid, new entry
    written = (tmp_path / (DATABASE_NAME + "-wal")).stat().st_size  # every page the two saves wrote
    assert written < 64 * 1024 < (tmp_path / DATABASE_NAME).stat().st_size  # a few pages, not the cache


def _hammer(directory: str, worker: int, saves: int) -> None:
    store = SqliteStore(directory, namespace_for(LAVAPIPE))
    for i in range(saves):
        store.save(entry(i, worker=worker))
        if i % 10 == 0:
            store.load()  # readers among the writers


def test_many_processes_writing_at_once_lose_nothing(tmp_path):
    directory, workers, saves = str(tmp_path / "cache"), 6, 40
    context = multiprocessing.get_context("spawn")  # no connection crosses a fork
    processes = [context.Process(target=_hammer, args=(directory, w, saves)) for w in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    loaded = SqliteStore(directory, namespace_for(LAVAPIPE)).load()
    found = {(e.key.as_dict()["worker"], e.key.as_dict()["n"]) for e in loaded}
    assert found == {(w, i) for w in range(workers) for i in range(saves)}


KILLED = textwrap.dedent(
    """
    import sys
    from wgtune import Key
    from wgtune.backends.sqlite_store import SqliteStore
    from wgtune.store.format import StoredEntry, namespace_for
    from wgtune import DeviceIdentity
    store = SqliteStore(sys.argv[1], namespace_for(DeviceIdentity("mesa", "llvmpipe", "Mesa 24.0", "vulkan")))
    results = ({"name": "a", "index": 0, "median": 0.002, "samples": [0.002]},)
    n = 0
    while True:
        # A big transaction and a small one, in turn: the kill may land inside either.
        batch = [StoredEntry("big", Key({"n": n, "i": i}), "c", 0, "a", results) for i in range(500)]
        store.save_many(batch)
        store.save(StoredEntry("small", Key({"n": n}), "c", 0, "a", results))
        print(n, flush=True)
        n += 1
    """
)


def test_a_process_killed_mid_write_loses_nothing_committed_and_leaves_nothing(tmp_path):
    directory = tmp_path / "cache"
    writer = subprocess.Popen([sys.executable, "-c", KILLED, str(directory)], stdout=subprocess.PIPE, text=True)
    reported = [int(writer.stdout.readline()) for _ in range(5)]
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    store = SqliteStore(directory, namespace_for(LAVAPIPE))
    loaded = store.load()
    small = {e.key.as_dict()["n"] for e in loaded if e.set_name == "small"}
    assert set(reported) <= small
    big = {}
    for e in loaded:
        if e.set_name == "big":
            big.setdefault(e.key.as_dict()["n"], set()).add(e.key.as_dict()["i"])
    assert all(found == set(range(500)) for found in big.values())  # a transaction is whole or absent
    assert set(big) >= small
    assert store.database.connection().execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store.database.close()
    assert sorted(p.name for p in directory.iterdir()) == [DATABASE_NAME]  # no temp files, WAL folded back


def test_a_damaged_row_costs_only_itself_and_is_kept_aside(tmp_path, store, caplog):
    store.save_many([entry(1), entry(2), entry(3)])
    two, three = Key({"n": 2, "dtype": "f32"}).to_json(), Key({"n": 3, "dtype": "f32"}).to_json()
    with sqlite3.connect(tmp_path / DATABASE_NAME) as connection:
        connection.execute("UPDATE entries SET entry = '{\"winner\": -1' WHERE key = ?", (two,))
        connection.execute("UPDATE entries SET entry = ? WHERE key = ?",
                           (json.dumps({**entry(3).to_json(), "winner": -1}), three))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert slots(SqliteStore(tmp_path, namespace_for(LAVAPIPE)).load()) == slots([entry(1)])
    assert "skipped 2 damaged entries" in caplog.text and "'damaged' table" in caplog.text
    with sqlite3.connect(tmp_path / DATABASE_NAME) as connection:
        kept = connection.execute("SELECT set_name, entry, reason FROM damaged").fetchall()
    assert len(kept) == 2 and all(name == "matmul" and reason for name, _entry, reason in kept)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert slots(store.load()) == slots([entry(1)])  # moved once: no warning again
    assert caplog.text == ""
    [summary] = CacheDatabase(tmp_path).namespaces()
    assert (summary.entries, summary.damaged) == (1, 2)


def test_a_newer_schema_is_refused_and_left_alone(tmp_path, store, caplog):
    store.save(entry(1))
    store.database.close()
    with sqlite3.connect(tmp_path / DATABASE_NAME) as connection:
        connection.execute("UPDATE meta SET value = '2' WHERE name = 'schema'")
    before = (tmp_path / DATABASE_NAME).read_bytes()
    with pytest.raises(StoreError, match="schema version 2, this wgtune knows 1"):
        SqliteStore(tmp_path, namespace_for(LAVAPIPE)).load()
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert open_store(str(tmp_path), namespace_for(LAVAPIPE)) is None  # the tuner goes on without
    assert "newer wgtune" in caplog.text
    assert (tmp_path / DATABASE_NAME).read_bytes() == before


def test_unusable_cache_directories_are_no_store_not_a_crash(tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory should be")
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert open_store(str(blocker), namespace_for(LAVAPIPE)) is None
    assert caplog.text.count("could not open the winners' store") == 1
    with pytest.raises(OSError):
        SqliteStore(blocker, namespace_for(LAVAPIPE)).save(entry(1))


def test_garbage_where_the_database_should_be_is_set_aside_and_a_fresh_one_made(tmp_path, caplog):
    garbage = b"not a database at all, " * 100
    (tmp_path / DATABASE_NAME).write_bytes(garbage)
    (tmp_path / (DATABASE_NAME + "-wal")).write_bytes(b"stale log")
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        store = open_store(str(tmp_path), namespace_for(LAVAPIPE))
        assert store is not None
        store.save(entry(1))
    assert "was not an SQLite database; set aside as wgtune.sqlite3.corrupt-" in caplog.text
    [aside] = tmp_path.glob(DATABASE_NAME + ".corrupt-*[!l]")  # the copy, its -wal beside it
    assert aside.read_bytes() == garbage  # kept for a post-mortem, byte for byte
    assert aside.with_name(aside.name + "-wal").read_bytes() == b"stale log"
    assert slots(SqliteStore(tmp_path, namespace_for(LAVAPIPE)).load()) == slots([entry(1)])


def test_clear_removes_the_damaged_rows_too(tmp_path, store):
    store.save_many([entry(1), entry(2)])
    with sqlite3.connect(tmp_path / DATABASE_NAME) as connection:
        connection.execute("UPDATE entries SET entry = '[' WHERE key = ?", (Key({"n": 2, "dtype": "f32"}).to_json(),))
    store.load()  # moves the damaged row aside
    assert CacheDatabase(tmp_path).clear_all() == (1, 1, 1)
    assert CacheDatabase(tmp_path).namespaces() == []


def test_a_database_that_is_not_wgtunes_is_refused(tmp_path):
    with sqlite3.connect(tmp_path / DATABASE_NAME) as connection:
        connection.execute("CREATE TABLE songs (title TEXT)")
    with pytest.raises(StoreError, match="not a wgtune cache database"):
        SqliteStore(tmp_path, namespace_for(LAVAPIPE)).load()
