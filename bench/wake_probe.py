"""What the wake before a tune sees (issue 29, ``wgtune.gpu.wake``): its readings on a fresh device.

Opens the default adapter, lets it idle ``--idle`` seconds (a GPU lowers its clock when nothing
runs), then wakes it as a tune would, ``--wakes`` times in a row, and prints each wake's readings
(ms after the wake began, us a pass) and what it decided. On a GPU whose clock idles the first
wake's readings fall as the clock comes up (an H100: 345 to 1980 MHz in 0.4-0.6 s of load); the
next wakes take one pass. ``--force`` wakes a CPU adapter too (lavapipe: nothing to see but the
readings' noise).

Usage: ``python bench/wake_probe.py --idle 6`` (a GPU), ``python bench/wake_probe.py --force --idle 0``.
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import time

from wgtune import run_inline
from wgtune.backends.native import NativeDevice
from wgtune.config import DEFAULT_WAKE
from wgtune.gpu.wake import wake


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=float, default=6.0, help="seconds the device idles before the first wake")
    parser.add_argument("--wakes", type=int, default=3, help="wakes in a row")
    parser.add_argument("--limit", type=float, default=DEFAULT_WAKE, help="seconds a wake may take")
    parser.add_argument("--force", action="store_true", help="wake a CPU adapter too")
    options = parser.parse_args(argv)
    device = NativeDevice.open()
    print(f"adapter: {device.identity.device} ({device.identity.backend}), timing {device.timing}, "
          f"idle clocks {device.idle_clocks}")
    if options.force:
        device.idle_clocks = True
    time.sleep(options.idle)
    for number in range(options.wakes):
        woke = run_inline(wake(device, options.limit))
        if woke is None:
            print("nothing to wake (a CPU adapter, no timestamps or a limit of 0: --force wakes a CPU adapter)")
            return 0
        print(f"wake {number + 1}: {woke.describe()}")
        shown = woke.readings if len(woke.readings) <= 24 else woke.readings[::max(1, len(woke.readings) // 24)]
        print("  " + " ".join(f"{at * 1e3:.0f}ms:{seconds * 1e6:.1f}us" for at, seconds in shown) + "  (us a dispatch)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
