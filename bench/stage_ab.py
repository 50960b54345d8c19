"""Two wheels' ``bench/stage_times.py`` tables side by side, candidate by candidate.

``device.sh stages-ab:NAME`` runs ``stage_times.py`` with this tree's wheel and with a variant's
(``.whl/NAME``) in turn, twice, each table after a line ``-- round R: WHEEL wheel``. A change to
one stage (the two-pass sum, say) shows in that stage's column and in the whole; the candidate's
other stage, which the change leaves alone, says how far the two wheels' runs drift. For each
shape and candidate this prints the median over the rounds of each wheel's whole and per-stage
times (us a launch) and B/A of each, every candidate whose output a wheel got wrong (the table
says so and does not time it), then the median B/A of the wholes.

Usage::

    python bench/stage_ab.py stages-ab-lanes-switch.txt

A benchmark's reader, not a test.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

_ROUND = re.compile(r"^-- round \d+: (\S+) wheel")
_SHAPE = re.compile(r"^matmul (\S+) \(")
# A timed row: the name, whole, host, GFLOP/s, each stage and the gap (stages only), "wg", workgroups.
_ROW = re.compile(r"^    (\S+)\s+([\d.]+)\s+[\d.]+\s+[\d,.]+\s+(.*?)\s+wg \S+$")
_WRONG = re.compile(r"^    (\S+)\s+WRONG")

Times = dict[tuple[str, str], dict[str, list[list[float]]]]  # (shape, candidate) -> wheel -> [whole, stages...] runs


def read_tables(lines: list[str]) -> tuple[list[str], Times, list[tuple[str, str, str]]]:
    """The wheels in the order they first ran; every timed row's figures by shape, candidate and
    wheel: ``[whole, stage 1, stage 2, ...]`` a round (a row without stages has the whole alone);
    and each ``(wheel, shape, candidate)`` whose output was wrong (not timed)."""
    wheels: list[str] = []
    times: Times = defaultdict(lambda: defaultdict(list))
    wrong: list[tuple[str, str, str]] = []
    wheel = shape = None
    for line in lines:
        if match := _ROUND.match(line):
            wheel = match.group(1)
            if wheel not in wheels:
                wheels.append(wheel)
        elif match := _SHAPE.match(line):
            shape = match.group(1)
        elif (match := _ROW.match(line)) and wheel and shape:
            rest = [float(cell) for cell in match.group(3).split()]
            stages = rest[:-1] if len(rest) > 1 else []  # the last figure is the gap
            times[(shape, match.group(1))][wheel].append([float(match.group(2)), *stages])
        elif (match := _WRONG.match(line)) and wheel and shape:
            wrong.append((wheel, shape, match.group(1)))
    return wheels, times, wrong


def compare(lines: list[str]) -> list[str]:
    wheels, times, wrong = read_tables(lines)
    if len(wheels) != 2:
        raise ValueError(f"two wheels' tables expected (lines '-- round R: WHEEL wheel'), found {wheels or 'none'}")
    a, b = wheels
    out = [f"A: {a} wheel, B: {b} wheel; us a launch, the median over rounds (A / B, B/A)",
           f"{'shape':<16} {'candidate':<48} {'whole':>19}  stages"]
    ratios = []
    for (shape, name), runs in times.items():
        if a not in runs or b not in runs:
            continue
        first = [statistics.median(column) for column in zip(*runs[a], strict=True)]
        second = [statistics.median(column) for column in zip(*runs[b], strict=True)]
        pairs = [f"{x:.2f}/{y:.2f} {y / x:.3f}" for x, y in zip(first, second, strict=False)]
        ratios.append(second[0] / first[0])
        out.append(f"{shape:<16} {name:<48} {pairs[0]:>19}  {'  '.join(pairs[1:])}")
    out += [f"WRONG with the {wheel} wheel (not timed): {name} on {shape}" for wheel, shape, name in wrong]
    if ratios:
        out.append(f"B/A of the whole, median {statistics.median(ratios):.3f} over {len(ratios)} candidates "
                   f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", type=Path, help="device.sh stages-ab:NAME's output")
    options = parser.parse_args(argv)
    try:
        rows = compare(options.table.read_text().splitlines())
    except (OSError, ValueError) as error:
        print(f"stage_ab.py: {error}", file=sys.stderr)
        return 2
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
