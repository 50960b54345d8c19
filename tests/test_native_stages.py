"""A multi-pass candidate whose stages each declare only the buffers they use, as multi-pass
kernels of WebGPU libraries are written: bound by what each stage's WGSL declares."""

from __future__ import annotations

import math
import struct

import pytest

from wgtune import Args, Config, Kernel, Measured, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

# Buffers of the call: x (0), scratch (1), out (2); params at binding 3.
SCALE = """
struct Sizes { n: u32, factor: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(3) var<uniform> sizes: Sizes;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < sizes.n) { scratch[gid.x] = sizes.factor * x[gid.x]; }
}
"""

SHIFT = """
struct Sizes { n: u32, factor: f32 }
@group(0) @binding(1) var<storage, read> scratch: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> sizes: Sizes;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < sizes.n) { out[gid.x] = scratch[gid.x] + 1.0; }
}
"""

FUSED = """
struct Sizes { n: u32, factor: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> sizes: Sizes;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < sizes.n) { out[gid.x] = sizes.factor * x[gid.x] + 1.0; }
}
"""

N = 1000


def grid(args):
    return (-(-args.params[0] // 64), 1, 1)


def test_each_stage_binds_only_what_its_wgsl_declares_and_both_forms_agree():
    two_pass = Kernel("scale_then_shift", SCALE, grid, then=(Kernel("shift", SHIFT, grid),))
    tunables = TunableSet("scale_shift", [two_pass, Kernel("fused", FUSED, grid)],
                          key=lambda a: {"n": a.params[0]}, outputs=(2,))
    device = NativeDevice.open()
    x = device.create_buffer(struct.pack(f"{N}f", *range(N)))
    scratch, out = device.create_buffer(size=4 * N), device.create_buffer(size=4 * N)
    args = Args((x, scratch, out), (N, 3))  # factor 3 (an int) is the f32 3.0 the struct says
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))
    tuner.execute(tunables, args)
    results = tuner.results(tunables, tuner.key(tunables, args))
    assert all(isinstance(result, Measured) for result in results), results  # both ran and agreed
    assert list(struct.unpack(f"{N}f", device.read_buffer_sync(out))) == pytest.approx([3.0 * i + 1 for i in range(N)])


# A row softmax written as WebGPU runtimes write theirs: its uniform, a struct of mixed u32 and f32
# fields, at binding 0, the input and output after it; one workgroup a row, a shared-memory tree.
SOFTMAX = """
struct Uniforms {
    rows: u32,
    cols: u32,
    scale: f32,
    padding: u32,
}
@group(0) @binding(0) var<uniform> uniforms: Uniforms;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> output: array<f32>;

const WG: u32 = 64u;
var<workgroup> shared_max: array<f32, WG>;
var<workgroup> shared_sum: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.x;
    let base = row * uniforms.cols;
    var local_max = -3.0e38;
    for (var c = lid; c < uniforms.cols; c += WG) {
        local_max = max(local_max, uniforms.scale * input[base + c]);
    }
    shared_max[lid] = local_max;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) { shared_max[lid] = max(shared_max[lid], shared_max[lid + s]); }
        workgroupBarrier();
    }
    let row_max = shared_max[0];
    var local_sum = 0.0;
    for (var c = lid; c < uniforms.cols; c += WG) {
        local_sum += exp(uniforms.scale * input[base + c] - row_max);
    }
    shared_sum[lid] = local_sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) { shared_sum[lid] = shared_sum[lid] + shared_sum[lid + s]; }
        workgroupBarrier();
    }
    let total = shared_sum[0];
    for (var c = lid; c < uniforms.cols; c += WG) {
        output[base + c] = exp(uniforms.scale * input[base + c] - row_max) / total;
    }
}
"""


def test_a_softmax_with_its_uniform_struct_at_binding_zero_binds_and_computes():
    rows, cols = 3, 100
    kernel = Kernel("softmax", SOFTMAX, grid=lambda args: (args.params[0], 1, 1))
    device = NativeDevice.open()
    values = [math.sin(i) for i in range(rows * cols)]
    x = device.create_buffer(struct.pack(f"{rows * cols}f", *values))
    y = device.create_buffer(size=4 * rows * cols)
    tunables = TunableSet("softmax", [kernel, Kernel("softmax_again", SOFTMAX + "\n", kernel.grid)],
                          key=lambda a: {"rows": a.params[0], "cols": a.params[1]}, outputs=(1,))
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))
    tuner.execute(tunables, Args((x, y), (rows, cols, 2, 0)))  # scale 2 (an int): the f32 2.0
    got = struct.unpack(f"{rows * cols}f", device.read_buffer_sync(y))
    for r in range(rows):
        row = [2.0 * v for v in values[r * cols:(r + 1) * cols]]
        top = max(row)
        total = sum(math.exp(v - top) for v in row)
        assert list(got[r * cols:(r + 1) * cols]) == pytest.approx([math.exp(v - top) / total for v in row], rel=1e-5)


def test_a_later_stages_grid_is_worked_out_once_per_call_not_once_per_launch():
    """A later stage's grid (a split-K tile's is several microseconds of Python) is kept in the
    call's cache like the first's: a batch of launches of one call, and a timed pass, work it out
    once; another call's Args works it out again, and every launch still runs both stages."""
    calls = []

    def counted_grid(args):
        calls.append(args)
        return grid(args)

    two_pass = Kernel("scale_then_shift", SCALE, grid, then=(Kernel("shift", SHIFT, counted_grid),))
    tunables = TunableSet("scale_shift_once", [two_pass], key=lambda a: {"n": a.params[0]}, outputs=(2,))
    device = NativeDevice.open()
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=False, samples=3, warmups=1))
    x = device.create_buffer(struct.pack(f"{N}f", *range(N)))

    def call(factor):
        out = device.create_buffer(size=4 * N)
        return Args((x, device.create_buffer(size=4 * N), out), (N, factor)), out

    first, first_out = call(3)
    tuner.execute(tunables, first)  # the tune, then the winner's launch on the call
    calls.clear()
    with tuner.batch():
        for _ in range(5):
            tuner.execute(tunables, first)
    assert calls == []
    second, second_out = call(2)
    for _ in range(3):
        tuner.execute(tunables, second)
    # The call's first launch checks its grids against the device's limits (once a call), then
    # its launches work out the later grid once: two, however many launches (four before).
    assert len(calls) == 2 and all(seen is second for seen in calls)
    for out, factor in ((first_out, 3.0), (second_out, 2.0)):
        got = struct.unpack(f"{N}f", device.read_buffer_sync(out))
        assert list(got) == pytest.approx([factor * i + 1 for i in range(N)])
