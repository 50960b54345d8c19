"""Search: which candidates a tune measures when a set is too large to measure them all.

A parameter space of thousands of configurations cannot be tuned candidate by candidate: each
one is a compile and a screening. ``TunableSet(..., search=Search(...))`` makes a tune measure
only a budget of them, chosen by a strategy, with the adaptive sampling as its measuring core
(``adaptive.search_adaptively``): the default candidate first, then the strategy's proposals in
batches, each screened like any candidate (compile, checks, first sample, dropped at twice the
leader's time), then the adaptive rounds settle the survivors. Candidates never proposed are
``Skip`` results that say so.

Every strategy has one interface, :class:`Strategy`: ``propose(observed, count)`` answers up to
``count`` candidate indices not yet observed, given what was observed so far (index -> seconds
per dispatch, or None for a candidate that failed). Strategies never touch a device, so they
are tested, and compared on recorded timings (``bench/search.py``), without one.

- ``"random"``: candidates in a seeded random order.
- ``"model"`` (the default): a start that covers every parameter value early (random, each next
  one chosen to show values not yet measured), then the candidates an additive model of the
  timings (``surrogate.py``, fitted to what was measured) predicts fastest: most of each batch
  among the current leader's neighbours (one parameter one step away), the rest in the whole
  space, and one random proposal so the model keeps learning about the rest of the space. It needs the
  candidates' parameters (``Kernel.params``, which :class:`~wgtune.sets.space.Space` sets); a set
  without them is searched at random.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError
from .surrogate import AdditiveModel

__all__ = ["STRATEGIES", "ModelStrategy", "RandomStrategy", "Search", "Strategy"]

STRATEGIES = ("model", "random")
# Proposals per batch: the model is refitted between batches.
BATCH = 8
# Candidates scored per batch by the model at most (a random subset of the rest beyond it).
SCORED = 4096
# A failed candidate counts for the model as this many times the slowest measured one.
FAILURE_PENALTY = 4.0
# The fastest measured candidates whose neighbours the model ranks first.
LEADERS = 1
# The share of a batch taken from the leader's neighbours (the rest from the whole space).
LOCAL_SHARE = 0.75
# Candidates, in the random order, among which the start picks those that cover unseen values.
COVER_WINDOW = 300
# The fewest candidates a search measures, whatever its fraction.
MIN_BUDGET = 16


class Strategy(Protocol):
    """Proposes which candidates to measure next (see the module doc)."""

    def propose(self, observed: Mapping[int, float | None], count: int) -> list[int]: ...


@dataclass(frozen=True)
class Search:
    """How a tune searches a set it does not measure whole.

    ``strategy`` is ``"model"`` or ``"random"``. ``candidates`` is the budget: how many
    candidates a tune measures (an int), or a fraction of the set's (a float in (0, 1]; at least
    16). ``seconds``, if given, also ends the search once its measuring has taken that long.
    ``seed`` makes the random choices repeatable.
    """

    strategy: str = "model"
    candidates: int | float = 0.05
    seconds: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"search strategy {self.strategy!r} is not one of {', '.join(STRATEGIES)}")
        budget = self.candidates
        if isinstance(budget, bool) or not isinstance(budget, (int, float)):
            raise ConfigError(f"search candidates must be a count or a fraction of the set, got {budget!r}")
        if isinstance(budget, float) and not 0 < budget <= 1:
            raise ConfigError(f"search candidates {budget!r}: a fraction must be in (0, 1]")
        if isinstance(budget, int) and budget < 1:
            raise ConfigError(f"search candidates {budget!r}: measure at least one")
        seconds = self.seconds
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or not math.isfinite(seconds) or seconds <= 0):
            raise ConfigError(f"search seconds {seconds!r}: give a time > 0, or None")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"search seed {self.seed!r} must be an int")

    def budget(self, pool: int) -> int:
        """How many of ``pool`` candidates a tune measures."""
        if isinstance(self.candidates, float):
            return min(pool, max(MIN_BUDGET, math.ceil(self.candidates * pool)))
        return min(pool, self.candidates)

    def strategy_for(self, pool: Sequence[int], parameters: Sequence[Mapping[str, Any] | None]) -> Strategy:
        """The strategy for one tune over candidate indices ``pool``; ``parameters[i]`` is
        candidate ``i``'s configuration (None where it has none)."""
        if self.strategy == "model" and all(parameters[index] is not None for index in pool):
            return ModelStrategy(pool, parameters, self.budget(len(pool)), self.seed)
        return RandomStrategy(pool, self.seed)


