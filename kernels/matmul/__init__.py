"""The matrix multiply family: ``C[M, N] = A[M, K] @ B[K, N]``, all row-major, f32 or f16.

Call convention (see :class:`wgtune.Args`): buffers ``(A, B, C)`` at bindings 0, 1, 2, then the
params ``(M, N, K)`` as a uniform at binding 3. Every candidate handles any sizes it may be given
(see the key below), multiples of its tiles or not: rows and columns past the matrices are
clamped or read as zero, stores outside ``C`` are skipped.

Two sets:

- ``matmul`` (:func:`matmul_set`): f32 buffers. Candidate 0, :func:`naive_matmul_kernel`, is
  one output per invocation straight from global memory: the safe default and the reference of
  the output checks. The others (:mod:`wgtune.kernels.matmul.tiles` lists them, with the H200
  figures that put each there):

  - tiles (:class:`MatmulTile` in :mod:`wgtune.kernels.matmul.tile`, WGSL from :mod:`wgtune.kernels.matmul.wgsl` and
    :mod:`wgtune.kernels.matmul.vector`): block tiles from 16x128 and 128x16 to 256x128, K steps of 8 and
    16, register tiles of 4x4 to 16x8, double buffering, a swizzled workgroup order, K *slices*
    (several sets of invocations share a block, each a part of every K step, summed in
    workgroup memory at the end), and *kgrid* tiles that split K over workgroups, for few
    outputs and a long K: they add into C with atomics (after a first stage zeroes C;
    ``stagger``: chunks of a block take their adds in rotated orders), or write partial sums to
    scratch that a second stage adds up (``partials``, :mod:`wgtune.kernels.matmul.partials`).
    Each comes with vec4 global loads (``_v4``:
    K and N multiples of 4) or *flat* ones (coalesced scalar loads that need no guard but on the
    K step crossing K: any sizes), or both; a few vec4 tiles also run on copies of A, B or both
    (``_ca``, ``_cb``, ``_cab``: :mod:`wgtune.kernels.matmul.padded`) on keys whose K or N is no
    multiple of 4;
  - skinny kernels (:class:`SkinnyTile`, :mod:`wgtune.kernels.matmul.skinny`) for a few rows
    (``rows*``: M small, a GEMV at the extreme) or a few columns (``cols*``): no staging, K
    split over the invocations of a workgroup, partial sums in registers, added in workgroup
    memory at the end; with ``split`` K is also cut over workgroups, as kgrid tiles do
    (planned only where K is at least SPLIT_MIN_K).
  - flat kernels (``flat*``, :mod:`wgtune.kernels.matmul.flat`) for a short K and many outputs:
    no staging, a few rows by a few strided columns an invocation, K in registers; planned first
    on medium and large keys with K at most FLAT_MAX_K, second on those with K at most
    FLAT_LATE_MAX_K, nowhere else.

- ``matmul_f16`` (:func:`matmul_f16_set`): f16 buffers (``features=("shader-f16",)``), f32
  arithmetic, a smaller space from the same generators (no kgrid tiles: their atomics add f32).

- ``matmul_f16_products`` (``matmul_set(precision="f16-products")``): f32 buffers whose products
  may round the inputs to f16 (summed in f32; its checks allow for it): ``matmul``'s candidates
  and, first in the medium group, tiles on subgroup matrices (``sgm*``,
  :mod:`wgtune.kernels.matmul.subgroup_matrix`: the tensor cores, on a Dawn device that has
  them; ``matmul_f16`` holds them too). Every other device refuses them uncompiled.

Keys and groups (``kernels/matmul/keys.py``). The key holds M, N, K anchored to powers of two, the
dtype, and what vec4 loads need: ``vec_k`` 4 where K is a multiple of 4 (rows of A start on a
vec4), ``vec_n`` 4 where N is (rows of B and C do), else 1. A candidate whose vec4 loads the key
does not allow is skipped (negative priority: it could not serve the call); where they are
allowed, the flat twin of a vec4 tile waits in a later batch. :func:`size_class` puts a key in a
class: ``rows`` (M <= 16), ``cols`` (N <= 16), ``deep`` (at most 512x512 outputs and K >= 1024),
``small`` (at most 256x256), ``large`` (at least 2048x2048, neither side under 512) or ``medium``;
each class takes the groups in its own order (:func:`groups_for`: ``rows`` first on small keys,
the medium tiles first on large keys that vec4 cannot serve), and skips the groups it does not
list, the skinny groups past SKINNY_MAX rows or columns and the deep group under DEEP_MIN_K of K.
The adaptive policy screens every batch the plan does not skip, in that order (a later group whose
first two candidates take over twice the leader's time is dropped), so the order mostly decides
how soon the likely winner is measured, and whether a group's best is measured at all: split-K
tiles with a narrow side (16-40 rows or columns) come first in their group where that side fits
the key's (:func:`~wgtune.kernels.matmul.keys.narrow_fit`), and tiles of several slices on keys of
few outputs (:func:`~wgtune.kernels.matmul.keys.sliced_fit`). The fixed policy measures the first
batch only.

On an NVIDIA H200 (Vulkan, wgpu-py 0.32), ``bench/shapes.py --full`` (the tune as it ships,
beside torch's fp32 with TF32 off, and an oracle of every checked candidate) put the tuned winner
of the fixed suite's 36 shapes at a median of 87.4-89.6% of torch in the runs of 2026-12-02
(``bench/results/h200-shapes-matmul-8194.txt``: 88.8%, 90.6% at 4096^3, 6 shapes under 80%, small
ones 2.9x torch, whose launch costs more than their work); the run of 4012cbb had 98.8%
(``h200-shapes.txt``) against a torch that measured slower. On 30 shapes drawn at random (seed
8194, in no probe) the median was 77.6% (thin 71.6%, flat 80.8%, general 77.6%); split kernels
of a few rows for any N took its thin shapes to 102%, and a fresh draw (seed 591983) had 112.7%
(82.3% of torch's CUDA graph). Medium shapes with K or N no multiple of 4 trail cuBLAS most. The
pick was within 2% of the oracle's best on 62-63 of 66 shapes a run. Most candidates are
compiled without WebGPU's runtime checks there (``Kernel.runtime_checks``;
:data:`~wgtune.kernels.matmul.tiles.CHECKED` are not): in the run of 4012cbb the median was 91.9%
with every candidate checked.

Grids are ``(ceil(N / block_n), ceil(M / block_m), K chunks)``: at most 65535 workgroups a
dimension, so the naive 16x16 default covers M and N up to 1,048,560; a candidate whose grid
would be larger is refused by the core's grid check (a Launch result) and the others still run
(the skinny kernels, whose grids are tallest, are skipped past SKINNY_MAX).

Tiles sum ``k = 0, 1, ..., K-1`` in order; slices, kgrid chunks and the skinny kernels' slices
add partial sums, so outputs agree to rounding, which grows with K and the sets' tolerances with
it (``tolerance.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from wgtune import Args, Group, Kernel, TunableSet

from ..common import ceil_div, with_runtime_checks
from ..family import Family
from .chunks import MAX_K_CHUNKS, MIN_K_CHUNK
from .flat import FlatTile, flat_matmul_kernel
from .keys import (
    DEEP_MIN_K,
    FLAT_LATE_MAX_K,
    FLAT_MAX_K,
    PLAN_GROUPS,
    SKINNY_MAX,
    SPLIT_MIN_K,
    groups_for,
    long_k_only,
    matmul_f16_key,
    matmul_key,
    matmul_sizes,
    needs_vec4,
    size_class,
    tile_priority,
)
from .padded import padded_kernel
from .partials import PARTIALS, partials_bytes, partials_params, reduce_stage
from .references import make_matmul_args, make_matmul_f16_args, matmul_f16_reference, matmul_reference, pack_f16
from .skinny import SkinnyTile, skinny_wgsl
from .subgroup_matrix import SubgroupMatrixTile, subgroup_matrix_kernel
from .tile import MatmulTile
from .tiles import CHECKED, GROUP_NAMES, MATMUL_GROUPS, SMALL, Tile, with_subgroup_matrices
from .tiles import MATMUL_F16_GROUPS as _F16_GROUPS
from .tolerance import F16_OUTPUTS, F16_PRODUCTS_TOLERANCE, F32_TOLERANCE
from .vector import vector_wgsl
from .wgsl import (
    DTYPES,
    FLOAT_ATOMICS,
    params_struct,
    scalar_wgsl,
)
from .wgsl import naive_wgsl as naive_matmul_wgsl
from .zeroing import zeroing_c_first

__all__ = [
    "DEEP_MIN_K",
    "F16_OUTPUTS",
    "F16_TOLERANCE",
    "FLAT_LATE_MAX_K",
    "FLAT_MAX_K",
    "GROUP_NAMES",
    "MATMUL_F16_FAMILY",
    "MATMUL_F16_TILES",
    "MATMUL_FAMILY",
    "MATMUL_GROUPS",
    "MATMUL_TILES",
    "MAX_K_CHUNKS",
    "MIN_K_CHUNK",
    "SKINNY_MAX",
    "SPLIT_MIN_K",
    "FlatTile",
    "MatmulTile",
    "SkinnyTile",
    "groups_for",
    "make_matmul_args",
    "make_matmul_f16_args",
    "matmul_f16_reference",
    "matmul_f16_set",
    "matmul_key",
    "matmul_reference",
    "matmul_set",
    "naive_matmul_kernel",
    "naive_matmul_wgsl",
    "pack_f16",
    "size_class",
    "skinny_matmul_kernel",
    "tiled_matmul_kernel",
    "tiled_matmul_wgsl",
]

# The f16 set's tolerance: outputs are rounded to f16 (a relative step of 2**-10), so two
# candidates may differ by one step where their f32 sums round differently.
F16_TOLERANCE = 2e-3

# -- kernels -------------------------------------------------------------------------------------


def tiled_matmul_wgsl(tile: MatmulTile, dtype: str = "f32") -> str:
    """WGSL for one tiled candidate with ``dtype`` buffers: the vector layout where the register
    tile is made of vec4 (``tile.vector``), else the scalar one (see :mod:`wgtune.kernels.matmul.wgsl`).
    For a ``kgrid`` tile this is the stage that adds into C (:func:`tiled_matmul_kernel` puts the
    stage that zeroes C first)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    return vector_wgsl(tile, dtype) if tile.vector else scalar_wgsl(tile, dtype)


