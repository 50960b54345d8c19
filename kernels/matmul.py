"""The matrix multiply family: ``C[M, N] = A[M, K] @ B[K, N]``, all row-major, f32 or f16.

Call convention (see :class:`wgtune.Args`): buffers ``(A, B, C)`` at bindings 0, 1, 2, then the
params ``(M, N, K)`` as a uniform at binding 3. Every candidate handles any sizes, multiples of
its tiles or not: loads outside the matrices read zero, stores outside ``C`` are skipped.

Two sets:

- ``matmul`` (:func:`matmul_set`): f32 buffers. Candidate 0, :func:`naive_matmul_kernel`, is
  one output per invocation straight from global memory: the safe default and the reference of
  the output checks. The others are tiled (:class:`MatmulTile`, WGSL from
  :mod:`wgtune.kernels.matmul_wgsl` and :mod:`wgtune.kernels.matmul_vector`): block tiles from
  16x16 to 256x128, K steps of 8 and 16, register tiles from 1x1 to 16x8 (which fix the
  workgroup shape: 64 to 512 invocations), the A tile transposed in workgroup memory and
  optionally padded, double buffering, a swizzled workgroup order, a subgroup variant, and each
  tile of the vector layout twice: with vec4 global loads and stores, and with scalar ones. On
  an NVIDIA H200 (Vulkan) the best reach about 86% of PyTorch's fp32 at 4096^3 (44 of 51
  TFLOP/s) and 92% at 1024^3.
- ``matmul_f16`` (:func:`matmul_f16_set`): f16 buffers (``features=("shader-f16",)``), f32
  arithmetic, a smaller space from the same generator.

Priorities. The tuner benchmarks one batch and stops (see ``plan.py``), so the key decides which
batch comes first. The key holds M, N, K anchored to powers of two, the dtype, and ``vec``: 4
when K and N are multiples of 4 (the vec4 candidates are skipped on other keys, negative
priority, as they could not serve the call), else 1. Candidates fall in three groups by the size
of the output, :func:`size_class` of the key: ``small`` (at most 256x256, or at most 32 wide),
``medium``, and ``large`` (at least 2048x2048, neither side under 512). The key's own class comes first, then the
others, nearest first. Within a group, on keys with ``vec == 4`` the first batch is the group's
vec4 candidates and the tiles of the scalar layout, and the scalar-load twins of the vec4
candidates come next (a reserve: benchmarked only if every first one failed); on other keys the
first batch is every candidate without vec4 loads. The naive kernels are in the small group:
benchmarked on small keys (where little blocks can win); on bigger keys they only run once, as
the reference of the output checks, when those are on.

Grids are ``(ceil(N / block_n), ceil(M / block_m), 1)``: at most 65535 workgroups a dimension,
so the naive 16x16 default covers M and N up to 1,048,560; a candidate whose grid would be
larger is refused by the core's grid check (a Launch result) and the others still run.

Every candidate sums ``k = 0, 1, ..., K-1`` in order, so outputs agree to rounding of the
multiply-adds (a driver may fuse them or not), whatever the tiling.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import replace

from wgtune import Args, Group, Kernel, TunableSet, anchor
from wgtune.key import Key

from .common import ceil_div
from .matmul_vector import vector_wgsl
from .matmul_wgsl import DTYPES, MatmulTile, scalar_wgsl
from .matmul_wgsl import naive_wgsl as naive_matmul_wgsl

__all__ = [
    "F16_OUTPUTS",
    "F16_TOLERANCE",
    "MATMUL_F16_TILES",
    "MATMUL_GROUPS",
    "MATMUL_TILES",
    "MatmulTile",
    "matmul_f16_reference",
    "matmul_f16_set",
    "matmul_key",
    "matmul_reference",
    "matmul_set",
    "naive_matmul_kernel",
    "naive_matmul_wgsl",
    "pack_f16",
    "size_class",
    "tiled_matmul_kernel",
    "tiled_matmul_wgsl",
]

# The f16 set's tolerance: outputs are rounded to f16 (a relative step of 2**-10), so two
# candidates may differ by one step where their f32 sums round differently.
F16_TOLERANCE = 2e-3

SMALL, MEDIUM, LARGE = "small", "medium", "large"
# Groups to try after the key's own, nearest first.
_ORDER = {SMALL: (SMALL, MEDIUM, LARGE), MEDIUM: (MEDIUM, LARGE, SMALL), LARGE: (LARGE, MEDIUM, SMALL)}


def _sizes(args: Args) -> tuple[int, int, int]:
    m, n, k = args.params[:3]
    return m, n, k


# -- kernels -------------------------------------------------------------------------------------


def tiled_matmul_wgsl(tile: MatmulTile, dtype: str = "f32") -> str:
    """WGSL for one tiled candidate with ``dtype`` buffers: the vector layout where the register
    tile is made of vec4 (``tile.vector``), else the scalar one (see :mod:`wgtune.kernels.matmul_wgsl`)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    return vector_wgsl(tile, dtype) if tile.vector else scalar_wgsl(tile, dtype)


