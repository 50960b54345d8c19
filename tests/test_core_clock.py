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
from wgtune import Config, KernelError, clock_grain, grain_of, measure_clock_grain, run_inline
from wgtune.gpu.clock import EMPTY_PASSES
from wgtune.tune.measure import sample_floor

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

TICK = 100e-6  # a browser's timestamp quantum, as Chrome's docs state it
DAWN_TICK = 65_536e-9  # what Dawn's mask of the low 16 bits makes of it


def measure(device: wgtune.Device, **kwargs) -> float:
    return run_inline(measure_clock_grain(device, **kwargs))


def durations(device: FakeDevice) -> list[float]:
    return [end - begin for begin, end in device.empty_readings]


def on_ticks(*ticks: tuple[int, int], tick: float = TICK, origin: int = 864_000_000) -> list[tuple[float, float]]:
    """Raw readings of passes that began and ended on the given ticks, ``origin`` ticks (a day on
    a 100 us clock) after the clock's zero, in seconds as a backend converts nanoseconds."""
    step = round(tick * 1e9)
    return [((origin + begin) * step * 1e-9, (origin + end) * step * 1e-9) for begin, end in ticks]


# -- grain_of -----------------------------------------------------------------------------------


def test_a_quantized_clock_whose_empty_passes_all_read_zero_has_its_tick_as_grain():
    # Chrome on a real GPU: an empty pass takes 3 us, so its begin and end fall in one tick and
    # every duration reads 0; only the readings themselves, all on the tick, show the quantum.
    device = FakeDevice(clock_quantum=TICK, empty_pass=3e-6)
    assert measure(device) == pytest.approx(TICK)
    assert set(durations(device)) == {0.0}
    assert len({begin for begin, _ in device.empty_readings}) > 2  # the passes spanned many ticks


def test_dawns_tick_of_65536_ns_is_read_as_it_is():
    # What Chrome calls 100 us is Dawn clearing the timestamps' low 16 bits: no tick is assumed.
    assert grain_of(on_ticks(*[(k, k) for k in (0, 1, 3, 4, 6, 9)], tick=DAWN_TICK)) == pytest.approx(DAWN_TICK)


def test_a_quantized_clock_reading_one_or_two_ticks_has_one_tick_as_grain():
    assert grain_of(on_ticks((0, 1), (3, 5), (7, 8), (9, 10), (12, 14))) == pytest.approx(TICK)


def test_a_quantum_above_the_median_wins():
    # Mostly zero and once three ticks: the median says 0, the readings' common step says a tick.
    assert grain_of(on_ticks(*[(2 * k, 2 * k) for k in range(10)], (21, 24))) == pytest.approx(TICK)


def test_few_readings_may_show_a_multiple_of_the_tick_which_errs_long():
    assert grain_of(on_ticks((0, 0), (2, 2), (4, 4))) == pytest.approx(2 * TICK)


def test_a_nanosecond_clock_has_about_its_median_empty_pass_as_grain():
    device = FakeDevice(clock_quantum=1e-9, empty_pass=lambda call: 3e-6 + (call % 5) * 0.1e-6)
    grain = measure(device)
    assert grain == pytest.approx(statistics.median(durations(device)))
    assert grain == pytest.approx(3.2e-6, rel=1e-3)


def test_a_five_microsecond_wall_clock_has_its_median_overhead_as_grain():
    # performance.now() in a cross-origin isolated page: 5 us steps, ~1.2 ms per submit and sync.
    device = FakeDevice(clock_quantum=5e-6, empty_pass=lambda call: 1.2e-3 + ((call * 7) % 9 - 4) * 13e-6)
    grain = measure(device)
    assert grain == pytest.approx(statistics.median(durations(device)))
    assert grain == pytest.approx(1.2e-3, abs=5e-6)


def test_a_millisecond_float_clock_shows_its_five_microsecond_step():
    # performance.now() readings, milliseconds as floats, turned into seconds as the page does:
    # the step survives the conversion when the passes are too short for the median to hide it.
    readings = [(k * 0.005 / 1000.0, (k + 1) * 0.005 / 1000.0) for k in (4_000_000, 4_000_010, 4_000_021)]
    assert grain_of(readings) == pytest.approx(5e-6)


def test_a_jittery_wall_clock_has_its_median_overhead_as_grain():
    # The readings share no step (the gcd is a nanosecond or so): the median duration decides.
    rng = random.Random(5)
    starts = [1234.5 + 0.01 * k + rng.uniform(0, 1e-4) for k in range(25)]
    lengths = [60e-6 + rng.uniform(-8e-6, 8e-6) for _ in range(24)] + [900e-6]  # one slow outlier
    grain = grain_of([(start, start + length) for start, length in zip(starts, lengths, strict=True)])
    assert grain == pytest.approx(statistics.median(lengths))
    assert grain == pytest.approx(60e-6, rel=0.15)


