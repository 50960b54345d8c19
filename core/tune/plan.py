"""The plan: which candidates to benchmark, batch by batch.

Candidates without a group form part of the first batch. Grouped candidates come in levels: the
group with the highest priority first, and within it the candidates of its highest priority;
each later batch is the next level. A negative priority, of a group or within one, skips.
The fixed policy stops after the first batch in which a candidate was measured, so priorities
decide what it benchmarks at all, not only in which order. (The seed stops after the first batch
that queued anything; a batch whose launches all failed to measure moves on here too.) The
adaptive policy screens every batch in this order (:meth:`Plan.order`): the likeliest winners
first set the bar the rest are dropped against. An exhausted plan yields an empty batch.
"""

from __future__ import annotations

from ..key import Key
from ..sets.kernel import Kernel, Priority

__all__ = ["Plan"]


def _priority(priority: Priority, key: Key) -> int:
    return priority(key) if callable(priority) else priority


class Plan:
    """Batches of candidate indices for one key, in the order to benchmark them."""

    def __init__(self, candidates: tuple[Kernel, ...], key: Key) -> None:
        ungrouped: list[int] = []
        levels: dict[tuple[int, int, int], list[int]] = {}
        self.skipped: list[int] = []
        group_priorities: dict[str, int] = {}
        for index, candidate in enumerate(candidates):
            within = _priority(candidate.priority, key)
            if candidate.group is None:
                (ungrouped if within >= 0 else self.skipped).append(index)
                continue
            group = candidate.group
            if group.name not in group_priorities:
                group_priorities[group.name] = _priority(group.priority, key)
            outer = group_priorities[group.name]
            if outer < 0 or within < 0:
                self.skipped.append(index)
                continue
            # Two groups of equal priority stay apart: the level is (group priority, group order).
            order = list(group_priorities).index(group.name)
            levels.setdefault((outer, -order, within), []).append(index)
        self._batches: list[list[int]] = [
            levels[level] for level in sorted(levels, reverse=True)
        ]
        if ungrouped:
            if self._batches:
                self._batches[0] = ungrouped + self._batches[0]
            else:
                self._batches = [ungrouped]
        self.planned: frozenset[int] = frozenset(index for batch in self._batches for index in batch)
        """Every candidate some batch holds (the rest are ``skipped``), however many are taken."""

    def next(self) -> list[int]:
        """The next batch of candidate indices, or ``[]`` once the plan is exhausted."""
        return self._batches.pop(0) if self._batches else []

    def order(self) -> list[int]:
        """Every remaining batch, one after another: what the adaptive policy screens."""
        batches, self._batches = self._batches, []
        return [index for batch in batches for index in batch]

    def remaining(self) -> list[list[int]]:
        return [list(batch) for batch in self._batches]

    def __repr__(self) -> str:
        return f"Plan(batches={self._batches}, skipped={self.skipped})"
