"""The matmul tiles on copies of A and B (``MatmulTile.copy``, ``kernels/matmul/padded.py``) on the real
adapter (lavapipe here), on the sizes they exist for: K or N no multiple of 4.

Each candidate is compiled and dispatched directly, as ``tests/test_kernels_matmul.py`` does
(which runs the set's copies too, on the sizes its vec4 loads of the call's own buffers allow):
inputs followed by NaNs, C filled with NaN and followed by a sentinel, outputs compared with
numpy. Here every K and N from 1 to 7 is given to the form that copies it, M = 1 included.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from matmul_checks import check_products, guarded_args

import wgtune
from wgtune import Args, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.kernels import matmul
from wgtune.kernels.matmul.padded import copied_bytes
from wgtune.kernels.matmul.tile import MatmulTile
from wgtune.sets.bindings import binding_plan
from wgtune.tune.plan import Plan

MATMUL = matmul.matmul_set()
COPIES = [kernel for kernel in MATMUL.candidates if kernel.name.rsplit("_", 1)[-1] in ("ca", "cb", "cab")]
# Forms the set does not hold, whose code the generator keeps: C through an aligned copy, a
# kgrid tile adding into C with float atomics, K in slices, a small register tile.
OTHERS = [
    MatmulTile(64, 128, 8, 8, 8, vec4=True, double=True, copy="bc"),
    MatmulTile(128, 64, 8, 8, 8, vec4=True, pad=4, double=True, copy="abc"),
    MatmulTile(36, 128, 16, 4, 8, vec4=True, double=True, kgrid=1024, float_atomics=True, copy="ab"),
    MatmulTile(64, 64, 8, 8, 8, vec4=True, double=True, slices=2, copy="a"),
    MatmulTile(64, 32, 16, 4, 4, vec4=True, slices=2, copy="b"),
]
# (M, N, K) for a form that copies A, B or both: what it copies takes each of 1..7 that is no
# multiple of 4 (and longer ones over several blocks and K steps), the rest multiples of 4.
ODD = (1, 2, 3, 5, 6, 7)


def _sizes(copy: str) -> list[tuple[int, int, int]]:
    odd_k = [1, 2, 3, 5, 6, 7, 258, 1101] if "a" in copy else [4, 8, 4, 12, 8, 4, 260, 1100]
    odd_n = [3, 1, 7, 2, 6, 5, 131, 9] if "b" in copy else [4, 8, 12, 4, 8, 4, 132, 8]
    rows = [1, 1, 5, 70, 1, 33, 130, 9]
    return list(zip(rows, odd_n, odd_k, strict=True))


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def _check(device, kernel: wgtune.Kernel, copy: str) -> None:
    check_products(device, kernel, _sizes(copy), tolerance=1e-4)


@pytest.mark.parametrize("kernel", COPIES, ids=lambda kernel: kernel.name)
def test_the_sets_copies_match_numpy_on_the_sizes_they_serve(device, kernel):
    _check(device, kernel, kernel.name.rsplit("_c", 1)[-1])


@pytest.mark.parametrize("tile", OTHERS, ids=lambda tile: tile.name)
def test_copies_outside_the_set_match_numpy(device, tile):
    _check(device, matmul.tiled_matmul_kernel(tile), tile.copy)


def test_the_copies_are_written_whole_on_every_call(device):
    """Scratch may hold another call's data: NaN written into every copy between two calls must
    not reach C (the zero columns past K and N included)."""
    tile = MatmulTile(64, 128, 8, 8, 8, vec4=True, double=True, copy="abc")
    kernel = matmul.tiled_matmul_kernel(tile)
    pipeline = run_inline(device.compile(kernel))
    m, n, k = 9, 7, 5
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    args = guarded_args(device, a, b, m, n, k)
    device.dispatch(pipeline, args, tuple(kernel.grid(args)))
    scratch = {key: buffer for key, buffer in args.cache.items() if isinstance(key, tuple) and key[0] == "scratch"}
    assert sorted(key[1] for key in scratch) == ["a_pad", "b_pad", "c_pad"]
    for (_, _, size), buffer in scratch.items():
        device.copy_buffer(device.create_buffer(np.full(size // 4, np.nan, np.float32).tobytes()), buffer)
    device.dispatch(pipeline, args, tuple(kernel.grid(args)))
    got = np.frombuffer(device.read_buffer_sync(args.buffers[2]), np.float32)[: m * n].reshape(m, n)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("size", "planned"),
    [
        ((3000, 5000, 700), ""),  # K and N multiples of 4: the vec4 tiles as they were, no copy
        ((1024, 1024, 1024), ""),
        ((64, 64, 64), ""),
        ((1926, 2352, 90), "a"),  # K no multiple of 4
        ((5567, 5700, 255), "a"),
        ((1706, 1765, 160), "b"),  # N no multiple of 4
        ((999, 1001, 997), "ab"),
        ((1, 7, 5), "ab"),
    ],
)
def test_a_key_plans_the_copies_of_what_it_cannot_read_as_vec4_and_an_aligned_key_none(size, planned):
    key = MATMUL.key(Args((), size))
    plan = Plan(MATMUL.candidates, key)
    skipped = set(plan.skipped)
    forms = {MATMUL.candidates[i].name.rsplit("_c", 1)[-1] for i in range(len(MATMUL))
             if MATMUL.candidates[i] in COPIES and i not in skipped}
    assert forms == ({planned} if planned else set()), size
    # The copies join batches of their groups and change nothing else in the plan.
    others = tuple(kernel for kernel in MATMUL.candidates if kernel not in COPIES)
    names = [[MATMUL.candidates[i].name for i in batch] for batch in plan.remaining()]
    without = [[others[i].name for i in batch] for batch in Plan(others, key).remaining()]
    assert [[name for name in batch if not name.endswith(("_ca", "_cb", "_cab"))] for batch in names] == without


def test_a_copy_is_two_stages_on_scratch_that_a_call_in_order_does_not_give():
    kernel = next(k for k in COPIES if k.name.endswith("_cab"))
    copy, tile = kernel.stages
    assert tile.name == f"{kernel.name}_tile" and "a_pad" in copy.wgsl and "b_pad" in tile.wgsl
    assert "var<storage, read_write> c: array<f32>" in tile.wgsl  # C a float at a time: N no multiple of 4
    call = Args((), (9, 7, 5))
    assert kernel.scratch["a_pad"](call) == copied_bytes("a", 9, 7, 5) == 4 * 9 * 8
    assert kernel.scratch["b_pad"](call) == copied_bytes("b", 9, 7, 5) == 4 * 5 * 8
    assert copy.grid(call) == (1, 1, 1)  # 9 * 2 + 5 * 2 vec4: one workgroup
    assert binding_plan(kernel)[0].candidate.positions == {(0, 0): 0, (0, 1): 1, (0, 2): 2}
    a_only = next(k for k in COPIES if k.name.endswith("_ca"))
    assert set(a_only.scratch) == {"a_pad"} and "var<storage, read_write> c: array<vec4<f32>>" in a_only.then[0].wgsl


def test_copies_are_refused_where_they_cannot_be_generated():
    for options in ({"copy": "a"}, {"vec4": True, "copy": "c"}, {"vec4": True, "copy": "ba"},
                    {"vec4": True, "kgrid": 256, "copy": "a"},
                    {"vec4": True, "kgrid": 256, "float_atomics": True, "copy": "abc"}):
        with pytest.raises(ValueError, match="copy is"):
            MatmulTile(64, 64, 16, 4, 4, **options)
    with pytest.raises(ValueError, match="copy is"):
        MatmulTile(64, 64, 16, 8, 8, vec4=True, subgroup=True, copy="a")
    tile = MatmulTile(64, 64, 16, 4, 4, vec4=True, copy="ab")
    assert tile.name == "tile64x64_k16_reg4x4_v4_cab" and replace(tile, copy="").name == "tile64x64_k16_reg4x4_v4"
    with pytest.raises(ValueError, match="f32"):
        matmul.tiled_matmul_kernel(tile, "f16")