def _features(dtype: str, subgroup: bool = False, float_atomics: bool = False) -> tuple[str, ...]:
    return ((("shader-f16",) if dtype == "f16" else ()) + (("subgroups",) if subgroup else ())
            + ((FLOAT_ATOMICS,) if float_atomics else ()))


def naive_matmul_kernel(wg_x: int = 16, wg_y: int = 16, dtype: str = "f32", **options) -> Kernel:
    """The naive candidate: a ``wg_x x wg_y`` workgroup covers as many outputs."""

    def grid(args: Args) -> tuple[int, int, int]:
        m, n, _ = matmul_sizes(args)
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
    """The candidate for ``tile``: one workgroup per ``bm x bn`` block of C (per K chunk with
    ``kgrid``, after a stage that zeroes C, or with ``partials`` before a stage that sums the
    chunks). ``options`` go to :class:`~wgtune.Kernel` (group, priority); vec4 tiles get their
    priority rule by default."""

    def grid(args: Args) -> tuple[int, int, int]:
        return tile.grid(*matmul_sizes(args))

    def scratch_bytes(args: Args) -> int:
        m, n, k = matmul_sizes(args)
        return partials_bytes(m, n, tile.chunks(m, n, k))

    def wave_params(args: Args) -> tuple[int, int, int, int]:  # a tail's wave: a param, so its tails share a WGSL
        return (*matmul_sizes(args), tile.tail)

    def steps_params(args: Args) -> tuple[int, int, int, int]:  # a uniform bound, which the driver cannot unroll
        return (*matmul_sizes(args), tile.steps)

    options.setdefault("priority", tile_priority(tile))
    if tile.copy:
        return padded_kernel(tile, dtype, _features(dtype, float_atomics=tile.float_atomics), **options)
    adds_into_c = tile.splits_k and not tile.partials
    params = wave_params if tile.tail else steps_params if tile.rolled else None
    if tile.partials:  # both stages on one bind group: the same bindings and params (Kernel.layout)
        if dtype != "f32":
            raise ValueError(f"{tile.name}: partials are f32 (the reduce stage writes f32 C)")
        params = partials_params(tile.chunks, params)
        struct = params_struct(bool(tile.tail), bool(tile.rolled), partials=True)
        options |= {"then": (reduce_stage(tile.name, tile.chunks, params, struct),),
                    "scratch": {PARTIALS: scratch_bytes}, "layout": "declared"}
    kernel = Kernel(
        tile.name,
        tiled_matmul_wgsl(tile, dtype),
        grid=grid,
        params=params,
        workgroup_size=tile.workgroup_size,
        workgroup_storage=tile.workgroup_storage,
        features=_features(dtype, tile.subgroup, tile.float_atomics),
        **({} if adds_into_c else options),
    )
    return zeroing_c_first(kernel, options, tile.zeroed if tile.tail else None) if adds_into_c else kernel


