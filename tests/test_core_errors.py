"""Every error value a candidate can end with, and tunes where every candidate fails."""

from __future__ import annotations

import math
import struct
import sys

import pytest
from fakes import FakeDevice, call, double_into, f32, kernel, make_set, make_tuner, quiet, stored_results

import wgtune
from wgtune import (
    MISS,
    Config,
    ConfigError,
    Group,
    Hit,
    InvalidSamples,
    KernelError,
    Launch,
    Mismatch,
    NoValidKernelFound,
    Skip,
    TuneFailed,
    Unknown,
)
from wgtune.gpu.comparison import compare_bytes
from wgtune.runner import spawn_task

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def tune_expecting_failure(tuner, tunables, args) -> NoValidKernelFound:
    with pytest.raises(NoValidKernelFound) as failure:
        tuner.check_tune(tunables, tuner.key(tunables, args), args)
    return failure.value


# -- every error value -----------------------------------------------------------------------


def test_the_fixed_policy_skips_later_batches_after_a_batch_that_produced_a_winner():
    device = FakeDevice()
    device.script("later", duration=1e-9)  # would win, but never runs
    tunables = make_set(kernel("first", group=Group("g1", 2)), kernel("later", group=Group("g2", 1)))
    tuner = make_tuner(device, config=quiet(policy="fixed"))
    assert tuner.execute(tunables, call(device, [1.0])).name == "first"
    result = stored_results(tuner, tunables)["later"]
    assert result["error"] == "Skip"
    assert "later" not in device.profiles and "later" not in device.compiles


def test_the_adaptive_policy_screens_every_batch_and_finds_a_winner_in_a_later_one():
    device = FakeDevice()
    device.script("later", duration=0.5e-3)
    tunables = make_set(kernel("first", group=Group("g1", 2)), kernel("later", group=Group("g2", 1)))
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "later"
    assert device.profiles["first"] and device.profiles["later"]


def test_a_negative_priority_candidate_is_skipped_with_its_reason():
    device = FakeDevice()
    tunables = make_set("a", kernel("never", priority=-1))
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    result = stored_results(tuner, tunables)["never"]
    assert result["error"] == "Skip"
    assert "negative priority" in result["reason"]


@pytest.mark.parametrize("bad", [0.0, -1e-3, math.nan, math.inf])
def test_a_candidate_whose_every_sample_is_invalid_gets_invalid_samples(bad):
    device = FakeDevice()
    device.script("broken-timer", duration=bad)
    tunables = make_set("broken-timer", "ok")
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "ok"
    assert stored_results(tuner, tunables)["broken-timer"]["error"] == "InvalidSamples"


def test_invalid_samples_are_dropped_and_the_valid_ones_kept():
    device = FakeDevice()
    device.script("a", duration=[1e-3, math.nan, 2e-3, 0.0])
    tunables = make_set("a", "b")
    tuner = make_tuner(device, config=quiet(samples=3, policy="fixed"))
    tuner.execute(tunables, call(device, [1.0]))
    assert stored_results(tuner, tunables)["a"]["samples"] == pytest.approx([2e-3])


def test_a_grid_function_that_raises_is_unknown():
    def grid(args):
        raise ZeroDivisionError("tile size 0")

    device = FakeDevice()
    tunables = make_set(kernel("bad-grid", grid=grid), "ok")
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "ok"
    error = stored_results(tuner, tunables)["bad-grid"]
    assert error["error"] == "Unknown"
    assert "ZeroDivisionError" in error["reason"] and "tile size 0" in error["reason"]


def test_a_device_raising_a_plain_exception_while_profiling_is_unknown():
    device = FakeDevice()
    device.script("flaky", profile_error=RuntimeError("driver hiccup"), duration=1e-9)
    tunables = make_set("flaky", "ok")
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "ok"
    error = stored_results(tuner, tunables)["flaky"]
    assert error == {"name": "flaky", "error": "Unknown", "reason": "RuntimeError: driver hiccup"}


def test_a_device_raising_a_plain_exception_while_compiling_is_unknown_for_that_candidate():
    device = FakeDevice()
    device.script("odd", compile_exception=RuntimeError("shader cache corrupt"))
    tunables = make_set("odd", "ok")
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "ok"
    error = stored_results(tuner, tunables)["odd"]
    assert error["error"] == "Unknown" and "RuntimeError: shader cache corrupt" in error["reason"]


def test_the_check_reference_skips_a_candidate_whose_compile_raises_a_plain_exception():
    device = FakeDevice()
    device.script("odd", compile_exception=RuntimeError("shader cache corrupt"))
    device.script("ref", kernel=double_into, duration=2e-3)
    device.script("fast", kernel=double_into, duration=1e-3)
    tunables = make_set("odd", "ref", "fast", outputs=(1,))
    tuner = make_tuner(device, config=quiet(checks=True))
    assert tuner.execute(tunables, call(device, [1.0], [0.0])).name == "fast"


