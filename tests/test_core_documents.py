"""The core's document store on an in-memory key-value store: merging, damage, the reserved
fields, export and import. Pure core: it runs natively and in Pyodide alike.

The key-value store here is a dict that records what the document store asks of it, so the tests
can tell not only what is stored in the end but that it was read and written under the lock, and
that a refused import wrote nothing at all.
"""

from __future__ import annotations

import json
import logging
from contextlib import asynccontextmanager

import pytest

from wgtune import Key, StoredEntry, StoreError
from wgtune.runner import run_inline
from wgtune.store.documents import DocumentStore, InlineStore
from wgtune.store.format import canonical_namespace, document_text, encode_document, encode_export

pytestmark = pytest.mark.core

LAPTOP = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "laptop"}, "tuner": "default"}
SERVER = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "server"}, "tuner": "default"}


class MemoryKeyValues:
    """A key-value store in a dict: ``texts`` what is stored, ``aside`` the set-aside copies,
    ``calls`` every operation in order (``lock``/``unlock`` around the locked ones)."""

    def __init__(self, keeps_copies: bool = True) -> None:
        self.texts: dict[str, str] = {}
        self.aside: dict[str, str] = {}
        self.calls: list[str] = []
        self.keeps_copies = keeps_copies
        self.held: set[str] = set()
        self.fail_set_aside = False

    def name_for(self, namespace: dict) -> str:
        return canonical_namespace(namespace)

    def describe(self, name: str) -> str:
        return f"memory:{name}"

    async def get(self, name: str) -> str | None:
        self.calls.append("get")
        return self.texts.get(name)

    async def put(self, name: str, text: str) -> None:
        assert name in self.held, "a write outside the lock"
        self.calls.append("put")
        self.texts[name] = text

    async def remove(self, name: str) -> bool:
        self.calls.append("remove")
        return self.texts.pop(name, None) is not None

    async def names(self) -> list[str]:
        return sorted(self.texts)

    @asynccontextmanager
    async def locked(self, name: str):
        assert name not in self.held, "the lock taken twice"
        self.calls.append("lock")
        self.held.add(name)
        try:
            yield
        finally:
            self.held.discard(name)
            self.calls.append("unlock")

    async def set_aside(self, name: str, *, keep_original: bool) -> str | None:
        assert name in self.held, "set aside outside the lock"
        if self.fail_set_aside:
            raise PermissionError("read-only store")
        if not self.keeps_copies:
            return None
        copy = f"{name}.corrupt-{len(self.aside)}"
        self.aside[copy] = self.texts[name] if keep_original else self.texts.pop(name)
        return copy


def entry(n: int, winner: int = 1, set_name: str = "matmul") -> StoredEntry:
    return StoredEntry(set_name, Key({"n": n}), "sum", winner, f"k{winner}",
                       tuple({"name": f"k{i}", "median": 1.0, "samples": [1.0]} for i in range(winner + 1)))


def slots(entries) -> dict:
    return {e.slot: e for e in entries}


def store_text(namespace: dict, entries) -> str:
    return document_text(encode_document(namespace, entries))


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "wgtune" and r.levelno == logging.WARNING]


# -- merge on write --------------------------------------------------------------------------------


def test_a_save_keeps_what_another_writer_stored_since_this_one_loaded():
    key_values = MemoryKeyValues()
    mine, theirs = InlineStore(key_values, LAPTOP), InlineStore(key_values, LAPTOP)
    assert mine.load() == [] and theirs.load() == []  # both loaded before either wrote
    theirs.save(entry(1))
    mine.save(entry(2))
    mine.save(entry(1, winner=0))  # the same set and key: replaced, not added
    assert slots(InlineStore(key_values, LAPTOP).load()) == slots([entry(1, winner=0), entry(2)])


def test_a_save_reads_and_writes_under_the_lock():
    key_values = MemoryKeyValues()
    run_inline(DocumentStore(key_values).save(LAPTOP, [entry(1)]))
    assert key_values.calls == ["lock", "get", "put", "unlock"]


