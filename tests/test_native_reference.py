"""A racy candidate 0 on the adapter present, caught with ``reference=`` and without.

The row sum below reduces its partial sums as a shared-memory tree, the way WebGPU kernels
usually do; the default candidate lacks the barrier between the tree's levels (a bug of the
kind found in public kernels), so an invocation reads a partial sum another has not written
yet. On lavapipe that gives wrong sums on every run (on a GPU whose warps run in lockstep it
may not show: the tests then hold the candidates to what this adapter computes). Without a
reference the two correct candidates outvote it; held to a reference, it is refused too."""

from __future__ import annotations

import numpy as np

from wgtune import Args, Config, Kernel, Measured, Mismatch, TunableSet, Tuner, run_inline
from wgtune.backends.native import NativeDevice

ROW_SUM = """
struct Shape { rows: u32, cols: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> sums: array<f32>;
@group(0) @binding(2) var<uniform> shape: Shape;
var<workgroup> partial: array<f32, WG>;
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    var acc = 0.0;
    for (var c = lid.x; c < shape.cols; c += WGu) { acc += x[wid.x * shape.cols + c]; }
    partial[lid.x] = acc;
    workgroupBarrier();
    for (var stride = WGu / 2u; stride > 0u; stride >>= 1u) {
        if (lid.x < stride) { partial[lid.x] += partial[lid.x + stride]; }
        BARRIER
    }
    if (lid.x == 0u) { sums[wid.x] = partial[0]; }
}
"""

ROWS, COLS = 64, 1000


def candidate(name: str, wg: int, barrier: bool) -> Kernel:
    source = ROW_SUM.replace("WG", str(wg)).replace("BARRIER", "workgroupBarrier();" if barrier else "")
    return Kernel(name, source, grid=lambda args: (args.params[0], 1, 1))


X = np.random.default_rng(0).uniform(-1, 1, (ROWS, COLS)).astype(np.float32)


def call(device: NativeDevice) -> Args:
    return Args({"x": device.create_buffer(X.tobytes()), "sums": device.create_buffer(size=ROWS * 4)}, (ROWS, COLS))


def race_shows(device: NativeDevice) -> bool:
    """Whether the racy candidate's sums are wrong on this adapter (on lavapipe they always are)."""
    args, kernel = call(device), candidate("racy", 64, barrier=False)
    device.dispatch(run_inline(device.compile(kernel)), args, (ROWS, 1, 1))
    out = np.frombuffer(device.read_buffer_sync(args.buffer("sums")), np.float32)
    wrong = not np.allclose(out, X.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)
    assert wrong or "llvmpipe" not in str(device.adapter_info.get("device")), "the race this test is for"
    return wrong


def tune(**reference) -> tuple[Tuner, TunableSet, Args, np.ndarray]:
    device = NativeDevice.open()
    args = call(device)
    tunables = TunableSet("row_sum", [candidate("racy_wg64", 64, barrier=False), candidate("tree_wg64", 64, True),
                                      candidate("tree_wg128", 128, True)],
                          key=lambda a: {"rows": a.params[0], "cols": a.params[1]}, **reference)
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))
    tuner.execute(tunables, args)
    return tuner, tunables, args, X


def test_without_a_reference_the_correct_candidates_outvote_the_racy_candidate_zero():
    tuner, tunables, args, x = tune()
    racy, *correct = tuner.results(tunables, tunables.key(args))
    shows = race_shows(tuner.device)
    assert isinstance(racy, Mismatch) == shows and all(isinstance(result, Measured) for result in correct), correct
    assert not shows or "disagrees with the 2 candidates that agree (tree_wg64, tree_wg128)" in racy.reason
    assert not shows or tuner.fallback(tunables) == 1  # the racy default no longer serves pending calls
    out = np.frombuffer(tuner.device.read_buffer_sync(args.buffer("sums")), np.float32)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)


def test_a_reference_rejects_the_racy_candidate_zero_and_a_correct_one_wins():
    def row_sums(inputs: list[bytes], params: tuple) -> list[np.ndarray]:
        return [np.frombuffer(inputs[0], np.float32).reshape(params).astype(np.float64).sum(axis=1)]

    tuner, tunables, args, x = tune(reference=row_sums, atol=1e-4, rtol=1e-4)
    racy, *correct = tuner.results(tunables, tunables.key(args))
    shows = race_shows(tuner.device)
    assert isinstance(racy, Mismatch) == shows and (not shows or "'sums'" in racy.reason), racy
    assert all(isinstance(result, Measured) for result in correct), correct
    kernel = tuner.execute(tunables, args)
    assert not shows or kernel.name in {"tree_wg64", "tree_wg128"}
    out = np.frombuffer(tuner.device.read_buffer_sync(args.buffer("sums")), np.float32)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)