def _features(dtype: str, subgroup: bool = False) -> tuple[str, ...]:
    return (("shader-f16",) if dtype == "f16" else ()) + (("subgroups",) if subgroup else ())


def naive_matmul_kernel(wg_x: int = 16, wg_y: int = 16, dtype: str = "f32", **options) -> Kernel:
    """The naive candidate: a ``wg_x x wg_y`` workgroup covers as many outputs."""

    def grid(args: Args) -> tuple[int, int, int]:
        m, n, _ = _sizes(args)
        return (ceil_div(n, wg_x), ceil_div(m, wg_y), 1)

    return Kernel(
        f"naive_wg{wg_x}x{wg_y}",
        naive_matmul_wgsl(wg_x, wg_y, dtype),
        grid=grid,
        workgroup_size=(wg_x, wg_y, 1),
        features=_features(dtype),
        **options,
    )


def tiled_matmul_kernel(tile: MatmulTile, dtype: str = "f32", **options) -> Kernel:
    """The candidate for ``tile``: one workgroup per ``bm x bn`` block of C. ``options`` go to
    :class:`~wgtune.Kernel` (group, priority); vec4 tiles get their priority rule by default."""

    def grid(args: Args) -> tuple[int, int, int]:
        m, n, _ = _sizes(args)
        return (ceil_div(n, tile.bn), ceil_div(m, tile.bm), 1)

    options.setdefault("priority", _priority(tile))
    return Kernel(
        tile.name,
        tiled_matmul_wgsl(tile, dtype),
        grid=grid,
        workgroup_size=tile.workgroup_size,
        workgroup_storage=tile.workgroup_storage,
        features=_features(dtype, tile.subgroup),
        **options,
    )


# -- keys and priorities ---------------------------------------------------------------------------


def matmul_key(args: Args, dtype: str = "f32") -> dict[str, object]:
    """Sizes bucketed to powers of two, the dtype, and ``vec``: 4 where K and N are multiples of
    4 (vec4 loads of A rows and B rows, vec4 stores of C rows fit), else 1."""
    m, n, k = _sizes(args)
    vec = 4 if k % 4 == 0 and n % 4 == 0 else 1
    return {"m": anchor(m), "n": anchor(n), "k": anchor(k), "dtype": dtype, "vec": vec}


def _f16_key(args: Args) -> dict[str, object]:
    return matmul_key(args, "f16")


def size_class(key: Key) -> str:
    """``small``, ``medium`` or ``large``: the group a key's first batch comes from."""
    fields = dict(key)
    m, n = fields["m"], fields["n"]
    if m * n <= 256 * 256 or min(m, n) <= 32:
        return SMALL
    if m * n >= 2048 * 2048 and min(m, n) >= 512:
        return LARGE
    return MEDIUM


def _group_priority(name: str) -> Callable[[Key], int]:
    def priority(key: Key) -> int:
        return 3 - _ORDER[size_class(key)].index(name)

    return priority


_GROUPS = {name: Group(name, _group_priority(name)) for name in (SMALL, MEDIUM, LARGE)}


def _vec4_first(key: Key) -> int:
    return 1 if dict(key).get("vec", 1) == 4 else -1


def _scalar_twin(key: Key) -> int:
    return 0 if dict(key).get("vec", 1) == 4 else 1


