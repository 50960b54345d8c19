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
  - ``wgtune``: wgtune's tuner as it ships (the adaptive policy), on a fresh tuner with no cache;
  - ``wgtune-fixed``: the same tuner with ``policy="fixed"`` (CubeCL's: the plan's first batch,
    10 calibrated samples each, ``0.8 * min + 0.2 * median``).

Every policy gets the same compiled pipelines: the tuners' compiles are answered from them, so
tuning time is sampling time for all (compiling is the same cost whichever policy samples).

A policy's regret on a key is its pick's true time over the oracle winner's, minus one. The row
``oracle-again`` is a second oracle, as long as the first, run after the policies and scored
against the first: how often two long measurements agree is the noise floor of the table on the
machine (on a 2-core CPU adapter, candidates within ~2% of each other trade places from run to
run). A second table scores every pick against both oracles pooled.
Printed per policy: tuning time (and its ratio to the Triton-style policy's), how often it picked
the oracle's winner, the regret's median and maximum, and the share of keys with regret <= 2%.

Usage: ``python bench/regret.py`` (small sizes, for lavapipe) or ``--full`` (GPU sizes). ``--keys``
picks the key list: ``many`` (default: 15 keys across the families) or ``kernels`` (the 7-8 keys
of ``bench/kernels.py``). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels import (  # bench/kernels.py: the same families and inputs
    Workload,
    fma_workload,
    matmul_workload,
    reduction_workload,
    workloads,
)
from wgtune import Config, TuneFinished, TuneOutcome, Tuner, clock_grain, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.device import Device, check_limits
from wgtune.tune.plan import Plan

ORACLE_ROUNDS = 15
ORACLE_SAMPLE = 2e-3  # seconds a oracle sample lasts at least (dispatches repeated inside one pass)


def seconds_of(device: NativeDevice, pipeline: Any, args: Any, grid: tuple, repeats: int) -> float:
    return run_inline(device.resolve(run_inline(device.profile(pipeline, args, grid, repeats)))) / repeats


def wall_of(device: NativeDevice, pipeline: Any, args: Any, grid: tuple) -> float:
    """One call as a peer tuner times it: one dispatch."""
    return seconds_of(device, pipeline, args, grid, 1)


# -- the oracle ------------------------------------------------------------------------------------


def oracle(device: NativeDevice, pipelines: dict[int, tuple], args: Any, rounds: int) -> dict[int, list[float]]:
    """Every candidate's samples over ``rounds`` interleaved rounds (seconds per dispatch)."""
    repeats = {}
    for index, (pipeline, grid) in pipelines.items():
        once = max(seconds_of(device, pipeline, args, grid, 1), 1e-7)
        repeats[index] = max(1, min(4096, int(ORACLE_SAMPLE / once) + 1))
    samples: dict[int, list[float]] = {index: [] for index in pipelines}
    for _ in range(rounds):
        for index, (pipeline, grid) in pipelines.items():
            samples[index].append(seconds_of(device, pipeline, args, grid, repeats[index]))
    return samples


def medians(samples: dict[int, list[float]]) -> dict[int, float]:
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


def fresh_tune(
    device, workload: Workload, args, pipelines: dict[int, tuple], policy: str
) -> tuple[str, TuneOutcome | None]:
    """One tune by a fresh tuner (no cache), its compiles answered from ``pipelines``: the kernel
    it runs, and the tune's outcome (None when it did not tune: a pin from the environment)."""
    compiled = {id(workload.tunables.candidates[index]): pipeline for index, (pipeline, _) in pipelines.items()}
    compile_for_real = device.compile

    async def compile_once(kernel):
        found = compiled.get(id(kernel))
        return found if found is not None else await compile_for_real(kernel)

    finished: list[TuneFinished] = []
    # From the environment (WGTUNE_MAX_SAMPLES, WGTUNE_BUDGET, ...), so settings can be compared.
    tuner = Tuner(device, config=Config.from_env(cache=False, log_level="disabled", policy=policy),
                  observer=lambda event: finished.append(event) if isinstance(event, TuneFinished) else None)
    device.compile = compile_once
    # compile_many too, through compile_once: Device's own compiles one kernel at a time
    device.compile_many = partial(Device.compile_many, device)
    try:
        kernel = tuner.execute(workload.tunables, args)
    finally:
        del device.compile, device.compile_many
    return kernel.name, finished[-1].outcome if finished else None


def wgtune_policy(device, workload: Workload, args, pipelines: dict[int, tuple], policy: str) -> tuple[int, str]:
    """wgtune's pick with a fresh tuner, its compiles answered from ``pipelines``; and its confidence."""
    name, outcome = fresh_tune(device, workload, args, pipelines, policy)
    confidence = outcome.confidence if outcome is not None else None
    sure = f" (p={confidence.p_faster:.2f})" if confidence is not None else ""
    return workload.tunables.index_of[name], sure


def oracle_again(device, pipelines, args, rounds: int, second: dict) -> int:
    """A second, independent oracle's pick (its samples kept in ``second``): how far two long
    interleaved measurements disagree is the noise floor of this table on this machine."""
    second.update(oracle(device, pipelines, args, rounds))
    again = medians(second)
    return min(again, key=again.get)


POLICIES: dict[str, Callable] = {"triton": triton, "cubecl": cubecl, "kernel-tuner": kernel_tuner}
WGTUNE = {"wgtune": "adaptive", "wgtune-fixed": "fixed"}


def many_workloads(full: bool) -> list[Workload]:
    """More keys than bench/kernels.py's, of every family: regret is a share of keys."""
    if full:
        found = [matmul_workload(4096, 4096, 4096), matmul_workload(2048, 2048, 2048),
                 matmul_workload(4096, 1024, 4096), matmul_workload(1024, 1024, 1024),
                 matmul_workload(8192, 256, 1024), matmul_workload(333, 4099, 517),
                 fma_workload(1 << 28), fma_workload(1 << 24), fma_workload(10_000_019),
                 reduction_workload("sum", 1 << 14, 1 << 14), reduction_workload("sum", 1, 1 << 26),
                 reduction_workload("sum", 1 << 20, 64), reduction_workload("max", 1 << 14, 1 << 14),
                 reduction_workload("max", 64, 1 << 20), reduction_workload("max", 3000, 3001)]
    else:
        found = [matmul_workload(256, 256, 256), matmul_workload(320, 192, 130), matmul_workload(128, 128, 128),
                 matmul_workload(64, 512, 96), matmul_workload(512, 96, 64),
                 fma_workload(1 << 20), fma_workload(1_000_003), fma_workload(1 << 16), fma_workload(1 << 22),
                 reduction_workload("sum", 1024, 1024), reduction_workload("sum", 1, 1 << 20),
                 reduction_workload("sum", 4096, 64), reduction_workload("max", 333, 777),
                 reduction_workload("max", 1024, 1024), reduction_workload("max", 8, 1 << 16)]
    return [w for w in found if w is not None]


# -- running ---------------------------------------------------------------------------------------


def candidates_of(
    device: NativeDevice, workload: Workload, args: Any, compiled: dict[str, Any] | None = None,
    match: str | None = None,
) -> dict[int, tuple]:
    """Every candidate that fits the device and the key, compiled, with its grid. ``compiled``
    keeps pipelines by candidate fingerprint across calls: a suite of keys compiles each once.
    ``match``: only the candidates whose name that regular expression finds."""
    tunables = workload.tunables
    skipped = Plan(tunables.candidates, tunables.key(args)).skipped
    found = {}
    for index, kernel in enumerate(tunables.candidates):
        if index in skipped or check_limits(kernel, device.limits, device.features):
            continue
        if match is not None and not re.search(match, kernel.name):
            continue
        try:
            pipeline = compiled.get(kernel.fingerprint()) if compiled is not None else None
            if pipeline is None:
                pipeline = run_inline(device.compile(kernel))
                if compiled is not None:
                    compiled[kernel.fingerprint()] = pipeline
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
    parser.add_argument("--keys", choices=("many", "kernels"), default="many", help="which key list (see above)")
    parser.add_argument("--rounds", type=int, default=ORACLE_ROUNDS, help="the oracle's interleaved rounds")
    options = parser.parse_args(argv)
    device = NativeDevice.open()
    grain = run_inline(clock_grain(device))  # tuners on this device use it too
    print(f"adapter: {device.adapter_info.get('device', '?')}, timing {device.timing}, "
          f"clock grain {grain * 1e6:.2f} us (measured)", flush=True)
    names = (*POLICIES, *WGTUNE, "oracle-again")
    rows: dict[str, list[tuple[float, float, bool]]] = {name: [] for name in names}
    pooled_rows: dict[str, list[tuple[float, float, bool]]] = {name: [] for name in names}
    keys = many_workloads(options.full) if options.keys == "many" else workloads(options.full)
    for workload in keys:
        if options.only and workload.family not in options.only:
            continue
        args, _ = workload.make(device)
        pipelines = candidates_of(device, workload, args)
        first = oracle(device, pipelines, args, options.rounds)
        second: dict[int, list[float]] = {}
        truth = medians(first)
        best = min(truth, key=truth.get)
        picks: dict[str, tuple[float, int]] = {}
        line = [f"{workload.family} {workload.label}: {len(pipelines)} candidates, oracle "
                f"{workload.tunables.candidates[best].name} {truth[best] * 1e6:.1f} us"]
        for name in names:
            started = time.perf_counter()
            sure = ""
            if name in WGTUNE:
                pick, sure = wgtune_policy(device, workload, args, pipelines, WGTUNE[name])
            elif name == "oracle-again":
                pick = oracle_again(device, pipelines, args, options.rounds, second)
            else:
                pick = POLICIES[name](device, pipelines, args)
            spent = time.perf_counter() - started
            regret = truth[pick] / truth[best] - 1 if pick in truth else float("inf")
            rows[name].append((spent, regret, pick == best))
            picks[name] = (spent, pick)
            missed = f" [{workload.tunables.candidates[pick].name}]" if pick != best else ""
            line.append(f"{name} {regret * 100:+.1f}%{missed} in {spent:.2f}s{sure}")
        print("; ".join(line), flush=True)
        # Both oracles pooled (one before the policies ran, one after): a truth one disturbed
        # oracle run cannot decide alone.
        pooled = medians({index: first[index] + second[index] for index in first})
        pooled_best = min(pooled, key=pooled.get)
        for name, (spent, pick) in picks.items():
            pooled_rows[name].append((spent, pooled[pick] / pooled[pooled_best] - 1, pick == pooled_best))

    print(f"\nagainst the first oracle ({options.rounds} rounds, before the policies ran):")
    table(rows)
    print(f"\nagainst both oracles pooled ({2 * options.rounds} rounds, one before and one after the policies):")
    table(pooled_rows)
    return 0


def table(rows: dict[str, list[tuple[float, float, bool]]]) -> None:
    triton_time = sum(spent for spent, _, _ in rows["triton"])
    print(f"{'policy':14} {'keys':>5} {'tuning s':>9} {'vs triton':>10} {'oracle pick':>12} "
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


if __name__ == "__main__":
    raise SystemExit(main())