def test_namespaces_are_kept_apart():
    key_values = MemoryKeyValues()
    documents = DocumentStore(key_values)
    run_inline(documents.save(LAPTOP, [entry(1)]))
    run_inline(documents.save(SERVER, [entry(2)]))
    assert run_inline(documents.load(LAPTOP)) == [entry(1)]
    run_inline(documents.clear(LAPTOP))
    assert run_inline(documents.load(LAPTOP)) == []
    assert run_inline(documents.load(SERVER)) == [entry(2)]


# -- damaged data ----------------------------------------------------------------------------------


def test_a_damaged_entry_costs_only_itself(caplog):
    key_values = MemoryKeyValues()
    document = encode_document(LAPTOP, [entry(1), entry(2), entry(3)])
    document["entries"][1]["winner"] = -1
    original = json.dumps(document)
    key_values.texts[canonical_namespace(LAPTOP)] = original
    store = InlineStore(key_values, LAPTOP)

    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert slots(store.load()) == slots([entry(1), entry(3)])
    [message] = warnings_of(caplog)
    assert "skipped 1 damaged entry" in message and "winner" in message
    assert key_values.aside == {}  # a read moves nothing

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        store.save(entry(4))  # the rewrite drops the damaged entry, after keeping a copy
    assert "kept a copy" in " ".join(warnings_of(caplog))
    assert list(key_values.aside.values()) == [original]
    assert slots(store.load()) == slots([entry(1), entry(3), entry(4)])


@pytest.mark.parametrize(
    "damaged",
    [
        "{not json",
        json.dumps({"format": "someone-else/3", "entries": []}),
        json.dumps([1, 2, 3]),
        json.dumps({"format": "wgtune.cache/1", **LAPTOP, "entries": {}}),
        store_text(SERVER, [entry(1)]),  # another namespace's document under this one's name
    ],
    ids=["not-json", "wrong-format", "not-an-object", "entries-not-a-list", "other-namespace"],
)
def test_a_damaged_document_is_set_aside_and_reads_as_empty(caplog, damaged):
    key_values = MemoryKeyValues()
    name = canonical_namespace(LAPTOP)
    key_values.texts[name] = damaged
    store = InlineStore(key_values, LAPTOP)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert store.load() == []  # never raises
    assert any("damaged" in message and "kept a copy" in message for message in warnings_of(caplog))
    assert name not in key_values.texts and list(key_values.aside.values()) == [damaged]
    store.save(entry(7))  # the store works again
    assert store.load() == [entry(7)]


def test_a_damaged_document_that_cannot_be_set_aside_still_reads_as_empty(caplog):
    key_values = MemoryKeyValues()
    key_values.texts[canonical_namespace(LAPTOP)] = "{not json"
    key_values.fail_set_aside = True
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert InlineStore(key_values, LAPTOP).load() == []
    assert "could not be set aside" in " ".join(warnings_of(caplog))
    assert key_values.held == set()  # the lock was let go


def test_a_store_that_keeps_no_copies_ignores_a_damaged_document_until_the_next_write(caplog):
    key_values = MemoryKeyValues(keeps_copies=False)
    name = canonical_namespace(LAPTOP)
    key_values.texts[name] = "{not json"
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        assert InlineStore(key_values, LAPTOP).load() == []
    assert "ignoring it" in " ".join(warnings_of(caplog))
    assert key_values.texts[name] == "{not json"
    InlineStore(key_values, LAPTOP).save(entry(1))
    assert InlineStore(key_values, LAPTOP).load() == [entry(1)]


# -- the reserved fields ---------------------------------------------------------------------------


@pytest.mark.parametrize("reserved", ["format", "entries"])
def test_a_namespace_may_not_have_the_documents_own_fields(reserved):
    key_values = MemoryKeyValues()
    bad = {**LAPTOP, reserved: "x"}
    with pytest.raises(StoreError, match="clash"):
        InlineStore(key_values, bad)
    with pytest.raises(StoreError, match="clash"):
        run_inline(DocumentStore(key_values).save(bad, [entry(1)]))
    with pytest.raises(StoreError, match="clash"):
        encode_document(bad, [])
    assert key_values.texts == {} and "put" not in key_values.calls


