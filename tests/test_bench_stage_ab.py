"""bench/stage_ab.py on session 28's H100 tables (bench/results/h100-stage-times-lanes-busy.txt, each
wheel twice in turn): the stage a variant changed shows its move, and a malformed file is said."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import stage_ab

ROOT = Path(__file__).resolve().parents[1]

TWO_PASS = "tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_2p"


def recorded_rounds() -> list[str]:
    """The recorded tables with device.sh stages-ab's round lines in place of their section lines."""
    text = (ROOT / "bench/results/h100-stage-times-lanes-busy.txt").read_text()
    for round_ in (1, 2):
        text = text.replace(f"== stage-this-{round_}", f"-- round {round_}: this wheel")
        text = text.replace(f"== stage-busy-{round_}", f"-- round {round_}: lanes-busy wheel")
    return text.splitlines()


def test_the_changed_stage_moves_and_the_other_stays():
    wheels, times, wrong = stage_ab.read_tables(recorded_rounds())
    assert not wrong
    assert wheels == ["this", "lanes-busy"]
    runs = times[("437x869x1061", TWO_PASS)]
    assert len(runs["this"]) == len(runs["lanes-busy"]) == 2 and all(len(run) == 3 for run in runs["this"])
    rows = {tuple(line.split()[:2]): line for line in stage_ab.compare(recorded_rounds())[2:-1]}
    assert len(rows) == 8 * 3  # eight shapes, three candidates each

    def ratios(shape: str) -> list[float]:
        return [float(cell) for cell in rows[(shape, TWO_PASS)].split()[3::2]]  # whole, stage 1, stage 2

    whole, tile, total = ratios("437x869x1061")
    assert total < 0.75 and 0.97 < tile < 1.03 and whole < 0.95  # the sum stage 8.1 -> 5.5 us, the tile stage as it was
    assert ratios("64x64x65536")[2] > 1.4  # 3.6 -> 5.8 us: sixteen lanes on a uniform stride


def test_a_file_without_two_wheels_is_said(tmp_path, capsys):
    table = tmp_path / "stages.txt"
    table.write_text("matmul 437x869x1061 (3 candidates; torch 29.44 us)\n")
    assert stage_ab.main([str(table)]) == 2
    assert "two wheels' tables expected" in capsys.readouterr().err
    with pytest.raises(ValueError, match="found none"):
        stage_ab.compare([])


def test_a_candidate_a_wheel_got_wrong_is_said():
    lines = recorded_rounds()
    at = next(i for i, line in enumerate(lines) if line.startswith("-- round 2: lanes-busy"))
    row = next(i for i in range(at, len(lines)) if lines[i].startswith(f"    {TWO_PASS}"))
    lines[row] = f"    {TWO_PASS:<52} WRONG (not timed)"
    table = stage_ab.compare(lines)
    assert table[-2] == f"WRONG with the lanes-busy wheel (not timed): {TWO_PASS} on 437x869x1061"
