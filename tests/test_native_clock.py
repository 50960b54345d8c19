"""The clock's grain measured on the native device (lavapipe on a machine without a GPU), with
GPU timestamps and with the wall clock: empty passes time to something small and sane."""

from __future__ import annotations

import math
import struct

import pytest
from test_native import scale_kernel

from wgtune import Args, Timing, clock_grain, measure_clock_grain, run_inline
from wgtune.backends.native import NativeDevice


@pytest.mark.parametrize("use_timestamps", [True, False], ids=["timestamps", "wall-clock"])
def test_the_native_clock_grain_is_measured_and_small(use_timestamps):
    device = NativeDevice.open(use_timestamps=use_timestamps)
    if use_timestamps and device.timing != Timing.GPU_TIMESTAMP:
        pytest.skip("this adapter has no timestamp-query")
    begin, end = run_inline(device.time_empty_pass())  # never suspends: the core drives it inline
    assert math.isfinite(begin) and math.isfinite(end) and 0 <= end - begin < 10e-3
    later, _ = run_inline(device.time_empty_pass())
    assert later >= end  # raw readings of one clock that runs on
    grain = run_inline(clock_grain(device))
    assert run_inline(clock_grain(device)) == grain  # measured once, then kept for the device
    assert math.isfinite(grain) and 0 <= grain < 10e-3


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
