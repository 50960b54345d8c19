"""A multi-pass candidate whose stages each declare only the buffers they use, as multi-pass
kernels of WebGPU libraries are written: bound by what each stage's WGSL declares."""

from __future__ import annotations

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
