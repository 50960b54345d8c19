"""What each command of a launch costs the host to record (issue 29): setting a pipeline, setting
a bind group, dispatching, and a whole launch of a candidate's stages.

A launch of a two-stage candidate (split K: a tile stage and a sum or zeroing stage) records a
pipeline, a bind group and a dispatch for each stage, in every launch of a timed pass or a batch,
since the stages take turns. ``bench/launch_parts.py`` splits a launch's host time into recording,
ending, finishing and submitting the pass; this splits the recording into its commands, each
repeated N times in one compute pass through the device's own calls (``_pass_commands``), so
that what sharing one bind group between a candidate's stages would save is known (session 30:
``Kernel.layout``). A line before them times a pass's own calls (its encoder, beginning it with
timestamps, ending it), the fixed part every pass pays. Microseconds a repetition, the median
over rounds.

Usage::

    python bench/pass_commands.py --candidate tile128x128_k16_reg8x8_db_sc_kg1056_w132_2p

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_probe import matmul_problem  # bench/kernel_probe.py

from kernels import matmul_shape  # bench/kernels.py
from wgtune import run_inline
from wgtune.backends.batch_recorder import NOTHING_BOUND, encode_launches, launch_steps
from wgtune.backends.native import NativeDevice
from wgtune.kernels.matmul import matmul_set


def command_costs(device: NativeDevice, steps, count: int) -> dict[str, float]:
    """Seconds a repetition of each command (of the first and last stage, in turn), of a whole
    launch with every command, and of a launch as a batch records it (``encode_launches``: where
    the stages share a bind group, ``Kernel.layout``, it stays set), each timed over ``count``
    repetitions in a pass of its own."""
    set_pipeline, set_bind_group, dispatch = device._pass_commands
    (first, (index, group, _), _grid), (last, (last_index, last_group, _), _) = steps[0], steps[-1]

    def pipelines(compute) -> None:
        set_pipeline(compute, first)
        set_pipeline(compute, last)

    def bind_groups(compute) -> None:
        set_bind_group(compute, index, group)
        set_bind_group(compute, last_index, last_group)

    def dispatches(compute) -> None:
        dispatch(compute, 1, 1, 1)
        dispatch(compute, 1, 1, 1)

    def launch(compute) -> None:
        for pipeline, (at, bound, _more), _grid in steps:
            set_pipeline(compute, pipeline)
            set_bind_group(compute, at, bound)
            dispatch(compute, 1, 1, 1)

    ones = tuple((pipeline, groups, (1, 1, 1)) for pipeline, groups, _grid in steps)
    recorded = [NOTHING_BOUND]

    def as_recorded(compute) -> None:  # as a batch records it: a pipeline or group set only where it changes
        recorded[0] = encode_launches(device._pass_commands, compute, ones, 1, recorded[0])

    stages = f"{len(steps)} stage{'s' if len(steps) > 1 else ''}"
    costs = {}
    for name, body in (("2 pipelines", pipelines), ("2 bind groups", bind_groups), ("2 dispatches", dispatches),
                       (f"a launch ({stages})", launch), ("as recorded", as_recorded)):
        encoder = device._create_command_encoder()
        compute = device._begin_compute_pass(encoder)
        set_pipeline(compute, first)
        set_bind_group(compute, index, group)
        started = time.perf_counter()
        for _ in range(count):
            body(compute)
        costs[name] = (time.perf_counter() - started) / count
        device._end_pass(compute)  # never submitted: the dispatches of 1x1x1 never run
    return costs


def pass_costs(device: NativeDevice, count: int, timestamps: bool = True) -> dict[str, float]:
    """Seconds each of a pass's own calls takes, whatever it holds (the fixed part of a pass's
    recording, which every launch in it shares): a command encoder, a compute pass begun on it
    (with timestamps, as the tuner's timed passes are, or without, as a batch's are), ending an
    empty pass and finishing its command buffer; each the mean of ``count``."""
    encoders = [None] * count
    started = time.perf_counter()
    for at in range(count):
        encoders[at] = device._create_command_encoder()
    made = time.perf_counter()
    writes = {"timestamp_writes": device._timestamp_writes} if timestamps else {}
    passes = [device._begin_compute_pass(encoder, **writes) for encoder in encoders]
    begun = time.perf_counter()
    for compute in passes:
        device._end_pass(compute)
    ended = time.perf_counter()
    for encoder in encoders:
        encoder.finish()
    finished = time.perf_counter()
    begin = "begin (timestamps)" if timestamps else "begin"
    return {"encoder": (made - started) / count, begin: (begun - made) / count, "end (empty)": (ended - begun) / count,
            "finish (empty)": (finished - ended) / count}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidate", action="append", required=True, help="a matmul candidate's name")
    parser.add_argument("--shape", type=matmul_shape, default=(96, 96, 2048), help="MxNxK of the call it binds")
    parser.add_argument("--count", type=int, default=2000, help="repetitions a pass")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args(argv)
    device = NativeDevice.open()
    tunables = matmul_set()
    problem = matmul_problem(device, tunables, *options.shape)
    by_name = {kernel.name: kernel for kernel in tunables.candidates}
    print(f"# adapter {device.identity.device}; us a repetition, the median of {options.rounds} rounds")
    if device._timestamp_writes is not None:
        passes = [pass_costs(device, min(options.count, 200)) for _ in range(options.rounds)]
        print("a pass, whatever it holds: " + "  ".join(
            f"{what} {1e6 * statistics.median(r[what] for r in passes):5.2f}" for what in passes[0]))
    for name in options.candidate:
        if name not in by_name:
            parser.error(f"no candidate {name!r} in the matmul set")
        kernel = by_name[name]
        pipeline = run_inline(device.compile(kernel))
        steps = launch_steps(device, pipeline, problem.args, tuple(kernel.grid(problem.args)))
        rounds = [command_costs(device, steps, options.count) for _ in range(options.rounds)]
        figures = "  ".join(f"{what} {1e6 * statistics.median(r[what] for r in rounds):5.2f}" for what in rounds[0])
        print(f"{name:52} {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