def _priority(tile: MatmulTile) -> int | Callable[[Key], int]:
    """vec4 tiles: first where the key allows vec4, skipped elsewhere; their scalar-load twins:
    a reserve where vec4 is allowed, first elsewhere; tiles of the scalar layout: always first."""
    if tile.vec4:
        return _vec4_first
    return _scalar_twin if tile.vector else 1


# -- the search spaces -----------------------------------------------------------------------------


def _both(*tiles: MatmulTile) -> tuple[MatmulTile, ...]:
    """Each tile of the vector layout with vec4 global loads and with scalar ones."""
    out: list[MatmulTile] = []
    for tile in tiles:
        if tile.vector:
            out.append(replace(tile, vec4=True))
        out.append(tile)
    return tuple(out)


T = MatmulTile
# Every candidate fits 32 KiB of workgroup storage and 1024 invocations (lavapipe's limits);
# those past WebGPU's defaults (16 KiB, 256) are refused by the core on devices without them,
# and each group keeps several candidates within the defaults.
# The figures are TFLOP/s of the vec4 version on an NVIDIA H200 (Vulkan) at 1024^3 and 4096^3,
# where PyTorch's fp32 (no TF32) reached 37 and 51.
MATMUL_GROUPS: dict[str, tuple[MatmulTile, ...]] = {
    # Few outputs: small blocks keep every core busy; cheap to compile.
    SMALL: _both(
        T(16, 16, 16, 1, 1),
        T(32, 32, 8, 2, 2),
        T(64, 32, 16, 4, 2),
        T(32, 32, 16, 4, 4),
        T(32, 64, 16, 4, 4),
        T(64, 32, 16, 4, 4, pad=4),
        T(64, 64, 8, 4, 4),
        T(64, 64, 16, 4, 4, double=True),
    ),
    # Hundreds to a few thousand blocks: 64- and 128-wide tiles, 4x4 to 8x8 per invocation.
    MEDIUM: _both(
        T(64, 128, 16, 8, 8, double=True),  # 34.5 at 1024^3
        T(128, 64, 16, 8, 8, double=True),  # 31.4
        T(128, 64, 8, 8, 8, pad=4, double=True),  # 31.7, 41.5 at 4096^3
        T(64, 128, 8, 8, 8, double=True),  # 31.1
        T(64, 64, 8, 8, 8, double=True),  # 30.1
        T(64, 64, 16, 8, 8),  # 28.0
        T(64, 64, 8, 4, 4, pad=4, double=True),  # 24.1
        T(64, 64, 16, 8, 8, subgroup=True),  # 25.1
        T(128, 128, 8, 8, 8, pad=4),  # 14.3 (33 at 2048^3)
    ),
    # Big outputs: 128x128 and larger blocks, 64 to 128 outputs per invocation.
    LARGE: _both(
        T(128, 256, 8, 8, 16, pad=4, double=True),  # 44.2 at 4096^3
        T(128, 128, 16, 8, 8, double=True),  # 42.5
        T(128, 128, 16, 8, 8, double=True, swizzle=8),  # 42.6
        T(128, 128, 8, 8, 16, double=True),  # 42.0 (with pad)
        T(256, 128, 8, 16, 8, pad=4, double=True),  # 41.7
        T(256, 128, 8, 8, 8, pad=4, double=True),  # 38.4
        T(128, 128, 16, 8, 8),  # 37.2
        T(128, 128, 8, 8, 8, double=True),  # 36.0
        T(128, 128, 16, 8, 8, double=True, subgroup=True),  # 30.9
    ),
}
MATMUL_TILES: tuple[MatmulTile, ...] = tuple(tile for tiles in MATMUL_GROUPS.values() for tile in tiles)

# The f16 set: fewer tiles, the same generator (f16 buffers, f32 tiles and arithmetic).
MATMUL_F16_GROUPS: dict[str, tuple[MatmulTile, ...]] = {
    SMALL: _both(T(16, 16, 16, 1, 1), T(32, 32, 16, 4, 4), T(64, 64, 8, 4, 4)),
    MEDIUM: _both(
        T(64, 128, 16, 8, 8, double=True), T(128, 64, 8, 8, 8, pad=4, double=True), T(64, 64, 16, 8, 8, subgroup=True)
    ),
    LARGE: _both(
        T(128, 256, 8, 8, 16, pad=4, double=True),
        T(128, 128, 16, 8, 8, double=True),
        T(128, 128, 8, 8, 16, double=True),
        T(256, 128, 8, 16, 8, pad=4, double=True),
    ),
}
MATMUL_F16_TILES: tuple[MatmulTile, ...] = tuple(tile for tiles in MATMUL_F16_GROUPS.values() for tile in tiles)


