"""Tune records, the store protocol and its document format, dry runs."""

from __future__ import annotations

import json

import pytest
from fakes import FakeDevice, call, kernel, make_set, make_tuner, quiet

from wgtune import (
    Hit,
    Key,
    Launch,
    Measured,
    MemoryRecords,
    MemoryStore,
    RecordEffect,
    StoredEntry,
    StoreError,
    Trial,
    TuneFinished,
    TuneRecord,
    Unknown,
)
from wgtune.store.format import decode_document, decode_export, encode_document, encode_export
from wgtune.store.record import envelope
from wgtune.store.results import result_from_json, result_to_json

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def scripted_device():
    device = FakeDevice()
    device.script("a", duration=3e-3)
    device.script("b", duration=1e-3)
    device.script("c", compile_error="bad wgsl")
    return device


# -- records ---------------------------------------------------------------------------------


def test_a_tune_writes_one_record_with_every_field():
    device = scripted_device()
    tunables = make_set("a", "b", "c", kernel("d", priority=-1))
    tuner = make_tuner(device)
    args = call(device, [1.0])
    tuner.execute(tunables, args)

    [record] = tuner.records.records
    assert record.set_name == "fake"
    assert record.key == Key({"n": 4})
    assert record.checksum == tunables.checksum
    assert record.winner == 1
    assert [trial.name for trial in record.trials] == ["a", "b", "c"]
    assert all(trial.wall > 0 for trial in record.trials)
    assert record.short_circuit is None
    assert record.wall >= sum(trial.wall for trial in record.trials)
    assert record.dry_run is False
    assert record.stored is True
    assert record.effect is RecordEffect.CHANGED


def test_no_record_is_written_on_a_hit():
    device = scripted_device()
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    for _ in range(3):
        tuner.execute(tunables, call(device, [1.0]))
    assert len(tuner.records.records) == 1


def test_with_the_cache_off_nothing_is_stored_and_the_record_is_observed():
    device = scripted_device()
    store = MemoryStore()
    tunables = make_set("a", "b")
    tuner = make_tuner(device, store=store, config=quiet(cache=False))
    assert tuner.store is None
    assert tuner.execute(tunables, call(device, [1.0])).name == "b"
    [record] = tuner.records.records
    assert record.stored is False
    assert record.effect is RecordEffect.OBSERVED
    assert store.entries == {}


def test_with_the_cache_off_stored_winners_are_not_loaded():
    device = scripted_device()
    tunables = make_set("a", "b")
    store = MemoryStore()
    store.save(StoredEntry("fake", Key({"n": 4}), tunables.checksum, 0, "a"))
    tuner = make_tuner(device, store=store, config=quiet(cache=False))
    assert tuner.states(tunables) == {}


def test_a_record_round_trips_through_json_and_its_envelope_names_the_effect():
    record = TuneRecord(
        set_name="matmul",
        key=Key({"n": 1024, "dtype": "f32"}),
        checksum="abc",
        winner=2,
        trials=(Trial("a", 0.25), Trial("b", 0.5)),
        short_circuit=None,
        wall=1.0,
        dry_run=False,
        stored=True,
    )
    text = json.dumps(record.to_json())
    assert TuneRecord.from_json(json.loads(text)) == record
    line = envelope(record, at=1700000000.0)
    assert line["kind"] == "autotune"
    assert line["effect"] == "changed"
    assert line["at"] == 1700000000.0
    assert line["record"]["entry"] == {"key": {"dtype": "f32", "n": 1024}, "checksum": "abc"}
    observed = TuneRecord.from_json({**record.to_json(), "stored": False})
    assert envelope(observed, 0.0)["effect"] == "observed"


def test_a_record_sink_that_raises_does_not_lose_the_winner():
    class BrokenSink:
        def write(self, record):
            raise OSError("disk full")

    device = scripted_device()
    tunables = make_set("a", "b")
    tuner = make_tuner(device, records=BrokenSink())
    assert tuner.execute(tunables, call(device, [1.0])).name == "b"
    assert tuner.fastest(tunables, Key({"n": 4})) == Hit(1)


# -- dry runs --------------------------------------------------------------------------------


