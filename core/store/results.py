"""What measuring a candidate left: its samples' statistics, or its failure; and their JSON.

Samples are seconds per dispatch. A candidate's :data:`Result` is :class:`Measured` (it ran; its
:class:`Stats`) or one of the failures of ``errors.py``. How results are ranked is
``ranking.py``'s business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import CandidateError, error_from_json
from .confidence import median
from .validate import check_result

__all__ = ["Measured", "Result", "Stats", "result_from_json", "result_to_json"]

MIN_WEIGHT = 0.8
MEDIAN_WEIGHT = 0.2


@dataclass(frozen=True, slots=True)
class Stats:
    """Statistics of one candidate's valid samples (seconds per dispatch). ``rounds``: the round
    of the tune each sample was taken in, where the policy samples in rounds (the adaptive one's:
    positive, shared by the candidates sampled in that round; a sample of no round has a negative
    number of its own), else empty; a tune's pairing of two candidates' samples reads it, and it
    is not kept with a stored result."""

    samples: tuple[float, ...]
    timing: str
    rounds: tuple[int, ...] = field(default=(), compare=False, repr=False)

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
class Measured:
    """A candidate that ran: its index in the set, name, and measured statistics.

    ``stats`` is None in a dry run, where the candidate compiled but nothing was measured.
    ``eliminated_early`` is True when the adaptive policy dropped the candidate as hopeless
    before it had ``adaptive.MIN_SAMPLES`` samples: it lost clearly, but a median of one or two
    samples is no measure of how much (one may have been descheduled), so do not quote it.
    """

    name: str
    index: int
    stats: Stats | None
    eliminated_early: bool = False

    @property
    def score(self) -> float:
        return self.stats.score if self.stats is not None else math.inf


Result = Measured | CandidateError


def result_to_json(result: Result) -> dict:
    """A result as the store, the records and the page carry it: a timing's statistics and
    samples, a dry run's mark, or a failure's kind and reason."""
    if isinstance(result, Measured):
        if result.stats is None:
            return {"name": result.name, "index": result.index, "dry_run": True}
        stats = result.stats
        encoded = {
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
        if result.eliminated_early:  # only when set: documents of results without it stay as they were
            encoded["eliminated_early"] = True
        return encoded
    return {"name": result.name, "error": type(result).__name__, "reason": result.reason}


def result_from_json(obj: object, index: int) -> Result:
    """Read back what :func:`result_to_json` wrote for candidate ``index`` (absent fields of older
    documents take their defaults). Checked first (:func:`~wgtune.store.validate.check_result`): a
    result of the wrong shape, a failure kind that is no name, a sample that is not a finite number
    above 0 raise StoreError."""
    check_result(obj, index)
    if "error" in obj:
        return error_from_json(obj)
    if obj.get("dry_run"):
        return Measured(obj["name"], index, None)
    samples = tuple(float(s) for s in obj["samples"])
    stats = Stats(samples, obj.get("timing", "unknown"))
    return Measured(obj["name"], index, stats, eliminated_early=obj.get("eliminated_early") is True)