def _candidates(
    dtype: str, tiles: tuple[MatmulTile, ...], groups: dict[str, tuple[MatmulTile, ...]]
) -> list[Kernel]:
    """Naive kernels first (16x16 is candidate 0), then one per tile, grouped where the tile is
    in ``groups`` (a custom tile list is one ungrouped batch)."""
    group_of = {tile: _GROUPS[name] for name, members in groups.items() for tile in members}
    small = _GROUPS[SMALL] if group_of else None
    candidates = [naive_matmul_kernel(size, size, dtype, group=small, priority=1) for size in (16, 8)]
    candidates += [tiled_matmul_kernel(tile, dtype, group=group_of.get(tile)) for tile in tiles]
    return candidates


def matmul_set(tiles: tuple[MatmulTile, ...] | None = None) -> TunableSet:
    """The ``matmul`` set (f32): the naive kernel first (safe default), then one candidate per tile
    of :data:`MATMUL_TILES`, grouped as the module says; other ``tiles`` make an ungrouped set.

    Tolerances assume entries of order 1: candidates sum in the same order, so only fused
    versus separate multiply-adds make them differ, far inside ``1e-3 + 1e-3 * |c|``.
    """
    groups = MATMUL_GROUPS if tiles is None or tuple(tiles) == MATMUL_TILES else {}
    candidates = _candidates("f32", MATMUL_TILES if tiles is None else tuple(tiles), groups)
    return TunableSet("matmul", candidates, key=matmul_key, outputs=(2,), atol=1e-3, rtol=1e-3)


# The f16 outputs compared as values: an ulp or two apart (a driver fusing one kernel's
# multiply-adds and not another's) is the same answer. rtol 2e-3 is two ulps of f16; atol covers
# entries near zero, where the f32 sums' own rounding (about K * 6e-8) is far below it.
F16_OUTPUTS = {"output_type": "e", "atol": 1e-2, "rtol": 2e-3}


def matmul_f16_set(tiles: tuple[MatmulTile, ...] | None = None) -> TunableSet:
    """The ``matmul_f16`` set: f16 A, B and C (every candidate needs ``shader-f16``), f32 tiles
    and sums. The output checks compare the f16 outputs as values within :data:`F16_OUTPUTS`
    (``bench/f16_checks.py`` measures them on a GPU). Check results against
    :func:`matmul_f16_reference`.
    """
    groups = MATMUL_F16_GROUPS if tiles is None or tuple(tiles) == MATMUL_F16_TILES else {}
    candidates = _candidates("f16", MATMUL_F16_TILES if tiles is None else tuple(tiles), groups)
    return TunableSet("matmul_f16", candidates, key=_f16_key, outputs=(2,), **F16_OUTPUTS)


# -- CPU references --------------------------------------------------------------------------------


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


def _to_f16(values: list[float]) -> list[float]:
    return list(struct.unpack(f"<{len(values)}e", struct.pack(f"<{len(values)}e", *values)))


def pack_f16(values: list[float]) -> bytes:
    """``values`` as little-endian f16, zero-padded to a multiple of 4 bytes (buffer sizes must be)."""
    data = struct.pack(f"<{len(values)}e", *values)
    return data + bytes(-len(data) % 4)


def matmul_f16_reference(a: list[float], b: list[float], m: int, n: int, k: int) -> list[float]:
    """What the f16 set computes: inputs rounded to f16, sums in double (the kernels' f32 sums
    are closer to this than to f16 sums), the result rounded to f16. Compare with
    ``F16_TOLERANCE`` relative to ``sum |a| |b|``, which bounds the f32 rounding along K."""
    return _to_f16(matmul_reference(_to_f16(list(a)), _to_f16(list(b)), m, n, k))
