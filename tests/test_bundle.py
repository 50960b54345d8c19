"""Bundles (``core/store/bundle.py``): built, read back, merged, refused when bad, and seeding a tuner.

The core tests (marked ``core``) use the fake device and also run inside Pyodide; the native
ones tune real WGSL on the adapter present (lavapipe without a GPU) and drive ``wgtune bundle``.
Native modules are imported inside those tests, so that this file imports in Pyodide.
"""

from __future__ import annotations

import json

import pytest
from fakes import FakeDevice, Script, call, make_set, make_tuner
from wgsl_samples import scale

import wgtune
from wgtune import Hit, Key, MemoryStore, StoredEntry, StoreError
from wgtune.store.bounded_json import parse_json
from wgtune.store.bundle import (
    BUNDLE_FORMAT,
    BundledEntry,
    build_bundle,
    bundle_text,
    entries_for,
    read_bundle,
    reports_of,
)
from wgtune.store.confidence import Confidence
from wgtune.store.format import reduced_version
from wgtune.tune.events import TrialFinished, TuneStarted

BUILT = "2026-12-01T02:30:00Z"
LINE = reduced_version(wgtune.__version__)  # as namespace_for and build_bundle write it: "0.1"
GPU_A = {"wgtune": LINE, "device": {"vendor": "acme", "device": "A1"}, "tuner": "default"}
GPU_B = {"wgtune": LINE, "device": {"vendor": "acme", "device": "B2"}, "tuner": "default"}


def sure(p_faster: float, low: float = 1.1) -> Confidence:
    return Confidence("other", 1.2, low, 1.3, 0.95, p_faster, (10, 10))


def entry(set_name: str = "fake", n: int = 4, winner: int = 1, checksum: str = "c1", **fields) -> StoredEntry:
    fields.setdefault("winner_name", f"k{winner}")
    results = tuple({"name": f"k{i}", "samples": [1.0 + i]} for i in range(winner + 1))
    return StoredEntry(set_name, Key({"n": n}), checksum, winner, results=results, **fields)


def round_trip(bundle: dict) -> list[tuple[dict, list[StoredEntry]]]:
    return read_bundle(parse_json(bundle_text(bundle)))


# -- the format ------------------------------------------------------------------------------------


@pytest.mark.core
def test_a_bundle_round_trips_its_namespaces_and_entries_without_the_results():
    bundle = build_bundle([(GPU_B, [entry(n=8), entry(n=4)]), (GPU_A, [entry("other", winner=0)])], built=BUILT)
    assert bundle["format"] == BUNDLE_FORMAT and bundle["built"] == BUILT and bundle["wgtune"] == wgtune.__version__
    documents = round_trip(bundle)
    assert [namespace for namespace, _ in documents] == [GPU_A, GPU_B]  # by the namespace's canonical text
    (_, a_entries), (_, b_entries) = documents
    assert [e.key for e in b_entries] == [Key({"n": 4}), Key({"n": 8})]  # by set, then key
    assert all(e.results == () for e in a_entries + b_entries)  # dropped: bundles stay small
    assert b_entries[0] == StoredEntry("fake", Key({"n": 4}), "c1", 1, "k1")
    assert "results" not in bundle_text(bundle)


@pytest.mark.core
def test_the_same_winners_make_the_same_text_whatever_the_sources_order():
    first = [(GPU_A, [entry(n=4), entry(n=8)]), (GPU_B, [entry(n=2)])]
    second = [(GPU_B, [entry(n=2)]), (GPU_A, [entry(n=8), entry(n=4)])]
    assert bundle_text(build_bundle(first, built=BUILT)) == bundle_text(build_bundle(second, built=BUILT))


@pytest.mark.core
def test_entries_for_gives_only_the_devices_own_namespace():
    documents = round_trip(build_bundle([(GPU_A, [entry(n=4)]), (GPU_B, [entry(n=8), entry(n=16)])], built=BUILT))
    assert {e.key for e in entries_for(documents, GPU_B)} == {Key({"n": 8}), Key({"n": 16})}
    assert entries_for(documents, {**GPU_A, "tuner": "other"}) == []
    assert entries_for(documents, {**GPU_A, "wgtune": "0.0.1"}) == []  # another wgtune's winners: not this one's


