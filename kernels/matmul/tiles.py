"""The matmul family's candidates, by group (see :mod:`wgtune.kernels.matmul` for what the
groups are and how a key picks them).

Each entry is a tile (:class:`~wgtune.kernels.matmul.tile.MatmulTile`, a
:class:`~wgtune.kernels.matmul.skinny.SkinnyTile` or a
:class:`~wgtune.kernels.matmul.flat.FlatTile`) in the forms worth having: with vec4 global loads
(``_v4``, for K and N multiples of 4), flat ones (any sizes), or both. The comments give what each
reached on an NVIDIA H200 (Vulkan, wgpu-py 0.32) as a share of PyTorch's fp32 (TF32 off) on the
shapes ``bench/kernel_probe.py --full`` probes, where it is the fastest candidate or close to it
(the reason it is here; ranges span two runs, and forms that never came within 5% of a shape's best
were dropped). Every candidate fits 32 KiB of workgroup storage and 1024 invocations (lavapipe's
limits), but for a staged subgroup-matrix tile of 35 KiB (for devices with subgroup matrices: the
H200's Dawn allows 48); those past WebGPU's defaults (16 KiB, 256) are refused by the core on
devices without them, and each group keeps several candidates within the defaults.
"""

from __future__ import annotations

from dataclasses import replace

from .flat import FlatTile
from .skinny import SkinnyTile
from .subgroup_matrix import SubgroupMatrixTile
from .tile import MatmulTile

__all__ = [
    "CHECKED", "COLS", "DEEP", "FLAT", "GROUP_NAMES", "LARGE", "MATMUL_F16_GROUPS", "MATMUL_GROUPS", "MEDIUM", "ROWS",
    "SMALL", "SUBGROUP_MATRIX_TILES", "with_subgroup_matrices",
]

ROWS, COLS, DEEP, SMALL, MEDIUM, LARGE, FLAT = "rows", "cols", "deep", "small", "medium", "large", "flat"
GROUP_NAMES = (ROWS, COLS, DEEP, SMALL, MEDIUM, LARGE, FLAT)

Tile = MatmulTile | SkinnyTile | FlatTile | SubgroupMatrixTile


def _v4(*tiles: Tile) -> tuple[Tile, ...]:
    """Each tile with vec4 loads only (its flat twin never came close)."""
    return tuple(replace(tile, vec4=True) for tile in tiles)


def _flat(*tiles: Tile) -> tuple[Tile, ...]:
    """Each tile with flat loads only (its vec4 twin never came close); a vector-layout tile's
    columns strided (``MatmulTile.strided``: on an H100 (2026-12-06) the fixed cost of a launch
    fell from 17-38 to 10-16 us on 2048x2048xK, a split-K tile's from 68 to 49 us, the steady rate
    within 1-3%; a fresh draw's winners 1.054x where they changed, 19 of 30,
    bench/results/h100-ab-strided-in-set-compared.txt)."""
    return tuple(replace(tile, vec4=False, strided=True) if isinstance(tile, MatmulTile) and tile.vector
                 else replace(tile, vec4=False) for tile in tiles)


def _copies(*tiles: MatmulTile) -> tuple[MatmulTile, ...]:
    """Each vec4 tile on copies of A, of B, and of both (``copy``: a key plans the one its K and
    N need, none where both are multiples of 4)."""
    return tuple(replace(tile, vec4=True, copy=copy) for tile in tiles for copy in ("a", "b", "ab"))


def _copy_a(*tiles: MatmulTile) -> tuple[MatmulTile, ...]:
    """Each vec4 tile on a copy of A only (for K no multiple of 4 where N is one)."""
    return tuple(replace(tile, vec4=True, copy="a") for tile in tiles)


def _both(*tiles: Tile) -> tuple[Tile, ...]:
    """Each tile with vec4 loads and with flat ones."""
    return tuple(form for tile in tiles for form in (*_v4(tile), *_flat(tile)))


T = MatmulTile


def R(rows: int, cells: int, **options) -> SkinnyTile:
    """A skinny tile of a few rows (short to read in the lists, like ``T``)."""
    return SkinnyTile("rows", rows, cells, **options)


def C(rows: int, cells: int, cols: int, **options) -> SkinnyTile:
    """A skinny tile of a few columns."""
    return SkinnyTile("cols", rows, cells, cols=cols, **options)


F = FlatTile  # F(rows, cols, wx, wy, vec4=, unroll=): a tile for a short K