def test_a_dry_run_compiles_but_never_dispatches_or_profiles_and_stores_nothing():
    device = scripted_device()
    tunables = make_set("a", "b", "c")
    tuner = make_tuner(device, config=quiet(dry_run=True))
    ran = tuner.execute(tunables, call(device, [1.0]))

    assert ran.name == "a"  # nothing measured: the first candidate that compiled
    assert device.compiles == {"a": 1, "b": 1, "c": 1}
    assert device.dispatch_count == 0
    assert device.profile_count == 0
    assert tuner.store.entries == {}
    [record] = tuner.records.records
    assert record.dry_run is True
    assert record.stored is False
    assert record.effect is RecordEffect.OBSERVED
    assert [trial.name for trial in record.trials] == ["a", "b", "c"]


# -- the store -------------------------------------------------------------------------------


def test_the_winner_is_stored_with_the_checksum_its_name_and_every_result():
    device = scripted_device()
    tunables = make_set("a", "b", "c", kernel("d", priority=-1))
    events = []
    tuner = make_tuner(device, observer=events.append)
    tuner.execute(tunables, call(device, [1.0]))

    entry = tuner.store.entries[("fake", Key({"n": 4}))]
    assert entry.checksum == tunables.checksum
    assert entry.winner == 1 and entry.winner_name == "b"
    assert [r["name"] for r in entry.results] == ["a", "b", "c", "d"]
    assert entry.results[0]["index"] == 0 and entry.results[0]["timing"] == "gpu-timestamp"
    assert entry.results[2] == {"name": "c", "error": "Launch", "reason": "compile failed: bad wgsl"}
    assert entry.results[3]["error"] == "Skip"
    assert entry.policy == "adaptive"
    assert entry.confidence is not None and entry.confidence.runner_up == "a"
    # "a" was out after its one screening sample: one pair states little (confidence.py).
    assert entry.confidence.ratio == pytest.approx(3.0) and 0.6 < entry.confidence.p_faster < 0.8
    finished = events[-1]
    assert isinstance(finished, TuneFinished) and finished.outcome.entry() == entry
    assert (finished.set_name, finished.key, finished.outcome.winner_name) == ("fake", Key({"n": 4}), "b")
    assert finished.outcome.stored and finished.outcome.confidence == entry.confidence

    decoded = StoredEntry.from_json(json.loads(json.dumps(entry.to_json())))
    assert decoded == entry
    results = [result_from_json(r, i) for i, r in enumerate(decoded.results)]
    assert isinstance(results[1], Measured) and results[1].stats.median == pytest.approx(1e-3)
    assert results[2] == Launch("c", "compile failed: bad wgsl")
    assert [result_to_json(r) for r in results] == list(entry.results)


def test_a_store_whose_save_raises_keeps_the_winner_in_memory_and_says_not_stored():
    class FailingStore(MemoryStore):
        def save(self, entry):
            raise PermissionError("read-only cache dir")

    device = scripted_device()
    tunables = make_set("a", "b")
    events = []
    tuner = make_tuner(device, store=FailingStore(), observer=events.append)
    assert tuner.execute(tunables, call(device, [1.0])).name == "b"
    assert tuner.fastest(tunables, Key({"n": 4})) == Hit(1)
    [record] = tuner.records.records
    assert record.stored is False and record.effect is RecordEffect.OBSERVED
    assert events[-1].outcome.stored is False


def test_a_second_tuner_on_the_same_store_hits_without_benchmarking():
    store = MemoryStore()
    first = scripted_device()
    tunables = make_set("a", "b")
    make_tuner(first, store=store).execute(tunables, call(first, [1.0]))

    second = scripted_device()
    tuner = make_tuner(second, store=store)
    assert tuner.execute(tunables, call(second, [1.0])).name == "b"
    assert second.profile_count == 0
    assert tuner.records.records == []


def test_the_memory_store_replaces_the_entry_of_the_same_table_and_key():
    store = MemoryStore()
    key = Key({"n": 1})
    store.save(StoredEntry("t", key, "x", 0, "a"))
    store.save(StoredEntry("t", key, "x", 1, "b"))
    store.save(StoredEntry("u", key, "x", 0, "a"))
    assert len(store.load()) == 2
    store.clear()
    assert store.load() == []


