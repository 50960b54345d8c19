"""What a candidate's benchmark measured, and how candidates are ranked.

Samples are seconds per dispatch. Candidates are ranked by a measure of their samples, the
policy's: the adaptive policy ranks by median (robust to the one-sided noise of GPU timings,
and what its confidence statement is about); the seed's fixed-sample policy by its score
(0.8 * min + 0.2 * median): the minimum is the run least disturbed by the rest of the machine,
the median keeps one lucky sample from deciding alone. Ties go to the lower index, so the set's
own order (its safe default first) breaks them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .confidence import Confidence, median
from .errors import CandidateError, error_from_json

__all__ = ["Outcome", "Result", "Stats", "rank", "result_from_json", "result_to_json", "winner_confidence"]

MIN_WEIGHT = 0.8
MEDIAN_WEIGHT = 0.2


@dataclass(frozen=True, slots=True)
class Stats:
    """Statistics of one candidate's valid samples (seconds per dispatch)."""

    samples: tuple[float, ...]
    timing: str

    @property
    def median(self) -> float:
        return median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples)

    @property
    def variance(self) -> float:
        mean = self.mean
        return sum((s - mean) ** 2 for s in self.samples) / len(self.samples)

    @property
    def score(self) -> float:
        return MIN_WEIGHT * self.min + MEDIAN_WEIGHT * self.median


@dataclass(frozen=True, slots=True)
class Outcome:
    """A candidate that ran: its index in the set, name, and measured statistics.

    ``stats`` is None in a dry run, where the candidate compiled but nothing was measured.
    """

    name: str
    index: int
    stats: Stats | None

    @property
    def score(self) -> float:
        return self.stats.score if self.stats is not None else math.inf


Result = Outcome | CandidateError


def rank(results: list[Result], measure: str = "score") -> list[int]:
    """Indices of ``results`` best first: outcomes by ``measure`` of their stats (``"score"`` or
    ``"median"``; ties to the lower index), then dry-run outcomes, then errors."""
    def order(index: int) -> tuple[int, float, int]:
        result = results[index]
        if isinstance(result, Outcome):
            return (0, getattr(result.stats, measure) if result.stats is not None else math.inf, index)
        return (1, math.inf, index)

    return sorted(range(len(results)), key=order)


def winner_confidence(results: list[Result], order: list[int], level: float) -> Confidence | None:
    """How sure the ranking ``order`` is of its first over its second (None without two measured)."""
    measured = [i for i in order[:2] if isinstance(results[i], Outcome) and results[i].stats is not None]
    if len(measured) < 2:
        return None
    winner, runner_up = (results[i] for i in measured)
    return Confidence.between(winner.stats.samples, runner_up.name, runner_up.stats.samples, level)


def result_to_json(result: Result) -> dict:
    if isinstance(result, Outcome):
        if result.stats is None:
            return {"name": result.name, "index": result.index, "dry_run": True}
        stats = result.stats
        return {
            "name": result.name,
            "index": result.index,
            "timing": stats.timing,
            "median": stats.median,
            "min": stats.min,
            "max": stats.max,
            "mean": stats.mean,
            "variance": stats.variance,
            "score": stats.score,
            "samples": list(stats.samples),
        }
    return {"name": result.name, "error": type(result).__name__, "reason": result.reason}


def result_from_json(obj: dict, index: int) -> Result:
    if "error" in obj:
        return error_from_json(obj)
    if obj.get("dry_run"):
        return Outcome(str(obj["name"]), index, None)
    samples = tuple(float(s) for s in obj["samples"])
    return Outcome(str(obj["name"]), index, Stats(samples, str(obj.get("timing", "unknown"))))
