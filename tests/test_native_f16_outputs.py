"""f16 outputs through a real GPU run on the adapter present: row sums stored as half floats
packed two to a u32 with ``pack2x16float``, as WebGPU runtimes store f16 tensors on devices
without ``shader-f16``. One candidate rounds its partial sums to f16 on the way, so its
outputs differ from the exact ones by an ulp or two: compared as f16 values within a tolerance
it is correct; compared bit for bit (``"H"``) it is not."""

from __future__ import annotations

import numpy as np

from wgtune import Args, Config, Kernel, Measured, Mismatch, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

ROWS, COLS = 64, 1000

HEADER = """
struct Shape { rows: u32, cols: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;  // two f16 sums per word
@group(0) @binding(2) var<uniform> shape: Shape;
"""

# Each invocation sums two rows and stores them as one word of two halves.
EXACT = HEADER + """
fn row_sum(row: u32) -> f32 {
    var total = 0.0;
    for (var c = 0u; c < shape.cols; c++) { total += x[row * shape.cols + c]; }
    return total;
}
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (2u * gid.x >= shape.rows) { return; }
    sums[gid.x] = pack2x16float(vec2<f32>(row_sum(2u * gid.x), row_sum(2u * gid.x + 1u)));
}
"""

# Four partial sums, each rounded to f16 (half-precision partials), then added.
HALF_PARTIALS = HEADER + """
fn to_half(value: f32) -> f32 { return unpack2x16float(pack2x16float(vec2<f32>(value, 0.0))).x; }
fn row_sum(row: u32) -> f32 {
    var partial = vec4<f32>(0.0);
    for (var c = 0u; c + 3u < shape.cols; c += 4u) {
        let at = row * shape.cols + c;
        partial += vec4<f32>(x[at], x[at + 1u], x[at + 2u], x[at + 3u]);
    }
    return (to_half(partial.x) + to_half(partial.y)) + (to_half(partial.z) + to_half(partial.w));
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (2u * gid.x >= shape.rows) { return; }
    sums[gid.x] = pack2x16float(vec2<f32>(row_sum(2u * gid.x), row_sum(2u * gid.x + 1u)));
}
"""


def grid(wg: int):
    return lambda args: (-(-args.params[0] // (2 * wg)), 1, 1)


def row_sums_f16(inputs: list[bytes], params: tuple) -> list[np.ndarray]:
    rows, cols = params
    sums = np.frombuffer(inputs[0], np.float32).reshape(rows, cols).astype(np.float64).sum(axis=1)
    return [sums.astype(np.float16).tobytes()]  # the f16 words themselves: as values ("e") or bits ("H")


def tune(**tolerance) -> tuple[Tuner, TunableSet, Args, np.ndarray]:
    device = NativeDevice.open()
    x = np.random.default_rng(3).uniform(-1, 1, (ROWS, COLS)).astype(np.float32)
    args = Args((device.create_buffer(x.tobytes()), device.create_buffer(size=ROWS * 2)), (ROWS, COLS))
    tunables = TunableSet("row_sum_f16", [Kernel("exact", EXACT, grid(32)), Kernel("half_partials", HALF_PARTIALS,
                                                                                     grid(64))],
                          key=lambda a: {"rows": a.params[0], "cols": a.params[1]}, outputs=(1,),
                          reference=row_sums_f16, **tolerance)
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))
    tuner.execute(tunables, args)
    return tuner, tunables, args, x


def test_f16_outputs_are_compared_as_values_within_the_tolerance():
    tuner, tunables, args, x = tune(output_type="e", atol=0.02, rtol=1e-3)  # four half partials: ~4 x 0.004
    results = tuner.results(tunables, tunables.key(args))
    assert [type(r) for r in results] == [Measured, Measured], results
    out = np.frombuffer(tuner.device.read_buffer_sync(args.buffers[1]), np.float16)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-3, atol=0.02)


def test_the_same_outputs_compared_bit_for_bit_reject_the_candidate_an_ulp_away():
    tuner, tunables, args, _x = tune(output_type="H")
    exact, half = tuner.results(tunables, tunables.key(args))
    assert isinstance(exact, Measured)
    assert isinstance(half, Mismatch), half  # its f16 words differ from the reference's in the last bits
