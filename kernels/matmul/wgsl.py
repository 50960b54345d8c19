"""The matmul family's WGSL: the naive kernel and the scalar layout.

The sets are in :mod:`wgtune.kernels.matmul`; the vector layout, for register tiles that are
multiples of 4, in :mod:`wgtune.kernels.matmul.vector`, which builds on the pieces here
(:func:`header`, :func:`widen`, :func:`narrow`, :func:`indent`).

``C[M, N] = A[M, K] @ B[K, N]``, all row-major; buffers ``(A, B, C)`` at bindings 0, 1, 2, params
``(M, N, K)`` as a uniform at binding 3. Every generated kernel handles any sizes: loads outside
the matrices read zero, stores outside ``C`` are skipped. The element type of the buffers is
``f32`` or ``f16`` (``enable f16;``); arithmetic is f32 throughout (f16 values are widened when
loaded and rounded once when stored).

Two shapes of code for a tiled candidate (:class:`~wgtune.kernels.matmul.tile.MatmulTile`):

- the *scalar* layout (:func:`scalar_wgsl`, here), for register tiles that are not multiples of
  4: f32 tiles in workgroup memory, one scalar accumulator per output, outputs strided by the
  workgroup size (invocation ``(tx, ty)`` owns rows ``ty + i * BM/TM``, columns
  ``tx + j * BN/TN``). It keeps a WGSL loop over the K step (its accumulators are separate
  locals);
- the *vector* layout (:func:`wgtune.kernels.matmul.vector.vector_wgsl`), for register tiles
  that are multiples of 4: ``vec4<f32>`` tiles and accumulators, every loop unrolled in Python,
  with vec4 or flat global loads, slices of K and kgrid tiles (see there).

The skinny kernels, which stage nothing, are in :mod:`wgtune.kernels.matmul.skinny`.
"""

from __future__ import annotations

from ..common import SUBGROUPS_DIRECTIVE, ceil_div
from .tile import MatmulTile

__all__ = [
    "ADD_TO_C",
    "ADD_TO_C_FLOAT",
    "DTYPES",
    "FLOAT_ATOMICS",
    "adds_into_c",
    "naive_wgsl",
    "scalar_wgsl",
]


# Bytes of one element in the buffers.
DTYPES = {"f32": 4, "f16": 2}

LANES = "xyzw"  # the components of a vec4, by index

# Adds an f32 into C, bound as atomic words: a compare-exchange loop (WGSL has no float atomics).
ADD_TO_C = """
fn add_to_c(index: u32, value: f32) {
  var old = atomicLoad(&c[index]);
  loop {
    let swapped = atomicCompareExchangeWeak(&c[index], old, bitcast<u32>(bitcast<f32>(old) + value));
    if (swapped.exchanged) { break; }
    old = swapped.old_value;
  }
}
"""
# The same with the device's float atomics (``FLOAT_ATOMICS``; natively, not in browsers): one
# hardware add, so adds to one address wait far less, and more chunks pay (chunks.MAX_FLOAT_K_CHUNKS).
ADD_TO_C_FLOAT = """
fn add_to_c(index: u32, value: f32) {
  atomicAdd(&c[index], value);
}
"""
FLOAT_ATOMICS = "shader-float32-atomic"


def adds_into_c(float_atomics: bool) -> tuple[str, str]:
    """C's element type and the ``add_to_c`` function of a candidate that adds into C."""
    return ("atomic<f32>", ADD_TO_C_FLOAT) if float_atomics else ("atomic<u32>", ADD_TO_C)


# -- pieces every kernel shares (the vector layout too) ------------------------------------------


def header(dtype: str, element: str, subgroups: bool = False, b: str | None = None, c: str | None = None,
           wave: bool = False, steps: bool = False, partials: bool = False) -> str:
    """Directives, bindings (``element`` of A, and of B and C unless ``b`` or ``c`` say otherwise)
    and the params struct (:func:`params_struct`)."""
    lines = []
    if dtype == "f16":
        lines.append("enable f16;\n")
    if subgroups:
        lines.append(SUBGROUPS_DIRECTIVE)
    lines.append(
        f"@group(0) @binding(0) var<storage, read> a: array<{element}>;\n"
        f"@group(0) @binding(1) var<storage, read> b: array<{b or element}>;\n"
        f"@group(0) @binding(2) var<storage, read_write> c: array<{c or element}>;\n"
        + params_struct(wave, steps, partials)
    )
    return "".join(lines)


def params_struct(wave: bool = False, steps: bool = False, partials: bool = False) -> str:
    """The params struct and its binding: M, N, K, then with ``wave`` a tail tile's workgroups a
    wave, which its stage's own params carry, so that tiles of other waves share one WGSL; with
    ``steps`` a ``rolled`` tile's loop bound; with ``partials`` the K chunks and the reduce
    stage's lanes a vec4 (``partials.partials_params``), which both stages of a two-pass
    candidate declare, so that one uniform buffer, and one bind group, serves both."""
    extra = (", wave: u32" if wave else "") + (", steps: u32" if steps else "") + (
        ", chunks: u32, lanes: u32" if partials else "")
    return f"struct Params {{ m: u32, n: u32, k: u32{extra} }}\n@group(0) @binding(3) var<uniform> p: Params;\n"


def widen(dtype: str, expr: str, vector: bool = False) -> str:
    """``expr`` (a buffer element) as f32 arithmetic."""
    if dtype == "f32":
        return expr
    return f"vec4<f32>({expr})" if vector else f"f32({expr})"