@pytest.mark.core
def test_a_reports_count_survives_the_round_trip():
    counted = BundledEntry("fake", Key({"n": 4}), "c1", 1, "k1", reports=7)
    (_, [read]), = round_trip(build_bundle([(GPU_A, [counted])], built=BUILT))
    assert reports_of(read) == 7 and isinstance(read, BundledEntry)
    assert reports_of(entry()) == 0


@pytest.mark.core
def test_the_built_time_defaults_to_now_in_utc():
    built = build_bundle([])["built"]
    assert built.endswith("Z") and len(built) == len("2026-12-01T02:30:00Z")
    assert round_trip(build_bundle([])) == []


# -- the merge rule --------------------------------------------------------------------------------


@pytest.mark.core
@pytest.mark.parametrize("weak, strong", [
    (entry(winner=0, confidence=sure(0.80)), entry(winner=1, confidence=sure(0.99))),  # higher p_faster
    (entry(winner=0, confidence=sure(0.99, low=1.01)), entry(winner=1, confidence=sure(0.99, low=1.2))),  # surer gain
    (entry(winner=0), entry(winner=1, confidence=sure(0.51))),  # any confidence beats none
    (entry(winner=0, confidence=sure(0.9)), entry(winner=1, confidence=sure(0.9), checked=True)),  # a tie: checked
])
def test_a_merge_keeps_the_entry_with_the_higher_confidence_in_either_order(weak, strong):
    for sources in ([(GPU_A, [weak]), (GPU_A, [strong])], [(GPU_A, [strong]), (GPU_A, [weak])]):
        (_, [kept]), = round_trip(build_bundle(sources, built=BUILT))
        assert kept.winner == strong.winner


@pytest.mark.core
def test_a_merge_does_not_add_up_reports():
    counted = BundledEntry("fake", Key({"n": 4}), "c1", 1, "k1", confidence=sure(0.9), reports=3)
    (_, [kept]), = round_trip(build_bundle([(GPU_A, [counted]), (GPU_A, [counted])], built=BUILT))
    assert reports_of(kept) == 3


# -- bad bundles -----------------------------------------------------------------------------------


def good() -> dict:
    return json.loads(bundle_text(build_bundle([(GPU_A, [entry()])], built=BUILT)))


def changed(path: tuple, value: object) -> dict:
    bundle = good()
    target = bundle
    for step in path[:-1]:
        target = target[step]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return bundle


DELETE = object()


@pytest.mark.core
@pytest.mark.parametrize("obj, problem", [
    ([1, 2], "a wgtune bundle is a JSON object, got list"),
    ({"format": "wgtune.export/1", "namespaces": []}, "not a wgtune bundle .*'wgtune.export/1'"),
    (changed(("format",), "wgtune.bundle/2"), "bundle version '2' is not one this wgtune"),
    (changed(("built",), "yesterday"), "built time must be ISO-8601"),
    (changed(("built",), "2026-13-45T99:00:00Z"), "is no date"),
    (changed(("wgtune",), 3), "wgtune version must be a non-empty string"),
    (changed(("namespaces",), {}), "namespaces must be a list"),
    (changed(("namespaces", 0), "GPU"), "namespace 0 of the bundle must be an object"),
    (changed(("namespaces", 0, "entries"), DELETE), "namespace 0 .*entries must be a list"),
    (changed(("namespaces", 0, "device"), [1]), "namespace 0 .*namespace field 'device'"),
    (changed(("namespaces", 0), {"entries": []}), "namespace 0 of the bundle has no namespace fields"),
    (changed(("namespaces", 0, "entries", 0, "winner"), -1), "entry 0 of namespace 0 .*winner must be an index"),
    (changed(("namespaces", 0, "entries", 0, "checksum"), DELETE), "entry 0 .*lacks the field 'checksum'"),
    (changed(("namespaces", 0, "entries", 0, "reports"), -2), "entry 0 .*reports must be a count"),
    (changed(("namespaces", 0, "entries", 0, "reports"), True), "entry 0 .*reports must be a count"),
])
def test_a_bad_bundle_is_a_store_error_naming_what_is_wrong(obj, problem):
    with pytest.raises(StoreError, match=problem):
        read_bundle(obj)


