"""The tuner on a scripted fake device: cache states, ranking, timing, the fast path, buffers, events."""

from __future__ import annotations

import pytest
from fakes import (
    FakeDevice,
    add_one_in_place,
    call,
    floats,
    kernel,
    make_set,
    make_tuner,
    quiet,
    stored_results,
)

from wgtune import (
    MISS,
    PENDING,
    ConfigError,
    Hit,
    KernelError,
    Key,
    Launch,
    Measured,
    MemoryStore,
    Pin,
    Skip,
    StoredEntry,
    Timing,
    TuneStarted,
    Unchecked,
)
from wgtune.store.results import Stats
from wgtune.tune.ranking import rank

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

# -- cache states ----------------------------------------------------------------------------


def test_a_miss_becomes_pending_during_the_tune_and_a_hit_after():
    device = FakeDevice()
    device.script("slow", duration=2e-3)
    device.script("fast", duration=1e-3)
    tunables = make_set("slow", "fast")
    seen = []
    tuner = make_tuner(device, observer=lambda event: seen.append((type(event).__name__, tuner.fastest(tunables, key))))
    args = call(device, [1.0])
    key = tuner.key(tunables, args)
    mid_profile = []
    device.on_profile = lambda name, repeats: mid_profile.append(tuner.fastest(tunables, key))

    assert tuner.fastest(tunables, key) is MISS
    assert tuner.check_tune(tunables, key, args) == Hit(1)
    assert tuner.fastest(tunables, key) == Hit(1)
    assert seen[0] == ("TuneStarted", PENDING)
    assert mid_profile and all(state is PENDING for state in mid_profile)
    assert seen[-1] == ("TuneFinished", Hit(1))


def test_a_stored_winner_with_a_matching_checksum_is_a_hit_without_benchmarks():
    device = FakeDevice()
    tunables = make_set("a", "b", "c")
    key = tunables.key(call(device, [1.0]))
    store = MemoryStore()
    store.save(StoredEntry(tunables.name, key, tunables.checksum, 2, "c", checked=True))
    tuner = make_tuner(device, store=store)

    assert tuner.fastest(tunables, key) == Unchecked(2, tunables.checksum)
    assert tuner.check_tune(tunables, key, call(device, [1.0])) == Hit(2)
    assert tuner.fastest(tunables, key) == Hit(2)
    assert device.profile_count == 0
    assert device.compiles == {}
    assert tuner.records.records == []


def test_a_stored_winner_with_a_stale_checksum_is_tuned_again():
    device = FakeDevice()
    device.script("a", duration=3e-3)
    device.script("b", duration=1e-3)
    tunables = make_set("a", "b")
    key = tunables.key(call(device, [1.0]))
    store = MemoryStore()
    store.save(StoredEntry(tunables.name, key, "0" * 32, 0, "a"))
    tuner = make_tuner(device, store=store)

    assert isinstance(tuner.fastest(tunables, key), Unchecked)
    assert tuner.check_tune(tunables, key, call(device, [1.0])) == Hit(1)
    assert device.profile_count > 0
    assert store.entries[(tunables.name, key)].checksum == tunables.checksum
    assert store.entries[(tunables.name, key)].winner == 1


def test_a_stored_winner_out_of_range_is_tuned_again():
    device = FakeDevice()
    tunables = make_set("a", "b")
    key = tunables.key(call(device, [1.0]))
    store = MemoryStore()
    store.save(StoredEntry(tunables.name, key, tunables.checksum, 7, "gone"))
    tuner = make_tuner(device, store=store)
    assert isinstance(tuner.check_tune(tunables, key, call(device, [1.0])), Hit)
    assert device.profile_count > 0


def test_a_hit_runs_the_winner_without_compiling_or_benchmarking_again():
    device = FakeDevice()
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    args = call(device, [1.0])
    tuner.execute(tunables, args)
    profiles, compiles = device.profile_count, sum(device.compiles.values())
    for _ in range(5):
        assert tuner.execute(tunables, args).name == "a"
    assert device.profile_count == profiles
    assert sum(device.compiles.values()) == compiles
    assert len(tuner.records.records) == 1


