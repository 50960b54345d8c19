"""Matmul kernels for a short K and many outputs ("flat" matmuls): ``C[M, N] = A[M, K] @ B[K, N]``
with K up to a few dozen and M x N in the hundreds of thousands or more. The sets are in
:mod:`wgtune.kernels.matmul`; the key's rule that plans them (first where K is at most FLAT_MAX_K,
second up to FLAT_LATE_MAX_K) is in :mod:`wgtune.kernels.matmul.keys`.

Why: with K that short a product does about K multiply-adds per output and is bound by writing C
(``4 M N`` bytes) and by the number of invocations in flight, not by reuse of A and B. The tiles,
built for a long K (A and B staged in workgroup memory step by step, 64 outputs an invocation,
few invocations), spend a short K on staging and barriers: on an NVIDIA H200 (Vulkan, wgpu-py
0.32) the set's best reached 43% of torch's fp32 at 4561x4475x11, 53% at 620x7790x37, 56% at
901x7895x6, 67% at 3957x990x22, 74% at 3185x1464x17 and 78% at 1754x2317x11 (issue 29).

So these kernels stage nothing (:class:`FlatTile`): a workgroup of ``wx x wy`` invocations owns a
block of ``wy * rows`` rows by ``wx * cols`` columns of C; invocation ``(tx, ty)`` computes rows
``(wid.y * wy + ty) * rows + i`` (``i < rows``, consecutive: their rows of A share cache lines)
by columns ``wid.x * wx * cols + tx + wx * j`` (``j < cols``: strided by the workgroup's width).
A step ``k`` loads ``B[k, n]`` for its columns, consecutive over ``tx``, so a warp's loads and its
stores of C are coalesced scalar accesses that need no alignment (any N); ``A[m, k]`` is the same
for every invocation of a row (a broadcast load). The whole K loop runs on ``rows x cols`` sums in
registers, ``unroll`` steps' loads issued before their multiply-adds, then the rest one by one.

With ``vec4`` each column ``j`` is four consecutive columns instead (a vec4 of B and of C, column
quads strided by ``wx``): a quarter of the load and store instructions, for N a multiple of 4
only (the key's ``vec_n``; the plan skips it elsewhere).

Rows past M and columns past N are clamped to the last for the loads (their sums are never
stored), so the loop has no guards and every index is in bounds for any M, N >= 1 and any K;
stores past M or N are skipped. Sums run ``k = 0, 1, ..., K-1`` in order, as the tiles'.

With ``stage_a``: the loads of A, ``rows`` broadcast scalar loads a K step against ``cols`` loads of
B, held these kernels at 61-96% of torch on an H200 (4849x1259x44, 3671x527x33); staged, they
reached 77.5% and 121% (2026-12-03, ``bench/results/h200-probe-flat-sa.txt``). The workgroup stages
its ``wy * rows`` rows of A in workgroup memory, a chunk of STAGE_K columns at a time
(``vec4<f32>``, zeros past K, every invocation loading a share), and each row is read back as a vec4
of four K steps: a quarter of the A loads, and ``max(1, unroll // 4)`` such quads' loads issued
together; the last 1-3 steps of a chunk read single components. The chunk loop is bounded by ``p.k``
only (its barriers are in uniform control flow), and the sums keep their order.
"""

from __future__ import annotations

from dataclasses import dataclass

from wgtune import Args, DeviceLimits, Kernel

from ..common import ceil_div
from .wgsl import DTYPES, header, indent, narrow, widen

__all__ = ["STAGE_K", "FlatTile", "flat_matmul_kernel", "flat_wgsl"]

# Columns of A a ``stage_a`` tile stages at a time (a multiple of 4: vec4 of K steps).
STAGE_K = 64
KQ = STAGE_K // 4
# Workgroup storage a tile may declare: WebGPU's default limit.
MAX_STORAGE = DeviceLimits().max_workgroup_storage