@pytest.mark.core
def test_a_namespace_or_a_key_given_twice_is_refused():
    twice = good()
    twice["namespaces"].append(twice["namespaces"][0])
    with pytest.raises(StoreError, match="namespace 1 of the bundle is given twice"):
        read_bundle(twice)
    again = good()
    again["namespaces"][0]["entries"].append(again["namespaces"][0]["entries"][0])
    with pytest.raises(StoreError, match=r"entry 1 .*fake \[n=4\] is given twice"):
        read_bundle(again)


@pytest.mark.core
def test_a_number_out_of_range_costs_the_bundle_with_a_clear_error():
    text = bundle_text(good()).replace('"winner":1', '"winner":123456789012345678901234')
    with pytest.raises(StoreError, match=r"entry 0 .*an integer of 24 digits"):
        read_bundle(parse_json(text))


# -- seeding the cache -----------------------------------------------------------------------------


def fake_set():
    return make_set("k0", "k1")


def scripted() -> FakeDevice:
    return FakeDevice({"k0": Script(duration=2e-3), "k1": Script(duration=1e-3)})


def seeded_entry(tunables, winner: int = 0, checksum: str | None = None) -> StoredEntry:
    return StoredEntry(tunables.name, Key({"n": 4}), checksum or tunables.checksum, winner, f"k{winner}")


@pytest.mark.core
def test_a_seeded_winner_of_the_current_candidates_is_a_hit_with_no_benchmark():
    device, tunables = scripted(), fake_set()
    tuner = make_tuner(device)
    tuner.cache.seed([seeded_entry(tunables, winner=0)])  # k0 is the slower: only a seed would pick it
    assert tuner.check_tune(tunables, Key({"n": 4}), call(device, [1.0])) == Hit(0)
    assert device.profiles == {}  # nothing measured: checked once against the other candidates instead
    assert ("fake", Key({"n": 4})) not in tuner.store.entries  # a seed lives in memory: never stored
    assert tuner.check_tune(tunables, Key({"n": 4}), call(device, [1.0])) == Hit(0)
    assert device.profiles == {} and tuner.results(tunables, Key({"n": 4})) == ()  # no results: checked once


@pytest.mark.core
def test_a_seed_naming_no_candidate_of_the_set_is_tuned_and_the_log_says_why(caplog):
    device, tunables = scripted(), fake_set()
    tuner = make_tuner(device)
    tuner.cache.seed([seeded_entry(tunables, winner=7)])  # the set has two candidates
    with caplog.at_level("WARNING", logger="wgtune"):
        assert tuner.check_tune(tunables, Key({"n": 4}), call(device, [1.0])) == Hit(1)  # tuned: k1 is faster
    said = " ".join(record.message for record in caplog.records)
    assert "the winner k7 of fake [n=4] from elsewhere is not used: its index 7 is none of the set's 2" in said


@pytest.mark.core
def test_a_stale_seed_is_tuned_as_usual():
    device, tunables = scripted(), fake_set()
    tuner = make_tuner(device)
    tuner.cache.seed([seeded_entry(tunables, winner=0, checksum="of-other-candidates")])
    assert tuner.check_tune(tunables, Key({"n": 4}), call(device, [1.0])) == Hit(1)  # measured: k1 is faster
    assert set(device.profiles) == {"k0", "k1"}


@pytest.mark.core
def test_a_winner_stored_here_beats_a_seed():
    device, tunables = scripted(), fake_set()
    store = MemoryStore(entries={(tunables.name, Key({"n": 4})): seeded_entry(tunables, winner=1)})
    tuner = make_tuner(device, store=store)
    tuner.cache.seed([seeded_entry(tunables, winner=0)])
    assert tuner.check_tune(tunables, Key({"n": 4}), call(device, [1.0])) == Hit(1)
    tuner.reload()  # after an import or a clear: the store still comes first, the seed stays behind it
    assert tuner.check_tune(tunables, Key({"n": 4}), call(device, [1.0])) == Hit(1)
    store.clear()
    tuner.reload()
    assert tuner.check_tune(tunables, Key({"n": 4}), call(device, [1.0])) == Hit(0)
    assert device.profiles == {}


