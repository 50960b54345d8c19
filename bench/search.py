"""Search over a large space against the exhaustive tune: how close, at what share of the time.

The space is a templated matmul (``C = A @ B``, f32): a ``wgtune.Space`` whose ``render`` fills the
family's WGSL generator (``kernels.matmul.tiled_matmul_wgsl``) with a block tile ``BM x BN``, a K
step ``BK``, a register tile ``TM x TN`` and the vector layout's options (vec4 loads, padding,
double buffering, swizzle), restricted to the tiles the generator accepts, 32-256 invocations and
16 KiB of workgroup storage (WebGPU's defaults). ``--full`` is the GPU space (over 2500
configurations) at 2048^3; the default a smaller one (763) at 128^3 for a CPU adapter.

For one key:

1. every configuration is compiled once, and each compile's time kept (with ``--threads`` > 1,
   a random sample is compiled one at a time first, the rest in threads);
2. the **oracle** samples every candidate interleaved for ``--rounds`` rounds (each sample at
   least 2 ms, dispatches repeated inside one pass); a candidate's true time is its median;
3. the **exhaustive** tune: wgtune's tuner as it ships (adaptive policy) over every candidate;
4. the **searches**: the same tuner with ``search=Search(strategy, candidates=budget, seed)``
   for each strategy, budget and seed.

Tuners get their compiles answered from step 1, and are charged each compile they ask for at
its measured time (a threaded one scaled by the ratio of the sample's mean one-at-a-time time
to the threaded ones' mean: compiling the same source again is answered from the driver's
memory, so the sample must be each candidate's first compile): compiling is most of what a search saves, so it counts,
the same way for every tuner. A search's *time* is its tuning time over the exhaustive tune's;
its *regret* is its pick's true time over the oracle's best, minus one. Targets (issue 11):
within 2% of the oracle's best in at most 10% of the exhaustive time.

``--save FILE`` writes every configuration's oracle time and compile time as JSON (compact:
the parameter names once, a row of values and times per configuration; ``--oracle-only`` stops
there), so strategies can be compared offline on the same timings (``--replay FILE``, no GPU:
each search is driven as a tune drives it, ``wgtune.search.run.replay``, a candidate's time its
oracle median; every registered strategy unless ``--strategies`` names some).
``tests/data/search_h200_matmul.json`` is such a record of the ``--full`` space on an NVIDIA H200
(2026-12-01, ``--threads 16 --rounds 7 --oracle-only``, ``__GL_SHADER_DISK_CACHE=0``); replayed
with ``--seeds 12`` (regret of the best measured, median / max, seeds within 2%):

    random 3%: 7.44% / 14.25%, 2/12   5%: 7.41% / 14.25%, 2/12   8%: 6.40% / 9.56%, 3/12
    model  3%: 0.00% /  6.50%, 8/12   5%: 0.00% /  6.50%, 10/12  8%: 0.00% / 6.25%, 10/12

``tests/test_search_sweep.py`` holds every registered strategy to bars taken from these figures.

Usage: ``python bench/search.py`` (lavapipe) or ``--full`` (GPU). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from wgtune import Args, Config, Search, Space, TunableSet, Tuner, clock_grain, run_inline
from wgtune.gpu.device import Device
from wgtune.kernels.matmul import matmul_key, tiled_matmul_wgsl
from wgtune.kernels.matmul.tile import MatmulTile
from wgtune.search import registered_strategies
from wgtune.search.run import replay as run_replay

ORACLE_SAMPLE = 2e-3
COMPILE_SAMPLE = 24  # compiles timed one at a time to scale threaded compile times

SPACES = {
    # GPU: 2536 configurations.
    "full": {"BM": [16, 32, 64, 128], "BN": [16, 32, 64, 128], "BK": [4, 8, 16, 32], "TM": [1, 2, 4, 8],
             "TN": [1, 2, 4, 8], "VEC4": [False, True], "PAD": [0, 4], "DOUBLE": [False, True],
             "SWIZZLE": [0, 4]},
    # CPU adapter: 763 configurations.
    "small": {"BM": [16, 32, 64], "BN": [16, 32, 64], "BK": [4, 8, 16], "TM": [1, 2, 4, 8], "TN": [1, 2, 4, 8],
              "VEC4": [False, True], "PAD": [0, 4], "DOUBLE": [False, True], "SWIZZLE": [0]},
}
DEFAULT = {"BM": 32, "BN": 32, "BK": 8, "TM": 4, "TN": 4, "VEC4": False, "PAD": 0, "DOUBLE": False, "SWIZZLE": 0}


def tile_of(p: dict) -> MatmulTile:
    return MatmulTile(p["BM"], p["BN"], p["BK"], p["TM"], p["TN"], vec4=p["VEC4"], pad=p["PAD"],
                      double=p["DOUBLE"], swizzle=p["SWIZZLE"])


def valid(p: dict) -> bool:
    try:
        tile = tile_of(p)
    except ValueError:
        return False
    return 32 <= tile.invocations <= 256 and tile.workgroup_storage <= 16384


def matmul_space(size: str) -> Space:
    """The templated matmul as a wgtune.Space (see the module doc)."""
    return Space(
        "matmul_space",
        params=SPACES[size],
        default=DEFAULT,
        render=lambda p: tiled_matmul_wgsl(tile_of(p)),
        restrict=valid,
        grid=lambda p, args: (-(-args.params[1] // p["BN"]), -(-args.params[0] // p["BM"]), 1),
    )


def make_set(candidates: list, search: Search | None) -> TunableSet:
    return TunableSet("matmul_space", candidates, matmul_key, search=search)


# -- compiling, the oracle ---------------------------------------------------------------------------


def compile_all(device: Any, candidates: list, threads: int) -> tuple[dict[int, Any], dict[int, float]]:
    """Every candidate's pipeline and compile seconds, one at a time (see the module doc)."""

    def compile_one(index: int) -> tuple[int, Any, float]:
        started = time.perf_counter()
        try:
            pipeline = run_inline(device.compile(candidates[index]))
        except Exception:
            pipeline = None
        return index, pipeline, time.perf_counter() - started

    everything = range(len(candidates))
    alone = random.Random(0).sample(everything, min(COMPILE_SAMPLE, len(candidates))) if threads > 1 else everything
    done = [compile_one(index) for index in alone]
    rest = sorted(set(everything) - set(alone))
    with ThreadPoolExecutor(max(1, threads)) as pool:
        threaded = list(pool.map(compile_one, rest))
    if threaded:
        scale = statistics.mean(spent for _, _, spent in done) / statistics.mean(spent for _, _, spent in threaded)
        print(f"compile: {len(done)} one at a time, {statistics.mean(s for _, _, s in done) * 1e3:.1f} ms each; "
              f"{len(threaded)} in {threads} threads, scaled by {scale:.3f}", flush=True)
        done += [(index, pipeline, spent * scale) for index, pipeline, spent in threaded]
    pipelines = {index: pipeline for index, pipeline, _ in done if pipeline is not None}
    return pipelines, {index: spent for index, _, spent in done}


