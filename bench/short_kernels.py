"""Short kernels (issue 29): does the tuner rank candidates of a few microseconds as calls run them?

For each key, every candidate of its set that fits the device and the key (the plan's, as
``bench/regret.py`` and ``bench/checked_oracle.py`` take them) is compiled and its output checked
on a NaN-filled output buffer against the exact result (``checked_oracle.checked_candidates``; a
wrong one is excluded and said). Then a fresh tuner (no cache) tunes the key as it ships
(``regret.fresh_tune``: its pick, and each candidate's median from the tune's results), and every
correct candidate is measured these ways, interleaved: each round runs each way over all the
candidates in turn (the order of ways rotating by round), and a figure is the median over the
rounds, in microseconds a launch:

- ``tuner``: the tune's own median for the candidate (blank where the tune did not measure it);
- ``ts1``: GPU timestamps around a pass of one launch (what one sample of one dispatch reads);
- ``ts``: GPU timestamps around a pass of the repeats the tuner calibrates for the candidate
  (``tune.measure.calibrate`` to the device's sample floor): the tuner's way, re-measured;
- ``tsR``: GPU timestamps around a pass of R launches (the ``pass`` below);
- ``pass``: the wall clock over one submission of one pass of R launches, from recording it until
  the queue is done (an oracle of back-to-back throughput, as issue 29 measured from outside);
- ``batch``: the wall clock over R launches through the device's batch (what ``tuner.batch()``
  does: recorded into passes submitted every 128 launches), until the queue is done;
- ``alone``: the wall clock over R launches each submitted on its own (what R
  ``tuner.execute`` calls do, less the key lookup), until the queue is done.

Each wall-clock figure starts from an idle queue and ends with one wait (a small read back),
which costs the same for every candidate.

Printed per key: the fastest candidates by ``batch`` (``--all``: every one) with their figures,
the winners by ``alone``, ``batch`` and ``pass``, the tuner's pick and its regret against each
way (its figure over the way's best, minus one), and the rank correlation (Spearman) of each
way with ``alone`` and ``batch``; where torch has a CUDA GPU, torch's time for the key as a
plain loop and as a CUDA graph, beside the best candidate's and the pick's ``tsR`` (issue 29's
short-kernel target: the GPU's time within 1.5x of the graph's). The summary has one row per key
(``pick/graph``: the pick's ``tsR`` over torch's graph) and the share of keys whose
pick is within 2% of the best by each way.

Usage::

    python bench/short_kernels.py                       # the GPU keys of issue 29
    python bench/short_kernels.py --draw 10              # and 10 random shapes a family (seed printed)
    python bench/short_kernels.py --draw 10 --seed 7     # the same draw again
    python bench/short_kernels.py --small --draw 1       # tiny keys for lavapipe
    python bench/short_kernels.py --key matmul:256x256x256 --key fma:777777 --all

The tuner reads ``WGTUNE_*`` settings from the environment (``Config.from_env``), so a change to
them can be compared. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checked_oracle import checked_candidates  # bench/checked_oracle.py
from held_out import FAMILIES, draw, fresh_seed  # bench/held_out.py
from regret import fresh_tune, seconds_of  # bench/regret.py
from run_info import Report, report_to  # bench/run_info.py
from torch_timing import CUDA  # bench/torch_timing.py

from kernels import Workload, fma_workload, matmul_workload, reduction_workload  # bench/kernels.py
from wgtune import Config, Measured, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.batch import Batch
from wgtune.gpu.clock import clock_grain
from wgtune.tune.measure import calibrate, sample_floor

WAYS = ("tuner", "ts1", "ts", "tsR", "pass", "batch", "alone")
ORACLES = ("alone", "batch", "pass")  # the ways a call runs, by the wall clock
GPU_KEYS = (("matmul", (256, 256, 256)), ("matmul", (384, 384, 384)), ("matmul", (320, 200, 448)),
            ("row_sum", (300_000, 33)), ("fma", (777_777,)), ("fma", (3_000_000,)))
SMALL_KEYS = (("matmul", (48, 48, 48)), ("matmul", (40, 24, 56)), ("row_sum", (3000, 33)), ("fma", (7777,)),
              ("fma", (30_000,)))
WITHIN = 0.02  # a pick this close to the best counts as right (issue 29's target)
SLOW = 10.0  # a candidate this many times the fastest by a first sample is not sampled (as kernel_probe.py)
SHOWN = 8  # candidates printed per key without --all (and the pick and every way's winner)


def workload_of(family: str, shape: tuple[int, ...]) -> Workload:
    if family == "matmul":
        return matmul_workload(*shape)
    if family == "row_sum":
        found = reduction_workload("sum", *shape)
        if found is None:
            raise RuntimeError("this wgtune has no reduction family")
        return found
    if family == "fma":
        return fma_workload(*shape)
    raise ValueError(f"no family {family!r}: use one of {', '.join(FAMILIES)}")


def parse_key(text: str) -> tuple[str, tuple[int, ...]]:
    """``family:AxBxC`` (``matmul:256x256x256``, ``row_sum:300000x33``, ``fma:777777``)."""
    family, _, shape = text.partition(":")
    sides = {"matmul": 3, "row_sum": 2, "fma": 1}
    try:
        found = tuple(int(side) for side in shape.split("x"))
    except ValueError:
        found = ()
    if family not in sides or len(found) != sides[family] or min(found, default=0) < 1:
        raise argparse.ArgumentTypeError(
            f"--key takes matmul:MxNxK, row_sum:ROWSxCOLS or fma:N with sizes >= 1, got {text!r}")
    return family, found


# -- the figures -----------------------------------------------------------------------------------


def spearman(first: dict[int, float], second: dict[int, float]) -> float | None:
    """The rank correlation of two candidates' figures over the candidates both have (ties take
    their average rank); None with fewer than three in common or no spread in either."""
    common = sorted(set(first) & set(second))
    if len(common) < 3:
        return None
    ranks = [_ranks([figures[index] for index in common]) for figures in (first, second)]
    mean = (len(common) + 1) / 2
    spread = [math.sqrt(sum((rank - mean) ** 2 for rank in each)) for each in ranks]
    if not all(spread):
        return None
    return sum((a - mean) * (b - mean) for a, b in zip(*ranks, strict=True)) / (spread[0] * spread[1])


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def regret(figures: dict[int, float], pick: int) -> float:
    """``pick``'s figure over the best, minus one; infinite where ``pick`` has none (wrong, or
    not measured this way)."""
    if pick not in figures or not figures:
        return math.inf
    return figures[pick] / min(figures.values()) - 1


# -- measuring -------------------------------------------------------------------------------------


def wall(device: NativeDevice, run: Callable[[], Any]) -> tuple[float, Any]:
    """``run`` timed by the wall clock from an idle queue until the queue is done with it."""
    run_inline(device.sync())
    started = time.perf_counter()
    answer = run()
    run_inline(device.sync())
    return time.perf_counter() - started, answer


class Ways:
    """How one key's candidates are measured: ``launches`` (R) a wall-clock sample, each
    candidate's calibrated repeats for ``ts``."""

    def __init__(self, device: NativeDevice, args: Any, launches: int, floor: float) -> None:
        self.device, self.args, self.launches, self.floor = device, args, launches, floor
        self.repeats: dict[int, int] = {}

    def prepare(self, index: int, pipeline: Any, grid: tuple) -> None:
        """The call's first launch of the candidate (its bind groups made), then its repeats."""
        self.device.launch(pipeline, self.args, grid)
        run_inline(self.device.sync())
        self.repeats[index] = run_inline(calibrate(self.device, pipeline, self.args, grid, self.floor))[0]

    def measure(self, way: str, index: int, pipeline: Any, grid: tuple) -> dict[str, float]:
        device, args, launches = self.device, self.args, self.launches
        if way == "ts1":
            return {"ts1": seconds_of(device, pipeline, args, grid, 1)}
        if way == "ts":
            return {"ts": seconds_of(device, pipeline, args, grid, self.repeats[index])}
        if way == "pass":
            seconds, timed = wall(device, lambda: run_inline(device.profile(pipeline, args, grid, launches)))
            gpu = run_inline(device.resolve(timed))
            return {"pass": seconds / launches} | ({"tsR": gpu / launches} if device.timestamps else {})
        if way == "batch":
            def batched() -> None:
                with Batch(device):
                    for _ in range(launches):
                        device.launch(pipeline, args, grid)
            return {"batch": wall(device, batched)[0] / launches}
        if way == "alone":
            def alone() -> None:
                for _ in range(launches):
                    device.launch(pipeline, args, grid)
            return {"alone": wall(device, alone)[0] / launches}
        raise ValueError(f"no way {way!r}")


