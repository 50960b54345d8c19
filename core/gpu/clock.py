"""The clock's grain, measured on the device in hand rather than asserted by its backend.

Every timed sample is read off one clock: GPU timestamps around a compute pass, or the wall clock
around a submission and a full sync. A reading is off by up to one *grain* of that clock, so
``benchmark.sample_floor`` makes each sample last 50 grains. What the grain is depends on the
device, the driver and the browser (Chrome quantizes timestamps; the wall clock pays for a submit
and a sync on every reading), so the core measures it: it times passes that do no work and reads
the grain off the clock's raw readings around them (:func:`grain_of`).

:func:`clock_grain` measures it once per device object, before the device's first tune, and this
module keeps it: tuners and the page ask here, and nothing is written onto the device. The
device's :attr:`~wgtune.gpu.device.Device.clock_grain` is only what its backend states, the answer
for a device that cannot time an empty pass.
"""

from __future__ import annotations

import math
import statistics
import weakref
from collections.abc import Sequence
from itertools import pairwise

from .device import Device

__all__ = ["EMPTY_PASSES", "clock_grain", "grain_of", "measure_clock_grain"]

# The grain measured of each device object, for as long as the device lives.
_MEASURED: weakref.WeakKeyDictionary[Device, float] = weakref.WeakKeyDictionary()

# Enough empty passes that a quantized clock shows its step (a reading straddling a tick) and the
# median is steady, few enough that the measurement stays a few milliseconds of a tune.
EMPTY_PASSES = 24


def grain_of(passes: Sequence[tuple[float, float]]) -> float:
    """The clock's grain, in seconds, as seen through ``profile``: from ``passes``, the clock's raw
    begin and end readings (seconds) around passes that did no work.

    It is the larger of two things that both put an error of their size into every reading:

    - the clock's *quantum*, the step its raw readings move in: a clock that counts in 100 us
      ticks can be off by up to one tick on each sample. It is the greatest common divisor of the
      differences between the raw readings, in whole nanoseconds. Why the raw readings and not the
      durations: an empty pass takes a few microseconds, so on a clock quantized to ~100 us
      (Chrome's timestamps on a real GPU: 65,536 ns, Dawn clears their low 16 bits) its begin and
      end nearly always fall in the same tick and every duration reads 0, which shows no quantum at
      all; the readings themselves are all multiples of the tick. With few readings the divisor
      may come out a multiple of the tick, which errs on the long (safe) side. A clock that steps
      in nanoseconds gives about 1 ns, and so does one whose readings jitter or lose a nanosecond
      on their way to seconds (``performance.now()`` is milliseconds as a float): its quantum is
      then hidden, but on such a clock the median duration is far larger and decides anyway.
    - the *median* duration (end - begin), what timing costs when there is nothing to time: the
      wall clock's submit-and-sync overhead, or a timestamped pass's own cost. Every sample carries
      it too.

    A sample is off by up to one grain, so a sample of 50 grains is measured to within 2%.

    A pass with a reading that is not finite, or that ends before it begins (a clock that wrapped,
    a failed read), is ignored. Readings all identical show no quantum and no duration: 0.0, the
    grain is below anything this clock can show. No usable pass at all is a ValueError (there is
    nothing to say the grain is small).
    """
    usable = [(begin, end) for begin, end in passes if math.isfinite(begin) and math.isfinite(end) and end >= begin]
    if not usable:
        raise ValueError(f"no usable reading of an empty pass among {len(passes)}")
    quantum = _quantum([reading for pass_ in usable for reading in pass_])
    return max(quantum, statistics.median([end - begin for begin, end in usable]))


def _quantum(readings: list[float]) -> float:
    """The step ``readings`` (seconds) move in: the gcd of their differences in whole nanoseconds,
    0.0 when they are all the same.

    Whole nanoseconds because a gcd needs integers, and timestamps are nanosecond counts. A count
    turned into float seconds and back may be off by a nanosecond, but the differences between
    the readings of a quantized clock come back exact while the count is below 2**52 ns (52 days
    since the clock's origin); past that, or on a clock with jitter, the gcd degenerates to about
    1 ns, and the grain is the median duration."""
    distinct = sorted({round(reading * 1e9) for reading in readings})
    # The gcd of the steps between neighbours is the gcd of all the pairwise differences.
    steps = [b - a for a, b in pairwise(distinct)]
    return math.gcd(*steps) * 1e-9 if steps else 0.0


async def measure_clock_grain(device: Device, passes: int = EMPTY_PASSES) -> float:
    """The grain of ``device``'s clock in seconds, measured now.

    Times ``passes`` empty passes (:meth:`Device.time_empty_pass`) and answers their
    :func:`grain_of`. A device that cannot time an empty pass (``NotImplementedError``), or whose
    passes are all unusable, answers the grain its backend states (``device.clock_grain``). Any
    other exception from the device propagates: the device failed, and the caller (a tune) fails
    with it.
    """
    try:
        readings = [await device.time_empty_pass() for _ in range(passes)]
    except NotImplementedError:
        return device.clock_grain
    try:
        return grain_of(readings)
    except ValueError:  # every pass unusable: the stated grain is all we know
        return device.clock_grain


async def clock_grain(device: Device) -> float:
    """``device``'s grain: measured (:func:`measure_clock_grain`) the first time it is asked for,
    then kept for as long as the device lives. A measurement that fails (the device raised) is not
    kept: the next ask measures again."""
    grain = _MEASURED.get(device)
    if grain is None:
        grain = _MEASURED[device] = await measure_clock_grain(device)
    return grain
