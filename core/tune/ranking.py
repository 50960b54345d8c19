"""Ranking what a sampling policy measured, and the tune's answer built from it.

Candidates are ranked by a measure of their samples, the policy's: the adaptive policy ranks by
median (robust to the one-sided noise of GPU timings, and what its confidence statement is
about); the fixed policy by its score (0.8 * min + 0.2 * median): the minimum is the run least
disturbed by the rest of the machine, the median keeps one lucky sample from deciding alone.
Ties go to the lower index, so the set's own order (its safe default first) breaks them.
"""

from __future__ import annotations

import math

from ..config import Config, Policy
from ..errors import Skip
from ..key import Key
from ..sets.tunable import TunableSet
from ..store.confidence import Confidence, in_same_rounds
from ..store.record import Trial
from ..store.results import Measured, Result
from .outcome import TuneOutcome
from .plan import Plan
from .sampling import Sampled

__all__ = ["decide", "rank", "winner_confidence"]


def rank(results: list[Result], measure: str = "score") -> list[int]:
    """Indices of ``results`` best first: outcomes by ``measure`` of their stats (``"score"`` or
    ``"median"``; ties to the lower index), then dry-run outcomes, then errors."""
    def order(index: int) -> tuple[int, float, int]:
        result = results[index]
        if isinstance(result, Measured):
            return (0, getattr(result.stats, measure) if result.stats is not None else math.inf, index)
        return (1, math.inf, index)

    return sorted(range(len(results)), key=order)


def winner_confidence(results: list[Result], order: list[int], level: float) -> Confidence | None:
    """How sure the ranking ``order`` is of its first over its second (None without two measured)."""
    measured = [i for i in order[:2] if isinstance(results[i], Measured) and results[i].stats is not None]
    if len(measured) < 2:
        return None
    winner, runner_up = (results[i] for i in measured)
    mine, theirs = in_same_rounds(winner.stats.samples, winner.stats.rounds, runner_up.stats.samples,
                                  runner_up.stats.rounds)
    return Confidence.between(mine, runner_up.name, theirs, level)



def decide(tunables: TunableSet, key: Key, plan: Plan, sampled: Sampled, config: Config) -> TuneOutcome | None:
    """The tune's outcome from what was sampled, ranked by the policy's measure; None when no
    candidate was measured. Its ``wall`` and ``stored`` are the tuner's to fill in."""
    results = sampled.all_results(tunables, plan)
    if not any(isinstance(result, Measured) for result in sampled.results.values()):
        return None
    search = tunables.search
    order = rank(results, "median" if config.policy is Policy.ADAPTIVE or search is not None else "score")
    short_circuit = None
    if sampled.short_circuit is not None:
        order = [sampled.short_circuit, *(i for i in order if i != sampled.short_circuit)]
        short_circuit = tunables.candidates[sampled.short_circuit].name
        for index, result in enumerate(results):
            if isinstance(result, Skip) and index not in sampled.results and index not in plan.skipped:
                results[index] = Skip(result.name, f"not run: {short_circuit} met the short-circuit limit")
    trials = tuple(Trial(tunables.candidates[i].name, sampled.walls[i], sampled.samples[i]) for i in sampled.order)
    return TuneOutcome(
        set_name=tunables.name,
        key=key,
        checksum=tunables.checksum,
        winner_name=tunables.candidates[order[0]].name,
        results=tuple(results),
        order=tuple(order),
        confidence=winner_confidence(results, order, config.confidence),
        short_circuit=short_circuit,
        trials=trials,
        policy=f"search:{search.strategy}" if search is not None else config.policy.value,
        dry_run=config.dry_run,
        not_run=sampled.not_chosen,
    )
