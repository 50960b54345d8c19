"""Every candidate of every built-in family on shapes drawn afresh, each one's output checked.

The tests check every candidate on fixed odd sizes, and a tune checks its candidates before one
may win; both on sizes someone chose. This draws shapes nobody chose (seeded and printed: ``--seed``
draws them again), from one element to the sizes a GPU tunes, and for each shape runs every
candidate its key plans and the device fits, once, launched as a user's call launches it
(``Device.launch``: WebGPU's refusals checked first), on an output buffer filled with NaN (so an
element no one writes shows), comparing the output with the exact one (numpy in float64, torch
on a CUDA GPU) within the set's tolerance (``bench/checked_oracle.py``'s rule, the core's).

A candidate is *wrong* when it gives another answer, *failed* when it raises anything but a
refusal, and *refused* when WebGPU refuses the launch (``LaunchRefused``: a buffer past what the
device binds, a grid past its workgroups per dimension): a limit of the device, said with its
reason, not a wrong kernel. The draws keep each buffer within the device's binding limit, so
refusals are rare. Pipelines are compiled once per candidate and kept across shapes.

Printed: a line per shape (right / run, refused, the plan's skipped), each wrong or failed
candidate with why, and a summary. The exit status is 1 when any candidate is wrong or failed.

Usage::

    python bench/fresh_checks.py                      # 20 shapes a family, minutes on lavapipe
    python bench/fresh_checks.py --seed 12 --count 5 --only matmul
    python bench/fresh_checks.py --work 5e10          # GPU sizes (the work bounds M*N*K)
    python bench/fresh_checks.py --dawn               # on Dawn (Tint, as Chromium compiles): its f16 set
                                                      # takes the subgroup-matrix tiles where the GPU has them
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checked_oracle import allowance, closeness, disagreement  # bench/checked_oracle.py
from held_out import fresh_seed, log_uniform  # bench/held_out.py
from run_info import Report, report_to  # bench/run_info.py

from kernels import (  # bench/kernels.py: the workloads and their exact outputs
    Workload,
    fma_workload,
    matmul_f16_workload,
    matmul_workload,
    open_device,
    reduction_workload,
)
from wgtune import run_inline
from wgtune.backends.native import NativeDevice
from wgtune.errors import ConfigError, LaunchRefused
from wgtune.gpu.device import check_limits
from wgtune.tune.plan import Plan

__all__ = ["Checked", "check_shape", "draw", "main"]

WORK = 3e8  # the default bound on a shape's work: M*N*K for matmul, 16 x the elements for the rest
MATMUL_SIDES = (8192, 8192, 65536)  # the most of M, N and K drawn
REDUCTION_SIDE = 4_000_000  # the most rows, and the most columns
ELEMENT_WORK = 16  # the work an element of a reduction or an fma counts for


def _matmul(rng: random.Random, work: float, binding: int, element: int) -> tuple[int, ...] | None:
    m, n, k = (log_uniform(rng, 1, side) for side in MATMUL_SIDES)
    fits = max(m * k, k * n, m * n) * element <= binding
    return (m, n, k) if m * n * k <= work and fits else None


def _reduction(rng: random.Random, work: float, binding: int) -> tuple[int, ...] | None:
    rows, cols = log_uniform(rng, 1, REDUCTION_SIDE), log_uniform(rng, 1, REDUCTION_SIDE)
    return (rows, cols) if rows * cols * ELEMENT_WORK <= work and rows * cols * 4 <= binding else None


def _fma(rng: random.Random, work: float, binding: int) -> tuple[int, ...] | None:
    n = log_uniform(rng, 1, min(work / ELEMENT_WORK, binding // 4))
    return (n,)


@dataclass(frozen=True)
class FamilyDraw:
    """How to draw one family's shapes and make a workload of one."""

    shape: Callable[[random.Random, float, int], tuple[int, ...] | None]  # None: drawn outside the bounds
    workload: Callable[..., Workload | None]


