"""What an import says it imported, where its document gives one namespace, set and key twice
(once in one namespace's entries, or in two documents of the same namespace): the entries it
stored, each once, the last one given kept; natively (``cache_transfer.py``: the streamed path, the
plain one, ``wgtune cache import``), in the page (``idb_transfer.py``, on the fake IndexedDB), and
through each ``Database.import_from``: the IndexedDB one's whole-document import
(``idb_entries.py``) and the old file store's (``DocumentStore.import_document``). Each once said
2 of the one entry stored (found from outside)."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from fake_idb import FakeIdb
from test_sqlite_store import LAVAPIPE, OTHER_GPU, entry

from wgtune.backends import cache_transfer, idb_transfer
from wgtune.backends.cache_transfer import SqliteDatabase, import_cache, import_document
from wgtune.backends.file_store import LegacyDocuments
from wgtune.backends.idb_transfer import import_export
from wgtune.backends.indexeddb import IndexedDBDatabase
from wgtune.backends.sqlite_store import CacheDatabase
from wgtune.cli import main
from wgtune.store.format import canonical_namespace, namespace_for


def document(identity, *entries) -> dict:
    return {"format": "wgtune.cache/1", **namespace_for(identity), "entries": [e.to_json() for e in entries]}


def export(*documents) -> dict:
    return {"format": "wgtune.export/1", "namespaces": list(documents)}


def reordered(document: dict) -> dict:
    """``document`` with its fields, and its device's, in the reverse order: the same namespace."""
    return {name: dict(reversed(value.items())) if isinstance(value, dict) else value
            for name, value in reversed(document.items())}


# Each: the document, and how many entries it stores.
TWICE = {
    "one-namespace": (document(LAVAPIPE, entry(1), entry(2), entry(1, winner=1)), 2),
    "same-namespace-twice": (export(document(LAVAPIPE, entry(1)), document(LAVAPIPE, entry(1, winner=1))), 1),
    # The second document's namespace written in another order: one namespace (its canonical text).
    "same-namespace-reordered": (export(document(LAVAPIPE, entry(1)),
                                        reordered(document(LAVAPIPE, entry(1, winner=1)))), 1),
    # A namespace's fields after its entries: which namespace they are of is known at its end.
    "fields-after-entries": ({"namespaces": [{"entries": [entry(1).to_json(), entry(1, winner=1).to_json()],
                                              **namespace_for(LAVAPIPE), "format": "wgtune.cache/1"}],
                              "format": "wgtune.export/1"}, 1),
    # Top-level entries that are none (the stream gives up on them): imported the plain way.
    "plain-path": ({**export(document(LAVAPIPE, entry(1), entry(1, winner=1))), "entries": [1, 2]}, 1),
    # The same set and key in two namespaces: two entries, each counted.
    "two-namespaces": (export(document(LAVAPIPE, entry(1), entry(1, winner=1)), document(OTHER_GPU, entry(1))), 2),
}


def stored(database: CacheDatabase) -> list:
    return [(canonical_namespace(namespace), found.set_name, found.key.to_json(), found.winner)
            for namespace, found in database.entries()[0]]


def winner_of_the_key_given_twice(stored: list) -> int:
    """The winner stored of LAVAPIPE's entry(1), which each document gives twice: 0, then 1."""
    return next(winner for namespace, _set, key, winner in stored
                if namespace == canonical_namespace(namespace_for(LAVAPIPE)) and key == entry(1).key.to_json())


@pytest.mark.parametrize("chunk", [3, 1 << 20])
@pytest.mark.parametrize("shape", sorted(TWICE))
def test_a_native_import_counts_a_key_given_twice_once_and_keeps_the_last(tmp_path, monkeypatch, shape, chunk):
    monkeypatch.setattr(cache_transfer, "CHUNK", chunk)  # 3: values cut at every chunk's end
    obj, count = TWICE[shape]
    path = tmp_path / "import.json"
    path.write_text(json.dumps(obj, indent=1))
    streamed, plain = CacheDatabase(tmp_path / "streamed"), CacheDatabase(tmp_path / "plain")
    assert import_cache(streamed, path) == count
    assert import_document(plain, obj) == count
    assert len(stored(streamed)) == count and stored(streamed) == stored(plain)
    assert winner_of_the_key_given_twice(stored(streamed)) == 1


