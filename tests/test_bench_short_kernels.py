"""bench/held_out.py and bench/short_kernels.py's pure parts: a seeded draw is the same every
time and inside its ranges, and the rank correlation and regret the report prints are right."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import held_out
import short_kernels


@pytest.mark.parametrize("small", [False, True])
def test_a_seeded_draw_is_reproducible_distinct_and_in_range(small):
    for family in held_out.FAMILIES:
        shapes = held_out.draw(family, 12, seed=29, small=small)
        assert shapes == held_out.draw(family, 12, seed=29, small=small)
        assert len(set(shapes)) == 12, "a shape drawn twice"
        assert held_out.draw(family, 12, seed=30, small=small) != shapes, "another seed, the same draw"
        # Drawing more extends the draw: the first shapes of a run stay as they were.
        assert held_out.draw(family, 20, seed=29, small=small)[:12] == shapes
        for shape in shapes:
            assert all(side >= 1 for side in shape)
            if not small:
                low, high = held_out.SHORT_US
                assert low <= held_out.h200_microseconds(family, shape) <= high
    assert held_out.draw("matmul", 5, 29) != held_out.draw("matmul", 5, 29, small=True)


def test_the_small_draw_is_tiny_and_unknown_families_are_refused():
    assert all(m * n * k <= 64**3 for m, n, k in held_out.draw("matmul", 20, seed=1, small=True))
    assert all(n <= 64_000 for (n,) in held_out.draw("fma", 20, seed=1, small=True))
    with pytest.raises(ValueError, match="row_max"):
        held_out.draw("row_max", 1, seed=1)


def test_spearman_ranks_with_ties_and_needs_three_common_candidates():
    assert short_kernels.spearman({0: 1.0, 1: 2.0, 2: 3.0}, {0: 10.0, 1: 20.0, 2: 30.0}) == pytest.approx(1.0)
    assert short_kernels.spearman({0: 1.0, 1: 2.0, 2: 3.0}, {0: 3.0, 1: 2.0, 2: 1.0}) == pytest.approx(-1.0)
    # Ties take the average rank: ranks (1.5, 1.5, 3) against (1, 2, 3).
    assert short_kernels.spearman({0: 1.0, 1: 1.0, 2: 5.0}, {0: 1.0, 1: 2.0, 2: 3.0}) == pytest.approx(math.sqrt(3) / 2)
    assert short_kernels.spearman({0: 1.0, 1: 2.0, 7: 3.0}, {0: 1.0, 1: 2.0, 8: 3.0}) is None, "two in common"
    assert short_kernels.spearman({0: 1.0, 1: 1.0, 2: 1.0}, {0: 1.0, 1: 2.0, 2: 3.0}) is None, "no spread"


def test_regret_is_the_picks_time_over_the_best_and_infinite_without_one():
    assert short_kernels.regret({0: 2.0, 1: 3.0}, 1) == pytest.approx(0.5)
    assert short_kernels.regret({0: 2.0, 1: 3.0}, 0) == 0.0
    assert short_kernels.regret({0: 2.0}, 5) == math.inf


def test_keys_parse_by_family_and_bad_ones_are_refused():
    assert short_kernels.parse_key("matmul:320x200x448") == ("matmul", (320, 200, 448))
    assert short_kernels.parse_key("fma:777777") == ("fma", (777777,))
    for bad in ("matmul:256x256", "fma:0", "row_max:3x3", "row_sum:axb", "fma"):
        with pytest.raises(argparse.ArgumentTypeError, match="--key"):
            short_kernels.parse_key(bad)


def test_torch_is_printed_beside_the_best_and_the_picks_gpu_time(monkeypatch, capsys):
    from torch_timing import TorchSeconds

    class Workload:  # what torch_beside reads of bench/kernels.py's Workload
        torch_figure = staticmethod(lambda inputs: ("torch.sum(dim=-1)", TorchSeconds(12e-6, 4e-6)))

    report = short_kernels.Report(None)
    gpu = {0: 6e-6, 1: 5e-6}  # tsR a launch, by candidate
    monkeypatch.setattr(short_kernels, "CUDA", False)
    assert short_kernels.torch_beside(report, Workload(), {}, gpu, pick=0) is None  # no torch: nothing
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(short_kernels, "CUDA", True)
    assert short_kernels.torch_beside(report, Workload(), {}, gpu, pick=0) == pytest.approx(1.5)
    line = capsys.readouterr().out
    assert "plain 12.00 us, graph 4.00 us a launch" in line
    assert "the best 5.00 us (1.25x the graph), the pick 6.00 us (1.50x)" in line
    no_graph = type("NoGraph", (), {"torch_figure": staticmethod(lambda inputs: ("op", TorchSeconds(9e-6, None)))})
    assert short_kernels.torch_beside(report, no_graph(), {}, gpu, pick=1) is None
    assert "no graph" in capsys.readouterr().out
