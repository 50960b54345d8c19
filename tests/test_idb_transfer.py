"""The page's import and export of stored winners a slice at a time (backends/idb_transfer.py,
issue 28), natively on web/idb.js's helpers as dicts (tests/fake_idb.py).

What is checked: an import is read and checked whole before the one write (a bad entry at the end
writes nothing, with the error the plain path gives), it gives the same store as the plain import
for every shape of document, JavaScript text is taken a piece at a time, and the work pauses
between slices so that other work runs meanwhile; an export lists what the whole-store export
listed, text and object alike, across slices and namespaces.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from fake_idb import FakeIdb

from wgtune import Key, StoredEntry, StoreError
from wgtune.backends import idb_transfer
from wgtune.backends.idb_transfer import ExportDocument, export_document, export_text, import_export
from wgtune.backends.indexeddb import IndexedDBEntries
from wgtune.backends.slices import Slices
from wgtune.store.format import canonical_namespace, encode_document, encode_export

NAMESPACE = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "d", "driver": "", "backend": "webgpu"},
             "tuner": "default"}
OTHER = {**NAMESPACE, "tuner": "other"}
NS = canonical_namespace(NAMESPACE)


def entry(n: int, winner: int = 1, set_name: str = "matmul", checked: bool = False) -> StoredEntry:
    return StoredEntry(set_name, Key({"n": n}), "sum", winner, f"k{winner}",
                       tuple({"name": f"k{i}", "median": 1.0, "samples": [1.0]} for i in range(winner + 1)),
                       checked=checked)


def run(coro):
    return asyncio.run(coro)


def document(namespace: dict, numbers, **fields) -> dict:
    return encode_document(namespace, [entry(n, **fields) for n in numbers])


SHAPES = {
    "export": encode_export([document(NAMESPACE, range(5)), document(OTHER, range(3))]),
    "single-document": document(NAMESPACE, range(4), checked=True),
    "fields-after-entries": {"namespaces": [{"entries": [entry(1).to_json(), entry(2).to_json()], **NAMESPACE,
                                             "format": "wgtune.cache/1"}], "format": "wgtune.export/1"},
    "same-namespace-twice": encode_export([document(NAMESPACE, [1]), document(NAMESPACE, [1], winner=0)]),
    "no-entries": encode_export([{"format": "wgtune.cache/1", **OTHER}]),
    "export-with-stray-entries": {"format": "wgtune.export/1", "entries": [1, 2], "namespaces": []},
    "stray-entries-of-entries": {"format": "wgtune.export/1", "entries": [entry(9).to_json()],
                                 "namespaces": [document(OTHER, [1])]},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("piece", [7, 1 << 20])
def test_a_sliced_import_stores_what_the_plain_import_stores(shape, piece, monkeypatch):
    monkeypatch.setattr(idb_transfer, "TEXT_PIECE", piece)  # 7: values cut at every piece's end
    text = json.dumps(SHAPES[shape], indent=1)
    sliced, plain = FakeIdb(), FakeIdb()
    plain.entries[(NS, "matmul", '{"n":1}')] = sliced.entries[(NS, "matmul", '{"n":1}')] = "kept unless replaced"
    count = run(import_export(sliced, text))
    run(IndexedDBEntries(plain).import_document(IndexedDBEntries.check_import(text)))
    assert sliced.entries == plain.entries
    # What it stored: a key given twice ("same-namespace-twice") is one record, one entry counted.
    assert count == sum(value != "kept unless replaced" for value in sliced.entries.values())
    assert sliced.calls.count("importer.write") == 1 and "putEntries" not in sliced.calls


def test_the_import_is_checked_whole_before_its_one_write_and_a_bad_entry_at_the_end_writes_nothing():
    idb = FakeIdb()
    good = document(NAMESPACE, range(300))
    bad = {**document(OTHER, [1]), "entries": [entry(1).to_json(), {**entry(2).to_json(), "winner": 7}]}
    text = json.dumps(encode_export([good, bad]))
    with pytest.raises(StoreError) as raised:
        run(import_export(idb, text, Slices(budget=0)))
    with pytest.raises(StoreError) as plainly:
        IndexedDBEntries.check_import(text)
    assert str(raised.value) == str(plainly.value) and "namespace 1 of the export: entry 1" in str(raised.value)
    assert idb.entries == {} and idb.calls == []  # nothing staged was ever written
    with pytest.raises(StoreError, match=r"^the file is not JSON"):
        run(import_export(idb, text[:-40]))
    assert idb.entries == {}


def test_a_failed_write_raises_and_the_import_counts_nothing():
    idb = FakeIdb()
    idb.fail_puts = True
    with pytest.raises(RuntimeError, match="QuotaExceeded"):
        run(import_export(idb, json.dumps(document(NAMESPACE, range(10)))))
    assert idb.entries == {}


class JsText:
    """A JavaScript string as Python sees it through ``{length, slice}``: every slice counted."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.length = len(text)
        self.slices = 0

    def slice(self, start: int, end: int) -> str:
        self.slices += 1
        return self.text[start:end]


