"""Does a kernel's time depend on which buffers it runs on? (issue 29: picks that move between tunes)

A tune benchmarked on copies of the call's buffers (``measure.clone_args``): fresh allocations,
made again for every tune; since session 26 a native one copies only the buffers a candidate may
write (``measure.clone_written``), so its inputs are the call's. If where a buffer lands in the
GPU's memory moves a kernel's time, two tunes of one key can rank its candidates apart, and both
apart from the oracle, which times the call's own buffers. For each key this measures, on one device:

- **placements**: the call's buffers and ``--copies`` sets of copies of them (``clone_buffer``,
  the tuner's own), the fastest ``--top`` candidates (by a first reading; the picks of the tunes
  below added) each timed on every set in interleaved rounds, as the tuner times a sample (GPU
  timestamps around a pass of the repeats ``calibrate`` gives for the device's sample floor);
  printed: each candidate's median per set, its spread over the sets (slowest over fastest), and
  each set's winner;
- **tunes**: ``--tunes`` fresh tunes (no cache), each on its own copies: the pick and its regret
  against the best on the call's own buffers, and against the best by the mean over the sets
  (what a pick costs calls on buffers nobody chose).

Usage::

    python bench/placement.py --key 1410x2720x21 --key 752x20x3093
    python bench/placement.py --key 1410x2720x21 --copy out   # only the output copied: is it its place?
    python bench/placement.py --small                 # tiny keys, for lavapipe

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checked_oracle import checked_candidates  # bench/checked_oracle.py
from held_out import draw_suite, fresh_seed  # bench/held_out.py
from regret import fresh_tune, seconds_of  # bench/regret.py
from run_info import Report, report_to  # bench/run_info.py

from kernels import matmul_shape, matmul_workload  # bench/kernels.py
from wgtune import Args, Config, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.clock import clock_grain
from wgtune.tune.measure import calibrate, sample_floor

GPU_KEYS = ((1410, 2720, 21), (752, 20, 3093), (103, 599, 2385), (562, 559, 514))
SMALL_KEYS = ((48, 48, 48), (40, 24, 56))


def copies_of(device: NativeDevice, args: Args, slots: set[int]) -> Args:
    """``args`` with the buffers in ``slots`` replaced by copies (the others the call's own)."""
    return args.with_buffers([device.clone_buffer(buffer) if slot in slots else buffer
                              for slot, buffer in enumerate(args.buffers)])


def run_key(device: NativeDevice, shape: tuple[int, int, int], options: argparse.Namespace, floor: float,
            report: Report) -> list[tuple[float, float]]:
    """One key measured and printed; each tune's regret on the call's buffers and by the mean."""
    started = time.perf_counter()
    workload = matmul_workload(*shape)
    names = [kernel.name for kernel in workload.tunables.candidates]
    args, inputs = workload.make(device)
    pipelines, wrong = checked_candidates(device, workload, args, workload.expected(inputs), {})
    right = {index: found for index, found in pipelines.items() if index not in wrong}
    picks = [workload.tunables.index_of[fresh_tune(device, workload, args, pipelines, "adaptive")[0]]
             for _ in range(options.tunes)]
    everything = set(range(len(args.buffers)))
    slots = {"all": everything, "out": {workload.out_index}, "in": everything - {workload.out_index}}[options.copy]
    sets = [args] + [copies_of(device, args, slots) for _ in range(options.copies)]
    run_inline(device.sync())
    repeats = {index: run_inline(calibrate(device, pipeline, args, grid, floor))[0]
               for index, (pipeline, grid) in right.items()}
    first = {index: seconds_of(device, pipeline, args, grid, repeats[index])
             for index, (pipeline, grid) in right.items()}
    chosen = sorted(first, key=first.get)[:options.top]
    chosen += [index for index in dict.fromkeys(picks) if index not in chosen and index in right]
    samples: dict[tuple[int, int], list[float]] = {(index, s): [] for index in chosen for s in range(len(sets))}
    for round_ in range(options.rounds):
        for s in range(len(sets)):
            which = (s + round_) % len(sets)
            for index in chosen:
                pipeline, grid = right[index]
                samples[(index, which)].append(seconds_of(device, pipeline, sets[which], grid, repeats[index]))
    medians = {key: statistics.median(values) for key, values in samples.items()}
    width = max(len(names[index]) for index in chosen)
    report.line(f"matmul {'x'.join(map(str, shape))}: {len(right)} right of {len(pipelines)}; {len(chosen)} timed on "
                f"the call's buffers (set 0) and {options.copies} sets of copies ({options.copy}), "
                f"{options.rounds} rounds; "
                f"{options.tunes} tunes picked: {', '.join(names[index] for index in picks)}")
    report.line(f"    {'candidate (us a launch)':{width + 3}} "
                + " ".join(f"{'set ' + str(s):>7}" for s in range(len(sets))) + "  spread")
    for index in chosen:
        row = [medians[(index, s)] for s in range(len(sets))]
        flag = "P" if index in picks else " "
        report.line(f"    {flag}  {names[index]:{width}} " + " ".join(f"{value * 1e6:7.2f}" for value in row)
                    + f"  {max(row) / min(row) - 1:+6.1%}")
    winners = [min(chosen, key=lambda index, s=s: medians[(index, s)]) for s in range(len(sets))]
    report.line("  each set's winner: " + ", ".join(f"{s}: {names[index]}" for s, index in enumerate(winners)))
    best = min(medians[(index, 0)] for index in chosen)
    report.line("  the tunes' picks on set 0: " + ", ".join(
        f"{names[index]} {medians[(index, 0)] / best - 1:+.1%}" for index in picks))
    mean = {index: statistics.fmean(medians[(index, s)] for s in range(len(sets))) for index in chosen}
    report.line("  the tunes' picks by the mean over the sets: " + ", ".join(
        f"{names[index]} {mean[index] / min(mean.values()) - 1:+.1%}" for index in picks))
    spreads = [max(medians[(index, s)] for s in range(len(sets))) / min(medians[(index, s)] for s in range(len(sets)))
               - 1 for index in chosen]
    report.line(f"  spread over the sets: median {statistics.median(spreads):+.1%}, max {max(spreads):+.1%}; "
                f"measured in {time.perf_counter() - started:.1f} s")
    for found in sets[1:]:
        for slot in slots:
            found.buffers[slot].destroy()
    for buffer in args.buffers:
        buffer.destroy()
    return [(medians[(index, 0)] / best - 1, mean[index] / min(mean.values()) - 1) for index in picks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--key", action="append", type=matmul_shape, help="MxNxK (repeatable) instead of the defaults")
    parser.add_argument("--small", action="store_true", help="tiny keys, for lavapipe")
    parser.add_argument("--copies", type=int, default=3, help="sets of copies beside the call's buffers (3)")
    parser.add_argument("--copy", choices=("all", "out", "in"), default="all",
                        help="which of the call's buffers a set copies (the others stay the call's): all (the "
                             "tuner's way), the output only, or the inputs only; which buffer's place moves the time")
    parser.add_argument("--top", type=int, default=6, help="the fastest candidates timed (6), the picks added")
    parser.add_argument("--tunes", type=int, default=4, help="fresh tunes a key (4)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (10)")
    parser.add_argument("--draw", type=int, default=0, metavar="N", help="also N random shapes (bench/held_out.py)")
    parser.add_argument("--seed", type=int, help="the draw's seed (default: a fresh one, printed)")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    options = parser.parse_args(argv)
    if min(options.copies, options.top, options.tunes, options.rounds) < 1:
        parser.error("--copies, --top, --tunes and --rounds need at least 1")
    seed = options.seed if options.seed is not None else fresh_seed()
    drawn = [shape for shape, _ in draw_suite("matmul", options.draw, seed, options.small)]
    keys = list(options.key or ([] if drawn else SMALL_KEYS if options.small else GPU_KEYS)) + drawn
    device = NativeDevice.open()
    floor = sample_floor(run_inline(clock_grain(device)), Config.from_env(cache=False, log_level="disabled"))
    with report_to(options.out, device.adapter_info, argv) as report:
        report.line(f"timing {device.timing}, the tuner's sample floor {floor * 1e6:.1f} us"
                    + (f"; {len(drawn)} shapes drawn with --seed {seed}" if drawn else ""))
        regrets = [found for shape in keys for found in run_key(device, shape, options, floor, report)]
        for way, position in (("on the call's buffers", 0), ("by the mean over the sets", 1)):
            within = sum(1 for found in regrets if found[position] <= 0.02)
            report.line(f"the tunes' picks within 2% of the best {way}: {within}/{len(regrets)}, "
                        f"max {max(found[position] for found in regrets):+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
