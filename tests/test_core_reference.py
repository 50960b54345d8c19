"""Output checks against a reference function, per-output tolerances, and f16 compared as values."""

from __future__ import annotations

import struct

import pytest
from fakes import FakeDevice, call, double_into, floats, make_set, make_tuner, quiet

from wgtune import ConfigError, NoValidKernelFound, TuneFailed
from wgtune.gpu.comparison import compare_bytes
from wgtune.sets.output_types import OutputSpec
from wgtune.tune.expected import as_bytes

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def racy_first_device() -> FakeDevice:
    """Candidate a (the set's first) has a race that corrupts one value; b and c are correct."""
    device = FakeDevice()
    device.script("a", kernel=double_into, wrong=True, duration=1e-3)
    device.script("b", kernel=double_into, duration=2e-3)
    device.script("c", kernel=double_into, duration=3e-3)
    return device


def doubled(inputs: list[bytes], params: tuple) -> list[list[float]]:
    return [[2 * x for x in floats(inputs[0])]]


def results_of(tuner, tunables) -> dict[str, dict]:
    entry = tuner.cache.entry(tunables, tuner.key(tunables, call(FakeDevice(), [1.0], [0.0])))
    return {result["name"]: result for result in entry.results}


def test_without_a_reference_the_candidates_that_agree_outvote_a_racy_first_candidate():
    device = racy_first_device()
    tunables = make_set("a", "b", "c", outputs=(1,))
    events = []
    tuner = make_tuner(device, config=quiet(checks=True), observer=events.append)
    assert tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0])).name == "b"
    results = results_of(tuner, tunables)
    assert results["a"]["error"] == "Mismatch"
    assert "disagrees with the 2 candidates that agree (b, c)" in results["a"]["reason"]
    assert "median" in results["b"] and "median" in results["c"]
    finished = [event.outcome for event in events if type(event).__name__ == "TuneFinished"]
    assert finished[0].judge == "agreement"
    assert finished[0].warning.startswith("candidate 0 (a), the set's default, is wrong here")
    assert tuner.records.records[-1].warning == finished[0].warning
    assert tuner.fallback(tunables) == 1  # the default no longer serves while keys are pending


def test_candidates_that_split_evenly_are_all_refused_and_the_message_asks_for_a_reference():
    device = FakeDevice()
    device.script("a", kernel=double_into, wrong=True)
    device.script("b", kernel=double_into)
    tunables = make_set("a", "b", outputs=(1,))
    with pytest.raises(NoValidKernelFound, match=r"disagree, \{a\} against \{b\}.*give the set a reference="):
        make_tuner(device, config=quiet(checks=True)).execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0]))


def test_a_set_of_one_candidate_is_checked_against_its_reference():
    device = FakeDevice()
    device.script("only", kernel=double_into, wrong=True)
    tunables = make_set("only", outputs=(1,), reference=doubled)
    with pytest.raises(NoValidKernelFound, match="only: Mismatch: output buffer 1 disagrees with the reference"):
        make_tuner(device, config=quiet(checks=True)).execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0]))
    right = FakeDevice()
    right.script("only", kernel=double_into)
    tuner = make_tuner(right, config=quiet(checks=True))
    assert tuner.execute(tunables, call(right, [1.0, 2.0], [0.0, 0.0])).name == "only"
    assert tuner.results(tunables, tuner.key(tunables, call(right, [1.0], [0.0])))[0].stats is not None


