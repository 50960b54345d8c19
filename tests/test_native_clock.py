"""The clock's grain measured on the native device (lavapipe on a machine without a GPU), with
GPU timestamps and with the wall clock: empty passes time to something small and sane."""

from __future__ import annotations

import itertools
import math
import statistics
import struct

import pytest
from test_native import scale_kernel

from wgtune import Args, Timing, clock_grain, measure_clock_grain, run_inline
from wgtune.backends.native import NativeDevice

SANE = 0.1  # seconds: an empty pass's median time, far above any seen, far below a unit error


@pytest.mark.parametrize("use_timestamps", [True, False], ids=["timestamps", "wall-clock"])
def test_the_native_clock_grain_is_measured_and_small(use_timestamps):
    device = NativeDevice.open(use_timestamps=use_timestamps)
    if use_timestamps and device.timing != Timing.GPU_TIMESTAMP:
        pytest.skip("this adapter has no timestamp-query")
    # Each pass never suspends (the core drives it inline). Their median, as the grain takes it, is
    # bounded generously: on a loaded CPU one empty pass read 16 ms of wall clock, while a reading
    # in the wrong unit (milliseconds taken for seconds) would be a thousand times off.
    readings = [run_inline(device.time_empty_pass()) for _ in range(5)]
    assert all(math.isfinite(begin) and math.isfinite(end) and end >= begin for begin, end in readings)
    assert statistics.median(end - begin for begin, end in readings) < SANE
    assert all(later >= end for (_, end), (later, _) in itertools.pairwise(readings))  # one clock that runs on
    grain = run_inline(clock_grain(device))
    assert run_inline(clock_grain(device)) == grain  # measured once, then kept for the device
    assert math.isfinite(grain) and 0 <= grain < SANE


@pytest.mark.parametrize("use_timestamps", [True, False], ids=["timestamps", "wall-clock"])
def test_real_work_reads_well_above_the_grain_on_the_same_clock(use_timestamps):
    # Empty passes and real ones share the query set and readback path: measuring first must not
    # disturb the samples after, and an empty pass must read less than a pass with work in it.
    device = NativeDevice.open(use_timestamps=use_timestamps)
    grain = run_inline(measure_clock_grain(device))
    n = 1 << 20
    x = device.create_buffer(struct.pack(f"{n}f", *range(n)))
    y = device.create_buffer(size=4 * n)
    args = Args((x, y), (n,))
    pipeline = run_inline(device.compile(scale_kernel("scale", 64)))
    seconds = run_inline(device.resolve(run_inline(device.profile(pipeline, args, ((n + 63) // 64, 1, 1), 8))))
    assert seconds > 10 * grain
    assert struct.unpack("3f", device.read_buffer_sync(y)[:12]) == (0.0, 3.0, 6.0)
