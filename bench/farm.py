"""The tuning farm's speedup: one catalogue of matmul keys tuned on 1 worker, then on N (one per GPU).

Each run is a fresh local cluster (fresh processes: nothing compiled, nothing remembered), a
fresh cache directory, every job tuned (``retune``). The figure is the farm's wall time from the
first job submitted to the last winner merged: the workers' start and the opening of their
adapters come before it, and are printed apart. NVIDIA's shader disk cache is turned off
(``__GL_SHADER_DISK_CACHE=0``, inherited by the workers) so that the later run does not compile
from what the earlier one left.

Usage::

    python bench/farm.py                         # 1 then 2 workers, one per adapter (a two-GPU node)
                                                 # (bench/results/h200-farm.txt: the H200 command)
    python bench/farm.py --workers 1 2 4         # more runs
    python bench/farm.py --same-adapter --shapes 6   # lavapipe: correctness, not speedup
    python bench/farm.py --out bench/results/h200-farm.txt

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

from wgtune import Config, LogLevel
from wgtune.backends.farm import WinnerMerger, local_cluster, plan_jobs, run_farm

# Matmul shapes whose keys all differ (sizes a power of two apart), small to large. On one H200
# the first 40 (256^3 .. 1024x1024x512) tuned in 10 s, 0.25 s a key: the whole 125 take about
# 30-60 s on one GPU, what the two-GPU figure needs to dwarf the workers' start.
SIDES = (128, 256, 512, 1024, 2048)


def catalogue(count: int) -> list:
    shapes = sorted(itertools.product(SIDES, repeat=3), key=lambda s: (s[0] * s[1] * s[2], s))
    return plan_jobs(("matmul", shape) for shape in shapes[:count])


def one_run(workers: int, jobs: list, same_adapter: bool, config: Config, say) -> float:
    from distributed import Client

    begun = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache, local_cluster(workers, same_adapter=same_adapter) as cluster, \
            Client(cluster) as client:
        merger = WinnerMerger(cache)
        report = run_farm(client, jobs, merger, config, retune=True,
                          on_start=lambda report, _: say(f"  workers up, adapters open: "
                                                         f"{time.perf_counter() - begun:.1f} s"))
        merger.close()
    devices = sorted({(identity["adapter"], identity["device"]) for identity in report.workers.values()})
    say(f"{workers} worker(s) on {devices}: {len(report.done)}/{report.jobs} jobs done, {len(report.failed)} failed, "
        f"{report.retried} retried; farm wall {report.wall:.2f} s")
    for worker, row in sorted(report.per_worker().items()):
        say(f"  {worker} (adapter {row['adapter']}): {row['done']} jobs, {row['seconds']:.2f} s tuning")
    for result in report.failed:
        say(f"  failed: {result.job.label}: {result.error}")
    return report.wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts, one run each")
    every = len(SIDES) ** 3
    parser.add_argument("--shapes", type=int, default=every, help=f"matmul shapes (default: all {every})")
    parser.add_argument("--same-adapter", action="store_true", help="every worker on adapter 0")
    parser.add_argument("--out", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    os.environ.setdefault("__GL_SHADER_DISK_CACHE", "0")
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    jobs = catalogue(args.shapes)
    config = Config.from_env(log_level=LogLevel.DISABLED)
    say(f"wgtune farm bench: {len(jobs)} matmul keys ({jobs[0].label} .. {jobs[-1].label}), "
        f"policy {config.policy.value}, {config.samples} samples, __GL_SHADER_DISK_CACHE="
        f"{os.environ['__GL_SHADER_DISK_CACHE']}, {os.cpu_count()} CPUs")
    from wgtune.backends.native_adapters import indexed_adapters

    for index, adapter in enumerate(indexed_adapters()):
        say(f"  adapter {index}: {adapter.info.get('device')} ({adapter.info.get('backend_type')})")
    walls = {workers: one_run(workers, jobs, args.same_adapter, config, say) for workers in args.workers}
    base = walls[args.workers[0]]
    for workers, wall in walls.items():
        say(f"{workers} worker(s): {wall:.2f} s, speedup over {args.workers[0]}: {base / wall:.2f}x")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
