"""The shape suite's report (``bench/shapes.py``): one row per shape, and the summary of each
family against the issues' targets (issue 14's for the fixed suite, issue 29's for shapes off it).

Pure formatting over :class:`Row` values: no device, no torch.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checked_oracle import DUEL_COPIES, DUEL_ROUNDS  # bench/checked_oracle.py

from kernels import scaled  # bench/kernels.py

FAMILIES = ("matmul", "row_sum", "row_max")


@dataclass(frozen=True)
class Target:
    """What issue 14 asks of a family's ratios to torch: the median's floor, every shape's floor."""

    median: float
    floor: float


TARGETS = {"matmul": Target(0.90, 0.80), "row_sum": Target(1.00, 0.90), "row_max": Target(1.00, 0.90)}
HELD_OUT = "held:"  # the tag's prefix of a drawn shape (its class follows)
GIVEN = "given:"  # of a shape named with --shape
# Issue 29's targets for the held-out draw: matmul's median and floor, and its thin and flat classes'
# medians (the reductions keep issue 14's).
HELD_TARGETS = {**TARGETS, "matmul": Target(0.95, 0.80)}
CLASS_TARGETS = {"matmul": {"thin": 0.90, "flat": 0.90}}  # of shapes off the suite (drawn or given), by class
HEADLINE = {"matmul": ("4096x4096x4096", 0.95)}  # a shape's ratio the issue wants "toward" a figure
REGRET_LIMIT, REGRET_SHARE = 0.02, 0.95  # regret <= 2% on >= 95% of the suite's shapes


@dataclass
class Row:
    """One shape's figures (rates in work per second: FLOP/s or bytes/s)."""

    family: str
    shape: str
    tag: str
    unit: str
    winner: str
    tune_s: float
    rate: float
    torch_rate: float | None
    torch_graph_rate: float | None  # torch under a CUDA graph: the GPU's own time
    oracle_winner: str
    regret: float  # infinite: wgtune's pick failed the oracle's check
    noise: float
    correct: int
    fitting: int
    wrong: dict[str, str]  # name -> why
    duel: float | None = None  # the regret measured again, pick against winner, where it was over the limit
    spread_duel: float | None = None  # the same duel over the call's buffers and copies (checked_oracle.duel)
    # The share of the winner's time (``rate``'s) that is the host's recording of a launch (shapes.host_share);
    # None where unknown (no timestamps). ``rate`` counts it as a pass recorded in full pays it; the GPU span is
    # the rest.
    host_share: float | None = None
    # The winner's rate as a program's ``tuner.batch()`` loop runs it (batch_rate.batch_seconds: the wall clock,
    # the GPU running while the host records): the counterpart of torch's plain loop. None where not measured.
    batch_rate: float | None = None
    batch_host: float | None = None  # the host's part of that loop's time (near 1: the loop is the host's pace)

    @property
    def confirmed_regret(self) -> float:
        """The regret a duel measured where there was one, else the oracle's."""
        return self.duel if self.duel is not None else self.regret

    @property
    def spread_regret(self) -> float:
        """The regret a duel over several sets of buffers measured where there was one, else the oracle's."""
        return self.spread_duel if self.spread_duel is not None else self.regret

    @property
    def versus(self) -> float | None:
        return self.rate / self.torch_rate if self.torch_rate else None

    @property
    def versus_graph(self) -> float | None:
        return self.rate / self.torch_graph_rate if self.torch_graph_rate else None

    @property
    def versus_gpu(self) -> float | None:
        """The ratio to torch by the winner's GPU time alone (its time less the host's recording):
        what torch's CUDA events around its loop count of it, where the GPU is the slower side."""
        if self.versus is None or self.host_share is None:
            return None
        return self.versus / (1.0 - self.host_share)

    @property
    def versus_batch(self) -> float | None:
        """The ratio to torch's plain loop of the winner's rate in a program's batch loop."""
        return self.batch_rate / self.torch_rate if self.batch_rate and self.torch_rate else None

    @property
    def held_out(self) -> bool:
        """Whether the shape is off the fixed suite (drawn, or given with ``--shape``)."""
        return self.tag.startswith((HELD_OUT, GIVEN))


# -- the table -------------------------------------------------------------------------------------

