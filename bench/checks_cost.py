"""What output checks cost a tune: the same tunes with checks on and off, side by side in one run.

Three workloads, each tuned from scratch (cache off, a fresh tuner: every candidate compiled
again) with ``checks=False`` and ``checks=True`` in turn, ``--rounds`` times, on the adapter in
hand:

- **matmul**: the built-in matmul set on one square shape (4096^3 with ``--full``, else 256^3);
- **demo**: the demo catalogue ``wgtune tune`` runs (every demo case and size);
- **space100**: 100 candidates of the templated matmul space of ``bench/search.py`` (the first 100
  valid points), all measured (no search), on 2048^3 with ``--full``, else 128^3.

For each it prints the best wall time of each mode, their ratio, and the seconds spent inside the
checks themselves (setting them up, each candidate's copies of the inputs, comparing its outputs
on the GPU: ``OutputCheck.__init__``, ``fresh_args``, ``mismatch`` and ``judge_all``, timed around
the calls; a candidate's first launch, which is its check run, is not counted: the tune makes it
either way).

Usage: ``python bench/checks_cost.py [--full] [--rounds N] [--only NAME]``. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from wgtune import Config, Mismatch, TunableSet, Tuner
from wgtune.backends.native import NativeDevice
from wgtune.kernels.demo import demo_suite, make_matmul_args
from wgtune.kernels.matmul import matmul_set
from wgtune.tune.checks import OutputCheck

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search as space_bench  # bench/search.py: the templated matmul space

SPENT = {"checks": 0.0}


def _timed(method):
    async def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        finally:
            SPENT["checks"] += time.perf_counter() - started
    return wrapper


def _timed_sync(method):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            SPENT["checks"] += time.perf_counter() - started
    return wrapper


OutputCheck.mismatch = _timed(OutputCheck.mismatch)
OutputCheck.judge_all = _timed(OutputCheck.judge_all)
OutputCheck.__init__ = _timed_sync(OutputCheck.__init__)  # the outputs' types, the inputs copied, poison made
OutputCheck.fresh_args = _timed_sync(OutputCheck.fresh_args)  # each candidate's copies


def workloads(device: NativeDevice, full: bool) -> dict[str, list[tuple[TunableSet, object]]]:
    square = 4096 if full else 256
    demo = [(case.tunables, case.make_args(device, size)) for case in demo_suite() for size in case.sizes]
    points = space_bench.matmul_space("full" if full else "small").candidates()[:100]
    space_size = 2048 if full else 128
    return {
        "matmul": [(matmul_set(), make_matmul_args(device, (square, square, square)))],
        "demo": demo,
        "space100": [(space_bench.make_set(points, None), make_matmul_args(device, (space_size,) * 3))],
    }


def tune_all(device: NativeDevice, calls: list, checks: bool) -> tuple[float, float, list[str], list[str]]:
    """Wall seconds to tune every call from scratch, seconds inside the checks, the winners, and
    the candidates the checks refused (``set[key] name: reason``)."""
    tuner = Tuner(device, config=Config(cache=False, checks=checks, log_level="disabled"))
    SPENT["checks"] = 0.0
    started = time.perf_counter()
    winners = [tuner.execute(tunables, args).name for tunables, args in calls]
    wall = time.perf_counter() - started
    refused = [f"{tunables.name}[{tunables.key(args)}] {result.name}: {result.reason}"
               for tunables, args in calls for result in tuner.results(tunables, tunables.key(args)) or ()
               if isinstance(result, Mismatch)]
    return wall, SPENT["checks"], winners, refused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the H200 sizes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", action="append", help="matmul, demo or space100 (repeatable)")
    options = parser.parse_args(argv)
    device = NativeDevice.open()
    print(f"adapter: {device.identity}")
    for name, calls in workloads(device, options.full).items():
        if options.only and name not in options.only:
            continue
        best = {False: float("inf"), True: float("inf")}
        inside, winners, refused = 0.0, {}, []
        for _ in range(options.rounds):
            for checks in (False, True):
                wall, spent, won, refused_now = tune_all(device, calls, checks)
                refused += refused_now
                best[checks] = min(best[checks], wall)
                winners[checks] = won
                if checks:
                    inside = spent if inside == 0.0 else min(inside, spent)
        keys = len(calls)
        candidates = sum(len(tunables) for tunables, _args in calls)
        print(f"{name:9} {keys:3} keys {candidates:4} candidates  off {best[False]:8.2f} s  on {best[True]:8.2f} s  "
              f"on/off {best[True] / best[False]:.3f}  inside the checks {inside:6.2f} s "
              f"({inside / best[True]:.1%} of the checked tune)")
        for line in dict.fromkeys(refused):
            print(f"          refused: {line[:300]}")
        changed = [f"{a} -> {b}" for a, b in zip(winners[False], winners[True], strict=True) if a != b]
        if changed:
            print(f"          winners that differ with checks on (noise, or one outvoted): {', '.join(changed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
