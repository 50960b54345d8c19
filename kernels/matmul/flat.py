"""Matmul kernels for a short K and many outputs ("flat" matmuls): ``C[M, N] = A[M, K] @ B[K, N]``
with K up to a few dozen and M x N in the hundreds of thousands or more. The sets are in
:mod:`wgtune.kernels.matmul`; the key's rule that plans them (K at most FLAT_MAX_K) is in
:mod:`wgtune.kernels.matmul.keys`.

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
"""

from __future__ import annotations

from dataclasses import dataclass

from wgtune import Args, Kernel

from ..common import ceil_div
from .wgsl import DTYPES, header, indent, narrow, widen

__all__ = ["FlatTile", "flat_matmul_kernel", "flat_wgsl"]


@dataclass(frozen=True)
class FlatTile:
    """The shape of a flat candidate (see the module doc): ``rows x cols`` outputs an invocation
    (``cols`` vec4 of four columns with ``vec4``, for N a multiple of 4), a workgroup of ``wx x
    wy`` invocations, ``unroll`` K steps of loads issued together."""

    rows: int
    cols: int
    wx: int = 64
    wy: int = 4
    vec4: bool = False
    unroll: int = 4

    def __post_init__(self) -> None:
        if min(self.rows, self.cols, self.wx, self.wy, self.unroll) < 1:
            raise ValueError(f"{self}: every size must be >= 1")
        if self.wx * self.wy > 256:
            raise ValueError(f"{self}: {self.wx * self.wy} invocations, more than WebGPU's default 256")
        if self.sums > 64:
            raise ValueError(f"{self}: {self.sums} sums per invocation, more than 64 registers hold")

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
    def workgroup_size(self) -> tuple[int, int, int]:
        return (self.wx, self.wy, 1)

    @property
    def name(self) -> str:
        loads = "v4" if self.vec4 else "f"
        return f"flat{self.rows}x{self.cols}_wg{self.wx}x{self.wy}_u{self.unroll}_{loads}"

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
    lines = [
        header(dtype, dtype, b=element, c=element),
        f"\n@compute @workgroup_size({wx}, {wy}, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {\n",
        f"  let row0 = (wid.y * {wy}u + lid.y) * {rows}u;\n",
        f"  let col0 = wid.x * {wx * cols}u + lid.x;\n",
    ]
    if vec4:  # N is a multiple of 4 here: a row of B or C is nq vec4
        lines.append("  let nq = p.n / 4u;\n")
    lines += [f"  let ar{i} = min(row0 + {i}u, p.m - 1u) * p.k;\n" if i else "  let ar0 = min(row0, p.m - 1u) * p.k;\n"
              for i in range(rows)]
    col = [f"col0 + {wx * j}u" if j else "col0" for j in range(cols)]
    lines += [f"  let bc{j} = min({col[j]}, {stride} - 1u);\n" for j in range(cols)]
    lines += [f"  var acc{i}_{j} = {zero};\n" for i in range(rows) for j in range(cols)]

    def step(k: str, u: int) -> tuple[str, str]:
        """The loads of step ``k`` (values named by ``u``), and its multiply-adds."""
        loads = [f"let b{u}_{j} = {widen(dtype, f'b[({k}) * {stride} + bc{j}]', vector=vec4)};\n"
                 for j in range(cols)]
        loads += [f"let a{u}_{i} = {widen(dtype, f'a[ar{i} + {k}]')};\n" for i in range(rows)]
        sums = [f"acc{i}_{j} += a{u}_{i} * b{u}_{j};\n" for i in range(rows) for j in range(cols)]
        return "".join(loads), "".join(sums)

    u = tile.unroll
    steps = [step(f"k + {s}u" if s else "k", s) for s in range(u)]
    body = "".join(loads for loads, _ in steps) + "".join(sums for _, sums in steps)
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


def flat_matmul_kernel(tile: FlatTile, dtype: str = "f32", **options) -> Kernel:
    """The candidate for ``tile``: one workgroup per block of C, no workgroup storage.
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
        workgroup_storage=0,
        features=("shader-f16",) if dtype == "f16" else (),
        **options,
    )