def test_different_keys_are_tuned_separately():
    device = FakeDevice()
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0], n=4))
    tuner.execute(tunables, call(device, [1.0], n=8))
    assert len(tuner.records.records) == 2
    assert set(tuner.states(tunables)) == {tunables.key(call(device, n=4)), tunables.key(call(device, n=8))}


# -- ranking ---------------------------------------------------------------------------------


def test_the_fastest_scripted_candidate_wins():
    device = FakeDevice()
    for name, seconds in {"a": 5e-3, "b": 2e-3, "c": 1e-3, "d": 4e-3}.items():
        device.script(name, duration=seconds)
    tunables = make_set("a", "b", "c", "d")
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "c"


def test_a_tie_goes_to_the_lower_index():
    device = FakeDevice()
    device.script("a", duration=2e-3)
    device.script("b", duration=1e-3)
    device.script("c", duration=1e-3)
    tunables = make_set("a", "b", "c")
    assert make_tuner(device).execute(tunables, call(device, [1.0])).name == "b"


def test_errors_rank_after_every_outcome():
    outcome = Measured("slow", 2, Stats((9.0,), Timing.WALL_CLOCK))
    results = [Launch("x", "bad"), Skip("y"), outcome, Measured("fast", 3, Stats((1.0,), Timing.WALL_CLOCK))]
    assert rank(results) == [3, 2, 0, 1]


def test_the_score_is_four_fifths_min_plus_one_fifth_median():
    stats = Stats((4.0, 1.0, 10.0, 3.0), Timing.GPU_TIMESTAMP)
    assert stats.min == 1.0
    assert stats.median == 3.5
    assert stats.score == pytest.approx(0.8 * 1.0 + 0.2 * 3.5)
    assert Stats((5.0, 1.0, 2.0), "x").median == 2.0


def test_the_score_decides_not_the_min_alone():
    device = FakeDevice()
    # "lucky" has the lowest single sample but a much higher median.
    device.script("lucky", duration=[1e-3, 0.5e-3, 9e-3, 9e-3, 9e-3])
    device.script("steady", duration=1e-3)
    tunables = make_set("lucky", "steady")
    tuner = make_tuner(device, config=quiet(samples=4, policy="fixed"))
    assert tuner.execute(tunables, call(device, [1.0])).name == "steady"
    lucky = stored_results(tuner, tunables)["lucky"]
    assert lucky["samples"] == pytest.approx([0.5e-3, 9e-3, 9e-3, 9e-3])
    assert lucky["score"] == pytest.approx(0.8 * 0.5e-3 + 0.2 * 9e-3)


@pytest.mark.parametrize("timing", [Timing.GPU_TIMESTAMP, Timing.WALL_CLOCK])
def test_results_report_the_device_timing_method(timing):
    device = FakeDevice(timing=timing)
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    assert {r["timing"] for r in stored_results(tuner, tunables).values()} == {timing}


def test_short_dispatches_are_repeated_until_a_sample_is_long_enough_and_reported_per_dispatch():
    device = FakeDevice()
    device.script("a", duration=1e-6)
    device.script("b", duration=2e-6)
    tunables = make_set("a", "b")
    tuner = make_tuner(device, config=quiet(min_sample=1e-3, samples=3, policy="fixed"))
    assert tuner.execute(tunables, call(device, [1.0])).name == "a"
    timed = device.profiles["a"][-3:]
    assert all(repeats > 1 for repeats in timed)
    assert timed[0] * 1e-6 >= 1e-3
    samples = stored_results(tuner, tunables)["a"]["samples"]
    assert samples == pytest.approx([1e-6] * 3)


# -- the single-candidate fast path ----------------------------------------------------------


def test_single_candidate_is_a_hit_without_benchmark():
    device = FakeDevice()
    tunables = make_set("only")
    events = []
    tuner = make_tuner(device, observer=events.append)
    args = call(device, [1.0])
    assert tuner.check_tune(tunables, tuner.key(tunables, args), args) == Hit(0)
    assert device.profile_count == 0 and device.compiles == {}
    assert tuner.store.entries == {}
    assert tuner.records.records == []
    assert events == []
    assert tuner.execute(tunables, args).name == "only"
    assert device.dispatches["only"] == 1


# -- the caller's buffers --------------------------------------------------------------------


