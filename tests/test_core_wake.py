"""Bringing an idle GPU's clock up before a tune samples (``wgtune.gpu.wake``)."""

from __future__ import annotations

import types

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet

from wgtune import Config, ConfigError, DeviceLost, run_inline
from wgtune.errors import KernelError
from wgtune.gpu import wake as wake_module
from wgtune.gpu.device import Timing
from wgtune.gpu.wake import (
    CALIBRATION_DISPATCHES,
    LOAD_SECONDS,
    PASS_GRAINS,
    RAMP_SECONDS,
    STEADY_SECONDS,
    WARM_WITHIN,
    clock_is_up,
    load,
    wake,
)

pytestmark = pytest.mark.core

SPIN = wake_module.SPIN_KERNEL.name
WARM = 50e-6  # seconds a dispatch of the spin kernel at the full clock
COLD = 5.7 * WARM  # at the idle clock (an H100: 345 against 1980 MHz)


class Clock:
    """The wake's time: it moves only as the fake GPU's passes take theirs (and a little for the host)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(wake_module, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    return clock


def gpu(clock: Clock, per_dispatch, compile_seconds: float = 0.0, per_pass: float = 0.0, **fields) -> FakeDevice:
    """A fake GPU whose clock idles, the spin kernel's dispatch taking ``per_dispatch(now)`` seconds,
    a pass ``per_pass`` more whatever its dispatches (what a reading carries of the host's recording
    and the pass's start), and its compile ``compile_seconds``; ``device.order`` logs its profiles
    and resolves."""
    device = FakeDevice(**fields)
    device.idle_clocks = True
    device.order = []
    device.script(SPIN, duration=lambda _call: per_dispatch(clock.now))
    profile, resolve, compile_ = device.profile, device.resolve, device.compile

    async def profiled(pipeline, args, grid, repeats):
        answer = await profile(pipeline, args, grid, repeats)
        clock.now += answer.seconds + 1e-5  # the pass, and the host's part
        device.order.append("profile")
        return answer

    async def resolved(handle):
        device.order.append("resolve")
        return await resolve(handle) + per_pass

    async def compiled(kernel):
        if kernel.name == SPIN:
            clock.now += compile_seconds
        return await compile_(kernel)

    device.profile, device.resolve, device.compile = profiled, resolved, compiled
    return device


def ramping(ramp_at: float):
    """Cold until ``ramp_at`` seconds of load, then warm."""
    return lambda now: COLD if now < ramp_at else WARM


def test_a_reading_as_fast_as_the_fastest_before_is_up_at_once():
    assert clock_is_up([(0.001, 1.0e-3)], fastest_before=1.0e-3)
    assert clock_is_up([(0.001, 1.0e-3 * (1 + WARM_WITHIN / 2))], fastest_before=1.0e-3)
    assert not clock_is_up([(0.001, 1.2e-3)], fastest_before=1.0e-3)


def test_without_a_fastest_before_the_clock_is_up_only_after_the_ramp_and_steady():
    steady = [(t / 1000, 1e-3) for t in range(1, 1000)]
    # Steady readings from the start say nothing before RAMP_SECONDS: a cold GPU reads steady too
    # until its ramp begins.
    assert not any(clock_is_up(steady[:i], None) for i in range(1, int(RAMP_SECONDS * 1000) - 1))
    assert clock_is_up([r for r in steady if r[0] <= RAMP_SECONDS + 0.001], None)
    # A reading that beats the earlier ones within the last STEADY_SECONDS: still rising.
    falling = [(t / 1000, 1e-3 if t < RAMP_SECONDS * 1000 else 0.5e-3) for t in range(1, 700)]
    assert not clock_is_up(falling, None)
    assert clock_is_up(falling + [(0.7 + STEADY_SECONDS + t / 1000, 0.5e-3) for t in range(1, 5)], None)
    assert not clock_is_up([], None)


def test_a_cold_gpu_is_woken_until_its_clock_is_up_and_a_warm_one_costs_one_pass(clock):
    device = gpu(clock, ramping(0.4))
    first = run_inline(wake(device, 2.0))
    readings = [seconds for _, seconds in first.readings]
    assert readings[0] > 5 * readings[-1]  # it ran until the clock came up
    assert first.seconds >= RAMP_SECONDS and first.seconds < RAMP_SECONDS + 3 * STEADY_SECONDS
    assert first.fastest_before is None
    again = run_inline(wake(device, 2.0))
    assert len(again.readings) == 1 and again.fastest_before == pytest.approx(readings[-1])
    assert device.compiles[SPIN] == 1  # compiled once a device
    assert "the first" in first.describe() and "fastest before" in again.describe()


def test_a_gpu_that_went_idle_again_is_woken_to_its_fastest_before(clock):
    device = gpu(clock, ramping(0.0))
    run_inline(wake(device, 2.0))
    cooled_at = clock.now
    device.script(SPIN, duration=lambda _call: COLD if clock.now < cooled_at + 0.3 else WARM)
    woke = run_inline(wake(device, 2.0))
    assert woke.readings[0][1] > 5 * woke.readings[-1][1]
    assert woke.seconds < RAMP_SECONDS  # it knew the fastest reading, so it stopped on reaching it


def test_the_limit_bounds_a_wake_whatever_the_readings_and_says_it_was_cut_short(clock):
    device = gpu(clock, lambda now: COLD / (1 + 10 * now))  # rising forever
    woke = run_inline(wake(device, 0.3))
    assert 0.3 <= woke.seconds < 0.3 + 0.01
    assert woke.cut_short and "still rising" in woke.describe()
    assert wake_module._SPINNERS[device].fastest is None  # a clock still rising is no figure


def test_the_ramp_is_counted_from_the_first_timed_pass_not_from_the_compile(clock):
    # The spin's compile competes with the tune's first compiles: 0.5 s of it must not count as load.
    device = gpu(clock, ramping(0.5 + 0.4), compile_seconds=0.5)
    woke = run_inline(wake(device, 3.0))
    assert woke.readings[0][1] > 5 * woke.readings[-1][1]  # it waited for the clock to come up
    assert not woke.cut_short


def test_a_first_wake_loaded_ahead_counts_its_ramp_from_the_load_and_spends_less_of_its_own(clock):
    # The clock comes up at 0.5 s; the tune's setup, 0.3 s of host work, runs between load and wake.
    alone = run_inline(wake(gpu(clock, ramping(0.5)), 3.0))
    clock.now = 0.0
    device = gpu(clock, ramping(0.5))
    loaded = run_inline(load(device, 3.0))
    assert loaded is not None and device.dispatches[SPIN] == 0  # timed passes, not waited for
    busy = sum(run_inline(device.resolve(handle)) for handle, _count in loaded.passes)
    assert busy == pytest.approx(LOAD_SECONDS, rel=0.05)  # sized at the clock it found
    clock.now = loaded.since + 0.3  # the setup's host work, while the load ran (the fake's clock had
    # moved on as if each pass were waited for)
    woke = run_inline(wake(device, 3.0, loaded))
    assert not woke.cut_short and woke.readings[0][1] > 5 * woke.readings[-1][1]  # it still waited for the clock
    assert woke.readings[0][0] >= busy and woke.readings[-1][0] >= RAMP_SECONDS  # the load's seconds are ramp
    assert woke.seconds <= alone.seconds - 0.2  # the setup's 0.3 s were the ramp's too


def test_a_load_counts_though_its_passes_are_longer_than_the_wakes_and_each_pass_has_a_fixed_cost(clock):
    # As on session 39's H100: a device opened a second before the tune has its clock up still (it
    # falls some 4 s after the open), so the load is sized at the full clock, 0.72 ms a spin dispatch:
    # passes of 512 and 43, where the wake's passes have one dispatch. A reading carries some 50 us of
    # its pass (the host's recording among it), so a pass of one dispatch read 7% slower a dispatch than
    # the load's last at the same clock: the clock looked fallen, the load counted for nothing, and the
    # first wake paid its whole ramp (0.60 s in every first tune traced that day).
    warm, fixed = 0.72e-3, 50e-6
    device = gpu(clock, lambda now: warm, per_pass=fixed)
    loaded = run_inline(load(device, 3.0))
    assert loaded is not None and loaded.passes[-1][1] == wake_module._SPINNERS[device].repeats
    clock.now = max(clock.now, loaded.since + 0.3)  # the setup's host work, the load done meanwhile
    woke = run_inline(wake(device, 3.0, loaded))
    assert not woke.cut_short and woke.readings[0][0] >= LOAD_SECONDS * 0.9  # the load's seconds count as ramp
    assert woke.seconds <= RAMP_SECONDS - LOAD_SECONDS + 0.05  # what is left of the ramp, not all of it


def test_a_load_the_gpu_idled_after_counts_for_nothing(clock):
    device = gpu(clock, ramping(10.0))  # cold throughout: no reading may say it is up early
    loaded = run_inline(load(device, 3.0))
    clock.now = loaded.since + 1.0  # a setup far longer than the load: the GPU idled after it
    woke = run_inline(wake(device, 3.0, loaded))
    assert woke.readings[0][0] < 0.01  # the ramp counted from the wake's own first pass
    assert woke.readings[-1][0] >= RAMP_SECONDS


def test_no_load_is_sized_from_a_clock_that_gave_no_reading(clock):
    device = gpu(clock, lambda now: float("nan"))
    assert run_inline(load(device, 3.0)) is None


def test_a_load_whose_clock_fell_before_the_wake_counts_for_nothing(clock):
    # The load ran warm (its last pass at the full clock); the wake's first pass reads cold.
    device = gpu(clock, lambda now: WARM)
    loaded = run_inline(load(device, 3.0))
    device.script(SPIN, duration=lambda _call: COLD)
    clock.now = loaded.since + 0.05  # a short setup: no idle gap to go by
    woke = run_inline(wake(device, 3.0, loaded))
    assert woke.readings[0][0] < 0.1 < LOAD_SECONDS  # no credit: the ramp is the wake's own
    assert woke.readings[-1][0] >= RAMP_SECONDS


def test_a_load_pass_without_a_reading_counts_for_nothing_and_every_pass_is_read(clock):
    device = gpu(clock, ramping(10.0))
    loaded = run_inline(load(device, 3.0))
    assert len(loaded.passes) >= 2
    resolve, blank = device.resolve, loaded.passes[0][0]
    read: list = []

    async def first_reads_nothing(handle):
        seconds = await resolve(handle)
        read.append(handle)
        return float("nan") if handle is blank else seconds

    device.resolve = first_reads_nothing
    clock.now = loaded.since + 0.05
    woke = run_inline(wake(device, 3.0, loaded))
    assert woke.readings[0][0] < 0.1 < LOAD_SECONDS  # no credit
    assert all(handle in read for handle, _count in loaded.passes)  # each pass read all the same


def test_a_first_wake_cut_short_leaves_the_next_tune_to_load_again(clock):
    device = gpu(clock, ramping(10.0))
    run_inline(wake(device, 0.2))  # cut short: no figure
    assert run_inline(load(device, 3.0)) is not None


def test_only_a_first_wake_is_loaded_ahead(clock):
    device = gpu(clock, ramping(0.0))
    assert run_inline(load(device, 0.0)) is None  # a wake of 0 s: nothing to load
    run_inline(wake(device, 2.0))
    profiles = device.order.count("profile")
    assert run_inline(load(device, 2.0)) is None  # it has a figure: a warm GPU pays one pass
    assert device.order.count("profile") == profiles
    busy = FakeDevice()  # a GPU whose clock does not idle (a CPU adapter's, say)
    assert run_inline(load(busy, 2.0)) is None and busy.compiles[SPIN] == 0


def test_a_warm_gpu_a_little_slower_than_its_figure_is_up_once_steady(clock):
    device = gpu(clock, ramping(0.0))
    run_inline(wake(device, 2.0))
    device.script(SPIN, duration=lambda _call: 1.1 * WARM)  # held 10% lower (heat, power)
    woke = run_inline(wake(device, 2.0))
    assert STEADY_SECONDS <= woke.readings[-1][0] < RAMP_SECONDS  # steady near its figure: no full ramp
    cold = gpu(clock, lambda now: COLD)  # a device far below any figure it had: the full ramp
    run_inline(wake(cold, 2.0))
    assert run_inline(wake(cold, 2.0)).readings[-1][0] < 0.01  # its figure is the cold one: one pass


def test_a_pass_is_always_queued_behind_the_one_being_read(clock):
    device = gpu(clock, ramping(0.2))
    run_inline(wake(device, 2.0))
    order = device.order[2:]  # after the calibration's profile and resolve
    assert order[:3] == ["profile", "profile", "resolve"]
    assert order[-2:] == ["resolve", "resolve"] and order.count("profile") == order.count("resolve")


def test_on_a_coarse_clock_a_pass_lasts_pass_grains_of_it_once_the_clock_is_up(clock):
    # Chrome's timestamps on a GPU step by about 100 us: a 1 ms pass would read off by 10%.
    repeats = []

    def counting(device):
        profile = device.profile

        async def counted(pipeline, args, grid, count):
            repeats.append(count)
            return await profile(pipeline, args, grid, count)

        device.profile = counted
        return device

    device = counting(gpu(clock, ramping(0.4), clock_quantum=100e-6, empty_pass=5e-6))  # cold at first
    first = run_inline(wake(device, 5.0))
    assert not first.failed and not first.cut_short
    assert repeats[0] == CALIBRATION_DISPATCHES
    assert repeats[1] * COLD >= 0.95 * PASS_GRAINS * 100e-6  # sized on the cold clock at first
    assert wake_module._SPINNERS[device].provisional  # read on passes sized cold: the next wake's figure replaces it
    repeats.clear()
    again = run_inline(wake(device, 5.0))  # warm now: sized again at the end of the first wake
    assert not wake_module._SPINNERS[device].provisional
    assert len(again.readings) == 1  # within WARM_WITHIN of the figure at once, read to 2%
    assert min(repeats) * WARM >= 0.95 * PASS_GRAINS * 100e-6
    assert again.readings[0][1] == pytest.approx(WARM, rel=0.03)  # a dispatch's seconds, whatever the pass
    repeats.clear()
    run_inline(wake(counting(gpu(clock, ramping(0.0), clock_quantum=100e-6, empty_pass=5e-6)), 5.0))
    assert repeats[:2] == [CALIBRATION_DISPATCHES, 4 * CALIBRATION_DISPATCHES]  # 8 warm ones read under 10 grains
    fine = gpu(clock, ramping(0.0))  # a clock of nanoseconds: passes of PASS_SECONDS
    run_inline(wake(fine, 5.0))
    assert wake_module._SPINNERS[fine].repeats * WARM == pytest.approx(wake_module.PASS_SECONDS, rel=0.05)


def test_an_unexpected_error_of_the_spin_kernel_leaves_the_clock_as_it_is(clock, monkeypatch):
    device = gpu(clock, ramping(0.4))
    monkeypatch.setattr(device, "create_buffer", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no memory")))
    woke = run_inline(wake(device, 2.0))
    assert woke.failed == "RuntimeError: no memory"
    monkeypatch.undo()
    tuner = make_tuner(device, config=quiet(wake=2.0))
    assert tuner.execute(make_set("a", "b"), call(device, [1.0])).name in ("a", "b")


@pytest.mark.parametrize("change", ["not idle_clocks", "wall clock", "limit 0"])
def test_nothing_is_woken_where_there_is_nothing_to_wake(clock, change):
    device = gpu(clock, ramping(0.4), timing=Timing.WALL_CLOCK if change == "wall clock" else Timing.GPU_TIMESTAMP)
    device.idle_clocks = change != "not idle_clocks"
    assert run_inline(wake(device, 0.0 if change == "limit 0" else 2.0)) is None
    assert device.compiles[SPIN] == 0 and device.profile_count == 0


def test_a_tune_wakes_an_idle_gpu_before_it_samples_and_says_so(clock):
    device = gpu(clock, ramping(0.4))
    order: list[str] = []
    device.on_profile = lambda name, repeats: order.append(name)
    tuner = make_tuner(device, config=quiet(wake=2.0))
    winner = tuner.execute(make_set("a", "b"), call(device, [1.0]))
    assert winner.name in ("a", "b")
    first_candidate = min(order.index(name) for name in ("a", "b"))
    assert order[:first_candidate] and set(order[:first_candidate]) == {SPIN}
    assert len(order[:first_candidate]) > 5  # it ran until the clock came up


def test_a_tunes_first_wake_is_loaded_before_its_setup(clock, monkeypatch):
    from wgtune.tune import tuning

    device = gpu(clock, ramping(0.4))
    in_flight = []  # spin passes submitted and not yet read when the setup began
    handed = []  # what the wake was given
    reflect = tuning._reflect

    async def noted(request, among):
        in_flight.append(device.order.count("profile") - device.order.count("resolve"))
        await reflect(request, among)

    async def woken(device_, limit, loaded=None):
        handed.append(loaded)
        return await wake(device_, limit, loaded)

    monkeypatch.setattr(tuning, "_reflect", noted)
    monkeypatch.setattr(tuning, "wake", woken)
    make_tuner(device, config=quiet(wake=2.0)).execute(make_set("a", "b"), call(device, [1.0]))
    assert in_flight and in_flight[0] > 0  # the load was on the GPU when the setup began
    assert handed and handed[0] is not None and len(handed[0].passes) == in_flight[0]  # and the wake counted it


def test_a_tune_with_wake_off_launches_no_spin(clock):
    device = gpu(clock, ramping(0.4))
    tuner = make_tuner(device, config=quiet(wake=0.0))
    tuner.execute(make_set("a", "b"), call(device, [1.0]))
    assert device.compiles[SPIN] == 0


def test_the_wake_setting_is_read_and_checked():
    assert Config.from_env({"WGTUNE_WAKE": "0.25"}).wake == 0.25
    assert Config.from_env({}).wake == 1.0
    with pytest.raises(ConfigError, match="WGTUNE_WAKE"):
        Config.from_env({"WGTUNE_WAKE": "-1"})
    with pytest.raises(ConfigError, match="wake"):
        Config(wake=float("inf"))


def test_a_spin_kernel_the_device_refuses_leaves_the_clock_as_it_is_and_the_tune_goes_on(clock):
    device = gpu(clock, ramping(0.4))
    device.script(SPIN, compile_error="no such builtin: fma")
    woke = run_inline(wake(device, 2.0))
    assert woke.failed and "no such builtin" in woke.describe() and not woke.readings
    again = run_inline(wake(device, 2.0))
    assert again.failed and device.compiles[SPIN] == 1  # not tried again on this device
    tuner = make_tuner(device, config=quiet(wake=2.0))
    assert tuner.execute(make_set("a", "b"), call(device, [1.0])).name in ("a", "b")


def test_a_launch_of_the_spin_kernel_refused_mid_wake_ends_it(clock):
    device = gpu(clock, ramping(0.4))
    run_inline(wake(device, 0.05))  # compiled and calibrated
    device.script(SPIN, profile_error=KernelError("the launch was refused"))
    woke = run_inline(wake(device, 2.0))
    assert woke.failed == "the launch was refused"
    assert run_inline(wake(device, 2.0)).failed  # and not run again


def test_a_device_lost_during_the_wake_is_the_tune_s_failure(clock):
    device = gpu(clock, ramping(0.4))
    device.script(SPIN, profile_error=DeviceLost("unknown: the GPU watchdog reset it"))
    with pytest.raises(DeviceLost):
        run_inline(wake(device, 2.0))


def test_a_dry_run_wakes_nothing(clock):
    device = gpu(clock, ramping(0.4))
    tuner = make_tuner(device, config=quiet(wake=2.0, dry_run=True))
    tuner.execute(make_set("a", "b"), call(device, [1.0]))
    assert device.compiles[SPIN] == 0