def test_javascript_text_is_taken_a_piece_at_a_time(monkeypatch):
    monkeypatch.setattr(idb_transfer, "TEXT_PIECE", 1000)
    text = json.dumps(document(NAMESPACE, range(200)))
    source = JsText(text)
    idb = FakeIdb()
    assert run(import_export(idb, source)) == 200
    assert source.slices >= len(text) // 1000  # never the whole text at once
    repeated = text.replace('"tuner": "default"', '"tuner": "default", "tuner": "again"')
    with pytest.raises(StoreError) as plainly:
        IndexedDBEntries.check_import(repeated)
    with pytest.raises(StoreError) as raised:  # read whole by the plain path
        run(import_export(idb, JsText(repeated)))
    assert str(raised.value) == str(plainly.value)


async def _with_ticker(work):
    """``work`` beside a coroutine that counts the loop's turns: how often the work let others run."""
    ticks = 0
    running = True

    async def ticker():
        nonlocal ticks
        while running:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.get_running_loop().create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    result = await work
    running = False
    await task
    return result, ticks - before


def test_an_import_and_an_export_pause_between_slices_and_other_work_runs_meanwhile():
    idb = FakeIdb()
    slices = Slices(budget=0)  # every entry ends a slice: the pauses are countable
    count, ticks = run(_with_ticker(import_export(idb, json.dumps(document(NAMESPACE, range(500))), slices)))
    assert count == 500 and slices.pauses >= 500 and ticks >= 500
    exporting = Slices(budget=0)
    pieces: list[str] = []
    (entries, _namespaces), ticks = run(_with_ticker(export_text(idb, pieces.append, exporting)))
    assert entries == 500 and exporting.pauses >= 500 and ticks >= 500
    unsliced = Slices(budget=3600)
    run(import_export(FakeIdb(), json.dumps(document(NAMESPACE, range(500))), unsliced))
    assert unsliced.pauses == 0


def _stored(idb: FakeIdb) -> None:
    """Two namespaces of entries, a damaged record and a damaged namespace."""
    for n in range(7):
        set_name = "matmul" if n % 2 else "conv"
        idb.entries[(NS, set_name, json.dumps({"n": n}, separators=(",", ":")))] = json.dumps(
            entry(n, set_name=set_name).to_json(), separators=(",", ":"))
    idb.entries[(NS, "matmul", '{"n":99}')] = "{not json"
    idb.entries[(canonical_namespace(OTHER), "matmul", '{"n":1}')] = json.dumps(entry(1).to_json())
    idb.entries[("not a namespace", "matmul", '{"n":3}')] = json.dumps(entry(3).to_json())
    # Nested past what the stack allows unbounded: read with the bounded parser, it is damage like the others.
    idb.entries[('{"a":' * 100_000 + "1" + "}" * 100_000, "matmul", '{"n":5}')] = json.dumps(entry(5).to_json())


@pytest.mark.parametrize("per_request", [1, 3, 1000])
def test_an_export_lists_what_the_whole_store_export_lists_as_text_and_as_an_object(per_request, monkeypatch, caplog):
    monkeypatch.setattr(idb_transfer, "EXPORT_SLICE", per_request)  # slices end inside and across namespaces
    idb = FakeIdb()
    _stored(idb)
    mine = encode_document(NAMESPACE, [entry(n, set_name="matmul" if n % 2 else "conv") for n in range(7)])
    whole = encode_export(sorted([mine, encode_document(OTHER, [entry(1)])],
                                 key=lambda doc: canonical_namespace({k: v for k, v in doc.items()
                                                                      if k not in ("format", "entries")})))
    pieces: list[str] = []
    assert run(export_text(idb, pieces.append, Slices(budget=0))) == (8, 2)
    text = "".join(pieces)
    assert json.loads(text) == whole
    assert len(text.splitlines()) == 1 + 2 + 8 + 3  # an entry a line, as `wgtune cache export` writes
    assert run(export_document(idb, ExportDocument(), Slices(budget=0))) == whole
    assert "not exporting 3 damaged record(s)" in caplog.text


def test_an_empty_store_exports_an_empty_document():
    pieces: list[str] = []
    assert run(export_text(FakeIdb(), pieces.append)) == (0, 0)
    assert json.loads("".join(pieces)) == {"format": "wgtune.export/1", "namespaces": []}
    assert run(export_document(FakeIdb(), ExportDocument())) == {"format": "wgtune.export/1", "namespaces": []}


def test_a_store_opened_over_many_records_decodes_each_only_when_its_key_is_asked_for(monkeypatch, caplog):
    from wgtune.backends import indexeddb

    idb = FakeIdb()
    run(IndexedDBEntries(idb).put(NAMESPACE, [entry(n) for n in range(500)]))
    idb.entries[(NS, "matmul", '{"n":900}')] = "{not json"
    decoded = []
    real = indexeddb.decode_record
    monkeypatch.setattr(indexeddb, "decode_record", lambda *args: decoded.append(args[1]) or real(*args))
    store = run(indexeddb.IndexedDBStore.open(idb, NAMESPACE))
    assert decoded == [] and store.undecoded == 501  # read, none decoded: nothing for the GC to walk
    assert store.lookup("matmul", Key({"n": 7})) == entry(7) and decoded == ['{"n":7}'] and store.undecoded == 500
    assert store.lookup("matmul", Key({"n": 7})) == entry(7) and len(decoded) == 1  # kept decoded
    assert store.lookup("matmul", Key({"n": 900})) is None and "damaged stored winner" in caplog.text
    assert store.lookup("matmul", Key({"n": 901})) is None
    assert store.count() == 500 and len(store.load()) == 500 and store.undecoded == 0
