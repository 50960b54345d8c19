"""A tune spreads each sample over sets of the benchmark's buffers (``Device.placements``).

Where a kernel's speed depends on where its buffers lie in the GPU's memory, a tune on one set
of copies ranks by that set's luck (issue 29: on an H100 a matmul's tiles ran 25% faster on two
of six sets of copies, and tunes picked a tile or a flat kernel by the set they drew). The fake
device scripts a candidate's time by the labels of the buffers it ran on: a call's buffer ``b0``,
the tune's copy of it ``b0'``, a second set ``b0''``.
"""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, make_set, make_tuner, quiet

import wgtune
from wgtune.tune import tuning

pytestmark = pytest.mark.core

FIRST, SECOND = ("b0'",), ("b0''",)


def lucky_tile(labels: tuple[str, ...]) -> float:
    """Fast on the tune's first copy only: 0.8 ms there, 1.6 ms elsewhere (1.2 ms on average)."""
    return 0.8e-3 if labels == FIRST else 1.6e-3


def tuned(placements: int, config: wgtune.Config, tile=lucky_tile, **set_fields) -> tuple[str, FakeDevice]:
    device = FakeDevice(placements=placements)
    device.script("tile", on_buffers=tile)
    device.script("flat", duration=1.0e-3)
    tuner = make_tuner(device, config)
    picked = tuner.execute(make_set("flat", "tile", **set_fields), call(device, [1.0] * 4))
    return picked.name, device


@pytest.mark.parametrize("policy", ["adaptive", "fixed"])
def test_a_kernel_fast_on_one_set_of_copies_only_does_not_win_over_one_fast_on_both(policy: str) -> None:
    # Samples of 3 ms: a few dispatches each, split between the sets.
    alone, _ = tuned(1, quiet(policy=policy, min_sample=3e-3))
    spread, device = tuned(2, quiet(policy=policy, min_sample=3e-3))
    assert alone == "tile"  # on one set of copies it looks 20% faster
    assert spread == "flat"  # over both it is 20% slower
    assert {labels for _, labels, _ in device.profiled} == {FIRST, SECOND}


def test_a_sample_splits_its_repeats_between_the_sets_a_timed_pass_each() -> None:
    # Samples of 5 ms at 1 ms a dispatch: 6 repeats after calibration, 3 on each set.
    _, device = tuned(2, quiet(min_sample=5e-3), tile=lambda labels: 1e-3)
    for name in ("flat", "tile"):
        second = [index for index, (who, labels, _) in enumerate(device.profiled) if who == name and labels == SECOND]
        assert second, f"{name} was never timed on the second set"
        for index in second:
            before = device.profiled[index - 1]
            assert before[0] == name and before[1] == FIRST
            assert before[2] == device.profiled[index][2] >= 3


def test_a_candidate_of_one_dispatch_a_sample_takes_its_samples_on_each_set_in_turn() -> None:
    _, device = tuned(2, quiet(), tile=lambda labels: 1e-3)  # min_sample 0: one dispatch a sample
    tile = [labels for who, labels, repeats in device.profiled if who == "tile" and repeats == 1]
    on_second = sum(labels == SECOND for labels in tile)
    assert on_second >= 2 and len(tile) - on_second >= 2
    assert all(repeats == 1 for who, _, repeats in device.profiled if who == "tile")


def test_no_second_set_where_the_device_has_one_placement_or_in_a_dry_run() -> None:
    _, device = tuned(1, quiet())
    assert {labels for _, labels, _ in device.profiled} == {FIRST}
    assert device.clones == 1
    _, device = tuned(2, quiet(dry_run=True))
    assert device.clones == 1  # the benchmark's copy only


def test_no_second_set_where_the_call_is_over_the_bytes_it_may_copy_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tuning, "SPREAD_BYTES", 15)  # the call has 16 bytes
    alone, device = tuned(2, quiet(min_sample=3e-3))
    assert alone == "tile"
    assert {labels for _, labels, _ in device.profiled} == {FIRST}


def test_a_set_with_input_gen_makes_each_set_of_inputs_with_it() -> None:
    made: list[str] = []

    def inputs(device: FakeDevice, key: wgtune.Key, args: wgtune.Args) -> wgtune.Args:
        label = "b0'" if not made else "b0''"
        made.append(label)
        return args.with_buffers([device.buffer([2.0] * 4, label)])

    picked, device = tuned(2, quiet(min_sample=3e-3), input_gen=inputs)
    assert made == ["b0'", "b0''"]
    assert device.clones == 0  # the inputs are the set's, not copies of the call's
    assert picked == "flat"
