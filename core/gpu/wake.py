"""The GPU's clock brought up before a tune samples its candidates (issue 29).

A GPU left idle lowers its shader clock and raises it again only under steady load. On an H100
(``bench/results/h100-clocks-session33.txt``, ``nvidia-smi`` every 200 ms beside two processes
that tuned the fma on 1 GiB arrays) the SM clock fell from 1980 to 345 MHz within a second or
two once no work came (after about 4 s with a device open and idle), and came back to 1980 MHz
after 0.4-0.6 s of steady load. A tune that begins on such a GPU samples its first candidates,
or the whole of a short tune, at a fraction of the clock: in the first tune of a process every
candidate's median read 1.7-2.5x what it read a second later, the second tune 1.0x, and the
winner's stored figure kept the slow reading; a clock that rises halfway through also favours
the candidates sampled after it.

So before a tune samples, a device whose clock idles (:attr:`Device.idle_clocks`: a GPU timed by
its timestamps, not a CPU adapter, whose clock is the host's) runs a kernel of fixed work (chains
of dependent multiply-adds: its time follows the shader clock and nothing else), one timed pass
after another, until the clock is up:

- a reading within ``WARM_WITHIN`` of the fastest this device object has given: up (on a GPU
  already warm, a tune pays one pass of about ``PASS_SECONDS``);
- otherwise, once ``RAMP_SECONDS`` have passed (the ramp begins and ends within them) and no
  reading of the last ``STEADY_SECONDS`` has beaten the earlier ones by more than ``WARM_WITHIN``:
  as far up as it will go now (a device's first wake has no fastest reading to go by, so it pays
  this; a GPU held down by heat or power pays it too);
- and never past ``limit`` seconds (``Config.wake``), whatever the readings.

The tune begins its first compiles before it wakes the GPU (``tuning.py``), so on a host that
compiles in the background the wake overlaps them.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import KernelError
from ..sets.args import Args
from ..sets.kernel import Kernel
from .device import Device, Timing

__all__ = ["PASS_SECONDS", "RAMP_SECONDS", "SPIN_GRID", "SPIN_KERNEL", "STEADY_SECONDS", "WARM_WITHIN", "Wake",
           "clock_is_up", "wake"]

# A reading this close to the fastest one counts as the same clock.
WARM_WITHIN = 0.05
# Seconds of load within which a cold GPU's clock comes all the way up (an H100: 0.4-0.6 s).
RAMP_SECONDS = 0.6
# Seconds of readings with no new fastest one that say the clock has stopped rising.
STEADY_SECONDS = 0.15
# Seconds a timed pass of the spin kernel lasts on a warm GPU, about: long enough for a reading to
# be exact on any clock's grain, short enough that a warm GPU's wake costs little.
PASS_SECONDS = 1e-3

# Dependent multiply-adds an invocation chains: on a GPU of 2 GHz, with a latency of 4 cycles,
# one dispatch lasts about 50 us; at its idle clock several times that.
_CHAIN = 25_000
# Workgroups of 64 a dispatch: enough to load every SM of a large GPU, few enough that the chains
# decide the time rather than the GPU's width.
SPIN_GRID = (256, 1, 1)
_SPIN_WGSL = f"""
@group(0) @binding(0) var<storage, read_write> sink: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    var x = f32(id.x) * 1e-6;
    for (var i = 0u; i < {_CHAIN}u; i++) {{
        x = fma(x, 0.999, 0.001);
    }}
    // x tends to 1 and never reaches -1: the chain is kept, and nothing is written.
    if (x == -1.0) {{
        sink[0] = x;
    }}
}}
"""
SPIN_KERNEL = Kernel("wgtune_wake_spin", _SPIN_WGSL, grid=lambda _args: SPIN_GRID)


@dataclass(frozen=True)
class Wake:
    """What a wake did: its readings (seconds after its start, seconds a pass) and its time; or, in
    ``failed``, why the device could not run the spin kernel (the tune goes on at whatever clock)."""

    readings: tuple[tuple[float, float], ...]
    seconds: float
    fastest_before: float | None
    failed: str = ""

    def describe(self) -> str:
        if self.failed:
            return (f"the GPU's clock not brought up: the spin kernel failed ({self.failed}); "
                    "sampling at whatever clock the GPU is at")
        if not self.readings:
            return f"the GPU's clock not read: no valid reading in {self.seconds:.2f} s"
        first, last = self.readings[0][1], self.readings[-1][1]
        passes = f"{len(self.readings)} pass{'' if len(self.readings) == 1 else 'es'}"
        return (f"the GPU's clock brought up: {passes} in {self.seconds:.2f} s, the first {first / last:.2f}x the last"
                + (f", the last {last / self.fastest_before:.2f}x the device's fastest before"
                   if self.fastest_before else ""))


def clock_is_up(readings: Sequence[tuple[float, float]], fastest_before: float | None) -> bool:
    """Whether ``readings`` ((seconds since the wake began, seconds the pass took), in order) say the
    clock is up, as the module doc says; ``fastest_before``: the device's fastest reading from
    earlier wakes, if any."""
    if not readings:
        return False
    elapsed, last = readings[-1]
    if fastest_before is not None and last <= fastest_before * (1 + WARM_WITHIN):
        return True
    if elapsed < RAMP_SECONDS:
        return False
    earlier = [seconds for at, seconds in readings if at < elapsed - STEADY_SECONDS]
    recent = [seconds for at, seconds in readings if at >= elapsed - STEADY_SECONDS]
    return bool(earlier) and min(recent) >= min(earlier) * (1 - WARM_WITHIN)


@dataclass
class _Spinner:
    compiled: object
    args: Args
    repeats: int
    fastest: float | None = None
    failed: str = ""  # why the device cannot run it: then it is never tried again on this device


# Each device object's spin kernel, its repeats a pass, and its fastest reading so far.
_SPINNERS: weakref.WeakKeyDictionary[Device, _Spinner] = weakref.WeakKeyDictionary()


async def wake(device: Device, limit: float) -> Wake | None:
    """Bring ``device``'s clock up (see the module doc), spending at most ``limit`` seconds; what it
    did, or None where there is nothing to wake (a CPU adapter, no GPU timestamps, a limit of 0).
    A spin kernel the device refuses (a KernelError: its compiler, a launch) is a Wake that says
    so, and the device is not woken again; a device lost raises, as in any launch of the tune."""
    if limit <= 0 or not device.idle_clocks or device.timing != Timing.GPU_TIMESTAMP:
        return None
    started = time.perf_counter()
    spinner = _SPINNERS.get(device)
    if spinner is None:
        try:
            spinner = _SPINNERS[device] = await _spinner(device)
        except KernelError as error:
            spinner = _SPINNERS[device] = _Spinner(None, Args(()), 0, failed=str(error) or type(error).__name__)
    if spinner.failed:
        return Wake((), time.perf_counter() - started, spinner.fastest, failed=spinner.failed)
    fastest_before = spinner.fastest
    readings: list[tuple[float, float]] = []
    while time.perf_counter() - started < limit:
        try:
            seconds = await device.resolve(await device.profile(spinner.compiled, spinner.args, SPIN_GRID,
                                                                spinner.repeats))
        except KernelError as error:
            spinner.failed = str(error) or type(error).__name__
            return Wake(tuple(readings), time.perf_counter() - started, fastest_before, failed=spinner.failed)
        if math.isfinite(seconds) and seconds > 0:
            readings.append((time.perf_counter() - started, seconds))
            spinner.fastest = seconds if spinner.fastest is None else min(spinner.fastest, seconds)
            if clock_is_up(readings, fastest_before):
                break
    return Wake(tuple(readings), time.perf_counter() - started, fastest_before)


async def _spinner(device: Device) -> _Spinner:
    """The spin kernel compiled for ``device``, with as many dispatches a pass as make it last about
    PASS_SECONDS at the clock of now (a cold GPU's passes then last longer, which is the point)."""
    compiled = await device.compile(SPIN_KERNEL)
    args = Args((device.create_buffer(size=4),), ())
    seconds = await device.resolve(await device.profile(compiled, args, SPIN_GRID, 1))
    repeats = max(1, min(64, round(PASS_SECONDS / seconds))) if math.isfinite(seconds) and seconds > 0 else 1
    return _Spinner(compiled, args, repeats)
