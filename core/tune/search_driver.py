"""The search driver: a tune of a set with a ``Search`` measures what its strategy proposes.

The strategy (``wgtune.search``) says which candidates to measure, through a
:class:`~wgtune.search.run.SearchRun`; this module measures them with the adaptive policy
(``adaptive.py``): each batch is screened like any candidate (compile, checks, first sample,
dropped at twice the leader's time), what the screening showed goes back to the strategy, and
once the search is over the adaptive rounds settle the survivors. The candidates never proposed
are recorded under one reason (``Sampled.not_chosen``), so a stored entry keeps them as nulls.
"""

from __future__ import annotations

import time

from ..search.run import SearchRun
from ..search.strategies import Search
from .adaptive import AdaptiveSampler
from .measure import Bench
from .plan import Plan
from .sampling import OnTrial, Sampled

__all__ = ["search_adaptively"]


async def search_adaptively(
    search: Search, bench: Bench, plan: Plan, on_trial: OnTrial, limit: float | None = None
) -> Sampled:
    """Measure a budget of the plan's candidates chosen by ``search``'s strategy, then settle the
    survivors as :func:`~wgtune.tune.adaptive.sample_adaptively` does.

    The plan's first candidate (the set's default, unless the plan skips it) is screened first:
    it sets the bar. Then the strategy proposes batches until the budget of candidates is
    screened, ``search.seconds`` have passed, or a candidate short-circuits the tune (``limit``:
    the set's short-circuit time for the key, if any).
    """
    pool = plan.order()
    run = SearchRun(search, pool, [kernel.configuration for kernel in bench.tunables.candidates])
    policy = AdaptiveSampler(bench, on_trial, limit)
    started = time.perf_counter()
    while batch := run.next_batch():
        if await policy.screen(batch, first=batch):
            return policy.finish()
        for index in batch:
            run.observe(index, policy.observed(index))
        if search.seconds is not None and time.perf_counter() - started >= search.seconds:
            bench.step(f"search: {search.seconds}s spent after {len(run.observed)} candidates")
            break
    measured = len(run.observed)
    bench.step(f"search ({search.strategy}): screened {measured} of {len(pool)} candidates")
    policy.sampled.not_chosen = f"not run: the search ({search.strategy}) measured {measured} of {len(pool)}"
    await policy.rounds()
    return policy.finish()