def profile_seconds(device: Any, pipeline: Any, args: Args, grid: tuple, repeats: int) -> float:
    return run_inline(device.resolve(run_inline(device.profile(pipeline, args, grid, repeats)))) / repeats


def oracle(device: Any, candidates: list, pipelines: dict[int, Any], args: Args, rounds: int) -> dict[int, float]:
    """Every runnable candidate's median over ``rounds`` interleaved rounds."""
    runs: dict[int, tuple[Any, tuple, int]] = {}
    for index, pipeline in pipelines.items():
        grid = tuple(candidates[index].grid(args))
        try:
            once = max(profile_seconds(device, pipeline, args, grid, 1), 1e-7)
        except Exception:
            continue
        runs[index] = (pipeline, grid, max(1, min(4096, int(ORACLE_SAMPLE / once) + 1)))
    samples: dict[int, list[float]] = {index: [] for index in runs}
    for _ in range(rounds):
        for index, (pipeline, grid, repeats) in runs.items():
            samples[index].append(profile_seconds(device, pipeline, args, grid, repeats))
    return {index: statistics.median(values) for index, values in samples.items() if values}


# -- tuning ------------------------------------------------------------------------------------------


def tune(device: Any, tunables: TunableSet, args: Args, pipelines: dict[int, Any],
         compile_seconds: dict[int, float]) -> tuple[int, float, int]:
    """A fresh tuner's pick, its tuning time (wall plus the compiles it asked for) and compiles."""
    by_kernel = {id(tunables.candidates[index]): (pipeline, compile_seconds[index])
                 for index, pipeline in pipelines.items()}
    charged = [0.0, 0]
    compile_for_real = device.compile

    async def compile_once(kernel: Any) -> Any:
        found = by_kernel.get(id(kernel))
        if found is None:
            return await compile_for_real(kernel)
        charged[0] += found[1]
        charged[1] += 1
        return found[0]

    tuner = Tuner(device, config=Config.from_env(cache=False, log_level="disabled"))
    device.compile = compile_once
    # compile_many too, through compile_once: Device's own compiles one kernel at a time
    device.compile_many = partial(Device.compile_many, device)
    started = time.perf_counter()
    try:
        kernel = tuner.execute(tunables, args)
    finally:
        del device.compile, device.compile_many
    spent = time.perf_counter() - started + charged[0]
    return tunables.index_of[kernel.name], spent, charged[1]