def test_wgtune_cache_import_prints_the_entries_it_stored(tmp_path, capsys):
    path = tmp_path / "import.json"
    path.write_text(json.dumps(TWICE["one-namespace"][0]))
    assert main(["cache", "--cache-dir", str(tmp_path / "cache"), "import", str(path)]) == 0
    assert "imported 2 winner(s) into" in capsys.readouterr().out
    assert main(["cache", "--cache-dir", str(tmp_path / "cache"), "show", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


@pytest.mark.parametrize("piece", [7, 1 << 20])
@pytest.mark.parametrize("shape", sorted(TWICE))
def test_the_pages_import_counts_a_key_given_twice_once_and_keeps_the_last(monkeypatch, shape, piece):
    monkeypatch.setattr(idb_transfer, "TEXT_PIECE", piece)  # 7: values cut at every piece's end
    obj, count = TWICE[shape]
    idb = FakeIdb()
    assert asyncio.run(import_export(idb, json.dumps(obj, indent=1))) == count
    assert len(idb.entries) == count
    records = [(namespace, set_name, key, json.loads(text)["winner"]) for (namespace, set_name, key), text
               in idb.entries.items()]
    assert winner_of_the_key_given_twice(records) == 1


def import_from(database, obj: dict) -> int:
    """``Database.import_from`` of ``obj``'s JSON text, as ``wgtune cache import -`` hands it (on a
    loop: the fake IndexedDB's helpers suspend, as the page's promises do)."""
    return asyncio.run(database.import_from(io.BytesIO(json.dumps(obj, indent=1).encode())))


def listed(database) -> list:
    """What ``database`` lists, as :func:`stored` gives it."""
    return [(canonical_namespace(namespace), found.set_name, found.key.to_json(), found.winner)
            for namespace, found in asyncio.run(database.entries()).entries]


@pytest.mark.parametrize("shape", sorted(TWICE))
def test_the_indexeddb_databases_import_from_counts_a_key_given_twice_once_and_keeps_the_last(shape):
    obj, count = TWICE[shape]  # IndexedDBEntries.import_document: the whole document, one putEntries
    idb = FakeIdb()
    assert import_from(IndexedDBDatabase(idb), obj) == count
    assert len(idb.entries) == count
    records = [(namespace, set_name, key, json.loads(text)["winner"]) for (namespace, set_name, key), text
               in idb.entries.items()]
    assert winner_of_the_key_given_twice(records) == 1


@pytest.mark.parametrize("shape", sorted(TWICE))
def test_the_file_stores_import_from_counts_a_key_given_twice_once_and_keeps_the_last(tmp_path, shape):
    obj, count = TWICE[shape]  # DocumentStore.import_document: a locked merge per document
    database = LegacyDocuments(tmp_path)
    assert import_from(database, obj) == count
    assert len(listed(database)) == count
    assert winner_of_the_key_given_twice(listed(database)) == 1


# Keys that differ only as True and 1 do: two slots where a key's JSON is the slot (SQLite, IndexedDB),
# one where the Key is (the file store's documents: Key's doc). Whichever, the count is what is stored.
TRUE_AND_ONE = document(LAVAPIPE, entry(1), entry(True, winner=1))


@pytest.mark.parametrize("make", [SqliteDatabase, LegacyDocuments, lambda _directory: IndexedDBDatabase(FakeIdb())],
                         ids=["sqlite", "file-store", "indexeddb"])
def test_an_imports_count_is_what_its_database_lists(tmp_path, make):
    database = make(tmp_path)
    assert import_from(database, TRUE_AND_ONE) == len(listed(database))
