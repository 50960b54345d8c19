"""One search over one tune's pool, as a pure exchange: it says which candidates to measure next,
and is told what each showed.

The tune's driver (``wgtune.tune.search_driver``) measures; a replay on recorded timings
(``bench/search.py --replay``, ``tests/test_search_sweep.py``: :func:`replay`) looks the times
up instead. Both go through this object, so what a replay shows is what a tune does::

    run = SearchRun(search, pool, parameters)
    while batch := run.next_batch():
        for index in batch:
            run.observe(index, seconds_of(index))  # None: the candidate failed

The first batch is the pool's first candidate alone (the set's default: it sets the bar); then
the strategy's proposals, ``BATCH`` at a time, until the budget is observed or the strategy has
nothing more to propose. A proposal outside the pool, already observed, repeated or past the
count asked for is the strategy's error, raised here, never measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from .strategies import BATCH, Search

__all__ = ["SearchRun", "replay"]


class SearchRun:
    """The candidates ``search`` measures of ``pool`` (see the module doc); ``parameters[i]`` is
    candidate ``i``'s configuration, None where it has none."""

    def __init__(self, search: Search, pool: Sequence[int], parameters: Sequence[Mapping[str, Any] | None]) -> None:
        self.search = search
        self.pool = list(pool)
        self.members = set(self.pool)
        self.budget = search.budget(len(self.pool))
        self.strategy = search.strategy_for(self.pool, parameters)
        self.observed: dict[int, float | None] = {}
        self.asked: list[int] = []

    def next_batch(self) -> list[int]:
        """The candidates to measure next; empty once the search is over."""
        missing = [index for index in self.asked if index not in self.observed]
        if missing:
            raise RuntimeError(f"search: candidates {missing} were asked for and never observed")
        if not self.observed:
            self.asked = self.pool[:1]
            return list(self.asked)
        count = min(BATCH, self.budget - len(self.observed))
        if count <= 0:
            self.asked = []
            return []
        proposed = list(self.strategy.propose(dict(self.observed), count))
        self._check(proposed, count)
        self.asked = proposed
        return list(proposed)

    def observe(self, index: int, seconds: float | None) -> None:
        """What candidate ``index`` of the last batch showed: seconds per dispatch, or None."""
        if index not in self.asked:
            raise RuntimeError(f"search: candidate {index} was not asked for")
        self.observed[index] = seconds

    def _check(self, proposed: list[int], count: int) -> None:
        name = self.search.strategy
        if len(proposed) > count:
            raise ConfigError(f"search strategy {name!r} proposed {len(proposed)} candidates, asked for {count}")
        seen: set[int] = set()
        for index in proposed:
            if index not in self.members:
                raise ConfigError(f"search strategy {name!r} proposed {index!r}, not a candidate of the pool")
            if index in self.observed or index in seen:
                raise ConfigError(f"search strategy {name!r} proposed candidate {index} again")
            seen.add(index)


def replay(
    search: Search, parameters: Sequence[Mapping[str, Any] | None], seconds: Callable[[int], float | None]
) -> list[list[int]]:
    """The batches ``search`` measures of a set whose candidates' times are known (``seconds(i)``:
    candidate ``i``'s seconds per dispatch, None where it fails), the pool being every candidate
    in order, as a tune of a set without a plan's priorities sees it."""
    run = SearchRun(search, range(len(parameters)), parameters)
    batches = []
    while batch := run.next_batch():
        batches.append(batch)
        for index in batch:
            run.observe(index, seconds(index))
    return batches