MATMUL_GROUPS: dict[str, tuple[Tile, ...]] = {
    # A few rows (M <= 16), and small problems: a block of rows by 8 to 128 columns per workgroup,
    # K split over its invocations (and over workgroups with ``split``: planned on long K only).
    ROWS: (
        # ``float_atomics``: adds into C with the device's float atomics (natively; a device
        # without them skips these at once, uncompiled, and takes the next).
        *_v4(R(4, 16, split=1024, float_atomics=True)),  # 16x1024x16384 102%, 64x64x65536 67%
        *_v4(R(4, 16, split=1024)),  # 16x1024x16384 78%, 64x64x65536 47%
        *_both(R(4, 8)),  # 33x4096x4096 62%
        *_both(R(4, 16, unroll=8)),  # 8x8192x1024 105-130%, 256^3 312-506%, 200x150x100 340% (flat)
        # 8 rows a workgroup, so at M of 9-16 B is read twice, not four times (2026-12-05, H100,
        # bench/results/h100-probe-thin-rows.txt): 15x8134x733 65 -> 100% of torch; it lost where its
        # workgroups are fewer than about 256 (16x4096x1024 82 against 98%), so the 32-column form makes
        # as many workgroups as rows4_c64. In the set, on 12 shapes of M 9-16 (h100-ab-rows8-in-set.txt):
        # 5 winners changed, median 1.156x (15x8134x733 1.43x, 13x20001x300 1.16x, 16x4096x1024 1.16x).
        # ``stage_a``: A's rows staged in workgroup memory, read as vec4 (2026-12-05, H100,
        # bench/results/h100-probe-staged-rows.txt, 16 shapes of M 3-62): staged, the 8-row kernel ran
        # faster than unstaged on 15 of 16 shapes (16x10000x2000 12.8 against 6.8 TFLOP/s, 19x1761x609
        # +13%, 13x20001x300 +9%; unstaged won only 9x16000x400), and a staged 16-row kernel took
        # 9x16000x400 (+32% over the unstaged 8-row one); staged vec4 forms ran slower than unstaged
        # ones, and 32-column forms led nowhere. The set with these three against the set before, tuned on those shapes
        # (h100-ab-staged-rows-compared.txt): 8 winners changed, median 1.074x (16x10000x2000 1.13x,
        # 15x8134x733 1.09x, 13x20001x300 1.08x, 20x920x5112 1.08x), regret over 2% on none.
        *_flat(R(8, 16, unroll=4, stage_a=True)),
        *_both(R(8, 8, unroll=4)),
        *_flat(R(16, 16, unroll=4, stage_a=True)),
        *_both(R(1, 16, unroll=8)),  # 64^3 352%, 96^3 478%, 128^3 481%
        *_v4(R(1, 2)),  # 1x4096x4096 68% (within WebGPU's default 256 invocations)
        *_v4(R(1, 8, threads=1024, unroll=8)),  # 1x4096x4096 78%
        *_v4(R(1, 16, unroll=8, split=2048, float_atomics=True)),  # 1x4096x4096 91%
        # Split over K with 128 columns a workgroup, and flat loads for an N no multiple of 4, which
        # had no split kernel before (2026-12-02, H200, bench/results/h200-probe-thin{,-vec4}.txt:
        # the set's best before -> these): 1x782x6519 39 -> 111%, 1x517x9001 40 -> 121%, 1x3001x4999
        # 55 -> 85%, 3x1111x7777 98 -> 213%; vec4: 1x4096x4096 73 -> 78%, 1x1500x12000 80 -> 85%.
        *_both(R(1, 32, unroll=8, split=2048, float_atomics=True)),
        *_both(R(2, 32, unroll=8, split=1024, float_atomics=True)),
        *_flat(R(1, 32, threads=512, unroll=8, split=1024, float_atomics=True)),
        # Staged, it ran faster than as it was on 6 of 6 shapes with K long enough to split (1.01-1.08).
        *_flat(R(4, 32, unroll=8, split=1024, float_atomics=True, stage_a=True)),
    ),
    # A few columns (N <= 16): 4 columns by 8 to 16 rows per workgroup, K split over it; ``a4``:
    # A read as vec4 along K.
    COLS: (
        *_flat(C(4, 4, 4, threads=128)),  # 4096x1x4096 78% (K odd: no a4)
        replace(C(2, 4, 1, threads=128), a_vec4=True),  # 4096x1x4096 97%
        replace(C(2, 8, 1), a_vec4=True),  # 4096x1x4096 95%
        # More loads in flight for a GEMV (N = 1) whose K is no multiple of 4, where no a4 kernel
        # serves, and for N of 2 to 4 (2026-12-04, H200, bench/results/h200-probe-gemv-2.txt: the
        # set's best before -> these): 3675x1x7897 59.5 -> 89.7%, 4096x1x4095 73 -> 98.5%,
        # 2048x1x8191 43 -> 80%, 4096x1x4096 84 -> 92%; split for few rows of a long K, 1500x1x12001
        # 30 -> 76%, 1000x1x20003 23 -> 74%; two columns, 3172x2x6771 111 -> 147%, 4096x4x4097 188 -> 225%.
        *_flat(C(4, 4, 1, threads=512, unroll=8)),
        *_flat(C(4, 4, 1, threads=256, unroll=8, split=1024, float_atomics=True)),
        *_flat(C(4, 4, 2, threads=256, unroll=8)),
    ),
    # Few outputs, long K: tiles whose grid splits K (about `kgrid` workgroups): in two passes
    # (``partials``: no atomics, so browsers have them too; vec4 tiles write their partial sums
    # four at a time, which took 128x512x32768 from 34.0 with float atomics to 37.0 TFLOP/s: the
    # chunks' scalar stores or adds, all at the end, cost a 128x256 chunk a fifth of its time),
    # with the device's float atomics, then with compare-exchange adds, staggered (``stagger``)
    # where that measured faster. On an H200 a 128x128 tile runs one workgroup per SM: kgrid=128
    # keeps its grid to one wave (48 chunks instead of 32 at 128x512x32768 fell from 34.6 to 26.0
    # TFLOP/s). Figures of 2026-12-01 (bench/kernel_probe.py --tiles, compiled as CHECKED says;
    # bench/results/h200-shapes.txt). Seven float-atomic tiles below are in their two-pass form, which ran
    # at 1.01-1.08 of them, twin by twin, natively (2026-12-05, H100, bench/results/h100-probe-two-pass.txt,
    # medians over 20 long-K shapes: 64x128 vec4 kgrid=1024 1.079, 128x128 wave 1.065, 32x256 1.042) and
    # runs in browsers too; tuned on those shapes (h100-ab-two-pass-in-set-compared.txt) 12 winners
    # changed, median 1.030x against 1.014x where the same won (57x2500x5000 1.23x, 24x4096x4096 1.11x).
    DEEP: (
        *_v4(T(64, 64, 16, 8, 8, double=True, kgrid=256, partials=True)),  # 64x64x65536 104%
        *_v4(T(128, 128, 16, 8, 8, double=True, kgrid=128, partials=True)),  # 256x256x16384 89%, 128x512x32768 78%
        *_v4(T(128, 256, 8, 8, 16, pad=4, double=True, kgrid=128, partials=True)),  # 128x512x32768 83%
        *_v4(T(36, 128, 16, 4, 8, double=True, kgrid=1024, float_atomics=True)),  # 33x4096x4096 97%
        *_flat(T(64, 40, 8, 8, 4, double=True, kgrid=512, float_atomics=True)),  # 4096x33x4096 88%
        # Hundreds of outputs a side and K in the thousands, whose 64-wide blocks make under a wave of
        # 132 SMs (2026-12-03, H200, bench/results/h200-probe-kgrid-general.txt; second among the
        # flat probes of the group, which the adaptive policy screens first): 370x1978x2696 62.8 ->
        # 80.8% (77.6% in h200-probe-copies-general.txt); there kgrid=256 or 1024, or copies, did no better.
        *_flat(T(64, 64, 12, 8, 4, pad=4, double=True, ahead=2, kgrid=512, float_atomics=True)),
        # The 128x128 tile split into the fewest K chunks that fill whole waves of an H200's 132 SMs
        # (it runs one workgroup an SM): on 17 general shapes, the best of five kgrid targets was, shape
        # by shape, the one whose chunks filled the waves best (2026-12-04, H200, against the set's best,
        # bench/results/h200-probe-large-kgrid.txt, then in this form h200-probe-wave.txt): 5615x256x4068
        # +17% and +13% (88 blocks: 3 chunks), 202x1308x1744 +2% and +5%; 341x4374x3085 +10% in the first
        # run only (the leaders' figure rose 7% between them); it loses where the medium tiles' kgrid forms lead.
        *_flat(T(128, 128, 16, 8, 8, double=True, kgrid=1056, wave=132, partials=True)),
        # kgrid forms of the medium group's flat leaders on a fresh draw's few-block long-K shapes (same
        # day, h200-probe-kgrid-few-blocks.txt; against the set's best): 386x1916x7705 +18% (96x64,
        # 1024), 29x1572x7999 +17% (64x64 K12, 256), 214x1782x2772 +9% (K8, 1024). A kgrid target
        # changes the grid only: the K12 tile's two forms are one WGSL, the one grid about twice the other's K chunks.
        *_flat(T(96, 64, 12, 12, 4, pad=4, double=True, ahead=2, kgrid=1024, partials=True)),
        *_flat(T(64, 64, 12, 8, 4, pad=4, double=True, ahead=2, kgrid=256, float_atomics=True)),
        *_flat(T(64, 64, 8, 8, 4, pad=4, double=True, ahead=2, kgrid=1024, float_atomics=True)),
        # Its K chunks as short as 128 (``chunk``; MIN_K_CHUNK is 256): on few blocks and a K of one or two
        # thousand it takes more workgroups, on the same WGSL (no compile of its own). 2026-12-07, H200: in
        # the probe of 18 such shapes (bench/results/h200-probe-short-chunks.txt) it led 7, a median 0.942 of
        # each shape's best against 0.894 for chunks of 256; tuned in the set on those and three of a draw
        # (h200-ab-chunks128-in-set-compared.txt) it won 8, 814x123x1512 1.10x, 547x297x858 1.11x,
        # 731x106x1156 1.10x, the median where winners changed 1.009x (1.006x where they did not, the
        # runs' spread), under 80% of torch 13 -> 10 shapes. Its two-pass twin (browsers) won none natively.
        *_flat(T(64, 64, 8, 8, 4, pad=4, double=True, ahead=2, kgrid=1024, float_atomics=True, chunk=128)),
        *_v4(T(36, 128, 16, 4, 8, double=True, kgrid=1024, partials=True)),  # 33x4096x4096 99%
        *_flat(T(64, 40, 8, 8, 4, double=True, kgrid=512, partials=True)),
        *_v4(T(36, 128, 16, 4, 8, double=True, kgrid=256, stagger=8)),  # 33x4096x4096 73%
        *_flat(T(64, 36, 16, 4, 4, kgrid=512, stagger=8)),  # 4096x33x4096 62%
        # Hundreds of outputs a side, K odd or long (2026-12-02, H200, against the 64x40 kgrid=512
        # above; bench/results/h200-splitk-probe.txt): 731x106x1156 6.2 -> 7.7 TFLOP/s (64x32),
        # 98x1193x1587 9.0 -> 11.2 and 322x218x4137 10.9 -> 13.9 (64x64 4x4), 1005x234x6825 17.1
        # -> 24.2 and 681x394x1528 12.6 -> 15.3 (64x64 8x8); 788x741x1941 no better.
        *_flat(T(64, 32, 16, 4, 4, kgrid=256, float_atomics=True)),
        *_flat(T(64, 64, 16, 4, 4, double=True, kgrid=256, float_atomics=True)),
        *_flat(T(64, 64, 8, 8, 8, double=True, kgrid=256, float_atomics=True)),
        *_flat(T(128, 32, 16, 8, 4, double=True, kgrid=256, partials=True)),  # 3542x25x1801 75-82% (66-68% before)
        # 788x741x1941 65% (58% before)
        *_flat(T(64, 128, 8, 8, 8, double=True, slices=2, ahead=2, kgrid=256, partials=True)),
        *_v4(T(64, 128, 8, 8, 8, double=True, slices=2, kgrid=256, partials=True)),  # 600x600x3000 74.5% (69% before)
        # A few dozen rows, K long and odd (same probes): 28x2961x3502 61 -> 76%, 33x999x8191 59 -> 69%
        # (kgrid=1024, the same WGSL on a larger grid, 74%).
        *_flat(T(36, 128, 16, 4, 8, double=True, kgrid=256, float_atomics=True)),
        # M of 20-64, N and K in the thousands: 32-row blocks and vec4 64-row ones, K over about 1024
        # workgroups (2026-12-05, H100, bench/results/h100-probe-thin-mid.txt, against the set's best):
        # 28x2961x3502 +14%, 45x2222x2901 +12% (32x128 flat), 32x7000x1200 +7% (its vec4 form),
        # 24x4096x4096 +18%, 60x4096x2048 +5% (32x256), 57x2500x5000 +15%, 64x8000x1500 +9% (64x128),
        # 20x920x5112 +7% (32x64).
        *_both(T(32, 128, 8, 4, 8, double=True, kgrid=1024, float_atomics=True)),
        *_v4(T(32, 256, 8, 4, 8, double=True, kgrid=1024, partials=True)),
        *_v4(T(64, 128, 8, 8, 8, double=True, kgrid=1024, partials=True)),
        *_flat(T(32, 64, 8, 4, 4, double=True, kgrid=1024, float_atomics=True)),
        # Two-pass twins of the float-atomic leaders: as fast natively or faster, and what a browser
        # (no float atomics) can run (same day, h100-probe-dawn-browser-ksplit.txt; wgpu-native, then
        # Dawn, against the set's best there): 35x1879x4108 13.0 against 9.6 TFLOP/s (36x128), 386x1916x7705
        # 24.3 against 22.3 (64x64 K8), 53x885x6992 13.8 against 13.3 (K12); on Dawn 63x5595x3164 20.3
        # against 16.3, 6464x88x2959 16.7 against 9.3. Adds with compare-and-swap loops ran at 0.54-0.59.
        # These eight in the set, tuned on 18 shapes of M 20-64 or long K (h100-ab-thin-mid-in-set*.txt):
        # on Dawn 13 winners changed, median 1.142x (35x1879x4108 1.38x, 40x6001x3001 1.34x); natively 9 of
        # 14 changed, median 1.029x (35x1879x4108 1.14x, 53x885x6992 1.09x); a fresh draw, 17 shapes, even.
        *_flat(T(64, 64, 8, 8, 4, pad=4, double=True, ahead=2, kgrid=1024, partials=True)),
        *_flat(T(64, 64, 12, 8, 4, pad=4, double=True, ahead=2, kgrid=512, partials=True)),
        # The K8 tile sliced in two, K over about 512 workgroups (same probe; a fresh draw's tunes,
        # h100-ab-medium-fill-in-set-draw-compared.txt): 288x272x834 1.10x, 1093x33x1592 0.94x (that run's
        # drift 0.987); the suite's 64x64x65536 1.06x.
        *_flat(T(64, 64, 8, 8, 4, pad=4, double=True, ahead=2, slices=2, kgrid=512, partials=True)),
        *_flat(T(36, 128, 16, 4, 8, double=True, kgrid=256, partials=True)),
        # Blocks as narrow as the narrow side where it is 9-20 and K long: the 32- and 36-wide tiles above
        # do up to 2.3 times the multiply-adds such a product needs (2026-12-04, H200,
        # bench/results/h200-probe-narrow.txt, two runs, % of torch against the set's best): 128x16, N of
        # 10-16, 4206x14x7801 80 against 69, 8192x16x1024 133 against 112, 4000x12x3000 87 against 74,
        # 1500x10x9000 104 against 99; 20x128, M of 17-20, 17x5794x2066 87 against 73, 19x2048x2048 75
        # against 61; 16x128, M of 9-16, 12x3000x3000 87 against 72 (the rows kernels keep 9x1135x4811).
        # At N of 19-25 the 20-wide block lost to the 32-wide one.
        *_flat(T(128, 16, 8, 8, 4, double=True, slices=2, kgrid=256, partials=True)),
        *_flat(T(20, 128, 16, 4, 8, double=True, kgrid=256, float_atomics=True)),
        *_flat(T(16, 128, 16, 4, 8, double=True, kgrid=256, float_atomics=True)),
    ),
    # Few outputs: small blocks keep every core busy; cheap to compile.
    SMALL: (
        *_v4(T(32, 32, 16, 4, 4)),  # 32^3 736%
        *_v4(T(32, 64, 16, 4, 4)),  # 512^3 131%
        *_both(T(64, 32, 16, 4, 4, pad=4)),  # 1023x1025x1027 77% (flat)
        *_flat(T(64, 64, 16, 4, 4, double=True)),  # 333x4099x517 65%
        *_flat(T(64, 64, 8, 4, 4, pad=4, double=True)),  # 333x4099x517 67%
        *_both(T(64, 32, 16, 4, 4, slices=2)),  # 8192x16x1024 129%, 512^3 128% (v4)
    ),
    # Hundreds to a few thousand blocks: 64- and 128-wide tiles, 8x8 per invocation.
    MEDIUM: (
        *_both(T(64, 128, 16, 8, 8, double=True)),  # 1024^3 91%, 1000^3 85% (v4), 999x1001x997 77%
        *_flat(T(128, 64, 16, 8, 8, double=True)),  # 999x1001x997 72%
        *_both(T(128, 64, 8, 8, 8, pad=4, double=True)),  # 3000x5000x700 92%, 5000x3000x2000 93% (v4)
        *_both(T(64, 128, 8, 8, 8, double=True)),  # 3001x2999x1001 84% (flat), 3072^3 89% (v4)
        *_both(T(64, 64, 8, 8, 8, double=True)),  # 2047x2049x2051 96% (flat)
        *_both(T(64, 64, 8, 8, 8, double=True, slices=2)),  # 1536^3 82% (v4)
        # Flat tiles for sizes vec4 cannot serve (helper probe of 2026-12-01, odd sizes, H200):
        *_flat(T(128, 32, 8, 8, 4, pad=4, double=True, slices=2)),  # 1023x1025x1027 89%
        # ``ahead=2``: loads two K steps ahead, which these small register tiles can afford (the
        # 128x128 and larger ones lost 3-16% with it: registers); 2026-12-01, H200:
        *_flat(T(64, 128, 8, 8, 8, double=True, slices=2, ahead=2)),  # 999x1001x997 81.5% (78-79% without)
        *_flat(T(64, 64, 8, 8, 8, double=True, slices=2, ahead=2)),  # 49x6931x805 75-78% (69-76% before)
        *_flat(T(64, 64, 12, 8, 4, pad=4, double=True, ahead=2)),  # 333x4099x517 82.8% (80% without)
        # Points around that tile on the held-out draws' general shapes (2026-12-03, H200,
        # bench/results/h200-probe-champion-sweep.txt; against the best of it and the 64x128 s2 a2
        # tile): a K step of 8 +4 to +11% on 6 of 14 (561x6138x434 78.9%), 96-row blocks of 12x4
        # +3 to +13% on 5 (617x3402x2782 73.2%); K steps of 16 to 32, other blocks, no pad: no better.
        *_flat(T(64, 64, 8, 8, 4, pad=4, double=True, ahead=2)),
        # Its twin of neighbouring columns too: 1.6% faster on 19 of 24 general shapes, whose stores weigh
        # little beside a long K (the strided one 4-17% faster where K is short; h100-probe-strided.txt).
        T(64, 64, 8, 8, 4, pad=4, double=True, ahead=2),
        *_flat(T(96, 64, 12, 12, 4, pad=4, double=True, ahead=2)),
        # Sliced blocks for grids of fewer blocks than SMs: 4 sets of invocations share each staged step
        # and add their sums in workgroup memory at the end, so a block has four times the warps to hide
        # its loads, on the same grid and with no second stage (2026-12-06, H100, 20 general shapes of
        # 74-5104 rows, bench/results/h100-probe-medium-fill.txt; tuned beside the set,
        # h100-ab-medium-fill-in-set-compared.txt: 5 winners changed to them, median 1.03x): 309x759x709
        # 1.27x, 547x297x858 1.22x (64x32), 1310x325x1511 1.03x, 204x1663x1152 1.02x (64x64 8x8); in the
        # issue-14 suite 512^3 1.30x (h100-suite-medium-fill-compared.txt).
        *_flat(T(64, 32, 8, 8, 4, pad=4, double=True, ahead=2, slices=4)),
        *_flat(T(64, 64, 8, 8, 8, double=True, slices=4, ahead=2)),
        # Single-buffered with a K step of 16, for a short K (fewer steps, fewer registers): against
        # the 64x64 K8 tile above on the draws' flat shapes (K 46-253; 2026-12-03, H200,
        # bench/results/h200-probe-short-k{,-2}.txt) +8 to +21% at K 46-94 (2127x1953x94 68.4%
        # against 62.1%, 5490x854x65 71.1 against 58.9%), even to -7% at K 144-253.
        *_flat(T(64, 64, 16, 8, 4, pad=4)),
        # vec4 tiles on copies of A (K no multiple of 4, N one: vec4 loads of B and stores of C as
        # they are) and of B (N no multiple of 4; C stored a float at a time): 2026-12-02, H200,
        # bench/results/h200-padded-probe.txt. Copies of A won where N allows vec4, by 10-22
        # points over the flat tiles; copies of B mostly lost to them (by 5-30 points: the copy,
        # and no vec4 stores of C; an aligned copy of C copied out after did no better), but for
        # a few large shapes: 3001x2999x1001 81-83% against 72-79%.
        *_copies(T(64, 128, 8, 8, 8, double=True)),  # 1926x2352x90 82% (flat 62%), 5567x5700x255 88-92% (73%)
        *_copy_a(T(128, 64, 8, 8, 8, pad=4, double=True)),  # 5567x5700x255 95% (flat 73%)
    ),
    # Big outputs: 128x128 and larger blocks, 64 to 128 outputs per invocation.
    LARGE: (
        *_v4(T(128, 256, 8, 8, 16, pad=4, double=True)),  # 4096^3 87%, 2000x2000x500 93%
        *_both(T(128, 128, 16, 8, 8, double=True)),  # 8192x256x1024 99% (v4)
        *_both(T(128, 128, 16, 8, 8, double=True, swizzle=8)),  # 8192x512x8192 87% (v4)
        *_v4(T(128, 128, 8, 8, 16, double=True)),  # 1024x4096x256 89%
        *_v4(T(256, 128, 8, 16, 8, pad=4, double=True)),  # 2000x2000x500 89%
        *_v4(T(144, 128, 8, 8, 8, double=True, ahead=2)),  # 1536^3 88% (84% without; 11x12 blocks: one per SM)
        *_copies(T(128, 256, 8, 8, 16, pad=4, double=True)),  # 4690x737x1684 75-79% (flat 74-77%)
        # The deep group's 128x128 wave tile (its WGSL; a kgrid target of 1024, so a name of its own): large keys
        # plan no split, and 3802x587x5151 (N and K odd, a long K) ran 1.11x with it: on an H200 with the whole
        # deep group, which doubled tuning (h200-ab-deep-on-large-compared.txt), on an H100 with this tile alone,
        # tuning as long, the other 11 large shapes unchanged (h100-ab-wave-on-large-compared.txt).
        *_flat(T(128, 128, 16, 8, 8, double=True, kgrid=1024, wave=132, partials=True)),
    ),
    # A short K (at most FLAT_MAX_K) and many outputs: no staging, rows x cols sums an invocation
    # (kernels/matmul/flat.py says why: the tiles reached 43-78% of torch on such shapes). Last in
    # the set, so that the other candidates keep their indices. H200, 2026-12-02 (best of the
    # set's tiles before -> the flat group's; bench/results/h200-flat-probe.txt): 4561x4475x11
    # 4.1 -> 10.1 TFLOP/s (99.7% of torch), 901x7895x6 2.3 -> 5.2, 3957x990x22 5.7 -> 8.9,
    # 620x7790x37 9.2 -> 12.7; ten other points (to 8x8 an invocation) did no better. At K = 64
    # the tiles win again (2048x6000x64: flat 67%, a tile 99%): the adaptive policy finds them.
    # ``stage_a``: A's rows staged in workgroup memory, read as vec4 along K (2026-12-03, H200,
    # bench/results/h200-probe-flat-sa.txt, unstaged -> staged): 4849x1259x44 60.6 -> 73.9% (8x4),
    # 77.5% (16x2); 3671x527x33 95.7 -> 112-121%; 620x7790x37 66.4 -> 71.3%; 2616x555x6 251 -> 270%.
    # The 2x4 tile stays unstaged: at K = 6 staging cost it 6%. 4x1 lost to every other tile.
    FLAT: (
        F(2, 4, 64, 4), F(4, 2, 64, 4, stage_a=True), F(4, 4, 64, 4, stage_a=True),  # 901x7895x6 101% (2x4)
        F(8, 2, 128, 2, stage_a=True), F(8, 4, 64, 2, stage_a=True), F(16, 2, 64, 1, stage_a=True),
        # 16x2 in a workgroup of 128: above the one of 64 on 15 of 17 shapes of K 11-253 (+2 to
        # +10%; 2996x4101x11 84.7% against 77.2%, 2685x3845x54 75.4 against 68.8%; 2026-12-03,
        # bench/results/h200-probe-short-k-2.txt); 256 did no better, nor other sums in 128.
        F(16, 2, 128, 1, stage_a=True),
        F(4, 1, 64, 4, vec4=True), F(8, 1, 64, 2, vec4=True),  # N a multiple of 4: 3185x1464x17 (4x1)
    ),
}

