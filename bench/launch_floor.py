"""The per-launch floor (issue 29): what back-to-back dispatches cost on the adapter, through wgpu-py alone.

Kernels that do (almost) nothing, one workgroup of 64 invocations a dispatch (``--groups``):

- ``empty``: no bindings;
- ``read``: one storage binding, read-only (each invocation reads one value and drops it);
- ``read_write``: one storage binding, read-write, read and dropped;
- ``write``: one storage binding, read-write, each invocation writing one value.

Each with its bind group ``kept`` (set once a pass), ``re-set`` before every dispatch (the same
group: what wgtune's timed pass does) or ``switched`` (two groups over two buffers, alternating
every dispatch: a bind group change), and each in three forms of R dispatches:

- ``pass``: R dispatches in one compute pass, one command buffer, one submission;
- ``passes``: R compute passes of one dispatch in one command buffer, one submission;
- ``submits``: R submissions of one command buffer with one pass of one dispatch.

(In ``passes`` and ``submits`` every pass sets its group, so ``re-set`` is ``kept`` there.) The
figures are microseconds a dispatch, each the median of ``--rounds`` interleaved rounds: ``host``,
until the last command was recorded and submitted; ``wall``, from the first command until the
queue is done (a small read back waits for it); ``gpu``, from the first pass's beginning
timestamp to the last pass's end (where the adapter has ``timestamp-query``; the device's
timestamps, taken as nanoseconds as wgtune takes them).

The device is opened as wgtune opens it (``NativeDevice.open``: the default high-performance
adapter, or ``--adapter N`` of ``indexed_adapters``, with the features and compute limits wgtune
asks for); everything after is wgpu-py's own calls. Pass commands go through wgpu-native's C
functions as wgtune's device records them (``--commands c``, the default) or wgpu-py's methods
(``--commands py``).

Usage::

    python bench/launch_floor.py                  # R = 1000
    python bench/launch_floor.py --launches 100   # a CPU adapter (lavapipe)

A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import wgpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_info import Report, report_to  # bench/run_info.py

from wgtune.backends.native import NativeDevice

try:  # wgtune's recording of pass commands (wgpu-native's C functions): the shim's since session 16
    from wgtune.backends.wgpu_shim import _pass_commands
except ImportError:  # a wheel from before
    try:
        from wgtune.backends.native import _pass_commands
    except ImportError:
        _pass_commands = None

WORKGROUP = 64
HEAD = "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) id: vec3<u32>) {"
KERNELS = {
    "empty": f"{HEAD} }}",
    "read": f"@group(0) @binding(0) var<storage, read> x: array<f32>;\n{HEAD} _ = x[id.x]; }}",
    "read_write": f"@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n{HEAD} _ = x[id.x]; }}",
    "write": f"@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n{HEAD} x[id.x] = f32(id.x); }}",
}
BINDS = ("kept", "re-set", "switched")
FORMS = ("pass", "passes", "submits")


@dataclass
class Case:
    """One kernel with one way of binding: its pipeline and the bind groups it cycles through."""

    kernel: str
    bind: str
    pipeline: Any
    groups: list  # empty for the kernel without bindings; two for ``switched``


class Floor:
    """The device, its queue and what each form needs: timestamps where the adapter has them."""

    def __init__(self, device: wgpu.GPUDevice, groups: int, commands: str) -> None:
        self.device, self.queue, self.groups = device, device.queue, groups
        self.sync_buffer = device.create_buffer(size=16, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        self.timestamps = "timestamp-query" in device.features
        if self.timestamps:
            self.queries = device.create_query_set(type=wgpu.QueryType.timestamp, count=2)
            self.resolved = device.create_buffer(size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE
                                                 | wgpu.BufferUsage.COPY_SRC)
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.end()
        kind = type(compute)
        if commands == "c" and _pass_commands is None:
            raise SystemExit("--commands c: this wgtune has no _pass_commands (wgpu_shim or native); use --commands py")
        self.commands = (_pass_commands(kind) if commands == "c"
                         else (kind.set_pipeline, kind.set_bind_group, kind.dispatch_workgroups))

    def cases(self) -> list[Case]:
        found = []
        size = 4 * WORKGROUP * self.groups
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
        buffers = [self.device.create_buffer(size=size, usage=usage) for _ in range(2)]
        for kernel, wgsl in KERNELS.items():
            module = self.device.create_shader_module(code=wgsl, label=kernel)
            pipeline = self.device.create_compute_pipeline(layout="auto", compute={"module": module,
                                                                                   "entry_point": "main"})
            if kernel == "empty":
                found.append(Case(kernel, "-", pipeline, []))
                continue
            layout = pipeline.get_bind_group_layout(0)
            groups = [self.device.create_bind_group(layout=layout, entries=[
                {"binding": 0, "resource": {"buffer": buffer, "offset": 0, "size": size}}]) for buffer in buffers]
            found += [Case(kernel, bind, pipeline, groups if bind == "switched" else groups[:1]) for bind in BINDS]
        return found

    def _writes(self, first: bool, last: bool) -> dict | None:
        if not self.timestamps or not (first or last):
            return None
        writes: dict = {"query_set": self.queries}
        if first:
            writes["beginning_of_pass_write_index"] = 0
        if last:
            writes["end_of_pass_write_index"] = 1
        return writes

    def _encode(self, encoder: Any, case: Case, dispatches: int, first: bool, last: bool, start: int) -> None:
        """One pass of ``dispatches`` dispatches of ``case``, its ``start``-th dispatch first."""
        set_pipeline, set_bind_group, dispatch = self.commands
        writes = self._writes(first, last)
        compute = encoder.begin_compute_pass(timestamp_writes=writes) if writes else encoder.begin_compute_pass()
        set_pipeline(compute, case.pipeline)
        groups = case.groups
        every = case.bind != "kept" and groups
        if groups and not every:
            set_bind_group(compute, 0, groups[0])
        for step in range(start, start + dispatches):
            if every:
                set_bind_group(compute, 0, groups[step % len(groups)])
            dispatch(compute, self.groups, 1, 1)
        compute.end()

    def _done(self) -> None:
        self.queue.read_buffer(self.sync_buffer)  # waits for every earlier submission

    def measure(self, case: Case, form: str, launches: int) -> dict[str, float]:
        """Seconds a dispatch: ``host``, ``wall`` and, with timestamps, ``gpu``."""
        self._done()
        started = time.perf_counter()
        if form == "pass":
            encoder = self.device.create_command_encoder()
            self._encode(encoder, case, launches, True, True, 0)
            self.queue.submit([encoder.finish()])
        elif form == "passes":
            encoder = self.device.create_command_encoder()
            for step in range(launches):
                self._encode(encoder, case, 1, step == 0, step == launches - 1, step)
            self.queue.submit([encoder.finish()])
        else:
            for step in range(launches):
                encoder = self.device.create_command_encoder()
                self._encode(encoder, case, 1, step == 0, step == launches - 1, step)
                self.queue.submit([encoder.finish()])
        recorded = time.perf_counter()
        self._done()
        ended = time.perf_counter()
        figures = {"host": (recorded - started) / launches, "wall": (ended - started) / launches}
        if self.timestamps:
            encoder = self.device.create_command_encoder()
            encoder.resolve_query_set(self.queries, 0, 2, self.resolved, 0)
            self.queue.submit([encoder.finish()])
            begin, end = memoryview(self.queue.read_buffer(self.resolved)).cast("Q")
            figures["gpu"] = (end - begin) * 1e-9 / launches if end > begin else float("nan")
        return figures


def interleaved(floor: Floor, cases: list[Case], launches: int, rounds: int) -> dict[tuple, dict[str, float]]:
    """Every case in every form, ``rounds`` times, the forms' order rotating by round: medians."""
    samples: dict[tuple, list[dict[str, float]]] = {}
    for round_ in range(rounds):
        forms = FORMS[round_ % len(FORMS):] + FORMS[:round_ % len(FORMS)]
        for case in cases:
            for form in forms:
                if form != "pass" and case.bind == "re-set":
                    continue  # every pass of one dispatch sets its group: the same as kept
                samples.setdefault((case.kernel, case.bind, form), []).append(floor.measure(case, form, launches))
    return {slot: {name: statistics.median(figure[name] for figure in found) for name in found[0]}
            for slot, found in samples.items()}