HEADER = (f"{'family':7} {'shape':16} {'class':12} {'wgtune winner':32} {'tune s':>6} {'wgtune':>10} "
          f"{'torch':>10} {'vs torch':>8} {'vs graph':>8} {'oracle winner':32} {'regret':>7} {'noise':>6} "
          f"{'ok/fit':>7} {'duel':>7} {'batch':>10} {'vs torch':>8}")


def percent(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "-"
    if value == float("inf"):
        return "wrong"
    return f"{value * 100:+.1f}%" if sign else f"{value * 100:.1f}%"


def row_line(row: Row) -> str:
    torch_rate = scaled(row.torch_rate, row.unit) if row.torch_rate else "-"
    return (f"{row.family:7} {row.shape:16} {row.tag:12} {row.winner:32} {row.tune_s:>6.1f} "
            f"{scaled(row.rate, row.unit):>10} {torch_rate:>10} {percent(row.versus):>8} "
            f"{percent(row.versus_graph):>8} {row.oracle_winner:32} "
            f"{percent(row.regret, sign=True):>7} {percent(row.noise):>6} {f'{row.correct}/{row.fitting}':>7} "
            f"{percent(row.duel, sign=True):>7} {scaled(row.batch_rate, row.unit) if row.batch_rate else '-':>10} "
            f"{percent(row.versus_batch):>8}")


def summary(rows: list[Row], failed: Sequence[str] = ()) -> list[str]:
    """The targets, family by family, for the fixed suite (issue 14's) and for the held-out draw
    (issue 29's), then the whole run's regret share; a shape that ``failed`` to run counts as one
    over the regret limit."""
    lines: list[str] = []
    for title, part, targets in (("the fixed suite against issue 14's targets", False, TARGETS),
                                 ("the held-out draw against issue 29's targets", True, HELD_TARGETS)):
        mine = [row for row in rows if row.held_out == part]
        if not mine:
            continue
        if part and all(row.tag.startswith(GIVEN) for row in mine):
            title = "the given shapes against issue 29's targets"
        lines += ["", f"{title} (rates in {', '.join(sorted({r.unit for r in mine}))}):"]
        for family in FAMILIES:
            of_family = [row for row in mine if row.family == family]
            if of_family:
                lines += family_summary(family, of_family, targets[family])
    total = len(rows) + len(failed)
    for what, regret in (("regret", lambda row: row.regret), ("after the duels", lambda row: row.confirmed_regret),
                         ("after the duels on several sets of buffers", lambda row: row.spread_regret)):
        within = sum(1 for row in rows if regret(row) <= REGRET_LIMIT)
        share = within / total if total else 0.0
        lines.append(f"run: {what} <= {REGRET_LIMIT:.0%} on {within}/{total} shapes ({share:.0%}; target >= "
                     f"{REGRET_SHARE:.0%}: {'met' if share >= REGRET_SHARE else 'MISSED'})")
    if failed:
        lines.append(f"failed to run ({len(failed)}, counted as misses): {', '.join(failed)}")
    return lines


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def family_summary(family: str, rows: list[Row], target: Target) -> list[str]:
    ratios = [(row.versus, row) for row in rows if row.versus is not None]
    if ratios:
        median = statistics.median(ratio for ratio, _ in ratios)
        low, low_row = min(ratios, key=lambda pair: pair[0])
        under = [row.shape for ratio, row in ratios if ratio < target.floor]
        line = (f"{family}: vs torch median {percent(median)} (target >= {target.median:.0%}: "
                f"{'met' if median >= target.median else 'MISSED'}), min {percent(low)} at {low_row.shape} "
                f"(target none under {target.floor:.0%}: {len(under)} of {len(ratios)} under); vs torch's CUDA "
                f"graph median {percent(_median([row.versus_graph for row in rows]))}")
        headline = HEADLINE.get(family)
        shown = [row for _, row in ratios if headline and row.shape == headline[0]]
        if shown:
            line += f"; {headline[0]} {percent(shown[0].versus)} (target toward {headline[1]:.0%})"
    else:
        line = f"{family}: vs torch - (torch has no CUDA GPU here)"
    by_gpu = []
    shares = [row.host_share for row in rows if row.host_share is not None]
    if shares:
        text = (f"  the host's recording of a launch: a median {percent(statistics.median(shares))} of the winners' "
                "time (their rates count it, as a pass recorded in full pays it)")
        gpu = [(row.versus_gpu, row) for row in rows if row.versus_gpu is not None]
        if gpu:
            low, low_row = min(gpu, key=lambda pair: pair[0])
            text += (f"; by GPU time alone vs torch median {percent(statistics.median(ratio for ratio, _ in gpu))}, "
                     f"min {percent(low)} at {low_row.shape}, "
                     f"{sum(1 for ratio, _ in gpu if ratio < target.floor)} of {len(gpu)} under {target.floor:.0%}")
        by_gpu.append(text)
    loops = [row.batch_rate / row.rate for row in rows if row.batch_rate]
    if loops:
        by_gpu.append(f"  a program's tuner.batch() loop of the winners (wall clock, the GPU running while the host "
                      f"records) against their rates above: a median {statistics.median(loops):.2f}x, "
                      f"{min(loops):.2f}-{max(loops):.2f}x; the host's part of the loop's time a median "
                      f"{percent(_median([row.batch_host for row in rows]))}, over 90% on "
                      f"{sum(1 for row in rows if row.batch_host and row.batch_host > 0.9)} of {len(loops)} shapes")
    batched = [(row.versus_batch, row) for row in rows if row.versus_batch is not None]
    if batched:
        low, low_row = min(batched, key=lambda pair: pair[0])
        by_gpu.append(f"  the batch loop vs torch's plain loop: median "
                      f"{percent(statistics.median(ratio for ratio, _ in batched))}, min {percent(low)} at "
                      f"{low_row.shape}, {sum(1 for ratio, _ in batched if ratio < target.floor)} of {len(batched)} "
                      f"under {target.floor:.0%}")
    regrets = [row.regret for row in rows]
    within = sum(1 for regret in regrets if regret <= REGRET_LIMIT)
    confirmed = sum(1 for row in rows if row.confirmed_regret <= REGRET_LIMIT)
    dueled = [row for row in rows if row.duel is not None]
    worst = max(rows, key=lambda row: row.regret)
    wrong = sum(len(row.wrong) for row in rows)
    lines = [
        line,
        *by_gpu,
        f"  regret <= {REGRET_LIMIT:.0%} on {within}/{len(rows)} shapes ({within / len(rows):.0%}), median "
        f"{percent(statistics.median(regrets), sign=True)}, max {percent(worst.regret, sign=True)} at {worst.shape}; "
        f"oracle noise (even vs odd rounds) median {percent(statistics.median(row.noise for row in rows))}, max "
        f"{percent(max(row.noise for row in rows))}; {wrong} wrong candidates on "
        f"{sum(1 for row in rows if row.wrong)} shapes; tuning {sum(row.tune_s for row in rows):.1f} s in all",
        f"  after the duels ({len(dueled)} picks over the limit, each against the oracle's winner over {DUEL_ROUNDS} "
        f"rounds): regret <= {REGRET_LIMIT:.0%} on {confirmed}/{len(rows)} shapes ({confirmed / len(rows):.0%})"
        + (f"; the duels' regrets {', '.join(percent(row.duel, sign=True) for row in dueled)}" if dueled else ""),
    ]
    spread = [row for row in rows if row.spread_duel is not None]
    if spread:
        on_sets = sum(1 for row in rows if row.spread_regret <= REGRET_LIMIT)
        lines.append(f"  the same duels on the call's buffers and {DUEL_COPIES} sets of copies (a time the mean of its "
                     f"medians on each: what a pick costs on buffers nobody chose): regret <= {REGRET_LIMIT:.0%} on "
                     f"{on_sets}/{len(rows)} shapes ({on_sets / len(rows):.0%}); their regrets "
                     + ", ".join(percent(row.spread_duel, sign=True) for row in spread))
    by_class = []
    for tag in dict.fromkeys(row.tag for row in rows):
        members = [row for row in rows if row.tag == tag]
        versus = _median([row.versus for row in members])
        misses = sum(1 for row in members if row.regret > REGRET_LIMIT)
        wanted = CLASS_TARGETS.get(family, {}).get(tag.split(":", 1)[1]) if tag.startswith((HELD_OUT, GIVEN)) else None
        verdict = "" if wanted is None or versus is None else \
            f" (target >= {wanted:.0%}: {'met' if versus >= wanted else 'MISSED'})"
        by_class.append(f"{tag} {percent(versus)}{verdict} / {misses} of {len(members)}")
    lines.append(f"  by class (vs torch median / regret over {REGRET_LIMIT:.0%}): " + ", ".join(by_class))
    return lines
