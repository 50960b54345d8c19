"""What a sampling policy is: one signature, two policies, and what they leave behind.

A policy decides which candidates of a key are measured and how many samples each gets. Both
have the signature :data:`SamplingPolicy`: ``await policy(bench, plan, on_trial, limit)`` with
the candidates' measuring kit (:class:`~wgtune.tune.measure.Bench`), the key's plan, a callback for
each candidate's result as it comes, and the set's short-circuit time for the key (or None); it
answers :class:`Sampled`. Ranking what was sampled is ``ranking.py``'s business.

- ``adaptive.py`` (the default): round robin over every batch, early elimination, bootstrap
  settling, ranked by median.
- ``fixed.py``: a fixed number of samples per candidate, first measured batch only, ranked by
  ``0.8 * min + 0.2 * median`` (the policy of CubeCL's tuner).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..errors import ConfigError, Skip
from ..key import Key
from ..sets.tunable import TunableSet
from ..store.results import Result
from .measure import Bench
from .plan import Plan

__all__ = ["OnTrial", "Sampled", "SamplingPolicy", "short_circuit_limit"]

# Called when a candidate leaves the running (or is screened): its index, result and wall time.
OnTrial = Callable[[int, Result, float], None]


@dataclass
class Sampled:
    """What the sampling left: every candidate's result and cost, and how the tune ended."""

    results: dict[int, Result] = field(default_factory=dict)
    walls: dict[int, float] = field(default_factory=dict)
    samples: dict[int, int] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # in the order candidates first ran
    short_circuit: int | None = None
    not_chosen: str | None = None  # why candidates never run were not (a search's budget), if not the default

    def record(self, index: int, result: Result, wall: float, samples: int) -> None:
        """Candidate ``index``'s result so far (a later one replaces it), its cost and samples."""
        self.results[index] = result
        self.walls[index] = wall
        self.samples[index] = samples

    def _not_run(self, name: str) -> Skip:
        return Skip(name, self.not_chosen) if self.not_chosen else Skip(name)

    def all_results(self, tunables: TunableSet, plan: Plan) -> list[Result]:
        """A result for every candidate of the set: sampled, skipped by the plan, or never run."""
        results: list[Result] = [
            self.results[index] if index in self.results else self._not_run(kernel.name)
            for index, kernel in enumerate(tunables.candidates)
        ]
        for index in plan.skipped:
            results[index] = Skip(tunables.candidates[index].name, "skipped by the plan: negative priority")
        return results


SamplingPolicy = Callable[[Bench, Plan, OnTrial, "float | None"], Awaitable[Sampled]]


def short_circuit_limit(tunables: TunableSet, key: Key) -> float | None:
    """The set's short-circuit time for ``key`` in seconds per dispatch, checked; None without one."""
    if tunables.short_circuit is None:
        return None
    limit = tunables.short_circuit(key)
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
        raise ConfigError(
            f"tunable set {tunables.name!r}: short_circuit({key}) gave {limit!r}; "
            "give a time in seconds per dispatch > 0, or None"
        )
    return float(limit)
