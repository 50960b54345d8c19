"""Tuners that share a store and cooperate (the page's tabs), on the fake device.

A coordinator (``wgtune.coordinator``) makes a tune wait while another tuner tunes the same key,
then take the winner it stored; an announced winner switches a key without a tune. The page's
coordinator (Web Locks over IndexedDB) is ``backends/tabs.py``; here a per-key asyncio lock over
one MemoryStore plays it, so the core's side is tested alone.
"""

from __future__ import annotations

import asyncio

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet, settle

from wgtune import MISS, PENDING, Hit, Key, MemoryStore, NoValidKernelFound, StoredEntry, TuneStarted, Unchecked
from wgtune.config import parse_pins
from wgtune.coordinator import WinnerFromElsewhere
from wgtune.runner import spawn_task

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

KEY = Key({"n": 4})


class LockedStore:
    """A coordinator as the page's is: one lock per key, the key's stored entry read once held."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.locks: dict[tuple[str, Key], asyncio.Lock] = {}
        self.acquired: list[tuple[str, Key]] = []
        self.released: list[tuple[str, Key]] = []

    async def acquire(self, set_name: str, key: Key) -> StoredEntry | None:
        await self.locks.setdefault((set_name, key), asyncio.Lock()).acquire()
        self.acquired.append((set_name, key))
        return self.store.entries.get((set_name, key))

    async def release(self, set_name: str, key: Key) -> None:
        self.released.append((set_name, key))
        self.locks[(set_name, key)].release()


class BrokenCoordinator:
    async def acquire(self, set_name: str, key: Key) -> StoredEntry | None:
        raise RuntimeError("navigator.locks is undefined")

    async def release(self, set_name: str, key: Key) -> None:
        raise AssertionError("never acquired: nothing to release")


def two_tabs(store: MemoryStore, coordinator, **kwargs):
    """Two tuners ("tabs") on devices of their own over one store and one coordinator."""
    tabs = []
    for _ in range(2):
        device = FakeDevice(suspend=True)
        device.script("slow", duration=3e-3)
        device.script("fast", duration=1e-3)
        events: list = []
        tuner = make_tuner(device, spawn=spawn_task, store=store, coordinator=coordinator,
                           observer=events.append, **kwargs)
        tabs.append((tuner, device, events))
    return tabs


def test_two_tuners_missing_the_same_key_at_once_tune_it_once_and_both_run_the_one_winner():
    store = MemoryStore()
    coordinator = LockedStore(store)
    tunables = make_set("slow", "fast")

    async def main():
        (first, first_device, first_events), (second, second_device, second_events) = two_tabs(store, coordinator)
        first_args, second_args = call(first_device, [1.0]), call(second_device, [1.0])
        assert first.check_tune(tunables, KEY, first_args) is PENDING
        assert second.check_tune(tunables, KEY, second_args) is PENDING
        while first_device.profile_count == 0:  # the first measures (it suspends on each reading)
            await asyncio.sleep(0)
        # The second waits for the first's tune: Pending, and its calls run the fallback.
        assert second.fastest(tunables, KEY) is PENDING
        assert second.execute(tunables, second_args).name == "slow"
        assert await settle(first, tunables, KEY) == Hit(1)
        assert await settle(second, tunables, KEY) == Hit(1)
        ran = [second.execute(tunables, second_args).name]  # its winner compiles on the loop meanwhile
        while ran[-1] != "fast" and len(ran) < 100:
            await asyncio.sleep(0)
            ran.append(second.execute(tunables, second_args).name)
        assert set(ran) <= {"slow", "fast"} and ran[-1] == "fast"
        return first_device, second_device, first_events, second_events, second

    first_device, second_device, first_events, second_events, second = asyncio.run(main())
    assert first_device.profile_count > 0 and second_device.profile_count == 0  # measured once
    assert [type(e) for e in second_events] == [WinnerFromElsewhere]
    assert second_events[0].announced is False and second_events[0].entry == store.entries[("fake", KEY)]
    assert sum(isinstance(e, TuneStarted) for e in first_events) == 1
    assert second.records.records == []  # no tune ran in the second: no record
    assert second.results(tunables, KEY) is not None  # the first's results, for the chart
    assert coordinator.acquired == coordinator.released == [("fake", KEY)] * 2


def test_a_key_stored_by_another_tuner_since_this_one_loaded_is_a_hit_with_nothing_measured():
    store = MemoryStore()
    coordinator = LockedStore(store)
    tunables = make_set("slow", "fast")

    async def main():
        (first, first_device, _), (second, second_device, _) = two_tabs(store, coordinator)
        await first.tune_async(tunables, call(first_device, [1.0]))  # the second loaded before this
        assert second.fastest(tunables, KEY) is MISS
        assert await second.tune_async(tunables, call(second_device, [1.0])) == Hit(1)
        return second_device

    assert asyncio.run(main()).profile_count == 0


def test_a_winner_stored_for_other_candidates_or_without_checks_is_tuned_again():
    store = MemoryStore()
    coordinator = LockedStore(store)
    tunables = make_set("slow", "fast", outputs=(0,))
    store.save(StoredEntry("fake", KEY, "other candidates", 0, "slow"))

    async def main():
        (tuner, device, events), _ = two_tabs(store, coordinator, config=quiet(checks=True))
        assert await tuner.tune_async(tunables, call(device, [1.0])) == Hit(1)
        tuned_over_other_candidates = device.profile_count
        store.save(StoredEntry("fake", Key({"n": 8}), tunables.checksum, 0, "slow"))  # checked=False
        assert await tuner.tune_async(tunables, call(device, [1.0], n=8)) == Hit(1)
        return tuned_over_other_candidates, device.profile_count, events

    tuned_over_other_candidates, profiles, events = asyncio.run(main())
    assert 0 < tuned_over_other_candidates < profiles
    assert not any(isinstance(e, WinnerFromElsewhere) for e in events)
    assert store.entries[("fake", Key({"n": 8}))].checked


def test_the_next_tuner_goes_on_after_a_tune_that_failed_and_tunes_the_key_itself():
    store = MemoryStore()
    coordinator = LockedStore(store)
    tunables = make_set("slow", "fast")

    async def main():
        (first, first_device, _), (second, second_device, _) = two_tabs(store, coordinator)
        first_device.script("slow", launch_error="lost")
        first_device.script("fast", launch_error="lost")
        first.check_tune(tunables, KEY, call(first_device, [1.0]))
        second.check_tune(tunables, KEY, call(second_device, [1.0]))
        assert await settle(first, tunables, KEY) is MISS
        assert await settle(second, tunables, KEY) == Hit(1)
        return first

    first = asyncio.run(main())
    assert isinstance(first.failures[("fake", KEY)], NoValidKernelFound)
    assert coordinator.released == [("fake", KEY)] * 2


def test_a_coordinator_that_fails_is_logged_and_the_key_is_tuned_alone(caplog):
    tunables = make_set("slow", "fast")

    async def main():
        [(tuner, device, _), _] = two_tabs(MemoryStore(), BrokenCoordinator())
        return await tuner.tune_async(tunables, call(device, [1.0]))

    assert asyncio.run(main()) == Hit(1)
    assert "navigator.locks is undefined" in caplog.text and "tuning it here" in caplog.text


def test_a_tune_cancelled_while_it_waits_for_another_leaves_the_key_a_miss():
    store = MemoryStore()
    coordinator = LockedStore(store)
    tunables = make_set("slow", "fast")

    async def main():
        _, (second, second_device, _) = two_tabs(store, coordinator)
        lock = coordinator.locks.setdefault(("fake", KEY), asyncio.Lock())
        await lock.acquire()  # another tab tunes the key
        second.check_tune(tunables, KEY, call(second_device, [1.0]))
        await asyncio.sleep(0)
        [task] = second._tasks
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return second

    second = asyncio.run(main())
    assert second.fastest(tunables, KEY) is MISS and coordinator.released == []


# -- announced winners --------------------------------------------------------------------------


def announced(tunables, winner: int, **fields) -> StoredEntry:
    fields.setdefault("checked", True)  # another tab's tune, with checks on (the default)
    return StoredEntry(tunables.name, KEY, fields.pop("checksum", tunables.checksum), winner,
                       tunables.candidates[winner].name, **fields)


def test_an_announced_winner_switches_a_decided_or_unknown_key_without_a_tune():
    device = FakeDevice()
    events: list = []
    tuner = make_tuner(device, observer=events.append)
    tunables = make_set("slow", "fast", "fastest")
    args = call(device, [1.0])
    assert tuner.fastest(tunables, KEY) is MISS  # the set is adopted, the key unknown
    assert tuner.take_announced(announced(tunables, 2)) is True
    assert tuner.fastest(tunables, KEY) == Hit(2)
    assert tuner.execute(tunables, args).name == "fastest" and device.profile_count == 0
    assert tuner.take_announced(announced(tunables, 1)) is True  # a Hit follows the latest winner
    assert tuner.fastest(tunables, KEY) == Hit(1)
    assert tuner.take_announced(announced(tunables, 1)) is False  # already so
    assert [(type(e), e.announced, e.entry.winner) for e in events] == [(WinnerFromElsewhere, True, 2),
                                                                        (WinnerFromElsewhere, True, 1)]
    assert tuner.cache.entry(tunables, KEY).winner == 1  # the entry came along (results, confidence)


def test_an_announced_winner_never_touches_a_pending_key_nor_takes_other_candidates():
    device = FakeDevice(suspend=True)
    device.script("slow", duration=3e-3)
    device.script("fast", duration=1e-3)
    tunables = make_set("slow", "fast")

    async def main():
        tuner = make_tuner(device, spawn=spawn_task)
        tuner.check_tune(tunables, KEY, call(device, [1.0]))
        assert tuner.take_announced(announced(tunables, 0)) is False  # its own tune settles it
        assert tuner.fastest(tunables, KEY) is PENDING
        assert await settle(tuner, tunables, KEY) == Hit(1)
        assert tuner.take_announced(announced(tunables, 0, checksum="other candidates")) is False
        assert tuner.take_announced(StoredEntry("fake", KEY, tunables.checksum, 7, "nobody")) is False
        return tuner

    assert asyncio.run(main()).fastest(tunables, KEY) == Hit(1)


def test_an_announced_winner_of_a_set_not_used_yet_is_checked_on_its_first_claim():
    device = FakeDevice()
    tuner = make_tuner(device)
    tunables = make_set("slow", "fast")
    assert tuner.take_announced(announced(tunables, 1)) is True
    assert tuner.cache.state("fake", KEY) == Unchecked(1, tunables.checksum)
    assert tuner.execute(tunables, call(device, [1.0])).name == "fast" and device.profile_count == 0


def test_an_announced_winner_leaves_a_pinned_key_and_one_without_checks_is_refused_by_a_checking_tuner():
    device = FakeDevice()
    tunables = make_set("slow", "fast")
    pinned = make_tuner(device, config=quiet(pins=parse_pins("fake=slow")))
    assert pinned.execute(tunables, call(device, [1.0])).name == "slow"
    assert pinned.take_announced(announced(tunables, 1)) is False
    assert pinned.fastest(tunables, KEY) == Hit(0)
    checking = make_tuner(device, config=quiet(checks=True))
    checking.fastest(tunables, KEY)
    assert checking.take_announced(announced(tunables, 1, checked=False)) is False
    assert checking.take_announced(announced(tunables, 1)) is True