def skinny_matmul_kernel(tile: SkinnyTile, dtype: str = "f32", **options) -> Kernel:
    """The candidate for a skinny ``tile`` (:mod:`wgtune.kernels.matmul.skinny`); vec4 loads of B
    get their priority rule by default."""
    # Flat ones come first too: they are within a few percent of vec4 ones here, and a first
    # batch of a skinny key holds no other kind.
    loads = needs_vec4(k=tile.a_vec4, n=tile.vec4) if tile.vec4 or tile.a_vec4 else 1
    options.setdefault("priority", long_k_only(loads) if tile.split else loads)
    kernel = Kernel(
        tile.name,
        skinny_wgsl(tile, dtype),
        grid=lambda args: tile.grid(*matmul_sizes(args)),
        workgroup_size=(tile.threads, 1, 1),
        workgroup_storage=tile.workgroup_storage,
        features=_features(dtype, float_atomics=tile.float_atomics),
        **({} if tile.split else options),
    )
    return zeroing_c_first(kernel, options) if tile.split else kernel


# The f16 set and the f32 set of f16 products take the tiles on subgroup matrices too (planned first
# on medium and large keys; refused uncompiled by a device without them).
MATMUL_F16_GROUPS = with_subgroup_matrices(_F16_GROUPS)
F16_PRODUCTS_GROUPS = with_subgroup_matrices(MATMUL_GROUPS)
MATMUL_TILES: tuple[MatmulTile | SkinnyTile, ...] = tuple(tile for tiles in MATMUL_GROUPS.values() for tile in tiles)
MATMUL_F16_TILES: tuple[MatmulTile | SkinnyTile, ...] = tuple(
    tile for tiles in MATMUL_F16_GROUPS.values() for tile in tiles
)
F16_PRODUCTS_TILES = tuple(tile for tiles in F16_PRODUCTS_GROUPS.values() for tile in tiles)


