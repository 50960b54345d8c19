"""A tiled f32 matrix multiply family: ``C[M, N] = A[M, K] @ B[K, N]``, all row-major.

Call convention (see :class:`wgtune.Args`): buffers ``(A, B, C)`` at bindings 0, 1, 2, then the
params ``(M, N, K)`` as a uniform at binding 3. Every candidate handles any sizes, multiples of
its tiles or not: loads outside the matrices read zero, stores outside ``C`` are skipped.

Two generators make the candidates:

- :func:`naive_matmul_wgsl`: one output per invocation, every operand read from global memory.
  The safe default (candidate 0) and the reference of the output checks.
- :func:`tiled_matmul_wgsl`: a workgroup computes a ``BM x BN`` block of ``C``. Per step of
  ``BK`` along K it stages an ``A`` tile and a ``B`` tile in workgroup memory, then each
  invocation accumulates a ``TM x TN`` register tile from them. The workgroup shape follows
  from the tiles: ``(BN / TN, BM / TM)`` invocations. Register tiles are strided (invocation
  ``(tx, ty)`` owns rows ``ty + i * BM/TM`` and columns ``tx + j * BN/TN``), so neighbouring
  invocations touch neighbouring words: coalesced on GPUs, contiguous SIMD lanes on lavapipe.

Grids are ``(ceil(N / block_n), ceil(M / block_m), 1)``: at most 65535 workgroups a dimension,
so the naive 16x16 default covers M and N up to 1,048,560; a candidate whose grid would be
larger is refused by the core's grid check (a Launch result) and the others still run.

Every candidate sums ``k = 0, 1, ..., K-1`` in order, so outputs agree to rounding of the
multiply-adds (a driver may fuse them or not), whatever the tiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from wgtune import Args, Kernel, TunableSet, anchor

__all__ = [
    "MATMUL_TILES",
    "MatmulTile",
    "matmul_key",
    "matmul_reference",
    "matmul_set",
    "naive_matmul_kernel",
    "naive_matmul_wgsl",
    "tiled_matmul_kernel",
    "tiled_matmul_wgsl",
]

# WebGPU's default limits, which every candidate keeps within (the core checks the device's).
MAX_WORKGROUP_STORAGE = 16384
MAX_INVOCATIONS = 256
F32_BYTES = 4

_BINDINGS = """\
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
struct Params { m: u32, n: u32, k: u32 }
@group(0) @binding(3) var<uniform> p: Params;
"""


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _sizes(args: Args) -> tuple[int, int, int]:
    m, n, k = args.params[:3]
    return m, n, k


# -- the naive default -------------------------------------------------------------------------


def naive_matmul_wgsl(wg_x: int = 16, wg_y: int = 16) -> str:
    """One output per invocation (column ``x``, row ``y``), reading A and B from global memory."""
    return (
        _BINDINGS
        + f"""
