"""Every candidate's result in the open: ``Tuner.results``, the early-elimination mark, its JSON
and its line in the log."""

from __future__ import annotations

import json

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet

from wgtune import Key, Launch, Measured, MemoryStore, Pin, Skip, Stats, StoredEntry, StoreError, Timing
from wgtune.store.format import decode_document, encode_document
from wgtune.store.results import result_from_json, result_to_json
from wgtune.tune.adaptive import MIN_SAMPLES
from wgtune.tune.log import describe

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

KEY = Key({"n": 4})


def tuned(durations: dict[str, float], *, compile_errors: dict[str, str] | None = None, **config):
    """A tuner that has tuned key n=4 of a fake set whose candidates take ``durations`` seconds."""
    device = FakeDevice()
    for name, seconds in durations.items():
        device.script(name, duration=seconds)
    for name, error in (compile_errors or {}).items():
        device.script(name, compile_error=error)
    tunables = make_set(*durations, *(compile_errors or {}))
    tuner = make_tuner(device, config=quiet(**config))
    tuner.execute(tunables, call(device, [1.0]))
    return tuner, tunables


def by_name(results) -> dict:
    return {result.name: result for result in results}


def test_a_hopeless_candidate_is_marked_eliminated_early_and_the_finalists_are_not():
    tuner, tunables = tuned({"best": 1.0e-3, "close": 1.05e-3, "hopeless": 10e-3})
    results = by_name(tuner.results(tunables, KEY))
    assert list(results) == ["best", "close", "hopeless"]  # the set's order
    hopeless = results["hopeless"]
    assert isinstance(hopeless, Measured) and hopeless.eliminated_early
    # Its first sample lost by over twice: one more confirmed it (a stalled reading is not enough).
    assert len(hopeless.stats.samples) == 2 and hopeless.stats.median == pytest.approx(10e-3)
    for name in ("best", "close"):  # they reached the settling: their medians stand
        assert isinstance(results[name], Measured) and not results[name].eliminated_early
        assert len(results[name].stats.samples) >= MIN_SAMPLES
    best = results["best"].stats
    assert (best.median, best.min, best.max, best.mean) == pytest.approx((1e-3, 1e-3, 1e-3, 1e-3))


def test_a_candidate_dropped_in_an_early_round_is_marked_too():
    # 1.3x the leader survives its screening (the margin is 2x with one sample), not round one (1.25x).
    tuner, tunables = tuned({"leader": 1.0e-3, "rival": 1.3e-3})
    rival = by_name(tuner.results(tunables, KEY))["rival"]
    assert rival.eliminated_early and 1 < len(rival.stats.samples) < MIN_SAMPLES


def test_the_fixed_policy_never_marks_a_result():
    tuner, tunables = tuned({"fast": 1e-3, "slow": 10e-3}, policy="fixed")
    assert [r.eliminated_early for r in tuner.results(tunables, KEY)] == [False, False]


def test_a_failed_candidate_comes_back_with_its_reason():
    tuner, tunables = tuned({"a": 1e-3, "b": 2e-3}, compile_errors={"broken": "bad wgsl"})
    broken = by_name(tuner.results(tunables, KEY))["broken"]
    assert broken == Launch("broken", "compile failed: bad wgsl")


def test_results_are_none_for_a_key_not_decided():
    tuner, tunables = tuned({"a": 1e-3, "b": 2e-3})
    assert tuner.results(tunables, Key({"n": 8})) is None  # never tuned
    assert tuner.results(make_set("a", "c"), KEY) is None  # tuned with other candidates
    device = FakeDevice()
    pinned = make_tuner(device, config=quiet(pins=(Pin("fake", "b"),)))
    pinned.execute(tunables, call(device, [1.0]))
    assert pinned.results(tunables, KEY) is None  # pinned: nothing was measured


def test_the_mark_round_trips_through_the_stored_document():
    tuner, tunables = tuned({"best": 1.0e-3, "hopeless": 10e-3})
    document = json.loads(json.dumps(encode_document({"tuner": "t"}, tuner.store.load())))
    [stored] = document["entries"]
    assert [result.get("eliminated_early") for result in stored["results"]] == [None, True]
    _, entries = decode_document(document)
    store = MemoryStore()
    store.save(entries[0])
    again = make_tuner(FakeDevice(), store=store)  # a later process, reading the store
    assert [r.eliminated_early for r in again.results(tunables, KEY)] == [False, True]


def test_the_mark_is_written_only_when_set_so_other_results_keep_their_json():
    stats = Stats((2e-3, 1e-3, 3e-3), Timing.GPU_TIMESTAMP)
    plain = result_to_json(Measured("a", 0, stats))
    assert "eliminated_early" not in plain
    assert result_from_json(plain, 0) == Measured("a", 0, stats)
    marked = result_to_json(Measured("a", 0, stats, eliminated_early=True))
    assert marked == {**plain, "eliminated_early": True}
    assert result_from_json(marked, 0).eliminated_early is True


def test_an_entry_with_unreadable_results_is_a_store_error_naming_the_key():
    entry = StoredEntry("fake", KEY, "c", 0, "a", results=({"name": "a", "samples": "many"},))
    with pytest.raises(StoreError, match=r"fake \[n=4\]"):
        entry.decoded_results()
    garbage = StoredEntry("fake", KEY, "c", 0, "a", results=({"name": "a", "error": "not a kind!", "reason": "?"},))
    with pytest.raises(StoreError, match="not a kind"):
        garbage.decoded_results()


def test_the_log_says_an_early_median_is_unreliable():
    stats = Stats((9e-3,), Timing.WALL_CLOCK)
    line = describe(Measured("slow", 1, stats, eliminated_early=True))
    assert line.endswith("(eliminated early after 1 sample: median unreliable)")
    assert "unreliable" not in describe(Measured("slow", 1, stats))
    assert describe(Skip("x", "not run")) == "x: Skip: not run"