# The f16 set: fewer tiles, the same generators (f16 buffers, f32 tiles and arithmetic; no kgrid
# tiles, whose atomics add f32 words).
MATMUL_F16_GROUPS: dict[str, tuple[Tile, ...]] = {
    ROWS: (*_both(R(4, 8)), *_both(R(16, 2))),
    COLS: (*_both(C(4, 4, 4, threads=128)),),
    SMALL: (*_v4(T(32, 32, 16, 4, 4)), *_both(T(64, 32, 16, 4, 4, pad=4)), *_both(T(64, 64, 8, 4, 4))),
    MEDIUM: (
        *_both(T(64, 128, 16, 8, 8, double=True)),
        *_both(T(128, 64, 8, 8, 8, pad=4, double=True)),
        *_v4(T(64, 64, 16, 8, 8, vec4=True, subgroup=True)),
    ),
    LARGE: (
        *_v4(T(128, 256, 8, 8, 16, pad=4, double=True)),
        *_both(T(128, 128, 16, 8, 8, double=True)),
        *_v4(T(128, 128, 8, 8, 16, double=True)),
        *_v4(T(256, 128, 8, 16, 8, pad=4, double=True)),
    ),
}

# Tiles on subgroup matrices (the tensor cores; :mod:`wgtune.kernels.matmul.subgroup_matrix`): first
# in the medium group of the sets that take them (f16 inputs, or f32 inputs whose products may round
# them to f16), refused uncompiled by a device without the feature. On an H200 (Dawn, 2026-12-03,
# kernels alone on f16 data, bench/results/h200-subgroup-matrix-staged.txt): A's and B's blocks
# staged in workgroup memory, 8 subgroups of 2x4 fragments and a K step of 64 208-213 TFLOP/s at
# 4096^3 and 8192x8192x4096 (4 subgroups of 4x4, K step 32: 200-207; double-buffered forms 61-133);
# straight from the copies, one subgroup of 4x4 fragments 71-74 (h200-subgroup-matrix-matmul.txt),
# of fewer fragments for small shapes, where the staged blocks of 128x128 leave SMs idle.
SUBGROUP_MATRIX_TILES: tuple[SubgroupMatrixTile, ...] = (
    SubgroupMatrixTile(2, 4, 4, 4, bk=32),  # 128x256 blocks: 220-225 (h200-subgroup-matrix-staged-2.txt)
    SubgroupMatrixTile(4, 2, 2, 4, bk=64), SubgroupMatrixTile(2, 2, 4, 4, bk=32),
    SubgroupMatrixTile(1, 1, 4, 4), SubgroupMatrixTile(1, 1, 2, 4), SubgroupMatrixTile(1, 1, 4, 2),
    SubgroupMatrixTile(1, 1, 2, 2),
)