def test_a_reference_function_catches_the_racy_first_candidate_and_the_correct_one_wins():
    device = racy_first_device()
    tunables = make_set("a", "b", "c", outputs=(1,), reference=doubled)
    events = []
    tuner = make_tuner(device, config=quiet(checks=True), observer=events.append)
    assert tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0])).name == "b"
    results = results_of(tuner, tunables)
    assert results["a"]["error"] == "Mismatch" and "disagrees with the reference" in results["a"]["reason"]
    assert "median" in results["b"] and "median" in results["c"]
    # The set's default is wrong here: the tune says so, and it no longer serves while keys are pending
    # (it did, giving wrong answers, until a page found it from outside on 2026-12-06).
    finished = [event.outcome for event in events if type(event).__name__ == "TuneFinished"]
    assert finished[0].judge == "reference"
    assert finished[0].warning.startswith("candidate 0 (a), the set's default, is wrong here: output buffer 1 "
                                          "disagrees with the reference")
    assert tuner.fallback(tunables) == 1


def test_the_reference_sees_the_inputs_before_any_kernel_ran_and_may_return_bytes():
    seen = []

    def reference(inputs, params):
        seen.append((floats(inputs[0]), floats(inputs[1]), params))
        return [struct.pack("<2f", 2.0, 4.0)]

    device = racy_first_device()
    tunables = make_set("a", "b", outputs=(1,), reference=reference)
    make_tuner(device, config=quiet(checks=True)).execute(tunables, call(device, [1.0, 2.0], [7.0, 7.0]))
    assert seen == [([1.0, 2.0], [7.0, 7.0], (4,))]


def test_a_reference_that_raises_or_gives_the_wrong_count_fails_the_tune_and_says_why():
    def broken(inputs, params):
        raise ZeroDivisionError("oops")

    device = racy_first_device()
    tuner = make_tuner(device, config=quiet(checks=True))
    with pytest.raises(TuneFailed, match="reference of fake raised ZeroDivisionError: oops"):
        tuner.execute(make_set("a", "b", outputs=(1,), reference=broken), call(device, [1.0], [0.0]))
    with pytest.raises(TuneFailed, match="gave 2 outputs; the set has 1"):
        tuner.execute(make_set("a", "b", name="other", outputs=(1,), reference=lambda i, p: [[2.0], [2.0]]),
                      call(device, [1.0], [0.0]))


def test_when_every_candidate_disagrees_with_the_reference_no_kernel_is_found():
    device = racy_first_device()
    tunables = make_set("a", "b", outputs=(1,), reference=lambda inputs, params: [[-1.0, -1.0]])
    with pytest.raises(NoValidKernelFound, match="disagrees with the reference"):
        make_tuner(device, config=quiet(checks=True)).execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0]))


def test_f16_outputs_are_compared_as_values_within_tolerance():
    one_ulp = struct.pack("<e", 1.0), struct.pack("<e", 1.0009765625)  # 1.0 and the next f16 up
    assert not compare_bytes(one_ulp[0], one_ulp[1], "H", 0.0, 0.0).agree  # bits differ
    assert compare_bytes(one_ulp[0], one_ulp[1], "e", 0.0, 1e-3).agree  # values agree within 0.1%
    assert "first at [0]: 1.0 vs 1.5" in compare_bytes(struct.pack("<e", 1.0), struct.pack("<e", 1.5), "e", 0.0,
                                                       1e-3).describe()
    spec = OutputSpec(1, "'out' (buffer 1)", "e", 1e-2, 2e-3, poison=True)
    assert as_bytes([1.0, 0.5], spec, 4, "test") == struct.pack("<2e", 1.0, 0.5)


def test_a_reference_of_the_wrong_kind_or_size_is_an_error_naming_the_output():
    spec = OutputSpec(2, "'hist' (buffer 2)", "I", 0.0, 0.0, poison=False)
    with pytest.raises(TuneFailed, match=r"output 'hist' \(buffer 2\), of WGSL type u32, is given fractional"):
        as_bytes([1.5, 2.0], spec, 8, "the reference of s")
    with pytest.raises(TuneFailed, match=r"is given 3 values \(12 bytes\); the buffer holds 2 \(8 bytes\)"):
        as_bytes([1, 2, 3], spec, 8, "the reference of s")
    with pytest.raises(TuneFailed, match="is given something that is not u32 values"):
        as_bytes([-1, 2], spec, 8, "the reference of s")
    assert as_bytes([1, 2], spec, 8, "r") == struct.pack("<2I", 1, 2)


