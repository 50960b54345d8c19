"""WGSL reflection (``wgtune.wgsl.declarations``): declarations, memory layout and packing, on kernels written the
way WebGPU projects write theirs (ONNX Runtime Web, TensorFlow.js, WebLLM/TVM, Burn/CubeCL, wgpu's
examples), and the WGSL spec's own layout examples (https://www.w3.org/TR/WGSL/#memory-layouts)."""

from __future__ import annotations

import math
import struct

import pytest

from wgtune import ConfigError
from wgtune.wgsl.declarations import WgslError, layout, pack_struct, reflect
from wgtune.wgsl.syntax import evaluate, tokenize

# Pure core: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def offsets(type_text, module, space="storage"):
    return {f.name: (f.offset, f.size, f.align) for f in layout(type_text, module, space).fields}


def error(fn, *args, **kwargs) -> str:
    with pytest.raises(WgslError) as raised:
        fn(*args, **kwargs)
    return str(raised.value)


# -- kernels as projects write them --------------------------------------------------------------

SOFTMAX = """
// Row softmax, in the manner of ONNX Runtime Web's and TensorFlow.js's WebGPU kernels.
override WORKGROUP_SIZE: u32 = 64u;

struct Uniforms {
  rows: u32,
  cols: u32,
  row_stride: u32,
  in_offset: u32,
  out_offset: u32,
  scale: f32,      // 1 / temperature
  neg_inf: f32,
};

@group(0) @binding(0) var<uniform> uniforms: Uniforms;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> result: array<vec4<f32>>;

var<workgroup> row_max_shared: f32;
var<workgroup> row_sum_shared: f32;
var<workgroup> thread_shared: array<f32, WORKGROUP_SIZE>;

fn max4(v: vec4<f32>) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(local_invocation_index) lidx: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let row = wid.x;
  if (row >= uniforms.rows) { return; }
  var thread_max = uniforms.neg_inf;
  for (var col = lidx; col < uniforms.cols / 4u; col += WORKGROUP_SIZE) {
    thread_max = max(thread_max, max4(x[uniforms.in_offset + row * uniforms.row_stride + col]));
  }
  thread_shared[lidx] = thread_max;
  workgroupBarrier();
  for (var s = WORKGROUP_SIZE / 2u; s > 0u; s = s >> 1u) {
    if (lidx < s) { thread_shared[lidx] = max(thread_shared[lidx], thread_shared[lidx + s]); }
    workgroupBarrier();
  }
  if (lidx == 0u) { row_max_shared = thread_shared[0]; }
  workgroupBarrier();
}
"""


def test_softmax_bindings_uniform_struct_and_an_override_workgroup_size():
    module = reflect(SOFTMAX)
    assert [(b.group, b.binding, b.name, b.address_space, b.access, b.type) for b in module.bindings] == [
        (0, 0, "uniforms", "uniform", None, "Uniforms"),
        (0, 1, "x", "storage", "read", "array<vec4<f32>>"),
        (0, 2, "result", "storage", "read_write", "array<vec4<f32>>"),
    ]
    assert module.binding("uniforms").line == 15
    (override,) = module.overrides
    assert (override.name, override.type, override.default, override.id, override.key) == (
        "WORKGROUP_SIZE", "u32", "64u", None, "WORKGROUP_SIZE")
    entry = module.entry_point()
    assert (entry.name, entry.stage, entry.workgroup_size) == ("main", "compute", ("WORKGROUP_SIZE", 1, 1))
    assert entry.workgroup_size_with() == (64, 1, 1)  # the override's default
    assert entry.workgroup_size_with({"WORKGROUP_SIZE": 256}) == (256, 1, 1)
    assert entry.workgroup_size_with({"WORKGROUP_SIZE": 128.0}) == (128, 1, 1)  # a JS number
    # Workgroup memory as WebGPU counts it: roundUp(16, SizeOf(T)) per variable.
    assert [(v.name, v.size) for v in module.workgroup_vars] == [
        ("row_max_shared", 4), ("row_sum_shared", 4), ("thread_shared", None)]
    assert module.workgroup_vars[2].size_with({"WORKGROUP_SIZE": 256}) == 1024
    assert module.workgroup_storage_with() == 16 + 16 + 256
    assert module.workgroup_storage_with({"WORKGROUP_SIZE": 256}) == 16 + 16 + 1024


def test_softmax_uniforms_pack_ints_as_u32_and_js_integers_as_f32_padded_to_16_bytes():
    module = reflect(SOFTMAX)
    uniforms = layout("Uniforms", module, "uniform")
    assert (uniforms.size, uniforms.align) == (28, 4)
    assert [(f.name, f.type, f.offset) for f in uniforms.fields] == [
        ("rows", "u32", 0), ("cols", "u32", 4), ("row_stride", "u32", 8), ("in_offset", "u32", 12),
        ("out_offset", "u32", 16), ("scale", "f32", 20), ("neg_inf", "f32", 24)]
    values = {"rows": 3, "cols": 1024, "row_stride": 256, "in_offset": 0, "out_offset": 7,
              "scale": 2, "neg_inf": -math.inf}  # scale arrives from JS as the integer 2
    packed = pack_struct(module, "Uniforms", values)
    assert packed == struct.pack("<5I2f4x", 3, 1024, 256, 0, 7, 2.0, -math.inf)  # 28 -> 32 bytes
    assert pack_struct(module, "Uniforms", values, "storage") == packed[:28]
    # A sequence in field order packs the same.
    assert pack_struct(module, "Uniforms", [3, 1024, 256, 0, 7, 2.0, -math.inf]) == packed


