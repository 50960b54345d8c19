"""bench/launch_parts.py on the adapter present: each candidate of a small key that ``--match``
picks, of one stage and of two, gets each part of a launch's time, finite and non-negative (no
figure is compared: the machine's load moves them)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import launch_parts


def test_each_candidate_of_a_small_key_gets_every_part_of_a_launch(capsys):
    # Those of the key's 77 that --match finds (compiling every one took 338 s on a loaded machine).
    match = "^(naive|rows4_c32|cols4|tile64x64_k8_reg8x4_pad_db_a2(_sc)?(_kg1024_(fa|2p))?$)"
    assert launch_parts.main(["--key", "24x20x300", "--launches", "3", "--rounds", "1", "--match", match]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("matmul 24x20x300: us a launch")
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == {"naive_wg16x16", "rows4_c32_wg256_u4_v4", "rows4_c32_wg256_u4_f", "cols4_r4x4_wg128_u4_f",
                         "tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_fa", "tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_2p",
                         "tile64x64_k8_reg8x4_pad_db_a2_sc", "tile64x64_k8_reg8x4_pad_db_a2"}, rows
    for cells in rows.values():
        figures = [float(cell) for cell in cells[2:]]
        assert len(figures) == 2 * len(launch_parts.PARTS) + 2
        assert all(math.isfinite(value) and value >= 0 for value in figures)
    stages = {name: int(cells[1].strip("()")) for name, cells in rows.items()}
    assert set(stages.values()) == {1, 2}, "the key plans kernels of one stage and of two (split K)"
