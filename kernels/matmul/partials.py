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

from collections.abc import Callable, Sequence

from wgtune import Args, Kernel

from ..common import F32_BYTES, ceil_div, wrapped_grid

__all__ = [
    "BUSY_INVOCATIONS", "CHUNKS_A_LANE", "MOST_LANES", "PARTIALS", "REDUCE_WORKGROUP",
    "partials_bytes", "partials_header", "partials_params", "partials_stride", "reduce_lanes", "reduce_stage",
]

PARTIALS = "part"  # the scratch buffer's WGSL name
# The reduce stage's workgroup: 256 invocations, each a lane of a vec4 of outputs (``reduce_wgsl``).
REDUCE_WORKGROUP = (256, 1, 1)
# Chunks a lane of the reduce stage adds at most before a vec4 of outputs takes more lanes, and
# the most lanes a vec4 takes (256 chunks at most: MAX_FLOAT_K_CHUNKS).
CHUNKS_A_LANE, MOST_LANES = 8, 64
# Invocations the reduce stage keeps busy where its chunks allow: about 500 an SM of an H100.
BUSY_INVOCATIONS = 1 << 16
_LANE_COUNTS = tuple(1 << i for i in range(MOST_LANES.bit_length()))  # reduce_lanes' answers

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
    adding it. Such a stage declares C without using it (the reduce stage writes it), so that
    its bindings are the reduce stage's (``Kernel.layout``). ``vector``:
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


def reduce_lanes(chunks: int, quads: int) -> int:
    """Invocations that share one vec4 of outputs in the reduce stage, a power of two: the fewest
    that leave each lane :data:`CHUNKS_A_LANE` chunks at most, then more (as long as the chunks go
    round, two a lane at least) until the stage has :data:`BUSY_INVOCATIONS` in all, up to
    :data:`MOST_LANES`. Few outputs want many lanes for loads in flight (64x64 outputs in 256
    chunks: 64 lanes, 256 workgroups); many outputs in few chunks want one (437x869 in 5 chunks:
    the old stage's 16 lanes left 11 idle)."""
    lanes = 1
    while lanes < MOST_LANES and lanes * CHUNKS_A_LANE < chunks:
        lanes *= 2
    while lanes < MOST_LANES and 2 * lanes <= chunks and quads * lanes < BUSY_INVOCATIONS:
        lanes *= 2
    return lanes


def partials_params(chunks: Callable[[int, int, int], int],
                    first: Callable[[Args], Sequence[int]] | None = None) -> Callable[[Args], tuple[int, ...]]:
    """The params of both stages of a two-pass candidate: the first stage's own (``first``, else
    the call's M, N, K), then the K chunks (``chunks(m, n, k)``) and the reduce stage's lanes a
    vec4 (:func:`reduce_lanes`). One set for both, packed alike (``wgsl.params_struct`` with
    ``partials``), so that one uniform buffer and one bind group serve the two stages
    (``Kernel.layout``)."""

    def params(args: Args) -> tuple[int, ...]:
        m, n, k = args.params[:3]
        split = chunks(m, n, k)
        own = tuple(first(args)) if first is not None else (m, n, k)
        return (*own, split, reduce_lanes(split, ceil_div(m * n, 4)))

    return params


