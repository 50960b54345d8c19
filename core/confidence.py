"""How sure a tune is of its winner: a bootstrap interval on the ratio of medians.

A winner is only as good as the evidence that it beats the runner-up. The statement kept with
every winner is the ratio ``median(runner-up) / median(winner)`` (above 1: the winner is faster),
an interval for it at ``level`` (percentile bootstrap: resample each candidate's samples with
replacement, take the ratio of the resampled medians, read the quantiles), and ``p_faster``, the
share of resamples in which the winner's median came out below the runner-up's.

Medians, not means: a GPU timing's noise is one-sided (the machine only ever slows a run down),
and one descheduled sample must not move the answer. Resampling is seeded, so the same samples
always give the same statement.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Confidence", "RatioInterval", "bootstrap_ratio", "median"]

RESAMPLES = 400
SEED = 0x5EED


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(frozen=True, slots=True)
class RatioInterval:
    """``median(other) / median(base)`` with its bootstrap interval and ``P(base faster)``."""

    ratio: float
    low: float
    high: float
    p_faster: float


def bootstrap_ratio(
    base: Sequence[float], other: Sequence[float], level: float = 0.95, resamples: int = RESAMPLES
) -> RatioInterval:
    """The ratio of ``other``'s median to ``base``'s, with a percentile-bootstrap interval."""
    if not base or not other:
        raise ValueError("bootstrap_ratio needs samples on both sides")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = random.Random(SEED)
    ratios = []
    faster = 0
    n_base, n_other = len(base), len(other)
    for _ in range(resamples):
        base_median = median(rng.choices(base, k=n_base)) if n_base > 1 else base[0]
        other_median = median(rng.choices(other, k=n_other)) if n_other > 1 else other[0]
        ratios.append(other_median / base_median)
        faster += base_median < other_median
    ratios.sort()
    tail = (1 - level) / 2
    low = ratios[min(resamples - 1, math.floor(tail * resamples))]
    high = ratios[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return RatioInterval(median(other) / median(base), low, high, faster / resamples)


@dataclass(frozen=True, slots=True)
class Confidence:
    """How sure a tune is that its winner beats the runner-up (the best of the rest by median).

    ``ratio`` is the runner-up's median over the winner's; ``low``..``high`` its interval at
    ``level``; ``p_faster`` the bootstrap share in which the winner was faster. ``samples`` are
    how many samples each side had.
    """

    runner_up: str
    ratio: float
    low: float
    high: float
    level: float
    p_faster: float
    samples: tuple[int, int]

    @classmethod
    def between(
        cls, winner: Sequence[float], runner_up_name: str, runner_up: Sequence[float], level: float
    ) -> Confidence:
        interval = bootstrap_ratio(winner, runner_up, level)
        return cls(
            runner_up_name, interval.ratio, interval.low, interval.high, level, interval.p_faster,
            (len(winner), len(runner_up)),
        )

    def short(self) -> str:
        """For a table cell: ``1.23x [1.10, 1.31] p=0.99`` (the runner-up's time over the winner's,
        its interval, the share of resamples in which the winner was faster)."""
        return f"{self.ratio:.3f}x [{self.low:.3f}, {self.high:.3f}] p={self.p_faster:.2f}"

    def describe(self) -> str:
        """One line for people: ``1.23x vs B, 95% interval [1.10, 1.31], P(winner faster)=0.99``."""
        return (
            f"{self.ratio:.3f}x vs {self.runner_up}, {self.level:.0%} interval [{self.low:.3f}, {self.high:.3f}], "
            f"P(winner faster)={self.p_faster:.2f} ({self.samples[0]} and {self.samples[1]} samples)"
        )

    def to_json(self) -> dict:
        return {
            "runner_up": self.runner_up,
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "level": self.level,
            "p_faster": self.p_faster,
            "samples": list(self.samples),
        }

    @classmethod
    def from_json(cls, obj: object) -> Confidence:
        """Decode :meth:`to_json`; raises ValueError naming what is wrong."""
        if not isinstance(obj, dict):
            raise ValueError(f"confidence must be an object, got {type(obj).__name__}")
        try:
            samples = obj.get("samples", [0, 0])
            return cls(
                str(obj["runner_up"]),
                float(obj["ratio"]),
                float(obj["low"]),
                float(obj["high"]),
                float(obj["level"]),
                float(obj["p_faster"]),
                (int(samples[0]), int(samples[1])),
            )
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ValueError(f"not a confidence: {type(error).__name__}: {error}") from None