# -- the whole store: list, export, import, clear ----------------------------------------------------


def test_export_then_import_reproduces_every_namespace():
    source, target = MemoryKeyValues(), MemoryKeyValues()
    run_inline(DocumentStore(source).save(LAPTOP, [entry(1), entry(2, set_name="softmax")]))
    run_inline(DocumentStore(source).save(SERVER, [entry(3)]))
    exported = json.loads(json.dumps(run_inline(DocumentStore(source).export())))
    assert exported["format"] == "wgtune.export/1" and len(exported["namespaces"]) == 2
    assert run_inline(DocumentStore(target).import_document(exported)) == 3
    assert target.texts == source.texts  # the very same documents


def test_export_leaves_out_damaged_documents_and_entries(caplog):
    key_values = MemoryKeyValues()
    run_inline(DocumentStore(key_values).save(LAPTOP, [entry(1)]))
    partly = encode_document(SERVER, [entry(2), entry(3)])
    partly["entries"][0]["key"] = {"n": [2]}
    key_values.texts[canonical_namespace(SERVER)] = json.dumps(partly)
    key_values.texts["junk"] = "{nope"
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        exported = run_inline(DocumentStore(key_values).export())
    assert [len(document["entries"]) for document in exported["namespaces"]] == [1, 1]
    messages = " ".join(warnings_of(caplog))
    assert "not exporting memory:junk" in messages and "skipped 1 damaged entry" in messages
    assert key_values.aside == {} and "junk" in key_values.texts  # exporting moves nothing


def test_documents_lists_every_document_with_what_is_wrong_with_it():
    key_values = MemoryKeyValues()
    run_inline(DocumentStore(key_values).save(LAPTOP, [entry(1)]))
    key_values.texts["junk"] = "[]"
    listed = {document.name: document for document in run_inline(DocumentStore(key_values).documents())}
    good = listed[canonical_namespace(LAPTOP)]
    assert good.namespace == LAPTOP and good.entries == [entry(1)] and good.damage is None
    assert listed["junk"].damage and "cache document" in listed["junk"].damage


def test_an_import_is_checked_whole_before_anything_is_written():
    key_values = MemoryKeyValues()
    run_inline(DocumentStore(key_values).save(LAPTOP, [entry(1)]))
    before, calls_before = dict(key_values.texts), len(key_values.calls)
    good = encode_document(SERVER, [entry(5)])
    bad = encode_document(LAPTOP, [entry(6)])
    bad["entries"][0]["winner"] = -1
    with pytest.raises(StoreError, match="winner"):  # the good namespace comes first: still nothing
        run_inline(DocumentStore(key_values).import_document(encode_export([good, bad])))
    assert key_values.texts == before and len(key_values.calls) == calls_before  # not even a lock taken
    with pytest.raises(StoreError, match="not JSON"):
        DocumentStore.check_import("[1, 2")
    with pytest.raises(StoreError, match="lacks the field"):
        DocumentStore.check_import(json.dumps(encode_export([{"format": "wgtune.cache/1", "entries": [{}]}])))


def test_an_import_merges_with_what_is_stored():
    key_values = MemoryKeyValues()
    run_inline(DocumentStore(key_values).save(LAPTOP, [entry(1), entry(2)]))
    single = encode_document(LAPTOP, [entry(2, winner=0), entry(4)])  # one namespace document imports too
    assert run_inline(DocumentStore(key_values).import_document(single)) == 2
    assert slots(run_inline(DocumentStore(key_values).load(LAPTOP))) == slots([entry(1), entry(2, winner=0), entry(4)])


def test_clear_all_forgets_every_namespace_each_under_its_lock():
    key_values = MemoryKeyValues()
    documents = DocumentStore(key_values)
    run_inline(documents.save(LAPTOP, [entry(1)]))
    run_inline(documents.save(SERVER, [entry(2)]))
    key_values.calls.clear()
    assert run_inline(documents.clear_all()) == 2
    assert key_values.texts == {}
    assert key_values.calls == ["lock", "remove", "unlock"] * 2
    assert run_inline(documents.clear_all()) == 0
