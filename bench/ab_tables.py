"""Two runs of ``bench/shapes.py`` side by side: what changed between a wheel and a variant.

``bench/probes/device.sh`` writes such pairs into one file (``narrow``: this wheel and the set
before the narrow tiles, twice; ``ab:NAME``: one draw with this wheel, then with a variant). This
reads every table in the file (the rows under each ``family  shape ...`` header, labelled by the
``-- ...`` line before it, if any), pairs them in order (first with second, third with fourth)
and prints, per pair and shape, both winners and rates and the rate's ratio, then the pair's
summary: the median ratio over the shapes whose winner changed and over those whose winner did
not (what the runs' own spread is), the shapes under 80% of torch, the regrets over 2% (as the
duels measured them again, where the tables have a duel column), and the tuning seconds, in each run.

Usage::

    python bench/ab_tables.py OUT/ab-NAME.txt

A benchmark's analysis: it reads a file and touches no GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TableRow:
    """One shape's row of a ``bench/shapes.py`` table (rates as printed, in GFLOP/s or GB/s)."""

    shape: str
    winner: str
    tune_s: float
    rate: float
    versus: float | None  # the rate over torch's plain figure; None without torch
    regret: float | None  # None where the pick was wrong
    duel: float | None = None  # the regret a duel measured again (tables since session 16), None without one

    @property
    def confirmed_regret(self) -> float | None:
        return self.duel if self.duel is not None else self.regret


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _share(text: str) -> float | None:
    return None if text in ("-", "wrong") else float(text.rstrip("%")) / 100


def parse_row(line: str) -> TableRow | None:
    """The row ``line`` is, or None for any other line (a header, a summary, a failed shape)."""
    parts = line.split()
    # 14: with the duel's column; 16: with the batch loop's rate and ratio too (since session 31)
    if len(parts) not in (13, 14, 16) or "FAILED" in line:
        return None
    try:
        duel = _share(parts[13]) if len(parts) >= 14 else None
        return TableRow(parts[1], parts[3], float(parts[4]), _number(parts[5]), _share(parts[7]), _share(parts[10]),
                        duel)
    except ValueError:
        return None


def read_tables(lines: list[str]) -> list[tuple[str, list[TableRow]]]:
    """Every table in ``lines`` with its label (the last ``-- `` line before its header)."""
    tables: list[tuple[str, list[TableRow]]] = []
    label = ""
    for line in lines:
        if line.startswith("-- "):
            label = line[3:].strip()
        elif line.startswith("family  shape"):
            tables.append((label or f"table {len(tables) + 1}", []))
        elif tables and (row := parse_row(line)) is not None:
            tables[-1][1].append(row)
    return tables


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({len(values)})" if values else "- (0)"


def compare(first: tuple[str, list[TableRow]], second: tuple[str, list[TableRow]]) -> list[str]:
    """The lines comparing two tables, shape by shape (the shapes both have), then in sum."""
    (label_a, rows_a), (label_b, rows_b) = first, second
    by_shape = {row.shape: row for row in rows_b}
    pairs = [(row, by_shape[row.shape]) for row in rows_a if row.shape in by_shape]
    lines = [f"A: {label_a}", f"B: {label_b}",
             f"{'shape':16} {'A winner':40} {'B winner':40} {'A rate':>10} {'B rate':>10} {'B/A':>6}"]
    same, changed = [], []
    for a, b in pairs:
        ratio = b.rate / a.rate if a.rate else None  # a rate printed as 0.0 has no ratio
        if ratio is not None:
            (same if a.winner == b.winner else changed).append(ratio)
        shown = f"{ratio:>6.3f}" if ratio is not None else f"{'-':>6}"
        lines.append(f"{a.shape:16} {a.winner:40} {b.winner:40} {a.rate:>10,.1f} {b.rate:>10,.1f} {shown}")

    def under(rows: list[TableRow]) -> int:
        return sum(1 for row in rows if row.versus is not None and row.versus < 0.8)

    def regrets(rows: list[TableRow]) -> int:
        return sum(1 for row in rows if row.confirmed_regret is None or row.confirmed_regret > 0.02)

    mine_a, mine_b = [a for a, _ in pairs], [b for _, b in pairs]
    lines += [
        f"B/A rate, median: winner changed {_median(changed)}, winner the same {_median(same)} (the runs' spread)",
        f"under 80% of torch: A {under(mine_a)}, B {under(mine_b)}; regret over 2% (or wrong): A {regrets(mine_a)}, "
        f"B {regrets(mine_b)}; tuning: A {sum(a.tune_s for a in mine_a):.1f} s, B {sum(b.tune_s for b in mine_b):.1f} s"
        f" over {len(pairs)} shapes",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path, help="a file with bench/shapes.py tables, in pairs")
    options = parser.parse_args(argv)
    try:
        tables = read_tables(options.file.read_text().splitlines())
    except OSError as error:
        print(f"ab_tables.py: cannot read {options.file}: {error}", file=sys.stderr)
        return 1
    if len(tables) < 2:
        print(f"ab_tables.py: {options.file} holds {len(tables)} table(s); a comparison needs two", file=sys.stderr)
        return 1
    for index in range(0, len(tables) - 1, 2):
        print("\n".join(compare(tables[index], tables[index + 1])))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