def narrow(dtype: str, expr: str, vector: bool = False) -> str:
    """An f32 value as the buffer's element type."""
    if dtype == "f32":
        return expr
    return f"vec4<{dtype}>({expr})" if vector else f"{dtype}({expr})"


def indent(text: str, prefix: str = "  ") -> str:
    """``text`` with ``prefix`` before each line that is not blank."""
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))


# -- the naive kernel ----------------------------------------------------------------------------


def naive_wgsl(wg_x: int = 16, wg_y: int = 16, dtype: str = "f32") -> str:
    """One output per invocation (column ``x``, row ``y``), reading A and B from global memory."""
    return (
        header(dtype, dtype)
        + f"""
@compute @workgroup_size({wg_x}, {wg_y}, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let col = gid.x;
  let row = gid.y;
  if (row >= p.m || col >= p.n) {{ return; }}
  var acc = 0.0;
  for (var kk = 0u; kk < p.k; kk++) {{
    acc += {widen(dtype, "a[row * p.k + kk]")} * {widen(dtype, "b[kk * p.n + col]")};
  }}
  c[row * p.n + col] = {narrow(dtype, "acc")};
}}
"""
    )


# -- scalar layout -------------------------------------------------------------------------------


def _tile_load(tile: str, count: int, threads: int, body: str) -> str:
    """A loop that spreads ``count`` tile elements over ``threads`` invocations (``e`` is the element)."""
    steps = ceil_div(count, threads)
    guard = "" if count % threads == 0 else f"    if (e >= {count}u) {{ break; }}\n"
    return (
        f"  // stage the {tile} tile: {count} elements, {steps} per invocation\n"
        f"  for (var s = 0u; s < {steps}u; s++) {{\n"
        f"    let e = local_index + s * {threads}u;\n"
        f"{guard}{body}"
        f"  }}\n"
    )


def scalar_wgsl(tile: MatmulTile, dtype: str) -> str:
    """Scalar tiles ``tile_a[kk * bm + r]`` (A transposed) and ``tile_b[kk * bn + c]``."""
    bm, bn, bk, tm, tn = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn
    wx, wy, _ = tile.workgroup_size
    threads = tile.invocations
    lines = [header(dtype, dtype)]
    lines.append(f"var<workgroup> tile_a: array<f32, {bk * bm}>;\n")
    lines.append(f"var<workgroup> tile_b: array<f32, {bk * bn}>;\n\n")
    lines.append(
        f"@compute @workgroup_size({wx}, {wy}, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
        "        @builtin(local_invocation_id) lid: vec3<u32>,\n"
        "        @builtin(local_invocation_index) local_index: u32) {\n"
        f"  let row0 = wid.y * {bm}u;\n"
        f"  let col0 = wid.x * {bn}u;\n"
    )
    for i in range(tm):
        for j in range(tn):
            lines.append(f"  var acc_{i}_{j} = 0.0;\n")
    lines.append(f"  for (var k0 = 0u; k0 < p.k; k0 += {bk}u) {{\n")
    load_a = (
        f"    let r = e / {bk}u;\n"
        f"    let kk = e % {bk}u;\n"
        "    let gr = row0 + r;\n"
        "    let gk = k0 + kk;\n"
        "    var v = 0.0;\n"
        f"    if (gr < p.m && gk < p.k) {{ v = {widen(dtype, 'a[gr * p.k + gk]')}; }}\n"
        f"    tile_a[kk * {bm}u + r] = v;\n"
    )
    load_b = (
        f"    let kk = e / {bn}u;\n"
        f"    let cc = e % {bn}u;\n"
        "    let gk = k0 + kk;\n"
        "    let gc = col0 + cc;\n"
        "    var v = 0.0;\n"
        f"    if (gk < p.k && gc < p.n) {{ v = {widen(dtype, 'b[gk * p.n + gc]')}; }}\n"
        "    tile_b[e] = v;\n"
    )
    lines.append(indent(_tile_load("A", bm * bk, threads, load_a)))
    lines.append(indent(_tile_load("B", bk * bn, threads, load_b)))
    lines.append("    workgroupBarrier();\n")
    lines.append(f"    for (var kk = 0u; kk < {bk}u; kk++) {{\n")
    for i in range(tm):
        lines.append(f"      let a_{i} = tile_a[kk * {bm}u + lid.y + {i * wy}u];\n")
    for j in range(tn):
        lines.append(f"      let b_{j} = tile_b[kk * {bn}u + lid.x + {j * wx}u];\n")
    for i in range(tm):
        for j in range(tn):
            lines.append(f"      acc_{i}_{j} += a_{i} * b_{j};\n")
    lines.append("    }\n")
    lines.append("    workgroupBarrier();\n")
    lines.append("  }\n")
    for i in range(tm):
        lines.append(f"  let row_{i} = row0 + lid.y + {i * wy}u;\n")
        lines.append(f"  if (row_{i} < p.m) {{\n")
        for j in range(tn):
            lines.append(f"    let col_{i}_{j} = col0 + lid.x + {j * wx}u;\n")
            store = narrow(dtype, f"acc_{i}_{j}")
            lines.append(f"    if (col_{i}_{j} < p.n) {{ c[row_{i} * p.n + col_{i}_{j}] = {store}; }}\n")
        lines.append("  }\n")
    lines.append("}\n")
    return "".join(lines)
