"""Search: which candidates a tune measures when a set is too large to measure them all.

A parameter space of thousands of configurations cannot be tuned candidate by candidate: each
one is a compile and a screening. ``TunableSet(..., search=Search(...))`` makes a tune measure
only a budget of them, chosen by a strategy, with the adaptive sampling as its measuring core
(``wgtune.tune.search_driver``): the default candidate first, then the strategy's proposals in
batches, each screened like any candidate (compile, checks, first sample, dropped at twice the
leader's time), then the adaptive rounds settle the survivors. Candidates never proposed are
``Skip`` results that say so.

Strategies are registered by name with their options (``registry.py``); every one answers
``propose(observed, count)``: up to ``count`` candidate indices not yet observed, given what was
observed so far (index -> seconds per dispatch, or None for a candidate that failed). Strategies
never touch a device, so they are tested, and compared on recorded timings (``bench/search.py``,
``tests/test_search_sweep.py``), without one. The two registered here:

- ``"random"``: candidates in a seeded random order. No options.
- ``"model"`` (the default): a start that covers every parameter value early (random, each next
  one chosen to show values not yet measured), then the candidates an additive model of the
  timings (``surrogate.py``, fitted to what was measured) predicts fastest: most of each batch
  among the current leader's neighbours (one parameter one step away), the rest in the whole
  space, and one random proposal so the model keeps learning about the rest of the space. It needs the
  candidates' parameters (``Kernel.configuration``, which :class:`~wgtune.sets.space.Space` sets); a set
  without them is searched at random. Its options are :class:`ModelOptions`' fields.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .registry import Strategy, StrategyFactory, configure_strategy, option_error, register_strategy
from .surrogate import AdditiveModel

__all__ = ["BATCH", "ModelOptions", "ModelStrategy", "RandomOptions", "RandomStrategy", "Search", "Strategy"]

# Proposals asked for per batch: the model is refitted between batches.
BATCH = 8
# The fewest candidates a search measures, whatever its fraction.
MIN_BUDGET = 16


@dataclass(frozen=True)
class Search:
    """How a tune searches a set it does not measure whole.

    ``strategy`` names a registered strategy (``"model"``, ``"random"``, or one given to
    :func:`~wgtune.search.registry.register_strategy`); ``options`` are its own settings, checked
    here (an unknown or bad one is a ``ConfigError`` naming the strategy and the option).
    ``candidates`` is the budget: how many candidates a tune measures (an int), or a fraction of
    the set's (a float in (0, 1]; at least 16). ``seconds``, if given, also ends the search once
    its measuring has taken that long. ``seed`` makes the random choices repeatable.
    """

    strategy: str = "model"
    candidates: int | float = 0.05
    seconds: float | None = None
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    configured: StrategyFactory = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options) if isinstance(self.options, Mapping) else self.options)
        object.__setattr__(self, "configured", configure_strategy(self.strategy, self.options))
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
        return self.configured.start(pool, parameters, self.budget(len(pool)), self.seed)


# -- "random" ------------------------------------------------------------------------------------


@register_strategy("random")
@dataclass(frozen=True)
class RandomOptions:
    """``"random"``: the pool in a seeded random order. No options."""

    def start(
        self, pool: Sequence[int], parameters: Sequence[Mapping[str, Any] | None], budget: int, seed: int
    ) -> Strategy:
        return RandomStrategy(pool, seed)


class RandomStrategy:
    """Candidates in a seeded random order."""

    def __init__(self, pool: Sequence[int], seed: int = 0) -> None:
        self.order = list(pool)
        random.Random(seed).shuffle(self.order)

    def propose(self, observed: Mapping[int, float | None], count: int) -> list[int]:
        return [index for index in self.order if index not in observed][:count]


# -- "model" -------------------------------------------------------------------------------------


def _check_fraction(option: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise option_error("model", option, value, "a fraction in [0, 1]")


def _check_count(option: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise option_error("model", option, value, "a count of at least 1")


@register_strategy("model")
@dataclass(frozen=True)
class ModelOptions:
    """``"model"``'s options (see the module doc); the defaults are those the H200 replays chose.

    - ``local_share``: the share of a batch taken among the leader's neighbours (the rest from
      the whole space, as the model ranks it).
    - ``leaders``: how many of the fastest measured candidates have their neighbours ranked first.
    - ``warmup``: the share of the budget spent on the covering start before the model is used
      (at least one batch).
    - ``failure_penalty``: a failed candidate counts for the model as this many times the
      slowest measured one (so the model steers away from its values).
    - ``scored``: candidates the model scores per batch at most (a random subset of the rest
      beyond it).
    - ``cover_window``: candidates, in the random order, among which the start picks those that
      show unseen values.
    """

    local_share: float = 0.75
    leaders: int = 1
    warmup: float = 0.25
    failure_penalty: float = 4.0
    scored: int = 4096
    cover_window: int = 300

    def __post_init__(self) -> None:
        _check_fraction("local_share", self.local_share)
        _check_fraction("warmup", self.warmup)
        _check_count("leaders", self.leaders)
        _check_count("scored", self.scored)
        _check_count("cover_window", self.cover_window)
        penalty = self.failure_penalty
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not (
            math.isfinite(penalty) and penalty >= 1
        ):
            raise option_error("model", "failure_penalty", penalty, "a finite factor >= 1")

    def start(
        self, pool: Sequence[int], parameters: Sequence[Mapping[str, Any] | None], budget: int, seed: int
    ) -> Strategy:
        if all(parameters[index] is not None for index in pool):
            return ModelStrategy(pool, parameters, budget, seed, self)
        return RandomStrategy(pool, seed)


class ModelStrategy:
    """A covering start, then what the additive model of the timings predicts fastest."""

    def __init__(
        self, pool: Sequence[int], parameters: Sequence[Mapping[str, Any] | None], budget: int, seed: int = 0,
        options: ModelOptions | None = None,
    ) -> None:
        self.options = options = options or ModelOptions()
        self.random = random.Random(seed)
        self.start = RandomStrategy(pool, seed)
        self.pool = list(pool)
        names = sorted({name for index in pool for name in parameters[index] or {}})
        self.points: dict[int, tuple[Hashable, ...]] = {
            index: tuple(_hashable((parameters[index] or {}).get(name)) for name in names) for index in pool
        }
        self.dimensions = len(names)
        self.warmup = max(BATCH, int(budget * options.warmup))
        self.neighbours = _neighbours(self.points)

    def propose(self, observed: Mapping[int, float | None], count: int) -> list[int]:
        measured = {index: seconds for index, seconds in observed.items() if seconds is not None and seconds > 0}
        if len(observed) < self.warmup or len(measured) < 2 or count < 1:
            return self._covering(observed, count)
        slowest = max(measured.values())
        failed = slowest * self.options.failure_penalty
        times = {index: observed[index] or failed for index in observed if index in self.points}
        model = AdditiveModel(self.dimensions).fit([self.points[i] for i in times], list(times.values()))

        def predicted(index: int) -> tuple[float, int]:
            return model.predict(self.points[index]), index

        leaders = sorted(measured, key=measured.__getitem__)[: self.options.leaders]
        near = {n for leader in leaders for n in self.neighbours.get(leader, ()) if n not in observed}
        chosen = sorted(near, key=predicted)[: int(count * self.options.local_share)]
        unobserved = [index for index in self.pool if index not in observed and index not in chosen]
        if len(unobserved) > self.options.scored:
            unobserved = self.random.sample(unobserved, self.options.scored)
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
        window = self.start.propose(observed, self.options.cover_window)
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
