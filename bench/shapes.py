"""A shape suite: wgtune's matmul and row reductions on many shapes, beside torch and an oracle.

The headline figures (``bench/kernels.py``) cover a few shapes; this covers the ones around
them (issue 14): matmul on odd, small, skinny, K-heavy, rectangular and power-of-two shapes, and
``row_sum`` / ``row_max`` on odd lengths, few long rows, many short rows and squares. For each
shape, one row:

- **the tune as it ships**: a fresh tuner, cache off (``kernels.tune``): its winner and its wall
  time (compiles included); the winner's rate is its time in the oracle below, or as a tune times
  it (``kernels.time_candidate``) where the oracle has no time for it. Either is a pass of
  back-to-back launches recorded in full, then submitted: the span between the GPU's timestamps
  around the pass plus the host's time to record it (``WebGPUDevice.resolve``, since issue 29:
  what the tuner ranks by), which torch's CUDA events around its loop of launches do not count
  while its GPU is the slower side. So the winner's host recording is measured again alone
  (:func:`host_share`), and the summary also gives the ratios by GPU time alone;
- **the winner as a program runs it** (``batch_rate.batch_seconds``, the ``batch`` columns): a
  ``with tuner.batch():`` loop of ``tuner.execute`` calls, timed by the wall clock until the
  queue is done. The device submits it part by part, so the GPU runs while the host records:
  the counterpart of torch's plain loop;
- where torch has a CUDA GPU, torch's figure for the same work measured right after the tune
  (CUDA events around a Python loop of launches, and around a CUDA graph of them: fp32 matmul
  with TF32 off, ``torch.sum`` / ``torch.amax`` along the last axis), and the ratios;
- **the oracle** (``checked_oracle``): every candidate of the set that fits the device and the
  key, each one's output checked against the exact result (float64) within the set's tolerance,
  a wrong one excluded; the others sampled interleaved; the best is the oracle's winner, and
  wgtune's regret is its pick's true time over the winner's, minus one (``wrong`` where its pick
  failed the check). Candidates are compiled once per suite (by fingerprint) and reused across
  shapes. The oracle samples :data:`ROUNDS` rounds, fewer than ``regret.py``'s 15, to keep the
  suite affordable; its noise, the regret's change between its even and its odd rounds, is
  printed per shape and summarized.

Then the summary per family against the issue's targets: matmul f32 median >= 90% of torch, no
shape under 80%, 4096^3 toward 95%; reductions median >= 100% of torch, no shape under 90%;
regret <= 2% on >= 95% of the suite's shapes (each shape is tuned afresh: a key two shapes
share counts twice). Without torch on a CUDA GPU the torch columns say ``-``.

Usage::

    python bench/shapes.py                    # small shapes: minutes on lavapipe
    python bench/shapes.py --full             # the H200 suite: 36 matmul, 24 shapes x 2 reductions
    python bench/shapes.py --full --only matmul --shapes 0:18 --out part1.txt
                                              # a family, a slice of its shapes, the table kept
    python bench/shapes.py --full --only matmul --draw 30 --shapes 0:0 --dawn --unchecked
                                              # a draw tuned on Dawn (Tint, as Chromium), robustness off

Where one command may run only so long, run the families one at a time (``--only``): each has its
own summary; the suite's regret share is the sum of theirs.

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_rate import batch_seconds  # bench/batch_rate.py
from checked_oracle import DUEL_COPIES, checked_oracle, duel  # bench/checked_oracle.py
from held_out import draw_suite, fresh_seed, matmul_class  # bench/held_out.py
from regret import ORACLE_ROUNDS, ORACLE_SAMPLE  # bench/regret.py
from run_info import Report  # bench/run_info.py
from shape_report import (  # bench/shape_report.py
    FAMILIES,
    GIVEN,
    HEADER,
    HELD_OUT,
    REGRET_LIMIT,
    Row,
    row_line,
    summary,
)
from torch_timing import CUDA, torch  # bench/torch_timing.py

from kernels import (  # bench/kernels.py: workloads, numpy checks
    Workload,
    compiler_name,
    matmul_shape,
    matmul_workload,
    open_device,
    reduction_workload,
    time_candidate,
    tune,
)
from wgtune import Config, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.errors import ConfigError

ROUNDS = 10  # the oracle's interleaved rounds per shape (regret.py: ORACLE_ROUNDS); even, for the halves

MATMUL_CLASSES = ("odd", "small", "skinny", "K-heavy", "rect", "pow2", "square")
REDUCTION_CLASSES = ("odd", "few-long", "many-short", "square")

# (M, N, K, class). The H200 suite: every class of issue 14, around the headline sizes.
MATMUL_FULL: tuple[tuple[int, int, int, str], ...] = (
    (1000, 1000, 1000, "odd"), (1023, 1025, 1027, "odd"), (999, 1001, 997, "odd"), (127, 129, 131, "odd"),
    (333, 4099, 517, "odd"), (2047, 2049, 2051, "odd"), (3001, 2999, 1001, "odd"),
    (32, 32, 32, "small"), (64, 64, 64, "small"), (96, 96, 96, "small"), (128, 128, 128, "small"),
    (200, 150, 100, "small"),
    (33, 4096, 4096, "skinny"), (4096, 33, 4096, "skinny"), (1, 4096, 4096, "skinny"), (4096, 1, 4096, "skinny"),
    (8, 8192, 1024, "skinny"), (8192, 16, 1024, "skinny"),
    (16, 1024, 16384, "K-heavy"), (64, 64, 65536, "K-heavy"), (256, 256, 16384, "K-heavy"),
    (128, 512, 32768, "K-heavy"),
    (8192, 512, 8192, "rect"), (5000, 3000, 2000, "rect"), (2000, 2000, 500, "rect"), (4096, 1024, 4096, "rect"),
    (1024, 4096, 256, "rect"), (8192, 256, 1024, "rect"), (3000, 5000, 700, "rect"),
    (256, 256, 256, "pow2"), (512, 512, 512, "pow2"), (1024, 1024, 1024, "pow2"), (2048, 2048, 2048, "pow2"),
    (4096, 4096, 4096, "pow2"),
    (1536, 1536, 1536, "square"), (3072, 3072, 3072, "square"),
)
# (rows, cols, class), each run as row_sum and as row_max; the largest inputs are 1 GiB.
REDUCTION_FULL: tuple[tuple[int, int, str], ...] = (
    (1000, 4097, "odd"), (4096, 1023, "odd"), (3, 1_000_003, "odd"), (333, 777, "odd"), (3000, 3001, "odd"),
    (4, 10_000_019, "few-long"), (16, 1_000_001, "few-long"), (1, 1 << 28, "few-long"), (64, 1 << 20, "few-long"),
    (8, 1 << 24, "few-long"), (2, 100_000_007, "few-long"), (1, 10_000_019, "few-long"),
    (1_000_000, 7, "many-short"), (262_144, 33, "many-short"), (65_536, 100, "many-short"),
    (10_000, 1000, "many-short"), (1 << 20, 64, "many-short"), (1 << 22, 16, "many-short"),
    (1 << 24, 4, "many-short"), (2_000_000, 3, "many-short"),
    (8191, 8191, "square"), (16384, 16384, "square"), (4096, 4096, "square"), (1024, 1024, "square"),
)
# The default run: small shapes of the same classes, minutes on lavapipe (a 2-core CPU adapter).
MATMUL_SMALL: tuple[tuple[int, int, int, str], ...] = (
    (48, 48, 48, "small"), (33, 65, 17, "odd"), (127, 129, 131, "odd"), (128, 128, 128, "pow2"),
    (7, 256, 128, "skinny"), (256, 5, 128, "skinny"), (32, 32, 1024, "K-heavy"), (256, 96, 64, "rect"),
)
REDUCTION_SMALL: tuple[tuple[int, int, str], ...] = (
    (333, 777, "odd"), (4, 65_537, "few-long"), (16_384, 7, "many-short"), (4096, 33, "many-short"),
    (100, 1023, "odd"), (512, 512, "square"),
)


def suite(full: bool, only: Sequence[str] = FAMILIES, part: slice = slice(None), draw: int = 0,
          seed: int = 0, given: Sequence[tuple[int, int, int]] = ()) -> list[tuple[Workload, str]]:
    """The workloads to run with their class tags: each family's shapes, sliced by ``part``, then
    ``draw`` shapes of each family drawn from ``seed`` (held out: tagged ``held:CLASS``). ``given``
    matmul shapes (tagged ``given:CLASS``) replace the matmul lists and draw."""
    matmul, reductions = (MATMUL_FULL, REDUCTION_FULL) if full else (MATMUL_SMALL, REDUCTION_SMALL)
    if given:
        return [(matmul_workload(m, n, k), GIVEN + matmul_class(m, n, k, small=not full))
                for m, n, k in given] if "matmul" in only else []
    if draw:
        matmul = (*matmul[part], *((m, n, k, HELD_OUT + tag) for (m, n, k), tag
                                   in draw_suite("matmul", draw, seed, small=not full)))
        reductions = (*reductions[part], *((rows, cols, HELD_OUT + tag) for (rows, cols), tag
                                           in draw_suite("row_sum", draw, seed, small=not full)))
        part = slice(None)
    found: list[tuple[Workload, str]] = []
    if "matmul" in only:
        found += [(matmul_workload(m, n, k), tag) for m, n, k, tag in matmul[part]]
    for op in ("sum", "max"):
        if f"row_{op}" in only:
            found += [(workload, tag) for rows, cols, tag in reductions[part]
                      if (workload := reduction_workload(op, rows, cols)) is not None]
    return found


def measure(device: NativeDevice, workload: Workload, tag: str, config: Config, rounds: int,
            compiled: dict[str, Any]) -> Row:
    """One shape: the tune as it ships and its winner beside torch, then the checked oracle."""
    tuned = tune(workload, device, config)
    torch_rate = torch_graph_rate = None
    if CUDA and workload.torch_figure is not None:
        seconds = workload.torch_figure(tuned.inputs)[1]
        torch_rate = workload.work / seconds.plain
        torch_graph_rate = workload.work / seconds.graph if seconds.graph else None
    found = checked_oracle(device, workload, tuned.args, tuned.want, rounds, compiled)
    names = [kernel.name for kernel in workload.tunables.candidates]
    seconds = found.times.get(tuned.index)
    regret = found.regret(tuned.index)
    over = REGRET_LIMIT < regret < math.inf
    dueled = duel(device, found, tuned.index, tuned.args) if over else None
    spread = duel(device, found, tuned.index, tuned.args, copies=DUEL_COPIES) if over else None
    if seconds is None:
        seconds = time_candidate(device, workload.tunables, tuned.index, tuned.args, config).stats.median
    pipeline = found.pipelines.get(tuned.index)
    share = host_share(device, *pipeline, tuned.args, seconds) if pipeline else None
    batched = batch_seconds(tuned.tuner, workload.tunables, tuned.args, seconds)
    return Row(
        workload.family, workload.label, tag, workload.unit, names[tuned.index], tuned.seconds,
        workload.work / seconds, torch_rate, torch_graph_rate,
        names[found.best] if found.best is not None else "-",
        regret, found.noise(tuned.index), found.fitting - len(found.wrong), found.fitting,
        {names[index]: why for index, why in found.wrong.items()}, dueled, spread, share,
        workload.work / batched.seconds, batched.host / batched.seconds,
    )


def host_share(device: NativeDevice, pipeline: Any, grid: tuple, args: Any, seconds: float,
               samples: int = 5) -> float | None:
    """The share of a launch's ``seconds`` (as the oracle timed it: GPU span plus the host's
    recording) that is the host's recording of it, measured again in passes as long as the
    oracle's (the median of ``samples``); None without timestamps (the wall clock counts both
    as one)."""
    if not device.timestamps:
        return None
    repeats = max(1, min(4096, int(ORACLE_SAMPLE / max(seconds, 1e-7)) + 1))
    hosts = []
    for _ in range(samples):
        profile = run_inline(device.profile(pipeline, args, grid, repeats))
        run_inline(device.resolve(profile))  # frees the pass's readback
        hosts.append(profile.host / repeats)
    return min(0.95, statistics.median_high(hosts) / seconds)


# -- running ---------------------------------------------------------------------------------------


def shape_slice(text: str) -> slice:
    """``N`` (each family's first N shapes) or ``START:STOP`` (Python's slice of each list)."""
    try:
        if ":" in text:
            start, stop = text.split(":", 1)
            return slice(int(start) if start else None, int(stop) if stop else None)
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shapes takes N or START:STOP, got {text!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"--shapes N needs N >= 1, got {count}")
    return slice(count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the H200 suite (36 matmul, 24 reduction shapes)")
    parser.add_argument("--only", action="append", choices=FAMILIES, help="only this family (repeatable)")
    parser.add_argument("--shapes", type=shape_slice, default=slice(None), metavar="N|START:STOP",
                        help="a subset of each family's shapes")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"the oracle's rounds (default {ROUNDS})")
    parser.add_argument("--samples", type=int, default=10, help="timed samples of the winner (default 10)")
    parser.add_argument("--draw", type=int, metavar="N",
                        help="held-out shapes drawn afresh per family, besides the fixed ones (default: 30 with "
                             "--full, 6 without; 0: none)")
    parser.add_argument("--seed", type=int, help="the draw's seed (default: a fresh one, printed)")
    parser.add_argument("--shape", action="append", type=matmul_shape, default=[], metavar="MxNxK",
                        help="a matmul shape to run instead of the lists and the draw (repeatable; matmul only)")
    parser.add_argument("--out", type=Path, help="also write the table and the summary to this file")
    parser.add_argument("--dawn", action="store_true",
                        help="on Dawn's device (Tint compiles the WGSL, as Chromium does; pip install 'wgtune[dawn]'), "
                             "not wgpu-native's")
    parser.add_argument("--unchecked", action="store_true",
                        help="with --dawn: Dawn's robustness off for every kernel (wgpu-native turns it off per kernel "
                             "where Kernel.runtime_checks says so; Dawn only for the whole device)")
    options = parser.parse_args(argv)
    if options.unchecked and not options.dawn:
        parser.error("--unchecked is for --dawn (wgpu-native follows each kernel's runtime_checks)")
    draw = 0 if options.shape else options.draw if options.draw is not None else (30 if options.full else 6)
    seed = options.seed if options.seed is not None else fresh_seed()
    if options.rounds < 2:
        parser.error("--rounds needs at least 2 (the noise compares even and odd rounds)")
    workloads = suite(options.full, options.only or FAMILIES, options.shapes, draw, seed, options.shape)
    if not workloads:
        parser.error("no shapes selected")
    try:
        device = open_device(options.dawn, options.unchecked)
    except ConfigError as error:  # no adapter, or wgpudawn missing: say so, no traceback
        parser.exit(2, f"shapes.py: {error}\n")
    config = Config(cache=False, log_level="disabled", samples=options.samples)
    started = time.perf_counter()
    compiled: dict[str, Any] = {}
    rows: list[Row] = []
    failed: list[str] = []
    with options.out.open("w") if options.out else nullcontext() as out:
        report = Report(out)
        info = device.adapter_info
        report.line(f"adapter: {info.get('device', '?')} ({info.get('backend_type', '?')}, "
                    f"{compiler_name(options.dawn, options.unchecked)}), timing {device.timing}; "
                    f"torch: {torch.__version__ + ' on ' + torch.cuda.get_device_name() if CUDA else 'no CUDA GPU'}")
        report.line(f"oracle: {options.rounds} interleaved rounds a shape (regret.py: {ORACLE_ROUNDS}); noise: how "
                    "far the regret moves between its even and odd rounds; ok/fit: candidates right / fitting")
        if draw:
            report.line(f"held out: {draw} shapes a family drawn with seed {seed} (bench/held_out.py draw_suite; "
                        f"--seed {seed} draws them again), tagged {HELD_OUT}CLASS")
        report.line(HEADER)
        report.line("-" * len(HEADER))
        for workload, tag in workloads:
            try:
                row = measure(device, workload, tag, config, options.rounds, compiled)
            except Exception as error:  # one shape's failure (a tune that found nothing, say): the suite goes on
                failed.append(f"{workload.family} {workload.label}")
                report.line(f"{workload.family:7} {workload.label:16} {tag:10} FAILED: {type(error).__name__}: {error}")
                continue
            rows.append(row)
            report.line(row_line(row))
            for name, why in row.wrong.items():
                report.line(f"    wrong: {name}: {why}")
        for text in summary(rows, failed):
            report.line(text)
        report.line(f"ran {len(workloads)} shapes in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