def test_benchmarks_never_write_the_callers_buffers():
    device = FakeDevice()
    device.script("a", kernel=add_one_in_place)
    device.script("b", kernel=add_one_in_place)
    tunables = make_set("a", "b", outputs=(0,))
    tuner = make_tuner(device, config=quiet(checks=True))
    args = call(device, [1.0, 2.0])
    tuner.check_tune(tunables, tuner.key(tunables, args), args)
    assert device.profile_count > 0
    assert floats(args.buffers[0]) == [1.0, 2.0]


def test_execute_applies_an_in_place_kernel_exactly_once_although_the_tune_ran_it_many_times():
    device = FakeDevice()
    device.script("a", kernel=add_one_in_place)
    device.script("b", kernel=add_one_in_place)
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    args = call(device, [1.0, 2.0])
    tuner.execute(tunables, args)
    assert floats(args.buffers[0]) == [2.0, 3.0]
    assert device.clones >= 1


def test_a_custom_input_generator_makes_the_benchmark_inputs():
    seen = []

    def input_gen(device, key, args):
        seen.append((key, args))
        return args.with_buffers([device.buffer([0.0] * 8)])

    device = FakeDevice()
    tunables = make_set("a", "b", input_gen=input_gen)
    tuner = make_tuner(device)
    args = call(device, [1.0])
    tuner.execute(tunables, args)
    assert seen == [(tuner.key(tunables, args), args)]
    assert device.clones == 0


def test_started_event_counts_the_candidates():
    device = FakeDevice()
    events = []
    tunables = make_set("a", "b", "c")
    make_tuner(device, observer=events.append, config=quiet(policy="fixed")).execute(tunables, call(device, [1.0]))
    assert events[0] == TuneStarted("fake", tunables.key(call(device)), 3)
    assert [type(e).__name__ for e in events] == ["TuneStarted"] + ["TrialFinished"] * 3 + ["TuneFinished"]
    assert all(isinstance(e.result, Measured) for e in events[1:4])


def test_the_fixed_policys_samples_each_carry_a_round():
    # Calibration's reading is dropped with its round: a round left over made Stats.rounds () for every
    # candidate the fixed way, so nothing could pair its samples by round.
    device = FakeDevice()
    events = []
    tunables = make_set("a", "b")
    make_tuner(device, observer=events.append, config=quiet(policy="fixed", samples=4)).execute(
        tunables, call(device, [1.0]))
    measured = [e.result for e in events if type(e).__name__ == "TrialFinished"]
    assert len(measured) == 2
    for result in measured:
        assert len(result.stats.samples) == 4
        assert len(result.stats.rounds) == 4


def test_adaptive_trial_events_end_with_each_candidates_final_result():
    device = FakeDevice()
    device.script("b", duration=[2e-3, 3e-3])
    events = []
    tunables = make_set("a", "b", "c")
    make_tuner(device, observer=events.append).execute(tunables, call(device, [1.0]))
    assert type(events[0]).__name__ == "TuneStarted" and type(events[-1]).__name__ == "TuneFinished"
    trials = events[1:-1]
    assert {type(e).__name__ for e in trials} == {"TrialFinished"}
    last = {e.index: e.result for e in trials}
    assert sorted(last) == [0, 1, 2] and all(isinstance(r, Measured) for r in last.values())
    # b leaves early with few samples; a and c, tied, are sampled until settled
    assert len(last[1].stats.samples) < len(last[0].stats.samples)


def test_a_broken_observer_does_not_break_a_tune():
    def observer(event):
        raise ValueError("progress bar crashed")

    device = FakeDevice()
    tunables = make_set("a", "b")
    assert make_tuner(device, observer=observer).execute(tunables, call(device, [1.0])).name == "a"


def test_forget_drops_a_key_so_the_next_call_tunes_again_while_the_store_keeps_it():
    device = FakeDevice()
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    assert tuner.states(tunables) == {Key({"n": 4}): Hit(0)}
    tuner.forget(tunables, Key({"n": 4}))
    assert tuner.states("fake") == {}
    assert (tunables.name, Key({"n": 4})) in tuner.store.entries
    tuner.execute(tunables, call(device, [1.0]))
    assert len(tuner.records.records) == 2


