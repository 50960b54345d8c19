"""A call's params packed as the kernel's WGSL declares its uniform: struct fields by type."""

from __future__ import annotations

import struct

import pytest
from fakes import FakeDevice, kernel, make_set, make_tuner

from wgtune import Args, ConfigError, Hit
from wgtune.sets.uniforms import param_names, params_by_name, uniform_bytes
from wgtune.wgsl.declarations import WgslError

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


def typed(type_text: str) -> str:
    """The module with its params uniform declared as ``type_text`` instead of the struct."""
    return SOURCE.replace("var<uniform> uniforms: Uniforms", f"var<uniform> p: {type_text}")


def test_a_source_beyond_reflection_or_no_uniform_at_the_binding_packs_by_python_type():
    assert uniform_bytes(kernel("u", wgsl="this is not WGSL {"), (7, 1.5), binding=2) == struct.pack("<If8x", 7, 1.5)
    # No uniform at that binding (the call has another number of buffers): the plain rule too.
    assert uniform_bytes(kernel("k", wgsl=SOURCE), (7,), binding=5) == struct.pack("<I12x", 7)
    # An array of structs is no row of numbers: the plain rule.
    structs = typed("array<Uniforms, 2>")
    assert uniform_bytes(kernel("s", wgsl=structs), (7, 1.5), binding=2) == struct.pack("<If8x", 7, 1.5)


def test_a_float_vector_uniform_types_every_param_and_zeroes_the_lanes_not_given():
    assert uniform_bytes(kernel("v", wgsl=typed("vec4<f32>")), (2, 0.5), binding=2) == struct.pack("<4f", 2, 0.5, 0, 0)
    # An array of vectors takes its lanes in a row: 3 is the float 3.0 in an f32 lane, not an int's bits.
    array = kernel("a", wgsl=typed("array<vec4<f32>, 2>"))
    assert uniform_bytes(array, (3, 1.5, 0, 0, 4), binding=2) == struct.pack("<8f", 3, 1.5, 0, 0, 4, 0, 0, 0)
    matrix = kernel("m", wgsl=typed("mat2x2<f32>"))  # column after column
    assert uniform_bytes(matrix, (1, 2, 3), binding=2) == struct.pack("<4f", 1, 2, 3, 0)


@pytest.mark.parametrize(
    ("type_text", "params", "packed"),
    [
        ("vec4<u32>", (7, 2.0, Scalar(3)), struct.pack("<4I", 7, 2, 3, 0)),  # an integral float is that integer
        ("vec4<i32>", (-5, 2**31 - 1), struct.pack("<4i", -5, 2**31 - 1, 0, 0)),
        ("vec2<u32>", (2**32 - 1,), struct.pack("<2I8x", 2**32 - 1, 0)),
        ("u32", (9,), struct.pack("<I12x", 9)),
        ("array<vec4<u32>, 2>", (1, 2, 3, 4, 5), struct.pack("<8I", 1, 2, 3, 4, 5, 0, 0, 0)),
    ],
)
def test_integer_lanes_take_integers_in_their_range(type_text, params, packed):
    assert uniform_bytes(kernel("i", wgsl=typed(type_text)), params, binding=2) == packed


@pytest.mark.parametrize(
    ("type_text", "params", "problem"),
    [
        # -5 was packed as 4294967291 for a vec4<u32>, where a struct's u32 field refuses it.
        ("vec4<u32>", (-5,), r"vec4<u32>\[0\]: -5 is out of range for u32 \[0, 4294967296\)"),
        ("vec4<u32>", (1, 1.5), r"vec4<u32>\[1\]: u32 field given 1.5, which is not an integer"),
        ("vec4<u32>", (2**32,), r"vec4<u32>\[0\]: 4294967296 is out of range for u32"),
        ("vec4<i32>", (0, 0, -(2**31) - 1), r"vec4<i32>\[2\]: -2147483649 is out of range for i32"),
        ("vec4<u32>", (float("nan"),), r"vec4<u32>\[0\]"),
        ("u32", (-1,), r"u32: -1 is out of range for u32"),
        ("array<vec4<u32>, 2>", (1, 2, 3, 4, 5, -6), r"array<vec4<u32>, 2>\[1\]\[1\]: -6 is out of range for u32"),
        ("vec4<u32>", (1, 2, 3, 4, 5), "vec4<u32> holds 4 values, got 5 params"),
        ("vec4<f32>", ("x",), r"vec4<f32>\[0\]"),
    ],
)
def test_vector_and_array_lanes_refuse_what_their_type_cannot_hold_naming_the_lane(type_text, params, problem):
    with pytest.raises(ConfigError, match=f"i: params for p: .*{problem}"):
        uniform_bytes(kernel("i", wgsl=typed(type_text)), params, binding=2)


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


def test_params_a_key_cannot_take_on_its_first_call_are_that_calls_error_not_a_failed_tune():
    """A string for an f32 field on a key's first call is refused before any tune (WgslError
    naming the set, key and field), so the key is not remembered as failed: the next call, with
    params that fit, tunes it."""
    device = FakeDevice()
    tunables = make_set(kernel("a", wgsl=SOURCE), kernel("b", wgsl=SOURCE + "// b\n"))
    tuner = make_tuner(device)
    buffers = (device.buffer([1.0], "x"), device.buffer([0.0], "y"))
    with pytest.raises(WgslError, match=r"set 'fake' \[n=4\]: a: params for uniforms: Uniforms.scale: expects a num"):
        tuner.execute(tunables, Args(buffers, (4, 3, "2", (0.0, 0.0, 0.0), 1e-5)))
    assert device.profile_count == 0
    assert tuner.execute(tunables, Args(buffers, (4, 3, 2.0, (0.0, 0.0, 0.0), 1e-5))).name in ("a", "b")
    assert isinstance(tuner.fastest(tunables, tunables.key(Args(buffers, (4,)))), Hit)
