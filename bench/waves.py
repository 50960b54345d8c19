"""How many workgroups of each tile a GPU runs at once, read off a staircase probe.

A launch whose workgroups all take about as long runs in waves: ``W`` at a time (the SMs times
the workgroups of that tile each runs at once, which WebGPU does not report), so its time goes up
in steps, ``time ~ a + b * ceil(workgroups / W)``, not along a line. ``bench/probes/staircase.txt``
times tiles at sizes one block row apart (``bench/probes/device.sh staircase`` writes their
``probe.jsonl``); this fits that step model for every ``W`` in a range and prints, per candidate,
the ``W`` that fits best, the range of ``W`` that fit within ``--within`` of it (the sizes probed
cannot tell those apart), and how much better the steps fit than a line (the share of the line's
squared error the steps leave). ``W`` is what a tail tile's guess should be
(``MatmulTile(tail=W)``), and ``W`` over the SMs is its workgroups an SM.

Usage::

    python bench/waves.py OUT/staircase/probe.jsonl            # every candidate of the probe
    python bench/waves.py probe.jsonl --sms 132 --least 66 --most 2112

A benchmark's analysis: it reads a file and touches no GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WaveFit:
    """The step model's best fit for one candidate: ``waves`` its W, ``tied`` the lowest and
    highest W whose squared error is within the tolerance of the best, ``versus_line`` the best
    fit's squared error over a straight line's (well under 1 where the steps are real)."""

    candidate: str
    points: int
    waves: int
    tied: tuple[int, int]
    versus_line: float


def _squared_error(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The squared error of the least-squares line through ``(xs, ys)``."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx if sxx else 0.0
    return sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in zip(xs, ys, strict=True))


def fit_waves(candidate: str, points: Iterable[tuple[int, float]], least: int, most: int,
              within: float = 0.05) -> WaveFit | None:
    """Fit ``seconds ~ a + b * ceil(workgroups / W)`` for W in ``least..most`` to ``points``
    (workgroups, seconds); None with fewer than 4 distinct workgroup counts (nothing to fit)."""
    by_count: dict[int, list[float]] = defaultdict(list)
    for workgroups, seconds in points:
        by_count[workgroups].append(seconds)
    if len(by_count) < 4:
        return None
    counts = sorted(by_count)
    times = [min(by_count[count]) for count in counts]  # the least of repeats: the least disturbed
    errors = {waves: _squared_error([math.ceil(count / waves) for count in counts], times)
              for waves in range(max(1, least), most + 1)}
    best = min(errors, key=lambda waves: (errors[waves], waves))
    tied = [waves for waves, error in errors.items() if error <= errors[best] * (1 + within) + 1e-30]
    line = _squared_error([float(count) for count in counts], times)
    return WaveFit(candidate, len(counts), best, (min(tied), max(tied)), errors[best] / line if line else 0.0)


def read_probe(lines: Iterable[str]) -> dict[str, list[tuple[int, float]]]:
    """Each candidate's (workgroups of its last stage, seconds) from ``probe.jsonl`` lines: the
    timed ones only (a slow, wrong or failed candidate has no time)."""
    found: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for line in lines:
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("status") == "ok" and record.get("seconds") and record.get("workgroups"):
            found[record["candidate"]].append((int(record["workgroups"][-1]), float(record["seconds"])))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probe", type=Path, help="a probe.jsonl (bench/kernel_probe.py --out DIR)")
    parser.add_argument("--sms", type=int, default=132, help="the GPU's SMs (132 on an H200), for W per SM")
    parser.add_argument("--least", type=int, default=33, help="the smallest W tried (default 33)")
    parser.add_argument("--most", type=int, default=2112, help="the largest W tried (default 2112)")
    parser.add_argument("--within", type=float, default=0.05,
                        help="W whose squared error is within this share of the best are tied (default 0.05)")
    options = parser.parse_args(argv)
    if not 1 <= options.least <= options.most:
        parser.error("--least and --most need 1 <= least <= most")
    try:
        found = read_probe(options.probe.read_text().splitlines())
    except (OSError, ValueError) as error:
        print(f"waves.py: cannot read {options.probe}: {error}", file=sys.stderr)
        return 1
    print(f"{'candidate':46} {'sizes':>5} {'W':>6} {'tied W':>11} {'per SM':>7} {'steps/line':>10}")
    for candidate, points in found.items():
        fit = fit_waves(candidate, points, options.least, options.most, options.within)
        if fit is None:
            print(f"{candidate:46} {len({count for count, _ in points}):>5} (fewer than 4 sizes: no fit)")
            continue
        tied = f"{fit.tied[0]}-{fit.tied[1]}"
        print(f"{candidate:46} {fit.points:>5} {fit.waves:>6} {tied:>11} {fit.waves / options.sms:>7.2f} "
              f"{fit.versus_line:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