@compute @workgroup_size({wg_x}, {wg_y}, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let col = gid.x;
  let row = gid.y;
  if (row >= p.m || col >= p.n) {{ return; }}
  var acc = 0.0;
  for (var kk = 0u; kk < p.k; kk++) {{
    acc += a[row * p.k + kk] * b[kk * p.n + col];
  }}
  c[row * p.n + col] = acc;
}}
"""
    )


def naive_matmul_kernel(wg_x: int = 16, wg_y: int = 16) -> Kernel:
    """The naive candidate: a ``wg_x x wg_y`` workgroup covers as many outputs."""

    def grid(args: Args) -> tuple[int, int, int]:
        m, n, _ = _sizes(args)
        return (_ceil_div(n, wg_x), _ceil_div(m, wg_y), 1)

    return Kernel(
        f"naive_wg{wg_x}x{wg_y}",
        naive_matmul_wgsl(wg_x, wg_y),
        grid=grid,
        workgroup_size=(wg_x, wg_y, 1),
    )


# -- the tiled generator -----------------------------------------------------------------------


@dataclass(frozen=True)
class MatmulTile:
    """The shape of a tiled candidate: block tile ``bm x bn``, K step ``bk``, register tile ``tm x tn``."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    def __post_init__(self) -> None:
        if min(self.bm, self.bn, self.bk, self.tm, self.tn) < 1:
            raise ValueError(f"{self}: every tile size must be >= 1")
        if self.bm % self.tm or self.bn % self.tn:
            raise ValueError(f"{self}: the block tile must be a multiple of the register tile")
        if self.invocations > MAX_INVOCATIONS:
            raise ValueError(f"{self}: {self.invocations} invocations, WebGPU allows {MAX_INVOCATIONS}")
        if self.workgroup_storage > MAX_WORKGROUP_STORAGE:
            raise ValueError(
                f"{self}: {self.workgroup_storage} bytes of workgroup storage, WebGPU allows {MAX_WORKGROUP_STORAGE}"
            )

    @property
    def workgroup_size(self) -> tuple[int, int, int]:
        return (self.bn // self.tn, self.bm // self.tm, 1)

    @property
    def invocations(self) -> int:
        return (self.bn // self.tn) * (self.bm // self.tm)

    @property
    def workgroup_storage(self) -> int:
        """Bytes of the two staged tiles: ``A`` is ``bk x bm``, ``B`` is ``bk x bn``."""
        return F32_BYTES * self.bk * (self.bm + self.bn)

    @property
    def name(self) -> str:
        return f"tile{self.bm}x{self.bn}_k{self.bk}_reg{self.tm}x{self.tn}"


def _tile_load(tile: str, count: int, threads: int, body: str) -> str:
    """A loop that spreads ``count`` tile elements over ``threads`` invocations (``e`` is the element)."""
    steps = _ceil_div(count, threads)
    guard = "" if count % threads == 0 else f"    if (e >= {count}u) {{ break; }}\n"
    return (
        f"  // stage the {tile} tile: {count} elements, {steps} per invocation\n"
        f"  for (var s = 0u; s < {steps}u; s++) {{\n"
        f"    let e = local_index + s * {threads}u;\n"
        f"{guard}{body}"
        f"  }}\n"
    )


def tiled_matmul_wgsl(tile: MatmulTile) -> str:
    """WGSL for one tiled candidate; the register-tile loops are unrolled in the generated code.

    Shared layout: ``tile_a[kk * bm + r]`` (A transposed, so the inner loop reads a column of
    the block contiguously) and ``tile_b[kk * bn + c]``.
    """
    bm, bn, bk, tm, tn = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn
    wx, wy, _ = tile.workgroup_size
    threads = tile.invocations
    lines = [_BINDINGS]
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
        "    if (gr < p.m && gk < p.k) { v = a[gr * p.k + gk]; }\n"
        f"    tile_a[kk * {bm}u + r] = v;\n"
    )
    load_b = (
        f"    let kk = e / {bn}u;\n"
        f"    let cc = e % {bn}u;\n"
        "    let gk = k0 + kk;\n"
        "    let gc = col0 + cc;\n"
        "    var v = 0.0;\n"
        "    if (gk < p.k && gc < p.n) { v = b[gk * p.n + gc]; }\n"
        "    tile_b[e] = v;\n"
    )
    lines.append(_indent(_tile_load("A", bm * bk, threads, load_a)))
    lines.append(_indent(_tile_load("B", bk * bn, threads, load_b)))
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
            lines.append(f"    if (col_{i}_{j} < p.n) {{ c[row_{i} * p.n + col_{i}_{j}] = acc_{i}_{j}; }}\n")
        lines.append("  }\n")
    lines.append("}\n")
    return "".join(lines)


def _indent(text: str) -> str:
    return "".join("  " + line if line.strip() else line for line in text.splitlines(keepends=True))


def tiled_matmul_kernel(tile: MatmulTile) -> Kernel:
    """The candidate for ``tile``: one workgroup per ``bm x bn`` block of C."""

    def grid(args: Args) -> tuple[int, int, int]:
        m, n, _ = _sizes(args)
        return (_ceil_div(n, tile.bn), _ceil_div(m, tile.bm), 1)

    return Kernel(
        tile.name,
        tiled_matmul_wgsl(tile),
        grid=grid,
        workgroup_size=tile.workgroup_size,
        workgroup_storage=tile.workgroup_storage,
    )


# -- the set -----------------------------------------------------------------------------------

# From small blocks with one output per invocation (most workgroups, least reuse) to large
# blocks with 8x8 register tiles (fewest workgroups, most reuse per load).
MATMUL_TILES: tuple[MatmulTile, ...] = (
    MatmulTile(bm=16, bn=16, bk=16, tm=1, tn=1),
    MatmulTile(bm=32, bn=32, bk=8, tm=2, tn=2),
    MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4),
    MatmulTile(bm=64, bn=64, bk=8, tm=4, tn=4),
    MatmulTile(bm=64, bn=64, bk=16, tm=8, tn=8),
    MatmulTile(bm=64, bn=32, bk=16, tm=4, tn=2),
    MatmulTile(bm=128, bn=64, bk=16, tm=8, tn=4),
    MatmulTile(bm=128, bn=128, bk=8, tm=8, tn=8),
)


def matmul_key(args: Args) -> dict[str, object]:
    """Sizes bucketed to powers of two: nearby shapes share a tune."""
    m, n, k = _sizes(args)
    return {"m": anchor(m), "n": anchor(n), "k": anchor(k), "dtype": "f32"}


def matmul_set(tiles: tuple[MatmulTile, ...] = MATMUL_TILES) -> TunableSet:
    """The ``matmul`` set: the naive kernel first (safe default), then one candidate per tile.

    Tolerances assume entries of order 1: candidates sum in the same order, so only fused
    versus separate multiply-adds make them differ, far inside ``1e-3 + 1e-3 * |c|``.
    """
    candidates = [naive_matmul_kernel(16, 16), naive_matmul_kernel(8, 8)]
    candidates += [tiled_matmul_kernel(tile) for tile in tiles]
    return TunableSet("matmul", candidates, key=matmul_key, outputs=(2,), atol=1e-3, rtol=1e-3)


def matmul_reference(a: list[float], b: list[float], m: int, n: int, k: int) -> list[float]:
    """``A @ B`` in pure Python (row-major lists), in the kernels' summation order. Small sizes only."""
    out = [0.0] * (m * n)
    for row in range(m):
        a_row = a[row * k : row * k + k]
        for col in range(n):
            acc = 0.0
            for kk in range(k):
                acc += a_row[kk] * b[kk * n + col]
            out[row * n + col] = acc
    return out
