"""One tune of one key, from the call to its :class:`~wgtune.tune.outcome.TuneOutcome`.

What a tune does, in order: plan the key's candidates (``plan.py``) and begin compiling the first
ones where the device compiles in the background, wait for work submitted before it (its errors are
not the candidates'), load an idle GPU ahead of its first wake (``gpu/wake.py``), make the
benchmark's inputs (the call's own buffers, with copies of those a candidate may write; the tune's
copies of them all where the tuner made them at the miss; or the set's ``input_gen``), set up the
output checks (``checks.py``, on unless turned off: the WGSL of the candidates the plan may run is
reflected first, a slice at a time between ``Device.pause``), bring the GPU's clock up (the setup
ran while the load ramped it), learn the clock's grain (``clock.py``), sample with the configured
policy (``adaptive.py`` or ``fixed.py``) or the set's search (``search.py``, over the adaptive
sampling), give the checks' verdicts, and rank what was measured (``ranking.py``).
What the tune's answer then changes (the tune cache, the store, the record, the events) is the
tuner's business.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from ..config import Policy
from ..errors import Mismatch, NoValidKernelFound
from ..gpu.clock import clock_grain
from ..gpu.wake import load, wake
from ..sets.shaders import shader_of
from ..sets.tunable import TunableSet
from ..store.results import Measured, Result
from .adaptive import sample_adaptively
from .checks import OutputCheck, written_buffers
from .events import TrialFinished
from .fixed import sample_fixed
from .log import logger
from .measure import Bench, clone_written, sample_floor
from .outcome import TuneOutcome
from .plan import Plan
from .ranking import decide
from .request import TuneRequest
from .sampling import Sampled, SamplingPolicy, short_circuit_limit
from .search_driver import search_adaptively
from .time_limit import TimeLimit
from .twins import Twins

__all__ = ["POLICIES", "measure_key"]

POLICIES: dict[Policy, SamplingPolicy] = {Policy.ADAPTIVE: sample_adaptively, Policy.FIXED: sample_fixed}
# Seconds of reflecting candidates' WGSL between two of the device's pauses (a page's task).
REFLECT_SLICE = 0.01


async def measure_key(request: TuneRequest) -> TuneOutcome:
    """Measure the request's key's candidates on the call (its written buffers copied) and rank them (see the
    module doc). Each candidate's result is emitted as a TrialFinished event as it comes.
    Raises NoValidKernelFound when no candidate was measured."""
    device, config, tunables, key, pipelines = (request.device, request.config, request.tunables, request.key,
                                                request.pipelines)
    plan = Plan(tunables.candidates, key)
    # The set's default (its first candidate) is screened first where the plan has it: it sets the bar.
    default = 0 if 0 in plan.planned and 0 not in request.ruled_out else None
    # Twins (twins.py) on the call's launches (and the benchmark's, below, where the set makes its inputs).
    twins = None if tunables.search is not None else Twins(tunables.candidates, [request.args])
    _begin_first_compiles(request, plan, default, twins)
    await device.sync()
    wake_limit = 0.0 if config.dry_run else config.wake
    loaded = await load(device, wake_limit)  # a first wake's load: the setup below runs while it ramps
    among = None if tunables.search is not None else plan.planned - set(request.ruled_out)
    checking = config.checks and not config.dry_run and bool(tunables.outputs)
    copies_written = tunables.input_gen is None and not request.snapshot
    written = None  # the call's buffers some candidate the tune may run writes: what its copies and checks copy
    if checking or copies_written:
        await _reflect(request, among)  # what the checks and the copies ask of the WGSL, ahead of them
        if tunables.input_gen is None:  # generated inputs are other buffers, which the check works out itself
            written = written_buffers(tunables, request.args, among)
    if tunables.input_gen is not None:
        bench_args = tunables.input_gen(device, key, request.args)
    elif request.snapshot:
        bench_args = request.args
    else:
        bench_args = clone_written(device, request.args, written)
    check = None
    if config.checks and not config.dry_run:
        if tunables.outputs:
            check = OutputCheck(device, tunables, bench_args, pipelines, among=among, written=written)
        elif not tunables.outputs_given:
            _say_once(tunables.name, "tunable set %s has no outputs to compare: its first candidate declares no "
                      "var<storage, read_write> wgtune can read, so its winners are not checked; give outputs= (or "
                      "outputs=() to say there is nothing to check)")
    elif tunables.reference is not None and not config.dry_run:
        _say_once(tunables.name, "tunable set %s has a reference, but output checks are off: it is not called")

    await device.sync()  # the setup's errors are the setup's, not the wake's spin kernel's
    woke = await wake(device, wake_limit, loaded)  # while the first compiles run
    if woke is not None:
        request.step(woke.describe())
    floor = sample_floor(await clock_grain(device), config)

    def on_trial(index: int, result: Result, wall: float) -> None:
        request.emit(TrialFinished(tunables.name, key, index, result, wall))

    if twins is not None and tunables.input_gen is not None:
        twins.also_on(bench_args)
    bench = Bench(request, bench_args, floor, check, TimeLimit(config.time_limit), bar=default, twins=twins)
    limit = short_circuit_limit(tunables, key)
    if tunables.search is not None:
        sampled = await search_adaptively(tunables.search, bench, plan, on_trial, limit)
    else:
        sampled = await POLICIES[config.policy](bench, plan, on_trial, limit)
    warning = await _judge(check, sampled, on_trial) if check is not None else None
    if twins is not None:
        warning = _share_fates(tunables, twins, sampled, on_trial) or warning
    if warning is not None:
        request.step(warning)
        await pipelines.distrust(tunables, [index for index, result in sampled.results.items()
                                            if isinstance(result, Mismatch)])
    outcome = decide(tunables, key, plan, sampled, config)
    if outcome is None:
        raise NoValidKernelFound(tunables.name, key, tuple(sampled.all_results(tunables, plan)))
    return replace(outcome, checked=config.checks and not config.dry_run,
                   judge=check.judge if check is not None else "", warning=warning)


def _share_fates(tunables: TunableSet, twins: Twins, sampled: Sampled,
                 on_trial: Callable[[int, Result, float], None]) -> str | None:
    """Each twin set aside for a candidate that failed once prepared (its samples, its checks'
    verdict) fails as it did: the same launch. So does each candidate never run whose launch is that
    of a candidate found wrong: it must not serve as the set's fallback. Answers a warning where the
    set's default is found wrong so (the tuner then stops using it as the fallback), else None."""
    wrong = [index for index, result in sampled.results.items() if isinstance(result, Mismatch)]
    warning = None
    for index, kernel in enumerate(tunables.candidates):
        measured = twins.set_aside.get(index)
        if measured is None and index not in sampled.results and wrong:
            measured = next((other for other in wrong if twins.same_launch(index, other)), None)
        result = sampled.results.get(measured) if measured is not None else None
        if result is None or isinstance(result, Measured):
            continue
        failure = replace(result, name=kernel.name, reason=f"launches exactly as {result.name}: {result.reason}")
        sampled.results[index] = failure
        on_trial(index, failure, 0.0)
        if index == 0 and isinstance(failure, Mismatch):
            warning = f"candidate 0 ({kernel.name}), the set's default, is wrong here: {failure.reason}"
    return warning