def test_a_compile_error_is_a_launch_error_that_keeps_the_compiler_message():
    device = FakeDevice()
    device.script("typo", compile_error="error: unknown identifier 'flaot' at 3:7")
    tunables = make_set("typo", "ok")
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    error = stored_results(tuner, tunables)["typo"]
    assert error["error"] == "Launch"
    assert "unknown identifier 'flaot' at 3:7" in error["reason"]


def test_a_launch_that_fails_is_a_launch_error():
    device = FakeDevice()
    device.script("oob", launch_error="binding 1 too small")
    tunables = make_set("oob", "ok")
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    error = stored_results(tuner, tunables)["oob"]
    assert error["error"] == "Launch" and "binding 1 too small" in error["reason"]


@pytest.mark.parametrize(
    ("candidate", "words"),
    [
        (kernel("big-smem", workgroup_storage=65536), ["65536 bytes", "16384"]),
        (kernel("wide", workgroup_size=(32, 32, 1)), ["1024 invocations", "256"]),
        (kernel("tall", workgroup_size=(1, 1, 128)), ["size z = 128", "64"]),
        (kernel("huge-grid", grid=lambda args: (70000, 1, 1)), ["70000", "65535"]),
        (kernel("bad-grid", grid=lambda args: (1, 1)), ["grid must be three ints"]),
    ],
)
def test_a_candidate_over_a_device_limit_is_a_launch_error_and_is_never_compiled(candidate, words):
    device = FakeDevice()
    tunables = make_set(candidate, "ok")
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "ok"
    error = stored_results(tuner, tunables)[candidate.name]
    assert error["error"] == "Launch"
    assert "exceeds a device limit" in error["reason"] or "grid" in error["reason"]
    for word in words:
        assert word in error["reason"]
    assert candidate.name not in device.profiles
    assert device.dispatches[candidate.name] == 0


def test_a_candidate_with_wrong_output_is_a_mismatch_when_checks_are_on():
    device = FakeDevice()
    device.script("ref", kernel=double_into, duration=3e-3)
    device.script("wrong-but-fast", kernel=double_into, wrong=True, duration=1e-3)
    device.script("right", kernel=double_into, duration=2e-3)
    tunables = make_set("ref", "wrong-but-fast", "right", outputs=(1,))
    tuner = make_tuner(device, config=quiet(checks=True))
    assert tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0])).name == "right"
    results = stored_results(tuner, tunables)
    assert results["wrong-but-fast"]["error"] == "Mismatch"
    assert "disagrees with the 2 candidates that agree (ref, right): output buffer 1: 1 of 2 values differ" in \
        results["wrong-but-fast"]["reason"]
    assert "1002.0 vs 2.0" in results["wrong-but-fast"]["reason"]


def test_a_wrong_candidate_far_faster_than_the_right_ones_does_not_drop_them_on_their_first_samples():
    """Voted out once screening is over, before the rounds: the right ones (at 5 and 5.5 ms, the
    wrong one at 0.5) are sampled in the rounds as if it had never run, not dropped by its time
    and ranked on a sample or two."""
    device = FakeDevice()
    device.script("ref", kernel=double_into, duration=5.5e-3)
    device.script("wrong-but-fast", kernel=double_into, wrong=True, duration=0.5e-3)
    device.script("right", kernel=double_into, duration=5e-3)
    device.script("right too", kernel=double_into, duration=[5e-3, 5.2e-3])
    tunables = make_set("ref", "wrong-but-fast", "right", "right too", outputs=(1,))
    tuner = make_tuner(device, config=quiet(checks=True, samples=5, max_samples=6))
    assert tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0])).name == "right"
    results = stored_results(tuner, tunables)
    assert results["wrong-but-fast"]["error"] == "Mismatch"
    assert not results["right"].get("eliminated_early") and not results["right too"].get("eliminated_early")
    assert len(device.profiles["right too"]) >= 5, device.profiles["right too"]


def test_output_checks_are_on_by_default_and_only_turning_them_off_lets_a_wrong_but_fast_candidate_win(caplog):
    device = FakeDevice()
    device.script("ref", kernel=double_into, duration=3e-3)
    device.script("wrong-but-fast", kernel=double_into, wrong=True, duration=1e-3)
    device.script("right", kernel=double_into, duration=2e-3)
    tunables = make_set("ref", "wrong-but-fast", "right", outputs=(1,))
    assert Config().checks and Config.from_env({}).checks
    assert make_tuner(device, config=Config(log_level="disabled")).execute(
        tunables, call(device, [1.0, 2.0], [0.0, 0.0])).name == "right"
    wgtune.tune.log._said_checks_off = False
    with caplog.at_level("WARNING", logger="wgtune"):
        unchecked = make_tuner(device, config=quiet(checks=False))
        make_tuner(device, config=quiet(checks=False))
    assert unchecked.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0])).name == "wrong-but-fast"
    said = [record.message for record in caplog.records if "output checks are off" in record.message]
    assert len(said) == 1  # said once per process


