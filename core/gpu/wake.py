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

So before a tune samples, a device whose clock idles (:attr:`Device.idle_clocks`: natively, an
adapter that is not a CPU, whose clock would be the host's; in a browser, one that is not a fallback
adapter) and that has GPU timestamps runs a kernel of fixed work (chains of dependent multiply-adds:
its time follows the shader clock and nothing else), in timed passes of about ``PASS_SECONDS`` (or
``PASS_GRAINS`` of a coarse clock's grain, ``clock.py``) with one always queued behind the one being
read, so that the GPU stays loaded, until the clock is up:

- a reading within ``WARM_WITHIN`` of the device's figure (the median of the steady readings that
  ended its earlier wakes, the lowest so far): up. A GPU already warm pays one pass and the one
  queued behind it, a few milliseconds;
- readings steady for ``STEADY_SECONDS`` (none beats the earlier ones by more than
  ``WARM_WITHIN``) within ``WARM_ENOUGH`` of the device's figure: up as far as it goes now (a
  clock held a little lower by heat or power never gets within ``WARM_WITHIN`` again);
- readings steady once ``RAMP_SECONDS`` of load have passed (the ramp begins and ends within
  them), counted from the first timed pass (or the load's, below), not from the spin kernel's
  compile: a device's first wake has no figure to go by, so it pays this, and so does a GPU far
  below its figure;
- and never past ``limit`` seconds (``Config.wake``) of its own, the compile counted (a first wake's
  compile, in :func:`load`, has a limit of its own): the tune goes on at whatever clock the GPU
  reached, and the wake says it was cut short.

Readings and the figure are seconds a dispatch, so that passes sized again compare. The figure is
kept per device object: a tuning process pays a first wake of its own. The tune
begins its first compiles before it wakes the GPU (``tuning.py``), so on a host that compiles in
the background the wake overlaps them. And since a device's first wake pays RAMP_SECONDS of load
whatever the clock, the tune has it begin (:func:`load`: about LOAD_SECONDS of the spin kernel, in
passes timed but not waited for) before its host setup, and wakes after it: the seconds those
passes kept the GPU busy count as ramp, unless the GPU then idled for IDLE_GAP_SECONDS or more
before the wake's own passes, or the wake's first pass reads slower than the load's last (the
clock fell between them). On an H200 the setup (reflecting
the WGSL, copying the checks' buffers) took 0.3 s of the first tune, and the wake 0.65 s after it
(``bench/results/h200-tune-trace-before-session36.txt``). The load, like any wake, comes before
the candidates: on a page, GPU work the page submits meanwhile waits behind it.
"""

from __future__ import annotations

import math
import statistics
import time
import weakref
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import KernelError, WgtuneError
from ..sets.args import Args
from ..sets.kernel import Kernel
from .clock import clock_grain
from .device import Device, Timing

__all__ = ["IDLE_GAP_SECONDS", "LOAD_SECONDS", "PASS_GRAINS", "PASS_SECONDS", "RAMP_SECONDS", "SPIN_GRID",
           "SPIN_KERNEL", "STEADY_SECONDS", "WARM_ENOUGH", "WARM_WITHIN", "Load", "Wake", "clock_is_up", "load", "wake"]

# A reading this close to the fastest one counts as the same clock.
WARM_WITHIN = 0.05
# Seconds of load within which a cold GPU's clock comes all the way up (an H100: 0.4-0.6 s).
RAMP_SECONDS = 0.6
# Seconds of readings with no new fastest one that say the clock has stopped rising.
STEADY_SECONDS = 0.15
# Steady readings this close to the device's figure count as up: a clock held a little lower than
# it once was (heat, power) never gets within WARM_WITHIN again, and a cold H100 read 1.7x.
WARM_ENOUGH = 1.3
# Seconds a timed pass of the spin kernel lasts on a warm GPU, about, where the clock is fine:
# short enough that a warm GPU's wake costs little.
PASS_SECONDS = 1e-3
# Grains of the device's clock (``clock.py``) a pass lasts at least, once the clock is up (passes are
# sized on a device's first pass and again at the end of each wake): a reading is then off by 2% at
# most, within WARM_WITHIN. Chrome quantizes timestamps to about 100 us: there a pass lasts 5 ms.
PASS_GRAINS = 50
# Dispatches of the pass that sizes the others, and the most a pass has.
CALIBRATION_DISPATCHES = 8
MAX_DISPATCHES = 512
# Seconds of load a device's first wake submits ahead (``load``), at the clock it finds: the tune's
# host setup runs meanwhile. Under RAMP_SECONDS - STEADY_SECONDS, so that the wake, which pays
# RAMP_SECONDS of load anyway, is never longer for it.
LOAD_SECONDS = 0.4
# Seconds of idle GPU between the load and the wake's first pass past which the load counts for
# nothing: an H100 held its clock for a second or more once work stopped (h100-clocks-session33.txt).
IDLE_GAP_SECONDS = 0.25

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
    """What a wake did: its readings (seconds of load since its first timed pass was submitted, the
    load's before it included, and seconds a dispatch of the spin kernel in that pass), its time,
    and the device's fastest figure before it;
    ``cut_short`` where its ``limit`` ended it first; ``failed``: why the device could not run the
    spin kernel (the tune then goes on at whatever clock the GPU is at)."""

    readings: tuple[tuple[float, float], ...]
    seconds: float
    fastest_before: float | None
    cut_short: bool = False
    failed: str = ""

    def describe(self) -> str:
        if self.failed:
            return (f"the GPU's clock not brought up: the spin kernel failed ({self.failed}); "
                    "sampling at whatever clock the GPU is at")
        if not self.readings:
            return f"the GPU's clock not read: no valid reading in {self.seconds:.2f} s"
        first, last = self.readings[0][1], self.readings[-1][1]
        passes = f"{len(self.readings)} pass{'' if len(self.readings) == 1 else 'es'} in {self.seconds:.2f} s"
        what = "still rising when the wake's time ran out" if self.cut_short else "brought up"
        return (f"the GPU's clock {what}: {passes}, the first {first / last:.2f}x the last"
                + (f", the last {last / self.fastest_before:.2f}x the device's fastest before"
                   if self.fastest_before else ""))


def clock_is_up(readings: Sequence[tuple[float, float]], fastest_before: float | None) -> bool:
    """Whether ``readings`` ((seconds under load, seconds the pass took), in order) say the clock is
    up, as the module doc says; ``fastest_before``: the device's figure from earlier wakes, if any."""
    if not readings:
        return False
    elapsed, last = readings[-1]
    if fastest_before is not None and last <= fastest_before * (1 + WARM_WITHIN):
        return True
    earlier = [seconds for at, seconds in readings if at < elapsed - STEADY_SECONDS]
    recent = [seconds for at, seconds in readings if at >= elapsed - STEADY_SECONDS]
    steady = bool(earlier) and min(recent) >= min(earlier) * (1 - WARM_WITHIN)
    if fastest_before is not None and steady and last <= fastest_before * WARM_ENOUGH:
        return True  # a clock held a little lower (heat, power) than it once was: as up as it goes
    return steady and elapsed >= RAMP_SECONDS


@dataclass
class _Spinner:
    """The spin kernel on one device: compiled, its dispatches a pass and how long a pass should
    last, the device's figure (seconds a dispatch: the median of the steady readings that ended a
    wake, the lowest so far); or why it cannot run."""

    compiled: object = None
    args: Args | None = None
    repeats: int = 0
    pass_seconds: float = PASS_SECONDS
    dispatch_seconds: float = 0.0  # a dispatch as _prepare read it (0: no reading); it sizes a first wake's load
    fastest: float | None = None
    provisional: bool = False  # the first figure, read on passes sized again since: the next wake's replaces it
    failed: str = ""  # then it is never tried again on this device


# Each device object's spin kernel and figure.
_SPINNERS: weakref.WeakKeyDictionary[Device, _Spinner] = weakref.WeakKeyDictionary()


def _wakes(device: Device, limit: float) -> bool:
    return limit > 0 and device.idle_clocks and device.timing == Timing.GPU_TIMESTAMP


@dataclass(frozen=True)
class Load:
    """The load :func:`load` put on the GPU ahead of a wake: when it was submitted, and its passes
    as (handle, dispatches) (timed, so that the wake knows how long they kept the GPU busy and at
    what clock they ended)."""

    since: float
    passes: tuple[tuple[Any, int], ...]


@dataclass(frozen=True)
class _Credit:
    """What a load counts for in the wake after it: seconds of ramp, and a dispatch's seconds in
    its last pass (the clock it had reached)."""

    seconds: float = 0.0
    last: float | None = None


async def load(device: Device, limit: float) -> Load | None:
    """Where ``device``'s coming wake is its first (no figure yet: it pays RAMP_SECONDS of load
    whatever the clock), prepare the spin kernel and submit about LOAD_SECONDS of it at the clock
    of now, in passes timed but not waited for: the tune then does its host work (the WGSL's
    reflection, the checks' copies) while the GPU ramps, and :func:`wake` given the Load counts
    the seconds it kept the GPU busy as ramp. None where there is nothing to load (a later wake,
    one that would not run, a spin kernel that failed or a clock that gave no reading to size the
    load by: :func:`wake` then goes on as without it)."""
    if not _wakes(device, limit):
        return None
    spinner = _SPINNERS.setdefault(device, _Spinner())
    if spinner.fastest is not None or spinner.failed:
        return None
    if spinner.args is None:
        grain = await clock_grain(device)
        if not await _guarded(spinner, _prepare(device, spinner, grain, time.perf_counter() + limit)):
            return None
    if spinner.dispatch_seconds <= 0:  # no reading sized it: a guess multiplied would be no bound
        return None
    dispatches = round(min(LOAD_SECONDS, limit / 2) / spinner.dispatch_seconds)
    # The last pass is as long as the wake's own (spinner.repeats dispatches), so that the wake's first
    # reading is set beside one of its kind: a reading carries its pass's fixed cost (the host's recording,
    # the pass's start) spread over its dispatches, so a pass of one dispatch reads some percent slower
    # a dispatch than one of hundreds at the same clock, which said the clock had fallen when it had not.
    counts = [min(left, MAX_DISPATCHES) for left in range(max(0, dispatches - spinner.repeats), 0, -MAX_DISPATCHES)]
    counts.append(spinner.repeats)
    since = time.perf_counter()
    passes: list = []

    async def submit() -> None:
        for count in counts:
            passes.append((await device.profile(spinner.compiled, spinner.args, SPIN_GRID, count), count))

    if not await _guarded(spinner, submit()):
        return None
    return Load(since, tuple(passes))


async def _guarded(spinner: _Spinner, work: Awaitable[None]) -> bool:
    """Await ``work`` of the spin kernel; False, the spinner marked failed, where it failed (a
    device lost, or another of wgtune's errors about the device, raises)."""
    try:
        await work
    except Exception as error:
        if isinstance(error, WgtuneError) and not isinstance(error, KernelError):
            raise
        said = str(error) or type(error).__name__
        spinner.failed = said if isinstance(error, KernelError) else f"{type(error).__name__}: {said}"
        return False
    return True


async def wake(device: Device, limit: float, loaded: Load | None = None) -> Wake | None:
    """Bring ``device``'s clock up (see the module doc), spending at most ``limit`` seconds; what it
    did, or None where there is nothing to wake (no idle clock, no GPU timestamps, a limit of 0).
    ``loaded``: the load :func:`load` put on the GPU ahead of it, whose busy seconds count as ramp
    (the limit is still the wake's own seconds, from this call). A failure of the spin kernel (its
    compile, a launch) is a Wake that says so, and the device is not woken again; a device lost, or
    another of wgtune's errors about the device, raises, as it would in any launch of the tune."""
    if not _wakes(device, limit):
        return None
    spinner = _SPINNERS.setdefault(device, _Spinner())
    # The clock's grain sizes the passes: measured once a device, as the tune would next (clock.py),
    # and outside the wake's time (through a tuning process, 24 round trips).
    grain = await clock_grain(device) if spinner.args is None and not spinner.failed else 0.0
    started = time.perf_counter()
    fastest_before = spinner.fastest
    readings: list[tuple[float, float]] = []
    cut_short = False

    async def run() -> None:
        nonlocal readings, cut_short
        if spinner.args is None:
            await _prepare(device, spinner, grain, started + limit)
        credit = await _credit(device, loaded) if loaded is not None else _Credit()
        readings, cut_short = await _spin(device, spinner, fastest_before, started + limit, credit)

    if not spinner.failed:
        await _guarded(spinner, run())
    if readings and not cut_short:
        ending = [seconds for at, seconds in readings if at >= readings[-1][0] - STEADY_SECONDS]
        figure = statistics.median(ending)
        # A figure read on passes sized on a cold clock (a coarse clock's few grains then) is replaced by
        # the next wake's, on passes sized at the clock brought up; after that the lowest stands.
        first = spinner.fastest is None
        spinner.fastest = figure if first or spinner.provisional else min(spinner.fastest, figure)
        # Sized again at the clock it is up to: passes sized on a cold clock are short on a warm one
        # (an H100's first wake: 4,057 then 2,360 us a pass), maybe too few of a coarse clock's grains.
        repeats = _dispatches(spinner.pass_seconds, figure)
        spinner.provisional, spinner.repeats = first and repeats != spinner.repeats, repeats
    return Wake(tuple(readings), time.perf_counter() - started, fastest_before, cut_short, spinner.failed)


async def _credit(device: Device, loaded: Load) -> _Credit:
    """What ``loaded`` counts for, its passes waited for (the wake's would queue behind them): the
    seconds they kept the GPU busy; none where the GPU then idled for IDLE_GAP_SECONDS or more
    before now (the host's setup ran longer than the load), or a pass gave no reading."""
    busy, last, valid = 0.0, None, True
    for handle, dispatches in loaded.passes:  # every one resolved, whatever the others read
        seconds = await device.resolve(handle)
        valid = valid and math.isfinite(seconds) and seconds > 0
        if valid:
            busy, last = busy + seconds, seconds / dispatches
    idle = time.perf_counter() - loaded.since - busy  # the passes ran back to back from about then
    return _Credit(busy, last) if valid and idle < IDLE_GAP_SECONDS else _Credit()


async def _spin(device: Device, spinner: _Spinner, fastest_before: float | None,
                deadline: float, credit: _Credit) -> tuple[list[tuple[float, float]], bool]:
    """Timed passes of the spin kernel, one always queued behind the one being read so that the GPU
    stays loaded, until :func:`clock_is_up` or ``deadline``; the readings (their times counted
    from the first pass's submission, plus the ``credit`` of a load just before: the ramp is the
    load's) and whether the deadline ended it. The credit stands only if the first reading is as
    fast as the load's last pass, within WARM_WITHIN: slower, the clock fell between them, and the
    ramp is counted from the wake's own first pass."""
    readings: list[tuple[float, float]] = []
    loaded = time.perf_counter() - credit.seconds
    pending = await device.profile(spinner.compiled, spinner.args, SPIN_GRID, spinner.repeats)
    up = False
    while not up and time.perf_counter() < deadline:
        ahead = await device.profile(spinner.compiled, spinner.args, SPIN_GRID, spinner.repeats)
        seconds = await device.resolve(pending)
        pending = ahead
        if math.isfinite(seconds) and seconds > 0:
            each = seconds / spinner.repeats
            if not readings and credit.last is not None and each > credit.last * (1 + WARM_WITHIN):
                loaded += credit.seconds
            readings.append((time.perf_counter() - loaded, each))
            up = clock_is_up(readings, fastest_before)
    await device.resolve(pending)  # the pass queued ahead: nothing of the wake is left on the GPU
    return readings, not up


async def _prepare(device: Device, spinner: _Spinner, grain: float, deadline: float) -> None:
    """Compile the spin kernel for ``device`` and size its passes: as many dispatches as make one
    last about the longer of PASS_SECONDS and PASS_GRAINS of the clock's ``grain`` at the clock of now
    (a cold GPU's passes then last longer, which is the point; a wake that brings the clock up sizes
    them again), read off a pass of CALIBRATION_DISPATCHES, or of more where that pass lasted under
    PASS_GRAINS / 5 grains (a coarse clock can read a short pass as 0) and the wake has time left."""
    spinner.compiled = await device.compile(SPIN_KERNEL)
    args = Args((device.create_buffer(size=4),), ())
    spinner.pass_seconds = max(PASS_SECONDS, PASS_GRAINS * grain)
    dispatches = CALIBRATION_DISPATCHES
    while True:
        seconds = await device.resolve(await device.profile(spinner.compiled, args, SPIN_GRID, dispatches))
        if (not math.isfinite(seconds) or seconds >= PASS_GRAINS / 5 * grain or dispatches * 4 > MAX_DISPATCHES
                or time.perf_counter() >= deadline):
            break
        dispatches *= 4
    spinner.dispatch_seconds = seconds / dispatches if math.isfinite(seconds) and seconds > 0 else 0.0
    spinner.repeats = _dispatches(spinner.pass_seconds, spinner.dispatch_seconds or spinner.pass_seconds / dispatches)
    spinner.args = args


def _dispatches(pass_seconds: float, each: float) -> int:
    """Dispatches of ``each`` seconds that make a pass of about ``pass_seconds``, within the bounds."""
    return max(1, min(MAX_DISPATCHES, round(pass_seconds / each)))
