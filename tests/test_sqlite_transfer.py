"""Into and out of the SQLite store: migration of the old JSON documents, export and import (the
``wgtune.export/1`` format the page and the old file store share), the import's limit, and the
``wgtune`` commands on the database."""

from __future__ import annotations

import json
import logging
import multiprocessing
import sqlite3

import pytest
from test_sqlite_store import LAVAPIPE, OTHER_GPU, entry, slots

from wgtune import StoreError
from wgtune.backends import cache_transfer
from wgtune.backends.cache_transfer import export_cache, import_cache, import_document
from wgtune.backends.file_store import FileStore, document_store
from wgtune.backends.sqlite_store import DATABASE_NAME, CacheDatabase, SqliteStore
from wgtune.cli import main
from wgtune.runner import run_inline
from wgtune.store.documents import DocumentStore
from wgtune.store.format import namespace_for


def table(directory, name: str) -> list[tuple]:
    connection = sqlite3.connect(directory / DATABASE_NAME)
    try:
        return connection.execute(f"SELECT * FROM {name}").fetchall()
    finally:
        connection.close()


def old_cache(directory) -> dict:
    """A directory as the old file store left it: two devices, a damaged entry, a damaged document."""
    FileStore(directory, namespace_for(LAVAPIPE)).save_many([entry(1), entry(2, set_name="softmax")])
    FileStore(directory, namespace_for(OTHER_GPU)).save(entry(3))
    mixed = FileStore(directory, namespace_for(LAVAPIPE, "other"))
    mixed.save_many([entry(4), entry(5)])
    document = json.loads(mixed.path.read_text())
    document["entries"][1]["winner"] = -1
    mixed.path.write_text(json.dumps(document))
    (directory / "junk--default--0.1.0--00000000.json").write_bytes(b"\x00{ not json")
    return {"lavapipe": [entry(1), entry(2, set_name="softmax")], "other-gpu": [entry(3)], "other": [entry(4)]}


def test_migration_moves_every_entry_and_renames_the_documents(tmp_path, caplog):
    expected = old_cache(tmp_path)
    documents = sorted(p.name for p in tmp_path.glob("*.json"))
    with caplog.at_level(logging.INFO, logger="wgtune"):
        store = SqliteStore(tmp_path, namespace_for(LAVAPIPE))
        assert slots(store.load()) == slots(expected["lavapipe"])
    assert slots(SqliteStore(tmp_path, namespace_for(OTHER_GPU)).load()) == slots(expected["other-gpu"])
    assert slots(SqliteStore(tmp_path, namespace_for(LAVAPIPE, "other")).load()) == slots(expected["other"])
    assert not list(tmp_path.glob("*.json"))
    good = [name for name in documents if not name.startswith("junk")]
    assert sorted(p.name for p in tmp_path.glob("*.json.migrated")) == [f"{name}.migrated" for name in good]
    assert [p.name for p in tmp_path.glob("junk*.corrupt")] == ["junk--default--0.1.0--00000000.json.corrupt"]
    assert "damaged" in caplog.text and "moved 4 stored winner(s) from 3 JSON document(s)" in caplog.text
    [damaged] = table(tmp_path, "damaged")
    assert json.loads(damaged[4])["winner"] == -1 and "winner" in damaged[5]
    assert len(table(tmp_path, "migrated")) == 3

    # Idempotent: a reopen migrates nothing; a document an older wgtune writes later is merged,
    # the database's own row winning a slot both hold.
    store.save(entry(1, winner=1))
    FileStore(tmp_path, namespace_for(LAVAPIPE)).save_many([entry(1), entry(7)])
    store.database.close()
    assert slots(SqliteStore(tmp_path, namespace_for(LAVAPIPE)).load()) == slots(
        [entry(1, winner=1), entry(2, set_name="softmax"), entry(7)])
    assert len(list(tmp_path.glob("*.json.migrated*"))) == 4  # the first copy kept, the second beside it


def _open_and_count(directory: str, queue) -> None:
    queue.put(len(SqliteStore(directory, namespace_for(LAVAPIPE)).load()))