def reduce_wgsl(params: str) -> str:
    """The second stage: every output of C the sum of its chunks' partials (the params'
    ``chunks``; ``lanes``, how many invocations share a vec4 of outputs: :func:`reduce_lanes`).
    ``params``: the params struct and binding its first stage declares (``wgsl.params_struct``),
    so that both pack alike. It declares A and B, which it does not use, so that its bindings are
    its first stage's (``Kernel.layout``). A workgroup of 256 takes ``256 / lanes`` vec4 of outputs, invocation
    ``t`` the ``t % (256 / lanes)``-th, as lane ``t / (256 / lanes)``: so the invocations of a warp
    read consecutive vec4 of one chunk. Each lane adds chunks ``lane, lane + lanes, ...``, and the
    lanes' sums meet in workgroup memory. With many outputs in few chunks a vec4 has one lane:
    1,024 outputs a workgroup, where 16 lanes of 16 vec4 gave 64 (5,934 workgroups for 437x869 in
    5 chunks, 8.2 us on an H100, most lanes idle). On an H100 (2026-12-06, each wheel twice in
    turn, ``bench/results/h100-stages-ab-lanes-wide-compared.txt``) this stage took 437x869x1061's
    sum from 8.1-8.3 to 4.3-5.0 us (the whole candidate 0.92 of its time), 895x346x2587's from
    7.3-7.5 to 4.8-5.6; over 26 two-pass candidates of 8 few-block shapes the whole took 0.985 of
    its time at the median, 1.010 at most (64x64x65536, whose sum took 3.6 to 3.8 us)."""
    size = REDUCE_WORKGROUP[0]
    add = f"{PARTIALS}[z * quads + q]"
    return (
        "@group(0) @binding(0) var<storage, read> a: array<f32>;\n"
        "@group(0) @binding(1) var<storage, read> b: array<f32>;\n"
        "@group(0) @binding(2) var<storage, read_write> c: array<f32>;\n"
        f"@group(0) @binding(4) var<storage, read_write> {PARTIALS}: array<vec4<f32>>;\n"
        + params
        + f"var<workgroup> sums: array<vec4<f32>, {size}>;\n\n"
        f"@compute @workgroup_size({size}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,\n"
        "        @builtin(local_invocation_index) t: u32) {\n"
        "  let outputs = p.m * p.n;\n"
        "  let quads = (outputs + 3u) / 4u;\n"
        f"  let across = {size}u / p.lanes;\n"
        "  let lane = t / across;\n"
        "  let slot = t % across;\n"
        "  let q = (wid.y * groups.x + wid.x) * across + slot;\n"
        "  var sum = vec4<f32>();\n"
        # A constant stride a lane count, so that the compiler may unroll each loop. Alone it did
        # not take back 64x64x65536's loss with a uniform stride (bench/results/variant-lanes-switch.patch);
        # it stays as timed, with the wider lanes and the tree that did.
        "  if (q < quads) {\n"
        "    switch p.lanes {\n"
        + "".join(f"      case {lanes}u: {{ for (var z = lane; z < p.chunks; z += {lanes}u) {{ sum += {add}; }} }}\n"
                  for lanes in _LANE_COUNTS[1:])
        + f"      default: {{ for (var z = 0u; z < p.chunks; z += 1u) {{ sum += {add}; }} }}\n"
        "    }\n"
        "  }\n"
        "  sums[t] = sum;\n"
        # The lanes' sums meet in a tree: log2(lanes) steps, not lanes - 1 reads by lane 0.
        "  for (var width = p.lanes / 2u; width > 0u; width = width / 2u) {\n"
        "    workgroupBarrier();\n"
        "    if (lane < width) { sums[t] += sums[t + width * across]; }\n"
        "  }\n"
        "  if (lane == 0u && q < quads) {\n"
        "    let total = sums[t];\n"
        "    let i = q * 4u;\n"
        "    c[i] = total.x;\n"
        "    if (i + 1u < outputs) { c[i + 1u] = total.y; }\n"
        "    if (i + 2u < outputs) { c[i + 2u] = total.z; }\n"
        "    if (i + 3u < outputs) { c[i + 3u] = total.w; }\n"
        "  }\n"
        "}\n"
    )


def reduce_stage(name: str, chunks: Callable[[int, int, int], int], params: Callable[[Args], tuple[int, ...]],
                 struct: str) -> Kernel:
    """The stage ``<name>_sum`` that adds a candidate's partials into C; ``chunks(m, n, k)`` is
    how many K chunks its first stage wrote. ``params`` and ``struct``: its first stage's
    (:func:`partials_params`, ``wgsl.params_struct``), which carry the chunks and lanes."""

    def grid(args: Args) -> tuple[int, int, int]:
        m, n, k = args.params[:3]
        quads = ceil_div(m * n, 4)
        return wrapped_grid(ceil_div(quads, REDUCE_WORKGROUP[0] // reduce_lanes(chunks(m, n, k), quads)))

    storage = F32_BYTES * 4 * REDUCE_WORKGROUP[0]
    return Kernel(f"{name}_sum", reduce_wgsl(struct), grid=grid, workgroup_size=REDUCE_WORKGROUP,
                  workgroup_storage=storage, params=params, layout="declared")
