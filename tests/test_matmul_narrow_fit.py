"""Split-K tiles with a narrow side come first in their group where that side fits the key, and
sliced tiles where the key has few outputs.

The adaptive policy drops a group whose first two screened candidates take over twice the
leader's time (``tests/test_core_sampling.py`` tests that rule). On a key of 9-16 rows the deep
group's first candidates were 64- and 128-row blocks, which leave most of their rows idle there,
so the group's best on such keys (the 16-row block) was never measured. These tests hold the
order that keeps a fitting tile among a group's first probes; no device is needed.
"""

from __future__ import annotations

import pytest

from wgtune import Args
from wgtune.kernels import matmul
from wgtune.kernels.matmul.keys import NARROW_BLOCK, narrow_fit, sliced_fit
from wgtune.tune.plan import Plan

MATMUL = matmul.matmul_set()


@pytest.mark.parametrize(
    ("side", "block", "boost"),
    [
        (16, 16, 4), (16, 20, 4),  # the block holds the side with under half of it idle
        (16, 32, 2), (16, 36, 2),  # it holds it, with more idle
        (32, 32, 4), (32, 36, 4), (32, 20, 0),  # a block shorter than the side: no boost
        (64, 36, 0), (8, 16, 2), (16, NARROW_BLOCK + 24, 0),  # wider than narrow: never
    ],
)
def test_narrow_fit_ranks_blocks_by_how_little_of_them_the_side_leaves_idle(side, block, boost):
    assert narrow_fit(side, block) == boost


def _group_order(size: tuple[int, int, int], group: str) -> list[str]:
    """The group's planned candidates, in the order the adaptive policy screens them."""
    plan = Plan(MATMUL.candidates, MATMUL.key(Args((), size)))
    batches = [plan.next(), *plan.remaining()]
    return [MATMUL.candidates[i].name for batch in batches for i in batch
            if MATMUL.candidates[i].group.name == group]


def test_a_key_of_sixteen_rows_screens_the_deep_groups_16_and_20_row_tiles_first():
    order = _group_order((16, 10000, 2000), "deep")
    assert {name.split("_")[0] for name in order[:2]} == {"tile16x128", "tile20x128"}
    # The wide blocks still come, after every narrow one.
    first_wide = min(i for i, name in enumerate(order) if name.startswith(("tile64x", "tile128x", "tile96x")))
    assert all(not name.startswith(("tile16x", "tile20x", "tile32x", "tile36x")) for name in order[first_wide:])


def test_a_key_of_a_few_columns_screens_the_16_column_block_first():
    order = _group_order((4206, 14, 7801), "deep")
    assert order[0].startswith("tile128x16_")
    assert all(name.split("_")[0].split("x")[1] in {"16", "32", "36", "40"} for name in order[:6])


def test_keys_without_a_narrow_side_keep_the_sets_order():
    """On a key of hundreds a side no boost applies: the deep group comes vec4 first, then flat,
    each in the order of the set's tuple, as before."""
    key = MATMUL.key(Args((), (500, 600, 4000)))
    deep = [kernel for kernel in MATMUL.candidates if kernel.group.name == "deep"]
    priorities = {kernel.name: kernel.priority(key) if callable(kernel.priority) else kernel.priority
                  for kernel in deep}
    assert max(priorities.values()) <= 1
    order = _group_order((500, 600, 4000), "deep")
    by_set = [kernel.name for kernel in deep if priorities[kernel.name] == 1]
    assert order[:len(by_set)] == by_set


def test_a_key_of_few_outputs_screens_the_medium_groups_four_slice_tiles_first():
    """875x237x835 (about 60 blocks of 64x64): the medium group was dropped after its 64x128 and
    128x64 tiles, and its 64x32 tile of four slices, 26% ahead of the pick, never ran (H100)."""
    order = _group_order((875, 237, 835), "medium")
    assert [name.split("_")[0] for name in order[:2]] == ["tile64x32", "tile64x64"]
    assert all("_s4" in name for name in order[:2])
    sliced = [i for i, name in enumerate(order) if "_s2" in name]
    unsliced = [i for i, name in enumerate(order) if "_s2" not in name and "_s4" not in name]
    assert max(sliced) < min(unsliced)  # two slices next, then the rest as the set orders them


def test_keys_of_many_outputs_keep_the_sliced_tiles_where_the_set_puts_them():
    key = MATMUL.key(Args((), (2048, 1024, 1024)))  # 2^21 outputs as keyed
    assert all(sliced_fit(key, slices) == 0 for slices in (2, 4))
    medium = [kernel for kernel in MATMUL.candidates if kernel.group.name == "medium"]
    priorities = [kernel.priority(key) if callable(kernel.priority) else kernel.priority for kernel in medium]
    assert max(priorities) <= 1


@pytest.mark.parametrize(("size", "slices", "boost"), [
    ((875, 237, 835), 4, 2), ((875, 237, 835), 2, 1), ((1024, 1024, 64), 4, 2), ((1025, 1024, 64), 4, 0),
])
def test_sliced_fit_boosts_by_half_the_slices_up_to_the_output_bound(size, slices, boost):
    key = MATMUL.key(Args((), size))
    assert sliced_fit(key, slices) == boost
