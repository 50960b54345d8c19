"""Checks that cannot be silent, and errors that say what they are (issue 12)."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, add_one_in_place, call, kernel, make_set, make_tuner, quiet

from wgtune import ConfigError, Hit, Launch, Measured, MemoryStore, NoValidKernelFound, TuneStarted

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def started(tuner) -> list:
    events: list = []
    tuner.observer = lambda event: events.append(event) if isinstance(event, TuneStarted) else None
    return events


def test_checks_on_with_nothing_to_compare_say_so_once_and_the_outcome_says_nothing_was_compared(caplog):
    device = FakeDevice()
    tunables = make_set("a", "b", name="nothing_written")  # fake WGSL: no read_write binding, no outputs=
    events: list = []
    with caplog.at_level("WARNING", logger="wgtune"):
        tuner = make_tuner(device, config=quiet(checks=True), observer=events.append)
        tuner.execute(tunables, call(device, [1.0]))
        tuner.execute(tunables, call(device, [1.0], n=8))
    said = [record.message for record in caplog.records if "nothing_written" in record.message]
    assert len(said) == 1 and "no outputs to compare" in said[0] and "outputs=" in said[0]
    outcomes = [event.outcome for event in events if type(event).__name__ == "TuneFinished"]
    assert [outcome.judge for outcome in outcomes] == ["", ""]
    caplog.clear()
    with caplog.at_level("WARNING", logger="wgtune"):
        quiet_set = make_set("a", "b", name="said_none", outputs=())  # the user's word: nothing to check
        make_tuner(device, config=quiet(checks=True)).execute(quiet_set, call(device, [1.0]))
    assert not [record for record in caplog.records if "said_none" in record.message]


def test_a_winner_stored_without_checks_is_checked_once_with_them_then_trusted():
    device = FakeDevice()
    for name in ("a", "b"):
        device.script(name, kernel=add_one_in_place)
    tunables = make_set("a", "b", outputs=(0,))
    store = MemoryStore()
    make_tuner(device, store=store, config=quiet(checks=False)).execute(tunables, call(device, [1.0]))
    (entry,) = store.load()
    assert entry.checked is False
    checking = make_tuner(device, store=store, config=quiet(checks=True))
    tunes = started(checking)
    profiles = device.profile_count
    checking.execute(tunables, call(device, [1.0]))
    assert tunes == [] and device.profile_count == profiles  # verified by running it beside the other, not a tune
    (entry,) = store.load()
    assert entry.checked is True and entry.to_json()["checked"] is True
    again = make_tuner(device, store=store, config=quiet(checks=True))
    tunes = started(again)
    assert isinstance(again.check_tune(tunables, tunables.key(call(device, [1.0])), call(device, [1.0])), Hit)
    assert tunes == []  # checked once: trusted from then on


def test_a_call_every_candidate_fails_on_is_reported_as_itself_not_as_missing_reference_outputs():
    device = FakeDevice()
    for name in ("a", "b"):
        device.script(name, launch_error="the call gives 2 buffers; binding 2 needs a third")
    tunables = make_set("a", "b", outputs=(0,))
    with pytest.raises(NoValidKernelFound, match=r"every candidate failed on this call: .*binding 2 needs a third"):
        make_tuner(device, config=quiet(checks=True)).execute(tunables, call(device, [1.0]))


def test_a_grid_of_no_workgroups_is_the_candidates_failure_and_cannot_win():
    device = FakeDevice()
    device.script("empty", duration=1e-9)  # does nothing, fast
    device.script("real", duration=1e-3)
    tunables = make_set(kernel("empty", grid=lambda args: (0, 1, 1)), kernel("real"))
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "real"
    empty, real = tuner.results(tunables, tunables.key(call(device, [1.0])))
    assert isinstance(empty, Launch) and "dispatches no workgroups" in empty.reason
    assert isinstance(real, Measured)


def test_a_key_function_that_fails_or_answers_no_key_is_a_config_error_naming_the_set():
    device = FakeDevice()
    tuner = make_tuner(device)
    broken = make_set("a", "b", name="broken_key", key=lambda args: {"n": args.params[7]})
    with pytest.raises(ConfigError, match="'broken_key': its key function failed on this call: IndexError"):
        tuner.execute(broken, call(device, [1.0]))
    with pytest.raises(ConfigError, match="'broken_key': its key function failed"):
        broken.key(call(device, [1.0]))
    odd = make_set("a", "b", name="odd_key", key=lambda args: {"n": [1, 2]})
    with pytest.raises(ConfigError, match="'odd_key': its key function gave no valid key: key field 'n' is a list"):
        tuner.execute(odd, call(device, [1.0]))
    nan = make_set("a", "b", name="nan_key", key=lambda args: {"n": float("nan")})
    with pytest.raises(ConfigError, match="'nan_key': its key function gave no valid key"):
        tuner.execute(nan, call(device, [1.0]))
