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


# y = 2x, and a runaway that computes the same but first spins every invocation of a grid far
# larger than the data through 60,000 steps of two random-number generators. Lavapipe stops a
# loop at 65,535 steps, so how long the runaway runs comes from its grid: (64, rows, 1) workgroups.
DOUBLE = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&y)) { y[g.x] = 2.0 * x[g.x]; }
}
"""
SPIN = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
    let i = g.x + g.y * n.x * 64u;
    var a = i;
    var b = i ^ 0x9e3779b9u;
    for (var step = 0u; step < 60000u; step++) {
        a = a * 1664525u + 1013904223u;
        b = b * 22695477u + 1u;
    }
    if (i < arrayLength(&y)) { y[i] = 2.0 * x[i]; }
    if (a == 7u && b == 9u) { y[0] = -1.0; }  // never both: keeps the loop from being optimised away
}
"""


# y = FACTOR * x over the call's n (a uniform), WG invocations a workgroup: the native tests' two-candidate
# set whose winners are stored, bundled or read in a dry run.
SCALE_TEMPLATE = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < n.x) { y[id.x] = FACTOR * x[id.x]; }
}
"""


def scale(factor: float, workgroup_size: int) -> str:
    """The scale kernel's WGSL: y = ``factor`` * x with ``workgroup_size`` invocations a workgroup."""
    return SCALE_TEMPLATE.replace("FACTOR", repr(float(factor))).replace("WG", str(workgroup_size))