class RandomStrategy:
    """Candidates in a seeded random order."""

    def __init__(self, pool: Sequence[int], seed: int = 0) -> None:
        self.order = list(pool)
        random.Random(seed).shuffle(self.order)

    def propose(self, observed: Mapping[int, float | None], count: int) -> list[int]:
        return [index for index in self.order if index not in observed][:count]


class ModelStrategy:
    """A covering start, then what the additive model of the timings predicts fastest."""

    def __init__(
        self, pool: Sequence[int], parameters: Sequence[Mapping[str, Any] | None], budget: int, seed: int = 0
    ) -> None:
        self.random = random.Random(seed)
        self.start = RandomStrategy(pool, seed)
        self.pool = list(pool)
        names = sorted({name for index in pool for name in parameters[index] or {}})
        self.points: dict[int, tuple[Hashable, ...]] = {
            index: tuple(_hashable((parameters[index] or {}).get(name)) for name in names) for index in pool
        }
        self.dimensions = len(names)
        self.warmup = max(BATCH, budget // 4)
        self.neighbours = _neighbours(self.points)

    def propose(self, observed: Mapping[int, float | None], count: int) -> list[int]:
        measured = {index: seconds for index, seconds in observed.items() if seconds is not None and seconds > 0}
        if len(observed) < self.warmup or len(measured) < 2 or count < 1:
            return self._covering(observed, count)
        slowest = max(measured.values())
        times = {index: observed[index] or slowest * FAILURE_PENALTY for index in observed if index in self.points}
        model = AdditiveModel(self.dimensions).fit([self.points[i] for i in times], list(times.values()))
        def predicted(index: int) -> tuple[float, int]:
            return model.predict(self.points[index]), index

        leaders = sorted(measured, key=measured.__getitem__)[:LEADERS]
        near = {n for leader in leaders for n in self.neighbours.get(leader, ()) if n not in observed}
        chosen = sorted(near, key=predicted)[: int(count * LOCAL_SHARE)]
        unobserved = [index for index in self.pool if index not in observed and index not in chosen]
        if len(unobserved) > SCORED:
            unobserved = self.random.sample(unobserved, SCORED)
        ranked = sorted(unobserved, key=predicted)
        chosen += ranked[: max(0, count - 1 - len(chosen))]
        rest = [index for index in ranked if index not in chosen]
        if len(chosen) < count and rest:  # one exploring proposal, so the model learns the rest too
            chosen.append(self.random.choice(rest))
        return chosen


    def _covering(self, observed: Mapping[int, float | None], count: int) -> list[int]:
        """The start: in a random order, each next the one that shows the model the most
        parameter values it has not seen yet, so that every value's effect is learnt early."""
        seen = {cell for index in observed if index in self.points for cell in enumerate(self.points[index])}
        window = self.start.propose(observed, COVER_WINDOW)
        chosen: list[int] = []
        while window and len(chosen) < count:
            best = max(window, key=lambda index: sum(cell not in seen for cell in enumerate(self.points[index])))
            chosen.append(best)
            window.remove(best)
            seen.update(enumerate(self.points[best]))
        return chosen


def _neighbours(points: Mapping[int, tuple[Hashable, ...]]) -> dict[int, list[int]]:
    """Each configuration's neighbours: those that differ in one parameter, by one step of its
    values in order (numbers by size, anything else as listed)."""
    dimensions = len(next(iter(points.values()), ()))
    steps: list[dict[Hashable, int]] = []
    for d in range(dimensions):
        values = list(dict.fromkeys(point[d] for point in points.values()))
        if all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values):
            values.sort()
        steps.append({value: position for position, value in enumerate(values)})
    grid = {tuple(steps[d][point[d]] for d in range(dimensions)): index for index, point in points.items()}
    found: dict[int, list[int]] = {}
    for position, index in grid.items():
        around = []
        for d in range(dimensions):
            for step in (-1, 1):
                other = grid.get((*position[:d], position[d] + step, *position[d + 1:]))
                if other is not None:
                    around.append(other)
        found[index] = around
    return found


def _hashable(value: Any) -> Hashable:
    """A parameter value as a model cell: lists and dicts as tuples."""
    if isinstance(value, Mapping):
        return tuple(sorted((key, _hashable(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(item) for item in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