def _begin_first_compiles(request: TuneRequest, plan: Plan, default: int | None, twins: Twins | None) -> None:
    """Begin compiling the candidates screened first (the set's ``default`` and the plan's first
    batch) where the device compiles in the background: they compile on the host's free cores
    while the tune waits for the queue, reads the clock, copies the inputs and sets up the checks
    (a cold first tune on an H200 waited 0.48 s for them after its setup; begun here, 0.10-0.20 s)."""
    if not request.device.background_compiles or twins is None:  # twins is None in a search's tune
        return
    batches = plan.remaining()
    first = ([] if default is None else [default]) + (batches[0] if batches else [])
    first = twins.first_of_each(first)  # a twin is compiled if it runs
    request.pipelines.start_compiles(request.tunables, [index for index in first if index not in request.ruled_out])


async def _reflect(request: TuneRequest, among: frozenset[int] | None) -> None:
    """Reflect the WGSL of the candidates the checks read (``among``; None: all, where a search
    proposes them) ahead of them, a slice at a time with ``Device.pause`` between slices: in a
    page the reflection of a set's candidates is Python work of 0.1-0.3 s on the main thread,
    one long task unbroken."""
    since = time.perf_counter()
    for index, kernel in enumerate(request.tunables.candidates):
        if among is not None and index not in among:
            continue
        for stage in kernel.stages:
            shader_of(stage)
        if time.perf_counter() - since >= REFLECT_SLICE:
            await request.device.pause()
            since = time.perf_counter()


_SAID: set[tuple[str, str]] = set()


def _say_once(set_name: str, message: str) -> None:
    """Log ``message`` (``%s``: the set's name) once per set: what its tunes cannot check."""
    if (set_name, message) not in _SAID:
        _SAID.add((set_name, message))
        logger.warning(message, set_name)


async def _judge(check: OutputCheck, sampled: Sampled, on_trial: Callable[[int, Result, float], None]) -> str | None:
    """The check's verdicts given to the candidates that ran (a candidate outvoted once every
    candidate ran becomes a Mismatch, and said so again); the short circuit dropped if its
    candidate is among them. Answers the check's warning about candidate 0, if any."""
    for index, verdict in (await check.judge_all()).items():
        if isinstance(sampled.results.get(index), Measured):
            sampled.results[index] = verdict
            on_trial(index, verdict, sampled.walls.get(index, 0.0))
        if sampled.short_circuit == index:
            sampled.short_circuit = None
    return check.warning