def screen(ways: Ways, pipelines: dict[int, tuple]) -> dict[int, float]:
    """Each candidate prepared (:meth:`Ways.prepare`), and those over :data:`SLOW` times the
    fastest by the better of two ``ts`` samples: their time over the fastest's. Sampling them
    would cost most of the run (a row a workgroup on lavapipe: 100x) and no tuner should pick them."""
    first = {}
    for index, (pipeline, grid) in pipelines.items():
        ways.prepare(index, pipeline, grid)
        first[index] = min(ways.measure("ts", index, pipeline, grid)["ts"] for _ in range(2))
    best = min(first.values())
    return {index: seconds / best for index, seconds in first.items() if seconds > SLOW * best}


def sample(ways: Ways, pipelines: dict[int, tuple], rounds: int) -> dict[str, dict[int, list[float]]]:
    """Every way's samples of every candidate (seconds a launch, each prepared), over
    interleaved rounds."""
    measured = [way for way in WAYS if way not in ("tuner", "tsR")]
    samples: dict[str, dict[int, list[float]]] = {way: {index: [] for index in pipelines} for way in WAYS[1:]}
    for round_ in range(rounds):
        for way in measured[round_ % len(measured):] + measured[:round_ % len(measured)]:
            for index, (pipeline, grid) in pipelines.items():
                for name, seconds in ways.measure(way, index, pipeline, grid).items():
                    if math.isfinite(seconds) and seconds > 0:
                        samples[name][index].append(seconds)
    return samples


