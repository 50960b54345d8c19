"""Where the host's time goes in a ``tuner.batch()`` loop of ``execute`` calls (issue 29).

A long batch costs about the larger of the kernel's time and the host's a launch
(``bench/batch_rate.py``), so on short kernels the host sets the pace. This splits the host's
part of one batched ``execute`` of a tuned fma, on a hit, into what wgtune's Python does and
what wgpu-native does, by running the same loop several ways, interleaved round by round:

- ``execute``: ``tuner.execute`` in a batch, as a program calls it;
- ``launch``: the device's ``launch`` alone (no key, no lookup): what is wgtune's device layer;
- ``record``: the batch recorder's ``record`` alone: the launch's steps and its commands;
- ``commands``: one pass of the launches' commands (``set_pipeline``/``set_bind_group``/
  ``dispatch`` straight through the device's pass-command calls), its encoder, begin, end and
  finish: wgpu-native's part of the launches, with none of wgtune's Python;
- each of the first three again with the pass commands made no-ops (``(no pass commands)``): the
  same Python, and each pass's encoder, begin, end and finish (once every 128 launches), but no
  command recorded or finished. The difference to the same way with them is wgpu-native's
  recording and finishing of the launches' commands.

In every way the batch's command buffers are finished but not submitted (the queue's ``submit``
is held back), so that the GPU's work, and on a CPU adapter its threads, do not run beside the
host's. Two lines after the table split wgpu-native's part: a dispatch's recording and its
share of ``finish`` in one pass of the launches, and a pass's own cost (an empty pass: encoder,
begin, end, finish, ``pass_commands.pass_costs``), which a batch pays once every 128 launches.
Microseconds, the least and the median of ``--rounds`` rounds of ``--launches``.

Usage: ``python bench/batch_host.py`` (a few seconds). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pass_commands import pass_costs  # bench/pass_commands.py

from wgtune import Args, Config, Hit, Tuner, run_inline
from wgtune.backends.batch_recorder import NOTHING_BOUND, encode_launches, launch_steps
from wgtune.backends.native import NativeDevice
from wgtune.kernels.bandwidth import fma_set

ELEMENTS = 1 << 12
NO_COMMANDS = (lambda compute, pipeline: None, lambda compute, index, group: None,
               lambda compute, x, y, z: None)


class HeldQueue:
    """A wgpu-py queue whose ``submit`` does nothing while ``held``: the finished command buffer
    is dropped unrun (waits and reads go to the real queue)."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.held = False

    def submit(self, command_buffers: list) -> None:
        if not self.held:
            self.queue.submit(command_buffers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


def ways(tuner: Tuner, tunables: Any, args: Args, launches: int) -> dict[str, Callable[[], None]]:
    """The loops to time, by name, each of ``launches`` launches inside an open batch."""
    device = tuner.device
    state = tuner.fastest(tunables, tuner.key(tunables, args))
    assert isinstance(state, Hit), state
    pipeline = tuner._compiled[(tunables.name, state.index)]
    grid = args.cache[tunables.candidates[state.index].grid]
    recorder = device._batch
    steps = launch_steps(device, pipeline, args, grid)

    def execute() -> None:
        for _ in range(launches):
            tuner.execute(tunables, args)

    def launch() -> None:
        for _ in range(launches):
            device.launch(pipeline, args, grid)

    def record() -> None:
        for _ in range(launches):
            recorder.record(pipeline, args, grid, 1)

    def commands() -> None:
        finish_cost(device, steps, launches)  # its own split of the time unused here: the whole is timed

    return {"execute": execute, "launch": launch, "record": record, "commands": commands}


def finish_cost(device: NativeDevice, steps: Any, launches: int) -> tuple[float, float]:
    """Seconds a dispatch to record, and to finish, in one pass of ``launches`` (not submitted)."""
    encoder = device._create_command_encoder()
    compute = device._begin_compute_pass(encoder)
    started = time.perf_counter()
    encode_launches(device._pass_commands, compute, steps, launches, NOTHING_BOUND)
    recorded = time.perf_counter()
    device._end_pass(compute)
    ended = time.perf_counter()
    encoder.finish()
    return (recorded - started) / launches, (time.perf_counter() - ended) / launches


def timed_ways(device: NativeDevice, queue: HeldQueue, loops: dict[str, Callable[[], None]], launches: int,
               rounds: int) -> dict[str, list[float]]:
    """Seconds a launch of each way (and of each but ``commands`` with the pass commands as no-ops),
    by round; the queue held and the device's own commands put back whatever a loop raises."""
    real = device._pass_commands
    seen: dict[str, list[float]] = {}
    names = list(loops)
    for round_ in range(rounds):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            for quiet in (False, True) if name != "commands" else (False,):
                device._pass_commands = NO_COMMANDS if quiet else real
                queue.held = True
                try:
                    device.begin_batch()
                    started = time.perf_counter()
                    try:
                        loops[name]()
                    finally:
                        device.end_batch()  # the last part's pass ended and finished (not submitted)
                    seconds = (time.perf_counter() - started) / launches
                finally:
                    queue.held = False
                    device._pass_commands = real
                seen.setdefault(name + (" (no pass commands)" if quiet else ""), []).append(seconds)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=2048, help="launches a round (default 2048)")
    parser.add_argument("--rounds", type=int, default=9)
    options = parser.parse_args(argv)
    with NativeDevice.open() as device:
        queue = device.shim.queue = HeldQueue(device.shim.queue)
        tuner = Tuner(device, config=Config(log_level="disabled", cache=False))
        ones = struct.pack(f"<{ELEMENTS}f", *([1.0] * ELEMENTS))
        args = Args((device.create_buffer(ones), device.create_buffer(ones),
                     device.create_buffer(size=4 * ELEMENTS)), (ELEMENTS, 0.5))
        tunables = fma_set()
        winner = tuner.execute(tunables, args)  # tunes, then the call's first launch (checked)
        tuner.execute(tunables, args)  # a launch on a hit, as every one the loops time
        run_inline(device.sync())
        seen = timed_ways(device, queue, ways(tuner, tunables, args, options.launches), options.launches,
                          options.rounds)
        run_inline(device.sync())
        print(f"# adapter {device.identity.device}; fma on {ELEMENTS} floats ({winner.name}), on a hit, in a "
              f"batch; us a launch, least / median of {options.rounds} rounds of {options.launches}")
        for name, values in seen.items():
            print(f"{name:29} {1e6 * min(values):6.2f} {1e6 * statistics.median(values):6.2f}")
        steps = launch_steps(device, tuner._compiled[(tunables.name, tunables.index_of[winner.name])], args,
                             args.cache[winner.grid])
        costs = [finish_cost(device, steps, options.launches) for _ in range(options.rounds)]
        print(f"wgpu-native, a dispatch in one pass: record {1e6 * statistics.median(c[0] for c in costs):.2f}, "
              f"finish {1e6 * statistics.median(c[1] for c in costs):.2f}")
        empty = [pass_costs(device, 50, timestamps=False) for _ in range(options.rounds)]
        print(f"wgpu-native, a pass with no command: {1e6 * statistics.median(sum(c.values()) for c in empty):.2f} "
              f"in all, finish {1e6 * statistics.median(c['finish (empty)'] for c in empty):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
