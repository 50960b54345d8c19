"""WGSL written as public WebGPU projects write theirs, shared by the tests that bind it (pure
text: the core tests run it on the fake device, in Pyodide too; the native ones on lavapipe)."""

from __future__ import annotations

# A layer as runtimes that keep weights in a bind group of their own write it: activations and
# sizes in group 0, the weights and bias in group 1.
LAYER_TEMPLATE = """
struct Uniforms { n: u32, scale: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> uniforms: Uniforms;
@group(1) @binding(0) var<storage, read> weight: array<f32>;
@group(1) @binding(1) var<storage, read> bias: array<f32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < uniforms.n) { y[gid.x] = uniforms.scale * weight[gid.x] * x[gid.x] + bias[gid.x]; }
}
"""


def layer(workgroup_size: int = 64) -> str:
    """The layer's WGSL with ``workgroup_size`` invocations a workgroup."""
    return LAYER_TEMPLATE.replace("WG", str(workgroup_size))


LAYER = layer()
