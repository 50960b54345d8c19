"""One tune of one key, from the call to its :class:`~wgtune.outcome.TuneOutcome`.

What a tune does, in order: wait for work submitted before it (its errors are not the
candidates'), learn the clock's grain (``clock.py``), make the benchmark's inputs (copies of the
call's buffers, or the set's ``input_gen``), plan the key's candidates (``plan.py``), set up the
output checks if asked for (``checks.py``), sample with the configured policy (``adaptive.py``
or ``fixed.py``) or the set's search (``search.py``, over the adaptive sampling), and rank what
was measured (``ranking.py``). What the tune's answer then changes (the tune cache, the store,
the record, the events) is the tuner's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from .adaptive import sample_adaptively, search_adaptively
from .args import Args
from .checks import OutputCheck
from .clock import clock_grain
from .config import Config, Policy
from .device import Device
from .errors import CandidateError, ConfigError, NoValidKernelFound
from .events import TrialFinished
from .fixed import sample_fixed
from .key import Key
from .measure import Bench, LaunchGuard, clone_args, sample_floor
from .outcome import TuneOutcome
from .pipelines import PipelineCache
from .plan import Plan
from .ranking import decide
from .results import Result
from .sampling import SamplingPolicy, short_circuit_limit
from .time_limit import TimeLimit
from .tunable import TunableSet

__all__ = ["POLICIES", "measure_key"]

POLICIES: dict[Policy, SamplingPolicy] = {Policy.ADAPTIVE: sample_adaptively, Policy.FIXED: sample_fixed}


async def measure_key(
    device: Device,
    pipelines: PipelineCache,
    config: Config,
    tunables: TunableSet,
    key: Key,
    args: Args,
    emit: Callable[[object], None],
    step: Callable[[str], None],
    guard: LaunchGuard | None = None,
    ruled_out: Mapping[int, CandidateError] | None = None,
) -> TuneOutcome:
    """Measure ``key``'s candidates on a copy of the call ``args`` and rank them (see the module
    doc). Each candidate's result is emitted as a TrialFinished event as it comes; ``step``
    receives the log's steps; ``guard`` runs each first launch where a runaway can be stopped;
    ``ruled_out`` candidates are not launched, their failures taken as they are. Raises
    NoValidKernelFound when no candidate was measured."""
    ruled_out = ruled_out or {}
    await device.sync()
    floor = sample_floor(await clock_grain(device), config)
    bench_args = tunables.input_gen(device, key, args) if tunables.input_gen else clone_args(device, args)
    plan = Plan(tunables.candidates, key)
    check = None
    if config.checks and not config.dry_run:
        if not tunables.outputs:
            raise ConfigError(f"output checks are on, but tunable set {tunables.name!r} has no outputs to compare: "
                              "its first candidate declares no var<storage, read_write> and the set gives no "
                              "outputs= (give them, or tune it with checks off)")
        check = OutputCheck(device, tunables, bench_args, pipelines, skipped=[*plan.skipped, *ruled_out])

    def on_trial(index: int, result: Result, wall: float) -> None:
        emit(TrialFinished(tunables.name, key, index, result, wall))

    async def pipeline(index: int) -> object:
        return await pipelines.compile(tunables, index)

    # The set's default (its first candidate) is screened first where the plan has it: it sets the
    # bar. It is the checks' reference too, so it is compiled with the first candidates measured.
    default = 0 if 0 not in plan.skipped and 0 not in ruled_out else None
    reference = [0] if check is not None and default is not None else []

    async def compile_ahead(indices: Sequence[int]) -> None:
        await pipelines.compile_ahead(tunables, [*reference, *indices])

    time_limit = TimeLimit(config.time_limit)
    bench = Bench(device, tunables, bench_args, config, pipeline, floor, check, step, time_limit, guard, ruled_out,
                  compile_ahead, lambda indices: pipelines.start_compiles(tunables, indices), bar=default)
    limit = short_circuit_limit(tunables, key)
    if tunables.search is not None:
        sampled = await search_adaptively(tunables.search, bench, plan, on_trial, limit)
    else:
        sampled = await POLICIES[config.policy](bench, plan, on_trial, limit)
    outcome = decide(tunables, key, plan, sampled, config)
    if outcome is None:
        raise NoValidKernelFound(tunables.name, key, tuple(sampled.all_results(tunables, plan)))
    return replace(outcome, checked=check is not None)