def test_the_tuner_key_is_the_sets_key_and_is_memoised():
    calls = []

    def key(args):
        calls.append(args)
        return {"n": args.params[0], "dtype": "f32"}

    device = FakeDevice()
    tunables = make_set("a", "b", key=key)
    args = call(device, [1.0])
    assert make_tuner(device).key(tunables, args) == tunables.key(args) == Key({"n": 4, "dtype": "f32"})
    tuner = make_tuner(device)
    other = call(device, [2.0])
    assert tuner.key(tunables, other) is tuner.key(tunables, call(device, [3.0]))  # one Key per raw answer
    calls.clear()
    for _ in range(3):
        assert tuner.key(tunables, other) == Key({"n": 4, "dtype": "f32"})
        tuner.execute(tunables, other)
    assert calls == []  # the same Args again: its key was kept in args.cache, the key function not run


def test_a_stored_winner_that_no_longer_compiles_is_tuned_again_and_reported():
    device = FakeDevice()
    device.script("b", compile_error="driver says no")
    tunables = make_set("a", "b", "c")
    args = call(device, [1.0])
    key = tunables.key(args)
    store = MemoryStore()
    store.save(StoredEntry(tunables.name, key, tunables.checksum, 1, "b"))
    tuner = make_tuner(device, store=store)

    ran = tuner.execute(tunables, args)

    assert ran.name in ("a", "c")
    assert tuner.fastest(tunables, key) == Hit(tunables.index_of[ran.name])
    assert store.entries[(tunables.name, key)].winner_name == ran.name
    reasons = stored_results(tuner, tunables, key)
    assert "driver says no" in reasons["b"]["reason"]


def test_a_pinned_candidate_that_does_not_compile_raises_its_error():
    device = FakeDevice()
    device.script("b", compile_error="driver says no")
    tunables = make_set("a", "b")
    tuner = make_tuner(device, config=quiet(pins=(Pin("fake", "b"),)))
    with pytest.raises(KernelError, match="driver says no"):
        tuner.execute(tunables, call(device, [1.0]))


def test_a_pin_the_keys_plan_rules_out_is_a_config_error_not_a_run():
    # A vec4 kernel where 4 does not divide the size would run, and leave outputs unwritten.
    device = FakeDevice()
    tunables = make_set("a", kernel("vec4", priority=lambda key: 0 if key.as_dict()["n"] % 4 == 0 else -1))
    tuner = make_tuner(device, config=quiet(pins=(Pin("fake", "vec4"),)))
    with pytest.raises(ConfigError, match=r"pin for fake \[n=6\] names vec4, which does not fit this key: "
                                          r"vec4 is not planned for this key") as refused:
        tuner.execute(tunables, call(device, [1.0], n=6))
    assert refused.value.field == "WGTUNE_PIN"
    assert tuner.execute(tunables, call(device, [1.0], n=8)).name == "vec4"  # where it fits, the pin runs it


def test_a_set_redefined_with_other_candidates_in_one_process_is_tuned_again():
    device = FakeDevice()
    device.script("a", duration=2e-3)
    device.script("b", duration=1e-3)
    device.script("x", duration=3e-3)
    device.script("y", duration=1e-3)
    tuner = make_tuner(device)
    args = call(device, [1.0])
    assert tuner.execute(make_set("a", "b"), args).name == "b"

    edited = make_set(kernel("x", wgsl="// x v2"), "y")  # same name, other candidates
    assert tuner.fastest(edited, tuner.key(edited, args)) == Unchecked(1, make_set("a", "b").checksum)
    old_winner_runs = device.dispatches["b"]
    ran = tuner.execute(edited, args)
    assert ran.name == "y"
    assert device.dispatches["b"] == old_winner_runs, "the old set's winner must not run for the new set"
    assert len(tuner.records.records) == 2


def test_an_equal_set_object_reuses_what_was_decided():
    device = FakeDevice()
    tuner = make_tuner(device)
    args = call(device, [1.0])
    tuner.execute(make_set("a", "b"), args)
    profiles = device.profile_count
    tuner.execute(make_set("a", "b"), args)
    assert device.profile_count == profiles
    assert len(tuner.records.records) == 1