def test_a_namespace_document_round_trips_with_entries_in_a_stable_order():
    entries = [
        StoredEntry("t", Key({"n": 8}), "c1", 1, "b",
                    ({"name": "a", "error": "Skip", "reason": "r"}, {"name": "b", "samples": [1e-3]})),
        StoredEntry("t", Key({"n": 2}), "c1", 0, "a"),
        StoredEntry("s", Key({"n": 8}), "c2", 0, "a"),
    ]
    namespace = {"vendor": "fake", "device": "fake-gpu", "driver": "1", "backend": "test"}
    document = encode_document(namespace, entries)
    assert [(e["table"], e["key"]) for e in document["entries"]] == [("s", {"n": 8}), ("t", {"n": 2}), ("t", {"n": 8})]
    decoded_namespace, decoded = decode_document(json.loads(json.dumps(document)))
    assert decoded_namespace == namespace
    assert sorted(decoded, key=lambda e: e.set_name + e.key.to_json()) == sorted(
        entries, key=lambda e: e.set_name + e.key.to_json()
    )
    assert decode_export(encode_export([document])) == [(namespace, decoded)]
    assert decode_export(document) == [(namespace, decoded)]


def test_an_old_entry_without_the_newer_fields_still_decodes():
    entry = StoredEntry.from_json({"table": "t", "key": {"n": 1}, "checksum": "c", "winner": 0})
    assert entry.winner_name == "" and entry.results == ()


@pytest.mark.parametrize(
    "obj",
    [
        [],
        {"key": {"n": 1}, "checksum": "c", "winner": 0},
        {"table": "t", "key": {"n": 1}, "checksum": "c", "winner": -1},
        {"table": "t", "key": {"n": 1}, "checksum": "c", "winner": True},
        {"table": "t", "key": {"n": 1}, "checksum": "c", "winner": "0"},
        {"table": "t", "key": {"n": [1]}, "checksum": "c", "winner": 0},
        {"table": "t", "key": {"n": 1}, "checksum": "c", "winner": 0, "results": {}},
    ],
)
def test_a_malformed_entry_is_a_store_error(obj):
    with pytest.raises(StoreError):
        StoredEntry.from_json(obj)


@pytest.mark.parametrize(
    "obj",
    [[], {"format": "other/1"}, {"format": "wgtune.cache/1", "entries": {}}, {"format": "wgtune.export/1"}],
)
def test_a_document_that_is_not_wgtune_s_is_a_store_error(obj):
    with pytest.raises(StoreError):
        decode_export(obj)


def test_a_failure_kind_of_a_later_release_reads_as_unknown_and_garbage_as_a_store_error():
    # A later patch release shares the namespace: its new failure kind must not make this one set
    # its winners aside as damaged.
    assert result_from_json({"name": "a", "error": "Exploded", "reason": "?"}, 0) == Unknown("a", "Exploded: ?")
    for kind in ("not a kind!", "", "X" * 65, 7, "Ünknown"):
        with pytest.raises(StoreError):
            result_from_json({"name": "a", "error": kind, "reason": "?"}, 0)


@pytest.mark.parametrize(
    "change",
    [{"winner": -1}, {"winner": True}, {"winner": "1"}, {"short_circuit": 3}, {"entry": {}}, {"wall": "soon"}],
)
def test_a_malformed_record_is_a_store_error(change):
    good = TuneRecord("t", Key({"n": 1}), "c", 0, (Trial("a", 0.1),), None, 0.2, False, True).to_json()
    with pytest.raises(StoreError):
        TuneRecord.from_json({**good, **change})


def test_a_store_that_cannot_be_read_is_a_miss_not_a_crash(caplog):
    class UnreadableStore(MemoryStore):
        def load(self):
            raise PermissionError("cache dir not readable")

    device = scripted_device()
    tunables = make_set("a", "b")
    tuner = make_tuner(device, store=UnreadableStore())
    assert tuner.execute(tunables, call(device, [1.0])).name == "b"
    assert "could not read the stored winners" in caplog.text


def test_namespace_fields_may_not_shadow_the_document_fields():
    for reserved in ("format", "entries"):
        with pytest.raises(StoreError):
            encode_document({reserved: "x"}, [])


def test_a_store_that_writes_in_the_background_makes_the_record_say_pending_not_stored():
    class Background(MemoryStore):
        def save(self, entry):
            super().save(entry)
            return "pending"

    device = FakeDevice()
    records = MemoryRecords()
    tuner = make_tuner(device, store=Background(), records=records)
    tuner.execute(make_set("a", "b"), call(device, [1.0]))
    (record,) = records.records
    assert record.stored == "pending" and record.effect is RecordEffect.CHANGED
    again = TuneRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again.stored == "pending"
