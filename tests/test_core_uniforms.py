"""A call's params packed as the kernel's WGSL declares its uniform: struct fields by type."""

from __future__ import annotations

import struct

import pytest
from fakes import kernel

from wgtune import ConfigError
from wgtune.sets.uniforms import param_names, params_by_name, uniform_bytes

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

# The way softmax-style kernels of WebGPU runtimes declare their sizes and factors: a struct of
# mixed u32 and f32 fields, a vec3 forcing padding, at the binding after the buffers.
SOURCE = """
struct Uniforms {
    rows: u32,
    cols: u32,
    scale: f32,
    offset: vec3<f32>,
    eps: f32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> uniforms: Uniforms;
@compute @workgroup_size(64) fn main() {}
"""


class Scalar:
    """Stands in for a numpy scalar (these tests run where numpy is not)."""

    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


def test_struct_fields_are_packed_by_their_types_at_their_offsets():
    packed = uniform_bytes(kernel("k", wgsl=SOURCE), (4, Scalar(1024), 2, (0, 1, 2), 1e-5), binding=2)
    # rows, cols, scale at 0, 4, 8; offset (vec3, align 16) at 16; eps right after it at 28.
    assert packed == struct.pack("<IIf4x3ff", 4, 1024, 2.0, 0.0, 1.0, 2.0, 1e-5)


def test_an_int_for_a_float_field_is_that_float_not_its_bits():
    packed = uniform_bytes(kernel("k", wgsl=SOURCE), (1, 1, 2, (0, 0, 0), 0), binding=2)
    assert struct.unpack_from("<f", packed, 8) == (2.0,)  # packed by Python type it would read 2.8e-45


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ((-1, 1, 1.0, (0, 0, 0), 0.0), "rows"),
        ((1.5, 1, 1.0, (0, 0, 0), 0.0), "rows"),
        ((1, 1, 1.0), "expects 5 values, got 3"),
        ((1, 1, "x", (0, 0, 0), 0.0), "scale"),
    ],
)
def test_params_that_do_not_fit_the_struct_are_an_error_naming_the_field(params, problem):
    with pytest.raises(ConfigError, match=f"k: params for uniforms: .*{problem}"):
        uniform_bytes(kernel("k", wgsl=SOURCE), params, binding=2)


def test_a_uniform_that_is_no_struct_or_a_source_beyond_reflection_packs_by_python_type():
    vector = SOURCE.replace("var<uniform> uniforms: Uniforms", "var<uniform> n: vec4<u32>")
    assert uniform_bytes(kernel("v", wgsl=vector), (7, 1.5), binding=2) == struct.pack("<If8x", 7, 1.5)
    assert uniform_bytes(kernel("u", wgsl="this is not WGSL {"), (7,), binding=2) == struct.pack("<I12x", 7)
    # No uniform at that binding (the call has another number of buffers): the plain rule too.
    assert uniform_bytes(kernel("k", wgsl=SOURCE), (7,), binding=5) == struct.pack("<I12x", 7)


def test_a_float_vector_uniform_types_every_param_and_zeroes_the_lanes_not_given():
    floats = SOURCE.replace("var<uniform> uniforms: Uniforms", "var<uniform> p: vec4<f32>")
    assert uniform_bytes(kernel("v", wgsl=floats), (2, 0.5), binding=2) == struct.pack("<4f", 2.0, 0.5, 0, 0)
    array = SOURCE.replace("var<uniform> uniforms: Uniforms", "var<uniform> p: array<vec4<f32>, 1>")
    assert uniform_bytes(kernel("a", wgsl=array), (3, 1.5), binding=2) == struct.pack("<If8x", 3, 1.5)  # plain rule
    # An integer vector keeps a float's bits (kernels bitcast them back): the plain rule.
    ints = SOURCE.replace("var<uniform> uniforms: Uniforms", "var<uniform> p: vec4<u32>")
    assert uniform_bytes(kernel("i", wgsl=ints), (2, 2.0), binding=2) == struct.pack("<If8x", 2, 2.0)


def test_params_by_name_follow_the_structs_field_order_and_name_what_is_wrong():
    named = kernel("named", wgsl=SOURCE)
    assert param_names(named) == ("rows", "cols", "scale", "offset", "eps")
    values = {"eps": 1e-5, "offset": (1, 2, 3), "scale": 2, "cols": 8, "rows": 4}
    assert params_by_name(named, values) == (4, 8, 2, (1, 2, 3), 1e-5)
    wrong = r"named: params: missing field\(s\) eps; unknown field\(s\) epsilon \(its uniform has rows"
    with pytest.raises(ConfigError, match=wrong):
        params_by_name(named, {**{k: v for k, v in values.items() if k != "eps"}, "epsilon": 1})
    vector = kernel("vector", wgsl=SOURCE.replace("var<uniform> uniforms: Uniforms", "var<uniform> p: vec4<f32>"))
    assert param_names(vector) is None
    with pytest.raises(ConfigError, match="vector: params given by name, but its params uniform is not a struct"):
        params_by_name(vector, {"n": 1})
