"""The native cache when it cannot be written, when a writer is stuck, and when it is not wgtune's.

- a read-only cache (directory or file) is used read-only: its winners are served, new winners
  are kept in the process, and the store says so once;
- a writer holding the database's write lock is waited for once (the busy timeout, made short
  here: ``CacheDatabase(timeout=)``), then the store is read-only for the run: no save waits again;
- another program's SQLite database at the store's path is neither changed (byte for byte, its
  journal mode included) nor adopted, by the store, the cache commands or ``wgtune collect --db``.

No test times anything: a stuck writer is a connection the test holds, and what is asserted is
how many write transactions were tried.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from fakes import FakeDevice, call, make_set, make_tuner

from wgtune import Key, StoredEntry, StoreError
from wgtune.backends.collector_db import VoteDatabase
from wgtune.backends.local import open_store
from wgtune.backends.sqlite_store import DATABASE_NAME, CacheDatabase, ReadOnly, SqliteStore
from wgtune.cli import main

LAPTOP = {"wgtune": "0.1", "device": {"vendor": "v", "device": "laptop", "driver": "1", "backend": "vulkan"},
          "tuner": "default"}
NOBODY = 65534


def entry(n: int) -> StoredEntry:
    results = ({"name": "a", "index": 0, "median": 0.002, "samples": [0.002]},
               {"name": "b", "index": 1, "median": 0.003, "samples": [0.003]})
    return StoredEntry("matmul", Key({"n": n}), "c0ffee", 0, "a", results)


def scripted() -> FakeDevice:
    device = FakeDevice()
    device.script("a", duration=2e-3)
    device.script("b", duration=1e-3)
    return device


def messages(caplog, phrase: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if phrase in record.getMessage()]


def files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


# -- a read-only cache ---------------------------------------------------------------------------


@pytest.fixture
def shared_dir():
    """A directory an unprivileged user can enter (pytest's tmp_path is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="wgtune-readonly-"))
    path.chmod(0o755)
    yield path
    for inner in (path, *path.rglob("*")):
        inner.chmod(0o755)
    shutil.rmtree(path)


def in_child(run, *args) -> dict:
    """``run(*args)`` in a forked child: its outcome, or ``{"error": ...}`` with what it raised
    (said to the test at once, not left to the queue's timeout)."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()

    def child() -> None:
        try:
            queue.put(run(*args))
        except BaseException as error:
            queue.put({"error": repr(error)})

    process = context.Process(target=child)
    process.start()
    outcome = queue.get(timeout=120)
    process.join()
    return outcome


def as_nobody() -> None:
    """In a child: root writes through any mode bits, so where the tests run as root the child
    becomes an unprivileged user first."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


def warnings_said() -> list[str]:
    """What wgtune warns from now on in this (child) process, as it is said."""
    said: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: said.append(record.getMessage())
    logging.getLogger("wgtune").addHandler(handler)
    return said


def _read_only_run(directory: str) -> dict:
    """In a forked child that cannot write ``directory``."""
    as_nobody()
    said = warnings_said()
    device, tunables = scripted(), make_set("a", "b")
    store = open_store(directory, LAPTOP)
    outcome: dict = {"store": store is not None}
    if store is not None:
        outcome["served"] = store.lookup("fake", Key({"n": 4})) is not None
        tuner = make_tuner(device, store=store)
        for n in (4, 8, 8):  # 4 stored; 8 new: tuned once, then kept in memory
            tuner.execute(tunables, call(device, [1.0], n=n))
        outcome["tuned"] = [record.key.as_dict()["n"] for record in tuner.records.records]
        try:
            store.save(entry(9))
            outcome["save"] = "saved"
        except ReadOnly as error:
            outcome["save"] = str(error)
    outcome["said"] = said
    return outcome


@pytest.mark.parametrize("what", ["directory", "file"])
def test_a_read_only_cache_serves_its_winners_and_keeps_new_ones_in_memory(shared_dir, what):
    cache = shared_dir / "cache"
    device, tunables = scripted(), make_set("a", "b")
    first = make_tuner(device, store=SqliteStore(cache, LAPTOP))
    first.execute(tunables, call(device, [1.0], n=4))
    first.store.database.close()
    for path in cache.iterdir():
        path.chmod(0o444)
    cache.chmod(0o555 if what == "directory" else 0o777)
    before = files(cache)
    outcome = in_child(_read_only_run, str(cache))
    assert outcome["store"] and outcome["served"], outcome
    assert outcome["tuned"] == [8], outcome  # the stored key served, the new one tuned once, then kept
    assert "is read-only for this run" in outcome["save"], outcome
    explained = [message for message in outcome["said"] if "its winners are served" in message]
    assert len(explained) == 1 and "read-only for this run" in explained[0], outcome["said"]
    assert not [message for message in outcome["said"] if "could not open" in message], outcome["said"]
    assert {name: data for name, data in files(cache).items() if name in before} == before


def _open_as_nobody(directory: str) -> dict:
    as_nobody()
    said = warnings_said()
    return {"store": open_store(directory, LAPTOP) is not None, "said": said}


def test_garbage_in_a_read_only_cache_is_named_as_garbage_not_as_a_lock_file(shared_dir):
    """Garbage where the database should be cannot be set aside in a read-only directory: what is
    said names the garbage (it once said only that its lock file could not be made)."""
    cache = shared_dir / "cache"
    cache.mkdir()
    (cache / DATABASE_NAME).write_bytes(b"not a database " * 100)
    cache.chmod(0o555)
    outcome = in_child(_open_as_nobody, str(cache))
    assert outcome.get("store") is False, outcome
    [said] = [message for message in outcome["said"] if "could not open" in message]
    assert "is not an SQLite database, and could not be set aside" in said, said
    assert (cache / DATABASE_NAME).read_bytes() == b"not a database " * 100


def _open_with_no_room(directory: str) -> dict:
    """Where no file may grow (RLIMIT_FSIZE 0: writes fail as on a full disk, without a mount)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    said = warnings_said()
    store = open_store(directory, LAPTOP)
    served = store is not None and store.lookup("matmul", Key({"n": 4})) == entry(4)
    return {"store": store is not None, "served": served, "said": said}


def test_a_cache_on_a_full_disk_serves_its_winners_read_only(tmp_path):
    """No room for the WAL's shared-memory file: SQLite says "disk I/O error" at opening. The
    stored winners must still serve (read-only, as for a read-only directory), and what is said
    must point at the disk, not at a broken database."""
    store = SqliteStore(tmp_path, LAPTOP)
    store.save_many([entry(4), entry(8)])
    store.database.close()
    outcome = in_child(_open_with_no_room, str(tmp_path))
    assert outcome.get("store") and outcome["served"], outcome
    [said] = outcome["said"]
    assert "read-only for this run" in said and "disk full" in said, said
    assert SqliteStore(tmp_path, LAPTOP).lookup("matmul", Key({"n": 8})) == entry(8)


# -- a writer stuck on the lock ------------------------------------------------------------------


def test_a_writer_stuck_on_the_lock_is_waited_for_once_then_the_store_is_read_only(tmp_path, caplog):
    device, tunables = scripted(), make_set("a", "b")
    first = make_tuner(device, store=SqliteStore(tmp_path, LAPTOP))
    first.execute(tunables, call(device, [1.0], n=4))
    first.store.database.close()
    stuck = sqlite3.connect(tmp_path / DATABASE_NAME, isolation_level=None)
    stuck.execute("BEGIN IMMEDIATE")  # holds the write lock until the test lets go
    try:
        database = CacheDatabase(tmp_path, timeout=0.2)
        store = SqliteStore(None, LAPTOP, database=database).open()
        tried: list[str] = []
        database.connection().set_trace_callback(tried.append)
        tuner = make_tuner(device, store=store)
        with caplog.at_level(logging.WARNING, logger="wgtune"):
            for n in (4, 8, 16, 32):  # 4 is stored: served while the writer holds the lock
                tuner.execute(tunables, call(device, [1.0], n=n))
            with pytest.raises(ReadOnly, match=r"read-only for this run \(another process held its write lock"):
                store.save(entry(64))
    finally:
        stuck.execute("ROLLBACK")
        stuck.close()
    assert [record.key.as_dict()["n"] for record in tuner.records.records] == [8, 16, 32]
    assert [record.stored for record in tuner.records.records] == [False] * 3
    assert sum(statement.startswith("BEGIN IMMEDIATE") for statement in tried) == 1  # waited for once
    [said] = messages(caplog, "its winners are served")  # the store explains once, and the tuner adds nothing
    assert "read-only for this run (another process held its write lock for over 0.2 s)" in said
    assert messages(caplog, "could not store the winner of fake") == []
    assert [n for n in (8, 16, 32) if SqliteStore(tmp_path, LAPTOP).lookup("fake", Key({"n": n}))] == []
    SqliteStore(tmp_path, LAPTOP).save(entry(64))  # the next run, the lock free: it writes again
    assert SqliteStore(tmp_path, LAPTOP).lookup("matmul", Key({"n": 64})) == entry(64)


# -- a database that is not wgtune's -------------------------------------------------------------


def songs(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE songs (title TEXT)")
        connection.execute("INSERT INTO songs VALUES ('one')")
    connection.close()


def collector(path: Path) -> None:
    VoteDatabase(path).close()  # WAL, tables ballots, buckets and meta (a meta table: not a cache's)
    with sqlite3.connect(path) as connection:  # folded back, so that no -wal is left to compare
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def cache_database(path: Path) -> None:
    store = SqliteStore(path.parent, LAPTOP)
    store.save(entry(1))
    store.database.close()  # the WAL folded back: the file alone holds it


@pytest.mark.parametrize("make", [songs, collector], ids=["another program's", "a collector's"])
def test_a_foreign_database_at_the_stores_path_is_neither_changed_nor_adopted(tmp_path, capsys, caplog, make):
    path = tmp_path / DATABASE_NAME
    make(path)
    before = files(tmp_path)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert open_store(str(tmp_path), LAPTOP) is None  # the tuner keeps winners in memory
    assert "is not a wgtune cache database" in caplog.text and "not touching it" in caplog.text
    for action in (["list"], ["show"], ["export", "-"], ["clear"], ["import", str(tmp_path / "none.json")]):
        assert main(["cache", "--cache-dir", str(tmp_path), *action]) == 2, action
        assert "not a wgtune cache database" in capsys.readouterr().err or action[0] == "import"
    with pytest.raises(StoreError, match="not a wgtune cache database"):
        SqliteStore(tmp_path, LAPTOP).save(entry(1))
    # Byte for byte (its journal mode, bytes 18-19, included), and nothing beside it: a database in WAL
    # mode gets SQLite's -wal and -shm from a reader, which wgtune's look at its schema leaves out.
    assert files(tmp_path) == before


@pytest.mark.parametrize("make", [songs, cache_database], ids=["another program's", "a cache database"])
def test_the_collector_refuses_a_database_that_is_not_a_collectors(tmp_path, capsys, make):
    path = tmp_path / DATABASE_NAME
    make(path)
    before = files(tmp_path)
    with pytest.raises(StoreError, match="is not a wgtune collector database"):
        VoteDatabase(path)
    assert main(["collect", "--db", str(path), "--port", "0"]) == 2
    assert "not a wgtune collector database" in capsys.readouterr().err
    assert files(tmp_path) == before  # the file byte for byte, and no -wal or -shm beside it
    mine = tmp_path / "fleet.sqlite3"
    VoteDatabase(mine).close()
    VoteDatabase(mine).close()  # its own database, again: taken
