"""bench/k_sweep.py: a tile's time split into a fixed cost and a steady rate along K, beside torch's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import k_sweep

KS = [64, 128, 256, 512, 1024, 2048]


def test_the_line_recovers_a_fixed_cost_and_a_rate_and_keeps_the_least_of_repeats():
    points = [(k, 20e-6 + 1e-8 * k) for k in KS] + [(256, 1.0)]  # a stalled repeat at 256
    fit = k_sweep.fit_line("t", points)
    assert fit is not None and fit.points == len(KS)
    assert fit.fixed == pytest.approx(20e-6) and fit.per_k == pytest.approx(1e-8)
    assert fit.steady_rate(1000, 1000) == pytest.approx(2e6 / 1e-8 / 1e9)  # 200,000 GFLOP/s
    assert k_sweep.fit_line("t", [(64, 1.0), (128, 2.0), (128, 2.5)]) is None  # two K: no line


def test_the_probe_file_gives_each_candidate_and_torch_per_m_x_n_and_the_table_compares_them(tmp_path, capsys):
    m = n = 1000
    records = [{"family": "matmul", "shape": f"{m}x{n}x{k}", "torch_rate": 2 * m * n * k / (10e-6 + 1e-8 * k) / 1e9}
               for k in KS]
    records += [{"family": "matmul", "shape": f"{m}x{n}x{k}", "candidate": "slow_start", "status": "ok",
                 "seconds": 30e-6 + 1e-8 * k, "workgroups": [256]} for k in KS]
    records += [{"family": "matmul", "shape": f"{m}x{n}x{k}", "candidate": "slow_loop", "status": "ok",
                 "seconds": 10e-6 + 2e-8 * k, "workgroups": [256]} for k in KS]
    records += [{"family": "matmul", "shape": f"{m}x{n}x64", "candidate": "wrong", "status": "wrong", "seconds": None},
                {"family": "row_sum", "shape": "10x10", "torch_rate": 1.0}]
    path = tmp_path / "probe.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in records) + "\n")
    found = k_sweep.read_sweep(path.read_text().splitlines())
    assert set(found) == {(m, n)} and set(found[m, n]) == {"torch", "slow_start", "slow_loop"}
    assert k_sweep.main([str(path)]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    # columns: candidate, K, fixed us, GFLOP/s, rate/torch, fixed-torch, fixed@256, fixed@2048
    assert rows["slow_start"][4] == "1.000" and rows["slow_start"][5] == "+20.0"  # torch's loop, a later start
    assert rows["slow_loop"][4] == "0.500" and rows["slow_loop"][5] == "+0.0"  # torch's start, half its rate
    assert rows["torch"][2] == "10.0"
    assert k_sweep.main([str(tmp_path / "missing.jsonl")]) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"family": "matmul", "shape": "10x0x5", "torch_rate": 1.0}) + "\n")
    assert k_sweep.main([str(bad)]) == 1  # a shape no matmul has: named, not a traceback
    assert "10x0x5" in capsys.readouterr().err


def test_two_sweeps_side_by_side_compare_rates_along_k_and_times_of_single_shapes(tmp_path, capsys):
    def probe(name: str, per_k: float, single: float) -> Path:
        records = [{"family": "matmul", "shape": f"1000x1000x{k}", "candidate": "t", "status": "ok",
                    "seconds": 10e-6 + per_k * k} for k in KS]
        records += [{"family": "matmul", "shape": "300x200x100", "candidate": "t", "status": "ok", "seconds": single}]
        if name == "a":
            records.append({"family": "matmul", "shape": "300x200x100", "candidate": "only_in_a", "status": "ok",
                            "seconds": single})
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(record) for record in records) + "\n")
        return path

    before, after = probe("a", 2e-8, 4e-6), probe("b", 1e-8, 2e-6)
    assert k_sweep.main([str(before), "--versus", str(after)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")][1:]
    by_shape = {row[0]: row for row in rows}
    assert by_shape["1000x1000"][4] == "2.000" and by_shape["1000x1000"][5:] == ["10.0", "->", "10.0"]
    assert by_shape["300x200"][4] == "2.000" and by_shape["300x200"][5:] == ["(K", "100)"]
    assert len(rows) == 2  # a candidate only one sweep timed has nothing to compare
