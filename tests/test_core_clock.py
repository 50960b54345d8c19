"""The clock's grain, measured on the fake device: read off empty passes, measured once per device,
the backend's stated grain kept where a device cannot be measured, and the sample floor it sets."""

from __future__ import annotations

import asyncio
import math
import random
import statistics

import pytest
from fakes import FakeDevice

import wgtune
from wgtune import Config, KernelError, grain_of, measure_clock_grain, run_inline
from wgtune.benchmark import sample_floor
from wgtune.clock import EMPTY_PASSES

TICK = 100e-6  # a browser's timestamp quantum


def measure(device: wgtune.Device, **kwargs) -> float:
    return run_inline(measure_clock_grain(device, **kwargs))


# -- grain_of -----------------------------------------------------------------------------------


def test_a_quantized_clock_that_mostly_reads_zero_has_its_tick_as_grain():
    assert grain_of([0.0] * 20 + [TICK] * 4) == TICK


def test_a_quantized_clock_reading_one_or_two_ticks_has_one_tick_as_grain():
    assert grain_of([TICK, 2 * TICK, TICK, TICK, 2 * TICK]) == pytest.approx(TICK)


def test_a_quantum_above_the_median_wins():
    # Mostly zero and once three ticks: the median says 0, the step between readings says more.
    assert grain_of([0.0] * 10 + [3 * TICK]) == pytest.approx(3 * TICK)


def test_a_jittery_wall_clock_has_its_median_overhead_as_grain():
    rng = random.Random(5)
    readings = [60e-6 + rng.uniform(-8e-6, 8e-6) for _ in range(24)] + [900e-6]  # one slow outlier
    grain = grain_of(readings)
    assert grain == statistics.median(readings)
    assert grain == pytest.approx(60e-6, rel=0.15)


def test_all_zero_readings_mean_a_grain_below_anything_the_clock_shows():
    assert grain_of([0.0] * 24) == 0.0


def test_readings_that_are_not_finite_or_are_negative_are_ignored():
    # Counted, -5 us would make a 15 us quantum above the 10 us median; NaN and inf would move it.
    assert grain_of([-5e-6, 10e-6, math.nan, 10e-6, math.inf, 10e-6]) == pytest.approx(10e-6)


def test_no_usable_reading_is_an_error_not_a_grain_of_zero():
    with pytest.raises(ValueError, match="no usable reading"):
        grain_of([math.nan, -1.0])
    with pytest.raises(ValueError):
        grain_of([])


# -- measure_clock_grain ------------------------------------------------------------------------


def test_the_grain_is_measured_once_and_kept_on_the_device():
    device = FakeDevice(empty_pass=[0.0, 0.0, TICK])
    assert device.clock_grain == 0.0 and not device.clock_grain_measured
    assert measure(device) == TICK
    assert device.clock_grain == TICK and device.clock_grain_measured
    assert device.empty_passes == EMPTY_PASSES
    device.empty_pass = 5 * TICK  # would change the grain if measured again
    assert measure(device) == TICK
    assert device.empty_passes == EMPTY_PASSES


def test_the_number_of_empty_passes_is_the_callers():
    device = FakeDevice(empty_pass=lambda call: 10e-6 * (call + 1))
    assert measure(device, passes=5) == pytest.approx(30e-6)  # the median of 10..50 us
    assert device.empty_passes == 5


def test_a_measured_grain_replaces_the_backends_stated_one():
    device = FakeDevice(empty_pass=0.0)
    device.clock_grain = TICK  # what a backend asserted
    assert measure(device) == 0.0
    assert device.clock_grain == 0.0


class Unmeasurable(FakeDevice):
    """A device that cannot time an empty pass: the interface's default."""

    async def time_empty_pass(self) -> float:
        with self.lock:
            self.empty_passes += 1
        return await wgtune.Device.time_empty_pass(self)


def test_a_device_that_cannot_time_an_empty_pass_keeps_its_stated_grain_and_is_not_asked_again():
    device = Unmeasurable()
    device.clock_grain = 40e-6
    assert measure(device) == 40e-6
    assert device.clock_grain == 40e-6 and device.clock_grain_measured
    assert measure(device) == 40e-6
    assert device.empty_passes == 1


def test_all_unusable_readings_keep_the_stated_grain():
    device = FakeDevice(empty_pass=math.nan)
    device.clock_grain = 40e-6
    assert measure(device) == 40e-6
    assert device.clock_grain_measured and device.empty_passes == EMPTY_PASSES


def test_a_device_failure_propagates_and_leaves_the_grain_unmeasured():
    def fail(call: int) -> float:
        raise KernelError("device lost")

    device = FakeDevice(empty_pass=fail)
    device.clock_grain = 40e-6
    with pytest.raises(KernelError, match="device lost"):
        measure(device)
    assert device.clock_grain == 40e-6 and not device.clock_grain_measured
    device.empty_pass = TICK  # the next tune measures again
    assert measure(device) == TICK


def test_a_device_that_suspends_is_measured_on_the_event_loop():
    device = FakeDevice(empty_pass=[0.0, TICK], suspend={"time_empty_pass"})
    assert asyncio.run(measure_clock_grain(device)) == TICK


# -- what the grain decides ---------------------------------------------------------------------


def test_a_measured_quantized_grain_sets_the_sample_floor_to_fifty_ticks():
    device = FakeDevice(empty_pass=[0.0, 0.0, 0.0, TICK])
    config = Config()
    assert sample_floor(device, config) == config.min_sample == 1e-3  # before: the backend's 0
    grain = measure(device)
    assert grain == TICK
    assert sample_floor(device, config) == pytest.approx(max(1e-3, 50 * grain)) == pytest.approx(5e-3)


def test_a_fine_measured_grain_leaves_the_configured_floor():
    device = FakeDevice(empty_pass=2e-6)
    measure(device)
    assert device.clock_grain == pytest.approx(2e-6)
    assert sample_floor(device, Config()) == 1e-3