def test_processes_opening_at_once_migrate_once(tmp_path):
    old_cache(tmp_path)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    processes = [context.Process(target=_open_and_count, args=(str(tmp_path), queue)) for _ in range(6)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    assert [queue.get() for _ in processes] == [2] * 6
    assert len(table(tmp_path, "migrated")) == 3 and len(table(tmp_path, "entries")) == 4
    assert len(list(tmp_path.glob("*.migrated*"))) == 3 and len(table(tmp_path, "damaged")) == 1


def test_export_import_round_trip_keeps_the_format(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    SqliteStore(source, namespace_for(LAVAPIPE)).save_many([entry(1), entry(2, set_name="softmax")])
    SqliteStore(source, namespace_for(OTHER_GPU)).save(entry(3))
    exported = tmp_path / "export.json"
    with exported.open("w") as out:
        assert export_cache(CacheDatabase(source), out) == (3, 2)
    document = json.loads(exported.read_text())
    assert DocumentStore.check_import(exported.read_bytes()) == document  # the page's reader takes it
    assert document["format"] == "wgtune.export/1" and [d["format"] for d in document["namespaces"]] == [
        "wgtune.cache/1"] * 2
    assert import_cache(CacheDatabase(target), exported) == 3
    for identity in (LAVAPIPE, OTHER_GPU):
        assert slots(SqliteStore(target, namespace_for(identity)).load()) == slots(
            SqliteStore(source, namespace_for(identity)).load())
    empty = tmp_path / "empty.json"
    with empty.open("w") as out:
        assert export_cache(CacheDatabase(tmp_path / "nothing"), out) == (0, 0)
    assert json.loads(empty.read_text()) == {"format": "wgtune.export/1", "namespaces": []}


def test_an_export_of_the_old_file_store_imports(tmp_path):
    old = tmp_path / "old"
    old_cache(old)
    exported = tmp_path / "old-export.json"
    exported.write_text(json.dumps(run_inline(document_store(old).export()), indent=2))
    assert main(["cache", "--cache-dir", str(tmp_path / "new"), "import", str(exported)]) == 0
    assert slots(SqliteStore(tmp_path / "new", namespace_for(LAVAPIPE)).load()) == slots(
        [entry(1), entry(2, set_name="softmax")])
    assert slots(SqliteStore(tmp_path / "new", namespace_for(OTHER_GPU)).load()) == slots([entry(3)])


SHAPES = {
    "single-document": {"format": "wgtune.cache/1", **namespace_for(LAVAPIPE), "entries": [entry(1).to_json()]},
    "fields-after-entries": {"namespaces": [{"entries": [entry(1).to_json(), entry(2).to_json()],
                                             **namespace_for(LAVAPIPE), "format": "wgtune.cache/1"}],
                             "format": "wgtune.export/1"},
    "same-namespace-twice": {"format": "wgtune.export/1", "namespaces": [
        {"format": "wgtune.cache/1", **namespace_for(LAVAPIPE), "entries": [entry(1).to_json()]},
        {"format": "wgtune.cache/1", **namespace_for(LAVAPIPE), "entries": [entry(1, winner=1).to_json()]}]},
    "no-entries": {"format": "wgtune.export/1", "namespaces": [{"format": "wgtune.cache/1",
                                                                **namespace_for(OTHER_GPU)}]},
    "export-with-stray-entries": {"format": "wgtune.export/1", "entries": [1, 2], "namespaces": []},
}


@pytest.mark.parametrize("chunk", [3, 1 << 20])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_streamed_import_agrees_with_the_plain_one(tmp_path, monkeypatch, shape, chunk):
    monkeypatch.setattr(cache_transfer, "CHUNK", chunk)  # 3: values cut at every chunk's end
    path = tmp_path / "import.json"
    path.write_text(json.dumps(SHAPES[shape], indent=1))
    streamed, plain = CacheDatabase(tmp_path / "streamed"), CacheDatabase(tmp_path / "plain")
    assert import_cache(streamed, path) == import_document(plain, SHAPES[shape])
    assert streamed.entries() == plain.entries()


@pytest.mark.parametrize("chunk", [2, 1 << 20])
def test_an_export_saved_with_a_byte_order_mark_imports(tmp_path, monkeypatch, chunk):
    # Windows editors save UTF-8 with a byte-order mark: it is no text of the document's.
    monkeypatch.setattr(cache_transfer, "CHUNK", chunk)  # 2: the mark's three bytes cut across chunks
    path = tmp_path / "import.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(SHAPES["single-document"]).encode())
    assert import_cache(CacheDatabase(tmp_path / "streamed"), path) == 1
    assert DocumentStore.check_import(path.read_bytes())["entries"] == [entry(1).to_json()]


BAD = {
    "bad-entry": {"format": "wgtune.export/1", "namespaces": [
        {"format": "wgtune.cache/1", **namespace_for(LAVAPIPE), "entries": [entry(1).to_json(), {"winner": 0}]}]},
    "wrong-format": {"format": "wgtune.export/9", "namespaces": []},
    "not-a-document": {"format": "wgtune.export/1", "namespaces": [{"format": "nope"}]},
    "list": [1, 2],
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_import_says_what_the_plain_check_says_and_writes_nothing(tmp_path, bad):
    store = SqliteStore(tmp_path, namespace_for(LAVAPIPE))
    store.save(entry(9))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(BAD[bad]))
    with pytest.raises(StoreError) as expected:
        DocumentStore.check_import(path.read_bytes())
    with pytest.raises(StoreError) as error:
        import_cache(store.database, path)
    assert str(error.value) == str(expected.value)
    assert table(tmp_path, "entries") and len(table(tmp_path, "entries")) == 1


def test_an_import_over_the_limit_is_refused(tmp_path, capsys):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(SHAPES["single-document"]))
    with pytest.raises(StoreError, match="over the import limit of 100"):
        import_cache(CacheDatabase(tmp_path / "cache"), path, max_bytes=100)
    assert main(["cache", "--cache-dir", str(tmp_path / "cache"), "import", str(path), "--max-bytes", "100"]) == 2
    assert "import limit" in capsys.readouterr().err
    assert main(["cache", "--cache-dir", str(tmp_path / "cache"), "show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_cache_commands_on_the_database(tmp_path, capsys):
    old_cache(tmp_path)  # listed after the migration the first command does
    assert main(["cache", "--cache-dir", str(tmp_path), "list"]) == 0
    listed = capsys.readouterr().out
    # The console wraps a long path (pytest-xdist's temporary directories are longer) at its width.
    assert str(tmp_path / DATABASE_NAME) in "".join(listed.split()) and "llvmpipe" in listed and "H200" in listed
    assert "(+1 damaged" in listed
    assert main(["cache", "--cache-dir", str(tmp_path), "show", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 4
    assert main(["cache", "--cache-dir", str(tmp_path), "export", "-"]) == 0
    assert len(json.loads(capsys.readouterr().out)["namespaces"]) == 3
    assert main(["cache", "--cache-dir", str(tmp_path), "clear"]) == 0
    assert "removed 4 winner(s) of 3 namespace(s)" in capsys.readouterr().out
    assert main(["cache", "--cache-dir", str(tmp_path / "none"), "list"]) == 0
    assert "no stored winners" in capsys.readouterr().out and not (tmp_path / "none").exists()


def test_tune_with_a_cache_dir_that_is_a_file_warns_and_tunes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WGTUNE_SAMPLES", "3")
    monkeypatch.setenv("WGTUNE_WARMUPS", "1")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert main(["tune", "--json", "--only", "fma", "--cache-dir", str(blocker)]) == 0
    captured = capsys.readouterr()
    assert {k["status"] for k in json.loads(captured.out)["keys"]} == {"tuned"}
    assert "could not open the winners' store" in captured.err


def _stored(directory) -> dict:
    return slots(SqliteStore(directory, namespace_for(LAVAPIPE)).load())


@pytest.mark.parametrize("onto", [DATABASE_NAME, DATABASE_NAME + "-wal", "link"])
def test_an_export_onto_the_caches_own_files_is_refused_and_every_winner_kept(tmp_path, capsys, onto):
    cache = tmp_path / "cache"
    SqliteStore(cache, namespace_for(LAVAPIPE)).save_many([entry(1), entry(2)])
    target = cache / onto
    if onto == "link":
        target = tmp_path / "winners.json"
        target.symlink_to(cache / DATABASE_NAME)
    assert main(["cache", "--cache-dir", str(cache), "export", str(target)]) == 2
    assert "one of the cache's own files" in capsys.readouterr().err
    assert _stored(cache) == slots([entry(1), entry(2)])


def test_an_export_through_a_link_or_into_a_fifo_writes_there_and_replaces_neither(tmp_path, capsys):
    """The document goes where a link points (the link stays a link), and into a FIFO or a device
    as it is: never a file renamed over them (as root, over /dev/full)."""
    import os
    import threading

    cache = tmp_path / "cache"
    SqliteStore(cache, namespace_for(LAVAPIPE)).save_many([entry(1), entry(2)])
    real, link = tmp_path / "real.json", tmp_path / "latest.json"
    real.write_text("old")
    link.symlink_to(real)
    assert main(["cache", "--cache-dir", str(cache), "export", str(link)]) == 0
    assert link.is_symlink() and len(json.loads(real.read_text())["namespaces"]) == 1
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()))
    reader.start()
    assert main(["cache", "--cache-dir", str(cache), "export", str(fifo)]) == 0
    reader.join(timeout=30)
    assert len(json.loads(read[0])["namespaces"]) == 1
    assert not fifo.is_file() and fifo.exists()  # still the FIFO
    assert "exported 2 winner(s)" in capsys.readouterr().err  # not in the document, were it standard output
