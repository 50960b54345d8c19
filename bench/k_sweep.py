"""Where a matmul's time goes, read off a K sweep: a fixed cost and a steady rate, against torch's.

At fixed M and N a tile's time grows along K as ``seconds ~ a + b * K``: ``a`` is what a launch
costs whatever K (the launch, each block's first loads and its stores of C, the last wave's idle
SMs), ``b`` the cost of each step along K once the blocks run (``2 M N / b`` is the steady rate).
``bench/probes/k-sweep.txt`` times the leading tiles at M x N fixed and K stepped
(``bench/probes/device.sh k-sweep`` writes its ``probe.jsonl``, torch's rates included); this
fits the line for every candidate and torch, per M x N, and prints them side by side. A tile
whose steady rate is torch's but whose fixed cost is larger loses on short K and few blocks to
its start and end (what a persistent or stream-K kernel would remove); one whose steady rate is
lower loses everywhere to its inner loop.

Usage::

    python bench/k_sweep.py OUT/k-sweep/probe.jsonl
    python bench/k_sweep.py A/probe.jsonl --versus B/probe.jsonl   # two sweeps side by side

A benchmark's analysis: it reads a file and touches no GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernels import matmul_shape  # bench/kernels.py: the benchmarks' one MxNxK parser

TORCH = "torch"


@dataclass(frozen=True)
class LineFit:
    """``seconds ~ fixed + per_k * K`` over ``points`` K values, for one candidate at one M x N."""

    candidate: str
    points: int
    fixed: float
    per_k: float

    def steady_rate(self, m: int, n: int) -> float:
        """GFLOP/s along K once the blocks run (no rate where the fit's slope is not positive)."""
        return 2 * m * n / self.per_k / 1e9 if self.per_k > 0 else float("nan")


def least_by_k(points: Iterable[tuple[int, float]]) -> dict[int, float]:
    """The least of the repeats at each K (the least disturbed)."""
    by_k: dict[int, float] = {}
    for k, seconds in points:
        by_k[k] = min(seconds, by_k.get(k, seconds))
    return by_k


def fit_line(candidate: str, points: Iterable[tuple[int, float]]) -> LineFit | None:
    """The least-squares line through (K, seconds), the least of repeats at each K; None with
    fewer than 3 distinct K (nothing to fit)."""
    by_k = least_by_k(points)
    if len(by_k) < 3:
        return None
    slope, intercept = statistics.linear_regression(list(by_k), list(by_k.values()))
    return LineFit(candidate, len(by_k), intercept, slope)


def read_sweep(lines: Iterable[str]) -> dict[tuple[int, int], dict[str, list[tuple[int, float]]]]:
    """Per (M, N), each candidate's (K, seconds) from ``probe.jsonl`` lines, torch's (from its
    rate) under ``"torch"``: the timed ones only (a slow, wrong or failed candidate has no time)."""
    found: dict[tuple[int, int], dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for line in lines:
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("family") != "matmul" or "shape" not in record:
            continue
        m, n, k = matmul_shape(record["shape"])
        if "torch_rate" in record:
            if record["torch_rate"]:
                found[m, n][TORCH].append((k, 2 * m * n * k / (record["torch_rate"] * 1e9)))
        elif record.get("status") == "ok" and record.get("seconds"):
            found[m, n][record["candidate"]].append((k, float(record["seconds"])))
    return found


def table(m: int, n: int, points: dict[str, list[tuple[int, float]]], at_k: Sequence[int] = (256, 2048)) -> list[str]:
    """The lines printed for one M x N: each candidate's fixed cost, steady rate, and both against
    torch's, and the fixed cost's share of the time at the K values ``at_k``."""
    fits = {candidate: fit_line(candidate, found) for candidate, found in points.items()}
    torch = fits.get(TORCH)
    shares = " ".join(f"{'fixed@' + str(k):>10}" for k in at_k)
    lines = [f"M x N {m}x{n}", f"  {'candidate':46} {'K':>3} {'fixed us':>9} {'GFLOP/s':>9} "
             f"{'rate/torch':>10} {'fixed-torch':>11} {shares}"]
    for candidate, fit in sorted(fits.items(), key=lambda item: (item[0] != TORCH, item[0])):
        if fit is None:
            lines.append(f"  {candidate:46} {len({k for k, _ in points[candidate]}):>3} (fewer than 3 K: no fit)")
            continue
        rate = fit.steady_rate(m, n)
        versus = f"{rate / torch.steady_rate(m, n):>10.3f}" if torch else f"{'-':>10}"
        extra = f"{(fit.fixed - torch.fixed) * 1e6:>+11.1f}" if torch else f"{'-':>11}"
        at = " ".join(f"{fit.fixed / (fit.fixed + fit.per_k * k):>10.1%}" for k in at_k)
        lines.append(f"  {candidate:46} {fit.points:>3} {fit.fixed * 1e6:>9.1f} {rate:>9,.0f} {versus} {extra} {at}")
    return lines


def versus_table(before: dict[tuple[int, int], dict[str, list[tuple[int, float]]]],
                 after: dict[tuple[int, int], dict[str, list[tuple[int, float]]]]) -> list[str]:
    """Two sweeps' candidates side by side (a wheel and a variant of it, say): per M x N of three or
    more K, the steady rate of each and their ratio and the fixed cost of each; per M x N of one or
    two K, the time at each K and the ratio. Only candidates both sweeps timed."""
    lines = [f"  {'M x N':11} {'candidate':46} {'A':>10} {'B':>10} {'B/A':>6}  fixed us A -> B (or K)"]
    for m, n in sorted(set(before) & set(after)):
        for candidate in sorted(set(before[m, n]) & set(after[m, n])):
            a, b = fit_line(candidate, before[m, n][candidate]), fit_line(candidate, after[m, n][candidate])
            if a and b:
                rate_a, rate_b = a.steady_rate(m, n), b.steady_rate(m, n)
                lines.append(f"  {f'{m}x{n}':11} {candidate:46} {rate_a:>10,.0f} {rate_b:>10,.0f} "
                             f"{rate_b / rate_a:>6.3f}  {a.fixed * 1e6:.1f} -> {b.fixed * 1e6:.1f}")
                continue
            least_a, least_b = least_by_k(before[m, n][candidate]), least_by_k(after[m, n][candidate])
            for k in sorted(set(least_a) & set(least_b)):
                flops = 2 * m * n * k / 1e9
                lines.append(f"  {f'{m}x{n}':11} {candidate:46} {flops / least_a[k]:>10,.0f} "
                             f"{flops / least_b[k]:>10,.0f} {least_a[k] / least_b[k]:>6.3f}  (K {k})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probe", type=Path, help="a probe.jsonl (bench/kernel_probe.py --out DIR) of a K sweep")
    parser.add_argument("--versus", type=Path, metavar="PROBE",
                        help="a second sweep's probe.jsonl: both side by side (rates in GFLOP/s, B/A over 1 is faster)")
    options = parser.parse_args(argv)
    try:
        found = read_sweep(options.probe.read_text().splitlines())
        other = read_sweep(options.versus.read_text().splitlines()) if options.versus else None
    except (OSError, ValueError, argparse.ArgumentTypeError) as error:  # a missing file, bad JSON, a bad shape
        print(f"k_sweep.py: cannot read a probe: {error}", file=sys.stderr)
        return 1
    if other is not None:
        print(f"A: {options.probe}\nB: {options.versus}")
        print("\n".join(versus_table(found, other)))
        return 0
    for (m, n), points in sorted(found.items()):
        print("\n".join(table(m, n, points)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
