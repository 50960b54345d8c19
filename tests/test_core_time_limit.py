"""The time limit per candidate: a runaway is a Timeout result and the tune goes on (fake device).

Runs in CPython and in Pyodide. The runaway really takes wall-clock time (``Script.stall``), as
the limit is read off the wall clock around its first launch.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet, stored_results

from wgtune import Config, ConfigError, DeviceLost, Measured, NoValidKernelFound, Timeout
from wgtune.tune.measure import WARMUP_SECONDS, warmups_after
from wgtune.tune.time_limit import FIRST_LIMIT, FLOOR, RELATIVE_FACTOR, TimeLimit
from wgtune.tune.tuning import measure_key

pytestmark = pytest.mark.core

STALL = 0.15


def test_a_runaway_candidate_is_a_timeout_launched_once_and_the_tune_goes_on():
    device = FakeDevice()
    device.script("runaway", duration=1e-4, stall=STALL)  # would be the fastest by its timestamps
    device.script("steady", duration=1e-3)
    device.script("slower", duration=2e-3)
    tunables = make_set("runaway", "steady", "slower")
    tuner = make_tuner(device, config=quiet(time_limit=STALL / 3, warmups=3))
    args = call(device, [1.0])

    assert tuner.execute(tunables, args).name == "steady"
    runaway, steady, slower = tuner.results(tunables, tunables.key(args))
    assert isinstance(runaway, Timeout)
    assert "first launch took" in runaway.reason and "time limit of 0.05 s" in runaway.reason
    assert isinstance(steady, Measured) and isinstance(slower, Measured)
    assert device.dispatches["runaway"] == 1  # no warmups, no calibration, no samples after it
    assert device.profiles.get("runaway") is None
    assert stored_results(tuner, tunables)["runaway"]["error"] == "Timeout"  # kept as what it was


def test_a_candidate_within_the_limit_is_measured_with_every_warmup():
    device = FakeDevice()
    device.script("a", duration=1e-3)
    device.script("b", duration=2e-3)
    tunables = make_set("a", "b")
    tuner = make_tuner(device, config=quiet(time_limit=5.0, warmups=3))
    tuner.execute(tunables, call(device, [1.0]))
    assert device.dispatches["b"] == 3  # the first launch is one of the three warmups


def test_a_first_launch_past_the_warmup_time_is_the_only_warmup():
    device = FakeDevice()
    device.script("slow", duration=3e-3, stall=WARMUP_SECONDS * 1.5)  # a CPU adapter's launch of seconds
    device.script("quick", duration=2e-3)
    tuner = make_tuner(device, config=quiet(time_limit=5.0, warmups=3))
    assert tuner.execute(make_set("slow", "quick"), call(device, [1.0])).name == "quick"
    assert device.dispatches["slow"] == 1
    assert device.dispatches["quick"] == 3 + 1  # every warmup, then the call itself


@pytest.mark.parametrize(("first_launch", "warmups", "after"), [
    (0.0, 3, 2), (1e-5, 3, 2), (0.01, 3, 2), (0.01, 5, 2), (0.02, 5, 1), (WARMUP_SECONDS, 5, 0), (1.0, 2, 0),
    (1e-5, 1, 0), (1e-5, 0, 0),
])
def test_warmups_stop_once_the_warmup_time_is_spent(first_launch, warmups, after):
    assert warmups_after(first_launch, warmups) == after


def test_every_candidate_past_the_limit_fails_the_tune_with_each_timeout_named():
    device = FakeDevice()
    device.script("a", stall=STALL)
    device.script("b", stall=STALL * 1.2)
    tunables = make_set("a", "b")
    tuner = make_tuner(device, config=quiet(time_limit=STALL / 3))
    with pytest.raises(NoValidKernelFound, match=r"(?s)a: Timeout: its first launch took.*b: Timeout"):
        tuner.execute(tunables, call(device, [1.0]))


def test_the_default_limit_is_relative_to_the_fastest_first_launch_with_a_floor():
    limit = TimeLimit()
    assert limit.seconds() == FIRST_LIMIT  # nothing to compare the first candidate with
    limit.observe(0.5)
    assert limit.seconds() == pytest.approx(RELATIVE_FACTOR * 0.5)
    limit.observe(0.9)  # slower: the fastest stays
    assert limit.seconds() == pytest.approx(RELATIVE_FACTOR * 0.5)
    limit.observe(1e-6)
    assert limit.seconds() == FLOOR
    assert "100x the fastest first launch" in limit.describe()
    fixed = TimeLimit(0.25)
    fixed.observe(1e-6)
    assert fixed.seconds() == 0.25 and "0.25 s" in fixed.describe()


def test_the_time_limit_is_read_from_the_environment_and_checked():
    assert Config.from_env({}).time_limit is None
    assert Config.from_env({"WGTUNE_TIME_LIMIT": "auto"}).time_limit is None
    assert Config.from_env({"WGTUNE_TIME_LIMIT": "2.5"}).time_limit == 2.5
    assert Config().isolate is Config.from_env({}).isolate is True  # natively, tunes run in a tuning process
    assert Config.from_env({"WGTUNE_ISOLATE": "0"}).isolate is False
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(ConfigError, match="WGTUNE_TIME_LIMIT"):
            Config.from_env({"WGTUNE_TIME_LIMIT": bad})
    with pytest.raises(ConfigError, match="time_limit"):
        Config(time_limit=0)


class RulingGuard:
    """A launch guard that measures each tune on the tuner's own device, the candidates named in
    ``runaways`` ruled out as a process guard rules out those it stopped."""

    def __init__(self, *runaways: str) -> None:
        self.runaways = runaways
        self.tunes: list[tuple[str, object]] = []

    async def measure(self, request):
        self.tunes.append((request.tunables.name, request.key))
        index_of = request.tunables.index_of
        stopped = {index_of[name]: Timeout(name, "ran past the limit in the tuning process, which was stopped")
                   for name in self.runaways}
        return await measure_key(replace(request, ruled_out={**request.ruled_out, **stopped}))


def test_the_tuner_hands_every_tune_to_its_guard_and_takes_the_candidates_it_stopped_as_timeouts():
    device = FakeDevice()
    device.script("hangs", duration=1e-4)
    device.script("fine", duration=1e-3)
    tunables = make_set("hangs", "fine")
    guard = RulingGuard("hangs")
    tuner = make_tuner(device, config=quiet(time_limit=1.0), guard=guard)
    args = call(device, [1.0])

    assert tuner.execute(tunables, args).name == "fine"
    hangs, fine = tuner.results(tunables, tunables.key(args))
    assert isinstance(hangs, Timeout) and "tuning process, which was stopped" in hangs.reason
    assert isinstance(fine, Measured)
    assert device.dispatches["hangs"] == 0  # the tune's device never ran it
    assert stored_results(tuner, tunables)["hangs"]["error"] == "Timeout"
    other = call(device, [2.0], n=8)
    tuner.execute(tunables, other)
    tuner.execute(tunables, other)  # a hit: no tune, nothing for the guard
    assert guard.tunes == [(tunables.name, tunables.key(args)), (tunables.name, tunables.key(other))]


def test_a_device_lost_during_a_first_launch_names_that_candidate_and_it_can_be_ruled_out():
    device = FakeDevice()
    device.script("hangs", loses_device=True)
    tunables = make_set("steady", "hangs", "slower")
    device.script("slower", duration=2e-3)
    tuner = make_tuner(device)
    args = call(device, [1.0])
    with pytest.raises(DeviceLost, match=r"watchdog reset it \(during the first launch of hangs\)"):
        tuner.execute(tunables, args)
    key = tunables.key(args)
    assert tuner.failures[(tunables.name, key)].candidate == "hangs"

    # What the page does on a new device: the culprit is ruled out, and the tune goes on without it.
    fresh = FakeDevice()
    fresh.script("hangs", loses_device=True)
    fresh.script("slower", duration=2e-3)
    again = make_tuner(fresh)
    again.rule_out(tunables, key, "hangs", "the device was lost during its first launch")
    assert again.execute(tunables, call(fresh, [1.0])).name == "steady"
    _steady, hangs, slower = again.results(tunables, key)
    assert isinstance(hangs, Timeout) and hangs.reason == "the device was lost during its first launch"
    assert fresh.dispatches["hangs"] == 0 and isinstance(slower, Measured)
    with pytest.raises(ConfigError, match="no candidate 'nope'"):
        again.rule_out(tunables, key, "nope", "why")


def test_past_the_default_limit_a_first_launch_is_tried_again_and_one_stall_is_forgiven(monkeypatch):
    # The relative limit's floor, made short enough to stall past in a test, and its factor small
    # enough that a first launch stretched by a loaded machine (Pyodide beside other jobs took
    # over 1.5 ms, which 100x put past the stall) keeps the limit under the stall.
    monkeypatch.setattr("wgtune.tune.time_limit.FLOOR", STALL / 3)
    monkeypatch.setattr("wgtune.tune.time_limit.RELATIVE_FACTOR", 2.0)
    device = FakeDevice()
    device.script("steady", duration=1e-3)
    device.script("stalled_once", duration=5e-4, stall=STALL, stalls=1)  # the machine, for a moment
    device.script("runaway", duration=1e-4, stall=STALL)  # every launch
    tunables = make_set("steady", "stalled_once", "runaway")
    tuner = make_tuner(device, config=quiet(warmups=3))
    args = call(device, [1.0])

    assert tuner.execute(tunables, args).name == "stalled_once"
    steady, stalled_once, runaway = tuner.results(tunables, tunables.key(args))
    assert isinstance(steady, Measured) and isinstance(stalled_once, Measured)
    assert isinstance(runaway, Timeout) and "launched twice" in runaway.reason and "2x the fastest" in runaway.reason
    assert device.dispatches["runaway"] == 2  # its two first launches, nothing after them
    assert device.profiles.get("runaway") is None