MATMUL = """
// Tiled matmul with workgroup tiles, in the manner of TensorFlow.js's and WebLLM's kernels.
const TILE_M: u32 = 32u;
const TILE_N = 32u;
const TILE_K = 8u;
const ROWS_PER_THREAD = 4;
const COLS_PER_THREAD = TILE_N / 8u;

struct Dims { M: u32, N: u32, K: u32, alpha: f32, }

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: Dims;

var<workgroup> a_tile: array<array<f32, TILE_K>, TILE_M>;
var<workgroup> b_tile: array<array<f32, TILE_N + 1>, TILE_K>;   // +1 against bank conflicts

@compute @workgroup_size(TILE_N / COLS_PER_THREAD, TILE_M / ROWS_PER_THREAD, 1)
fn matmul(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  var acc: array<array<f32, 4>, ROWS_PER_THREAD>;
  for (var t = 0u; t < dims.K; t += TILE_K) {
    workgroupBarrier();
  }
}
"""


def test_tiled_matmul_resolves_consts_in_workgroup_size_and_workgroup_arrays():
    module = reflect(MATMUL)
    assert {c.name: c.value for c in module.constants} == {
        "TILE_M": 32, "TILE_N": 32, "TILE_K": 8, "ROWS_PER_THREAD": 4, "COLS_PER_THREAD": 4}
    assert module.constants[0].type == "u32" and module.constants[1].type is None
    assert module.entry_point("matmul").workgroup_size == (8, 8, 1)
    assert module.entry_point().workgroup_size_with() == (8, 8, 1)
    a_tile, b_tile = module.workgroup_vars
    assert (a_tile.type, a_tile.size) == ("array<array<f32, TILE_K>, TILE_M>", 32 * 8 * 4)
    assert (b_tile.type, b_tile.size) == ("array<array<f32, TILE_N + 1>, TILE_K>", 8 * 33 * 4)
    assert layout(b_tile.type, module, "workgroup").type == "array<array<f32, 33>, 8>"
    assert module.workgroup_storage_with() == 1024 + 1056
    assert pack_struct(module, "Dims", {"M": 4096, "N": 4096, "K": 4096, "alpha": 1}) == struct.pack(
        "<3If", 4096, 4096, 4096, 1.0)


TWO_GROUPS = """
const PARAMS_GROUP = 1u;
struct Params { gain: f32, bias: f32, size: vec2<u32>, }

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;

@group(PARAMS_GROUP) @binding(0) var<uniform> params: Params;
@group(1) @binding(1) var<storage> lut: array<vec4<f32>, 256>;
@group(1) @binding(2) var src_tex: texture_2d<f32>;
@group(1) @binding(3) var src_sampler: sampler;
@group(1) @binding(4) var dst: texture_storage_2d<rgba8unorm, write>;

@compute @workgroup_size(16, 16)
fn apply(@builtin(global_invocation_id) gid: vec3<u32>) {
  let uv = vec2<f32>(gid.xy) / vec2<f32>(params.size);
  output[gid.x] = input[gid.x] * params.gain + textureSampleLevel(src_tex, src_sampler, uv, 0.0).x;
}
"""


def test_two_bind_groups_with_textures_and_samplers_recorded_without_layout():
    module = reflect(TWO_GROUPS)
    assert [(b.group, b.binding, b.name, b.address_space, b.access) for b in module.bindings] == [
        (0, 0, "input", "storage", "read"), (0, 1, "output", "storage", "read_write"),
        (1, 0, "params", "uniform", None), (1, 1, "lut", "storage", "read"),  # read is the default
        (1, 2, "src_tex", "handle", None), (1, 3, "src_sampler", "handle", None),
        (1, 4, "dst", "handle", None)]
    assert module.binding("dst").type == "texture_storage_2d<rgba8unorm, write>"
    assert module.struct("Params").members[2].type == "vec2<u32>"
    assert module.entry_point().workgroup_size == (16, 16, 1)
    assert layout("array<vec4<f32>, 256>", module).size == 4096
    assert "has no memory layout" in error(layout, "texture_2d<f32>", module)
    assert offsets("Params", module, "uniform") == {"gain": (0, 4, 4), "bias": (4, 4, 4), "size": (8, 8, 8)}
    assert pack_struct(module, "Params", {"gain": 0.5, "bias": -1, "size": (640, 480)}) == struct.pack(
        "<2f2I", 0.5, -1.0, 640, 480)


# -- layouts ---------------------------------------------------------------------------------------

def test_the_classic_vec3_padding_cases():
    module = reflect("""
        struct Tight { a: vec3<f32>, b: f32 }     // b fills vec3's last 4 bytes: 16
        struct Padded { a: f32, b: vec3<f32> }    // b is 16-aligned: 32
        // TensorFlow.js's uniforms: vec4/vec3 shapes after two f32
        struct Uniforms { NAN: f32, INFINITY: f32, xShape: vec4<i32>, outShape: vec3<i32>, dispatchSize: vec3<u32>, }
    """)
    assert (layout("Tight", module).size, offsets("Tight", module)) == (16, {"a": (0, 12, 16), "b": (12, 4, 4)})
    assert (layout("Padded", module).size, offsets("Padded", module)) == (32, {"a": (0, 4, 4), "b": (16, 12, 16)})
    assert pack_struct(module, "Tight", {"a": [1, 2, 3], "b": 4}) == struct.pack("<4f", 1, 2, 3, 4)
    assert pack_struct(module, "Padded", {"a": 1, "b": [2, 3, 4]}) == struct.pack("<f12x3f4x", 1, 2, 3, 4)
    assert [(f.name, f.offset) for f in layout("Uniforms", module, "uniform").fields] == [
        ("NAN", 0), ("INFINITY", 4), ("xShape", 16), ("outShape", 32), ("dispatchSize", 48)]
    assert pack_struct(module, "Uniforms", {"NAN": math.nan, "INFINITY": math.inf, "xShape": [1, 2, 3, 4],
                                             "outShape": [-1, 5, 6], "dispatchSize": [7, 8, 9]}) == struct.pack(
        "<2f8x4i3i4x3I4x", math.nan, math.inf, 1, 2, 3, 4, -1, 5, 6, 7, 8, 9)