def table(report: Report, medians: dict[tuple, dict[str, float]], cases: list[Case], timestamps: bool) -> None:
    names = ("host", "wall", "gpu") if timestamps else ("host", "wall")
    cell: Callable[[dict | None], str] = lambda found: " ".join(  # noqa: E731
        f"{found[name] * 1e6:>7.2f}" if found else f"{'=':>7}" for name in names)
    report.line(f"{'':20} " + " | ".join(f"{form + ' (' + ' '.join(names) + ')':^{8 * len(names) - 1}}"
                                         for form in FORMS))
    report.line(f"{'kernel':11} {'bind':8} " + " | ".join(" ".join(f"{name:>7}" for name in names) for _ in FORMS))
    for case in cases:
        report.line(f"{case.kernel:11} {case.bind:8} " + " | ".join(
            cell(medians.get((case.kernel, case.bind, form))) for form in FORMS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=1000, help="R, dispatches a sample (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--groups", type=int, default=1, help="workgroups of 64 a dispatch (default 1)")
    parser.add_argument("--adapter", type=int, help="the adapter at this index (NativeDevice.open's adapter_index)")
    parser.add_argument("--commands", choices=("c", "py"), default="c",
                        help="pass commands through wgpu-native's C functions (as wgtune) or wgpu-py's methods")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    options = parser.parse_args(argv)
    if options.launches < 1 or options.rounds < 1 or options.groups < 1:
        parser.error("--launches, --rounds and --groups need at least 1")
    opened = NativeDevice.open(adapter_index=options.adapter)
    floor = Floor(opened.gpu, options.groups, options.commands)
    cases = floor.cases()
    for case in cases:  # compiled and run once before anything is timed
        floor.measure(case, "pass", 1)
    started = time.perf_counter()
    with report_to(options.out, opened.adapter_info, argv) as report:
        report.line(f"R = {options.launches} dispatches of {options.groups} workgroup(s) of {WORKGROUP}, median of "
                    f"{options.rounds} rounds; pass commands: {options.commands}; us a dispatch; "
                    f"gpu: {'timestamps' if floor.timestamps else 'no timestamp-query on this adapter'}")
        table(report, interleaved(floor, cases, options.launches, options.rounds), cases, floor.timestamps)
        report.line(f"measured in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