def _candidate(tile: Tile, dtype: str, group: Group | None) -> Kernel:
    if isinstance(tile, SubgroupMatrixTile):  # any sizes, any alignment: it pads its own copies
        return with_runtime_checks(subgroup_matrix_kernel(tile, dtype, group=group, priority=1), False)
    if isinstance(tile, FlatTile):  # vec4 columns: skipped where N is no multiple of 4
        kernel = flat_matmul_kernel(tile, dtype, group=group, priority=needs_vec4(False, True) if tile.vec4 else 1)
    elif isinstance(tile, SkinnyTile):
        kernel = skinny_matmul_kernel(tile, dtype, group=group)
    else:
        kernel = tiled_matmul_kernel(tile, dtype, group=group)
    return with_runtime_checks(kernel, tile in CHECKED)


def _candidates(
    dtype: str, tiles: tuple[MatmulTile | SkinnyTile, ...], groups: dict[str, tuple[MatmulTile | SkinnyTile, ...]]
) -> list[Kernel]:
    """The naive kernel first (candidate 0), then one per tile, grouped where the tile is in
    ``groups`` (a custom tile list is one ungrouped batch)."""
    group_of = {tile: PLAN_GROUPS[name] for name, members in groups.items() for tile in members}
    small = PLAN_GROUPS[SMALL] if group_of else None
    candidates = [with_runtime_checks(naive_matmul_kernel(16, 16, dtype, group=small, priority=1), False)]
    candidates += [_candidate(tile, dtype, group_of.get(tile)) for tile in tiles]
    return candidates


