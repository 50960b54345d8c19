"""Where a multi-stage matmul candidate's time goes (issue 29): each stage alone beside the whole.

A split-K candidate is two dispatches in one pass: a stage that zeroes C and the tile stage
that adds its chunk's sums into it (float atomics), or the tile stage writing partial sums and
a stage that adds them up (``_2p``). On grids of fewer blocks than SMs they trail torch by
20-35% (the draws' 302x271x1518, 437x869x1061, 194x529x6966), and what of that is the extra
stage, the gap between two dispatches, or the tile itself is not known. For each shape, every
candidate the key plans (or ``--tiles``, or ``--candidate NAME``) is timed, all with GPU
timestamps around one pass of R launches (R calibrated to ``--min-sample``, the median of
``--samples``):

- ``whole``: the candidate as a call launches it (every stage, in order, in one pass);
- ``host``: the host's time to record that pass, a launch's share (which the tuner adds to
  ``whole``: a launch in a batch pays both);
- ``stage 1``, ``stage 2``: that stage alone, R launches of it in one pass (its own grid and
  params; a later stage binds the candidate's scratch, whose contents it reads undefined);
- ``gap``: ``whole`` minus the stages' sum: what ordering the two dispatches costs beyond
  their own time (the second waits for the first to drain). A later stage alone reads scratch
  its earlier stage did not fill, so where a stage's speed depends on what it reads (the
  ``_cab`` tiles, whose first stage copies A and B into padded scratch) the stages do not add
  up (gaps of up to 192 us on an H100, ``bench/results/h100-stage-times.txt``).

Outputs are checked once against the float64 product before a candidate is timed (a wrong one
is said, not timed). A benchmark, not a test.

Usage::

    python bench/stage_times.py --shape 437x869x1061 --shape 302x271x1518
    python bench/stage_times.py --shape 437x869x1061 --candidate tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_fa
    python bench/stage_times.py --shape 96x96x512 --split-only    # lavapipe: the split candidates only
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_probe import calibrated_repeats, matmul_problem, trial_tiles  # bench/kernel_probe.py
from torch_timing import CUDA, torch  # bench/torch_timing.py

from kernels import matmul_shape, open_device  # bench/kernels.py
from wgtune import Args, Kernel, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.device import check_grid, check_limits
from wgtune.kernels.matmul import matmul_set
from wgtune.tune.plan import Plan


def timed(device: NativeDevice, pipeline, args: Args, grid, repeats: int) -> tuple[float, float]:
    """One pass of ``repeats`` launches: (GPU seconds between its timestamps, host seconds
    recording it), each a launch's share."""
    profile = run_inline(device.profile(pipeline, args, grid, repeats))
    total = run_inline(device.resolve(profile))
    return (total - profile.host) / repeats, profile.host / repeats


def median_times(device: NativeDevice, pipeline, args: Args, grid, repeats: int, samples: int) -> tuple[float, float]:
    readings = [timed(device, pipeline, args, grid, repeats) for _ in range(samples)]
    return statistics.median(r[0] for r in readings), statistics.median(r[1] for r in readings)


def stage_alone(candidate: Kernel, index: int) -> Kernel:
    """Stage ``index`` of ``candidate`` as a kernel of its own: no later stages, the candidate's
    scratch declared on it (scratch lives on a candidate's first stage)."""
    stage = candidate.stages[index]
    return replace(stage, name=f"{candidate.name}#{index + 1}", then=(), scratch=candidate.scratch)


def check(device: NativeDevice, problem, pipeline, grid) -> bool:
    """Whether the candidate's output is right, from an output buffer filled with NaN."""
    output = problem.args.buffers[problem.output]
    poison = device.create_buffer(b"\xff" * output.size)  # every bit set: NaN in f32
    device.copy_buffer(poison, output)
    poison.destroy()
    timed(device, pipeline, problem.args, grid, 1)
    return problem.ok(device.read_buffer_sync(output))


