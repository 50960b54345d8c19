"""Damage in the native cache never crashes a command, and costs only what it touched (issue 30).

Each case makes its own hostile files in a temporary directory: a row holding another slot's
entry, old documents with integers of thousands of digits or nested 100,000 deep, namespace
texts in the database that are no namespace, a database SQLite calls malformed, other programs'
files beside the cache, an old document's lock that is a directory. What must hold: every read
answers its own slot or nothing, the damage is set aside (the file, the row) and said, only the
damaged keys are tuned again, and ``open_store``, the migration and ``wgtune cache
list/show/export/clear`` all finish. Read-only caches, stuck writers and foreign databases are in
``test_store_damage_locks.py``.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sqlite3

import pytest
from fakes import FakeDevice, call, make_set, make_tuner

from wgtune import Key, StoredEntry
from wgtune.backends.cache_files import set_aside_database
from wgtune.backends.cache_transfer import SqliteDatabase
from wgtune.backends.file_store import FileStore, document_name
from wgtune.backends.local import open_store
from wgtune.backends.sqlite_store import DATABASE_NAME, SqliteStore
from wgtune.cli import main
from wgtune.runner import run_inline
from wgtune.store.format import canonical_namespace, document_text, encode_document

LAPTOP = {"wgtune": "0.1", "device": {"vendor": "v", "device": "laptop", "driver": "1", "backend": "vulkan"},
          "tuner": "default"}
DESKTOP = {**LAPTOP, "device": {**LAPTOP["device"], "device": "desktop"}}


def entry(n: int, set_name: str = "matmul", winner: int = 0) -> StoredEntry:
    results = ({"name": "a", "index": 0, "median": 0.002, "samples": [0.002, 0.0021]},
               {"name": "b", "index": 1, "median": 0.003, "samples": [0.003, 0.0031]})
    return StoredEntry(set_name, Key({"n": n}), "c0ffee", winner, "ab"[winner], results)


def sql(directory, statement: str, *parameters) -> list:
    connection = sqlite3.connect(directory / DATABASE_NAME)
    try:
        with connection:
            return connection.execute(statement, parameters).fetchall()
    finally:
        connection.close()


def cache(capsys, directory, *action: str) -> tuple[int, str, str]:
    """``wgtune cache ACTION --cache-dir DIRECTORY``: its exit status, standard output and error."""
    status = main(["cache", "--cache-dir", str(directory), *action])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def every_command_finishes(capsys, directory) -> dict:
    """Every cache command on ``directory`` exits 0 (nothing raised); the export, parsed."""
    for action in (["list"], ["show"], ["show", "--json"], ["show", "--candidates"]):
        status, _out, err = cache(capsys, directory, *action)
        assert status == 0, (action, err)
    status, out, err = cache(capsys, directory, "export", "-")
    assert status == 0, err
    exported = json.loads(out)
    assert open_store(str(directory), LAPTOP) is not None
    status, _out, err = cache(capsys, directory, "clear")
    assert status == 0, err
    return exported


# -- a slot serves only its own entry ------------------------------------------------------------


def scripted() -> FakeDevice:
    device = FakeDevice()
    device.script("a", duration=2e-3)
    device.script("b", duration=1e-3)
    return device


@pytest.mark.parametrize("holds", ["another key's", "another set's"])
def test_a_row_holding_another_slots_entry_is_set_aside_said_and_tuned_again(tmp_path, caplog, holds):
    device, tunables = scripted(), make_set("a", "b")
    first = make_tuner(device, store=SqliteStore(tmp_path, LAPTOP))
    for n in (4, 8):
        first.execute(tunables, call(device, [1.0], n=n))
    assert len(first.records.records) == 2
    first.store.database.close()
    four, eight = Key({"n": 4}).to_json(), Key({"n": 8}).to_json()
    [(text,)] = sql(tmp_path, "SELECT entry FROM entries WHERE key = ?", eight)
    if holds == "another set's":
        text = json.dumps({**json.loads(text), "table": "softmax", "key": {"n": 4}})
    sql(tmp_path, "UPDATE entries SET entry = ? WHERE key = ?", text, four)

    again = make_tuner(device, store=SqliteStore(tmp_path, LAPTOP))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        again.execute(tunables, call(device, [1.0], n=4))
        again.execute(tunables, call(device, [1.0], n=8))
    assert [record.key for record in again.records.records] == [Key({"n": 4})]  # its key tuned again, only
    said = [r.getMessage() for r in caplog.records if "damaged entr" in r.getMessage()]
    assert len(said) == 1 and "'fake' ['{\"n\":4}']" in said[0] and "holds the entry of" in said[0], said
    assert sql(tmp_path, "SELECT set_name, key FROM damaged") == [("fake", four)]
    [(stored,)] = sql(tmp_path, "SELECT entry FROM entries WHERE key = ?", four)
    assert json.loads(stored)["key"] == {"n": 4} and json.loads(stored)["table"] == "fake"  # re-tuned, stored


def exported_entries(directory) -> list[StoredEntry]:
    out = io.StringIO()
    run_inline(SqliteDatabase(directory).export_to(out))
    return [StoredEntry.from_json(raw) for document in json.loads(out.getvalue())["namespaces"]
            for raw in document["entries"]]


READERS = {
    "lookup": lambda directory: [SqliteStore(directory, LAPTOP).lookup("matmul", Key({"n": n})) for n in (1, 2)],
    "load": lambda directory: SqliteStore(directory, LAPTOP).load(),
    "show": lambda directory: [e for _namespace, e in run_inline(SqliteDatabase(directory).entries()).entries],
    "export": exported_entries,
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_read_of_the_database_refuses_a_row_of_another_slot(tmp_path, reader):
    store = SqliteStore(tmp_path, LAPTOP)
    store.save_many([entry(1), entry(2, winner=1)])
    store.database.close()
    sql(tmp_path, "UPDATE entries SET entry = ? WHERE key = ?", json.dumps(entry(2, winner=1).to_json()),
        Key({"n": 1}).to_json())
    found = [found for found in READERS[reader](tmp_path) if found is not None]
    assert found == [entry(2, winner=1)]  # the misplaced copy is never served for n=1


def test_a_legacy_document_of_another_namespace_under_this_namespaces_name_serves_nothing(tmp_path, caplog):
    path = tmp_path / document_name(LAPTOP)
    path.write_text(document_text(encode_document(DESKTOP, [entry(1)])))
    store = FileStore(tmp_path, LAPTOP)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert store.lookup("matmul", Key({"n": 1})) is None
    assert "is for namespace" in caplog.text and any(tmp_path.glob(path.name + ".corrupt-*"))


# -- old documents: huge integers, deep nesting, wrong types -----------------------------------


DIGITS = "9" * 5000


def hostile_document(where: str) -> str:
    text = document_text(encode_document(LAPTOP, [entry(1), entry(2)]))
    if where == "namespace field":
        return text.replace('"tuner": "default"', f'"tuner": {DIGITS}')
    if where == "device field":
        return text.replace('"vendor": "v"', f'"vendor": -{DIGITS}')
    if where == "entry":
        return text.replace('"winner": 0', f'"winner": {DIGITS}', 1)
    if where == "whole document":
        return DIGITS
    if where == "deep nesting":
        return text.replace('"tuner": "default"', '"tuner": ' + "[" * 100_000 + "]" * 100_000)
    if where == "wrong types":
        return text.replace('"entries": [', '"entries": {"x": [').replace("\n  ]\n}", "\n  ]}\n}")
    raise AssertionError(where)


@pytest.mark.parametrize("where", ["namespace field", "device field", "entry", "whole document", "deep nesting",
                                   "wrong types"])
def test_an_old_document_with_huge_integers_or_deep_nesting_never_crashes_a_command(tmp_path, capsys, caplog, where):
    hostile = tmp_path / document_name(LAPTOP)
    hostile.write_text(hostile_document(where))
    healthy = tmp_path / document_name(DESKTOP)
    healthy.write_text(document_text(encode_document(DESKTOP, [entry(3)])))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        store = open_store(str(tmp_path), LAPTOP)  # what open_tuner calls: the migration runs here
    assert store is not None
    assert SqliteStore(tmp_path, DESKTOP).lookup("matmul", Key({"n": 3})) == entry(3)  # the rest migrated
    if where == "entry":  # one damaged entry costs itself: the other is served, it is kept aside
        assert store.load() == [entry(2)] and sql(tmp_path, "SELECT COUNT(*) FROM damaged") == [(1,)]
        assert "an integer of 5000 digits" in caplog.text
    else:  # the document as a whole: kept byte for byte beside, said with its path
        assert store.load() == []
        assert (tmp_path / (hostile.name + ".corrupt")).read_text() == hostile_document(where)
        assert f"the cache document {hostile} is damaged" in caplog.text
    exported = every_command_finishes(capsys, tmp_path)
    assert [len(document["entries"]) for document in exported["namespaces"]] == [1] * (1 + (where == "entry"))


# -- namespace texts in the database that are no namespace -------------------------------------


NAMESPACE_TEXTS = {
    "deep nesting": "[" * 100_000 + "]" * 100_000,
    "deep nesting in a field": '{"tuner": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "huge integer": '{"wgtune": ' + DIGITS + "}",
    "huge integer in a version": json.dumps({**LAPTOP, "wgtune": "0.1." + DIGITS}),
    "a number": "12345",
    "wrong types": '{"wgtune": [1, 2], "device": "x", "tuner": {"a": [1]}}',
    "a reserved field": '{"format": "wgtune.cache/1", "entries": 3}',
    "a repeated field": '{"tuner": "a", "tuner": "b"}',
    "not JSON": '{"tuner": ',
    "bytes": b"\xff\xfe{}",
}


@pytest.mark.parametrize("what", sorted(NAMESPACE_TEXTS))
def test_a_namespace_text_that_is_no_namespace_never_crashes_a_command(tmp_path, capsys, what):
    store = SqliteStore(tmp_path, LAPTOP)
    store.save(entry(1))
    SqliteStore(tmp_path, DESKTOP).save(entry(2))
    store.database.close()
    sql(tmp_path, "UPDATE namespaces SET namespace = ? WHERE namespace = ?", NAMESPACE_TEXTS[what],
        canonical_namespace(DESKTOP))
    odd_but_valid = what == "huge integer in a version"  # a release of the laptop's line: read as its own
    reopened = open_store(str(tmp_path), LAPTOP)
    assert reopened is not None and reopened.lookup("matmul", Key({"n": 1})) == entry(1)
    assert reopened.lookup("matmul", Key({"n": 2})) == (entry(2) if odd_but_valid else None)
    status, _out, err = cache(capsys, tmp_path, "show")
    assert status == 0 and ("a damaged namespace" in err or odd_but_valid), err
    exported = every_command_finishes(capsys, tmp_path)
    assert [len(document["entries"]) for document in exported["namespaces"]] == [1] * (1 + odd_but_valid)
    assert {document["device"]["device"] for document in exported["namespaces"]} == {"laptop"}


# -- a database SQLite calls malformed ---------------------------------------------------------


def filled(directory, count: int) -> bytes:
    store = SqliteStore(directory, LAPTOP)
    store.save_many([entry(n) for n in range(count)])
    store.database.close()
    return (directory / DATABASE_NAME).read_bytes()


def test_a_malformed_database_with_a_valid_header_is_set_aside_and_a_fresh_one_made(tmp_path, capsys, caplog):
    data = bytearray(filled(tmp_path, 50))
    data[4096:] = bytes(len(data) - 4096)  # SQLite's header and first page whole, every other page zeros
    (tmp_path / DATABASE_NAME).write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        store = open_store(str(tmp_path), LAPTOP)
        assert store is not None and store.lookup("matmul", Key({"n": 1})) is None
        store.save(entry(1))
    [aside] = tmp_path.glob(DATABASE_NAME + ".corrupt-*[0-9Z]")
    assert aside.read_bytes() == bytes(data)  # kept for a post-mortem, byte for byte
    assert caplog.text.count("malformed); set aside as") == 1 and f"set aside as {aside.name}" in caplog.text
    assert SqliteStore(tmp_path, LAPTOP).lookup("matmul", Key({"n": 1})) == entry(1)  # the fresh one keeps
    status, out, err = cache(capsys, tmp_path, "clear")
    assert status == 0 and "removed 1 winner(s)" in out, err


def test_a_database_malformed_past_what_opening_reads_is_set_aside_at_the_read_that_meets_it(tmp_path, caplog):
    data = bytearray(filled(tmp_path, 400))
    data[-3 * 4096:] = b"\x55" * (3 * 4096)  # the last pages: entries' rows, not the schema
    (tmp_path / DATABASE_NAME).write_bytes(bytes(data))
    store = open_store(str(tmp_path), LAPTOP)
    assert store is not None
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        found = [store.lookup("matmul", Key({"n": n})) for n in range(400)]
        store.save(entry(1000))
    assert None in found  # the read that met the damage, and every one after: a fresh database
    assert all(found_one in (None, entry(n)) for n, found_one in enumerate(found))
    assert caplog.text.count("malformed); set aside as") == 1
    assert len(list(tmp_path.glob(DATABASE_NAME + ".corrupt-*[0-9Z]"))) == 1
    assert SqliteStore(tmp_path, LAPTOP).lookup("matmul", Key({"n": 1000})) == entry(1000)


def test_one_damaged_page_costs_its_own_rows_not_every_winner(tmp_path, capsys, caplog):
    """A stray write over one page of the entries (a bad sector): the read that meets it sets the
    database aside, and every row still readable in the copy is moved into the fresh one at once,
    even by a listing (``cache show``): once, every winner of the cache was tuned again."""
    data = bytearray(filled(tmp_path, 400))
    leaves = [page for page in range(9, len(data) // 4096) if data[page * 4096] == 0x0D]  # table leaves: entries'
    middle = leaves[len(leaves) // 2] * 4096
    data[middle + 8:middle + 72] = b"\xff" * 64  # its cell pointers
    (tmp_path / DATABASE_NAME).write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        status, _out, _err = cache(capsys, tmp_path, "show")
    assert status == 0
    [aside] = tmp_path.glob(DATABASE_NAME + ".corrupt-*[0-9Z]")
    assert aside.read_bytes() == bytes(data)  # the copy stays as it was
    later = SqliteStore(tmp_path, LAPTOP)
    found = {n: later.lookup("matmul", Key({"n": n})) for n in range(400)}
    kept = [n for n, one in found.items() if one is not None]
    assert all(found[n] == entry(n) for n in kept)
    assert 400 - 2 * 4096 // 200 <= len(kept) < 400  # one leaf's rows lost (a leaf holds ~20 of these), no more
    assert f"moved {len(kept)} stored winner(s) still readable in {aside.name}" in caplog.text


def damaged_page(directory, count: int) -> None:
    """``count`` winners in ``directory``'s database, one table leaf of its entries overwritten."""
    data = bytearray(filled(directory, count))
    leaves = [page for page in range(9, len(data) // 4096) if data[page * 4096] == 0x0D]
    middle = leaves[len(leaves) // 2] * 4096
    data[middle + 8:middle + 72] = b"\xff" * 64
    (directory / DATABASE_NAME).write_bytes(bytes(data))


@pytest.mark.parametrize("command", ["show", "export", "bundle", "clear"])
def test_the_first_command_after_a_damaged_page_gives_every_winner_still_readable(tmp_path, capsys, command):
    """The command that meets the damage sets the database aside and moves the readable rows into a
    fresh one; then it reads that one. Once, it read nothing: a bundle of no winners, exit 0 (a fleet
    shipping it would have lost every winner), an empty listing, an export or clear that failed."""
    directory = tmp_path / "cache"
    directory.mkdir()
    damaged_page(directory, 400)
    if command == "show":
        status, out, err = cache(capsys, directory, "show", "--json")
        shown = len(json.loads(out))
    elif command == "export":
        status, _out, err = cache(capsys, directory, "export", str(tmp_path / "out.json"))
        shown = sum(len(doc["entries"]) for doc in json.loads((tmp_path / "out.json").read_text())["namespaces"])
    elif command == "bundle":
        status = main(["bundle", str(tmp_path / "bundle.json"), str(directory)])
        err = capsys.readouterr().err
        shown = sum(len(doc["entries"]) for doc in json.loads((tmp_path / "bundle.json").read_text())["namespaces"])
    else:
        status, out, err = cache(capsys, directory, "clear")
        shown = int(out.split("removed ")[1].split()[0])
    kept = SqliteStore(directory, LAPTOP).count()
    assert status == 0, err
    if command == "clear":  # a delete may not read the damaged page: it clears all the same
        assert shown >= 400 - 2 * 4096 // 200 and kept == 0, (shown, kept, err)
        return
    assert 400 - 2 * 4096 // 200 <= shown < 400, (shown, err)  # one leaf's rows lost, no more
    assert kept == shown
    assert "moved" in err and "still readable" in err


@pytest.mark.parametrize(("cut", "least"), [(0.9, 300), (0.6, 120), (0.3, 20)])
def test_a_database_cut_short_keeps_the_rows_of_the_pages_it_still_has(tmp_path, caplog, cut, least):
    """A copy interrupted (a full disk, a sync cut off): SQLite calls the whole file malformed, its
    header counting pages the file lacks; once, every winner of it was tuned again."""
    data = filled(tmp_path, 400)
    short = data[: int(len(data) * cut) + 1000]  # mid-page: the last page cut too
    (tmp_path / DATABASE_NAME).write_bytes(short)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        store = open_store(str(tmp_path), LAPTOP)
        found = {n: store.lookup("matmul", Key({"n": n})) for n in range(400)}
    kept = [n for n, one in found.items() if one is not None]
    assert least <= len(kept) < 400 and all(found[n] == entry(n) for n in kept), len(kept)
    [aside] = tmp_path.glob(DATABASE_NAME + ".corrupt-*[0-9Z]")
    assert aside.read_bytes() == short
    assert f"moved {len(kept)} stored winner(s) still readable in {aside.name}" in caplog.text


def lost_as_said(text: str) -> tuple[str, int | None]:
    """What the salvage's warning says of the rows lost: ("exactly", n), ("at least", n) or ("unknown", None)."""
    said = re.search(r"still readable in \S+ into the fresh \S+; (at least )?(\d+ row\(s\)|an unknown number of rows) "
                     r"could not be read", text)
    assert said is not None, text
    if said[2].startswith("an unknown"):
        return "unknown", None
    return ("at least" if said[1] else "exactly"), int(said[2].split()[0])


def kept_of(directory, count: int) -> int:
    """How many of ``count`` winners (``filled``) the store at ``directory`` serves, each its own."""
    store = open_store(str(directory), LAPTOP)
    found = {n: store.lookup("matmul", Key({"n": n})) for n in range(count)}
    assert all(one in (None, entry(n)) for n, one in found.items())
    return sum(one is not None for one in found.values())


@pytest.mark.parametrize("cut", [0.95, 0.9, 0.75, 0.45, "a page's end"])
def test_a_database_cut_short_says_how_many_rows_it_lost_or_at_least_how_many_and_why(tmp_path, caplog, cut):
    """The rows of the pages a file cut short lacks cannot be counted (SQLite keeps no count but its
    pages): the warning said "N row(s) could not be read" of only those it knew, as though that
    were all (46 of the 121 lost; 0 of 247), once one more than were (a cell of zeros read as a row)."""
    data = filled(tmp_path / "whole", 400)
    end = len(data) // 2 // 4096 * 4096 if cut == "a page's end" else int(len(data) * cut) + 1000
    (tmp_path / DATABASE_NAME).write_bytes(data[:end])
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        kept = kept_of(tmp_path, 400)
    assert kept < 400 and f"moved {kept} stored winner(s) still readable" in caplog.text
    how, said = lost_as_said(caplog.text)
    if how == "exactly":
        assert said == 400 - kept
    else:
        assert said is None or said <= 400 - kept
        assert f"of the {len(data) // 4096} its header counts, and how many rows the missing pages held cannot be " \
               "known" in caplog.text
        assert ("(not an exact count: the file is cut short" if said is not None else "(the file is cut short") \
            in caplog.text


def pages_of(data: bytes | bytearray, kind: int) -> list[int]:
    """The pages (counted from 0) of one b-tree page kind from 6 on, past the schema's, ``meta``'s and
    ``namespaces``' and the entries' root: 0x0D a table leaf (the entries', and the empty roots of
    ``damaged`` and ``migrated``), 0x0A an index leaf, 0x02 an index's interior page (the entries')."""
    return [page for page in range(6, len(data) // 4096) if data[page * 4096] == kind]


@pytest.mark.parametrize("damage", ["a table leaf zeroed", "the index zeroed, a table leaf's cells all its first"])
def test_a_damaged_page_says_exactly_how_many_rows_it_lost(tmp_path, caplog, damage):
    """Where its pages are all there, the file counts its rows (each page's header counts its cells),
    however damaged the cells: the rows lost are that count less those read. Once, with the index
    unreadable and a leaf whose every cell pointer names its first cell (read as that one row over
    and over, no error), it said 0 were lost of the leaf's rows but one."""
    data = bytearray(filled(tmp_path / "whole", 400))
    leaves = pages_of(data, 0x0D)
    middle = leaves[len(leaves) // 2] * 4096
    if damage == "a table leaf zeroed":
        data[middle:middle + 4096] = bytes(4096)
    else:
        for page in pages_of(data, 0x0A) + pages_of(data, 0x02):  # the entries' index, every page of it
            data[page * 4096:(page + 1) * 4096] = bytes(4096)
        cells = int.from_bytes(data[middle + 3:middle + 5], "big")
        data[middle + 8:middle + 8 + 2 * cells] = data[middle + 8:middle + 10] * cells
    (tmp_path / DATABASE_NAME).write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        kept = kept_of(tmp_path, 400)
    assert kept < 400
    assert lost_as_said(caplog.text) == ("exactly", 400 - kept)


@pytest.mark.parametrize("how", ["set aside by another process", "deleted"])
def test_a_store_whose_database_is_moved_away_while_open_saves_into_the_one_at_the_path(tmp_path, caplog, how):
    """A long run holds the database open while another process sets it aside (it met damage this
    run never read: ``set_aside_database`` is what it calls) and makes a fresh one, or while someone
    deletes it: the run's later winners must land in the database at the path, not silently in the
    copy set aside or in a file gone, which no later run reads."""
    filled(tmp_path, 10)
    running = open_store(str(tmp_path), LAPTOP)
    assert running.lookup("matmul", Key({"n": 1})) == entry(1)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        if how == "deleted":
            (tmp_path / DATABASE_NAME).unlink()
        else:
            assert set_aside_database(tmp_path / DATABASE_NAME, lambda _path: True) is not None
            SqliteStore(tmp_path, LAPTOP).save(entry(500))  # the other process's fresh database
        running.save(entry(1000))
        running.save(entry(1001))
    later = SqliteStore(tmp_path, LAPTOP)
    assert later.lookup("matmul", Key({"n": 1000})) == entry(1000)
    assert later.lookup("matmul", Key({"n": 1001})) == entry(1001)
    assert running.lookup("matmul", Key({"n": 1000})) == entry(1000)
    if how != "deleted":
        assert later.lookup("matmul", Key({"n": 500})) == entry(500)
    assert caplog.text.count("was moved or removed while this run had it open") == 1


# -- only wgtune's own files -------------------------------------------------------------------


@pytest.mark.parametrize("dropped", ["damaged", "migrated"])
def test_a_database_that_lost_one_of_its_tables_gets_it_back_and_keeps_its_winners(tmp_path, capsys, caplog, dropped):
    filled(tmp_path, 3)
    sql(tmp_path, f"DROP TABLE {dropped}")
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        status, out, err = cache(capsys, tmp_path, "list")
    assert status == 0 and "3" in out, err
    assert f"lacked its table(s) {dropped}" in caplog.text
    assert SqliteStore(tmp_path, LAPTOP).lookup("matmul", Key({"n": 2})) == entry(2)
    assert [len(document["entries"]) for document in every_command_finishes(capsys, tmp_path)["namespaces"]] == [3]


def test_a_later_releases_failure_kind_in_a_row_keeps_its_winner_serving_and_in_place(tmp_path, caplog):
    filled(tmp_path, 1)
    later = entry(0).to_json()
    later["results"][1] = {"name": "b", "error": "OutOfRegisters", "reason": "a kind this release does not know"}
    sql(tmp_path, "UPDATE entries SET entry = ?", json.dumps(later))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        served = SqliteStore(tmp_path, LAPTOP).lookup("matmul", Key({"n": 0}))
    assert served is not None and served.winner_name == "a" and "damaged" not in caplog.text
    assert sql(tmp_path, "SELECT COUNT(*) FROM damaged") == [(0,)]
    assert sql(tmp_path, "SELECT entry FROM entries") == [(json.dumps(later),)]  # left as the later release wrote it


def test_only_wgtunes_own_files_in_the_cache_directory_are_touched(tmp_path, capsys):
    import os

    foreign = {
        "package.json": b'{"name": "my-app", "version": "1.0.0"}',
        "notes.json": b"not json at all {",
        "tsconfig.json": b"[" * 1000,
        ".package.json.abc123.tmp": b"an editor's temp file",
        "my.lock": b"",
        **{f"package.json.corrupt-2000010{i}T000000000000Z": b"x" for i in range(8)},
    }
    for name, data in foreign.items():
        (tmp_path / name).write_bytes(data)
        os.utime(tmp_path / name, (1, 1))  # old: stale by age, were it wgtune's
    old = tmp_path / document_name(LAPTOP)
    old.write_text(document_text(encode_document(LAPTOP, [entry(1)])))
    store = open_store(str(tmp_path), LAPTOP)
    assert store is not None and store.lookup("matmul", Key({"n": 1})) == entry(1)
    store.save(entry(2))
    every_command_finishes(capsys, tmp_path)
    for name, data in foreign.items():
        assert (tmp_path / name).read_bytes() == data, name
    assert not old.exists() and (tmp_path / (old.name + ".migrated")).exists()


def test_an_old_documents_lock_that_is_a_directory_does_not_make_the_store_unusable(tmp_path, caplog):
    old = tmp_path / document_name(LAPTOP)
    old.write_text(document_text(encode_document(LAPTOP, [entry(1)])))
    (tmp_path / (old.name + ".lock")).mkdir()
    (tmp_path / (DATABASE_NAME + ".lock")).mkdir()
    (tmp_path / DATABASE_NAME).write_bytes(b"garbage where the database should be" * 10)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        store = open_store(str(tmp_path), LAPTOP)
        assert store is not None and store.lookup("matmul", Key({"n": 1})) == entry(1)
        store.save(entry(2))
    assert (tmp_path / (old.name + ".migrated")).exists() and (tmp_path / (old.name + ".lock")).is_dir()
    assert "is a directory, which no process can lock" in caplog.text
    assert any(tmp_path.glob(DATABASE_NAME + ".corrupt-*"))
    assert {e.slot for e in SqliteStore(tmp_path, LAPTOP).load()} == {entry(1).slot, entry(2).slot}


def test_with_wgtune_log_set_what_opening_the_store_says_shows_without_a_logging_setup(tmp_path):
    """``WGTUNE_LOG=minimal`` in a script that set up no logging: the warning that the cache was not
    a database (set aside) shows on stderr. Once, wgtune's handler came only with the tuner, after
    the store was opened, so the script saw nothing and every run tuned again."""
    from test_core_config_log import nothing_configured

    from wgtune import Config
    from wgtune.backends.local import open_tuner
    from wgtune.backends.native import NativeDevice
    from wgtune.tune.log import _QUIET as quiet_handler

    (tmp_path / DATABASE_NAME).write_bytes(b"\x00garbage" * 1024)
    config = Config.from_env({"WGTUNE_LOG": "minimal", "WGTUNE_CACHE_DIR": str(tmp_path)})
    with nothing_configured() as stderr:
        logging.getLogger("wgtune").addHandler(quiet_handler)  # as a library leaves it: Python's last resort silenced
        open_tuner(NativeDevice.open(), config=config, isolate=False)
    assert "wgtune.sqlite3" in stderr.getvalue() and "set aside" in stderr.getvalue(), stderr.getvalue()