PRECISIONS = {
    "f32": ("matmul", MATMUL_TILES, MATMUL_GROUPS, F32_TOLERANCE),
    "f16-products": ("matmul_f16_products", F16_PRODUCTS_TILES, F16_PRODUCTS_GROUPS, F16_PRODUCTS_TOLERANCE),
}
"""What ``matmul_set(precision=)`` may promise of its f32 results (see :func:`matmul_set`): the
set's name, its default tiles and groups, and its output checks' tolerance."""


def matmul_set(tiles: tuple[MatmulTile | SkinnyTile, ...] | None = None, *, precision: str = "f32") -> TunableSet:
    """The ``matmul`` set (f32): the naive kernel first (safe default), then one candidate per tile
    of :data:`MATMUL_TILES`, grouped as the module says; other ``tiles`` make an ungrouped set.

    Tolerances assume entries of order 1: candidates sum in the same order but for the slices of
    K of the skinny and kgrid candidates, so rounding makes them differ by an amount that grows
    with K, within ``1e-3 + 2e-7 * K + 1e-3 * |c|`` (:mod:`~wgtune.kernels.matmul.tolerance`).

    ``precision="f16-products"``: the set ``matmul_f16_products``, f32 A, B and C where products
    may take the inputs rounded to f16 (a 10-bit mantissa, as TF32's, in f16's range: magnitudes
    past 65504 overflow) and sum them in f32, as torch's f16 matmul with f32 accumulation: the
    f32 candidates and, first on medium and large keys, those on subgroup matrices (the tensor
    cores where a Dawn device has them: :mod:`wgtune.kernels.matmul.subgroup_matrix`). Its
    output checks allow for that rounding (:data:`F16_PRODUCTS_TOLERANCE`). Its winners are
    its own: a ``matmul`` call never gets one.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: one of {', '.join(PRECISIONS)}")
    name, default, default_groups, tolerance = PRECISIONS[precision]
    groups = default_groups if tiles is None or tuple(tiles) == default else {}
    candidates = _candidates("f32", default if tiles is None else tuple(tiles), groups)
    return TunableSet(name, candidates, key=matmul_key, outputs=(2,), **tolerance)



def matmul_f16_set(tiles: tuple[MatmulTile | SkinnyTile, ...] | None = None) -> TunableSet:
    """The ``matmul_f16`` set: f16 A, B and C (every candidate needs ``shader-f16``), f32 tiles
    and sums. The output checks compare the f16 outputs as values within :data:`F16_OUTPUTS`
    (``bench/f16_checks.py`` measures them on a GPU). Check results against
    :func:`matmul_f16_reference`.
    """
    groups = MATMUL_F16_GROUPS if tiles is None or tuple(tiles) == MATMUL_F16_TILES else {}
    candidates = _candidates("f16", MATMUL_F16_TILES if tiles is None else tuple(tiles), groups)
    return TunableSet("matmul_f16", candidates, key=matmul_f16_key, outputs=(2,), **F16_OUTPUTS)


# -- the families ----------------------------------------------------------------------------------


def _matmul_check(inputs: Sequence[Sequence[float]], params: tuple) -> list[float]:
    a, b = inputs
    return matmul_reference(list(a), list(b), *params[:3])


def _matmul_f16_check(inputs: Sequence[Sequence[float]], params: tuple) -> list[float]:
    a, b = inputs
    return matmul_f16_reference(list(a), list(b), *params[:3])


MATMUL_FAMILY = Family(
    name="matmul",
    build=matmul_set,
    dims=("M", "N", "K"),
    make_args=make_matmul_args,
    reference=_matmul_check,
    # A square and an odd shape (192 x 160 x 96 is not a multiple of the 64- and 128-wide tiles).
    demo_sizes=((128, 128, 128), (192, 160, 96)),
)
"""The ``matmul`` set in the registry (:mod:`wgtune.kernels.families`)."""

MATMUL_F16_FAMILY = Family(
    name="matmul_f16",
    build=matmul_f16_set,
    dims=("M", "N", "K"),
    make_args=make_matmul_f16_args,
    reference=_matmul_f16_check,
    element="f16",  # not in the demo: every candidate needs shader-f16, which many adapters lack
)
"""The ``matmul_f16`` set in the registry (:mod:`wgtune.kernels.families`)."""