# The spec's "Alignment and Size" table, row by row (AlignOf, SizeOf).
SPEC_TABLE = [
    ("i32", 4, 4), ("u32", 4, 4), ("f32", 4, 4), ("f16", 2, 2), ("atomic<u32>", 4, 4), ("atomic<f32>", 4, 4),
    ("vec2<f32>", 8, 8), ("vec2<f16>", 4, 4), ("vec3<u32>", 16, 12), ("vec3<f16>", 8, 6),
    ("vec4<i32>", 16, 16), ("vec4<f16>", 8, 8),
    ("mat2x2<f32>", 8, 16), ("mat2x2<f16>", 4, 8), ("mat3x2<f32>", 8, 24), ("mat3x2<f16>", 4, 12),
    ("mat4x2<f32>", 8, 32), ("mat4x2<f16>", 4, 16), ("mat2x3<f32>", 16, 32), ("mat2x3<f16>", 8, 16),
    ("mat3x3<f32>", 16, 48), ("mat3x3<f16>", 8, 24), ("mat4x3<f32>", 16, 64), ("mat4x3<f16>", 8, 32),
    ("mat2x4<f32>", 16, 32), ("mat2x4<f16>", 8, 16), ("mat3x4<f32>", 16, 48), ("mat3x4<f16>", 8, 24),
    ("mat4x4<f32>", 16, 64), ("mat4x4<f16>", 8, 32),
    # "Array Layout Examples": array<f32, 8> (stride 4, size 32), array<vec3<f32>, 8> (stride 16, size 128).
    ("array<f32, 8>", 4, 32), ("array<vec3<f32>, 8>", 16, 128),
    # Shorthand aliases are the same types.
    ("vec4f", 16, 16), ("vec3u", 16, 12), ("vec2i", 8, 8), ("vec4h", 8, 8), ("mat4x4f", 16, 64), ("mat3x3h", 8, 24),
]


@pytest.mark.parametrize(("type_text", "align", "size"), SPEC_TABLE)
def test_alignment_and_size_match_the_spec_table(type_text, align, size):
    module = reflect("enable f16;")
    lay = layout(type_text, module, "storage")
    assert (lay.align, lay.size) == (align, size)


def test_runtime_sized_arrays_and_the_spec_array_examples():
    module = reflect("""
        @group(0) @binding(0) var<storage> weights: array<f32>;
        @group(0) @binding(1) var<storage> directions: array<vec3<f32>>;
        struct Particles { count: u32, pad: vec3<u32>, items: array<vec4f>, }
    """)
    weights, directions = (layout(b.type, module, b.address_space) for b in module.bindings)
    assert (weights.stride, weights.runtime_sized, directions.stride, directions.element.type) == (
        4, True, 16, "vec3<f32>")
    particles = layout("Particles", module)
    assert particles.runtime_sized and particles.size == 48  # the minimum binding size: one element
    assert pack_struct(module, "Particles", {"count": 2, "pad": [0, 0, 0], "items": [[1, 2, 3, 4], [5, 6, 7, 8]]},
                       "storage") == struct.pack("<I28x8f", 2, *range(1, 9))
    assert len(pack_struct(module, "Particles", {"count": 0, "pad": [0, 0, 0], "items": []}, "storage")) == 48
    runtime = pack_struct(module, "array<vec3<f32>>", [[1, 2, 3]] * 2, "storage")
    assert runtime == struct.pack("<3f4x3f4x", 1, 2, 3, 1, 2, 3)


SPEC_IMPLICIT = """
struct A {                                     //             align(8)  size(24)
    u: f32,                                    // offset(0)   align(4)  size(4)
    v: f32,                                    // offset(4)   align(4)  size(4)
    w: vec2<f32>,                              // offset(8)   align(8)  size(8)
    x: f32                                     // offset(16)  align(4)  size(4)
    // -- implicit struct size padding --      // offset(20)            size(4)
}

struct B {                                     //             align(16) size(160)
    a: vec2<f32>,                              // offset(0)   align(8)  size(8)
    // -- implicit member alignment padding -- // offset(8)             size(8)
    b: vec3<f32>,                              // offset(16)  align(16) size(12)
    c: f32,                                    // offset(28)  align(4)  size(4)
    d: f32,                                    // offset(32)  align(4)  size(4)
    // -- implicit member alignment padding -- // offset(36)            size(4)
    e: A,                                      // offset(40)  align(8)  size(24)
    f: vec3<f32>,                              // offset(64)  align(16) size(12)
    // -- implicit member alignment padding -- // offset(76)            size(4)
    g: array<A, 3>,    // element stride 24       offset(80)  align(8)  size(72)
    h: i32                                     // offset(152) align(4)  size(4)
    // -- implicit struct size padding --      // offset(156)           size(4)
}

@group(0) @binding(0)
var<storage,read_write> storage_buffer: B;
"""


def test_spec_example_structures_with_implicit_member_sizes_and_alignments():
    """'Layout of structures using implicit member sizes and alignments' (Structure Member Layout)."""
    module = reflect(SPEC_IMPLICIT)
    a, b = layout("A", module), layout("B", module)
    assert (a.align, a.size, b.align, b.size) == (8, 24, 16, 160)
    assert offsets("A", module) == {"u": (0, 4, 4), "v": (4, 4, 4), "w": (8, 8, 8), "x": (16, 4, 4)}
    assert offsets("B", module) == {
        "a": (0, 8, 8), "b": (16, 12, 16), "c": (28, 4, 4), "d": (32, 4, 4), "e": (40, 24, 8),
        "f": (64, 12, 16), "g": (80, 72, 8), "h": (152, 4, 4)}
    assert b.fields[6].layout.stride == 24
    # The same B is not a valid uniform: e (a struct) must be 16-aligned there.
    assert "member 'e'" in error(layout, "B", module, "uniform")


