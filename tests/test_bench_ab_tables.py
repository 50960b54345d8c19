"""bench/ab_tables.py: two bench/shapes.py tables of one file compared shape by shape."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import ab_tables
import shape_report


def table(label: str, rows: list[tuple[str, str, float, float | None, float]]) -> list[str]:
    """A labelled table as bench/shapes.py prints it: (shape, winner, GFLOP/s, torch's, regret) rows."""
    lines = [f"-- {label}", "adapter: ...", shape_report.HEADER, "-" * len(shape_report.HEADER)]
    for shape, winner, rate, torch_rate, regret in rows:
        torch_flops = torch_rate * 1e9 if torch_rate else None  # rows hold FLOP/s; tables print GFLOP/s
        row = shape_report.Row("matmul", shape, "held:general", "GFLOP/s", winner, 0.5, rate * 1e9, torch_flops,
                               torch_flops and torch_flops * 2, winner, regret, 0.01, 30, 30, {})
        lines.append(shape_report.row_line(row))
    return [*lines, "", "the held-out draw against issue 29's targets (rates in GFLOP/s):", "run: ..."]


def test_two_tables_are_read_and_compared_shape_by_shape(tmp_path, capsys):
    a = table("this wheel, seed 5", [("100x2000x300", "t1", 10_000.0, 20_000.0, 0.0),
                                     ("2000x100x300", "t2", 8_000.0, 8_000.0, 0.05),
                                     ("300x300x3000", "t3", 5_000.0, None, 0.0)])
    b = table("with bench/probes/x.patch, seed 5", [("100x2000x300", "t1_tail", 15_000.0, 20_000.0, 0.0),
                                                    ("2000x100x300", "t2", 8_400.0, 8_000.0, math.inf),
                                                    ("300x300x3000", "t3", 4_900.0, None, 0.01)])
    tables = ab_tables.read_tables(a + b)
    assert [label for label, _ in tables] == ["this wheel, seed 5", "with bench/probes/x.patch, seed 5"]
    first = tables[0][1]
    assert [row.shape for row in first] == ["100x2000x300", "2000x100x300", "300x300x3000"]
    assert first[0].rate == 10_000.0 and first[0].versus == 0.5 and first[2].versus is None
    assert tables[1][1][1].regret is None  # a wrong pick: no regret to read
    lines = ab_tables.compare(*tables)
    assert any(line.startswith("100x2000x300") and line.split()[-1] == "1.500" for line in lines)
    assert "winner changed 1.500 (1), winner the same 1.015 (2)" in "\n".join(lines)
    assert "under 80% of torch: A 1, B 1; regret over 2% (or wrong): A 1, B 1" in "\n".join(lines)
    slow = ab_tables.compare(("a", [ab_tables.TableRow("1x1x1", "w", 0.1, 0.0, None, 0.0)]),
                             ("b", [ab_tables.TableRow("1x1x1", "w", 0.1, 0.1, None, 0.0)]))
    assert slow[3].split()[-1] == "-" and "winner the same - (0)" in slow[4]  # a rate printed as 0.0: no ratio
    path = tmp_path / "ab.txt"
    path.write_text("\n".join(a + b) + "\n")
    assert ab_tables.main([str(path)]) == 0 and "B/A" in capsys.readouterr().out
    path.write_text("\n".join(a) + "\n")
    assert ab_tables.main([str(path)]) == 1 and "needs two" in capsys.readouterr().err


def test_a_duel_replaces_the_oracles_regret_and_tables_from_before_the_duels_still_read():
    dueled = table("duels", [("100x2000x300", "t1", 10_000.0, 20_000.0, 0.05)])
    parts = dueled[4].split()
    dueled[4] = " ".join([*parts[:13], "+1.0%", *parts[14:]])  # the duel found the pick within 1%
    old = table("before the duels", [("100x2000x300", "t1", 10_000.0, 20_000.0, 0.05)])
    old[4] = " ".join(old[4].split()[:13])  # thirteen columns: no duel column yet, nor the batch loop's
    before_batch = " ".join([*parts[:13], "+1.0%"])  # fourteen: a duel, no batch loop yet
    (_, [new_row]), (_, [old_row]) = ab_tables.read_tables(dueled + old)
    assert len(dueled[4].split()) == 16 and ab_tables.parse_row(before_batch) == new_row
    assert (new_row.regret, new_row.duel, new_row.confirmed_regret) == (0.05, 0.01, 0.01)
    assert (old_row.regret, old_row.duel, old_row.confirmed_regret) == (0.05, None, 0.05)
    lines = "\n".join(ab_tables.compare(("a", [new_row]), ("b", [old_row])))
    assert "regret over 2% (or wrong): A 0, B 1" in lines
