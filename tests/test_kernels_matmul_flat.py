"""The flat matmul kernels (``kernels/matmul/flat.py``: a short K, many outputs) on the real adapter
(lavapipe here), and where the set plans them.

Each candidate is compiled and dispatched directly, as ``tests/test_kernels_matmul.py`` does:
inputs followed by NaNs (a load past a matrix that reaches an output shows), C filled with NaN
(an output never written shows) and followed by a sentinel (a store past C shows), outputs
compared with numpy in float64. Sizes: K from 1 to 8 and a few up to FLAT_MAX_K (the unrolled loop
with and without a remainder), M and N odd and no multiples of 4, M = 1 and N = 1, several blocks
each way; the vec4 forms on N multiples of 4 only (the plan gives them no other). Tiles that
stage A (``stage_a``) also on K around the stage's chunk (1, 3, 63, 64, 65, 130).
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matmul_checks import check_products

import wgtune
from wgtune import Args, DeviceLimits, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.device import check_limits
from wgtune.kernels import matmul
from wgtune.kernels.matmul.flat import STAGE_K, FlatTile, flat_matmul_kernel, flat_wgsl
from wgtune.kernels.matmul.keys import FLAT_LATE_MAX_K, FLAT_MAX_K
from wgtune.tune.plan import Plan

MATMUL = matmul.matmul_set()
FLAT = [kernel for kernel in MATMUL.candidates if kernel.group is not None and kernel.group.name == "flat"]
FLAT_NAMES = {kernel.name for kernel in FLAT}
TILE_OF = {tile.name: tile for tile in matmul.MATMUL_TILES if isinstance(tile, FlatTile)}
# (M, N, K): N odd or 2 mod 4 (no vec4 rows), K 1..8, a few longer K up to the bounds, M = 1.
ANY_N = [(1, 1, 1), (1, 7, 2), (3, 5, 3), (7, 3, 4), (5, 1, 5), (33, 130, 6), (17, 131, 7), (70, 9, 8),
         (9, 257, 13), (130, 67, 33), (37, 301, FLAT_MAX_K), (301, 517, 11), (45, 203, 93), (66, 77, FLAT_LATE_MAX_K)]
# N multiples of 4, for the vec4 forms (and the others).
N_OF_4 = [(1, 4, 1), (3, 8, 2), (5, 12, 3), (1, 4, 7), (33, 132, 5), (9, 260, 8), (70, 516, 17),
          (131, 1028, FLAT_MAX_K), (67, 516, 101)]
# Forms the set does not hold, whose code the generator keeps: no unrolling, an unrolled step that
# leaves a remainder for each K, one invocation a workgroup, 64 sums, a column of vec4 per row.
OTHERS = [FlatTile(3, 3, 16, 16, unroll=1), FlatTile(2, 2, 32, 8, unroll=3), FlatTile(1, 1, 1, 1),
          FlatTile(8, 8, 32, 8), FlatTile(2, 3, 16, 4, vec4=True, unroll=5)]
# A staged in workgroup memory: K in one chunk and several, a quad or less left, no full quad; one
# invocation filling the stage alone, 48 rows (12 KiB), two and three quads a loop step, vec4 columns.
STAGED = [FlatTile(4, 2, 64, 4, stage_a=True), FlatTile(8, 4, 32, 4, stage_a=True), FlatTile(1, 1, 1, 1, stage_a=True),
          FlatTile(3, 3, 16, 16, unroll=1, stage_a=True), FlatTile(2, 2, 32, 8, unroll=8, stage_a=True),
          FlatTile(16, 2, 64, 1, unroll=12, stage_a=True), FlatTile(2, 3, 16, 4, vec4=True, unroll=5, stage_a=True),
          FlatTile(8, 1, 64, 2, vec4=True, stage_a=True)]
STAGED_ANY_N = [(37, 29, 1), (50, 70, 3), (33, 65, 64), (17, 130, 65), (70, 33, 130), (9, 11, 63), (1, 1, 2),
                (5, 7, 4), (300, 201, 44), (21, 3, 129)]
STAGED_N_OF_4 = [(37, 28, 1), (50, 72, 3), (33, 68, 64), (17, 132, 65), (70, 36, 130), (9, 4, 63), (1, 4, 5),
                 (300, 200, 44)]


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def _check(device, kernel: wgtune.Kernel, vec4: bool) -> None:
    check_products(device, kernel, N_OF_4 if vec4 else ANY_N + N_OF_4, tolerance=1e-5)


def test_the_set_holds_flat_kernels_of_both_forms_in_their_own_group():
    assert len(FLAT) == len(TILE_OF) >= 4
    assert set(TILE_OF) == FLAT_NAMES
    assert any(TILE_OF[name].vec4 for name in FLAT_NAMES) and any(not TILE_OF[name].vec4 for name in FLAT_NAMES)
    # Last in the set: the other candidates keep their indices.
    assert MATMUL.candidates[-len(FLAT):] == tuple(FLAT)
    assert any(TILE_OF[name].stage_a for name in FLAT_NAMES) and any(not TILE_OF[name].stage_a for name in FLAT_NAMES)
    for kernel in FLAT:
        tile = TILE_OF[kernel.name]
        assert kernel.workgroup_storage == tile.workgroup_storage
        assert ("var<workgroup>" in kernel.wgsl) == tile.stage_a == (tile.workgroup_storage > 0)
        assert kernel.workgroup_size == (tile.wx, tile.wy, 1) and tile.wx * tile.wy <= 256
        assert not kernel.then and not kernel.scratch and not kernel.runtime_checks
        assert ("array<vec4<f32>>" in kernel.wgsl) == tile.vec4


@pytest.mark.parametrize("kernel", FLAT, ids=lambda kernel: kernel.name)
def test_the_sets_flat_kernels_match_numpy(device, kernel):
    _check(device, kernel, TILE_OF[kernel.name].vec4)


@pytest.mark.parametrize("tile", OTHERS, ids=lambda tile: tile.name)
def test_flat_kernels_outside_the_set_match_numpy(device, tile):
    _check(device, flat_matmul_kernel(tile), tile.vec4)


@pytest.mark.parametrize("tile", STAGED, ids=lambda tile: tile.name)
def test_tiles_that_stage_a_match_numpy(device, tile):
    sizes = STAGED_N_OF_4 if tile.vec4 else STAGED_ANY_N + STAGED_N_OF_4 + ANY_N
    check_products(device, flat_matmul_kernel(tile), sizes, tolerance=1e-5)


@pytest.mark.parametrize("tile", STAGED, ids=lambda tile: tile.name)
def test_tiles_that_stage_a_declare_their_workgroup_storage(tile):
    kernel = flat_matmul_kernel(tile)
    assert kernel.name == replace(tile, stage_a=False).name + "_sa"
    declared = re.findall(r"var<workgroup>\s+(\w+)\s*:\s*array<vec4<f32>,\s*(\d+)>", kernel.wgsl)
    assert declared == [("sa", str(tile.block[0] * STAGE_K // 4))]
    assert kernel.workgroup_storage == tile.workgroup_storage == 16 * tile.block[0] * STAGE_K // 4 <= 16384
    assert check_limits(kernel, DeviceLimits()) is None
    assert kernel.wgsl.count("workgroupBarrier()") == 2
    unstaged = flat_matmul_kernel(replace(tile, stage_a=False))
    assert unstaged.workgroup_storage == 0 and "var<workgroup>" not in unstaged.wgsl


def test_f16_buffers(device):
    if "shader-f16" not in device.features:
        pytest.skip("the adapter has no shader-f16")
    for tile, k in ((FlatTile(4, 2, 64, 4), 9), (FlatTile(2, 1, 64, 4, vec4=True), 9),
                    (FlatTile(4, 2, 64, 4, stage_a=True), 67), (FlatTile(2, 1, 64, 4, vec4=True, stage_a=True), 43)):
        kernel = flat_matmul_kernel(tile, "f16")
        pipeline = run_inline(device.compile(kernel))
        m, n = 37, 132
        rng = np.random.default_rng(7)
        a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
        args = Args((device.create_buffer(matmul.pack_f16(a.ravel().tolist())),
                     device.create_buffer(matmul.pack_f16(b.ravel().tolist())),
                     device.create_buffer(np.full(m * n, np.nan, np.float16).tobytes())), (m, n, k))
        device.dispatch(pipeline, args, tuple(kernel.grid(args)))
        got = np.frombuffer(device.read_buffer_sync(args.buffers[2]), np.float16)[: m * n].reshape(m, n)
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=matmul.F16_TOLERANCE, atol=1e-2)


def test_tiles_reject_what_they_cannot_generate():
    with pytest.raises(ValueError, match="256"):
        FlatTile(2, 2, 128, 4)
    with pytest.raises(ValueError, match="registers"):
        FlatTile(8, 4, 64, 2, vec4=True)  # 128 sums
    with pytest.raises(ValueError, match=">= 1"):
        FlatTile(0, 2)
    with pytest.raises(ValueError, match="dtype"):
        flat_wgsl(FlatTile(2, 2), "f64")
    with pytest.raises(ValueError, match="workgroup storage"):
        FlatTile(8, 1, 8, 32, stage_a=True)  # 256 rows of A staged: 64 KiB
    with pytest.raises(ValueError, match="16384"):
        FlatTile(13, 1, 16, 5, stage_a=True)  # 65 rows: 16640 bytes
    assert FlatTile(16, 1, 16, 4, stage_a=True).workgroup_storage == 16384  # 64 rows: the limit itself
    assert FlatTile(8, 1, 8, 32).workgroup_storage == 0
    tile = FlatTile(4, 2, 64, 4, vec4=True)
    assert tile.block == (16, 512) and tile.grid(17, 1024, 5) == (2, 2, 1) and tile.name == "flat4x2_wg64x4_u4_v4"


# -- planning --------------------------------------------------------------------------------------

OTHER_CANDIDATES = tuple(kernel for kernel in MATMUL.candidates if kernel.name not in FLAT_NAMES)


def _batches(candidates, size) -> list[list[str]]:
    key = MATMUL.key(Args((), size))
    return [[candidates[i].name for i in batch] for batch in Plan(candidates, key).remaining()]


@pytest.mark.parametrize("size", [(4561, 4475, 11), (620, 7790, 37), (901, 7895, 6), (3957, 990, 22),
                                  (1754, 2317, 11), (3185, 1464, 17), (864, 734, 31), (1055, 623, 18),
                                  (301, 517, 11), (2048, 2048, 64), (3001, 401, 1)])
def test_a_short_k_with_many_outputs_plans_the_flat_group_first_then_what_it_planned_before(size):
    key = MATMUL.key(Args((), size))
    assert matmul.size_class(key) in ("medium", "large")
    assert matmul.groups_for(key)[0] == "flat"
    batches = _batches(MATMUL.candidates, size)
    # The first batch is the flat kernels the key can serve: the vec4 ones only where N allows.
    n = size[1]
    assert set(batches[0]) == {name for name in FLAT_NAMES if n % 4 == 0 or not TILE_OF[name].vec4}
    assert any(TILE_OF[name].vec4 for name in batches[0]) == (n % 4 == 0)
    # After it, the plan the key made without the flat kernels, batch by batch.
    assert batches[1:] == _batches(OTHER_CANDIDATES, size)


@pytest.mark.parametrize("size", [(4561, 4475, 65), (620, 7790, 100), (2127, 1953, 128), (5490, 854, 65)])
def test_a_k_just_past_the_bound_plans_the_flat_group_second(size):
    """K of 65 to 128 (as keyed): the flat kernels come after the class's first group, and the
    batches are otherwise those planned without them."""
    key = MATMUL.key(Args((), size))
    groups = matmul.groups_for(key)
    assert groups[1] == "flat" and groups[:1] + groups[2:] == matmul.groups_for(MATMUL.key(Args((), (*size[:2], 129))))
    plan = Plan(MATMUL.candidates, key)
    planned = {MATMUL.candidates[i].name for batch in plan.remaining() for i in batch}
    assert planned & FLAT_NAMES == {name for name in FLAT_NAMES if size[1] % 4 == 0 or not TILE_OF[name].vec4}
    assert [[name for name in batch if name not in FLAT_NAMES] for batch in _batches(MATMUL.candidates, size)
            if set(batch) - FLAT_NAMES] == _batches(OTHER_CANDIDATES, size)


@pytest.mark.parametrize("size", [(864, 734, 129), (1000, 1000, 1000),
                                  (4096, 4096, 4096), (64, 130, 7), (200, 150, 40), (8, 4096, 11),
                                  (4096, 8, 11), (1, 4096, 30), (33, 65, 17), (64, 64, 65536)])
def test_other_keys_plan_no_flat_kernel_and_the_same_batches_as_before(size):
    key = MATMUL.key(Args((), size))
    assert "flat" not in matmul.groups_for(key)
    plan = Plan(MATMUL.candidates, key)
    assert {MATMUL.candidates[i].name for i in plan.skipped} >= FLAT_NAMES
    assert _batches(MATMUL.candidates, size) == _batches(OTHER_CANDIDATES, size)


def test_the_bounds_are_on_the_keyed_k():
    # K as keyed is a power of two: 64 takes K 33..64, 65 keys as 128, 129 as 256
    assert (FLAT_MAX_K, FLAT_LATE_MAX_K) == (64, 128)
    assert matmul.groups_for(MATMUL.key(Args((), (1000, 1000, 64))))[0] == "flat"
    assert matmul.groups_for(MATMUL.key(Args((), (1000, 1000, 65))))[1] == "flat"
    assert matmul.groups_for(MATMUL.key(Args((), (1000, 1000, 128))))[1] == "flat"
    assert "flat" not in matmul.groups_for(MATMUL.key(Args((), (1000, 1000, 129))))


def test_a_custom_list_plans_the_vec4_form_only_where_n_allows_it():
    """``matmul_set(tiles)`` (``bench/kernel_probe.py --tiles``): one ungrouped batch, the vec4
    forms skipped where N is no multiple of 4."""
    tiles = (FlatTile(4, 2, 64, 4), FlatTile(4, 1, 64, 4, vec4=True))
    custom = matmul.matmul_set(tiles)
    for size, vec4 in (((301, 517, 11), False), ((301, 516, 11), True), ((64, 130, 4000), False)):
        assert _batches(custom.candidates, size) == [
            ["naive_wg16x16", tiles[0].name] + ([tiles[1].name] if vec4 else [])], size


def test_the_probe_takes_flat_tiles_and_prints_each_planned_candidate(device, capsys, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
    import kernel_probe

    monkeypatch.setattr(kernel_probe, "SLOW", float("inf"))  # a loaded CPU adapter's timings wander
    assert kernel_probe.trial_tiles(["F(4, 2, 64, 4)", "(F(2, 1, wx=32, vec4=True),)"]) == (
        FlatTile(4, 2, 64, 4), FlatTile(2, 1, 32, vec4=True))
    assert kernel_probe.main(["--only", "matmul", "--each", "--first-batch", "--samples", "1", "--min-sample", "0",
                              "--shape", "301x517x11"]) == 0
    lines = capsys.readouterr().out.splitlines()
    shape = next(line for line in lines if line.startswith("matmul  301x517x11"))
    assert "WRONG" not in shape and "best flat" in shape
    each = {line.split()[1]: line for line in lines if line.startswith("    * ")}
    assert set(each) == {name for name in FLAT_NAMES if not TILE_OF[name].vec4}
    # Name, rate (timed, not wrong or slow) and the workgroups of its one stage: 301x517 in its blocks.
    for name, line in each.items():
        rows, cols = TILE_OF[name].block
        _, _, rate, wg, workgroups = line.split()
        assert float(rate.replace(",", "")) >= 0 and wg == "wg", line  # GFLOP/s to one decimal: 0.0 on a slow CPU
        assert int(workgroups) == -(-517 // cols) * -(-301 // rows), line
