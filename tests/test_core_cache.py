"""The tune cache's transitions and the pipeline cache's one answer to "which candidate is usable"."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet

from wgtune import MISS, PENDING, Hit, IllegalTransition, Key, MemoryStore, StoredEntry, Unchecked, run_inline
from wgtune.cache import TuneCache
from wgtune.tune.pipelines import PipelineCache

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

KEY = Key({"n": 4})


def entry(tunables, winner: int = 1, checksum: str | None = None) -> StoredEntry:
    return StoredEntry(tunables.name, KEY, checksum or tunables.checksum, winner, tunables.candidates[winner].name)


def test_a_stored_winner_is_unchecked_until_claimed_then_a_hit_when_its_checksum_matches():
    tunables = make_set("a", "b")
    cache = TuneCache([entry(tunables)])
    assert cache.state("fake", KEY) == Unchecked(1, tunables.checksum)
    assert cache.claim(tunables, KEY) == Hit(1)
    assert cache.state("fake", KEY) == Hit(1)
    assert cache.entry(tunables, KEY).winner_name == "b"


def test_a_stored_winner_of_other_candidates_claims_as_a_miss_that_the_caller_tunes():
    tunables = make_set("a", "b")
    cache = TuneCache([entry(tunables, checksum="other")])
    assert cache.claim(tunables, KEY) is None  # the caller now owns the tune
    assert cache.state("fake", KEY) is PENDING
    assert cache.entry(tunables, KEY) is None  # its results were of other candidates


def test_only_a_tune_settles_a_pending_key_and_a_second_settling_is_a_bug():
    tunables = make_set("a", "b")
    cache = TuneCache()
    assert cache.claim(tunables, KEY) is None
    assert cache.claim(tunables, KEY) is PENDING  # a second caller waits for the first's tune
    with pytest.raises(IllegalTransition, match="being tuned"):
        cache.forget("fake", KEY)
    cache.finish(entry(tunables))
    assert cache.state("fake", KEY) == Hit(1)
    with pytest.raises(IllegalTransition, match="not Pending"):
        cache.finish(entry(tunables))
    with pytest.raises(IllegalTransition, match="not Pending"):
        cache.fail("fake", KEY, RuntimeError("late"))


def test_a_failed_tune_is_a_miss_with_its_reason_until_a_tune_succeeds():
    tunables = make_set("a", "b")
    cache = TuneCache()
    cache.claim(tunables, KEY)
    cache.fail("fake", KEY, RuntimeError("device lost"))
    assert cache.state("fake", KEY) is MISS and str(cache.failures[("fake", KEY)]) == "device lost"
    cache.claim(tunables, KEY)
    cache.finish(entry(tunables))
    assert ("fake", KEY) not in cache.failures


def test_demoting_a_broken_winner_happens_only_while_the_key_still_holds_it():
    tunables = make_set("a", "b", "c")
    cache = TuneCache([entry(tunables, winner=2)])
    cache.claim(tunables, KEY)
    assert cache.demote("fake", KEY, 1, RuntimeError("not the winner")) is False
    assert cache.state("fake", KEY) == Hit(2)
    assert cache.demote("fake", KEY, 2, RuntimeError("no longer compiles")) is True
    assert cache.state("fake", KEY) is MISS


def test_a_reload_replaces_stored_winners_but_keeps_a_running_tune():
    tunables = make_set("a", "b")
    other = Key({"n": 8})
    cache = TuneCache([StoredEntry("fake", other, tunables.checksum, 0, "a")])
    cache.claim(tunables, KEY)  # Pending: a tune is running
    cache.reload([entry(tunables, winner=0)])  # an import that has this key too
    assert cache.state("fake", KEY) is PENDING
    assert cache.state("fake", other) is MISS  # not in the store any more
    cache.finish(entry(tunables, winner=1))  # the running tune still settles its key
    assert cache.state("fake", KEY) == Hit(1)


def test_other_candidates_under_a_known_name_send_its_hits_back_to_unchecked():
    old, new = make_set("a", "b"), make_set("a", "b", "c")
    cache = TuneCache([entry(old)])
    assert cache.adopt(old) is False
    cache.claim(old, KEY)
    assert cache.adopt(make_set("a", "b")) is False  # equal candidates: nothing changes
    assert cache.adopt(new) is True
    assert cache.state("fake", KEY) == Unchecked(1, old.checksum)


def test_the_fallback_is_the_first_usable_candidate_and_the_candidates_that_agree_judge():
    device = FakeDevice()
    device.script("a", compile_error="driver says no")
    device.script("b", duration=2e-3)
    device.script("c", duration=1e-3, wrong=True)
    device.script("d", duration=3e-3)
    tunables = make_set("a", "b", "c", "d", outputs=(0,))
    tuner = make_tuner(device, config=quiet(checks=True))
    tuner.execute(tunables, call(device, [1.0]))
    assert tunables.candidates[tuner.fallback(tunables)].name == "b"
    results = {result["name"]: result for result in tuner.cache.entry(tunables, KEY).results}
    assert "disagrees with the 2 candidates that agree (b, d)" in results["c"]["reason"]
    assert tuner.cache.entry(tunables, KEY).winner_name == "b"
    pipelines = PipelineCache(device)
    failures: list = []

    async def usable():
        return [index async for index, _ in pipelines.usable(tunables, failures=failures)]

    assert run_inline(usable()) == [1, 2, 3]
    assert [failure.name for failure in failures] == ["a"] and "driver says no" in failures[0].reason


def test_an_import_in_a_running_process_reloads_the_cache_without_a_new_tuner():
    device = FakeDevice()
    tunables = make_set("a", "b")
    store = MemoryStore()
    tuner = make_tuner(device, store=store)
    tuner.execute(tunables, call(device, [1.0]))
    before = tuner.fastest(tunables, KEY)
    store.save(StoredEntry("fake", KEY, tunables.checksum, 1 - before.index, "x"))
    tuner.reload()
    assert tuner.check_tune(tunables, KEY, call(device, [1.0])) == Hit(1 - before.index)


def test_a_store_that_finds_one_entry_is_read_key_by_key_as_calls_miss_not_whole_at_open():
    tunables = make_set("a", "b")

    class KeyByKey(MemoryStore):
        read_by_key = True  # the store contract's say: read me key by key (store/contract.py)

        def __init__(self):
            super().__init__()
            self.lookups: list[Key] = []

        def load(self):
            raise AssertionError("a store read key by key is not read whole")

        def lookup(self, set_name, key):
            self.lookups.append(key)
            return self.entries.get((set_name, key))

    store = KeyByKey()
    store.save(entry(tunables))
    device = FakeDevice()
    tuner = make_tuner(device, store=store)
    assert tuner.states(tunables) == {}  # nothing read at open
    assert tuner.cache.entry(tunables, KEY).winner_name == "b"  # an entry is found without a claim too
    assert tuner.check_tune(tunables, KEY, call(device, [1.0])) == Hit(1)
    assert device.profile_count == 0 and store.lookups == [KEY, KEY]  # the stored winner: no tune
    tuner.execute(tunables, call(device, [1.0]))
    assert store.lookups == [KEY, KEY]  # a known key asks the store no more
    other = Key({"n": 8})
    tuner.execute(tunables, call(device, [1.0], n=8))  # not stored: looked up once, then tuned
    assert store.lookups[-1] == other and tuner.fastest(tunables, other).__class__ is Hit
