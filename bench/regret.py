"""How well tuning policies pick, and at what cost: regret against an oracle, on the adapter in hand.

For each key of the kernel families, every candidate that fits the device and the key is compiled,
then:

- the **oracle** samples all of them interleaved (round robin, so drift hits all alike), each
  sample long against the clock (dispatches repeated inside one timed pass), for many rounds;
  a candidate's true time is its median; the best is the oracle's winner;
- each **policy** picks live, timing the candidates its own way, and its tuning time is the wall
  time it took:
  - ``triton``: per candidate, 25 ms of warmup runs then 100 ms of timed runs (one dispatch each),
    median (Triton's ``do_bench``);
  - ``cubecl``: 3 warmups and 10 single-dispatch samples, score ``0.8 * min + 0.2 * median``;
  - ``kernel-tuner``: 7 single-dispatch runs, mean;
  - ``wgtune``: wgtune's tuner as it ships (its plan's first batch, calibrated samples), on a fresh
    tuner with no cache.

A policy's regret on a key is its pick's true time over the oracle winner's, minus one.
Printed per policy: tuning time (and its ratio to the Triton-style policy's), how often it picked
the oracle's winner, the regret's median and maximum, and the share of keys with regret <= 2%.

Usage: ``python bench/regret.py`` (small sizes) or ``--full`` (GPU sizes). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels import Workload, workloads  # bench/kernels.py: the same keys and inputs
from wgtune import Config, Tuner, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.device import check_limits
from wgtune.plan import Plan

ORACLE_ROUNDS = 15
ORACLE_SAMPLE = 2e-3  # seconds a oracle sample lasts at least (dispatches repeated inside one pass)


def seconds_of(device: NativeDevice, pipeline: Any, args: Any, grid: tuple, repeats: int) -> float:
    return run_inline(device.resolve(run_inline(device.profile(pipeline, args, grid, repeats)))) / repeats


def wall_of(device: NativeDevice, pipeline: Any, args: Any, grid: tuple) -> float:
    """One call as a peer tuner times it: one dispatch."""
    return seconds_of(device, pipeline, args, grid, 1)


# -- the oracle ------------------------------------------------------------------------------------


def oracle(device: NativeDevice, pipelines: dict[int, tuple], args: Any) -> dict[int, float]:
    repeats = {}
    for index, (pipeline, grid) in pipelines.items():
        once = max(seconds_of(device, pipeline, args, grid, 1), 1e-7)
        repeats[index] = max(1, min(4096, int(ORACLE_SAMPLE / once) + 1))
    samples: dict[int, list[float]] = {index: [] for index in pipelines}
    for _ in range(ORACLE_ROUNDS):
        for index, (pipeline, grid) in pipelines.items():
            samples[index].append(seconds_of(device, pipeline, args, grid, repeats[index]))
    return {index: statistics.median(values) for index, values in samples.items()}


# -- the peer policies -----------------------------------------------------------------------------


def triton(device, pipelines, args) -> int:
    scores = {}
    for index, (pipeline, grid) in pipelines.items():
        estimate = statistics.median(wall_of(device, pipeline, args, grid) for _ in range(5))
        estimate = max(estimate, 1e-7)
        for _ in range(max(1, int(25e-3 / estimate))):
            device.dispatch(pipeline, args, grid)
        run_inline(device.sync())
        scores[index] = statistics.median(
            wall_of(device, pipeline, args, grid) for _ in range(max(1, int(100e-3 / estimate)))
        )
    return min(scores, key=scores.get)


def cubecl(device, pipelines, args) -> int:
    scores = {}
    for index, (pipeline, grid) in pipelines.items():
        for _ in range(3):
            device.dispatch(pipeline, args, grid)
        run_inline(device.sync())
        times = [wall_of(device, pipeline, args, grid) for _ in range(10)]
        scores[index] = 0.8 * min(times) + 0.2 * statistics.median(times)
    return min(scores, key=scores.get)


def kernel_tuner(device, pipelines, args) -> int:
    scores = {index: statistics.mean(wall_of(device, pipeline, args, grid) for _ in range(7))
              for index, (pipeline, grid) in pipelines.items()}
    return min(scores, key=scores.get)


def wgtune_policy(device, workload: Workload, args) -> int:
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled"))
    kernel = tuner.execute(workload.tunables, args)
    return workload.tunables.index_of[kernel.name]


POLICIES: dict[str, Callable] = {"triton": triton, "cubecl": cubecl, "kernel-tuner": kernel_tuner}


# -- running ---------------------------------------------------------------------------------------


def candidates_of(device: NativeDevice, workload: Workload, args: Any) -> dict[int, tuple]:
    """Every candidate that fits the device and the key, compiled, with its grid."""
    tunables = workload.tunables
    skipped = Plan(tunables.candidates, tunables.key(args)).skipped
    found = {}
    for index, kernel in enumerate(tunables.candidates):
        if index in skipped or check_limits(kernel, device.limits, device.features):
            continue
        try:
            pipeline = run_inline(device.compile(kernel))
            grid = tuple(kernel.grid(args))
            seconds_of(device, pipeline, args, grid, 1)
        except Exception:  # a candidate that cannot run here is no one's pick
            continue
        found[index] = (pipeline, grid)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the GPU sizes of bench/kernels.py --full")
    parser.add_argument("--only", action="append", help="only this family (matmul, fma, row_sum, row_max)")
    options = parser.parse_args(argv)
    device = NativeDevice.open()
    print(f"adapter: {device.adapter_info.get('device', '?')}, timing {device.timing}")
    rows: dict[str, list[tuple[float, float, bool]]] = {name: [] for name in (*POLICIES, "wgtune")}
    for workload in workloads(options.full):
        if options.only and workload.family not in options.only:
            continue
        args, _ = workload.make(device)
        pipelines = candidates_of(device, workload, args)
        truth = oracle(device, pipelines, args)
        best = min(truth, key=truth.get)
        line = [f"{workload.family} {workload.label}: {len(pipelines)} candidates, oracle "
                f"{workload.tunables.candidates[best].name} {truth[best] * 1e6:.1f} us"]
        for name in (*POLICIES, "wgtune"):
            started = time.perf_counter()
            if name == "wgtune":
                pick = wgtune_policy(device, workload, args)
            else:
                pick = POLICIES[name](device, pipelines, args)
            spent = time.perf_counter() - started
            regret = truth[pick] / truth[best] - 1 if pick in truth else float("inf")
            rows[name].append((spent, regret, pick == best))
            line.append(f"{name} {regret * 100:+.1f}% in {spent:.2f}s")
        print("; ".join(line), flush=True)

    triton_time = sum(spent for spent, _, _ in rows["triton"])
    print(f"\n{'policy':14} {'keys':>5} {'tuning s':>9} {'vs triton':>10} {'oracle pick':>12} "
          f"{'regret med':>11} {'regret max':>11} {'<= 2%':>7}")
    for name, results in rows.items():
        if not results:
            continue
        spent = sum(s for s, _, _ in results)
        regrets = [r for _, r, _ in results]
        hits = sum(1 for _, _, hit in results if hit)
        within = sum(1 for r in regrets if r <= 0.02)
        print(f"{name:14} {len(results):>5} {spent:>9.2f} {spent / triton_time:>9.0%} "
              f"{hits:>5}/{len(results):<6} {statistics.median(regrets) * 100:>10.1f}% "
              f"{max(regrets) * 100:>10.1f}% {within / len(results):>7.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