def test_identical_readings_mean_a_grain_below_anything_the_clock_shows():
    assert grain_of([(86_400.5, 86_400.5)] * 24) == 0.0
    assert grain_of([(0.0, 0.0)] * 24) == 0.0


def test_passes_with_readings_that_are_not_finite_or_end_before_they_begin_are_ignored():
    # Counted, the backwards passes' -5 us would pull the median below the 10 us passes and their
    # readings would halve the step; NaN and inf would move both.
    usable = on_ticks((0, 1), (4, 5), (7, 8), tick=10e-6)
    backwards = [(1.000_005, 1.0)] * 4
    broken = [(math.nan, 1.0), (1.0, math.inf)]
    assert grain_of(usable + backwards + broken) == pytest.approx(10e-6)


def test_no_usable_pass_is_an_error_not_a_grain_of_zero():
    with pytest.raises(ValueError, match="no usable reading"):
        grain_of([(math.nan, 0.0), (1.0, 0.0)])
    with pytest.raises(ValueError):
        grain_of([])


# -- measure_clock_grain ------------------------------------------------------------------------


def test_the_grain_is_measured_once_per_device_and_kept_off_the_device():
    device = FakeDevice(clock_quantum=TICK, empty_pass=3e-6)
    assert device.clock_grain == 0.0
    grain = run_inline(clock_grain(device))
    assert grain == pytest.approx(TICK)
    assert device.clock_grain == 0.0  # the backend's stated grain is not overwritten
    assert device.empty_passes == EMPTY_PASSES
    device.empty_pass = 5 * TICK  # would change the grain if measured again
    assert run_inline(clock_grain(device)) == grain
    assert device.empty_passes == EMPTY_PASSES
    other = FakeDevice(clock_quantum=TICK, empty_pass=5 * TICK)
    assert run_inline(clock_grain(other)) == pytest.approx(5 * TICK)  # each device its own


def test_the_number_of_empty_passes_is_the_callers():
    device = FakeDevice(empty_pass=lambda call: 10e-6 * (call + 1))
    assert measure(device, passes=5) == pytest.approx(30e-6)  # the median of 10..50 us
    assert device.empty_passes == 5


def test_a_measured_grain_replaces_the_backends_stated_one():
    device = FakeDevice(empty_pass=0.0)
    device.clock_grain = TICK  # what a backend asserted
    assert measure(device) == 0.0
    assert run_inline(clock_grain(device)) == 0.0


class Unmeasurable(FakeDevice):
    """A device that cannot time an empty pass: the interface's default."""

    async def time_empty_pass(self) -> tuple[float, float]:
        with self.lock:
            self.empty_passes += 1
        return await wgtune.Device.time_empty_pass(self)


def test_a_device_that_cannot_time_an_empty_pass_keeps_its_stated_grain_and_is_not_asked_again():
    device = Unmeasurable()
    device.clock_grain = 40e-6
    assert run_inline(clock_grain(device)) == 40e-6
    assert run_inline(clock_grain(device)) == 40e-6
    assert device.empty_passes == 1


def test_all_unusable_readings_keep_the_stated_grain():
    device = FakeDevice(empty_pass=math.nan)
    device.clock_grain = 40e-6
    assert measure(device) == 40e-6
    assert device.empty_passes == EMPTY_PASSES


def test_a_device_failure_propagates_and_leaves_the_grain_unmeasured():
    def fail(call: int) -> float:
        raise KernelError("device lost")

    device = FakeDevice(empty_pass=fail)
    device.clock_grain = 40e-6
    with pytest.raises(KernelError, match="device lost"):
        run_inline(clock_grain(device))
    device.empty_pass = TICK  # the next tune measures again
    assert run_inline(clock_grain(device)) == TICK


def test_a_device_that_suspends_is_measured_on_the_event_loop():
    device = FakeDevice(empty_pass=[0.0, TICK], suspend={"time_empty_pass"})
    assert asyncio.run(measure_clock_grain(device)) == TICK


# -- what the grain decides ---------------------------------------------------------------------


def test_a_measured_quantized_grain_sets_the_sample_floor_to_fifty_ticks():
    device = FakeDevice(clock_quantum=TICK, empty_pass=3e-6)  # every empty pass reads 0
    config = Config()
    assert sample_floor(device.clock_grain, config) == config.min_sample == 1e-3  # the backend's 0
    grain = measure(device)
    assert grain == pytest.approx(TICK)
    assert sample_floor(grain, config) == pytest.approx(max(1e-3, 50 * grain)) == pytest.approx(5e-3)


def test_a_fine_measured_grain_leaves_the_configured_floor():
    device = FakeDevice(clock_quantum=1e-9, empty_pass=2e-6)
    grain = measure(device)
    assert grain == pytest.approx(2e-6)
    assert sample_floor(grain, Config()) == 1e-3
