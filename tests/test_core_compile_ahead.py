"""Compiles off the critical path: the candidates a tune will measure are compiled together
(``Device.compile_many``) before the sampler needs them, a compile error is the device's answer for
good, and a later group still on probation compiles only its probes."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, kernel, make_set, make_tuner, quiet

from wgtune import Group

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def tune(device: FakeDevice, tunables, n: int = 4, tuner=None, **config):
    tuner = tuner or make_tuner(device, config=quiet(**config))
    return tuner, tuner.execute(tunables, call(device, [1.0], n=n)).name


@pytest.mark.parametrize("policy", ["adaptive", "fixed"])
def test_the_first_batch_is_compiled_together_before_anything_is_sampled(policy):
    device = FakeDevice()
    for name, seconds in {"a": 3e-3, "b": 2e-3, "c": 1e-3}.items():
        device.script(name, duration=seconds)
    _, winner = tune(device, make_set("a", "b", "c"), policy=policy)
    assert winner == "c"
    assert device.compiled_together == [["a", "b", "c"]]
    assert device.compiles == {"a": 1, "b": 1, "c": 1}  # each once: the sampler took them from the batch


def test_the_checks_reference_is_compiled_with_the_first_batch():
    device = FakeDevice()
    likely, later = Group("likely", 2), Group("later", 1)
    tunables = make_set(kernel("ref", group=later), kernel("x", group=likely), kernel("y", group=likely),
                        outputs=(0,))
    # candidate 0 is not in the first batch, but the output checks compare every candidate with it
    tune(device, tunables, checks=True)
    assert device.compiled_together[0] == ["ref", "x", "y"]


def test_a_compile_error_is_kept_so_no_later_key_compiles_that_candidate_again():
    device = FakeDevice()
    device.script("broken", compile_error="syntax error at 3:1")
    tunables = make_set("a", "broken", "b")
    tuner, _ = tune(device, tunables, n=4)
    tune(device, tunables, n=8, tuner=tuner)  # another key of the set
    assert device.compiles["broken"] == 1
    assert "syntax error" in str(tuner.results(tunables, tuner.key(tunables, call(device, [1.0], n=8)))[1].reason)


def test_a_later_group_on_probation_compiles_only_its_probes():
    device = FakeDevice()
    device.compile_width = 8  # compiles ahead past the first batch, as natively
    times = {"a0": 1e-3, "a1": 1.1e-3, "b0": 5e-3, "b1": 5e-3, "b2": 0.5e-3, "b3": 0.5e-3}
    for name, seconds in times.items():
        device.script(name, duration=seconds)
    groups = {"a": Group("likely", 2), "b": Group("unlikely", 1)}
    tunables = make_set(*(kernel(name, group=groups[name[0]]) for name in times))
    _, winner = tune(device, tunables)
    assert winner == "a0"
    # b's first two lost by over twice the leader: the rest of b is pruned and was never compiled
    assert device.compiled_together == [["a0", "a1"], ["b0", "b1"]]
    assert "b2" not in device.compiles and "b3" not in device.compiles


def test_a_compile_that_raises_something_else_is_tried_again_when_it_is_needed():
    device = FakeDevice()
    device.script("odd", compile_exception=RuntimeError("the driver hiccuped"))
    tunables = make_set("a", "odd")
    tuner, winner = tune(device, tunables)
    assert winner == "a"
    assert device.compiles["odd"] == 2  # once ahead (not kept: not a compile error), once when prepared
    assert "hiccuped" in str(tuner.results(tunables, tuner.key(tunables, call(device, [1.0])))[1].reason)


def test_past_the_screen_budget_only_each_later_groups_probes_are_screened():
    device = FakeDevice()
    for name in ("a0", "a1"):
        device.script(name, duration=1e-3, stall=0.03)  # each launch holds the wall clock 30 ms
    for name in ("b0", "b1", "b2", "c0", "c1"):
        device.script(name, duration=0.9e-3)
    device.script("b3", duration=0.5e-3)  # the fastest, but past its group's probes
    device.script("c2", duration=0.4e-3)
    groups = {"a": Group("likely", 3), "b": Group("later", 2), "c": Group("last", 1)}
    names = ("a0", "a1", "b0", "b1", "b2", "b3", "c0", "c1", "c2")
    tunables = make_set(*(kernel(name, group=groups[name[0]]) for name in names))
    tuner, winner = tune(device, tunables, screen_budget=0.05)
    assert winner in ("b0", "b1", "c0", "c1")  # every group's probes ran: none of them lost twice over
    screened = {name for name in names if device.dispatches[name]}
    assert screened == {"a0", "a1", "b0", "b1", "c0", "c1"}
    assert not {"b2", "b3", "c2"} & set(device.compiles)  # not compiled either
    results = tuner.results(tunables, tuner.key(tunables, call(device, [1.0])))
    assert "screen budget" in results[names.index("b3")].reason
    _, winner = tune(FakeDevice(scripts=device.scripts), tunables)  # the default budget: all are screened
    assert winner == "c2"


def test_a_bad_screen_budget_is_refused_by_name():
    from wgtune import Config, ConfigError

    with pytest.raises(ConfigError, match="screen_budget"):
        Config(screen_budget=-1)
    with pytest.raises(ConfigError, match="WGTUNE_SCREEN_BUDGET"):
        Config.from_env({"WGTUNE_SCREEN_BUDGET": "soon"})


@pytest.mark.parametrize("width", [1, 4])
def test_a_device_that_overlaps_compiles_gets_the_whole_first_batch_at_once(width):
    device = FakeDevice()
    device.compile_width = width
    for name, seconds in {"a0": 1e-3, "a1": 1.1e-3, "a2": 1.2e-3, "a3": 0.9e-3}.items():
        device.script(name, duration=seconds)
    likely = Group("likely", 1)
    tune(device, make_set(*(kernel(name, group=likely) for name in ("a0", "a1", "a2", "a3"))))
    if width == 1:  # the group's probes first; the rest once they have shown the group is not slow
        assert device.compiled_together == [["a0", "a1"], ["a2", "a3"]]
    else:
        assert device.compiled_together == [["a0", "a1", "a2", "a3"]]


def test_a_device_that_overlaps_no_compiles_compiles_past_the_first_batch_one_at_a_time():
    device = FakeDevice()  # compile_width 1: the browser's
    times = {"a0": 1e-3, "a1": 1.1e-3, "b0": 1.5e-3, "b1": 1.5e-3, "b2": 1.5e-3}
    for name, seconds in times.items():
        device.script(name, duration=seconds)
    groups = {"a": Group("likely", 2), "b": Group("close", 1)}
    tune(device, make_set(*(kernel(name, group=groups[name[0]]) for name in times)))
    assert device.compiled_together == [["a0", "a1"]]
    assert all(device.compiles[name] == 1 for name in times)  # b's, one by one as screened


class BeginningDevice(FakeDevice):
    """Records what the tune asks to compile in the background (``Device.start_compiles``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.begun: list[list[str]] = []
        self.compile_width = 8
        self.background_compiles = 3

    def start_compiles(self, kernels) -> None:
        self.begun.append([kernel.name for kernel in kernels])


def test_on_a_gpu_the_first_batch_is_begun_as_the_tune_starts_and_the_coming_ones_once_it_is_compiled():
    device = BeginningDevice()
    times = {"a0": 1e-3, "a1": 1.1e-3, "b0": 5e-3, "b1": 5e-3, "b2": 0.5e-3, "b3": 0.5e-3}
    for name, seconds in times.items():
        device.script(name, duration=seconds)
    groups = {"a": Group("likely", 2), "b": Group("unlikely", 1)}
    tune(device, make_set(*(kernel(name, group=groups[name[0]]) for name in times)))
    assert device.compiled_together[0] == ["a0", "a1"]
    # The first batch while the tune sets up (clock, copies, checks); then the coming ones in the
    # plan's order, as many as the device takes, once.
    assert device.begun == [["a0", "a1"], ["b0", "b1", "b2"]]


def test_a_device_that_takes_no_background_compiles_gets_none():
    device = BeginningDevice()
    device.background_compiles = 0  # a CPU adapter: compiling would slow what it measures
    for name in ("a0", "a1", "b0"):
        device.script(name, duration=1e-3)
    groups = {"a": Group("likely", 2), "b": Group("unlikely", 1)}
    tune(device, make_set(*(kernel(name, group=groups[name[0]]) for name in ("a0", "a1", "b0"))))
    assert device.begun == []


def test_the_bar_is_begun_with_the_first_batch_though_its_group_comes_later():
    device = BeginningDevice()
    likely, later = Group("likely", 2), Group("later", 1)
    for name in ("bar", "x", "y"):
        device.script(name, duration=1e-3)
    tune(device, make_set(kernel("bar", group=later), kernel("x", group=likely), kernel("y", group=likely)))
    assert device.begun[0] == ["bar", "x", "y"]  # the set's default is screened first: it sets the bar
