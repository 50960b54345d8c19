"""A surrogate of a parameter space's timings: what the model-based search predicts from.

Kernel timings over tile sizes, workgroup sizes and unroll factors are mostly a sum of a few
effects: each parameter's value on its own, and pairs of parameters together (a tile's width
and height make its register footprint; its size and the workgroup's make its occupancy). The
model is that sum, on the logarithm of the time, so a factor of two is the same step anywhere:

    log t(config) ~ mean + sum_p main[p][value_p] + sum_(p, q) pair[p, q][value_p, value_q]

Each effect is the mean residual of the configurations measured with that value (or pair of
values), shrunk toward zero by ``SHRINK`` pseudo-observations, so a value seen once moves the
prediction a little and one seen often moves it fully; the effects are fitted by backfitting
(each term refitted to the residual of the others, a few sweeps). A value never measured has
no effect: the model predicts the average for it. Fitting costs ``observations x terms`` per
sweep and predicting ``terms`` dict lookups per configuration, in plain Python (it runs in
Pyodide too), which is why it is this model and not a Gaussian process.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence

__all__ = ["AdditiveModel"]

# Pseudo-observations each effect is shrunk toward zero by.
SHRINK = 1.0
# Backfitting sweeps over the terms.
SWEEPS = 4

Point = Sequence[Hashable]


class AdditiveModel:
    """Main effects and pairwise interactions of categorical parameters on log time."""

    def __init__(self, dimensions: int, pairs: bool = True) -> None:
        self.terms: list[tuple[int, ...]] = [(d,) for d in range(dimensions)]
        if pairs:
            self.terms += list(itertools.combinations(range(dimensions), 2))
        self.mean = 0.0
        self.effects: list[dict[tuple, float]] = [{} for _ in self.terms]

    def fit(self, points: Sequence[Point], seconds: Sequence[float]) -> AdditiveModel:
        """Fit to measured times (seconds > 0), one per point."""
        targets = [math.log(value) for value in seconds]
        self.mean = sum(targets) / len(targets) if targets else 0.0
        cells = [[tuple(point[d] for d in term) for point in points] for term in self.terms]
        contribution = [[0.0] * len(points) for _ in self.terms]
        residual = [target - self.mean for target in targets]
        for _ in range(SWEEPS):
            for t, term_cells in enumerate(cells):
                sums: dict[tuple, float] = {}
                counts: dict[tuple, int] = {}
                own = contribution[t]
                for i, cell in enumerate(term_cells):
                    residual[i] += own[i]  # this term's part back in: refit it alone
                    sums[cell] = sums.get(cell, 0.0) + residual[i]
                    counts[cell] = counts.get(cell, 0) + 1
                effect = {cell: sums[cell] / (counts[cell] + SHRINK) for cell in sums}
                self.effects[t] = effect
                for i, cell in enumerate(term_cells):
                    own[i] = effect[cell]
                    residual[i] -= own[i]
        return self

    def predict(self, point: Point) -> float:
        """The predicted log time of a configuration."""
        total = self.mean
        for term, effect in zip(self.terms, self.effects, strict=True):
            total += effect.get(tuple(point[d] for d in term), 0.0)
        return total
