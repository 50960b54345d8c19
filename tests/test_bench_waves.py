"""bench/waves.py: the workgroups a GPU runs at once, fitted from a staircase probe's times."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import waves


def staircase(true_waves: int, counts: list[int], noise: float, seed: int = 7) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(count, (4e-6 + 30e-6 * math.ceil(count / true_waves)) * (1 + rng.uniform(-noise, noise)))
            for count in counts]


def test_the_step_model_finds_the_waves_of_a_staircase_and_beats_a_line():
    counts = [44 * r for r in range(2, 25)]  # 96-row blocks at N 1408, M stepped by two block rows
    fit = waves.fit_waves("t", staircase(264, counts, noise=0.02), least=33, most=2112)
    assert fit is not None and fit.points == len(counts)
    # The sizes probed cannot tell 264 from any W with the same steps over them: 264 is within the tie.
    assert fit.tied[0] <= 264 <= fit.tied[1] and fit.tied[1] - fit.tied[0] < 44
    assert fit.versus_line < 0.2  # the steps fit far better than a line
    other = waves.fit_waves("t", staircase(396, counts, noise=0.02), least=33, most=2112)
    assert other is not None and other.tied[0] <= 396 <= other.tied[1]


def test_a_straight_line_has_no_steps_to_find():
    counts = [44 * r for r in range(2, 25)]
    points = [(count, 1e-6 * count) for count in counts]  # time along a line: no waves (or W of 1)
    fit = waves.fit_waves("t", points, least=33, most=2112)
    assert fit is not None and fit.versus_line > 0.5


def test_too_few_sizes_fit_nothing_and_the_probe_file_keeps_timed_candidates_only(tmp_path, capsys):
    assert waves.fit_waves("t", [(10, 1.0), (20, 2.0), (20, 2.1), (30, 3.0)], 1, 50) is None
    records = [{"candidate": "a", "workgroups": [5, count], "status": "ok", "seconds": seconds}
               for count, seconds in staircase(264, [44 * r for r in range(2, 25)], noise=0.0)]
    records += [{"candidate": "b", "workgroups": [9], "status": "wrong", "seconds": None},
                {"family": "matmul", "shape": "1x2x3", "torch_rate": None}]
    path = tmp_path / "probe.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in records) + "\n")
    found = waves.read_probe(path.read_text().splitlines())
    assert set(found) == {"a"} and len(found["a"]) == 23  # each fit on the last stage's workgroups
    assert waves.main([str(path)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("a "))
    assert "2.00" in line.split()  # 264 workgroups at once on 132 SMs: two an SM
    assert waves.main([str(tmp_path / "missing.jsonl")]) == 1