def run_key(device: NativeDevice, family: str, shape: tuple[int, ...], options: argparse.Namespace,
            compiled: dict, floor: float, report: Report) -> dict | None:
    """One key measured and printed; its row for the summary (None when nothing was right)."""
    started = time.perf_counter()
    workload = workload_of(family, shape)
    names = [kernel.name for kernel in workload.tunables.candidates]
    args, inputs = workload.make(device)
    want = workload.expected(inputs)
    pipelines, wrong = checked_candidates(device, workload, args, want, compiled)
    title = f"{family} {workload.label} [{workload.tunables.key(args)}]"
    correct = {index: found for index, found in pipelines.items() if index not in wrong}
    if not correct:
        report.line(f"{title}: none of {len(pipelines)} fitting candidates is right")
        return None
    tune_started = time.perf_counter()
    picked, outcome = fresh_tune(device, workload, args, pipelines, options.policy)
    tune_seconds = time.perf_counter() - tune_started
    pick = workload.tunables.index_of[picked]
    ways = Ways(device, args, options.launches, floor)
    slow = screen(ways, correct)
    samples = sample(ways, {index: found for index, found in correct.items() if index not in slow}, options.rounds)
    figures = {way: {index: statistics.median(values) for index, values in by_index.items() if values}
               for way, by_index in samples.items()}
    figures["tuner"] = {index: result.stats.median for index, result in enumerate(outcome.results)
                        if isinstance(result, Measured) and result.stats is not None} if outcome else {}
    report.line(f"{title}: {len(correct)} right of {len(pipelines)} fitting ({len(correct) - len(slow)} sampled), "
                f"tuner picked {picked} in {tune_seconds:.2f} s; measured in {time.perf_counter() - started:.1f} s")
    for index, why in wrong.items():
        report.line(f"  wrong, excluded: {names[index]}: {why}")
    if slow:
        report.line(f"  slow, not sampled ({len(slow)}, times the fastest): "
                    + ", ".join(f"{names[index]}{' (the pick)' if index == pick else ''} {ratio:.0f}x"
                                for index, ratio in sorted(slow.items(), key=lambda item: item[1])))
    print_candidates(report, figures, names, pick, options.all)
    winners = {way: min(figures[way], key=figures[way].get) for way in ORACLES if figures[way]}
    regrets = {way: regret(figures[way], pick) for way in WAYS if figures[way]}
    report.line("  winners: " + ", ".join(f"{way} {names[index]} {figures[way][index] * 1e6:.2f} us"
                                          for way, index in winners.items()))
    report.line("  the pick's regret: " + ", ".join(f"{way} {percent(value)}" for way, value in regrets.items()))
    correlations = {(way, oracle): spearman(figures[way], figures[oracle])
                    for way in WAYS for oracle in ("alone", "batch") if way != oracle}
    report.line("  rank correlation with alone / batch: " + ", ".join(
        f"{way} {fmt(correlations.get((way, 'alone')))} / {fmt(correlations.get((way, 'batch')))}"
        for way in WAYS if way not in ("alone", "batch")) + f", alone~batch {fmt(correlations[('alone', 'batch')])}")
    against_graph = torch_beside(report, workload, inputs, figures["tsR"], pick)
    for buffer in args.buffers:
        buffer.destroy()
    return {"key": f"{family} {workload.label}", "pick": picked, "ok": f"{len(correct)}/{len(pipelines)}",
            "winners": {way: names[index] for way, index in winners.items()}, "regrets": regrets,
            "vs graph": against_graph,
            "ts~batch": correlations.get(("ts", "batch")), "tuner~batch": correlations.get(("tuner", "batch"))}