SPEC_EXPLICIT = """
struct A {                                     //             align(8)  size(32)
    u: f32,                                    // offset(0)   align(4)  size(4)
    v: f32,                                    // offset(4)   align(4)  size(4)
    w: vec2<f32>,                              // offset(8)   align(8)  size(8)
    @size(16) x: f32                           // offset(16)  align(4)  size(16)
}

struct B {                                     //             align(16) size(208)
    a: vec2<f32>,                              // offset(0)   align(8)  size(8)
    // -- implicit member alignment padding -- // offset(8)             size(8)
    b: vec3<f32>,                              // offset(16)  align(16) size(12)
    c: f32,                                    // offset(28)  align(4)  size(4)
    d: f32,                                    // offset(32)  align(4)  size(4)
    // -- implicit member alignment padding -- // offset(36)            size(12)
    @align(16) e: A,                           // offset(48)  align(16) size(32)
    f: vec3<f32>,                              // offset(80)  align(16) size(12)
    // -- implicit member alignment padding -- // offset(92)            size(4)
    g: array<A, 3>,    // element stride 32       offset(96)  align(8)  size(96)
    h: i32                                     // offset(192) align(4)  size(4)
    // -- implicit struct size padding --      // offset(196)           size(12)
}

@group(0) @binding(0)
var<uniform> uniform_buffer: B;
"""


def test_spec_example_structures_with_explicit_member_sizes_and_alignments_in_a_uniform():
    """'Layout of structures with explicit member sizes and alignments': valid in a uniform."""
    module = reflect(SPEC_EXPLICIT)
    assert module.structs[0].members[3].size == 16 and module.structs[1].members[4].align == 16
    b = layout("B", module, "uniform")
    assert (layout("A", module, "uniform").size, b.align, b.size) == (32, 16, 208)
    assert offsets("B", module, "uniform") == {
        "a": (0, 8, 8), "b": (16, 12, 16), "c": (28, 4, 4), "d": (32, 4, 4), "e": (48, 32, 16),
        "f": (80, 12, 16), "g": (96, 96, 8), "h": (192, 4, 4)}
    a = {"u": 1, "v": 2, "w": [3, 4], "x": 5}
    packed = pack_struct(module, "B", {"a": [1, 2], "b": [3, 4, 5], "c": 6, "d": 7, "e": a, "f": [8, 9, 10],
                                       "g": [a, a, a], "h": -11})
    a_bytes = struct.pack("<5f12x", 1, 2, 3, 4, 5)
    assert packed == (struct.pack("<2f8x3ff f12x", 1, 2, 3, 4, 5, 6, 7) + a_bytes + struct.pack("<3f4x", 8, 9, 10)
                      + a_bytes * 3 + struct.pack("<i12x", -11))
    assert len(packed) == 208


def test_spec_examples_satisfying_uniform_offset_and_stride_requirements():
    """'Satisfying offset requirements' and '... stride requirements for uniform address space'."""
    module = reflect("""
        struct S { x: f32 }
        struct Invalid { a: S, b: f32 }
        struct Valid { a: S, @align(16) b: f32 }
        struct small_stride { a: array<f32,8> }
        struct wrapped_f32 { @size(16) elem: f32 }
        struct big_stride { a: array<wrapped_f32,8> }
    """)
    message = error(layout, "Invalid", module, "uniform")
    assert "struct Invalid (line 3), member 'b'" in message and "'a'" in message and "16" in message
    assert offsets("Valid", module, "uniform") == {"a": (0, 4, 4), "b": (16, 4, 16)}
    message = error(layout, "small_stride", module, "uniform")
    assert "struct small_stride (line 5), member 'a'" in message and "stride 4" in message
    assert layout("big_stride", module, "uniform").fields[0].layout.stride == 16
    # In storage both are fine.
    assert layout("Invalid", module).size == 8 and layout("small_stride", module).size == 32
    packed = pack_struct(module, "big_stride", {"a": [{"elem": i} for i in range(8)]})
    assert packed == b"".join(struct.pack("<f12x", i) for i in range(8))


def test_requires_uniform_buffer_standard_layout_lifts_the_uniform_constraints():
    module = reflect("""
        requires uniform_buffer_standard_layout;
        struct S { x: f32 }
        struct Compact { a: S, b: f32, c: array<f32, 3> }
    """)
    assert module.requires == ("uniform_buffer_standard_layout",)
    assert offsets("Compact", module, "uniform") == {"a": (0, 4, 4), "b": (4, 4, 4), "c": (8, 12, 4)}
    packed = pack_struct(module, "Compact", {"a": {"x": 1}, "b": 2, "c": [3, 4, 5]})
    assert packed == struct.pack("<5f12x", *range(1, 6))


