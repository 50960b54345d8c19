"""Twins (``tune/twins.py``): a candidate that launches exactly as one prepared before it, for the
call, is measured once, as that one, and shares its fate."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fakes import FakeDevice, call, double_into, floats, kernel, make_set, make_tuner, quiet, stored_results

from wgtune import Args, Group, Measured, NoValidKernelFound, Search, Skip, run_inline
from wgtune.errors import KernelError, Timeout
from wgtune.tune.measure import Bench, prepare_candidate
from wgtune.tune.request import TuneRequest
from wgtune.tune.twins import Twins, launch_of
from wgtune.tune.verify import verify_winner

pytestmark = pytest.mark.core

CODE = "// one code\n"


def chunked(name: str, cap: int, **fields) -> object:
    """A candidate of CODE whose grid's z is the call's n capped at ``cap``: the same launch as
    another cap's wherever n is under both."""
    return kernel(name, wgsl=CODE, grid=lambda args: (1, 1, min(args.params[0], cap)), **fields)


def doubled(inputs, params):
    return [[2 * x for x in floats(inputs[0])]]


def test_a_launch_is_everything_the_device_is_handed_and_nothing_else():
    args = Args((), (4,))
    base = launch_of(chunked("a", 8), args)
    assert launch_of(chunked("renamed", 8, priority=3, group=Group("g")), args) == base
    assert launch_of(chunked("capped", 2), args) != base  # another grid
    assert launch_of(kernel("x", wgsl=CODE, grid=lambda a: (1, 1, 4), constants={"W": 2}), args) != base
    assert launch_of(kernel("x", wgsl=CODE, grid=lambda a: (1, 1, 4), params=lambda a: (7,)), args) != base
    assert launch_of(kernel("x", wgsl=CODE, grid=lambda a: (1, 1, 4), runtime_checks=False), args) != base
    assert launch_of(kernel("x", wgsl=CODE + " ", grid=lambda a: (1, 1, 4)), args) != base
    assert launch_of(kernel("x", wgsl=CODE, grid=lambda a: (1, 1, 4), then=(kernel("s"),)), args) != base
    assert launch_of(kernel("bad", grid=lambda a: 1 // 0), args) is None
    # A uniform's int and float are other bytes (u32, f32), and so are 0.0 and -0.0.
    as_int, as_float = (kernel(n, wgsl=CODE, params=lambda a, v=v: (v,)) for n, v in (("i", 1), ("f", 1.0)))
    assert launch_of(as_int, args) != launch_of(as_float, args)
    zero, negative = (kernel(n, wgsl=CODE, params=lambda a, v=v: (v,)) for n, v in (("z", 0.0), ("m", -0.0)))
    assert launch_of(zero, args) != launch_of(negative, args)


def test_a_twin_is_not_compiled_nor_run_and_its_result_names_the_one_measured_for_it():
    device = FakeDevice()
    device.script("wide", duration=2e-3)
    tunables = make_set(chunked("narrow", 8), chunked("wide", 16), kernel("other"))
    tuner = make_tuner(device, config=quiet())
    tuner.execute(tunables, call(device, [1.0], n=4))
    results = {result.name: result for result in tuner.results(tunables, tuner.key(tunables, call(device, [1.0])))}
    assert isinstance(results["narrow"], Measured) and isinstance(results["other"], Measured)
    assert isinstance(results["wide"], Skip) and "measured as narrow" in results["wide"].reason
    assert device.compiles["wide"] == 0 and device.dispatches["wide"] == 0  # nor compiled with its batch
    assert "measured as narrow" in stored_results(tuner, tunables)["wide"]["reason"]
    # Where the call makes their grids differ, both are measured: wide, slower, loses.
    winner = tuner.execute(tunables, call(device, [1.0], n=12))
    assert device.compiles["wide"] == 1 and winner.name != "wide"


def test_the_candidate_screened_first_is_measured_for_its_twins():
    device = FakeDevice()
    tunables = make_set(chunked("default", 8), chunked("grouped", 16, group=Group("early", priority=5)),
                        chunked("later", 32))
    tuner = make_tuner(device, config=quiet())
    assert tuner.execute(tunables, call(device, [1.0], n=4)).name == "default"  # the bar, screened first
    results = stored_results(tuner, tunables)
    assert "measured as default" in results["grouped"]["reason"] and "measured as default" in results["later"]["reason"]


def test_a_twin_of_a_candidate_in_a_pruned_group_is_run_and_can_win():
    # The group "slow" is pruned after two slow probes, its third (sx) never run: its twin fx must run.
    device = FakeDevice()
    for name, seconds in {"d": 2e-3, "s0": 9e-3, "s1": 8e-3, "sx": 0.5e-3, "fx": 0.5e-3}.items():
        device.script(name, duration=seconds)
    slow, fast = Group("slow", 5), Group("fast", 1)
    tunables = make_set(kernel("d"), kernel("s0", group=slow), kernel("s1", group=slow),
                        chunked("sx", 8, group=slow), chunked("fx", 16, group=fast))
    tuner = make_tuner(device, config=quiet())
    assert tuner.execute(tunables, call(device, [1.0], n=4)).name == "fx"
    assert "over twice the leader's time" in stored_results(tuner, tunables)["sx"]["reason"]


def test_under_the_fixed_policy_the_first_of_a_launch_run_is_measured_and_serves():
    device = FakeDevice()
    for name, seconds in {"d": 0.5e-3, "x": 0.5e-3, "y": 9e-3}.items():
        device.script(name, duration=seconds)
    tunables = make_set(chunked("d", 8, group=Group("low", 1)), chunked("x", 16, group=Group("high", 5)),
                        kernel("y", group=Group("mid", 3)))
    tuner = make_tuner(device, config=quiet(policy="fixed"))
    assert tuner.execute(tunables, call(device, [1.0], n=4)).name == "x"  # the batch of "high" first, alone


def test_a_twin_of_a_wrong_candidate_is_found_wrong_too_and_never_the_fallback():
    device = FakeDevice()
    device.script("a", kernel=double_into, wrong=True)
    device.script("a2", kernel=double_into, wrong=True)
    device.script("b", kernel=double_into, duration=2e-3)
    tunables = make_set(chunked("a", 8), chunked("a2", 16), kernel("b"), outputs=(1,), reference=doubled)
    tuner = make_tuner(device, config=quiet(checks=True))
    assert tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0])).name == "b"
    # "a" failed its check before it was sampled, so it measures nothing for its twin: a2 runs, and fails it.
    assert device.dispatches["a2"] > 0 and stored_results(tuner, tunables)["a2"]["error"] == "Mismatch"
    assert tuner.fallback(tunables) == 2


