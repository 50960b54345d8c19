"""The matmul family on the real adapter (lavapipe here): every candidate of both sets, odd sizes, tunes.

Each candidate is compiled and dispatched directly, without the tuner, so that a wrong candidate
fails here by name rather than being quietly outvoted in a tune. Outputs are compared with numpy.
Output buffers start as NaN (so an element never written shows) and carry a guard region past
the end (so a store out of bounds shows); input buffers are followed by NaNs (so a load past the
end of a matrix that reaches an output shows). Candidates with vec4 loads run on sizes whose N
(vec4 B and C) or K (vec4 A) is rounded up to a multiple of 4: their plan never gives them other
sizes.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pytest
from kernel_checks import tune_checked
from matmul_checks import check_products

import wgtune
from wgtune import Args, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.device import check_grid, check_limits
from wgtune.kernels import demo, matmul
from wgtune.kernels.common import wrapped_grid
from wgtune.kernels.matmul import chunks as matmul_chunks
from wgtune.kernels.matmul import partials as matmul_partials
from wgtune.kernels.matmul import wgsl as matmul_wgsl
from wgtune.kernels.matmul.flat import FlatTile
from wgtune.kernels.matmul.skinny import SkinnyTile
from wgtune.kernels.matmul.tile import HARD_MAX_STORAGE, MatmulTile
from wgtune.kernels.matmul.vector import vector_wgsl
from wgtune.kernels.matmul.zeroing import ZERO_WORKGROUP
from wgtune.sets.bindings import binding_plan, declared_layout
from wgtune.sets.shaders import shader_of, workgroup_shape
from wgtune.tune.plan import Plan

GUARD = 64  # elements after each output, which no candidate may write
SENTINEL_F32 = np.float32(-12345.0)
SENTINEL_F16 = np.uint16(0xBEEF)  # compared as raw words
NAN_F16 = np.uint16(0x7E00)

MATMUL = matmul.matmul_set()
MATMUL_F16 = matmul.matmul_f16_set()
# Odd sizes (none a multiple of a tile), a square one, one with more than 8 block rows (the
# swizzled order's second group) and several block columns, a GEMV each way (one row, one
# column), and small outputs over a long K: 1100 is five K chunks of the kgrid tiles (a partial
# last one), 16500 their most chunks (MAX_K_CHUNKS) and long loops for the skinny kernels.
SIZES = [(1, 1, 1), (17, 33, 9), (130, 70, 65), (64, 64, 64), (1030, 135, 7), (1, 37, 300), (40, 1, 513),
         (9, 20, 1100), (3, 5, 16500)]
TILE_OF = {tile.name: tile for tile in matmul.MATMUL_TILES + matmul.MATMUL_F16_TILES}
F16_SIZES = [(1, 1, 1), (17, 33, 9), (130, 70, 65), (64, 64, 64), (1, 37, 300)]
# The tiles on subgroup matrices need a feature no adapter here has: tests/test_kernels_matmul_subgroup_matrix.py.
SUBGROUP_MATRIX_NAMES = {tile.name for tile in matmul.tiles.SUBGROUP_MATRIX_TILES}


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


@pytest.fixture(scope="module")
def pipelines(device):
    """Compiled pipelines by kernel name and WGSL (compiling dominates the tests' time)."""
    cache: dict[tuple[str, str], object] = {}

    def get(kernel: wgtune.Kernel):
        slot = (kernel.name, kernel.wgsl)
        if slot not in cache:
            cache[slot] = run_inline(device.compile(kernel))
        return cache[slot]

    return get


def _needs(kernel: wgtune.Kernel) -> tuple[bool, bool]:
    """Whether ``kernel`` reads A as vec4 (needs K a multiple of 4), and B and C (N); a tile on
    copies reads the ones it copies whatever their sizes (tests/test_kernels_matmul_padded.py)."""
    tile = TILE_OF.get(kernel.name)
    if isinstance(tile, SkinnyTile):
        return tile.a_vec4, tile.vec4
    if isinstance(tile, FlatTile):  # vec4 columns of B and C (tests/test_kernels_matmul_flat.py)
        return False, tile.vec4
    vec4 = isinstance(tile, MatmulTile) and tile.vec4
    return vec4 and "a" not in tile.copy, vec4 and "b" not in tile.copy


def _is_vec4(kernel: wgtune.Kernel) -> bool:
    return any(_needs(kernel))


def _sizes_for(kernel: wgtune.Kernel, sizes):
    """The sizes as the plan would give them to ``kernel``: K or N rounded up to 4 for vec4 loads."""
    k4, n4 = _needs(kernel)
    return [(m, -(-n // 4) * 4 if n4 else n, -(-k // 4) * 4 if k4 else k) for m, n, k in sizes]


def _runnable(device, kernel: wgtune.Kernel) -> None:
    problem = check_limits(kernel, device.limits, device.features)
    if problem and "feature" in problem:
        pytest.skip(f"{kernel.name}: {problem}")
    assert problem is None, f"{kernel.name}: {problem}"


def _dispatch(device, pipelines, kernel, args: Args) -> None:
    grid = tuple(kernel.grid(args))
    assert check_grid(grid, device.limits) is None
    device.dispatch(pipelines(kernel), args, grid)


# -- every candidate, f32 ----------------------------------------------------------------------


def _f32_args(device, a: np.ndarray, b: np.ndarray, m: int, n: int, k: int) -> Args:
    def padded(values: np.ndarray) -> bytes:
        return np.concatenate([values.ravel(), np.full(GUARD, np.nan, np.float32)]).tobytes()

    output = np.concatenate([np.full(m * n, np.nan, np.float32), np.full(GUARD, SENTINEL_F32, np.float32)])
    buffers = (device.create_buffer(padded(a)), device.create_buffer(padded(b)), device.create_buffer(output.tobytes()))
    return Args(buffers, (m, n, k))


@pytest.mark.parametrize("name", list(MATMUL.index_of))
def test_f32_candidate_matches_numpy(device, pipelines, name):
    _check_f32(device, pipelines, MATMUL.candidates[MATMUL.index_of[name]])


# Forms the set does not hold today, whose code paths the generators keep: K cut in four slices,
# staggered adds of a flat tile, and a few columns splitting K over workgroups.
OTHER_TILES = [
    MatmulTile(32, 32, 16, 4, 4, vec4=True, slices=4, kgrid=1024),
    MatmulTile(64, 36, 16, 4, 4, slices=2, kgrid=1024, stagger=4),
    SkinnyTile("cols", 2, 4, 1, threads=128, a_vec4=True, split=512),
    # The device's float atomics (natively: lavapipe and NVIDIA's Vulkan have them), up to 256 chunks.
    MatmulTile(32, 64, 16, 4, 4, vec4=True, slices=2, kgrid=1024, float_atomics=True),
    MatmulTile(64, 64, 16, 8, 8, kgrid=4096, float_atomics=True),
    SkinnyTile("rows", 4, 16, vec4=True, split=4096, float_atomics=True),
    # Loads two K steps ahead, in chunks of K that end mid-way through the unrolled pair.
    MatmulTile(64, 64, 16, 8, 8, vec4=True, double=True, kgrid=256, partials=True, ahead=2),
    MatmulTile(32, 64, 8, 4, 8, double=True, kgrid=1024, float_atomics=True, ahead=2),
    # A's rows staged in workgroup memory a chunk of K at a time (16500: 65 chunks, a partial last one).
    SkinnyTile("rows", 8, 16, stage_a=True),
    SkinnyTile("rows", 4, 16, threads=128, vec4=True, stage_a=True),
    SkinnyTile("rows", 8, 8, vec4=True, stage_a=True, split=1024, float_atomics=True),
    SkinnyTile("rows", 8, 16, stage_a=True, split=512),
    # B's columns staged (16500: 65 chunks of 256 steps, a partial last one).
    SkinnyTile("cols", 4, 4, 16, stage_b=True),
    SkinnyTile("cols", 4, 2, 8, threads=128, stage_b=True, split=1024, float_atomics=True),
    SkinnyTile("cols", 2, 4, 4, threads=128, unroll=8, stage_b=True, split=512),
    # A K step's multiply-adds as a loop of p.steps turns: flat and vec4 loads, one and two buffers,
    # loads two steps ahead, slices and K chunks.
    MatmulTile(64, 64, 8, 8, 8, double=True, rolled=1),
    MatmulTile(64, 64, 12, 8, 4, pad=4, double=True, ahead=2, rolled=3),
    MatmulTile(32, 64, 16, 4, 8, vec4=True, rolled=4),
    MatmulTile(32, 32, 8, 4, 4, slices=2, rolled=2, kgrid=1024, float_atomics=True),
    # Columns strided by the workgroup's width (9 and 12 invocations wide too), in every way a flat tile
    # writes C: stores, float atomics, compare-exchange in staggered runs, partials, a split-K tail.
    MatmulTile(64, 64, 8, 8, 4, pad=4, double=True, ahead=2, strided=True),
    MatmulTile(96, 48, 12, 12, 4, pad=4, double=True, strided=True),
    MatmulTile(64, 64, 8, 8, 8, double=True, slices=2, ahead=2, strided=True),
    MatmulTile(64, 64, 8, 8, 4, pad=4, double=True, ahead=2, kgrid=1024, float_atomics=True, strided=True),
    MatmulTile(64, 36, 16, 4, 4, slices=2, kgrid=1024, stagger=4, strided=True),
    MatmulTile(64, 64, 16, 8, 8, double=True, kgrid=256, partials=True, strided=True),
    MatmulTile(16, 16, 8, 4, 4, double=True, ahead=2, tail=4, float_atomics=True, strided=True),
    # K chunks shorter than MIN_K_CHUNK, down to chunks shorter than a K step (the last ones empty).
    MatmulTile(64, 64, 8, 8, 4, pad=4, double=True, ahead=2, kgrid=1024, float_atomics=True, strided=True, chunk=64),
    MatmulTile(32, 32, 8, 4, 4, double=True, kgrid=1024, partials=True, strided=True, chunk=4),
]


@pytest.mark.parametrize("tile", OTHER_TILES, ids=lambda tile: tile.name)
def test_f32_tiles_outside_the_set_match_numpy(device, pipelines, tile):
    TILE_OF[tile.name] = tile  # what _needs reads
    build = matmul.skinny_matmul_kernel if isinstance(tile, SkinnyTile) else matmul.tiled_matmul_kernel
    _check_f32(device, pipelines, build(tile))


def _check_f32(device, pipelines, kernel: wgtune.Kernel, sizes=SIZES) -> None:
    """``kernel`` on every size of ``sizes`` it may be given: right, and nothing written past C."""
    name = kernel.name
    _runnable(device, kernel)
    for m, n, k in _sizes_for(kernel, sizes):
        rng = np.random.default_rng(m * 10007 + n * 101 + k)
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        args = _f32_args(device, a, b, m, n, k)
        _dispatch(device, pipelines, kernel, args)
        words = np.frombuffer(device.read_buffer_sync(args.buffers[2]), np.float32)
        assert np.all(words[m * n :] == SENTINEL_F32), f"{name} wrote past the end of C at {m}x{n}x{k}"
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(
            words[: m * n].reshape(m, n), want, rtol=1e-4, atol=1e-4 * math.sqrt(k), err_msg=f"{name} {m}x{n}x{k}"
        )


# -- every candidate, f16 ----------------------------------------------------------------------


def _f16_buffer(device, words: np.ndarray):
    data = words.astype(np.uint16).tobytes()
    return device.create_buffer(data + bytes(-len(data) % 4))


@pytest.mark.parametrize("name", [name for name in MATMUL_F16.index_of if name not in SUBGROUP_MATRIX_NAMES])
def test_f16_candidate_matches_numpy(device, pipelines, name):
    kernel = MATMUL_F16.candidates[MATMUL_F16.index_of[name]]
    _runnable(device, kernel)
    for m, n, k in _sizes_for(kernel, F16_SIZES):
        rng = np.random.default_rng(m * 7 + n * 3 + k)
        a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
        nan_guard = np.full(GUARD, NAN_F16, np.uint16)
        output = np.concatenate([np.full(m * n, NAN_F16, np.uint16), np.full(GUARD, SENTINEL_F16, np.uint16)])
        buffers = (
            _f16_buffer(device, np.concatenate([a.ravel().view(np.uint16), nan_guard])),
            _f16_buffer(device, np.concatenate([b.ravel().view(np.uint16), nan_guard])),
            _f16_buffer(device, output),
        )
        args = Args(buffers, (m, n, k))
        _dispatch(device, pipelines, kernel, args)
        words = np.frombuffer(device.read_buffer_sync(args.buffers[2]), np.uint16)[: m * n + GUARD]
        assert np.all(words[m * n :] == SENTINEL_F16), f"{name} wrote past the end of C at {m}x{n}x{k}"
        got = words[: m * n].view(np.float16).astype(np.float64).reshape(m, n)
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=matmul.F16_TOLERANCE, atol=1e-3, err_msg=f"{name} {m}x{n}x{k}")


# -- the sets as data ----------------------------------------------------------------------------

_SCALARS = {"f32": 4, "f16": 2, "u32": 4, "i32": 4}


def _type_bytes(text: str) -> int:
    """Bytes of a WGSL type made of f32/f16 scalars, vecN and fixed-size arrays."""
    text = text.replace(" ", "")
    if text in _SCALARS:
        return _SCALARS[text]
    vector = re.fullmatch(r"vec([234])<(\w+)>", text)
    if vector:
        return int(vector.group(1)) * _SCALARS[vector.group(2)]
    array = re.fullmatch(r"array<(.+),(\d+)>", text)
    assert array, f"cannot size {text!r}"
    return int(array.group(2)) * _type_bytes(array.group(1))


@pytest.mark.parametrize("tunables", [MATMUL, MATMUL_F16], ids=lambda s: s.name)
def test_declared_storage_size_and_features_match_the_wgsl(tunables, device):
    for kernel in tunables.candidates:
        for stage in kernel.stages:
            arrays = re.findall(r"var<workgroup>\s+\w+\s*:\s*(.+?);", stage.wgsl)
            workgroup_size, storage = workgroup_shape(stage)  # what the limits are checked against
            assert storage == sum(_type_bytes(t) for t in arrays), stage.name
            size = re.search(r"@workgroup_size\((\d+),\s*(\d+),\s*(\d+)\)", stage.wgsl)
            assert tuple(int(n) for n in size.groups()) == workgroup_size, stage.name
            assert ("shader-f16" in stage.features) == ("enable f16;" in stage.wgsl), stage.name
            # Every candidate fits lavapipe (32 KiB, 1024 invocations) but the staged subgroup-matrix
            # tiles, for devices that have subgroup matrices (the H200's Dawn: 48 KiB).
            x, y, z = workgroup_size
            limit = 49152 if kernel.name in SUBGROUP_MATRIX_NAMES else 32768
            assert storage <= limit and x * y * z <= 1024, stage.name
        assert ("subgroups" in kernel.features) == any(re.search(r"quadBroadcast|subgroup_id", st.wgsl)
                                                       for st in kernel.stages), kernel.name
        if kernel.name not in SUBGROUP_MATRIX_NAMES:
            assert check_limits(kernel, device.limits) is None, kernel.name


@pytest.mark.parametrize("size", [(200_000, 200_000, 7), (200_000, 16, 7), (16, 200_000, 7), (1, 1, 2**24)])
def test_grids_fit_the_per_dimension_limit_for_every_size_the_plan_gives(size):
    tunables = MATMUL
    skipped = set(Plan(tunables.candidates, tunables.key(Args((), size))).skipped)
    for index, kernel in enumerate(tunables.candidates):
        if index not in skipped:
            for stage in kernel.stages:
                assert check_grid(tuple(stage.grid(Args((), size))), wgtune.DeviceLimits()) is None, (stage.name, size)


@pytest.mark.parametrize("float_atomics", [False, True])
def test_kgrid_tiles_split_k_into_bounded_chunks_after_zeroing_c(float_atomics):
    kernel = next(k for k in MATMUL.candidates if k.name.startswith("tile") and "_kg" in k.name
                  and not k.name.endswith("_2p") and k.name.endswith("_fa") == float_atomics)
    zero, add = kernel.stages
    adds = "atomicAdd(&c[index], value)" if float_atomics else "atomicCompareExchangeWeak"
    assert "c[index] = 0.0" in zero.wgsl and adds in add.wgsl
    # Float atomics are a device feature (natively): a device without it skips the candidate.
    assert (matmul_wgsl.FLOAT_ATOMICS in kernel.features) == float_atomics
    assert add.grid(Args((), (9, 20, 1100)))[2] == 5  # ceil(1100 / MIN_K_CHUNK)
    most = matmul_chunks.MAX_FLOAT_K_CHUNKS if float_atomics else matmul_chunks.MAX_K_CHUNKS
    assert add.grid(Args((), (9, 20, 10**7)))[2] == min(most, TILE_OF[kernel.name].kgrid)  # one block of C
    assert add.grid(Args((), (4096, 4096, 10**7)))[2] == 1  # enough blocks of C already
    assert zero.grid(Args((), (9, 20, 1100))) == (1, 1, 1)


def test_a_kgrid_tiles_chunk_sets_its_shortest_k_chunk_and_changes_only_its_grid():
    tile = MatmulTile(64, 64, 8, 8, 4, pad=4, double=True, ahead=2, kgrid=1024, partials=True, strided=True)
    short = replace(tile, chunk=64)
    assert short.name == tile.name.replace("_kg1024_2p", "_kg1024_kc64_2p")
    # 814x123x1512: 26 blocks of 64x64, kgrid 1024 would take 39 chunks; K allows 6 of MIN_K_CHUNK, 24 of 64.
    assert tile.chunks(814, 123, 1512) == 6 and short.chunks(814, 123, 1512) == 24
    assert short.chunks(4096, 4096, 1512) == 1  # enough blocks of C already: the kgrid target's cap
    assert [stage.wgsl for stage in matmul.tiled_matmul_kernel(short).stages] == [
        stage.wgsl.replace(tile.name, short.name) for stage in matmul.tiled_matmul_kernel(tile).stages]
    with pytest.raises(ValueError, match="chunk must be >= 0, and needs kgrid"):
        MatmulTile(64, 64, 8, 8, 4, chunk=64)


def test_wave_tiles_take_the_fewest_k_chunks_that_fill_whole_waves():
    tile = next(TILE_OF[name] for name in MATMUL.index_of if "_w132" in name)
    assert tile.kgrid and tile.wave == 132
    # 105 blocks of 128x128 (341x4374): 80% of 132 SMs busy unsplit and in 2 to 4 chunks, 99% in 5
    # (525 workgroups: 4 waves of 132, 3 idle); 88 blocks (5615x256): 3 chunks are 2 full waves.
    assert tile.chunks(341, 4374, 3085) == 5
    assert tile.chunks(5615, 256, 4068) == 3
    # Blocks that fill their waves already: unsplit (259 of 264: one chunk), as the kgrid target's
    # cap would have it anyway for 600 blocks.
    assert tile.chunks(795, 4687, 1480) == 1 and tile.chunks(1862, 5070, 3023) == 1
    # No count fills WAVE_FILL within the cap (9 blocks, K of 7 chunks): the one that fills best.
    assert matmul_chunks.wave_chunks(9, 132, 7) == 7
    assert matmul_chunks.wave_chunks(9, 132, 0) == 1  # a cap under one: one chunk
    # Never past the chunks the kgrid target and K allow (here K's: ceil(700 / MIN_K_CHUNK)).
    assert tile.chunks(100, 100, 700) == 3
    with pytest.raises(ValueError, match="wave must be >= 0, and needs kgrid"):
        MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, wave=132)


@pytest.mark.parametrize(("vec4", "float_atomics"), [(False, True), (True, True), (False, False)])
def test_tail_tiles_take_whole_blocks_then_cut_the_last_waves_blocks_into_k_chunks(
        device, pipelines, vec4, float_atomics):
    tile = MatmulTile(16, 16, 8, 4, 4, vec4=vec4, double=True, ahead=2, tail=4, float_atomics=float_atomics)
    assert "_t4" in tile.name
    # 15 blocks of 16x16 (70x40): 12 fill three waves of 4 whole; the last 3 fill the fourth in 4 chunks each.
    assert tile.chunks(70, 40, 1000) == 4 and tile.grid(70, 40, 1000) == (6, 1, 4)  # 12 + 3 * 4 = 24 workgroups
    # No chunk under TAIL_MIN_K_CHUNK: K of 100 allows 2, which fill the tail's waves no better than 1 (6 of 8
    # slots); K of 600 allows 9, and 4 fill them.
    assert tile.chunks(70, 40, 100) == 1 and tile.grid(70, 40, 100) == (15, 1, 1)
    assert tile.chunks(70, 40, 600) == 4 and tile.grid(70, 40, 600) == (6, 1, 4)
    assert tile.chunks(64, 64, 1000) == 1 and tile.grid(64, 64, 1000) == (16, 1, 1)  # 16 blocks: whole waves
    # The first stage zeroes only the cut blocks' rows, from C's end: 70x40 in 16x16 blocks of 3 columns, the 3 cut
    # blocks (12-14) the last block row, rows 64-69; none where no block is cut (the whole blocks store their sums).
    kernel = matmul.tiled_matmul_kernel(tile)
    zero = kernel.stages[0]
    assert "c[count - 1u - index] = 0.0" in zero.wgsl
    assert tile.zeroed(70, 40, 1000) == tile.zeroed(70, 40, 600) == 6 * 40
    assert tile.zeroed(70, 40, 100) == tile.zeroed(64, 64, 1000) == 0
    assert zero.grid(Args((), (70, 40, 1000))) == wrapped_grid(-(-240 // ZERO_WORKGROUP))
    assert zero.grid(Args((), (64, 64, 1000)))[0] == 0
    # 20x100: 7 blocks across, 2 down, in waves of 4: 12 whole, blocks 12 and 13 (the second row's last two) cut;
    # the whole blocks 7-11 of that row are zeroed too, and store over it.
    assert tile.chunks(20, 100, 1000) == 2 and tile.zeroed(20, 100, 1000) == 4 * 100
    TILE_OF[tile.name] = tile
    _check_f32(device, pipelines, kernel,
               [(70, 40, 1000), (70, 40, 600), (70, 40, 100), (64, 64, 1000), (9, 20, 1100), (130, 70, 65),
                (1, 37, 300), (20, 100, 1000)])
    # 16 blocks in waves of 5: 15 whole, the last in 4 chunks at K 250 (no count up to K's 4 fills 92%: the
    # best); 19 workgroups on a grid of 5 x 4, so one past the run, which returns. At K 1000, 5 fill the wave.
    odd = replace(tile, tail=5)
    assert odd.grid(64, 64, 250) == (5, 1, 4) and odd.grid(64, 64, 1000) == (4, 1, 5)
    # 48x48: 9 blocks, 5 whole, 4 cut in 5 chunks each (20 workgroups fill 4 waves), the first cut one (5) in
    # the second block row: zeroed from row 16 down.
    assert odd.chunks(48, 48, 1300) == 5 and odd.zeroed(48, 48, 1300) == 32 * 48
    TILE_OF[odd.name] = odd
    # The wave is the tile stage's own param, not in its WGSL: a tile's tails share one WGSL.
    odd_kernel = matmul.tiled_matmul_kernel(odd)
    assert [stage.wgsl for stage in odd_kernel.stages] == [stage.wgsl for stage in kernel.stages]
    assert "p.wave" in kernel.stages[1].wgsl and kernel.stages[1].params(Args((), (48, 48, 1300))) == (48, 48, 1300, 4)
    _check_f32(device, pipelines, odd_kernel, [(64, 64, 250), (64, 64, 1000), (70, 40, 1000), (48, 48, 1300)])
    with pytest.raises(ValueError, match="tail must be >= 0, and needs the vector layout without kgrid"):
        MatmulTile(16, 16, 8, 4, 4, kgrid=256, tail=4)


def test_strided_columns_put_a_lanes_columns_a_workgroup_width_apart_and_need_flat_loads():
    plain = MatmulTile(64, 64, 8, 8, 4, pad=4, double=True, ahead=2)
    strided = replace(plain, strided=True)
    assert strided.name == plain.name + "_sc"
    wgsl = vector_wgsl(strided, "f32")
    # Invocation tx's lanes are columns tx, tx + 16, tx + 32, tx + 48 (16 invocations across): one lane's
    # stores across a warp are consecutive; the B tile is staged in that order.
    assert "let col_0_0 = col0 + tx + 0u;" in wgsl and "col_0_0 + 48u < p.n" in wgsl
    assert "tile_b[1u - cur][bk_0][bv_0][bl_0] = pb_0;" in wgsl
    assert "col_0_0 + 3u" not in wgsl and "+ 3u" in vector_wgsl(plain, "f32")
    for bad in ({"vec4": True}, {"tm": 2, "tn": 2, "bm": 32, "bn": 32, "pad": 0, "double": False, "ahead": 1}):
        with pytest.raises(ValueError, match="strided is for the vector layout's flat loads"):
            replace(strided, **bad)


def test_kgrid_tiles_in_two_passes_write_partials_to_scratch_and_sum_them_into_c():
    kernel = next(k for k in MATMUL.candidates if k.name.endswith("_2p"))
    chunks, total = kernel.stages
    assert not kernel.features and "atomic" not in chunks.wgsl + total.wgsl  # no device feature: browsers too
    # The chunks' stage declares C, unused (the sum writes it), and the sum A and B: one layout,
    # so that one bind group serves both stages (Kernel.layout).
    assert "c" in shader_of(chunks).unused and {"a", "b"} <= shader_of(total).unused
    assert chunks.layout == total.layout == "declared"
    assert declared_layout(chunks) == declared_layout(total) == (
        (0, "read-only-storage"), (1, "read-only-storage"), (2, "storage"), (3, "uniform"), (4, "storage"))
    # A vec4 tile writes its sums four at a time (a flat one one by one).
    assert "part[(part_base + index) >> 2u] = value" in chunks.wgsl and "store_c4(row_0 * p.n" in chunks.wgsl
    flat = next(k for k in MATMUL.candidates if k.name.endswith("_2p") and "_v4" not in k.name)
    assert "part[part_base + index] = value" in flat.stages[0].wgsl and "store_c4" not in flat.stages[0].wgsl
    # The scratch holds every chunk's sums, each chunk's starting on a vec4; both stages' params
    # (one set, so one uniform buffer) carry the number of chunks, and the call in order is still (A, B, C).
    tile = TILE_OF[kernel.name]
    for m, n, k in [(9, 20, 1100), (64, 64, 65536), (3, 5, 16500)]:
        call = Args((), (m, n, k))
        z = kernel.grid(call)[2]
        assert z == tile.chunks(m, n, k) and 1 <= z <= matmul_chunks.MAX_FLOAT_K_CHUNKS
        assert kernel.scratch["part"](call) == 4 * z * (-(-m * n // 4) * 4)
        assert kernel.params(call) == total.params(call) == (
            m, n, k, z, matmul_partials.reduce_lanes(z, -(-m * n // 4)))
    plan = binding_plan(kernel)
    assert plan[0].candidate.positions == {(0, 0): 0, (0, 1): 1, (0, 2): 2}
    with pytest.raises(ValueError, match="partials need kgrid"):
        MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, partials=True)
    with pytest.raises(ValueError, match="take no atomics"):
        MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, kgrid=256, partials=True, float_atomics=True)
    with pytest.raises(ValueError, match="partials are f32"):
        matmul.tiled_matmul_kernel(tile, "f16")


def test_the_reduce_stage_gives_a_vec4_of_outputs_as_many_lanes_as_its_chunks_and_outputs_need():
    """Many outputs: one lane a vec4 up to 8 chunks, then twice the lanes each time the chunks
    double, 32 at most. Few outputs: more lanes, up to one for every two chunks, until the stage
    has 65,536 invocations. Every lane count sums right (C starts as NaN, so an output left
    unwritten fails), on odd output counts whose last vec4 is partly past C (nothing is stored past it)."""
    lanes = matmul_partials.reduce_lanes
    many = matmul_partials.BUSY_INVOCATIONS
    chunks = (1, 2, 8, 9, 16, 17, 32, 33, 64, 65, 128, 256)
    assert [lanes(c, many) for c in chunks] == [1, 1, 1, 2, 2, 4, 4, 8, 8, 16, 16, 32]
    assert [lanes(c, 1024) for c in (1, 2, 5, 9, 100)] == [1, 2, 4, 8, 64]
    assert [lanes(5, q) for q in (many, many // 2, many // 4, 1)] == [1, 2, 4, 4]
    kernel = next(k for k in MATMUL.candidates if k.name == "tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_2p")
    tile = TILE_OF[kernel.name]
    # One block of C, so chunks = K / 256 (the shortest chunk): 1, 2, 4, 9, 17, 32 and 64 chunks.
    sizes = [(13, 7, 200), (16, 16, 512), (13, 7, 1024), (16, 16, 2304), (13, 7, 4352), (16, 16, 8192), (13, 7, 16384)]
    assert [lanes(tile.chunks(m, n, k), -(-m * n // 4)) for m, n, k in sizes] == [1, 2, 4, 8, 16, 32, 64]
    check_products(NativeDevice.open(), kernel, sizes, 1e-4)


def test_skinny_kernels_that_split_k_are_planned_on_long_k_only_and_add_into_zeroed_c():
    split = [i for i, kernel in enumerate(MATMUL.candidates) if kernel.name.startswith("rows") and "_kg" in kernel.name]
    assert split
    for index in split:
        zero, add = MATMUL.candidates[index].stages
        words = "atomic<f32>" if MATMUL.candidates[index].name.endswith("_fa") else "atomic<u32>"
        assert "c[index] = 0.0" in zero.wgsl and "add_to_c(" in add.wgsl and words in add.wgsl
    long_key = MATMUL.key(Args((), (16, 1024, 16384)))
    assert set(split) <= set(Plan(MATMUL.candidates, long_key).next())  # the rows group's first batch
    for size in ((8, 8192, 1024), (128, 128, 128), (1, 4096, 2048)):
        assert set(split) <= set(Plan(MATMUL.candidates, MATMUL.key(Args((), size))).skipped), size
    tile = TILE_OF["rows4_c64_wg256_u4_v4_kg1024"]
    assert tile.grid(16, 1024, 16384) == (16, 4, 16)  # 64 blocks of 4x64: 1024 / 64 chunks
    assert tile.grid(1, 64, 10**6)[2] == matmul_chunks.MAX_K_CHUNKS  # one block: 1024 chunks, capped
    assert replace(tile, float_atomics=True).grid(1, 64, 10**6)[2] == matmul_chunks.MAX_FLOAT_K_CHUNKS
    assert tile.grid(16, 1024, 300) == (16, 4, 2)  # K over MIN_K_CHUNK: two chunks


def test_loads_two_steps_ahead_alternate_two_register_sets_in_a_loop_unrolled_twice():
    tile = MatmulTile(bm=64, bn=64, bk=8, tm=8, tn=8, double=True, ahead=2)
    wgsl = matmul.tiled_matmul_wgsl(tile)
    assert tile.name == "tile64x64_k8_reg8x8_db_a2"
    assert "var ra_0" in wgsl and "var rb_0" in wgsl and "k0 += 2u * 8u" in wgsl
    assert "if (k0 + 8u >= k_end) { break; }" in wgsl
    # The first half loads step k + 2 into pa while staging rb (step k + 1); the second the reverse.
    first, second = wgsl.split("break;")
    assert "pa_0 = a[" in first.split("for (var k0")[1] and "= rb_0;" in first
    assert "ra_0 = a[" in second and "= pb_0;" in second


def test_staggered_adds_rotate_runs_of_one_order_by_chunk():
    tile = MatmulTile(bm=32, bn=64, bk=16, tm=4, tn=4, vec4=True, slices=2, kgrid=1024, stagger=8)
    wgsl = matmul.tiled_matmul_wgsl(tile)
    assert tile.name.endswith("_kg1024_st8") and "switch ((run + wid.z) % 8u)" in wgsl
    # Each of the 16 outputs of an invocation is added once, in one of the 8 runs of 2.
    assert wgsl.count("add_to_c(row_") == 16 and wgsl.count("case ") == 7 and "default:" in wgsl
    assert "tile36x128_k16_reg4x8_v4_db_kg256_st8" in MATMUL.index_of


def test_sets_are_big_distinct_and_start_naive():
    # Enough to choose from, few enough to compile in a tune (61 before the 8 flat kernels, which
    # only keys with a short K plan, and 3 split-K tiles, which only keys with a long K plan; 83
    # with 6 split kernels of a few rows and a 36-row kgrid tile, which keys of many rows or a short K skip;
    # 84 with a kgrid 64x64 tile for hundreds of outputs a side, 86 with two medium 64x64 and 96x64 tiles,
    # 89 with three kgrid forms of them, which keys of a short K skip; 91 with a single-buffered 64x64
    # tile for a short K and a ninth flat kernel; 92 with a 128x128 kgrid tile whose chunks fill waves;
    # 95 with three columns kernels for a GEMV, which keys of many columns skip; 98 with three kgrid tiles
    # 16 or 20 wide for a narrow side of 9-20, which keys of a short K skip; 101 with three 8-row kernels
    # for M of 9-16; 109 with five kgrid tiles for M of 20-64 and three two-pass twins of kgrid tiles,
    # which keys of a short K skip; 110 with a 16-row kernel whose rows of A are staged; 111 with the 64x64 K8
    # 8x4 flat tile in both column orders; 114 with two sliced medium tiles and a sliced kgrid tile,
    # for grids of fewer blocks than SMs; 115 with a kgrid tile's K chunks of 128, the same WGSL as its twin's;
    # 116 with the 128x128 wave tile in the large group, the same WGSL as the deep group's).
    assert 40 <= len(MATMUL) <= 116
    assert len(MATMUL_F16) >= 12
    for tunables, dtype in ((MATMUL, "f32"), (MATMUL_F16, "f16")):
        assert tunables.candidates[0].name == "naive_wg16x16"
        assert len({kernel.name for kernel in tunables.candidates}) == len(tunables)
        by_source: dict[str, set[str]] = {}
        for kernel in tunables.candidates:
            by_source.setdefault("".join(stage.wgsl for stage in kernel.stages), set()).add(kernel.name)
        # One WGSL, one candidate; but for kgrid tiles that differ only in their target of workgroups or
        # their shortest K chunk (the same code on a grid of more K chunks).
        for names in by_source.values():
            bare = {re.sub(r"_kg\d+(_kc\d+)?(_w\d+)?", "", name) for name in names}
            assert len(names) == 1 or (all("_kg" in name for name in names) and len(bare) == 1), names
        assert all((dtype == "f16") == ("shader-f16" in kernel.features) for kernel in tunables.candidates)
    names = list(MATMUL.index_of)
    for needle in ("_v4", "_pad", "_db", "_sw", "_kg", "_st8", "_s2", "reg8x16", "256x128", "128x256", "rows",
                   "cols", "_a4"):
        assert any(needle in name for name in names), needle
    assert any("_sg" in name for name in MATMUL_F16.index_of)
    assert not any("_kg" in name for name in MATMUL_F16.index_of)  # kgrid adds f32 words with atomics
    # Most candidates fit WebGPU's defaults; every group has some that do.
    defaults = wgtune.DeviceLimits()
    fitting = [kernel for kernel in MATMUL.candidates if check_limits(kernel, defaults) is None]
    assert len(fitting) > len(MATMUL) // 2
    assert {kernel.group.name for kernel in fitting} == set(matmul.GROUP_NAMES)


def test_key_buckets_sizes_and_records_what_vec4_loads_need():
    assert MATMUL.key(Args((), (192, 160, 96))).as_dict() == {
        "m": 256, "n": 256, "k": 128, "dtype": "f32", "vec_k": 4, "vec_n": 4}
    for size, vec in (((192, 161, 96), (4, 1)), ((192, 160, 97), (1, 4)), ((3, 1, 1), (1, 1))):
        fields = MATMUL.key(Args((), size)).as_dict()
        assert (fields["vec_k"], fields["vec_n"]) == vec, size
    assert MATMUL_F16.key(Args((), (5, 8, 8))).as_dict() == {
        "m": 8, "n": 8, "k": 8, "dtype": "f16", "vec_k": 4, "vec_n": 4}


def _admitted(kernel: wgtune.Kernel, size) -> bool:
    """Whether ``kernel``'s vec4 loads can serve ``size``, and its K is long enough for a skinny
    kernel that splits K over workgroups."""
    _, n, k = size
    k4, n4 = _needs(kernel)
    tile = TILE_OF.get(kernel.name)
    long_enough = not (isinstance(tile, SkinnyTile) and tile.split) or wgtune.anchor(k) >= matmul.SPLIT_MIN_K
    # A tile on copies serves only where what it copies is no multiple of 4 (and the rest is).
    copies = not isinstance(tile, MatmulTile) or not tile.copy or (
        ("a" in tile.copy) == bool(k % 4) and ("b" in tile.copy) == bool(n % 4))
    return (not k4 or k % 4 == 0) and (not n4 or n % 4 == 0) and long_enough and copies


@pytest.mark.parametrize(
    ("size", "kind", "group"),
    [
        ((128, 128, 128), "small", "rows"),
        ((192, 160, 96), "small", "rows"),
        ((67, 45, 33), "small", "rows"),
        ((1, 4096, 4096), "rows", "rows"),
        ((16, 1024, 16384), "rows", "rows"),
        ((4096, 1, 4096), "cols", "cols"),
        ((8192, 16, 1023), "cols", "cols"),
        ((64, 64, 65536), "deep", "deep"),
        ((33, 4096, 4095), "deep", "deep"),
        ((512, 512, 512), "medium", "medium"),
        ((1000, 1000, 999), "medium", "medium"),
        ((1023, 1025, 1027), "medium", "medium"),
        ((4096, 4096, 4096), "large", "large"),
        ((4096, 2048, 4094), "large", "medium"),  # K no multiple of 4: the medium tiles' flat forms first
    ],
)
@pytest.mark.parametrize("tunables", [MATMUL, MATMUL_F16], ids=lambda s: s.name)
def test_first_batch_is_the_keys_first_group_and_only_what_can_serve_is_planned(tunables, size, kind, group):
    key = tunables.key(Args((), size))
    assert matmul.size_class(key) == kind
    plan = Plan(tunables.candidates, key)
    first = [tunables.candidates[i] for i in plan.next()]
    if group not in {kernel.group.name for kernel in tunables.candidates}:  # the f16 set has no deep group
        return
    assert {kernel.group.name for kernel in first} == {group}
    # The rows group on a long K, aligned: 9 flat kernels beside 11 vec4 ones; the deep group with K odd: 24 flat
    # (two of them one WGSL: a kgrid tile with K chunks of 256 and of 128).
    assert 1 <= len(first) <= 24
    # Tiles of the vector layout: vec4 first where N and K allow them (the flat twins later),
    # skipped where not (the twins first); vec4 loads of the skinny kernels likewise.
    assert all(_admitted(kernel, size) for kernel in first)
    groups = matmul.groups_for(key)
    assert groups[0] == group
    assert ("rows" in groups) == (dict(key)["m"] <= matmul.SKINNY_MAX and kind not in ("medium", "large"))
    assert ("deep" in groups) == (dict(key)["k"] >= matmul.DEEP_MIN_K and kind != "large")
    for index, kernel in enumerate(tunables.candidates):
        planned = kernel.group.name in groups and _admitted(kernel, size)
        assert (index not in plan.skipped) == planned, kernel.name
    # The naive kernels (in the small group) are never in a first batch.
    assert "naive_wg16x16" not in {kernel.name for kernel in first}
    later = [i for batch in plan.remaining() for i in batch]
    assert len(first) + len(later) + len(plan.skipped) == len(tunables)


def test_tiles_reject_what_they_cannot_generate():
    with pytest.raises(ValueError, match="invocations"):
        MatmulTile(bm=128, bn=128, bk=8, tm=2, tn=2)
    with pytest.raises(ValueError, match="workgroup storage"):
        MatmulTile(bm=256, bn=256, bk=32, tm=8, tn=8)
    with pytest.raises(ValueError, match="multiple"):
        MatmulTile(bm=32, bn=32, bk=8, tm=3, tn=2)
    with pytest.raises(ValueError, match="multiples of 4"):
        MatmulTile(bm=32, bn=32, bk=8, tm=2, tn=2, vec4=True)
    with pytest.raises(ValueError, match="subgroup"):
        MatmulTile(bm=64, bn=64, bk=8, tm=4, tn=4, subgroup=True)
    with pytest.raises(ValueError, match="subgroup needs vec4"):
        MatmulTile(bm=64, bn=64, bk=16, tm=8, tn=8, subgroup=True)
    with pytest.raises(ValueError, match="slices"):
        MatmulTile(bm=32, bn=32, bk=8, tm=2, tn=2, slices=2)
    for rolled in ({"rolled": 3}, {"rolled": 2, "tail": 132}, {"rolled": 2, "vec4": True, "copy": "a"},
                   {"rolled": -1}):
        with pytest.raises(ValueError, match="rolled must be >= 0 and divide bk"):
            MatmulTile(bm=64, bn=64, bk=8, tm=8, tn=8, **rolled)
    with pytest.raises(ValueError, match="rolled"):
        MatmulTile(bm=32, bn=32, bk=8, tm=2, tn=2, rolled=2)
    with pytest.raises(ValueError, match="slices"):
        MatmulTile(bm=128, bn=32, bk=4, tm=4, tn=4, slices=2)  # 32 rows of invocations, 8 of K a step
    with pytest.raises(ValueError, match="kgrid"):
        MatmulTile(bm=32, bn=32, bk=8, tm=2, tn=2, kgrid=256)
    with pytest.raises(ValueError, match="stagger"):
        MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, stagger=4)  # no kgrid: nothing to stagger
    with pytest.raises(ValueError, match="stagger"):
        MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, kgrid=256, stagger=1)
    with pytest.raises(ValueError, match="ahead is 1 or 2"):
        MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, double=True, ahead=3)
    with pytest.raises(ValueError, match="2 needs double buffering"):
        MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, ahead=2)
    with pytest.raises(ValueError, match="split"):
        SkinnyTile("rows", 4, 8, split=-1)
    with pytest.raises(ValueError, match="f32"):
        matmul.skinny_matmul_kernel(SkinnyTile("rows", 4, 8, split=512), "f16")
    with pytest.raises(ValueError, match="f32"):
        matmul.tiled_matmul_wgsl(MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, kgrid=256), "f16")
    with pytest.raises(ValueError, match="layout"):
        SkinnyTile("diagonal", 4, 8)
    with pytest.raises(ValueError, match="4 columns"):
        SkinnyTile("rows", 4, 8, cols=8)
    with pytest.raises(ValueError, match="multiple of 4 columns"):
        SkinnyTile("cols", 4, 8, cols=2, vec4=True)
    with pytest.raises(ValueError, match="vec4 loads of A"):
        SkinnyTile("rows", 4, 8, a_vec4=True)
    with pytest.raises(ValueError, match="registers"):
        SkinnyTile("cols", 8, 8, cols=16)
    tile = MatmulTile(bm=128, bn=128, bk=16, tm=8, tn=8, vec4=True, pad=4, double=True)
    assert tile.workgroup_storage == 4 * 2 * 16 * (132 + 128) <= HARD_MAX_STORAGE
    assert check_limits(matmul.tiled_matmul_kernel(tile), wgtune.DeviceLimits()) is not None  # past the defaults
    assert tile.name == "tile128x128_k16_reg8x8_v4_pad_db"
    sliced = MatmulTile(bm=32, bn=32, bk=16, tm=4, tn=4, slices=4, kgrid=1024)
    assert sliced.workgroup_size == (8, 8, 4) and sliced.k_step == 64
    assert sliced.workgroup_storage == 4 * 64 * (32 + 32) and sliced.name == "tile32x32_k16_reg4x4_s4_kg1024"


def test_cpu_references_match_numpy():
    m, n, k = 5, 7, 3
    a = list(demo.random_floats(m * k, seed=1))
    b = list(demo.random_floats(k * n, seed=2))
    want = np.array(a, np.float64).reshape(m, k) @ np.array(b, np.float64).reshape(k, n)
    np.testing.assert_allclose(np.array(matmul.matmul_reference(a, b, m, n, k)).reshape(m, n), want)
    half = np.array(matmul.matmul_f16_reference(a, b, m, n, k)).reshape(m, n)
    want16 = np.array(a, np.float16).astype(np.float64).reshape(m, k) @ np.array(b, np.float16).reshape(k, n)
    np.testing.assert_allclose(half, want16, rtol=matmul.F16_TOLERANCE)
    assert np.all(half == half.astype(np.float16))  # rounded to f16
    assert matmul.pack_f16([1.0]) == np.array([1.0, 0.0], np.float16).tobytes()


# -- tuning on the adapter -----------------------------------------------------------------------


@pytest.mark.parametrize("size", [(67, 45, 33), (192, 160, 96)], ids=lambda s: "x".join(map(str, s)))
def test_tune_f32_gives_right_output_and_a_hit(device, size):
    args = demo.make_matmul_args(device, size)
    _, trials = tune_checked(device, MATMUL, args)
    assert len(trials) == len(Plan(MATMUL.candidates, MATMUL.key(args)).order())
    m, n, k = size
    a = np.frombuffer(device.read_buffer_sync(args.buffers[0]), np.float32).reshape(m, k)
    b = np.frombuffer(device.read_buffer_sync(args.buffers[1]), np.float32).reshape(k, n)
    c = np.frombuffer(device.read_buffer_sync(args.buffers[2]), np.float32).reshape(m, n)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_tune_f16_gives_right_output_and_a_hit(device):
    if "shader-f16" not in device.features:
        pytest.skip("the adapter has no shader-f16")
    m, n, k = 40, 36, 20
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    args = Args(
        (
            device.create_buffer(matmul.pack_f16(a.ravel().tolist())),
            device.create_buffer(matmul.pack_f16(b.ravel().tolist())),
            device.create_buffer(size=2 * m * n),
        ),
        (m, n, k),
    )
    _, trials = tune_checked(device, MATMUL_F16, args)
    assert len(trials) == len(Plan(MATMUL_F16.candidates, MATMUL_F16.key(args)).order())
    got = np.frombuffer(device.read_buffer_sync(args.buffers[2]), np.float16)[: m * n].reshape(m, n)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=matmul.F16_TOLERANCE, atol=1e-3)
