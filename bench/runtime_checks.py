"""Each candidate compiled with and without WebGPU's runtime checks, timed side by side in one
run: what ``Kernel.runtime_checks`` gains, and whether each set's choice of it is the faster.

For each shape (``bench/kernel_probe.py``'s lists), every candidate the key's plan does not skip
is timed twice in a row, once compiled each way, after both forms' outputs are checked against a
float64 reference (``kernel_probe.measure``). Printed per shape: the best candidate each way and
their ratio; at the end, per candidate, the median ratio (unchecked / checked speed) over the
shapes where it came within 10% of that shape's best, and the candidates whose set's choice lost
there by more than ``--margin``: the list that ``matmul_tiles.CHECKED`` and the reductions'
``unchecked`` are drawn from. A candidate that is ``slow`` or ``wrong`` either way is left out.

Usage::

    python bench/runtime_checks.py                       # small shapes, minutes on lavapipe
    python bench/runtime_checks.py --full                # the H200 shapes
    python bench/runtime_checks.py --full --only matmul --shapes 0:8
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_probe import (  # bench/kernel_probe.py: the shapes, problems and checked timing
    FMA_FULL,
    FMA_SMALL,
    MATMUL_FULL,
    MATMUL_SMALL,
    REDUCTION_FULL,
    REDUCTION_SMALL,
    Problem,
    fma_problem,
    forced_runtime_checks,
    matmul_problem,
    measure,
    reduction_problem,
)

from wgtune.backends.native import NativeDevice
from wgtune.kernels import reduction
from wgtune.kernels.bandwidth import fma_set
from wgtune.kernels.matmul import matmul_set
from wgtune.tune.plan import Plan

NEAR_BEST = 0.9  # a candidate counts on a shape where its faster form is within 10% of the best


def pair(device: NativeDevice, problem: Problem, compiled: dict, samples: int, min_sample: float) -> list[dict]:
    """Every planned candidate of ``problem`` timed checked then unchecked: one row each, with
    both rates (None where that form is slow or wrong) and the set's own choice."""
    forms = {checks: replace(problem, tunables=forced_runtime_checks(problem.tunables, checks))
             for checks in ("on", "off")}
    plan = Plan(problem.tunables.candidates, problem.tunables.key(problem.args))
    rows, best = [], math.inf
    for index, kernel in enumerate(problem.tunables.candidates):
        if index in plan.skipped:
            continue
        rates = {}
        for checks, form in forms.items():
            result = measure(device, form, compiled.setdefault(checks, {}), index, best, samples, min_sample)
            rates[checks] = result["rate"] if result["status"] == "ok" else None
            if result["status"] == "ok":
                best = min(best, result["seconds"])
        rows.append({"candidate": kernel.name, "on": rates["on"], "off": rates["off"],
                     "set_checks": kernel.runtime_checks})
    return rows


def report(family: str, shapes: dict[str, list[dict]], margin: float) -> None:
    """The per-candidate medians and the set's choices that lost, for one family."""
    ratios: dict[str, list[float]] = {}
    losses: dict[str, list[str]] = {}
    for shape, rows in shapes.items():
        timed = [row for row in rows if row["on"] and row["off"]]
        if not timed:
            continue
        best = max(max(row["on"], row["off"]) for row in timed)
        for row in timed:
            if max(row["on"], row["off"]) < NEAR_BEST * best:
                continue
            ratio = row["off"] / row["on"]
            ratios.setdefault(row["candidate"], []).append(ratio)
            chosen_loses = ratio < 1 - margin if not row["set_checks"] else ratio > 1 + margin
            if chosen_loses:
                losses.setdefault(row["candidate"], []).append(f"{shape} {ratio:.3f}")
    print(f"\n{family}: unchecked / checked speed, per candidate, where it is within 10% of a shape's best")
    for name, found in sorted(ratios.items(), key=lambda item: statistics.median(item[1])):
        print(f"  {name:48} {len(found):2} shapes  median {statistics.median(found):.3f}  "
              f"range {min(found):.3f}-{max(found):.3f}")
    every = [ratio for found in ratios.values() for ratio in found]
    if every:
        print(f"  over all: median {statistics.median(every):.3f} of {len(every)} (candidate, shape) pairs")
    if losses:
        print(f"{family}: the set's choice lost by over {margin:.0%} (unchecked / checked where it loses):")
        for name, where in sorted(losses.items()):
            print(f"  {name:48} {'; '.join(where)}")
    else:
        print(f"{family}: the set's choice lost by over {margin:.0%} nowhere")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the H200 shapes")
    parser.add_argument("--only", action="append", help="matmul, row_sum, row_max or fma (repeatable)")
    parser.add_argument("--shapes", default=":", help="a slice of each family's shape list, as START:STOP")
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--min-sample", type=float, default=5e-4)
    parser.add_argument("--margin", type=float, default=0.02, help="how far the set's choice may lose (default 2%%)")
    parser.add_argument("--deadline", type=float, default=math.inf, help="start no shape after this many seconds")
    options = parser.parse_args(argv)
    start, _, stop = options.shapes.partition(":")
    part = slice(int(start) if start else None, int(stop) if stop else None)
    only = options.only or ["matmul", "row_sum", "row_max", "fma"]
    device = NativeDevice.open()
    print(f"adapter: {device.adapter_info.get('device', '?')}; each candidate timed checked, then unchecked",
          flush=True)
    jobs = []
    if "matmul" in only:
        tunables = matmul_set()
        jobs += [("matmul", lambda s=s: matmul_problem(device, tunables, *s))
                 for s in (MATMUL_FULL if options.full else MATMUL_SMALL)[part]]
    for op in ("sum", "max"):
        if f"row_{op}" in only:
            tunables_op = reduction.reduction_set(op)
            jobs += [(f"row_{op}", lambda s=s, op=op, t=tunables_op: reduction_problem(device, t, op, *s))
                     for s in (REDUCTION_FULL if options.full else REDUCTION_SMALL)[part]]
    if "fma" in only:
        tunables_fma = fma_set()
        jobs += [("fma", lambda n=n: fma_problem(device, tunables_fma, n))
                 for n in (FMA_FULL if options.full else FMA_SMALL)[part]]
    began, compiled = time.perf_counter(), {}
    found: dict[str, dict[str, list[dict]]] = {}
    for family, job in jobs:
        if time.perf_counter() - began > options.deadline:
            print("deadline reached: the remaining shapes are not timed", flush=True)
            break
        problem = job()
        started = time.perf_counter()
        rows = pair(device, problem, compiled.setdefault(family, {}), options.samples, options.min_sample)
        found.setdefault(family, {})[problem.label] = rows
        timed = [row for row in rows if row["on"] and row["off"]]
        if timed:
            on = max(timed, key=lambda row: row["on"])
            off = max(timed, key=lambda row: row["off"])
            print(f"{family:7} {problem.label:16} checked {on['candidate']} {on['on']:,.1f} | unchecked "
                  f"{off['candidate']} {off['off']:,.1f} | {off['off'] / on['on']:.3f}x | {len(timed)} timed "
                  f"in {time.perf_counter() - started:.1f} s", flush=True)
        for buffer in problem.args.buffers:
            buffer.destroy()
    for family, shapes in found.items():
        report(family, shapes, options.margin)
    print(f"timed in {time.perf_counter() - began:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