def test_without_a_reference_a_twin_is_no_vote_of_its_own_and_shares_its_candidates_verdict():
    # d is right, w wrong, w2 w's twin: one computation, which must not outvote d by counting twice.
    device = FakeDevice()
    device.script("d", kernel=double_into, duration=2e-3)
    device.script("w", kernel=double_into, wrong=True, duration=1e-3)
    tunables = make_set(kernel("d"), chunked("w", 8), chunked("w2", 16), outputs=(1,))
    tuner = make_tuner(device, config=quiet(checks=True))
    with pytest.raises(NoValidKernelFound, match=r"\{d\} against \{w\}, and no group is larger"):
        tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0]))
    # Against two right candidates, the wrong one and its twin are both out, and the default serves.
    device = FakeDevice()
    device.script("w", kernel=double_into, wrong=True)
    for name in ("b", "c", "d"):
        device.script(name, kernel=double_into)
    tunables = make_set(kernel("b"), chunked("w", 8), chunked("w2", 16), kernel("c"), kernel("d"), outputs=(1,),
                        name="other")
    tuner = make_tuner(device, config=quiet(checks=True))
    tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0]))
    results = stored_results(tuner, tunables)
    assert results["w"]["error"] == "Mismatch" and "the 3 candidates that agree (b, c, d)" in results["w"]["reason"]
    assert results["w2"]["error"] == "Mismatch" and results["w2"]["reason"].startswith("launches exactly as w: ")
    assert tuner.fallback(tunables) == 0


def test_a_default_that_is_the_twin_of_a_wrong_candidate_stops_being_the_fallback():
    # The fixed policy runs the batch of "high" first: w is prepared before the default, its twin.
    device = FakeDevice()
    device.script("w", kernel=double_into, wrong=True)
    for name in ("b", "c"):
        device.script(name, kernel=double_into)
    tunables = make_set(chunked("d", 8, group=Group("low", 1)), chunked("w", 16, group=Group("high", 5)),
                        kernel("b", group=Group("high", 5)), kernel("c", group=Group("high", 5)), outputs=(1,))
    tuner = make_tuner(device, config=quiet(checks=True, policy="fixed"))
    tuner.execute(tunables, call(device, [1.0, 2.0], [0.0, 0.0]))
    results = stored_results(tuner, tunables)
    assert results["d"]["error"] == "Mismatch" and results["d"]["reason"].startswith("launches exactly as w: ")
    assert tuner.fallback(tunables) == 2


