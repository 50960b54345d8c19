"""Where a launch's time goes, part by part, for the candidates of a few keys (issue 29).

For each candidate of each key (those that fit and run, as ``bench/regret.py`` takes them), one
pass of R launches is recorded, ended, finished and submitted, and each part is timed on the
host; the pass's GPU span is read from timestamps around it. Two encodings are timed: ``each``
sets every stage's pipeline and bind group in every launch (how the tuner's timed passes have
been recorded), ``elided`` sets them only where they change (how a batch records). The batch's
own wall clock over R launches (``tuner.batch()``) is beside them. Figures are medians over
rounds, in microseconds a launch. ``record`` is the pass's recording with its launch steps
worked out once; ``tuner`` records R launches as a timed pass of the tuner and a batch do
(``WebGPUDevice._encode``: ``launch_steps`` each launch, then ``encode_launches``), which is what
a launch's host time in the tuner's figures is.

Usage::

    python bench/launch_parts.py --key 88x88x2360 --key 189x1170x868
    python bench/launch_parts.py --key 88x88x2360 --match '_kg|rows'   # only those candidates

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from regret import candidates_of  # bench/regret.py

from kernels import matmul_shape, matmul_workload  # bench/kernels.py
from wgtune import run_inline
from wgtune.backends.batch_recorder import NOTHING_BOUND, encode_launches
from wgtune.backends.native import NativeDevice
from wgtune.backends.webgpu import TimedPass
from wgtune.batch import Batch

PARTS = ("record", "end", "finish", "submit", "gpu")


def parts_of(device: NativeDevice, pipeline, args, grid, launches: int, elided: bool) -> dict[str, float]:
    shim = device.shim
    steps = pipeline.steps(args, grid, device._bind_groups)
    run_inline(device.sync())
    times = [time.perf_counter()]
    encoder = shim.create_command_encoder()
    compute = shim.begin_compute_pass(encoder, timestamp_writes=device._timestamp_writes)
    if elided:
        encode_launches(device._pass_commands, compute, steps, launches, NOTHING_BOUND)
    else:  # as if nothing were set: every stage's pipeline and groups set again each launch
        for _ in range(launches):
            encode_launches(device._pass_commands, compute, steps, 1, NOTHING_BOUND)
    times.append(time.perf_counter())
    shim.end(compute)
    times.append(time.perf_counter())
    readback = shim.create_buffer(16, shim.COPY_DST | shim.MAP_READ)
    shim.resolve_query_set(encoder, device._queries, 0, 2, device._resolve_buffer, 0)
    shim.copy_buffer_to_buffer(encoder, device._resolve_buffer, 0, readback, 0, 16)
    times.append(time.perf_counter())
    buffer = encoder.finish()
    times.append(time.perf_counter())
    shim.queue.submit([buffer])
    times.append(time.perf_counter())
    begin, end = run_inline(device._timestamps(TimedPass(readback=readback)))
    record, ended, _, finished, submitted = (b - a for a, b in itertools.pairwise(times))
    return {"record": record / launches, "end": ended / launches, "finish": finished / launches,
            "submit": submitted / launches, "gpu": (end - begin) * 1e-9 / launches}


def tuner_record(device: NativeDevice, pipeline, args, grid, launches: int) -> float:
    """Seconds a launch to record a pass of ``launches`` as the tuner's timed passes record it."""
    started = time.perf_counter()
    device._encode(pipeline, args, grid, launches, None)
    return (time.perf_counter() - started) / launches


def batch_wall(device: NativeDevice, pipeline, args, grid, launches: int) -> float:
    run_inline(device.sync())
    started = time.perf_counter()
    with Batch(device):
        for _ in range(launches):
            device.launch(pipeline, args, grid)
    run_inline(device.sync())
    return (time.perf_counter() - started) / launches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--key", action="append", required=True, type=matmul_shape, metavar="MxNxK",
                        help="a matmul shape (repeatable)")
    parser.add_argument("--launches", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--match", metavar="REGEX", help="only the candidates whose name this finds")
    options = parser.parse_args(argv)
    device = NativeDevice.open()
    compiled: dict = {}
    for key in options.key:
        workload = matmul_workload(*key)
        args, _ = workload.make(device)
        pipelines = candidates_of(device, workload, args, compiled, options.match)
        names = [kernel.name for kernel in workload.tunables.candidates]
        figures: dict[int, dict[str, list[float]]] = {index: {} for index in pipelines}
        for _ in range(options.rounds):
            for index, (pipeline, grid) in pipelines.items():
                for elided in (False, True):
                    for part, value in parts_of(device, pipeline, args, grid, options.launches, elided).items():
                        figures[index].setdefault(f"{'el' if elided else 'ea'}_{part}", []).append(value)
                figures[index].setdefault("tuner", []).append(
                    tuner_record(device, pipeline, args, grid, options.launches))
                wall = batch_wall(device, pipeline, args, grid, options.launches)
                figures[index].setdefault("batch", []).append(wall)
        print(f"matmul {workload.label}: us a launch (ea_: sets in every launch; el_: sets elided), "
              f"R = {options.launches}")
        columns = [f"{e}_{p}" for e in ("ea", "el") for p in PARTS] + ["tuner", "batch"]
        print(f"  {'candidate':44} " + " ".join(f"{c:>9}" for c in columns))
        medians = {index: {c: statistics.median(v) * 1e6 for c, v in f.items()} for index, f in figures.items()}
        for index in sorted(medians, key=lambda i: medians[i]["batch"]):
            stages = 1 + len(workload.tunables.candidates[index].then)
            print(f"  {names[index] + f' ({stages})':44} " + " ".join(f"{medians[index][c]:9.2f}" for c in columns))
        for buffer in args.buffers:
            buffer.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