def test_matrices_pack_column_major_from_columns_or_flat_values():
    module = reflect("""
        struct Camera {
            view: mat4x4f,
            normal: mat3x3<f32>,   // columns are vec3: stride 16
            uv: mat2x2f,
        }
        @group(0) @binding(0) var<uniform> camera: Camera;
    """)
    camera = layout("Camera", module, "uniform")
    assert offsets("Camera", module, "uniform") == {"view": (0, 64, 16), "normal": (64, 48, 16), "uv": (112, 16, 8)}
    assert camera.size == 128 and camera.fields[1].layout.stride == 16 and camera.fields[1].layout.count == 3
    view = [[float(4 * c + r) for r in range(4)] for c in range(4)]
    normal = [[1, 0, 0], [0, 2, 0], [0, 0, 3]]
    expected = (struct.pack("<16f", *range(16)) + struct.pack("<3f4x3f4x3f4x", 1, 0, 0, 0, 2, 0, 0, 0, 3)
                + struct.pack("<4f", 5, 6, 7, 8))
    assert pack_struct(module, "Camera", {"view": view, "normal": normal, "uv": [[5, 6], [7, 8]]}) == expected
    flat = {"view": list(range(16)), "normal": [1, 0, 0, 0, 2, 0, 0, 0, 3], "uv": [5, 6, 7, 8]}
    assert pack_struct(module, "Camera", flat) == expected
    assert "mat3x3<f32> (its 3 columns) expects 3 values, got 2" in error(
        pack_struct, module, "Camera", {**flat, "normal": [[1, 0, 0], [0, 1, 0]]})


def test_nested_struct_in_a_uniform_is_16_aligned_and_followed_by_16_rounded_room():
    module = reflect("""
        struct Range { lo: f32, hi: f32 }                        // align 4, size 8
        struct Bad { count: u32, range: Range, }
        struct Crowded { count: u32, @align(16) range: Range, gain: f32 }
        struct Good { count: u32, @align(16) range: Range, @align(16) gain: f32 }
        @group(0) @binding(0) var<uniform> good: Good;
    """)
    message = error(layout, "Bad", module, "uniform")
    assert "struct Bad (line 3), member 'range' (line 3)" in message
    assert "offset 4" in message and "multiple of 16" in message and "@align(16)" in message
    message = error(layout, "Crowded", module, "uniform")
    assert "member 'gain'" in message and "at least 16 bytes" in message and "'range'" in message
    assert offsets("Good", module, "uniform") == {"count": (0, 4, 4), "range": (16, 8, 16), "gain": (32, 4, 16)}
    assert layout("Good", module, "uniform").size == 48
    assert pack_struct(module, "Good", {"count": 9, "range": {"lo": -1, "hi": 1}, "gain": 0.25}) == struct.pack(
        "<I12x2f8xf12x", 9, -1.0, 1.0, 0.25)
    assert offsets("Bad", module, "storage")["range"] == (4, 8, 4)  # storage has no such rule


def test_arrays_in_a_uniform_need_a_stride_of_16():
    module = reflect("""
        // ONNX Runtime Web packs shapes as arrays of vec4<u32> in its uniforms.
        struct Uniforms { output_size: u32, shape: array<vec4<u32>, 2>, strides: array<f32, 4>, }
        struct Shapes { output_size: u32, shape: array<vec4<u32>, 2>, }
    """)
    message = error(layout, "Uniforms", module, "uniform")
    assert "member 'strides'" in message and "stride 4" in message and "multiple of 16" in message
    assert offsets("Shapes", module, "uniform") == {"output_size": (0, 4, 4), "shape": (16, 32, 16)}
    assert pack_struct(module, "Shapes", {"output_size": 24, "shape": [[2, 3, 4, 1], [12, 4, 1, 1]]}) == struct.pack(
        "<I12x8I", 24, 2, 3, 4, 1, 12, 4, 1, 1)
    assert "stride 4" in error(layout, "array<f32, 4>", module, "uniform")


def test_f16_fields_pack_as_half_floats():
    module = reflect("""
        enable f16;
        struct Half { a: f16, b: vec3<f16>, c: f32, d: vec2h, }
        @group(0) @binding(0) var<uniform> half: Half;
    """)
    assert module.enables == ("f16",)
    assert offsets("Half", module, "uniform") == {"a": (0, 2, 2), "b": (8, 6, 8), "c": (16, 4, 4), "d": (20, 4, 4)}
    assert layout("Half", module, "uniform").size == 24
    packed = pack_struct(module, "Half", {"a": 1.5, "b": [1, 2, 3], "c": 0.1, "d": [-2, 65504]})
    assert packed == struct.pack("<e6x3e2xf2e8x", 1.5, 1, 2, 3, 0.1, -2, 65504)  # 24 -> 32 bytes
    assert "out of range for f16" in error(pack_struct, module, "Half", {"a": 1e6, "b": [1, 2, 3], "c": 0, "d": [0, 0]})
    assert "enable f16" in error(layout, "Half", reflect("struct Half { a: f16 }"))


def test_aliases_resolve_to_their_types():
    module = reflect("""
        alias Vec = vec4<f32>;
        alias Tile = array<Vec, TILE>;
        const TILE = 4;
        struct Block { tile: Tile, scale: f32 }
        alias Params = Block;
    """)
    assert [(a.name, a.type) for a in module.aliases] == [("Vec", "vec4<f32>"), ("Tile", "array<Vec, TILE>"),
                                                        ("Params", "Block")]
    assert layout("Tile", module).type == "array<vec4<f32>, 4>"
    assert offsets("Params", module, "uniform") == {"tile": (0, 64, 16), "scale": (64, 4, 4)}


def test_overrides_with_ids_inferred_types_and_defaults_from_other_overrides():
    module = reflect("""
        @id(0) override block_width: u32 = 8u;
        override block_height = block_width * 2u;    // type inferred from its default
        @id(7) override threshold: f32;              // no default: must be given
        override use_fast_path: bool = true;
        @compute @workgroup_size(block_width, block_height)
        fn shuffler() { }
    """)
    assert [(o.name, o.type, o.default, o.id, o.key) for o in module.overrides] == [
        ("block_width", "u32", "8u", 0, "0"), ("block_height", None, "block_width * 2u", None, "block_height"),
        ("threshold", "f32", None, 7, "7"), ("use_fast_path", "bool", "true", None, "use_fast_path")]
    entry = module.entry_point("shuffler")
    assert entry.workgroup_size == ("block_width", "block_height", 1)
    assert entry.workgroup_size_with() == (8, 16, 1)
    assert entry.workgroup_size_with({"0": 16}) == (16, 32, 1)  # WebGPU keys an @id override by its id
    assert entry.workgroup_size_with({"0": 4, "block_height": 3, "7": 0.5}) == (4, 3, 1)
    message = error(entry.workgroup_size_with, {"block_width": 16})
    assert "'block_width' is not an override" in message and "its key is '0'" in message