def test_a_twin_of_a_candidate_that_failed_in_its_samples_fails_with_it():
    device = FakeDevice()
    tunables = make_set(chunked("x", 8), chunked("t", 16), kernel("y"))
    profiles = {"x": 0}
    profile = device.profile

    async def failing_after_calibration(pipeline, args, grid, repeats):
        if pipeline.kernel.name == "x":
            profiles["x"] += 1
            if profiles["x"] > 1:
                raise KernelError("timestamps lost")
        return await profile(pipeline, args, grid, repeats)

    device.profile = failing_after_calibration
    tuner = make_tuner(device, config=quiet(policy="fixed"))
    assert tuner.execute(tunables, call(device, [1.0], n=4)).name == "y"
    results = stored_results(tuner, tunables)
    assert results["x"]["error"] == "Launch"
    assert results["t"]["error"] == "Launch" and results["t"]["reason"].startswith("launches exactly as x: ")
    assert device.dispatches["t"] == 0


def test_a_winner_from_elsewhere_is_not_vouched_for_by_its_own_twin():
    device = FakeDevice()
    device.script("w", kernel=double_into, wrong=True)
    for name in ("d", "e"):
        device.script(name, kernel=double_into)
    # The panel is the first two candidates that fit, the winner's twin w2 first of them: passed over.
    tunables = make_set(chunked("w2", 16), kernel("d"), chunked("w", 8), kernel("e"), outputs=(1,))
    tuner = make_tuner(device, config=quiet(checks=True))
    args = call(device, [1.0, 2.0], [0.0, 0.0])
    problem = run_inline(verify_winner(device, tuner.pipelines, tunables, tuner.key(tunables, args), args, 2))
    assert problem is not None and "disagrees with the 2 candidates that agree (d, e)" in problem


def test_the_compiles_begun_ahead_leave_twins_out():
    started = []

    @dataclass(eq=False)
    class Background(FakeDevice):
        background_compiles: int = 4

        def start_compiles(self, kernels):
            started.append([kernel.name for kernel in kernels])

    device = Background()
    tunables = make_set(chunked("d", 8), chunked("t", 16), kernel("o"))
    make_tuner(device, config=quiet()).execute(tunables, call(device, [1.0], n=4))
    assert started and not any("t" in names for names in started)
    assert device.compiles["t"] == 0


def test_a_twin_of_a_candidate_ruled_out_before_the_tune_is_ruled_out_with_it():
    device = FakeDevice()
    tunables = make_set(kernel("d"), chunked("runaway", 8), chunked("twin", 16))
    tuner = make_tuner(device, config=quiet())
    args = call(device, [1.0], n=4)
    request = TuneRequest(device, tuner.pipelines, tuner.config, tunables, tuner.key(tunables, args), args,
                          ruled_out={1: Timeout("runaway", "ran past 5 s")})
    bench = Bench(request, args, 0.0, twins=Twins(tunables.candidates, [args]))
    result = run_inline(prepare_candidate(bench, 2))
    assert isinstance(result, Timeout) and result.name == "twin"
    assert result.reason == "launches exactly as runaway, ruled out: ran past 5 s"
    assert device.compiles["twin"] == 0


def test_a_short_circuit_before_a_twins_turn_leaves_it_not_run():
    device = FakeDevice()
    device.script("narrow", duration=1e-4)
    tunables = make_set(kernel("first"), chunked("narrow", 8), chunked("wide", 16), kernel("other"),
                        short_circuit=lambda key: 2e-4)
    tuner = make_tuner(device, config=quiet())
    tuner.execute(tunables, call(device, [1.0], n=4))
    results = stored_results(tuner, tunables)
    assert "short-circuit" in results["wide"]["reason"]  # the tune ended before its turn
    assert "samples" in results["narrow"]


def test_a_searched_set_measures_every_candidate_it_proposes():
    device = FakeDevice()
    candidates = [chunked(f"cap{cap}", cap, configuration={"cap": cap}) for cap in (8, 16, 32)]
    tunables = make_set(*candidates, search=Search("random", candidates=3, seed=1))
    tuner = make_tuner(device, config=quiet())
    tuner.execute(tunables, call(device, [1.0], n=4))
    assert all(isinstance(r, Measured) for r in tuner.results(tunables, tuner.key(tunables, call(device, [1.0]))))


def test_where_the_set_makes_its_inputs_the_launches_must_be_the_same_on_those_too():
    device = FakeDevice()

    def bigger(device_, key, args):  # the benchmark's inputs: n of 12, where the two grids differ
        return Args(args.buffers, (12,))

    tunables = make_set(chunked("narrow", 8), chunked("wide", 16), input_gen=bigger)
    tuner = make_tuner(device, config=quiet())
    tuner.execute(tunables, call(device, [1.0], n=4))  # on the call's n of 4 they launch alike
    assert device.dispatches["wide"] > 0 and "samples" in stored_results(tuner, tunables)["wide"]
