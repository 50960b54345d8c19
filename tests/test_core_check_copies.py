"""The output checks' copies of a call (``checks.OutputCheck``): only the buffers a candidate of
the tune may write; the others, which no candidate writes, are shared with the benchmark's (natively
the call's own inputs)."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, kernel, make_set, make_tuner, quiet

from wgtune.tune.checks import written_buffers

# Pure core: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    y[id.x] = x[id.x] * 2.0;
}
"""


class CloneWatchingDevice(FakeDevice):
    """Keeps the source of every copy made (``clone_buffer``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.cloned: list = []

    def clone_buffer(self, buffer):
        self.cloned.append(buffer)
        return super().clone_buffer(buffer)


def test_a_checked_native_tune_copies_no_input_its_candidates_only_read():
    device = CloneWatchingDevice()
    tunables = make_set(kernel("a", wgsl=WGSL), kernel("b", wgsl=WGSL))
    args = call(device, [1.0, 2.0], [5.0, 5.0])
    assert written_buffers(tunables, args) == {1}  # x is only read
    make_tuner(device, config=quiet(checks=True)).execute(tunables, args)
    assert device.cloned  # the output is copied for the benchmark
    assert all(source is not args.buffers[0] for source in device.cloned)
