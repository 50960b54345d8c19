"""Output checks on the adapter present: each candidate is checked on buffers that start as they
should (its outputs poisoned), even where a check reuses the buffers of the run before it."""

from __future__ import annotations

import numpy as np
import pytest

from wgtune import Args, Config, Kernel, Measured, Mismatch, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

SCALE = """
struct P { n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { y[g.x] = 3.0 * x[g.x]; }
}
"""
N = 4096


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def candidate(name: str, share: int = 1) -> Kernel:
    """A right one, or with ``share`` 4 one whose grid covers a quarter of the output (and a comment
    to make its source its own)."""
    return Kernel(name, SCALE + f"// {name}\n", grid=lambda args: (-(-args.params[0] // 64) // share, 1, 1))


@pytest.mark.parametrize("reference", [True, False], ids=["reference", "agreement"])
def test_a_quarter_grid_candidate_run_after_a_right_one_on_the_same_buffers_is_still_caught(device, reference):
    x = np.random.default_rng(3).standard_normal(N).astype(np.float32)
    options = {"reference": lambda inputs, params: [3.0 * np.frombuffer(inputs[0], np.float32)]} if reference else {}
    tunables = TunableSet(f"reuse_{reference}", [candidate("right"), candidate("quarter", 4), candidate("right too")],
                          key=lambda args: {"n": args.params[0]}, **options)
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", samples=2, warmups=1))
    args = Args({"x": device.create_buffer(x.tobytes()), "y": device.create_buffer((3 * x).tobytes())}, (N,))
    assert tuner.execute(tunables, args).name != "quarter"
    right, quarter, right_too = tuner.results(tunables, tunables.key(args))
    assert isinstance(right, Measured) and isinstance(right_too, Measured)
    assert isinstance(quarter, Mismatch) and f"{N - N // 4} of {N} values differ" in quarter.reason, quarter