FAMILIES: dict[str, FamilyDraw] = {
    "matmul": FamilyDraw(lambda rng, work, binding: _matmul(rng, work, binding, 4), matmul_workload),
    "matmul_f16": FamilyDraw(lambda rng, work, binding: _matmul(rng, work, binding, 2), matmul_f16_workload),
    "fma": FamilyDraw(_fma, fma_workload),
    "row_sum": FamilyDraw(_reduction, lambda rows, cols: reduction_workload("sum", rows, cols)),
    "row_max": FamilyDraw(_reduction, lambda rows, cols: reduction_workload("max", rows, cols)),
}


def draw(family: str, count: int, seed: int, work: float, binding: int) -> list[tuple[int, ...]]:
    """``count`` distinct shapes of ``family`` within ``work`` and the binding limit, from ``seed``
    (the same shapes for the same arguments everywhere)."""
    rng = random.Random(f"{family}:{seed}")
    found: list[tuple[int, ...]] = []
    for _ in range(1000 * count):
        if len(found) == count:
            return found
        shape = FAMILIES[family].shape(rng, work, binding)
        if shape is not None and shape not in found:
            found.append(shape)
    raise RuntimeError(f"drew only {len(found)} of {count} {family} shapes within work {work:g}")


@dataclass
class Checked:
    """What one shape's candidates gave."""

    shape: str
    right: list[str] = field(default_factory=list)
    wrong: dict[str, str] = field(default_factory=dict)  # name -> how its output differs
    failed: dict[str, str] = field(default_factory=dict)  # name -> the error it raised
    refused: dict[str, str] = field(default_factory=dict)  # name -> why WebGPU refused its launch
    skipped: int = 0  # candidates the key's plan does not serve, or the device does not fit
    unfit: str | None = None  # why one candidate the plan serves does not fit the device
    closest: tuple[float, str] = (0.0, "")  # the right candidate nearest the tolerance: its share of it, its name


def check_shape(device: NativeDevice, workload: Workload, compiled: dict[str, object]) -> Checked:
    """Run every candidate of ``workload`` its key plans and ``device`` fits, once each, on a
    NaN-filled output, and sort them by what they gave (``compiled`` keeps pipelines by
    fingerprint across calls)."""
    checked = Checked(f"{workload.family} {workload.label}")
    args, inputs = workload.make(device)
    want = workload.expected(inputs)
    tunables = workload.tunables
    skipped = Plan(tunables.candidates, tunables.key(args)).skipped
    _typecode, atol, rtol = tunables.tolerances_for(args)[0]
    allowed = allowance(want, atol, rtol)
    out = workload.out_index
    poison = device.create_buffer(b"\xff" * args.buffers[out].size)  # every bit set: NaN in f32 and f16
    try:
        for index, kernel in enumerate(tunables.candidates):
            unfit = None if index in skipped else check_limits(kernel, device.limits, device.features)
            if index in skipped or unfit:
                checked.skipped += 1
                checked.unfit = checked.unfit or (unfit and f"{kernel.name}: {unfit}")
                continue
            output = device.clone_buffer(poison)
            call = args.with_buffers([output if slot == out else buffer for slot, buffer in enumerate(args.buffers)])
            try:
                if kernel.fingerprint() not in compiled:
                    compiled[kernel.fingerprint()] = run_inline(device.compile(kernel))
                device.launch(compiled[kernel.fingerprint()], call, tuple(kernel.grid(args)))
                got = workload.output(run_inline(device.read_buffer(output)), want.size)
            except LaunchRefused as refusal:
                checked.refused[kernel.name] = str(refusal)
                continue
            except Exception as error:  # any other failure is the candidate's, reported by name
                checked.failed[kernel.name] = f"{type(error).__name__}: {error}"
                continue
            finally:
                output.destroy()
            problem = disagreement(got, want, allowed)
            if problem:
                checked.wrong[kernel.name] = problem
            else:
                checked.right.append(kernel.name)
                checked.closest = max(checked.closest, (closeness(got, want, allowed), kernel.name))
    finally:
        poison.destroy()
        for buffer in args.buffers:
            buffer.destroy()
    return checked


