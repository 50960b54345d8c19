"""The clock's grain, measured on the device in hand rather than asserted by its backend.

Every timed sample is read off one clock: GPU timestamps around a compute pass, or the wall clock
around a submission and a full sync. A reading is off by up to one *grain* of that clock, so
``benchmark.sample_floor`` makes each sample last 50 grains. What the grain is depends on the
device, the driver and the browser (Chrome quantizes timestamps; the wall clock pays for a submit
and a sync on every reading), so the core measures it: it times passes that do no work and reads
the grain off what the clock reports for them (:func:`grain_of`).

The measurement is made once per device, the first time it tunes, and kept on the device
(:attr:`Device.clock_grain`). A device that cannot time an empty pass keeps the grain its backend
stated.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Sequence
from itertools import pairwise

from .device import Device

__all__ = ["EMPTY_PASSES", "grain_of", "measure_clock_grain"]

# Enough empty passes that a quantized clock shows its step (a reading straddling a tick) and the
# median is steady, few enough that the measurement stays a few milliseconds of a tune.
EMPTY_PASSES = 24


def grain_of(readings: Sequence[float]) -> float:
    """The clock's grain, in seconds, as seen through ``profile``: from ``readings``, the seconds
    the clock reported for passes that did no work.

    It is the larger of two things that both put an error of their size into every reading:

    - the clock's *quantum*, the smallest positive difference between distinct readings: a clock
      that counts in 100 us ticks reads an empty pass as 0 or 100 us, so a sample is off by up to
      one tick;
    - the *median* reading, what timing costs when there is nothing to time: the wall clock's
      submit-and-sync overhead, or a timestamped pass's own cost. Every sample carries it too.

    A sample is off by up to one grain, so a sample of 50 grains is measured to within 2%.

    Readings that are not finite or are negative (a clock that wrapped, a failed read) are ignored.
    All-zero readings give 0.0: the grain is below anything this clock can show. No usable reading
    at all is a ValueError (there is nothing to say the grain is small).
    """
    usable = sorted(r for r in readings if math.isfinite(r) and r >= 0)
    if not usable:
        raise ValueError(f"no usable reading of an empty pass among {len(readings)}")
    steps = [b - a for a, b in pairwise(usable) if b > a]
    quantum = min(steps, default=0.0)
    return max(quantum, statistics.median(usable))


async def measure_clock_grain(device: Device, passes: int = EMPTY_PASSES) -> float:
    """The grain of ``device``'s clock in seconds, measured once and kept on the device.

    The first call times ``passes`` empty passes (:meth:`Device.time_empty_pass`), sets
    ``device.clock_grain`` to their :func:`grain_of` and marks it measured; later calls return it
    at once. A device that cannot time an empty pass (``NotImplementedError``), or whose readings
    are all unusable, keeps its stated grain, marked measured too so that no tune retries. Any
    other exception from the device propagates: the device failed, and the caller (a tune) fails
    with it.
    """
    if device.clock_grain_measured:
        return device.clock_grain
    try:
        readings = [await device.time_empty_pass() for _ in range(passes)]
    except NotImplementedError:
        readings = []
    # Every reading unusable (ValueError): the stated grain is all we know.
    with contextlib.suppress(ValueError):
        if readings:
            device.clock_grain = grain_of(readings)
    device.clock_grain_measured = True
    return device.clock_grain