@dataclass(frozen=True)
class FlatTile:
    """The shape of a flat candidate (see the module doc): ``rows x cols`` outputs an invocation
    (``cols`` vec4 of four columns with ``vec4``, for N a multiple of 4), a workgroup of ``wx x
    wy`` invocations, ``unroll`` K steps of loads issued together; with ``stage_a`` the workgroup's
    rows of A staged in workgroup memory, read as vec4 of K steps (``max(1, unroll // 4)`` of
    them together)."""

    rows: int
    cols: int
    wx: int = 64
    wy: int = 4
    vec4: bool = False
    unroll: int = 4
    stage_a: bool = False

    def __post_init__(self) -> None:
        if min(self.rows, self.cols, self.wx, self.wy, self.unroll) < 1:
            raise ValueError(f"{self}: every size must be >= 1")
        if self.wx * self.wy > 256:
            raise ValueError(f"{self}: {self.wx * self.wy} invocations, more than WebGPU's default 256")
        if self.sums > 64:
            raise ValueError(f"{self}: {self.sums} sums per invocation, more than 64 registers hold")
        if self.workgroup_storage > MAX_STORAGE:
            raise ValueError(f"{self}: {self.workgroup_storage} bytes of workgroup storage (A staged), "
                             f"more than WebGPU's default {MAX_STORAGE}")

    @property
    def width(self) -> int:
        """Columns of C one ``cols`` entry stands for: 4 with ``vec4``, else 1."""
        return 4 if self.vec4 else 1

    @property
    def sums(self) -> int:
        """f32 sums an invocation keeps in registers."""
        return self.rows * self.cols * self.width

    @property
    def block(self) -> tuple[int, int]:
        """Rows and columns of C a workgroup owns."""
        return (self.wy * self.rows, self.wx * self.cols * self.width)

    @property
    def workgroup_storage(self) -> int:
        """Bytes of workgroup memory: the staged rows of A (``stage_a``), else none."""
        return 16 * self.block[0] * KQ if self.stage_a else 0

    @property
    def workgroup_size(self) -> tuple[int, int, int]:
        return (self.wx, self.wy, 1)

    @property
    def name(self) -> str:
        loads = "v4" if self.vec4 else "f"
        staged = "_sa" if self.stage_a else ""
        return f"flat{self.rows}x{self.cols}_wg{self.wx}x{self.wy}_u{self.unroll}_{loads}{staged}"

    def grid(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """Blocks of C along N and M."""
        block_m, block_n = self.block
        return (ceil_div(n, block_n), ceil_div(m, block_m), 1)


def flat_wgsl(tile: FlatTile, dtype: str = "f32") -> str:
    """WGSL for ``tile`` with ``dtype`` buffers (f32 arithmetic)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    rows, cols, wx, wy, vec4 = tile.rows, tile.cols, tile.wx, tile.wy, tile.vec4
    element = f"vec4<{dtype}>" if vec4 else dtype
    zero = "vec4<f32>()" if vec4 else "0.0"
    # Indices of B and C are in elements of their type: vec4 columns (quads) with vec4.
    stride = "nq" if vec4 else "p.n"
    lines = [header(dtype, dtype, b=element, c=element)]
    if tile.stage_a:
        lines.append(f"var<workgroup> sa: array<vec4<f32>, {tile.block[0] * KQ}>;\n")
    lines += [
        f"\n@compute @workgroup_size({wx}, {wy}, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>"
        + (", @builtin(local_invocation_index) li: u32" if tile.stage_a else "") + ") {\n",
        f"  let row0 = (wid.y * {wy}u + lid.y) * {rows}u;\n",
        f"  let col0 = wid.x * {wx * cols}u + lid.x;\n",
    ]
    if vec4:  # N is a multiple of 4 here: a row of B or C is nq vec4
        lines.append("  let nq = p.n / 4u;\n")
    if not tile.stage_a:
        lines += [f"  let ar{i} = min({f'row0 + {i}u' if i else 'row0'}, p.m - 1u) * p.k;\n" for i in range(rows)]
    col = [f"col0 + {wx * j}u" if j else "col0" for j in range(cols)]
    lines += [f"  let bc{j} = min({col[j]}, {stride} - 1u);\n" for j in range(cols)]
    lines += [f"  var acc{i}_{j} = {zero};\n" for i in range(rows) for j in range(cols)]

    def b_loads(k: str, u: int | str) -> str:
        return "".join(f"let b{u}_{j} = {widen(dtype, f'b[({k}) * {stride} + bc{j}]', vector=vec4)};\n"
                       for j in range(cols))

    def sums(a: str, u: int | str) -> str:
        """The multiply-adds of a step whose row ``i`` of A is ``a.format(i=i)``, B ``b{u}_j``."""
        return "".join(f"acc{i}_{j} += {a.format(i=i)} * b{u}_{j};\n" for i in range(rows) for j in range(cols))

    if tile.stage_a:
        lines.append(_staged_k_loop(tile, dtype, b_loads, sums))
    else:
        def step(k: str, u: int) -> tuple[str, str]:
            """The loads of step ``k`` (values named by ``u``), and its multiply-adds."""
            loads = b_loads(k, u) + "".join(f"let a{u}_{i} = {widen(dtype, f'a[ar{i} + {k}]')};\n"
                                            for i in range(rows))
            return loads, sums(f"a{u}_{{i}}", u)

        u = tile.unroll
        steps = [step(f"k + {s}u" if s else "k", s) for s in range(u)]
        body = "".join(loads for loads, _ in steps) + "".join(adds for _, adds in steps)
        lines.append("  var k = 0u;\n")
        if u > 1:
            lines.append(f"  for (; k + {u - 1}u < p.k; k += {u}u) {{\n{indent(body, '    ')}  }}\n")
        lines.append(f"  for (; k < p.k; k++) {{\n{indent(''.join(step('k', 0)), '    ')}  }}\n")
    for i in range(rows):
        row = f"row0 + {i}u" if i else "row0"
        stores = [f"if ({col[j]} < {stride}) {{ c[({row}) * {stride} + {col[j]}] = "
                  f"{narrow(dtype, f'acc{i}_{j}', vector=vec4)}; }}\n" for j in range(cols)]
        lines.append(f"  if ({row} < p.m) {{\n{indent(''.join(stores), '    ')}  }}\n")
    lines.append("}\n")
    return "".join(lines)


def _staged_k_loop(tile: FlatTile, dtype: str, b_loads, sums) -> str:
    """The K loop of a ``stage_a`` tile: chunks of STAGE_K columns of the workgroup's rows of A
    staged in ``sa`` (zeros past K), then read back a vec4 (four K steps) a row, ``quads`` of them
    loaded together; the 1-3 steps left in a chunk one by one. Loop bounds depend on ``p.k`` only."""
    rows, threads, block_rows = tile.rows, tile.wx * tile.wy, tile.block[0]

    def a_at(index: str) -> str:
        return widen(dtype, f"a[{index}]")

    # Component t of a vec4 past K reads zero, and its index is clamped (no load past A).
    guarded = ", ".join([a_at("ra + kk")] + [f"select(0.0, {a_at(f'ra + min(kk + {t}u, p.k - 1u)')}, kk + {t}u < p.k)"
                                             for t in (1, 2, 3)])
    full = ", ".join(a_at(f"ra + kk + {t}u" if t else "ra + kk") for t in range(4))
    fill = (
        f"for (var e = li; e < {block_rows * KQ}u; e += {threads}u) {{\n"
        f"  let kk = k0 + (e % {KQ}u) * 4u;\n"
        f"  let ra = min(wid.y * {block_rows}u + e / {KQ}u, p.m - 1u) * p.k;\n"
        "  var v = vec4<f32>();\n"
        f"  if (kk + 3u < p.k) {{\n    v = vec4<f32>({full});\n"
        f"  }} else if (kk < p.k) {{\n    v = vec4<f32>({guarded});\n  }}\n"
        "  sa[e] = v;\n"
        "}\n"
    )

    def quad(q: str, u: int) -> tuple[str, str]:
        """Four K steps from quad ``q`` of the chunk (values named by ``u``): loads, multiply-adds."""
        loads = "".join(f"let av{u}_{i} = sa[sa{i} + {q}];\n" for i in range(rows))
        loads += "".join(b_loads(f"kq + {4 * u + s}u" if 4 * u + s else "kq", f"{u}_{s}") for s in range(4))
        return loads, "".join(sums(f"av{u}_{{i}}.{'xyzw'[s]}", f"{u}_{s}") for s in range(4))

    quads = max(1, tile.unroll // 4)
    steps = [quad(f"q + {u}u" if u else "q", u) for u in range(quads)]
    body = "let kq = k0 + q * 4u;\n" + "".join(loads for loads, _ in steps) + "".join(adds for _, adds in steps)
    one = quad("q", 0)
    rest = ("let kq = k0 + r;\n" + "".join(f"let ar_{i} = sa[sa{i} + r / 4u][r % 4u];\n" for i in range(rows))
            + b_loads("kq", "r") + sums("ar_{i}", "r"))
    chunk = [
        "workgroupBarrier();\n",
        fill,
        "workgroupBarrier();\n",
        f"let kn = min({STAGE_K}u, p.k - k0);\n",
        "let nq4 = kn / 4u;\n",
        "var q = 0u;\n",
    ]
    if quads > 1:
        chunk.append(f"for (; q + {quads - 1}u < nq4; q += {quads}u) {{\n{indent(body, '  ')}}}\n")
    chunk.append(f"for (; q < nq4; q++) {{\n{indent('let kq = k0 + q * 4u;' + chr(10) + ''.join(one), '  ')}}}\n")
    chunk.append(f"for (var r = nq4 * 4u; r < kn; r++) {{\n{indent(rest, '  ')}}}\n")
    lines = [f"  let sa{i} = (lid.y * {rows}u + {i}u) * {KQ}u;\n" if i else f"  let sa0 = lid.y * {rows * KQ}u;\n"
             for i in range(rows)]
    lines.append(f"  for (var k0 = 0u; k0 < p.k; k0 += {STAGE_K}u) {{\n{indent(''.join(chunk), '    ')}  }}\n")
    return "".join(lines)


def flat_matmul_kernel(tile: FlatTile, dtype: str = "f32", **options) -> Kernel:
    """The candidate for ``tile``: one workgroup per block of C, workgroup storage only for a staged A.
    ``options`` go to :class:`~wgtune.Kernel` (group, priority: the set gives vec4 tiles the
    rule that skips them where N is no multiple of 4)."""

    def grid(args: Args) -> tuple[int, int, int]:
        m, n, k = args.params[:3]
        return tile.grid(m, n, k)

    return Kernel(
        tile.name,
        flat_wgsl(tile, dtype),
        grid=grid,
        workgroup_size=tile.workgroup_size,
        workgroup_storage=tile.workgroup_storage,
        features=("shader-f16",) if dtype == "f16" else (),
        **options,
    )
