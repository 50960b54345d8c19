"""What the wake before a tune sees (issue 29, ``wgtune.gpu.wake``): its readings on a fresh device.

Opens the default adapter, lets it idle ``--idle`` seconds (a GPU lowers its clock when nothing
runs), then wakes it as a tune would, ``--wakes`` times in a row, and prints each wake's readings
(ms after the wake began, us a pass) and what it decided. On a GPU whose clock idles the first
wake's readings fall as the clock comes up (an H100: 345 to 1980 MHz in 0.4-0.6 s of load); the
next wakes take one pass. ``--force`` wakes a CPU adapter too (lavapipe: nothing to see but the
readings' noise). ``--load S`` puts a first wake's load on the GPU ahead (``wake.load``, as a tune does
before its setup), waits S seconds (the setup), and prints the load's passes and what they counted
for in the wake (its credit: seconds of ramp, or none, and why).

Usage: ``python bench/wake_probe.py --idle 6`` (a GPU), ``python bench/wake_probe.py --force --idle 0``,
``python bench/wake_probe.py --idle 6 --load 0.3`` (the first tune's way).
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import time

from wgtune import run_inline
from wgtune.backends.native import NativeDevice
from wgtune.config import DEFAULT_WAKE
from wgtune.gpu import wake as wake_module
from wgtune.gpu.wake import IDLE_GAP_SECONDS, WARM_WITHIN, load, wake


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=float, default=6.0, help="seconds the device idles before the first wake")
    parser.add_argument("--wakes", type=int, default=3, help="wakes in a row")
    parser.add_argument("--limit", type=float, default=DEFAULT_WAKE, help="seconds a wake may take")
    parser.add_argument("--force", action="store_true", help="wake a CPU adapter too")
    parser.add_argument("--load", type=float, metavar="S",
                        help="load the GPU ahead of the first wake, then wait S seconds (a tune's setup)")
    options = parser.parse_args(argv)
    device = NativeDevice.open()
    print(f"adapter: {device.identity.device} ({device.identity.backend}), timing {device.timing}, "
          f"idle clocks {device.idle_clocks}")
    if options.force:
        device.idle_clocks = True
    time.sleep(options.idle)
    loaded = None
    if options.load is not None:
        loaded = _loaded(device, options.limit, options.load)
    for number in range(options.wakes):
        woke = run_inline(wake(device, options.limit, loaded if number == 0 else None))
        if woke is None:
            print("nothing to wake (a CPU adapter, no timestamps or a limit of 0: --force wakes a CPU adapter)")
            return 0
        print(f"wake {number + 1}: {woke.describe()}")
        shown = woke.readings if len(woke.readings) <= 24 else woke.readings[::max(1, len(woke.readings) // 24)]
        print("  " + " ".join(f"{at * 1e3:.0f}ms:{seconds * 1e6:.1f}us" for at, seconds in shown) + "  (us a dispatch)")
        if number == 0 and loaded is not None and woke.readings:
            first = woke.readings[0][1]
            ratio = first / _CREDITS[0].last if _CREDITS and _CREDITS[0].last else None
            fell = ratio is not None and ratio > 1 + WARM_WITHIN
            print(f"  the wake's first reading {first * 1e6:.1f} us a dispatch"
                  + (f", {ratio:.3f}x the load's last: " if ratio is not None else "")
                  + ("the clock fell between them, so the load counted for nothing" if fell else
                     "the load's seconds counted as ramp" if ratio is not None else ""))
    return 0


_CREDITS: list = []


def _loaded(device: NativeDevice, limit: float, setup: float) -> object:
    """``wake.load`` on ``device``, then ``setup`` seconds of waiting, the load and its credit printed
    (the credit is recorded as the wake works it out)."""
    started = time.perf_counter()
    loaded = run_inline(load(device, limit))
    if loaded is None:
        print("load: nothing loaded (a later wake, no idle clock, or no reading to size it by)")
        return None
    dispatches = sum(count for _, count in loaded.passes)
    sized = wake_module._SPINNERS[device].dispatch_seconds
    print(f"load: {len(loaded.passes)} passes, {dispatches} dispatches submitted in "
          f"{time.perf_counter() - started:.3f} s (sized at {sized * 1e6:.1f} us a dispatch, the clock then)")
    time.sleep(setup)
    credit_of = wake_module._credit

    async def recorded(device: NativeDevice, loaded: object) -> object:
        waited = time.perf_counter()
        credit = await credit_of(device, loaded)
        _CREDITS.append(credit)
        since = waited - loaded.since
        print(f"credit: {credit.seconds:.3f} s of ramp (the wake began {since:.3f} s after the load; its passes "
              f"were done {time.perf_counter() - waited:.3f} s later; none where the GPU idled {IDLE_GAP_SECONDS} s "
              f"or more), the load's last pass {credit.last * 1e6 if credit.last else float('nan'):.1f} us a dispatch")
        return credit

    wake_module._credit = recorded
    return loaded


if __name__ == "__main__":
    raise SystemExit(main())