def _shape_line(checked: Checked, seconds: float) -> str:
    ran = len(checked.right) + len(checked.wrong) + len(checked.failed)
    parts = [f"{len(checked.right)}/{ran} right"]
    if checked.refused:
        parts.append(f"{len(checked.refused)} refused")
    parts.append(f"{checked.skipped} not planned or not fitting")
    if checked.right:
        parts.append(f"closest {checked.closest[0]:.2f} of the tolerance")
    return f"{checked.shape:28} {', '.join(parts)}  ({seconds:.1f} s)"


def _report_shape(report: Report, checked: Checked, seconds: float) -> None:
    report.line(_shape_line(checked, seconds))
    if not checked.right and not checked.wrong and not checked.failed and not checked.refused and checked.unfit:
        report.line(f"  no candidate fits this device, e.g. {checked.unfit}")
    for kind, found in (("WRONG", checked.wrong), ("FAILED", checked.failed)):
        for name, why in found.items():
            report.line(f"  {kind} {name}: {why[:400]}")
    if checked.refused:
        name, why = next(iter(checked.refused.items()))
        report.line(f"  refused by the device, e.g. {name}: {why[:300]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, help="draw these shapes again (default: a fresh seed, printed)")
    parser.add_argument("--count", type=int, default=20, help="shapes a family (default 20)")
    parser.add_argument("--only", action="append", choices=list(FAMILIES), help="only this family (repeatable)")
    parser.add_argument("--work", type=float, default=WORK,
                        help=f"the most work a shape: M*N*K, or {ELEMENT_WORK} x the elements (default {WORK:g})")
    parser.add_argument("--dawn", action="store_true",
                        help="on Dawn's device (pip install 'wgtune[dawn]'), not wgpu-native's")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    options = parser.parse_args(argv)
    if options.count < 1 or options.work < 1:
        parser.error("--count and --work must be at least 1")
    seed = options.seed if options.seed is not None else fresh_seed()
    try:
        device = open_device(options.dawn)
    except ConfigError as error:
        parser.exit(2, f"fresh_checks.py: {error}\n")
    binding = device.limits.max_storage_binding
    compiled: dict[str, object] = {}
    totals = {"shapes": 0, "run": 0, "right": 0, "wrong": 0, "failed": 0, "refused": 0}
    closest: dict[str, tuple[float, str]] = {}  # family -> its right run nearest the tolerance, and where
    started = time.perf_counter()
    with report_to(options.out, device.adapter_info, argv) as report:
        report.line(f"seed {seed} (--seed {seed} draws these shapes again); {options.count} shapes a family, work "
                    f"at most {options.work:g}, each buffer at most {binding} bytes (the device's binding limit)")
        for family in options.only or list(FAMILIES):
            for shape in draw(family, options.count, seed, options.work, binding):
                workload = FAMILIES[family].workload(*shape)
                if workload is None:  # a family this install lacks
                    continue
                began = time.perf_counter()
                checked = check_shape(device, workload, compiled)
                _report_shape(report, checked, time.perf_counter() - began)
                totals["shapes"] += 1
                totals["right"] += len(checked.right)
                totals["wrong"] += len(checked.wrong)
                totals["failed"] += len(checked.failed)
                totals["refused"] += len(checked.refused)
                totals["run"] += len(checked.right) + len(checked.wrong) + len(checked.failed)
                if checked.right:
                    where = f"{checked.closest[1]} on {checked.shape.split()[-1]}"
                    closest[family] = max(closest.get(family, (0.0, "")), (checked.closest[0], where))
        if closest:
            report.line("right outputs' largest error, as a share of the tolerance: " + "; ".join(
                f"{family} {share:.2f} ({where})" for family, (share, where) in closest.items()))
        report.line(f"{totals['shapes']} shapes, {totals['run']} candidate runs: {totals['right']} right, "
                    f"{totals['wrong']} wrong, {totals['failed']} failed; {totals['refused']} launches refused by "
                    f"the device; {len(compiled)} pipelines compiled; {time.perf_counter() - started:.0f} s")
    return 1 if totals["wrong"] or totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