def test_a_candidate_that_does_not_compile_has_no_vote():
    device = FakeDevice()
    device.script("broken", compile_error="nope")
    device.script("ref", kernel=double_into)
    device.script("other", kernel=double_into, wrong=True)
    device.script("third", kernel=double_into)
    tunables = make_set("broken", "ref", "other", "third", outputs=(1,))
    tuner = make_tuner(device, config=quiet(checks=True))
    assert tuner.execute(tunables, call(device, [1.0], [0.0])).name in ("ref", "third")
    results = stored_results(tuner, tunables)
    assert "disagrees with the 2 candidates that agree (ref, third)" in results["other"]["reason"]


# -- failing tunes ---------------------------------------------------------------------------


def test_a_grid_function_that_raises_on_the_call_that_runs_it_is_a_config_error_naming_it():
    """A set of one runs its candidate without a tune: its grid function's failure is the call's,
    typed and named, not the function's own exception."""
    def grid(args):
        raise ValueError("this tile does not fit")

    device = FakeDevice()
    tunables = make_set(kernel("only", grid=grid))
    with pytest.raises(ConfigError, match=r"set 'fake' \[n=4\]: the grid function of 'only' failed: ValueError: "
                                          "this tile does not fit"):
        make_tuner(device).execute(tunables, call(device, [1.0]))


def test_when_every_candidate_fails_the_tune_raises_no_valid_kernel_found_with_every_reason():
    device = FakeDevice()
    device.script("a", compile_error="syntax error")
    device.script("b", duration=0.0)
    device.script("c", launch_error="device lost")
    tunables = make_set("a", "b", kernel("c"), kernel("d", priority=-1), kernel("e", workgroup_storage=1 << 20))
    tuner = make_tuner(device)
    args = call(device, [1.0])
    key = tuner.key(tunables, args)
    failure = tune_expecting_failure(tuner, tunables, args)

    assert [type(e) for e in failure.errors] == [Launch, InvalidSamples, Launch, Skip, Launch]
    assert [e.name for e in failure.errors] == ["a", "b", "c", "d", "e"]
    for text in ("syntax error", "every timed sample was invalid", "device lost", "negative priority"):
        assert text in str(failure)
    assert failure.set_name == "fake" and failure.key == key
    assert tuner.fastest(tunables, key) is MISS
    assert tuner.failures[("fake", key)] is failure
    assert tuner.records.records == []
    assert tuner.store.entries == {}


def test_a_key_whose_candidates_all_failed_stays_failed_until_it_is_forgotten():
    device = FakeDevice()
    device.script("a", launch_error="out of memory")
    device.script("b", launch_error="out of memory")
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    args = call(device, [1.0])
    tune_expecting_failure(tuner, tunables, args)
    assert tuner.failures != {}
    device.script("b", launch_error=None)
    key = tuner.key(tunables, args)
    # The same candidates again: the remembered failure, with every candidate's reason, and no tune.
    dispatched = device.dispatch_count + device.profile_count
    with pytest.raises(NoValidKernelFound) as failed:
        tuner.check_tune(tunables, key, args)
    assert [error.name for error in failed.value.errors] == ["a", "b"]
    assert device.dispatch_count + device.profile_count == dispatched
    tuner.forget(tunables, key)  # a retune
    assert tuner.check_tune(tunables, key, args) == Hit(1)
    assert tuner.failures == {}


def test_a_key_that_failed_is_tuned_again_when_its_set_has_other_candidates():
    device = FakeDevice()
    device.script("a", launch_error="out of memory")
    device.script("b", launch_error="out of memory")
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    args = call(device, [1.0])
    tune_expecting_failure(tuner, tunables, args)
    edited = make_set("a", "c")
    assert tuner.check_tune(edited, tuner.key(edited, args), args) == Hit(1)


def test_a_batch_that_produces_nothing_moves_on_to_the_next_batch():
    device = FakeDevice()
    device.script("g1-a", compile_error="no")
    device.script("g1-b", duration=math.nan)
    tunables = make_set(
        kernel("g1-a", group=Group("first", 2)),
        kernel("g1-b", group=Group("first", 2)),
        kernel("g2", group=Group("second", 1)),
    )
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "g2"
    record = tuner.records.records[0]
    assert [trial.name for trial in record.trials] == ["g1-a", "g1-b", "g2"]


