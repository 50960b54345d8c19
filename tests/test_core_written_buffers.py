"""Which of a call's buffers a check run must have its own copy of (``checks.written_buffers``):
those some candidate binds ``read_write``, among the candidates the tune may run."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, kernel, make_set, make_tuner, quiet

from wgtune import Args
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
    tunables = make_set(kernel("a", wgsl=wgsl("read")), kernel("b", wgsl=wgsl("read")), skipped)
    make_tuner(device, config=quiet(checks=True)).execute(tunables, call(device, [1.0], [0.0]))
    assert device.pauses == 2
    reflected = {kernel.name for kernel in shaders._SHADERS}
    assert {"a", "b"} <= reflected and "skipped" not in reflected