class LookupStore(MemoryStore):
    """A store read key by key, as the SQLite one is: the tuner asks it on a key's first claim."""

    read_by_key = True  # the store contract's say (store/contract.py)

    def __init__(self, entries) -> None:
        super().__init__(entries=entries)
        self.asked: list[tuple[str, Key]] = []

    def lookup(self, set_name: str, key: Key) -> StoredEntry | None:
        self.asked.append((set_name, key))
        return self.entries.get((set_name, key))


@pytest.mark.core
def test_with_a_store_read_key_by_key_the_store_is_asked_before_the_seed():
    device, tunables = scripted(), fake_set()
    store = LookupStore({(tunables.name, Key({"n": 4})): seeded_entry(tunables, winner=1)})
    tuner = make_tuner(device, store=store)
    tuner.cache.seed([seeded_entry(tunables, winner=0), StoredEntry(tunables.name, Key({"n": 8}),
                                                                  tunables.checksum, 0, "k0")])
    assert tuner.check_tune(tunables, Key({"n": 4}), call(device, [1.0])) == Hit(1)  # the store's
    assert tuner.check_tune(tunables, Key({"n": 8}), call(device, [1.0], n=8)) == Hit(0)  # the seed's
    assert store.asked == [(tunables.name, Key({"n": 4})), (tunables.name, Key({"n": 8}))]
    assert device.profiles == {}


# -- natively, on the adapter present ----------------------------------------------------------------


@pytest.fixture(scope="module")
def device():
    from wgtune.backends.native import NativeDevice

    return NativeDevice.open()