def test_a_tune_whose_input_generator_raises_leaves_the_key_a_miss():
    def input_gen(device, key, args):
        raise MemoryError("no room for inputs")

    device = FakeDevice()
    tunables = make_set("a", "b", input_gen=input_gen)
    tuner = make_tuner(device)
    args = call(device, [1.0])
    with pytest.raises(TuneFailed, match="MemoryError: no room for inputs") as raised:
        tuner.execute(tunables, args)
    assert isinstance(raised.value.__cause__, MemoryError)
    assert tuner.fastest(tunables, tuner.key(tunables, args)) is MISS
    assert tuner.failures[("fake", tuner.key(tunables, args))] is raised.value


def test_mismatch_unknown_and_skip_are_distinct_error_values():
    assert Mismatch("a", "x") != Unknown("a", "x")
    assert Skip("a").reason.startswith("not run")


def test_errors_of_work_submitted_before_the_tune_fail_the_tune_not_a_candidate():
    device = FakeDevice(sync_error=KernelError("earlier dispatch failed"))
    tunables = make_set("a", "b")
    tuner = make_tuner(device)
    args = call(device, [1.0])
    with pytest.raises(TuneFailed, match="earlier dispatch failed"):
        tuner.execute(tunables, args)
    assert tuner.fastest(tunables, tuner.key(tunables, args)) is MISS
    assert device.compiles == {}


# -- comparing outputs -----------------------------------------------------------------------


def test_compare_allows_floats_within_atol_plus_rtol_and_treats_nan_as_equal_to_nan():
    want = f32([1.0, 100.0, math.nan])
    assert compare_bytes(f32([1.00005, 100.009, math.nan]), want, "f", 1e-4, 1e-4).agree
    problem = compare_bytes(f32([1.0, 100.02, math.nan]), want, "f", 1e-4, 1e-4)
    assert (problem.mismatches, problem.first) == (1, 1)
    assert problem.describe().startswith("1 of 3 values differ; first at [1]: 100.02")


def test_compare_is_exact_for_integer_outputs_unless_a_tolerance_is_given():
    ints = struct.pack("<3i", 1, 2, 3)
    assert compare_bytes(ints, ints, "i", 0, 0).agree
    off_by_one = struct.pack("<3i", 1, 2, 4)
    assert compare_bytes(off_by_one, ints, "i", 0, 0).describe() == "1 of 3 values differ; first at [2]: 4 vs 3; " \
        "max abs error 1.0"
    assert compare_bytes(off_by_one, ints, "i", 1.0, 0).agree


@pytest.mark.skipif(sys.platform == "emscripten", reason="Pyodide's event loop is always running")
def test_spawning_a_tune_without_a_running_event_loop_raises_and_leaves_the_key_a_miss():
    device = FakeDevice()
    tunables = make_set("a", "b")
    tuner = make_tuner(device, spawn=spawn_task)
    args = call(device, [1.0])
    key = tuner.key(tunables, args)
    with pytest.raises(RuntimeError):
        tuner.check_tune(tunables, key, args)
    assert tuner.fastest(tunables, key) is MISS


def test_output_indices_that_are_not_buffers_of_the_call_are_a_config_error():
    device = FakeDevice()
    tunables = make_set("a", "b", outputs=(5,))
    tuner = make_tuner(device, config=quiet(checks=True))
    with pytest.raises(ConfigError, match=r"outputs \[5\]"):
        tuner.execute(tunables, call(device, [1.0]))


def test_output_checks_with_every_candidate_failing_its_first_launch_name_each_failure():
    # The first launch comes before the check (a runaway must meet the time limit first), so
    # candidates that cannot launch fail as themselves, not as a missing reference.
    device = FakeDevice()
    device.script("a", launch_error="lost")
    device.script("b", launch_error="gone")
    tunables = make_set("a", "b", outputs=(0,))
    tuner = make_tuner(device, config=quiet(checks=True))
    with pytest.raises(NoValidKernelFound, match=r"(?s)a: Launch: launch failed: lost.*b: Launch: launch failed: gone"):
        tuner.execute(tunables, call(device, [1.0]))


def test_compare_treats_equal_infinities_as_equal_and_opposite_ones_as_different():
    inf = math.inf
    assert compare_bytes(f32([inf, -inf, 1.0]), f32([inf, -inf, 1.0]), "f", 0.0, 0.0).agree
    assert not compare_bytes(f32([inf]), f32([-inf]), "f", 1e-4, 1e-4).agree
    assert not compare_bytes(f32([inf]), f32([3.0e38]), "f", 1e-4, 1e-4).agree