def with_subgroup_matrices(groups: dict[str, tuple[Tile, ...]]) -> dict[str, tuple[Tile, ...]]:
    """``groups`` with :data:`SUBGROUP_MATRIX_TILES` first in the medium group (which every
    class's plan takes: after the large group on large keys)."""
    return {name: (*SUBGROUP_MATRIX_TILES, *tiles) if name == MEDIUM else tiles for name, tiles in groups.items()}


# The tiles compiled with WebGPU's runtime checks (``Kernel.runtime_checks``) even where the device
# can leave them out: every other candidate ran faster without them on an H200 (median of each
# candidate over the shapes: +1% to +30%, the few-rows tiles most; 4096^3 43.7 -> 45.8 TFLOP/s),
# these 2-9% slower where they lead (2026-12-01, ``bench/kernel_probe.py --full`` with and without,
# ``bench/results/h200-shapes.txt``). ``bench/runtime_checks.py --full``, both forms side by side
# in one run, confirmed all six (unchecked / checked 0.94-0.99, median where each leads) and found
# the set's choice losing over 2% only at 1024x4096x256, two unchecked tiles that gain 5-6% over
# their 8 other shapes (``bench/results/h200-runtime-checks.txt``). Browsers always check.
CHECKED: frozenset[Tile] = frozenset({
    *_v4(T(128, 128, 16, 8, 8, double=True)),  # 8192x256x1024 -9%, 4096^3 -5%
    *_v4(T(128, 128, 16, 8, 8, double=True, swizzle=8)),  # 8192x512x8192 -8%
    *_v4(T(256, 128, 8, 16, 8, pad=4, double=True)),  # 2048^3 -2%
    *_v4(T(128, 128, 16, 8, 8, double=True, kgrid=128, partials=True)),  # 256x256x16384 -4% (-1% vec4 stores)
    *_flat(T(64, 64, 8, 8, 8, double=True)),  # 2047x2049x2051 -2%
    *_v4(R(1, 16, unroll=8, split=2048, float_atomics=True)),  # 1x4096x4096 -1%, elsewhere -10%
})
