"""Twins (``tune/twins.py``): a candidate that launches exactly as one screened before it, for the
key, is measured once, as that one."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, kernel, make_set, make_tuner, quiet, stored_results

from wgtune import Args, Group, Measured, Skip
from wgtune.tune.twins import launch_of, twins

pytestmark = pytest.mark.core

CODE = "// one code\n"


def chunked(name: str, cap: int, **fields) -> object:
    """A candidate of CODE whose grid's z is the call's n capped at ``cap``: the same launch as
    another cap's wherever n is under both."""
    return kernel(name, wgsl=CODE, grid=lambda args: (1, 1, min(args.params[0], cap)), **fields)


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


def test_twins_map_each_later_one_to_the_first_given():
    candidates = [chunked("a", 8), chunked("b", 16), chunked("c", 2), chunked("d", 32)]
    assert twins(candidates, [0, 1, 2, 3], Args((), (4,))) == {1: 0, 3: 0}
    assert twins(candidates, [3, 2, 1, 0], Args((), (4,))) == {1: 3, 0: 3}
    assert twins(candidates, [0, 1, 2, 3], Args((), (12,))) == {3: 1}  # 8, 12, 2, 12


def test_a_twin_is_not_compiled_nor_run_and_its_result_names_the_one_measured_for_it():
    device = FakeDevice()
    device.script("wide", duration=2e-3)
    tunables = make_set(chunked("narrow", 8), chunked("wide", 16), kernel("other"))
    tuner = make_tuner(device, config=quiet())
    tuner.execute(tunables, call(device, [1.0], n=4))
    results = {result.name: result for result in tuner.results(tunables, tuner.key(tunables, call(device, [1.0])))}
    assert isinstance(results["narrow"], Measured) and isinstance(results["other"], Measured)
    assert isinstance(results["wide"], Skip)
    assert "measured as narrow" in results["wide"].reason
    assert device.compiles["wide"] == 0 and device.dispatches["wide"] == 0
    assert "measured as narrow" in stored_results(tuner, tunables)["wide"]["reason"]
    # Where the call makes their grids differ, both are measured: wide, slower, loses.
    kernel_ = tuner.execute(tunables, call(device, [1.0], n=12))
    assert device.compiles["wide"] == 1 and kernel_.name != "wide"


def test_the_default_stays_where_a_twin_of_it_is_screened_first():
    device = FakeDevice()
    tunables = make_set(chunked("default", 8), chunked("first", 16, group=Group("early", priority=5)))
    tuner = make_tuner(device, config=quiet())
    assert tuner.execute(tunables, call(device, [1.0], n=4)).name == "default"
    results = stored_results(tuner, tunables, tuner.key(tunables, call(device, [1.0])))
    assert "measured as default" in results["first"]["reason"]


def test_of_twins_the_one_the_plan_screens_first_is_measured():
    device = FakeDevice()
    tunables = make_set(kernel("default"), chunked("late", 8, group=Group("low", priority=1)),
                        chunked("early", 16, group=Group("high", priority=5)), chunked("later", 32))
    tuner = make_tuner(device, config=quiet())
    tuner.execute(tunables, call(device, [1.0], n=4))
    results = stored_results(tuner, tunables, tuner.key(tunables, call(device, [1.0])))
    # Ungrouped candidates join the first batch, the group "high"'s: "later" is screened before "late".
    assert "measured as later" in results["late"]["reason"] and "measured as later" in results["early"]["reason"]
    assert device.compiles["late"] == device.compiles["early"] == 0 and device.compiles["later"] == 1


def test_a_candidate_whose_grid_fails_is_left_to_the_tune_which_reports_it():
    device = FakeDevice()
    tunables = make_set(chunked("a", 8), kernel("broken", wgsl=CODE, grid=lambda args: 1 // 0))
    tuner = make_tuner(device, config=quiet())
    tuner.execute(tunables, call(device, [1.0], n=4))
    results = stored_results(tuner, tunables)
    assert "ZeroDivisionError" in results["broken"]["reason"]


def test_a_twin_stays_measured_as_its_twin_when_a_candidate_meets_the_short_circuit_limit():
    device = FakeDevice()
    device.script("narrow", duration=1e-4)
    tunables = make_set(chunked("narrow", 8), chunked("wide", 16), kernel("other"), short_circuit=lambda key: 1e-3)
    tuner = make_tuner(device, config=quiet())
    tuner.execute(tunables, call(device, [1.0], n=4))
    results = stored_results(tuner, tunables)
    assert "measured as narrow" in results["wide"]["reason"]
    assert "short-circuit" in results["other"]["reason"]
