"""What WebGPU would refuse of a call's buffers and grid, found from the WGSL before the launch
(``launch_check.py``): the binding named, the minimum size read from the type's layout."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from wgtune import Args, DeviceLimits, Kernel
from wgtune.gpu.launch_check import STORAGE, UNIFORM, binding_needs, buffer_refusal, grid_refusal, usage_names

pytestmark = pytest.mark.core

WGSL = """
struct Header { count: u32, scale: f32, offset: vec2<f32> }
struct Rows { header: Header, data: array<vec4<f32>> }
@group(0) @binding(0) var<storage, read> rows: Rows;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> header: Header;
@group(1) @binding(0) var<storage, read_write> table: array<u32, 8>;
@compute @workgroup_size(64)
fn main() {}
"""
COPY = 0x4 | 0x8


@dataclass
class Buffer:
    size: int
    usage: int = STORAGE | COPY


def kernel(**extra) -> Kernel:
    return Kernel("k", WGSL, grid=lambda args: (1, 1, 1), **extra)


def test_each_binding_needs_a_whole_fixed_type_or_one_element_of_a_runtime_array():
    needs = binding_needs(kernel())
    assert {at: (need.name, need.uniform, need.min_bytes) for at, need in needs.items()} == {
        (0, 0): ("rows", False, 32),  # the header (16 bytes) and one vec4 (16)
        (0, 1): ("out", False, 4),
        (0, 2): ("header", True, 16),
        (1, 0): ("table", False, 32),
    }


@pytest.mark.parametrize(("group", "binding", "buffer", "says"), [
    (0, 1, Buffer(64, COPY), "binding 1 'out' (@group(0) @binding(1)) of candidate 'k': the buffer lacks STORAGE "
                             "usage (it has COPY_SRC|COPY_DST)"),
    (0, 2, Buffer(16, STORAGE), "binding 2 'header' (@group(0) @binding(2)) of candidate 'k': the buffer lacks "
                                "UNIFORM usage (it has STORAGE)"),
    (0, 0, Buffer(16), "binding 0 'rows' (@group(0) @binding(0)) of candidate 'k': the buffer has 16 bytes, the "
                       "binding needs at least 32"),
    (1, 0, Buffer(28), "binding 0 'table' (@group(1) @binding(0)) of candidate 'k': the buffer has 28 bytes, the "
                       "binding needs at least 32"),
    (0, 1, Buffer(6), "the buffer has 6 bytes, not a multiple of 4"),
    (0, 1, Buffer(0), "the buffer has 0 bytes"),
    (0, 1, Buffer(1 << 20), "the buffer has 1048576 bytes, the device binds at most 65536 of storage"),
    (0, 1, object(), "is not a GPUBuffer"),
])
def test_a_buffer_webgpu_would_refuse_is_named_by_its_binding(group, binding, buffer, says):
    limits = DeviceLimits(max_storage_binding=65536)
    problem = buffer_refusal(kernel(), [(group, binding, buffer)], limits)
    assert problem is not None and says in problem


def test_buffers_that_fit_and_entries_the_device_makes_pass():
    fine = [(0, 0, Buffer(32)), (0, 1, Buffer(4)), (0, 2, Buffer(16, UNIFORM | COPY)), (1, 0, Buffer(32)),
            (0, 3, Buffer(0))]  # (0, 3): declared nowhere, not checked
    assert buffer_refusal(kernel(), fine, DeviceLimits()) is None
    made_by_device = [(0, 1, "params uniform")]
    assert buffer_refusal(kernel(), made_by_device, DeviceLimits(), lambda buffer: buffer != "params uniform") is None


def test_a_source_the_reflection_cannot_read_checks_usage_nowhere():
    assert buffer_refusal(Kernel("opaque", "// not WGSL", grid=lambda a: (1, 1, 1)), [(0, 0, Buffer(0, 0))],
                          DeviceLimits()) is None


def test_a_grid_over_the_limit_is_refused_for_the_stage_that_dispatches_it():
    later = Kernel("total", WGSL, grid=lambda args: (args.params[0], 1, 1))
    two_stages = kernel(then=(later,))
    limits = DeviceLimits(max_workgroups_per_dimension=100)
    assert grid_refusal(two_stages, Args((), (50,)), (100, 1, 1), limits) is None
    assert "candidate 'k': exceeds a device limit: dispatch of (101, 1, 1)" in grid_refusal(
        two_stages, Args((), (50,)), (101, 1, 1), limits)
    assert "candidate 'k', stage 'total': exceeds a device limit: dispatch of (101, 1, 1)" in grid_refusal(
        two_stages, Args((), (101,)), (1, 1, 1), limits)


def test_usage_flags_are_named_as_webgpu_names_them():
    assert usage_names(STORAGE | COPY) == "COPY_SRC|COPY_DST|STORAGE"
    assert usage_names(0) == "none"