def test_constants_read_every_literal_form():
    module = reflect("""
        const A = 16;  const B = 16u;  const C: i32 = -4i;  const D = 0x10u;  const E = 0x1F;
        const F = 1.5;  const G = 2.0f;  const H = 1e-3;  const I = 0.5h;  const J = .25;  const K = 3f;
        const L = 0x1.8p1;  const M = (A + 2) * 3 % 7;  const N = -7 / 2;  const O = u32(2.9) + i32(-2.9);
        const ONES = vec4<f32>(1.0);   // not a number: recorded, no value
        const YES = true;
    """)
    values = {c.name: c.value for c in module.constants}
    assert values == {"A": 16, "B": 16, "C": -4, "D": 16, "E": 31, "F": 1.5, "G": 2.0, "H": 1e-3, "I": 0.5,
                      "J": 0.25, "K": 3.0, "L": 3.0, "M": 5, "N": -3, "O": 0, "ONES": None, "YES": None}
    assert all(type(values[n]) is int for n in "ABCDEMNO") and all(type(values[n]) is float for n in "FGHIJKL")
    assert module.constants[-2].expr == "vec4<f32>(1.0)"
    assert "const ONES (line 5) is not a number" in error(layout, "array<f32, ONES>", module)


def test_comments_attributes_on_earlier_lines_and_odd_formatting():
    source = (
        "/* header /* nested */ still a comment\r\n"
        "   @compute @workgroup_size(1) fn commented_out() {} */\r\n"
        "enable f16 ;\r\n"
        "struct\tP /* the params */ {\r\n"
        "  // leading comment\r\n"
        "  @align( 16 )  /* between */ a : vec2 < f32 > ,\r\n"
        "  @size(8)\r\n"
        "  b:u32;          // old-style separator\r\n"
        "  c : array< vec4 <f32> ,2 , > ,  \r\n"
        "};\r\n"
        "@binding( 2 ) // binding first, group on the next line\r\n"
        "  @group(1)\r\n"
        "var<storage,read_write>out_buf:array<atomic<u32>>;\r\n"
        "@group(1)@binding(3)var<uniform>p:P;\r\n"
        "@compute\r\n"
        "@workgroup_size(\r\n"
        "  64,\r\n"
        "  1,   // trailing comma\r\n"
        ")\r\n"
        "fn\r\n"
        "kernel_main ( @builtin(global_invocation_id) gid : vec3<u32> , ) {\r\n"
        "  { { let s = array<u32, 2>(1u, 2u); } }\r\n"
        "}\r\n"
    )
    module = reflect(source)
    assert [(b.group, b.binding, b.name, b.type, b.line) for b in module.bindings] == [
        (1, 2, "out_buf", "array<atomic<u32>>", 13), (1, 3, "p", "P", 14)]
    (struct_p,) = module.structs
    assert [(m.name, m.type, m.align, m.size, m.line) for m in struct_p.members] == [
        ("a", "vec2<f32>", 16, None, 6), ("b", "u32", None, 8, 8), ("c", "array<vec4<f32>, 2>", None, None, 9)]
    assert offsets("P", module, "uniform") == {"a": (0, 8, 16), "b": (8, 8, 4), "c": (16, 32, 16)}
    assert [(e.name, e.workgroup_size, e.line) for e in module.entry_points] == [("kernel_main", (64, 1, 1), 21)]
    assert module.workgroup_vars == ()


def test_entry_points_of_other_stages_and_lookups():
    module = reflect("""
        @vertex fn vs(@builtin(vertex_index) i: u32) -> @builtin(position) vec4f { return vec4f(0.0); }
        @fragment fn fs() -> @location(0) vec4<f32> { return vec4<f32>(1.0); }
        @compute @workgroup_size(8, 8, 4) fn cs() {}
        fn helper() -> i32 { return 1; }
        var<private> counter: u32;
    """)
    assert [(e.name, e.stage, e.workgroup_size) for e in module.entry_points] == [
        ("vs", "vertex", None), ("fs", "fragment", None), ("cs", "compute", (8, 8, 4))]
    assert module.entry_point().name == "cs"
    assert "fragment entry point" in error(module.entry_point("fs").workgroup_size_with)
    assert "no single entry point 'missing'" in error(module.entry_point, "missing")
    assert "no binding named 'x'" in error(module.binding, "x")


def test_every_kernel_wgtune_ships_reflects_to_what_it_declares():
    """The kernel families' generated WGSL (matmul f32 and f16, row reductions, fma), every stage:
    the reflected workgroup size and workgroup storage are what the tuner checks the limits
    against (a declaration that disagreed would raise), and every buffer binding lays out."""
    from wgtune.kernels.bandwidth import fma_set
    from wgtune.kernels.matmul import matmul_f16_set, matmul_set
    from wgtune.kernels.reduction import reduction_set
    from wgtune.sets.shaders import workgroup_shape

    stages = [stage for tunables in (matmul_set(), matmul_f16_set(), reduction_set("sum"), fma_set())
              for kernel in tunables.candidates for stage in (kernel, *kernel.then)]
    assert len(stages) > 100
    for stage in stages:
        module = reflect(stage.wgsl)
        constants = dict(stage.constants) or None
        read = (module.entry_point(stage.entry_point).workgroup_size_with(constants),
                module.workgroup_storage_with(constants))
        assert workgroup_shape(stage) == read, stage.name
        for b in module.bindings:
            assert layout(b.type, module, b.address_space).size > 0, (stage.name, b.name)


