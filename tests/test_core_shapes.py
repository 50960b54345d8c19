"""What a candidate's WGSL decides: workgroup size and storage (a declaration that disagrees
fails it), and what each stage binds."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, make_tuner, quiet

from wgtune import Args, DeviceLimits, Kernel, Launch, TunableSet
from wgtune.gpu.device import check_limits
from wgtune.sets.bindings import PARAMS, binding_plan, stage_entries
from wgtune.sets.shaders import ShapeError, workgroup_shape

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

# A reduction written the way public softmax kernels are: the workgroup size an override, the
# shared array sized by it.
REDUCE = """
override WORKGROUP_SIZE: u32 = 256u;
var<workgroup> partial: array<f32, WORKGROUP_SIZE>;
var<workgroup> flag: u32;
@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(local_invocation_index) lid: u32) {}
"""


def grid(args):
    return (1, 1, 1)


def test_size_and_storage_come_from_the_wgsl_with_the_candidates_constants():
    assert workgroup_shape(Kernel("default", REDUCE, grid)) == ((256, 1, 1), 256 * 4 + 16)
    small = Kernel("small", REDUCE, grid, constants={"WORKGROUP_SIZE": 64})
    assert workgroup_shape(small) == ((64, 1, 1), 64 * 4 + 16)


def test_a_declaration_that_disagrees_with_the_wgsl_is_an_error_naming_both():
    lying = Kernel("lying", REDUCE.replace("256u", "1024u"), grid, workgroup_size=(64, 1, 1))
    with pytest.raises(ShapeError, match=r"lying declares workgroup_size \(64, 1, 1\), its WGSL says \(1024, 1, 1\)"):
        workgroup_shape(lying)
    short = Kernel("short", REDUCE, grid, workgroup_storage=1024)
    with pytest.raises(ShapeError, match="declares workgroup_storage 1024, its WGSL's var<workgroup> take 1040"):
        workgroup_shape(short)
    assert "its WGSL says (1024, 1, 1)" in check_limits(lying, DeviceLimits())


def test_a_lying_candidate_fails_with_the_reason_and_the_tune_goes_on():
    device = FakeDevice()
    honest = Kernel("honest", REDUCE, grid)
    lying = Kernel("lying", REDUCE, grid, workgroup_size=(64, 1, 1))
    tunables = TunableSet("reduce", [honest, lying], key=lambda args: {"n": args.params[0]})
    limits = DeviceLimits(max_invocations=256, max_workgroup_storage=2048)
    device.limits = limits
    tuner = make_tuner(device, config=quiet())
    assert tuner.execute(tunables, call(device, [1.0])).name == "honest"
    failed = tuner.results(tunables, tuner.key(tunables, call(device, [1.0])))[1]
    assert isinstance(failed, Launch) and "its WGSL says (256, 1, 1)" in failed.reason


def test_the_wgsl_decides_the_limits_a_device_checks():
    too_wide = Kernel("too_wide", REDUCE.replace("256u", "1024u"), grid)
    assert "workgroup (1024, 1, 1) has 1024 invocations, the device allows 256" in check_limits(
        too_wide, DeviceLimits(max_invocations=256))


def test_where_the_wgsl_cannot_tell_the_declaration_or_the_old_default_serves():
    opaque = "// generated elsewhere\n"
    assert workgroup_shape(Kernel("declared", opaque, grid, workgroup_size=(32, 2, 1), workgroup_storage=8)) == (
        (32, 2, 1), 8)
    assert workgroup_shape(Kernel("bare", opaque, grid)) == ((64, 1, 1), 0)


def test_undeclared_shapes_keep_the_checksums_of_kernels_that_declared_the_old_defaults():
    assert Kernel("k", REDUCE, grid).fingerprint() == Kernel(
        "k", REDUCE, grid, workgroup_size=(64, 1, 1), workgroup_storage=0).fingerprint()


# -- what each stage binds ---------------------------------------------------------------------

UNIFORM_FIRST = """
struct Uniforms { rows: u32, cols: u32, scale: f32 }
@group(0) @binding(0) var<uniform> uniforms: Uniforms;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main() { y[0] = x[0] * uniforms.scale; }
"""

USUAL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> n: vec4<u32>;
@compute @workgroup_size(64) fn main() {}
"""


def placed(kernel, count=3):
    """Where each stage of ``kernel`` binds a call of ``count`` buffers in order (named b0, b1, ...):
    ``(group, binding, buffer name or PARAMS)``."""
    args = Args(tuple(f"b{i}" for i in range(count)), (1,))
    return [stage_entries(plan, args, "stage") for plan in binding_plan(kernel)]


def test_buffers_bind_in_binding_order_past_a_uniform_at_binding_zero():
    assert placed(Kernel("k", UNIFORM_FIRST, grid), 2) == [[(0, 0, PARAMS), (0, 1, "b0"), (0, 2, "b1")]]


def test_each_stage_binds_only_what_it_declares_buffer_i_at_binding_i():
    first = Kernel("a", USUAL.replace("@group(0) @binding(2) var<storage, read_write> out: array<f32>;\n", ""), grid)
    second = Kernel("b", USUAL.replace("@group(0) @binding(0) var<storage, read> x: array<f32>;\n", "")
                    .replace("@group(0) @binding(3) var<uniform> n: vec4<u32>;\n", ""), grid)
    assert placed(Kernel(first.name, first.wgsl, grid, then=(second,))) == [
        [(0, 0, "b0"), (0, 1, "b1"), (0, 3, PARAMS)], [(0, 1, "b1"), (0, 2, "b2")]]


def test_a_source_beyond_the_reflection_or_uniforms_at_odd_places_bind_as_before():
    assert binding_plan(Kernel("opaque", "// generated elsewhere\n", grid)) is None
    before = [(0, 0, "b0"), (0, 1, "b1"), (0, 2, "b2"), (0, 3, PARAMS)]  # buffer i at binding i, params after
    assert stage_entries(None, Args(("b0", "b1", "b2"), (1,)), "opaque") == before
    other_uniform = Kernel("b", UNIFORM_FIRST.replace("@binding(0) var<uniform>", "@binding(3) var<uniform>"), grid)
    assert placed(Kernel("mixed", UNIFORM_FIRST, grid, then=(other_uniform,))) == [before, before]
