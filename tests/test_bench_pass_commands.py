"""bench/pass_commands.py on the adapter present: each command of a launch timed in a pass of its own,
for a two-stage and a one-stage candidate (no figure is compared with another: the machine's load
moves them; only that each is there and positive), and a name the set lacks is a clear error."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import pass_commands

TWO_PASS = "tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_2p"
ONE_STAGE = "tile64x64_k8_reg8x4_pad_db_a2_sc"


def test_each_command_of_a_launch_is_timed(capsys):
    argv = ["--shape", "24x20x700", "--candidate", TWO_PASS, "--candidate", ONE_STAGE, "--count", "20",
            "--rounds", "1"]
    assert pass_commands.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# adapter ")
    assert lines[1].startswith("a pass, whatever it holds: "), lines  # lavapipe has timestamps
    figures = [float(cell) for cell in re.findall(r"\d+\.\d\d", lines[1])]
    assert len(figures) == 4 and all(figure > 0 for figure in figures), lines[1]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) == {TWO_PASS, ONE_STAGE}, lines
    assert "a launch (2 stages)" in rows[TWO_PASS] and "a launch (1 stage)" in rows[ONE_STAGE]
    for line in rows.values():
        figures = [float(cell) for cell in re.findall(r"\d+\.\d\d", line)]
        assert len(figures) == 5 and all(figure > 0 for figure in figures), line


def test_a_candidate_the_set_lacks_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        pass_commands.main(["--candidate", "tile1x1_nothing", "--count", "1", "--rounds", "1"])
    assert stopped.value.code == 2
    assert "no candidate 'tile1x1_nothing' in the matmul set" in capsys.readouterr().err
