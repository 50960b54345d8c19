"""What the browser needs of the core, on the fake device: samples long against a coarse clock,
and a stored winner that no longer compiles while the event loop serves calls with the fallback."""

from __future__ import annotations

import asyncio

import pytest
from fakes import FakeDevice, call, double_into, make_set, make_tuner, quiet, stored_results

from wgtune import MISS, Hit, Key, MemoryStore, StoredEntry, TuneFailedEvent, clock_grain, run_inline, spawn_task
from wgtune.tune.measure import GRAIN_MULTIPLE

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


@pytest.mark.parametrize("policy", ["adaptive", "fixed"])
def test_a_coarse_clock_makes_each_sample_last_fifty_of_its_grains(policy):
    # A browser's timestamps, quantized to 100 us: every 3 us empty pass reads 0, the grain is measured.
    device = FakeDevice(clock_quantum=100e-6, empty_pass=3e-6)
    device.script("a", duration=1e-5)
    device.script("b", duration=2e-5)
    tunables = make_set("a", "b")
    tuner = make_tuner(device, config=quiet(min_sample=1e-4, samples=3, policy=policy))
    tuner.execute(tunables, call(device, [1.0]))
    assert run_inline(clock_grain(device)) == 100e-6  # measured before the tune, and kept
    for name, duration in (("a", 1e-5), ("b", 2e-5)):
        profiles = device.profiles[name]
        sampled = profiles[-1]  # after calibration every sample uses the calibrated count
        assert sampled * duration >= GRAIN_MULTIPLE * 100e-6, (name, profiles)
        kept = len(stored_results(tuner, tunables)[name]["samples"])
        assert profiles.count(sampled) >= kept >= 1, (name, profiles, kept)


def test_a_fine_clock_keeps_the_configured_floor():
    device = FakeDevice()  # clock_grain 0: the configured min_sample alone decides
    device.script("a", duration=1e-5)
    device.script("b", duration=2e-5)
    tuner = make_tuner(device, config=quiet(min_sample=1e-4, samples=3))
    tuner.execute(make_set("a", "b"), call(device, [1.0]))
    assert max(device.profiles["a"][-3:]) * 1e-5 < 1e-3


def test_a_stored_winner_that_fails_to_compile_in_the_loop_is_a_miss_with_its_reason_then_retuned():
    device = FakeDevice(suspend={"compile", "resolve"})
    device.script("c", compile_error="driver says no")
    tunables = make_set("a", "b", "c")
    key = Key({"n": 4})
    store = MemoryStore()
    store.save(StoredEntry("fake", key, tunables.checksum, 2, "c", checked=True))
    events = []

    async def main():
        tuner = make_tuner(device, store=store, spawn=spawn_task, observer=events.append)
        await tuner.prepare(tunables)
        args = call(device, [1.0])
        ran = [tuner.execute(tunables, args).name]  # the winner compiles in a task: fallback meanwhile
        for _ in range(20):
            await asyncio.sleep(0)
        after_failure = tuner.fastest(tunables, key)
        reason = str(tuner.failures[("fake", key)])
        compiles_of_c = device.compiles["c"]
        ran.append(tuner.execute(tunables, args).name)  # the Miss starts a tune; fallback meanwhile
        for _ in range(2000):
            await asyncio.sleep(0)
            if isinstance(tuner.fastest(tunables, key), Hit):
                break
        return ran, after_failure, reason, compiles_of_c, tuner.fastest(tunables, key)

    ran, after_failure, reason, compiles_of_c, final = asyncio.run(main())
    assert ran == ["a", "a"]
    assert after_failure is MISS
    assert "c no longer compiles" in reason and "driver says no" in reason
    assert compiles_of_c == 1  # not retried on every call
    assert isinstance(final, Hit) and tunables.candidates[final.index].name != "c"
    assert any(isinstance(e, TuneFailedEvent) and "no longer compiles" in e.reason for e in events)
    assert store.entries[("fake", key)].winner_name != "c"  # the new winner replaced the broken one


def test_the_tune_copies_the_call_at_the_miss_so_the_fallbacks_answer_cannot_vouch_for_a_lazy_candidate():
    # In the page the fallback runs on the call's buffers before the tune's task starts. A candidate
    # that writes nothing (fast) would find the fallback's answer already in a copy made then.
    device = FakeDevice(suspend={"compile", "resolve"})
    device.script("right", kernel=double_into, duration=3e-3)
    device.script("right too", kernel=double_into, duration=2e-3)
    device.script("lazy", duration=1e-4)  # leaves its output as it found it
    tunables = make_set("right", "lazy", "right too", outputs=(1,))
    key = Key({"n": 4})

    async def main():
        tuner = make_tuner(device, spawn=spawn_task, config=quiet(checks=True))
        await tuner.prepare(tunables)
        args = call(device, [1.0, 2.0], [0.0, 0.0])
        assert tuner.execute(tunables, args).name == "right"  # Pending: the fallback wrote [2, 4]
        for _ in range(5000):
            await asyncio.sleep(0)
            if isinstance(tuner.fastest(tunables, key), Hit):
                break
        return tuner

    tuner = asyncio.run(main())
    assert tunables.candidates[tuner.fastest(tunables, key).index].name != "lazy"
    assert stored_results(tuner, tunables)["lazy"]["error"] == "Mismatch"