def torch_beside(report: Report, workload: Workload, inputs: dict, gpu: dict[int, float], pick: int) -> float | None:
    """torch's time for the key, as a Python loop and as a CUDA graph (the GPU's own time), beside the
    GPU's time of the best candidate and of the pick (``tsR``: timestamps around a pass of R launches);
    printed, and the pick's time over the graph's returned (None without torch on a CUDA GPU)."""
    if not CUDA or workload.torch_figure is None or not gpu:
        return None
    what, seconds = workload.torch_figure(inputs)
    best = min(gpu.values())
    pick_seconds = gpu.get(pick)
    graph = f"graph {seconds.graph * 1e6:.2f} us" if seconds.graph else "no graph"
    line = (f"  torch ({what}): plain {seconds.plain * 1e6:.2f} us, {graph} a launch; "
            f"by tsR the best {best * 1e6:.2f} us")
    if seconds.graph:
        line += f" ({best / seconds.graph:.2f}x the graph)"
    if pick_seconds is not None:
        line += f", the pick {pick_seconds * 1e6:.2f} us"
        if seconds.graph:
            line += f" ({pick_seconds / seconds.graph:.2f}x)"
    report.line(line)
    return pick_seconds / seconds.graph if pick_seconds is not None and seconds.graph else None


def print_candidates(report: Report, figures: dict[str, dict[int, float]], names: list[str], pick: int,
                     every: bool) -> None:
    order = sorted(figures["batch"], key=figures["batch"].get)
    marked = {pick} | {min(figures[way], key=figures[way].get) for way in WAYS if figures[way]}
    shown = order if every else [index for position, index in enumerate(order) if position < SHOWN or index in marked]
    width = max(len(names[index]) for index in order)
    report.line(f"    {'candidate (us a launch)':{width + 3}} " + " ".join(f"{way:>7}" for way in WAYS))
    for index in shown:
        flags = ("P" if index == pick else " ") + ("*" if index in marked - {pick} else " ")
        cells = " ".join(f"{figures[way][index] * 1e6:>7.2f}" if index in figures[way] else f"{'-':>7}"
                         for way in WAYS)
        report.line(f"    {flags} {names[index]:{width}} {cells}")
    if len(shown) < len(order):
        report.line(f"    ... {len(order) - len(shown)} more (--all prints them); P: the tuner's pick, "
                    "*: a way's winner")


