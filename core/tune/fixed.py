"""The fixed sampling policy (``Config.policy = "fixed"``), the policy of CubeCL's tuner.

The plan's batches in turn; each candidate of a batch is warmed up, then sampled
``Config.samples`` times one after another; the tune stops after the first batch in which a
candidate was measured. Ranked by ``0.8 * min + 0.2 * median`` (``results.Stats.score``). Kept
beside the adaptive policy as the reference it is measured against (``bench/regret.py``) and
for users who want the same samples for every candidate.
"""

from __future__ import annotations

import time

from ..errors import candidate_failure
from ..store.results import Measured, Result
from .measure import Arm, Bench, prepare_candidate
from .plan import Plan
from .sampling import OnTrial, Sampled

__all__ = ["run_candidate", "sample_fixed"]


async def run_candidate(bench: Bench, index: int) -> Result:
    """Measure candidate ``index`` the fixed way: ``config.samples`` samples, one after another.

    Every failure of the candidate is a value. The calibration reading is not kept, so every
    candidate has exactly ``config.samples`` samples.
    """
    arm = await prepare_candidate(bench, index)
    if not isinstance(arm, Arm):
        return arm
    arm.samples.clear()
    arm.rounds.clear()
    samples = bench.config.samples
    try:
        await arm.sample(bench.device, bench.args, samples)
    except Exception as error:
        return candidate_failure(arm.name, error, "launch")
    bench.step(f"{arm.name}: {len(arm.samples)} of {samples} samples valid, {arm.repeats} dispatches a sample")
    return arm.result(bench.device.timing)


async def sample_fixed(bench: Bench, plan: Plan, on_trial: OnTrial, limit: float | None = None) -> Sampled:
    """Batch by batch, ``config.samples`` samples per candidate (see the module doc)."""
    sampled = Sampled()
    while True:
        batch = plan.next()
        if not batch:
            return sampled
        bench.step(f"batch {batch}")
        await bench.compile_soon(batch)
        for index in batch:
            started = time.perf_counter()
            result = await run_candidate(bench, index)
            wall = time.perf_counter() - started
            if not bench.was_set_aside(index):  # a twin set aside did not run
                sampled.order.append(index)
            measured = isinstance(result, Measured) and result.stats is not None
            sampled.record(index, result, wall, len(result.stats.samples) if measured else 0)
            on_trial(index, result, wall)
            if measured and limit is not None and result.stats.median <= limit:
                sampled.short_circuit = index
                return sampled
        if any(isinstance(sampled.results[index], Measured) for index in batch):
            return sampled
