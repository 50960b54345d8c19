"""The WebGPU device algorithm (``wgtune.backends.webgpu``) on a recording fake GPU: no wgpu, no
browser. The fake shim keeps every call in order and runs copies, query resolves and timestamp
writes on byte arrays, so the tests check what the algorithm asks of a GPU and what it makes of
the answers: bind groups cached per pipeline and call, stages in order, timestamps to seconds,
invalid passes as NaN, the wall clock around full syncs, errors as KernelError."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

import pytest
from wgsl_samples import LAYER

from wgtune import Args, DeviceLost, Kernel, KernelError, Timing, run_inline
from wgtune.backends.webgpu import WebGPUDevice
from wgtune.sets.args import pack_params


@dataclass(eq=False)
class Buffer:
    size: int
    usage: int
    data: bytearray = field(default_factory=bytearray)
    destroyed: bool = False

    def __post_init__(self) -> None:
        self.data = bytearray(self.size)


@dataclass(eq=False)
class Encoder:
    commands: list = field(default_factory=list)


class RecordingShim:
    """A GPU that records each call in ``calls`` and runs copies on byte arrays.

    Each timed pass, when submitted, writes the next of ``timestamps`` (ns) into its query set;
    ``now()`` reads the next of ``clock``. ``error`` is what the next ``reported_error`` answers;
    ``fail`` names a method that raises KernelError("driver says no"); ``lost_reason`` is what
    ``lost()`` answers (not recorded: it is asked after every wait).
    """

    MAP_READ, COPY_SRC, COPY_DST, UNIFORM, STORAGE, QUERY_RESOLVE = 1, 4, 8, 64, 128, 512

    def __init__(self, timestamps=(), clock=(), error: str | None = None, fail: str = "") -> None:
        self.calls: list[tuple] = []
        self.passes: list[list[tuple]] = []  # each submitted pass's commands
        self.timestamps = list(timestamps)
        self.clock = list(clock)
        self.error = error
        self.fail = fail
        self.lost_reason: str | None = None

    def lost(self) -> str | None:
        return self.lost_reason

    def _call(self, name: str, *details: Any) -> None:
        self.calls.append((name, *details))
        if name == self.fail:
            raise KernelError("driver says no")

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def create_buffer(self, size: int, usage: int) -> Buffer:
        self._call("create_buffer", size, usage)
        return Buffer(size, usage)

    def write_buffer(self, buffer: Buffer, offset: int, data: bytes) -> None:
        self._call("write_buffer", buffer, offset, bytes(data))
        buffer.data[offset:offset + len(data)] = data

    def destroy_buffer(self, buffer: Buffer) -> None:
        self._call("destroy_buffer", buffer)
        buffer.destroyed = True

    async def map_read(self, buffer: Buffer, take=bytes):
        self._call("map_read", buffer)
        return take(memoryview(bytes(buffer.data)))

    def create_query_set(self, count: int) -> list[int]:
        self._call("create_query_set", count)
        return [0] * count

    def timestamp_writes(self, query_set, beginning_index: int, end_index: int) -> tuple:
        return ("timestamp_writes", query_set, beginning_index, end_index)

    async def compile_module(self, kernel: Kernel) -> tuple[str, str]:
        self._call("compile_module", kernel.name)
        return f"pipeline:{kernel.name}", f"layout:{kernel.name}"

    def bind_group_layout(self, pipeline: str, index: int) -> str:
        self._call("bind_group_layout", pipeline, index)
        return f"layout{index}:{pipeline.removeprefix('pipeline:')}"

    def create_bind_group(self, layout: str, entries) -> tuple:
        buffers = tuple(buffer for _binding, buffer in entries)
        assert [binding for binding, _ in entries] == list(range(len(buffers)))  # this fake's stages bind all
        self._call("create_bind_group", layout, buffers)
        return ("group", layout, buffers)

    def create_command_encoder(self) -> Encoder:
        self._call("create_command_encoder")
        return Encoder()

    def begin_compute_pass(self, encoder: Encoder, *, timestamp_writes=None) -> list[tuple]:
        commands: list[tuple] = []  # the pass: its commands, recorded
        encoder.commands.append(("pass", timestamp_writes, commands))
        return commands

    @staticmethod
    def set_pipeline(compute_pass: list, pipeline) -> None:
        compute_pass.append(("set_pipeline", pipeline))

    @staticmethod
    def set_bind_group(compute_pass: list, index: int, group) -> None:
        compute_pass.append(("set_bind_group", index, group))

    @staticmethod
    def dispatch_workgroups(compute_pass: list, x: int, y: int, z: int) -> None:
        compute_pass.append(("dispatch_workgroups", x, y, z))

    @staticmethod
    def end(compute_pass: list) -> None:
        compute_pass.append(("end",))

    def copy_buffer_to_buffer(self, encoder, source, source_offset, destination, destination_offset, size) -> None:
        encoder.commands.append(("copy", source, source_offset, destination, destination_offset, size))

    def resolve_query_set(self, encoder, query_set, first_query, query_count, destination, destination_offset):
        encoder.commands.append(("resolve", query_set, first_query, query_count, destination, destination_offset))

    def submit(self, encoder: Encoder) -> None:
        self._call("submit")
        for command in encoder.commands:
            if command[0] == "pass":
                _, writes, commands = command
                self.passes.append(commands)
                if writes is not None:
                    _, query_set, begin_index, end_index = writes
                    query_set[begin_index], query_set[end_index] = self.timestamps.pop(0)
            elif command[0] == "copy":
                _, source, source_offset, destination, destination_offset, size = command
                destination.data[destination_offset:destination_offset + size] = source.data[
                    source_offset:source_offset + size]
            elif command[0] == "resolve":
                _, query_set, first, count, destination, offset = command
                values = query_set[first:first + count]
                destination.data[offset:offset + 8 * count] = struct.pack(f"<{count}Q", *values)

    async def on_submitted_work_done(self) -> None:
        self._call("on_submitted_work_done")

    async def reported_error(self) -> str | None:
        self._call("reported_error")
        error, self.error = self.error, None
        return error

    def now(self) -> float:
        self._call("now")
        return self.clock.pop(0) if self.clock else 0.0

    # A call's launch: errors raise at the call here, as natively.

    def buffer_problem(self, buffer: Buffer) -> str | None:
        return "the buffer was destroyed" if getattr(buffer, "destroyed", False) else None

    def begin_call_scope(self) -> None:
        self._call("begin_call_scope")

    def end_call_scope(self) -> None:
        self._call("end_call_scope")

    async def scope_error(self, scope: Any) -> str | None:
        return None

    def report_scope(self, scope: Any) -> None:
        return None


def stage(name: str, workgroups: int) -> Kernel:
    return Kernel(name, f"// {name}", grid=lambda args: (workgroups, 1, 1))


def device_on(shim: RecordingShim, timestamps: bool = True) -> WebGPUDevice:
    return WebGPUDevice(shim, timestamps=timestamps)


def test_a_bind_group_is_made_once_per_pipeline_and_call_with_params_as_a_uniform_after_the_buffers():
    shim = RecordingShim()
    device = device_on(shim, timestamps=False)
    first, second = (run_inline(device.compile(stage(name, 1))) for name in ("a", "b"))
    x, y = device.create_buffer(size=8), device.create_buffer(size=8)
    args = Args((x, y), (5, 2.5))
    for _ in range(3):
        device.dispatch(first, args, (1, 1, 1))
        device.dispatch(second, args, (1, 1, 1))
    groups = [call for call in shim.calls if call[0] == "create_bind_group"]
    assert [layout for _, layout, _ in groups] == ["layout:a", "layout:b"]
    (uniform_made,) = [call for call in shim.calls if call[:2] == ("create_buffer", 16)]
    assert uniform_made[2] == shim.UNIFORM | shim.COPY_DST
    ((_, uniform, _, written),) = [call for call in shim.calls if call[0] == "write_buffer"]
    assert written == pack_params((5, 2.5))
    assert all(buffers == (x, y, uniform) for _, _, buffers in groups)  # one uniform shared by both
    assert [pass_[0] for pass_ in shim.passes] == [("set_pipeline", p) for p in ["pipeline:a", "pipeline:b"] * 3]


def test_a_binding_the_gpu_refuses_is_a_kernel_error_that_says_so():
    device = device_on(RecordingShim(fail="create_bind_group"), timestamps=False)
    kernel = run_inline(device.compile(stage("a", 1)))
    with pytest.raises(KernelError, match="cannot bind the call's buffers: driver says no"):
        device.dispatch(kernel, Args((device.create_buffer(size=4),)), (1, 1, 1))


def test_later_stages_are_compiled_and_dispatched_in_order_with_their_own_grids_in_one_pass():
    shim = RecordingShim()
    device = device_on(shim, timestamps=False)
    two_stage = Kernel("first", "// first", grid=lambda args: (3, 1, 1), then=(stage("second", 7),))
    kernel = run_inline(device.compile(two_stage))
    assert sorted(call[1] for call in shim.calls if call[0] == "compile_module") == ["first", "second"]
    assert [stage.kernel.name for stage in kernel.then] == ["second"]
    args = Args((device.create_buffer(size=4),))
    device.dispatch(kernel, args, (3, 1, 1), repeats=2)
    (commands,) = shim.passes
    (_, first_group, _), (_, second_group, _) = args.cache[kernel], args.cache[kernel.then[0]]  # (index, group, more)
    one_launch = [
        ("set_pipeline", "pipeline:first"), ("set_bind_group", 0, first_group), ("dispatch_workgroups", 3, 1, 1),
        ("set_pipeline", "pipeline:second"), ("set_bind_group", 0, second_group), ("dispatch_workgroups", 7, 1, 1),
    ]
    assert commands == one_launch * 2 + [("end",)]
    assert shim.names().count("submit") == 1


def test_a_timed_pass_is_recorded_launch_by_launch_as_a_batch_records_as_many_calls():
    """Its host time is the tune's charge for recording a launch in a batch: each launch looks up
    its steps as each call of a batch does (kept per call: a later stage's grid is worked out once
    per Args, not per launch), and sets what changed only."""
    shim = RecordingShim(timestamps=[(0, 1_000)] * 2)
    device = device_on(shim)
    grids = []

    def second_grid(args):
        grids.append(args)
        return (7, 1, 1)

    two_stage = Kernel("first", "// first", grid=lambda args: (3, 1, 1),
                       then=(Kernel("second", "// second", grid=second_grid),))
    one_stage = run_inline(device.compile(stage("one", 5)))
    kernel = run_inline(device.compile(two_stage))
    args = Args((device.create_buffer(size=4),))
    run_inline(device.resolve(run_inline(device.profile(kernel, args, (3, 1, 1), 4))))
    assert grids == [args]  # once for the call, not once a launch
    assert len(shim.passes[0]) == 4 * 6 + 1  # both stages' pipeline, group and dispatch, each launch
    run_inline(device.resolve(run_inline(device.profile(one_stage, args, (5, 1, 1), 4))))
    (_, group, _) = args.cache[one_stage]
    assert shim.passes[1] == [("set_pipeline", "pipeline:one"), ("set_bind_group", 0, group),
                              *[("dispatch_workgroups", 5, 1, 1)] * 4, ("end",)]


def test_a_timed_pass_reads_its_begin_and_end_timestamps_and_converts_ns_to_seconds():
    shim = RecordingShim(timestamps=[(5_000_000_000, 5_002_500_000)])
    device = device_on(shim)
    assert device.timing == Timing.GPU_TIMESTAMP
    kernel = run_inline(device.compile(stage("a", 2)))
    shim.clock = [10.0, 10.0 + 4e-6]  # the host's reading before and after it encodes the pass
    timed = run_inline(device.profile(kernel, Args((device.create_buffer(size=4),)), (2, 1, 1), 1))
    names = shim.names()
    first, second = (index for index, name in enumerate(names) if name == "now")
    assert first < names.index("create_command_encoder") < second < names.index("submit")  # around the encoding
    # The timestamps' span, and the host's encoding of the pass: what a launch in a batch costs.
    assert run_inline(device.resolve(timed)) == pytest.approx(2.5e-3 + 4e-6)
    assert timed.readback.destroyed  # one readback a sample, freed once read
    assert shim.names()[-3:] == ["reported_error", "map_read", "destroy_buffer"]


@pytest.mark.parametrize("begin, end", [(2_000, 1_000), (1_000, 1_000)], ids=["ends-before-it-begins", "zero"])
def test_a_pass_that_does_not_end_after_it_begins_is_not_a_valid_sample(begin, end):
    device = device_on(RecordingShim(timestamps=[(begin, end)]))
    kernel = run_inline(device.compile(stage("a", 1)))
    timed = run_inline(device.profile(kernel, Args((device.create_buffer(size=4),)), (1, 1, 1), 1))
    assert math.isnan(run_inline(device.resolve(timed)))


def test_an_empty_timed_pass_answers_the_raw_readings_in_seconds_unchecked():
    shim = RecordingShim(timestamps=[(7_000_000_300, 7_000_000_100)])
    device = device_on(shim)
    assert run_inline(device.time_empty_pass()) == pytest.approx((7.0000003, 7.0000001))
    assert shim.passes == [[("end",)]]


def test_the_wall_clock_reads_from_an_idle_queue_until_the_work_is_done_then_checks_for_errors():
    shim = RecordingShim(clock=[10.0, 10.25])
    device = device_on(shim, timestamps=False)
    assert device.timing == Timing.WALL_CLOCK
    kernel = run_inline(device.compile(stage("a", 1)))
    args = Args((device.create_buffer(size=4),))
    device.dispatch(kernel, args, (1, 1, 1))  # binds now: what follows is the timed part alone
    shim.calls.clear()
    timed = run_inline(device.profile(kernel, args, (1, 1, 1), 4))
    assert shim.names() == [
        "on_submitted_work_done", "reported_error", "now",
        "create_command_encoder", "submit",
        "on_submitted_work_done", "now", "reported_error",
    ]
    assert run_inline(device.resolve(timed)) == 0.25
    assert shim.passes[-1].count(("dispatch_workgroups", 1, 1, 1)) == 4


def test_an_error_the_gpu_reported_is_raised_by_sync_and_by_reading_back():
    shim = RecordingShim(error="invalid bind group")
    device = device_on(shim)
    with pytest.raises(KernelError, match="invalid bind group"):
        run_inline(device.sync())
    run_inline(device.sync())  # reported once
    shim.error = "out of range"
    buffer = device.create_buffer(b"\x01\x02\x03\x04")
    with pytest.raises(KernelError, match="out of range"):
        run_inline(device.read_buffer(buffer))
    assert shim.calls[-1][0] == "destroy_buffer"  # the staging buffer, even so


def test_a_lost_device_is_device_lost_at_the_next_wait_not_a_candidates_kernel_error():
    shim = RecordingShim(error="an error a lost device reports", fail="")
    device = device_on(shim)
    buffer = device.create_buffer(size=4)
    shim.lost_reason = "unknown: GPU watchdog"
    for wait in (device.sync, lambda: device.read_buffer(buffer)):
        with pytest.raises(DeviceLost, match="the GPU device was lost: unknown: GPU watchdog"):
            run_inline(wait())
    shim.fail = "map_read"  # a readback the loss rejected says the loss, too
    with pytest.raises(DeviceLost):
        run_inline(device.read_buffer(buffer))


def test_a_failed_readback_says_what_it_was_reading():
    device = device_on(RecordingShim(timestamps=[(1, 2)], fail="map_read"))
    with pytest.raises(KernelError, match="reading a buffer back failed: driver says no"):
        run_inline(device.read_buffer(device.create_buffer(size=4)))
    timed = run_inline(device.profile(run_inline(device.compile(stage("a", 1))),
                                      Args((device.create_buffer(size=4),)), (1, 1, 1), 1))
    with pytest.raises(KernelError, match="reading timestamps failed: driver says no"):
        run_inline(device.resolve(timed))


def test_buffers_are_padded_to_whole_words_read_back_and_cloned_only_when_copyable():
    shim = RecordingShim()
    device = device_on(shim, timestamps=False)
    odd = device.create_buffer(b"\x01\x02\x03")
    assert (odd.size, odd.usage) == (4, shim.STORAGE | shim.COPY_SRC | shim.COPY_DST)
    assert run_inline(device.read_buffer(odd)) == b"\x01\x02\x03\x00"
    assert device.create_buffer(size=0).size == 4
    assert run_inline(device.read_buffer(device.clone_buffer(odd))) == b"\x01\x02\x03\x00"
    storage_only = Buffer(8, shim.STORAGE)
    storage_only.data[:] = b"12345678"
    stand_in = device.clone_buffer(storage_only)
    assert (stand_in.size, stand_in.usage) == (8, shim.STORAGE | shim.COPY_SRC | shim.COPY_DST)
    assert stand_in.data == bytearray(8)  # nobody can copy it: zero-filled




def test_each_group_the_wgsl_declares_gets_its_bind_group_made_once_and_set_once_a_pass():
    shim = RecordingShim()
    device = device_on(shim, timestamps=False)
    layer = run_inline(device.compile(Kernel("layer", LAYER, grid=lambda args: (1, 1, 1))))
    x, y, weight, bias = (device.create_buffer(size=16) for _ in range(4))
    args = Args({"x": x, "y": y, "weight": weight, "bias": bias}, (4, 0.5))
    device.dispatch(layer, args, (1, 1, 1), repeats=2)
    groups = [call for call in shim.calls if call[0] == "create_bind_group"]
    packed = (0, struct.pack("<If8x", 4, 0.5))  # n and scale, packed as the struct declares them
    (uniform,) = [call[1] for call in shim.calls if call[0] == "write_buffer" and call[2:] == packed]
    assert groups == [("create_bind_group", "layout:layer", (x, y, uniform)),
                      ("create_bind_group", "layout1:layer", (weight, bias))]
    made = len(shim.calls)
    device.dispatch(layer, args, (1, 1, 1), repeats=2)
    assert shim.names()[made:] == ["create_command_encoder", "submit"]  # nothing new on a repeat call
    one_launch = [("set_pipeline", "pipeline:layer"), ("set_bind_group", 0, ("group", "layout:layer", (x, y, uniform))),
                  ("set_bind_group", 1, ("group", "layout1:layer", (weight, bias))), ("dispatch_workgroups", 1, 1, 1)]
    # Set once: a pass keeps them across its dispatches (a batch records launches so, and a timed
    # pass too, so that the tune charges a launch what a batch does).
    assert shim.passes == [[*one_launch, ("dispatch_workgroups", 1, 1, 1), ("end",)]] * 2


PARTIALS = """
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> partials: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(64) fn main(@builtin(workgroup_id) wid: vec3<u32>) { partials[wid.x] = input[params.n]; }
"""

TOTAL = """
struct Params { count: u32 }
@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(64) fn main() { output[0] = partials[params.count - 1u]; }
"""


def test_a_stage_with_its_own_params_gets_a_uniform_of_its_own_and_equal_values_share_one():
    shim = RecordingShim()
    device = device_on(shim, timestamps=False)
    partials = lambda args: (-(-args.params[0] // 64),)  # noqa: E731
    two_pass = Kernel("partials", PARTIALS, grid=lambda args: partials(args), then=(
        Kernel("total", TOTAL, grid=lambda args: (1, 1, 1), params=partials),
        Kernel("again", TOTAL, grid=lambda args: (1, 1, 1), params=lambda args: (1000,)),
    ))
    kernel = run_inline(device.compile(two_pass))
    args = Args({"input": device.create_buffer(size=4000), "partials": device.create_buffer(size=64),
                 "output": device.create_buffer(size=4)}, (1000,))
    device.dispatch(kernel, args, (16, 1, 1))
    device.dispatch(kernel, args, (16, 1, 1))
    written = [call[3] for call in shim.calls if call[0] == "write_buffer"]
    assert written == [struct.pack("<I12x", 1000), struct.pack("<I12x", 16)]  # "again" shares the call's uniform
    assert len([call for call in shim.calls if call[0] == "create_bind_group"]) == 3


def test_a_group_below_the_highest_that_a_stage_leaves_out_is_bound_empty_as_its_layout_is():
    shim = RecordingShim()
    device = device_on(shim, timestamps=False)
    no_group_zero = LAYER.replace("@group(0)", "@group(2)")  # groups 1 and 2: group 0 is in its layout, empty
    kernel = run_inline(device.compile(Kernel("late", no_group_zero, grid=lambda args: (1, 1, 1))))
    x, y, weight, bias = (device.create_buffer(size=16) for _ in range(4))
    device.dispatch(kernel, Args({"x": x, "y": y, "weight": weight, "bias": bias}, (4, 0.5)), (1, 1, 1))
    groups = [call[1:] for call in shim.calls if call[0] == "create_bind_group"]
    assert [(layout, len(buffers)) for layout, buffers in groups] == [("layout:late", 0), ("layout1:late", 2),
                                                                      ("layout2:late", 3)]
    assert [command[1] for command in shim.passes[0] if command[0] == "set_bind_group"] == [0, 1, 2]