def scale_set() -> wgtune.TunableSet:
    candidates = [wgtune.Kernel(f"wg{wg}", scale(3, wg), workgroup_size=(wg, 1, 1),
                                grid=lambda args, wg=wg: ((args.params[0] + wg - 1) // wg, 1, 1)) for wg in (32, 64)]
    return wgtune.TunableSet("bundle-scale", candidates, key=lambda a: {"n": wgtune.anchor(a.params[0])})


def native_tuner(device, cache_dir, **kwargs):
    from wgtune.backends.local import open_tuner

    events: list[object] = []
    config = wgtune.Config(cache_dir=str(cache_dir), log_level="disabled", samples=3, warmups=1)
    tuner = open_tuner(device, config=config, observer=events.append, isolate=False, **kwargs)
    return tuner, events


def run_keys(tuner, device, sizes=(1000, 5000)) -> list[wgtune.TuneState]:
    import struct

    states = []
    for n in sizes:
        x = device.create_buffer(struct.pack(f"{n}f", *range(n)))
        y = device.create_buffer(size=4 * n)
        tuner.execute(SCALE, wgtune.Args((x, y), params=(n,)))
        states.append(tuner.fastest(SCALE, tuner.key(SCALE, wgtune.Args((x, y), params=(n,)))))
    return states


def tuned(events) -> int:
    return sum(isinstance(event, TuneStarted) for event in events)


SCALE = scale_set()


@pytest.fixture(scope="module")
def farm(device, tmp_path_factory):
    """A cache directory where one tuner tuned two keys, and its winners."""
    cache = tmp_path_factory.mktemp("farm")
    tuner, events = native_tuner(device, cache)
    states = run_keys(tuner, device)
    assert tuned(events) == 2 and all(isinstance(state, Hit) for state in states)
    return cache, states


def test_a_bundle_from_one_tuners_cache_makes_a_fresh_tuner_hit_with_nothing_tuned(device, farm, tmp_path, capsys):
    from wgtune.cli import main

    cache, winners = farm
    bundle = tmp_path / "winners.json"
    assert main(["bundle", str(bundle), str(cache)]) == 0
    assert "2 winner(s) for 1 device(s)" in capsys.readouterr().out
    fresh, events = native_tuner(device, tmp_path / "empty", bundle=str(bundle))
    assert run_keys(fresh, device) == winners
    assert tuned(events) == 0 and not any(isinstance(event, TrialFinished) for event in events)
    from wgtune.backends.sqlite_store import CacheDatabase

    with CacheDatabase(tmp_path / "empty") as database:  # the seeds, checked here, stay in memory: none stored
        assert database.entries()[0] == []


def test_a_bundle_for_another_device_tunes_as_usual(device, farm, tmp_path):
    from wgtune.backends.sqlite_store import CacheDatabase

    with CacheDatabase(farm[0]) as database:
        rows, _ = database.entries()
    elsewhere = {**rows[0][0], "device": {**rows[0][0]["device"], "device": "some other GPU"}}
    bundle = build_bundle([(elsewhere, [e for _, e in rows])])
    fresh, events = native_tuner(device, tmp_path / "empty", bundle=bundle)
    run_keys(fresh, device)
    assert tuned(events) == 2


def test_a_bad_bundle_file_is_a_store_error_naming_the_file(device, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**good(), "format": "wgtune.bundle/9"}))
    with pytest.raises(StoreError, match=r"bad.json: bundle version '9'"):
        native_tuner(device, tmp_path / "empty", bundle=str(path))


def test_the_cli_builds_from_an_export_and_a_bundle_merging_them(farm, tmp_path, capsys):
    from wgtune.cli import main

    exported, first, merged = tmp_path / "export.json", tmp_path / "first.json", tmp_path / "merged.json"
    assert main(["cache", "--cache-dir", str(farm[0]), "export", str(exported)]) == 0
    assert main(["bundle", str(first), str(exported)]) == 0
    capsys.readouterr()
    assert main(["bundle", str(merged), str(first), str(exported), str(farm[0])]) == 0
    out = capsys.readouterr().out
    assert "2 winner(s) for 1 device(s) (1 namespace(s)), 2 key(s) of 1 set(s), from 3 source(s)" in out
    assert "merged 4 entries given by more than one source" in out
    a, b = (read_bundle(parse_json(path.read_bytes())) for path in (first, merged))
    assert [(ns, [e.slot for e in es]) for ns, es in a] == [(ns, [e.slot for e in es]) for ns, es in b]


def test_the_cli_drops_an_invalid_entry_of_an_export_and_says_why(farm, tmp_path, capsys):
    from wgtune.cli import main

    exported = tmp_path / "export.json"
    assert main(["cache", "--cache-dir", str(farm[0]), "export", str(exported)]) == 0
    document = json.loads(exported.read_text())
    document["namespaces"][0]["entries"][0]["winner"] = "first"
    exported.write_text(json.dumps(document))
    assert main(["bundle", str(tmp_path / "out.json"), str(exported)]) == 0
    captured = capsys.readouterr()
    assert "1 winner(s)" in captured.out
    assert "dropped 1 invalid entry" in captured.err and "winner must be an integer" in captured.err


@pytest.mark.parametrize("make, problem", [
    (lambda d: d / "missing", "no such file or directory"),
    (lambda d: d / "empty-dir", "not a wgtune cache directory"),
    (lambda d: d / "notes.txt", "not JSON"),
    (lambda d: d / "other.json", "not a wgtune export, cache document or bundle"),
    (lambda d: d / "future.json", "bundle version '2' is not one this wgtune"),
])
def test_a_bad_source_is_exit_2_naming_it_and_writes_nothing(tmp_path, capsys, make, problem):
    from wgtune.cli import main

    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "notes.txt").write_text("winners, probably")
    (tmp_path / "other.json").write_text('{"format": "something/1"}')
    (tmp_path / "future.json").write_text(json.dumps({**good(), "format": "wgtune.bundle/2"}))
    out = tmp_path / "out.json"
    out.write_text("the previous bundle")
    source = make(tmp_path)
    assert main(["bundle", str(out), str(source)]) == 2
    err = capsys.readouterr().err
    assert f"source {source}" in err and problem in err
    assert out.read_text() == "the previous bundle"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty-dir", "future.json", "notes.txt", "other.json",
                                                               "out.json"]