def percent(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value * 100:+.1f}%"


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def summary(report: Report, rows: list[dict], failed: list[str]) -> None:
    report.line("")
    report.line(f"{'key':26} {'ok/fit':>7} {'tuner pick':32} {'winner by batch':32} "
                + " ".join(f"{'vs ' + way:>9}" for way in ("ts", *ORACLES)) + "  ts~batch tuner~batch  pick/graph")
    for row in rows:
        report.line(f"{row['key']:26} {row['ok']:>7} {row['pick']:32} {row['winners'].get('batch', '-'):32} "
                    + " ".join(f"{percent(row['regrets'].get(way, math.inf)):>9}" for way in ("ts", *ORACLES))
                    + f"  {fmt(row['ts~batch']):>8} {fmt(row['tuner~batch']):>11}  {fmt(row.get('vs graph')):>10}")
    for way in ("ts", *ORACLES):
        values = [row["regrets"].get(way, math.inf) for row in rows]
        if values:
            within = sum(1 for value in values if value <= WITHIN)
            report.line(f"the pick within {WITHIN:.0%} of the best by {way:5}: {within}/{len(values)} keys "
                        f"({within / len(values):.0%}); regret median {percent(statistics.median(values))}, "
                        f"max {percent(max(values))}")
    if failed:
        report.line(f"failed ({len(failed)}): {', '.join(failed)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="tiny keys and few launches, for lavapipe")
    parser.add_argument("--key", action="append", type=parse_key, help="family:SHAPE instead of the defaults")
    parser.add_argument("--draw", type=int, default=0, metavar="N", help="also N random shapes a family")
    parser.add_argument("--seed", type=int, help="the draw's seed (default: a fresh one, printed)")
    parser.add_argument("--only", action="append", choices=FAMILIES, help="only this family (repeatable)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 9; --small 3)")
    parser.add_argument("--launches", type=int, help="R, launches a wall-clock sample (default 100; --small 6)")
    parser.add_argument("--policy", default="adaptive", choices=("adaptive", "fixed"), help="the tuner's policy")
    parser.add_argument("--deadline", type=float, default=math.inf, metavar="S",
                        help="start no key after S seconds (the rest are listed as not run)")
    parser.add_argument("--all", action="store_true", help="print every candidate, not the fastest few")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    options = parser.parse_args(argv)
    options.rounds = options.rounds or (3 if options.small else 9)
    options.launches = options.launches or (6 if options.small else 100)
    if options.rounds < 1 or options.launches < 1 or options.draw < 0:
        parser.error("--rounds and --launches need at least 1, --draw at least 0")
    seed = options.seed if options.seed is not None else fresh_seed()
    keys = list(options.key or (SMALL_KEYS if options.small else GPU_KEYS))
    drawn = [(family, shape) for family in FAMILIES for shape in draw(family, options.draw, seed, options.small)]
    keys = [(family, shape) for family, shape in keys + drawn if not options.only or family in options.only]
    device = NativeDevice.open()
    grain = run_inline(clock_grain(device))
    floor = sample_floor(grain, Config.from_env(cache=False, log_level="disabled"))
    started = time.perf_counter()
    with report_to(options.out, device.adapter_info, argv) as report:
        report.line(f"timing {device.timing}, clock grain {grain * 1e6:.2f} us, the tuner's sample floor "
                    f"{floor * 1e6:.1f} us; R = {options.launches} launches a wall-clock sample, "
                    f"{options.rounds} rounds; policy {options.policy}")
        if options.draw:
            report.line(f"drawn with --seed {seed}: " + "; ".join(
                f"{family} {', '.join('x'.join(map(str, shape)) for f, shape in drawn if f == family)}"
                for family in FAMILIES))
        compiled: dict = {}
        rows: list[dict] = []
        failed: list[str] = []
        for position, (family, shape) in enumerate(keys):
            if time.perf_counter() - started > options.deadline:
                report.line(f"deadline: {len(keys) - position} keys not run: " + ", ".join(
                    f"{f} {'x'.join(map(str, found))}" for f, found in keys[position:]))
                break
            try:
                row = run_key(device, family, shape, options, compiled, floor, report)
            except Exception as error:  # one key's failure (a tune that found nothing): the rest go on
                failed.append(f"{family} {'x'.join(map(str, shape))}")
                report.line(f"{failed[-1]}: FAILED: {type(error).__name__}: {error}")
                continue
            if row is not None:
                rows.append(row)
        summary(report, rows, failed)
        report.line(f"ran {len(keys)} keys in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