# -- packing values ------------------------------------------------------------------------------

class NumpyLikeScalar:
    """Stands in for a numpy scalar (the core's tests run without numpy): it has ``.item()``."""

    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


class Index:
    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


class Real:
    def __float__(self):
        return 0.75


PARAMS = reflect("struct Params { n: u32, offset: i32, scale: f32, dims: vec2<u32> }")


def test_numbers_may_be_numpy_like_scalars_index_or_float_objects_and_bools():
    values = {"n": NumpyLikeScalar(7), "offset": Index(-3), "scale": NumpyLikeScalar(2), "dims": [True, 2.0]}
    assert pack_struct(PARAMS, "Params", values) == struct.pack("<Iif4xII8x", 7, -3, 2.0, 1, 2)  # 24 -> 32
    values = {"n": 5.0, "offset": -(2**31), "scale": Real(), "dims": (NumpyLikeScalar(1.0), 2**32 - 1)}
    assert pack_struct(PARAMS, "Params", values) == struct.pack("<Iif4xII8x", 5, -(2**31), 0.75, 1, 2**32 - 1)


@pytest.mark.parametrize(("values", "message"), [
    ({"offset": 0, "scale": 1, "dims": [1, 1]}, "Params: missing field(s) n"),
    ({"n": 1, "offset": 0, "scale": 1, "dims": [1, 1], "extra": 2}, "Params: unknown field(s) extra"),
    ({"n": 1.5, "offset": 0, "scale": 1, "dims": [1, 1]}, "Params.n: u32 field given 1.5, which is not an integer"),
    ({"n": -1, "offset": 0, "scale": 1, "dims": [1, 1]}, "Params.n: -1 is out of range for u32"),
    ({"n": 2**32, "offset": 0, "scale": 1, "dims": [1, 1]}, "Params.n: 4294967296 is out of range for u32"),
    ({"n": 1, "offset": 2**31, "scale": 1, "dims": [1, 1]}, "Params.offset: 2147483648 is out of range for i32"),
    ({"n": 1, "offset": 0, "scale": 1e39, "dims": [1, 1]}, "Params.scale: 1e+39 is out of range for f32"),
    ({"n": 1, "offset": 0, "scale": 10**400, "dims": [1, 1]}, "Params.scale: 1000"),
    ({"n": 1, "offset": 0, "scale": "2", "dims": [1, 1]}, "Params.scale: expects a number (f32), got '2'"),
    ({"n": 1, "offset": 0, "scale": 1, "dims": [1, 2, 3]}, "Params.dims: vec2<u32> expects 2 values, got 3"),
    ({"n": 1, "offset": 0, "scale": 1, "dims": 4}, "Params.dims: vec2<u32> expects a sequence, got 4"),
    ({"n": 1, "offset": 0, "scale": 1, "dims": [1, math.inf]}, "Params.dims[1]: u32 field given inf"),
    ([1, 2, 3], "Params: struct Params expects 4 values, got 3"),
])
def test_packing_errors_name_the_field(values, message):
    assert message in error(pack_struct, PARAMS, "Params", values)


def test_nested_paths_in_packing_errors():
    module = reflect("struct In { v: vec2<f32> } struct Out { items: array<In, 2>, }")
    message = error(pack_struct, module, "Out", {"items": [{"v": [1, 2]}, {"v": [1, "x"]}]}, "storage")
    assert "Out.items[1].v[1]: expects a number (f32), got 'x'" in message
    assert "Out.items: array<In, 2> expects 2 values, got 1" in error(
        pack_struct, module, "Out", {"items": [{"v": [1, 2]}]}, "storage")
    assert "not 'workgroup'" in error(pack_struct, module, "Out", {}, "workgroup")


# -- errors of reflection and layout -------------------------------------------------------------

@pytest.mark.parametrize(("source", "message"), [
    ("/* never closed", "line 1: a /* comment is never closed"),
    ("[[group(0), binding(0)]] var<storage> x: array<f32>;", "'[[...]]' attributes are pre-2022 WGSL"),
    ("\nlet x = 1;", "line 2: unexpected 'let'"),
    ("struct S { a: f32 }\nconst S = 1;", "line 2: const 'S' is already declared on line 1"),
    ("@group(0) @binding(0) var<storage, write> x: array<f32>;", "var x (line 1): storage access must be read or"),
    ("@group(0) @binding(0) var<uniform, read> x: vec4f;", "only storage variables take an access mode"),
    ("@group(0) var<storage> x: array<f32>;", "var x (line 1): a resource variable needs @group, @binding"),
    ("@group(0) @binding(0) var<workgroup> x: f32;", "@group/@binding on a var<workgroup>"),
    ("@group(-1) @binding(0) var<storage> x: array<f32>;", "line 1: @group(-1) of var x must be a non-negative"),
    ("override G = 0u;\n@group(G) @binding(0) var<storage> x: array<f32>;",
     "line 2: @group(G) of var x must be a const-expression, but uses override 'G'"),
    ("struct S { @size(4.5) a: f32 }", "line 1: @size(4.5) of S.a must be a non-negative integer"),
    ("@compute fn main() {}", "line 1: @compute fn main needs @workgroup_size"),
    ("@compute @workgroup_size(0) fn main() {}", "@workgroup_size of fn main (line 1): '0' is 0, not a positive"),
    ("@compute @workgroup_size(WG) fn main() {}", "'WG' is not a module-scope const or override"),
    ("struct Empty {}", "struct Empty has no members"),
    ("struct S { a: f32 b: f32 }", "expected '}' in struct S, found 'b'"),
    ("const N: u32;", "line 1: const N has no value"),
    ("fn f() { ", "the source ends inside the body of fn f"),
    ("var<workgroup> x: array<f32, select(1, 2, true)>;", "cannot evaluate 'select(1, 2, true)'"),
    ("var<workgroup> x: array<f32, 0>;", "array size '0' is 0, not a positive integer"),
    ("var<workgroup> x: array<f32, 4 / 0>;", "division by zero"),
])
def test_reflection_errors_name_the_declaration_and_line(source, message):
    assert message in error(reflect, source)


