"""Split-K in two passes: each K chunk writes its partial sums into scratch, a second stage adds
them into C.

A kgrid tile (:class:`~wgtune.kernels.matmul.tile.MatmulTile`) with ``partials`` splits K over
workgroups like the others, but instead of adding into C with atomics (after a stage that zeroes
C) its chunk ``z`` writes its sums to ``part[z * stride + row * N + col]``, a scratch buffer the
device makes (``Kernel(scratch=...)``, sized from the call), and a reduce stage sums the chunks
of each output and stores it. No atomics: it needs no device feature, so browsers get split-K
without compare-exchange loops, and no output waits on another chunk's add. What it costs is
the scratch (``chunks * M * N`` floats) and a second launch.

Measured on an NVIDIA H200 (a probe of 2026-12-01, ``bench/results/h200-shapes.txt``; torch fp32 at 18.6
TFLOP/s): a 64x64 tile of 256 chunks at 64x64x65536 reached 16.7-17.1 TFLOP/s in two passes,
against 12.1-14.8 with float atomics (each output took 256 adds there); on 128x512x32768 with
32 chunks the two were within 2% (34.3 against 34.6) while the partial sums were written one
float at a time. Written four at a time (vec4 tiles, :func:`partials_header`), a 128x256 tile in
two passes reached 37.0 there and 128x128 ones 34.1 at 256x256x16384 (30.3 with float atomics).
"""

from __future__ import annotations

from collections.abc import Callable

from wgtune import Args, Kernel

from ..common import F32_BYTES, ceil_div, wrapped_grid

__all__ = ["PARTIALS", "REDUCE_WORKGROUP", "partials_bytes", "partials_header", "partials_stride", "reduce_stage"]

PARTIALS = "part"  # the scratch buffer's WGSL name
# The reduce stage's workgroup: 16 vec4 of outputs by 16 lanes along the chunks.
REDUCE_WORKGROUP = (16, 16, 1)

# A chunk's block of partial sums starts on a vec4 (the reduce stage reads four outputs at once).
_STRIDE = "((p.m * p.n + 3u) / 4u * 4u)"


def partials_stride(m: int, n: int) -> int:
    """Floats between two chunks' partial sums: ``M * N`` rounded up to a multiple of 4."""
    return ceil_div(m * n, 4) * 4


def partials_bytes(m: int, n: int, chunks: int) -> int:
    """The scratch a call of ``m x n`` outputs in ``chunks`` K chunks needs."""
    return F32_BYTES * chunks * partials_stride(m, n)


def partials_header(vector: bool = False) -> str:
    """The scratch binding (after the params, at 4: a call's buffers are A, B, C), the chunk's
    offset in it, and ``add_to_c``, which here writes the chunk's sum of an output instead of
    adding it. A stage declaring this declares no C: the reduce stage writes that. ``vector``:
    the scratch is read as vec4 and written four outputs at a time by ``store_c4`` (for tiles
    whose N is a multiple of 4, so each four start on a vec4: a chunk's block does too), which
    writes a quarter of the stores; on an H200 the scalar ones cost a 128x128 chunk's epilogue
    about as much as atomic adds."""
    if vector:
        return (
            f"@group(0) @binding(4) var<storage, read_write> {PARTIALS}: array<vec4<f32>>;\n"
            "var<private> part_base: u32;\n\n"
            "fn store_c4(index: u32, value: vec4<f32>) {\n"
            f"  {PARTIALS}[(part_base + index) >> 2u] = value;\n"
            "}\n"
        )
    return (
        f"@group(0) @binding(4) var<storage, read_write> {PARTIALS}: array<f32>;\n"
        "var<private> part_base: u32;\n\n"
        "fn add_to_c(index: u32, value: f32) {\n"
        f"  {PARTIALS}[part_base + index] = value;\n"
        "}\n"
    )


def partials_base() -> str:
    """The line that sets the chunk's offset, first in ``main`` (``wid`` is its workgroup id)."""
    return f"  part_base = wid.z * {_STRIDE};\n"


def reduce_wgsl() -> str:
    """The second stage: every output of C the sum of its chunks' partials (the params' ``k``
    holds the number of chunks). Lane ``y`` of a workgroup sums chunks ``y, y + 16, ...`` of 16
    vec4 of outputs, and the lanes' sums meet in workgroup memory."""
    lanes = REDUCE_WORKGROUP[1]
    return (
        "@group(0) @binding(2) var<storage, read_write> c: array<f32>;\n"
        f"@group(0) @binding(4) var<storage, read_write> {PARTIALS}: array<vec4<f32>>;\n"
        "struct Params { m: u32, n: u32, k: u32 }\n"
        "@group(0) @binding(3) var<uniform> p: Params;\n"
        f"var<workgroup> sums: array<array<vec4<f32>, {REDUCE_WORKGROUP[0]}>, {lanes}>;\n\n"
        f"@compute @workgroup_size({REDUCE_WORKGROUP[0]}, {lanes}, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,\n"
        "        @builtin(local_invocation_id) lid: vec3<u32>) {\n"
        "  let outputs = p.m * p.n;\n"
        "  let quads = (outputs + 3u) / 4u;\n"
        f"  let q = (wid.y * groups.x + wid.x) * {REDUCE_WORKGROUP[0]}u + lid.x;\n"
        "  var sum = vec4<f32>();\n"
        f"  if (q < quads) {{ for (var z = lid.y; z < p.k; z += {lanes}u) {{ sum += {PARTIALS}[z * quads + q]; }} }}\n"
        "  sums[lid.y][lid.x] = sum;\n"
        "  workgroupBarrier();\n"
        "  if (lid.y == 0u && q < quads) {\n"
        "    var total = vec4<f32>();\n"
        f"    for (var y = 0u; y < {lanes}u; y += 1u) {{ total += sums[y][lid.x]; }}\n"
        "    let i = q * 4u;\n"
        "    c[i] = total.x;\n"
        "    if (i + 1u < outputs) { c[i + 1u] = total.y; }\n"
        "    if (i + 2u < outputs) { c[i + 2u] = total.z; }\n"
        "    if (i + 3u < outputs) { c[i + 3u] = total.w; }\n"
        "  }\n"
        "}\n"
    )


def reduce_stage(name: str, chunks: Callable[[int, int, int], int]) -> Kernel:
    """The stage ``<name>_sum`` that adds a candidate's partials into C; ``chunks(m, n, k)`` is
    how many K chunks its first stage wrote (the reduce stage's own params carry it)."""

    def params(args: Args) -> tuple[int, int, int]:
        m, n, k = args.params[:3]
        return (m, n, chunks(m, n, k))

    def grid(args: Args) -> tuple[int, int, int]:
        m, n = args.params[:2]
        return wrapped_grid(ceil_div(ceil_div(m * n, 4), REDUCE_WORKGROUP[0]))

    storage = F32_BYTES * 4 * REDUCE_WORKGROUP[0] * REDUCE_WORKGROUP[1]
    return Kernel(f"{name}_sum", reduce_wgsl(), grid=grid, workgroup_size=REDUCE_WORKGROUP,
                  workgroup_storage=storage, params=params)