def test_tolerances_and_types_may_differ_per_output_and_must_match_the_outputs():
    tunables = make_set("a", outputs=(1, 2), output_type=("f", "I"), atol=(1e-3, 0), rtol=1e-2)
    assert tunables.tolerances == (("f", 1e-3, 1e-2), ("I", 0.0, 1e-2))
    with pytest.raises(ConfigError, match="atol gives 3 values for 2 outputs"):
        make_set("a", outputs=(1, 2), atol=(0, 0, 0))
    with pytest.raises(ConfigError, match="output_type 'q' is not one of"):
        make_set("a", outputs=(1,), output_type="q")
    with pytest.raises(ConfigError, match="tolerances must be numbers >= 0"):
        make_set("a", outputs=(1,), rtol=-1.0)
    with pytest.raises(ConfigError, match="reference must be a function"):
        make_set("a", outputs=(1,), reference=[1.0])


def test_a_tolerance_may_be_a_function_of_the_call_as_rounding_grows_with_a_size():
    device = racy_first_device()  # a, the fastest, is off by 1000 in one value
    asked = []

    def atol(args):
        asked.append(args.params)
        return 2000.0 if args.params[0] >= 8 else 1e-4

    tunables = make_set("a", "b", "c", outputs=(1,), atol=atol)
    tuner = make_tuner(device, config=quiet(checks=True))
    assert tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0], n=4)).name == "b"
    assert results_of(tuner, tunables)["a"]["error"] == "Mismatch"
    assert tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0], n=8)).name == "a"  # within 2000 there
    assert (4,) in asked and (8,) in asked
    assert tunables.tolerances_for(call(device, [1.0], [0.0], n=8)) == ((None, 2000.0, None),)
    whole = make_set("a", outputs=(1,), rtol=lambda args: 1)  # any real number: an int, numpy's float32
    assert whole.tolerances_for(call(device, [1.0], [0.0])) == ((None, None, 1.0),)


@pytest.mark.parametrize(("rule", "match"), [
    (lambda args: -1.0, r"'fake': atol functions' answers must be numbers >= 0 .*got -1.0"),
    (lambda args: "1e-3", r"'fake': atol functions' answers must be numbers >= 0 .*got '1e-3'"),
    (lambda args: 1 / 0, r"'fake': its atol function raised on the call \(4,\): ZeroDivisionError"),
])
def test_a_tolerance_function_that_gives_no_number_is_an_error_naming_the_set_and_loses_nothing(rule, match):
    device = racy_first_device()
    good = make_set("a", "b", "c", name="kept", outputs=(1,))
    tuner = make_tuner(device, config=quiet(checks=True))
    assert tuner.execute(good, call(device, [1.0, 2.0], [0.0, 0.0])).name == "b"
    tunables = make_set("a", "b", "c", outputs=(1,), atol=rule)
    with pytest.raises(ConfigError, match=match):
        tunables.tolerances_for(call(device, [1.0], [0.0]))
    with pytest.raises(ConfigError, match=match):
        tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0]))
    assert tuner.execute(good, call(device, [1.0, 2.0], [0.0, 0.0])).name == "b"  # the stored winner still serves


def test_a_reference_with_checks_turned_off_is_said_once_not_ignored_without_a_word(caplog):
    device = racy_first_device()
    tunables = make_set("a", "b", name="ref_unchecked", outputs=(1,), reference=doubled)
    with caplog.at_level("WARNING", logger="wgtune"):
        tuner = make_tuner(device, config=quiet(checks=False))
        tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0]))
        tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0], n=8))
    said = [record.message for record in caplog.records if "ref_unchecked" in record.message]
    assert said == ["tunable set ref_unchecked has a reference, but output checks are off: it is not called"]