LAYOUT_ERRORS = reflect("""
    override N: u32 = 4u;
    override M: u32;
    struct Flags { enabled: bool, count: u32 }
    struct Tail { data: array<f32>, count: u32 }
    struct Node { next: Node }
    struct Odd { @align(12) a: f32 }
    struct Small { @size(2) a: f32 }
    struct Under { a: f32, @align(4) v: vec4<f32> }
    struct Counter { hits: atomic<u32> }
    struct Sized { data: array<f32, N> }
    var<workgroup> flags: array<bool, 4>;
    var<workgroup> scratch: array<f32, M>;
""")


@pytest.mark.parametrize(("type_text", "space", "message"), [
    ("Flags", "uniform", "struct Flags (line 4), member 'enabled' (line 4): bool is not host-shareable"),
    ("Flags", "storage", "cannot be in a storage buffer"),
    ("Tail", "storage", "member 'data' (line 5): a runtime-sized member must be the struct's last"),
    ("array<f32>", "uniform", "a runtime-sized array is only allowed in storage buffers"),
    ("Node", "storage", "struct Node contains itself"),
    ("Odd", "storage", "@align(12) must be a power of two"),
    ("Small", "storage", "@size(2) must be at least 4"),
    ("Under", "storage", "@align(4) must be a power of two and a multiple of 16"),
    ("Under", "uniform", "member 'v' (line 9): vec4<f32> is at offset 4, but in the uniform address space it must"),
    ("Counter", "uniform", "atomic<u32> is only allowed"),
    ("Sized", "storage", "array size 'N' uses override 'N'; only var<workgroup> arrays"),
    ("Mystery", "storage", "unknown type 'Mystery'"),
    ("vec3<Flags>", "workgroup", "a vector's components must be scalars"),
    ("mat2x2<u32>", "storage", "matrices hold f32 or f16"),
    ("array<f32, 4", "storage", "is not a type"),
    ("storage", "nowhere", "address space 'nowhere' is not one of"),
])
def test_layout_errors_name_the_struct_member_and_line(type_text, space, message):
    assert message in error(layout, type_text, LAYOUT_ERRORS, space)


def test_workgroup_sizes_by_overrides_and_bools_in_workgroup_memory():
    assert [(v.name, v.size) for v in LAYOUT_ERRORS.workgroup_vars] == [("flags", 16), ("scratch", None)]
    assert layout("Counter", LAYOUT_ERRORS, "workgroup").size == 4
    message = error(LAYOUT_ERRORS.workgroup_storage_with)
    assert "needs override 'M' (line 3), which has no default: give it in constants as 'M'" in message
    assert LAYOUT_ERRORS.workgroup_storage_with({"M": 5}) == 16 + 32
    assert "constants: 'X' is not an override of this module" in error(LAYOUT_ERRORS.workgroup_storage_with, {"X": 1})
    assert "override M is u32, got 2.5" in error(LAYOUT_ERRORS.workgroup_storage_with, {"M": 2.5})


def test_wgsl_errors_are_config_errors():
    assert issubclass(WgslError, ConfigError) and issubclass(WgslError, ValueError)


def test_tokens_and_arithmetic():
    assert [t.text for t in tokenize("a/* x /* y */ z */b // c\nd")] == ["a", "b", "d"]
    assert [t.line for t in tokenize("a\n/*\n\n*/b\r\nc")] == [1, 4, 5]
    values = {"T": 8}
    assert evaluate("T * (T + 1) - 7 % 4", values.__getitem__, "x") == 69
    assert evaluate("-7 % 2", values.__getitem__, "x") == -1  # WGSL's remainder keeps the dividend's sign
    assert evaluate("T / 3.0", values.__getitem__, "x") == pytest.approx(8 / 3)
    assert "cannot evaluate 'T << 1'" in error(evaluate, "T << 1", values.__getitem__, "x")


BODIES = """struct S { a: f32 }
fn helper(x: f32) -> f32 {
    // a brace in a comment: }
    /* and one in a block: { /* nested } */ */
    if (x > 0.0) { return x; }
    return -x;
}
@compute @workgroup_size(8) fn main() { var s: S; { s.a = helper(1.0); } }
const after = 2u;"""


def test_tokens_without_bodies_keep_every_declaration_and_line():
    """Reflection skips function bodies (a tune reflects every candidate before its first is
    measured): what is left is the same declarations, with the same lines, as the full tokens."""
    full, skimmed = tokenize(BODIES), tokenize(BODIES, bodies=False)
    texts = [t.text for t in skimmed]
    assert texts[texts.index("helper"):texts.index("helper") + 10] == ["helper", "(", "x", ":", "f32", ")", "->",
                                                                         "f32", "{", "}"]
    assert texts[-4:] == ["after", "=", "2u", ";"]
    assert "return" not in texts and texts.count("helper") == 1 and "return" in [t.text for t in full]
    outside = [t for t in full if t.text in ("struct", "fn", "const", "after", "main")]
    assert [t for t in skimmed if t.text in ("struct", "fn", "const", "after", "main")] == outside
    assert [t.line for t in skimmed if t.text == "}"] == [1, 7, 8]
    with pytest.raises(WgslError, match="line 2: a /\\* comment is never closed"):
        tokenize("fn f() {\n /* open", bodies=False)