def report(name: str, rows: list[tuple[float, float]], exhaustive: float) -> None:
    regrets = [regret for regret, _ in rows]
    shares = [spent / exhaustive for _, spent in rows]
    within = sum(1 for regret in regrets if regret <= 0.02)
    print(f"{name:26} runs {len(rows):>2}  regret median {statistics.median(regrets) * 100:5.2f}% "
          f"max {max(regrets) * 100:5.2f}%  within 2%: {within}/{len(rows)}  "
          f"time {statistics.mean(shares):6.1%} of exhaustive (max {max(shares):.1%})", flush=True)


def live(options: argparse.Namespace) -> int:
    from wgtune.backends.native import NativeDevice

    size = "full" if options.full else "small"
    m = n = k = 2048 if options.full else 128
    space = matmul_space(size)
    started = time.perf_counter()
    candidates = space.candidates()
    print(f"space: {len(candidates)} configurations ({size}), built in {time.perf_counter() - started:.2f}s; "
          f"matmul {m}x{n}x{k}", flush=True)
    device = NativeDevice.open()
    grain = run_inline(clock_grain(device))
    print(f"adapter: {device.adapter_info.get('device', '?')}, timing {device.timing}, grain {grain * 1e6:.2f} us",
          flush=True)
    a = np.random.default_rng(1).uniform(-1, 1, (m, k)).astype(np.float32)
    b = np.random.default_rng(2).uniform(-1, 1, (k, n)).astype(np.float32)
    args = Args((device.create_buffer(a.tobytes()), device.create_buffer(b.tobytes()),
                 device.create_buffer(size=4 * m * n)), (m, n, k))
    started = time.perf_counter()
    pipelines, compile_seconds = compile_all(device, candidates, options.threads)
    print(f"compiled {len(pipelines)} of {len(candidates)} in {time.perf_counter() - started:.1f}s wall; "
          f"one at a time they take {sum(compile_seconds.values()):.1f}s", flush=True)
    started = time.perf_counter()
    truth = oracle(device, candidates, pipelines, args, options.rounds)
    best = min(truth, key=truth.get)
    print(f"oracle: {len(truth)} candidates x {options.rounds} rounds in {time.perf_counter() - started:.1f}s; "
          f"best {candidates[best].name} {truth[best] * 1e6:.1f} us "
          f"({2 * m * n * k / truth[best] / 1e9:.0f} GFLOP/s); "
          f"within 2% of it: {sum(1 for t in truth.values() if t <= truth[best] * 1.02)}", flush=True)
    if options.save:
        about = {"adapter": device.adapter_info.get("device", "?"), "space": size, "matmul": [m, n, k],
                 "rounds": options.rounds}
        save(options.save, candidates, truth, compile_seconds, about)
    if options.oracle_only:
        return 0

    def regret(pick: int) -> float:
        return truth[pick] / truth[best] - 1 if pick in truth else float("inf")

    pick, exhaustive, compiles = tune(device, make_set(candidates, None), args, pipelines, compile_seconds)
    print(f"exhaustive: {compiles} compiles, {exhaustive:.1f}s, picked {candidates[pick].name} "
          f"(regret {regret(pick) * 100:.2f}%)", flush=True)
    for strategy in options.strategies or registered_strategies():
        for budget in options.budgets:
            rows = []
            for seed in range(options.seeds):
                search = Search(strategy, candidates=budget, seed=seed)
                pick, spent, compiles = tune(device, make_set(candidates, search), args, pipelines, compile_seconds)
                rows.append((regret(pick), spent))
            report(f"{strategy} {budget} ({compiles} compiles)", rows, exhaustive)
    return 0


