"""A tune's own samples, beside the same candidates timed one pass at a time (issue 29).

On an H200 the tuner's median for the fma on 1 GiB arrays was 2.2x what GPU timestamps read around
a pass of the same launches taken on an idle queue (``bench/results/h200-short-kernels-fma-session32.txt``:
1,799 against 818 us), which put the winner at 43% of torch's bandwidth in ``bench/kernels.py``.
It came from the GPU's idle clock (session 33, ``bench/results/h100-clocks-session33.txt``: the
tune's first candidates ran at 345 MHz where the clock reaches 1980), which the tune now brings
up first (``wgtune.gpu.wake``; ``WGTUNE_WAKE=0`` leaves it down, for comparison).
This asks where that comes from: each key is tuned by a fresh tuner (no cache) under each setting
named (``WGTUNE_*`` variables, e.g. ``WGTUNE_CHECKS=0``), and each candidate's samples are printed
in the order taken (us a launch), then its time by timestamps around one pass of one launch after a
sync (``idle``: median of ``--rounds``), the ratio of the tune's median to it, and the median of
``--burst`` such passes submitted together, then resolved (``burst``: as ``Arm.sample`` took a
count of samples before c7b2b5c, the fixed policy's and ``bench/kernels.py``'s way then). ``idle``
and ``burst`` time one launch a pass, the tune's samples its calibrated repeats: for a kernel
shorter than the sample floor the ratio also holds a pass's own cost. Readings whose end is not
after their begin are left out, as the core leaves them out.

Usage::

    python bench/tune_samples.py --key fma:268435456 --setting default --setting WGTUNE_CHECKS=0
    python bench/tune_samples.py --key fma:30000 --setting default   # lavapipe

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from regret import candidates_of, fresh_tune, seconds_of  # bench/regret.py
from short_kernels import parse_key, workload_of  # bench/short_kernels.py

from wgtune import Measured, run_inline
from wgtune.backends.native import NativeDevice


def setting_env(text: str) -> dict[str, str]:
    """``default`` (nothing set) or ``NAME=VALUE[,NAME=VALUE...]``."""
    if text == "default":
        return {}
    parts = text.split(",")
    if not all("=" in part and part.startswith("WGTUNE_") for part in parts):
        raise SystemExit(f"--setting {text!r}: WGTUNE_NAME=VALUE pairs, or default")
    return dict(part.split("=", 1) for part in parts)


def tune_under(device: NativeDevice, workload, args, pipelines: dict, env: dict[str, str]):
    """A fresh tune's outcome with ``env`` set for it."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        return fresh_tune(device, workload, args, pipelines, "adaptive")[1]
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def idle_pass(device: NativeDevice, pipeline, args, grid, rounds: int) -> float:
    """Median seconds of ``rounds`` passes of one launch, each after a sync."""
    times = []
    for _ in range(rounds):
        run_inline(device.sync())
        times.append(seconds_of(device, pipeline, args, grid, 1))
    return _median_of_valid(times)


def burst_passes(device: NativeDevice, pipeline, args, grid, count: int) -> float:
    """Median seconds a launch over ``count`` passes of one launch submitted back to back, then
    resolved (after a sync)."""
    run_inline(device.sync())
    profiles = [run_inline(device.profile(pipeline, args, grid, 1)) for _ in range(count)]
    return _median_of_valid([run_inline(device.resolve(profile)) for profile in profiles])


def _median_of_valid(times: list[float]) -> float:
    """The median of the finite, positive readings (NaN where there is none)."""
    valid = [seconds for seconds in times if math.isfinite(seconds) and seconds > 0]
    return statistics.median(valid) if valid else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--key", action="append", required=True, help="FAMILY:SIZES, as short_kernels.py takes")
    parser.add_argument("--setting", action="append", help="default, or WGTUNE_NAME=VALUE[,...] (repeatable)")
    parser.add_argument("--rounds", type=int, default=5, help="idle passes a candidate")
    parser.add_argument("--shown", type=int, default=12, help="samples printed a candidate")
    parser.add_argument("--burst", type=int, default=10, help="passes submitted together for the burst figure")
    options = parser.parse_args(argv)
    device = NativeDevice.open()
    print(f"adapter: {device.adapter_info.get('device', '?')}, timing {device.timing}", flush=True)
    for text in options.key:
        family, shape = parse_key(text)
        workload = workload_of(family, shape)
        args, _ = workload.make(device)
        pipelines = candidates_of(device, workload, args)
        for setting in options.setting or ["default"]:
            outcome = tune_under(device, workload, args, pipelines, setting_env(setting))
            if outcome is None:
                print(f"{text} [{setting}]: no tune (a pin?)")
                continue
            print(f"{text} [{setting}]: winner {outcome.winner_name}")
            for index, result in enumerate(outcome.results):
                if not isinstance(result, Measured) or result.stats is None or index not in pipelines:
                    continue
                samples = result.stats.samples
                pipeline, grid = pipelines[index]
                idle = idle_pass(device, pipeline, args, grid, options.rounds)
                burst = burst_passes(device, pipeline, args, grid, options.burst)
                shown = " ".join(f"{s * 1e6:.1f}" for s in samples[: options.shown])
                more = f" ... ({len(samples)})" if len(samples) > options.shown else ""
                print(f"  {result.name:<34} median {result.stats.median * 1e6:10.2f} idle {idle * 1e6:10.2f} "
                      f"x{result.stats.median / idle:5.2f} burst {burst * 1e6:10.2f}  samples: {shown}{more}",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
