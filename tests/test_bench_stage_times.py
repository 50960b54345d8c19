"""bench/stage_times.py on the adapter present: the split-K candidates of a small long-K key, each
checked right and timed whole and stage by stage (no figure is compared with another: the
machine's load moves them; only that each is there, finite, and the gap is the whole less the
stages)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import stage_times

ATOMICS = "tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_fa"
TWO_PASS = "tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_2p"


def test_each_stage_of_a_split_k_candidate_is_timed_beside_the_whole(capsys):
    argv = ["--shape", "24x20x700", "--candidate", ATOMICS, "--candidate", TWO_PASS, "--samples", "1",
            "--min-sample", "1e-4"]
    assert stage_times.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("matmul 24x20x700 (2 candidates;")
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert set(rows) == {ATOMICS, TWO_PASS}, lines
    for cells in rows.values():
        whole, host, _rate, first, second, gap = (float(cell.replace(",", "")) for cell in cells[1:7])
        assert all(math.isfinite(value) for value in (whole, host, first, second, gap)), cells
        assert whole > 0 and first > 0 and second > 0 and host >= 0, cells
        assert gap == pytest.approx(whole - first - second, abs=0.02), cells
        assert cells[-2] == "wg" and len(cells[-1].split("+")) == 2, cells  # two stages' workgroups


def test_a_stage_alone_is_its_own_kernel_with_the_candidates_scratch():
    from wgtune.kernels.matmul import matmul_set

    candidate = next(kernel for kernel in matmul_set().candidates if kernel.name == TWO_PASS)
    second = stage_times.stage_alone(candidate, 1)
    assert second.name == f"{TWO_PASS}#2" and not second.then
    assert second.wgsl == candidate.then[0].wgsl and set(second.scratch) == set(candidate.scratch) == {"part"}