# -- replaying saved timings ------------------------------------------------------------------------


def save(path: str, candidates: list, truth: dict[int, float], compile_seconds: dict[int, float],
         about: dict[str, Any]) -> None:
    """Write every configuration's oracle and compile time, compactly: the parameter names once,
    then one row of values per configuration (the set's order), its oracle median and compile
    seconds (None where it failed), each to 4 significant digits."""
    names = list(candidates[0].configuration)
    rows = [[kernel.configuration[name] for name in names] + [_rounded(truth.get(index)),
                                                             _rounded(compile_seconds.get(index))]
            for index, kernel in enumerate(candidates)]
    text = json.dumps({**about, "params": names, "rows": rows}, separators=(",", ":"))
    Path(path).write_text(text.replace("],[", "],\n["))
    print(f"saved {len(rows)} configurations to {path}", flush=True)


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else float(f"{seconds:.4g}")


def load(path: str | Path) -> list[dict[str, Any]]:
    """Saved timings as rows of ``{configuration, seconds, compile}``, in the set's order (the
    compact form :func:`save` writes, or the list of rows earlier versions wrote)."""
    data = json.loads(Path(path).read_text())
    if isinstance(data, list):
        return data
    names = data["params"]
    return [{"configuration": dict(zip(names, row[:len(names)], strict=True)), "seconds": row[len(names)],
             "compile": row[len(names) + 1]} for row in data["rows"]]


def replay(options: argparse.Namespace) -> int:
    """Simulate the strategies on saved timings as a tune's driver runs them (the default first,
    then the strategy's batches: ``wgtune.search.run.replay``): how many candidates each measured,
    and how close its best was to the best of all (a stand-in for the tune's pick, which settles
    among what was measured)."""
    rows = load(options.replay)
    points = [row["configuration"] for row in rows]
    truth = {index: row["seconds"] for index, row in enumerate(rows) if row["seconds"]}
    best = min(truth.values())
    print(f"{len(rows)} configurations, {sum(1 for t in truth.values() if t <= best * 1.02)} within 2% of the best; "
          f"the default at {truth[0] / best:.2f}x the best")
    for strategy in options.strategies or registered_strategies():
        for budget in options.budgets:
            regrets = []
            for seed in range(options.seeds):
                search = Search(strategy, candidates=budget, seed=seed)
                batches = run_replay(search, points, truth.get)
                found = min(truth[index] for batch in batches for index in batch if index in truth)
                regrets.append(found / best - 1)
            measured = sum(len(batch) for batch in batches)
            print(f"{strategy:8} {budget!s:>6}: {measured:4} measured; regret median "
                  f"{statistics.median(regrets) * 100:5.2f}% max {max(regrets) * 100:5.2f}%; "
                  f"within 2%: {sum(r <= 0.02 for r in regrets):2}/{len(regrets)}, "
                  f"5%: {sum(r <= 0.05 for r in regrets):2}/{len(regrets)}", flush=True)
    return 0


def budget_value(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the GPU space at 2048^3")
    parser.add_argument("--rounds", type=int, default=7, help="the oracle's interleaved rounds")
    parser.add_argument("--threads", type=int, default=1, help="compiles at a time in step 1")
    parser.add_argument("--strategies", nargs="+", help="registered strategies to run (default: every one)")
    parser.add_argument("--budgets", nargs="+", type=budget_value, default=[0.03, 0.05, 0.08],
                        help="candidates per search: a count, or a fraction with a dot")
    parser.add_argument("--seeds", type=int, default=5, help="searches per strategy and budget")
    parser.add_argument("--save", help="write the oracle's and compiles' times here (JSON)")
    parser.add_argument("--oracle-only", action="store_true", help="stop after the oracle (and --save)")
    parser.add_argument("--replay", help="simulate the strategies on a saved file instead (no GPU)")
    options = parser.parse_args(argv)
    return replay(options) if options.replay else live(options)


if __name__ == "__main__":
    sys.exit(main())