def shape_rows(device: NativeDevice, problem, chosen: list[Kernel], samples: int, min_sample: float) -> list[str]:
    timed_rows: list[tuple[float, str]] = []
    wrong: list[str] = []
    for candidate in chosen:
        why = check_limits(candidate, device.limits, device.features)
        grids = [tuple(stage.grid(problem.args)) for stage in candidate.stages]
        if why or any(check_grid(grid, device.limits) for grid in grids):
            continue
        pipeline = run_inline(device.compile(candidate))
        grid = tuple(candidate.grid(problem.args))
        if not check(device, problem, pipeline, grid):
            wrong.append(f"    {candidate.name:<52} WRONG (not timed)")
            continue
        def gpu_seconds(count: int, pipeline=pipeline, grid=grid) -> float:
            return timed(device, pipeline, problem.args, grid, count)[0]

        repeats = calibrated_repeats(gpu_seconds, min_sample)
        whole, host = median_times(device, pipeline, problem.args, grid, repeats, samples)
        stages = []
        if len(candidate.stages) > 1:
            for index, stage_grid in enumerate(grids):
                alone = run_inline(device.compile(stage_alone(candidate, index)))
                stages.append(median_times(device, alone, problem.args, stage_grid, repeats, samples)[0])
        workgroups = "+".join(str(g[0] * g[1] * g[2]) for g in grids)
        figures = "  ".join(f"{1e6 * s:8.2f}" for s in stages)
        gap = f"{1e6 * (whole - sum(stages)):7.2f}" if stages else ""
        rate = problem.work / whole / 1e9
        timed_rows.append((whole, f"    {candidate.name:<52} {1e6 * whole:8.2f} {1e6 * host:6.2f} {rate:9,.1f}  "
                            f"{figures:<18} {gap:>7}   wg {workgroups}"))
    return [text for _whole, text in sorted(timed_rows, key=lambda row: row[0])] + wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", type=matmul_shape, required=True, metavar="MxNxK")
    parser.add_argument("--tiles", action="append", help="matmul tiles instead of the set's (as kernel_probe.py)")
    parser.add_argument("--candidate", action="append", default=[], help="only this candidate (repeatable)")
    parser.add_argument("--split-only", action="store_true", help="only candidates of more than one stage")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--min-sample", type=float, default=5e-4, help="GPU seconds a timed pass lasts at least")
    options = parser.parse_args(argv)
    device = open_device()
    tunables = matmul_set(trial_tiles(options.tiles)) if options.tiles else matmul_set()
    info = device.adapter_info
    print(f"# adapter {info.get('device', '?')}; torch {torch.cuda.get_device_name() if CUDA else 'none'}; "
          f"GPU timestamps, the median of {options.samples} passes of at least {1e3 * options.min_sample:.1f} ms")
    print(f"    {'candidate (us a launch)':<52} {'whole':>8} {'host':>6} {'GFLOP/s':>9}  {'stage 1, 2':<18} "
          f"{'gap':>7}")
    for m, n, k in options.shape:
        problem = matmul_problem(device, tunables, m, n, k)
        planned = Plan(tunables.candidates, tunables.key(problem.args))
        chosen = [tunables.candidates[i] for i in sorted(set(range(len(tunables.candidates))) - set(planned.skipped))]
        if options.candidate:
            chosen = [c for c in chosen if c.name in options.candidate]
        if options.split_only:
            chosen = [c for c in chosen if len(c.stages) > 1]
        torch_us = f"torch {1e6 * problem.torch_seconds:.2f} us" if problem.torch_seconds else "no torch"
        print(f"matmul {problem.label} ({len(chosen)} candidates; {torch_us})", flush=True)
        for row in shape_rows(device, problem, chosen, options.samples, options.min_sample):
            print(row, flush=True)
        for buffer in problem.args.buffers:
            buffer.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
