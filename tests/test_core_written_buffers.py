"""Which of a call's buffers a check run, and a native tune's timed launches, must have their own
copy of (``checks.written_buffers``): those some candidate binds ``read_write``, among the
candidates the tune may run."""

from __future__ import annotations

import asyncio
from array import array

import pytest
from fakes import FakeDevice, call, kernel, make_set, make_tuner, quiet, settle

from wgtune import Args, Key, spawn_task
from wgtune.tune.checks import written_buffers

# Pure core: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def wgsl(access_x: str) -> str:
    return f"""
@group(0) @binding(0) var<storage, {access_x}> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    y[id.x] = x[id.x] * 2.0;
}}
"""


def test_only_the_candidates_a_tune_may_run_say_which_buffers_are_written():
    in_place = kernel("in_place", wgsl=wgsl("read_write"))  # may write x too
    reading = kernel("reading", wgsl=wgsl("read"))
    tunables = make_set(reading, in_place)
    args = Args(("x", "y"), (4,))
    assert written_buffers(tunables, args) == {0, 1}
    assert written_buffers(tunables, args, among={0}) == {1}  # x is shared by the check runs
    assert written_buffers(tunables, args, among={0, 1}) == {0, 1}


def test_a_candidate_whose_wgsl_cannot_be_read_makes_every_buffer_written():
    tunables = make_set(kernel("reading", wgsl=wgsl("read")), kernel("opaque", wgsl="not wgsl at all {"))
    args = Args(("x", "y"), (4,))
    assert written_buffers(tunables, args) == {0, 1}
    assert written_buffers(tunables, args, among={0}) == {1}


class PausingDevice(FakeDevice):
    """Counts the tune's pauses (``Device.pause``: a page's task boundary)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.pauses = 0

    async def pause(self) -> None:
        self.pauses += 1


def test_a_checked_tune_reflects_the_candidates_it_may_run_a_slice_at_a_time(monkeypatch):
    from wgtune.sets import shaders
    from wgtune.tune import tuning

    monkeypatch.setattr(tuning, "REFLECT_SLICE", 0.0)  # a pause after every candidate
    device = PausingDevice()
    skipped = kernel("skipped", wgsl=wgsl("read_write"), priority=-1)  # never run for any key
    tunables = make_set(kernel("a", wgsl=wgsl("read")), kernel("b", wgsl="// b\n" + wgsl("read")), skipped)
    make_tuner(device, config=quiet(checks=True)).execute(tunables, call(device, [1.0], [0.0]))
    assert device.pauses == 2
    reflected = {kernel.name for kernel in shaders._SHADERS}
    assert {"a", "b"} <= reflected and "skipped" not in reflected


class BufferWatchingDevice(FakeDevice):
    """Keeps the buffers of every timed launch (``profile``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.timed_on: list[tuple] = []

    async def profile(self, pipeline, args, grid, repeats):
        self.timed_on.append(args.buffers)
        return await super().profile(pipeline, args, grid, repeats)


@pytest.mark.parametrize(("second", "x_shared"), [("read", True), ("read_write", False)])
def test_a_native_tune_times_on_the_calls_own_inputs_and_copies_what_a_candidate_may_write(second, x_shared):
    """x is the call's own where every candidate only reads it; a copy where one may write it."""
    device = BufferWatchingDevice()
    tunables = make_set(kernel("a", wgsl=wgsl("read")), kernel("b", wgsl=wgsl(second)))
    args = call(device, [1.0, 2.0], [5.0, 5.0])
    make_tuner(device, config=quiet(checks=False)).check_tune(tunables, Key({"n": 4}), args)
    assert device.timed_on
    assert all((x is args.buffers[0]) == x_shared and y is not args.buffers[1] for x, y in device.timed_on)
    assert args.buffers[0].data == array("f", [1.0, 2.0]).tobytes()  # the tune wrote no input


def test_a_tune_on_the_event_loop_copies_every_buffer_at_the_miss():
    """In the page the fallback runs on the call's buffers, and the app may write or free them
    while the tune goes on: the tune keeps its own copies of them all."""
    device = BufferWatchingDevice()
    tunables = make_set(kernel("a", wgsl=wgsl("read")), kernel("b", wgsl=wgsl("read")))
    args = call(device, [1.0, 2.0], [5.0, 5.0])

    async def main():
        tuner = make_tuner(device, spawn=spawn_task)
        tuner.execute(tunables, args)
        await settle(tuner, tunables, Key({"n": 4}))

    asyncio.run(main())
    assert device.timed_on
    assert all(x is not args.buffers[0] and y is not args.buffers[1] for x, y in device.timed_on)
