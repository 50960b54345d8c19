"""Measuring one candidate: limits, compile, grids, first launch, output check, warmups,
calibration, samples.

:func:`prepare_candidate` turns a candidate into an :class:`Arm` ready to sample, or into its result
when it cannot be sampled; a twin of a candidate prepared before it (the same launch for the call,
``twins.py``) is set aside, measured as that one. Its first launch is timed alone, against the
tune's time limit (``time_limit.py``), before anything else runs it. Every failure of the candidate
becomes a value (the rule is :func:`~wgtune.errors.candidate_failure`); only failures of the tune as
a whole propagate. Each timed sample repeats the dispatch inside one pass until the sample is long
against the clock's grain (:func:`sample_floor`), and reports seconds per dispatch. Which candidates
get how many samples is a sampling policy's business (``adaptive.py``, ``fixed.py``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import Config
from ..errors import CandidateError, DeviceLost, InvalidSamples, Launch, Mismatch, Timeout, candidate_failure
from ..gpu.device import Device, Timing, check_grid, check_limits
from ..sets.args import Args, Grid
from ..sets.kernel import Kernel
from ..sets.tunable import TunableSet
from ..store.results import Measured, Result, Stats
from .request import TuneRequest
from .time_limit import TimeLimit
from .twins import Twins

__all__ = [
    "GRAIN_MULTIPLE",
    "MAX_REPEATS",
    "WARMUP_SECONDS",
    "Arm",
    "Bench",
    "calibrate",
    "clone_args",
    "clone_written",
    "prepare_candidate",
    "sample_floor",
    "warmups_after",
]

# A dispatch is repeated at most this often in one sample: past it the clock is not the limit.
MAX_REPEATS = 4096
# Rounds of measuring a sample before settling its repeat count.
CALIBRATION_ROUNDS = 4
# Warming up stops once this long has been spent on it, the first launch included (the time
# Triton's do_bench spends warming up): on a CPU adapter one launch of a slow kernel takes longer.
WARMUP_SECONDS = 0.025
# A sample lasts at least this many grains of the device's clock: a reading is off by up to one
# grain, so a sample of 50 grains is measured to within 2%.
GRAIN_MULTIPLE = 50


def sample_floor(grain: float, config: Config) -> float:
    """The shortest a timed sample may be on a clock of ``grain`` seconds: the configured floor,
    or 50 grains if that is longer."""
    return max(config.min_sample, GRAIN_MULTIPLE * grain)


class OutputChecker(Protocol):
    """Compares a candidate's outputs with the reference's (``checks.OutputCheck``)."""

    def fresh_args(self) -> Args: ...

    async def mismatch(self, index: int, ran: Args | None = None) -> Mismatch | None: ...

    @property
    def judge(self) -> str: ...

    async def judge_all(self) -> dict[int, Mismatch]: ...




def clone_args(device: Device, args: Args) -> Args:
    """The same call on copies of all its buffers: what a tune in the page runs on (made at the
    miss, before the fallback runs on the call's own)."""
    return args.with_buffers([device.clone_buffer(buffer) for buffer in args.buffers])


def clone_written(device: Device, args: Args, written: Collection[int]) -> Args:
    """The same call on copies of the buffers in ``written`` (those a candidate may write), its
    other buffers the call's own: a candidate is then timed reading the inputs the call reads, where
    they lie in memory (on an H100 a tile's time moved by up to 26% with the set of copies it ran on,
    bench/placement.py), and the tune copies no input."""
    return args.with_buffers([device.clone_buffer(buffer) if index in written else buffer
                              for index, buffer in enumerate(args.buffers)])


async def calibrate(
    device: Device, pipeline: Any, args: Args, grid: Grid, min_sample: float, first_launch: float | None = None
) -> tuple[int, float | None]:
    """How many dispatches one sample needs to last at least ``min_sample`` seconds, and the
    last calibration reading in seconds per dispatch when it already was such a sample (the
    adaptive policy keeps it as the candidate's first sample).

    A single dispatch that already lasts a sample, where the candidate's ``first_launch`` (its
    wall-clock seconds, launch and wait included; None: unknown) did not, is read once more before
    it settles the count at one: a stall of that one reading (the host descheduled while it
    encoded) would otherwise leave a kernel of microseconds sampled one dispatch at a time, where
    a pass's own cost is most of each sample, and rule it out (issue 29: on an H200 two flat
    kernels of 9 us read 2.2 ms and 85 us so, and their group was pruned). A kernel whose first
    launch lasted a sample already (seconds on a CPU adapter) is not launched again for it."""
    repeats, confirmed = 1, first_launch is not None and first_launch >= min_sample
    for _ in range(CALIBRATION_ROUNDS + 1):
        seconds = await device.resolve(await device.profile(pipeline, args, grid, repeats))
        long_enough = math.isfinite(seconds) and seconds >= min_sample
        if repeats == 1 and long_enough and not confirmed:
            confirmed = True
            continue
        if repeats >= MAX_REPEATS or long_enough:
            return repeats, (seconds / repeats if math.isfinite(seconds) and seconds > 0 else None)
        if not math.isfinite(seconds) or seconds <= 0:
            repeats = min(MAX_REPEATS, repeats * 16)  # below the clock's grain: grow fast
        else:
            repeats = min(MAX_REPEATS, max(repeats + 1, math.ceil(repeats * min_sample * 1.2 / seconds)))
    return repeats, None


@dataclass(eq=False)
class Arm:
    """A candidate ready to sample: compiled, warmed up, its repeat count calibrated.

    ``samples`` are the valid ones, in seconds per dispatch; ``wall`` is what the candidate has
    cost the tune so far (compile, checks, warmups, calibration, samples).
    """

    index: int
    name: str
    compiled: Any
    grid: Grid
    repeats: int
    samples: list[float] = field(default_factory=list)
    invalid: int = 0
    wall: float = 0.0
    rounds: list[int] = field(default_factory=list)  # each sample's round (``Stats.rounds``)

    async def sample(self, device: Device, args: Args, count: int = 1, round_: int | None = None) -> None:
        """Take ``count`` timed samples, in round ``round_`` of the policy's rounds if given (else
        each a round of its own). Each is resolved before the next is submitted, so that no timed
        pass waits behind the tune's own earlier ones (other work on the GPU, an app's launches in
        a page, may still run beside it). Session 32 took this for the cause of the fma on 1 GiB
        arrays reading 2.2x on an H200; it was the GPU's idle clock (``gpu/wake.py``): on an H100
        ten passes submitted together read 0.97-0.99x one at a time
        (``bench/results/h100-fma-wake-ab-session33.txt``)."""
        for _ in range(count):
            try:
                handle = await device.profile(self.compiled, args, self.grid, self.repeats)
                seconds = await device.resolve(handle) / self.repeats
            except DeviceLost as lost:  # its own pass was the one in hand: the likely cause
                raise lost.naming(self.name, "a timed sample") from None
            if math.isfinite(seconds) and seconds > 0:
                self.samples.append(seconds)
                self.rounds.append(round_ if round_ is not None else next(_NO_ROUND))
            else:
                self.invalid += 1

    def record(self, seconds: float) -> None:
        """A sample taken elsewhere (the calibration's last reading), in no round."""
        self.samples.append(seconds)
        self.rounds.append(next(_NO_ROUND))

    def result(self, timing: str) -> Result:
        if not self.samples:
            return InvalidSamples(self.name)
        rounds = tuple(self.rounds) if len(self.rounds) == len(self.samples) else ()
        return Measured(self.name, self.index, Stats(tuple(self.samples), timing, rounds))


# The stamp of a sample taken in none of the policy's rounds: negative, each its own, paired with none.
_NO_ROUND = itertools.count(-1, -1)


@dataclass(frozen=True)
class Bench:
    """What measuring one key's candidates needs beyond its :class:`~wgtune.tune.request.TuneRequest`
    (the device, the set, the settings, the candidates ruled out, where steps go, and
    the pipeline cache each candidate is compiled through): the benchmark's inputs, the shortest
    sample (see :func:`sample_floor`), the output check if any, and the tune's time limit."""

    request: TuneRequest
    args: Args
    floor: float
    check: OutputChecker | None = None
    limit: TimeLimit = field(default_factory=TimeLimit)
    bar: int | None = None
    """The candidate the adaptive policy screens first: the set's default (its first candidate)
    where the plan has it. Its time is the bar the others are measured against from the start,
    so a group slow on this device is pruned after its probes even in the first batch."""
    twins: Twins | None = None
    """The tune's twins (``twins.py``): None where every candidate is measured (a search's tune)."""

    @property
    def device(self) -> Device:
        return self.request.device

    @property
    def tunables(self) -> TunableSet:
        return self.request.tunables

    @property
    def config(self) -> Config:
        return self.request.config

    @property
    def ruled_out(self) -> Mapping[int, CandidateError]:
        return self.request.ruled_out

    def step(self, message: str) -> None:
        self.request.step(message)

    async def pipeline(self, index: int) -> Any:
        """Candidate ``index``'s compiled pipeline (compiled once per device: ``PipelineCache``)."""
        return await self.request.pipelines.compile(self.tunables, index)

    async def compile_soon(self, indices: Sequence[int]) -> None:
        """Compile ``indices`` together, ahead of their preparation (``PipelineCache.compile_ahead``)."""
        indices = self._not_set_aside(indices)
        if indices:
            await self.request.pipelines.compile_ahead(self.tunables, indices)

    def compile_later(self, indices: Sequence[int], most: int) -> None:
        """Begin compiling the first ``most`` of ``indices`` (twins left out) in the background where
        the device can, and return: the candidates after the ones about to be measured, so their
        compiles overlap the measuring."""
        indices = self._not_set_aside(indices)[:most]
        if indices:
            self.request.pipelines.start_compiles(self.tunables, indices)

    def was_set_aside(self, index: int) -> bool:
        """Whether candidate ``index`` was set aside as a twin (``twins.py``)."""
        return self.twins is not None and index in self.twins.set_aside

    def _not_set_aside(self, indices: Sequence[int]) -> list[int]:
        """Those of ``indices`` worth compiling ahead: not twins of a candidate before them."""
        return list(indices) if self.twins is None else self.twins.first_of_each(indices)


async def probe_first_launch(bench: Bench, kernel: Kernel, compiled: Any, grids: list[Grid],
                             args: Args | None = None) -> Timeout | float:
    """Launch ``kernel`` once, alone, on ``args`` (default: the benchmark's), and time it against
    the tune's limit: a Timeout when it ran past it (read when it returns: a device that can stop
    a runaway earlier, a tuning process, stops it itself), else its wall time in seconds (launch
    and sync).

    Past the default limit, relative to the other candidates' first launches, it is launched once
    more and out only if that one is past it too: a wall clock on a loaded machine (a user's CI, a
    page whose event loop or GPU process was descheduled) can stall one launch of a correct kernel
    by seconds, and a Timeout is final. A limit the user set (``Config.time_limit``) is one launch.
    """
    limit, relaunched = bench.limit.seconds(), False
    seconds = await _timed_launch(bench, kernel, compiled, grids[0], args)
    if seconds > limit and bench.limit.fixed is None:
        # On the benchmark's own buffers: the check's copies keep what the first launch wrote.
        again = await _timed_launch(bench, kernel, compiled, grids[0], None)
        bench.step(f"{kernel.name}: first launch {seconds:.3g} s, past {bench.limit.describe()}; again {again:.3g} s")
        seconds, relaunched = min(seconds, again), True
    if seconds > limit:
        twice = " (launched twice)" if relaunched else ""
        return Timeout(kernel.name, f"its first launch took {seconds:.3g} s{twice}, past {bench.limit.describe()}")
    bench.limit.observe(seconds)
    return seconds


async def _timed_launch(bench: Bench, kernel: Kernel, compiled: Any, grid: Grid, args: Args | None) -> float:
    """Wall-clock seconds of one launch of ``kernel`` and a sync."""
    started = time.perf_counter()
    try:
        bench.device.dispatch(compiled, args if args is not None else bench.args, grid)
        await bench.device.sync()
    except DeviceLost as lost:  # while this candidate ran alone: the likely cause
        raise lost.naming(kernel.name, "the first launch") from None
    return time.perf_counter() - started


def warmups_after(first_launch: float, warmups: int) -> int:
    """How many of ``warmups`` launches are still to come after a first launch that took
    ``first_launch`` seconds: it was one, and warming up stops once WARMUP_SECONDS are spent
    (a kernel of seconds on a CPU adapter needs no second run to warm anything)."""
    if warmups <= 1:
        return 0
    if first_launch <= 0:
        return warmups - 1
    return min(warmups - 1, max(0, math.ceil(WARMUP_SECONDS / first_launch) - 1))


async def prepare_candidate(bench: Bench, index: int) -> Arm | Result:
    """Limits, compile, grids, first launch, output check, warmups and calibration of candidate
    ``index``.

    Answers an :class:`Arm` ready to sample, or the candidate's result when it cannot be sampled:
    its error as a value, or a bare Measured in a dry run.
    """
    device, tunables, args, config, check = bench.device, bench.tunables, bench.args, bench.config, bench.check
    kernel: Kernel = tunables.candidates[index]
    name = kernel.name
    if index in bench.ruled_out:
        return bench.ruled_out[index]
    twins = bench.twins
    if twins is not None:
        ruled_out = twins.ruled_out_with(index, bench.ruled_out)
        if ruled_out is not None:
            return ruled_out
        measured = twins.measured_as(index)
        if measured is not None:
            return twins.set_aside_for(index, measured)
    problem = check_limits(kernel, device.limits, device.features)
    if problem:
        return Launch(name, problem)
    try:
        compiled = await bench.pipeline(index)
    except Exception as error:
        return candidate_failure(name, error, "compile")
    try:
        grids = [tuple(stage.grid(args)) for stage in kernel.stages]
    except Exception as error:
        return candidate_failure(name, error, "grid")
    for stage, stage_grid in zip(kernel.stages, grids, strict=True):
        problem = check_grid(stage_grid, device.limits)
        if problem:
            return Launch(name, problem if stage is kernel else f"stage {stage.name}: {problem}")
    if all(0 in stage_grid for stage_grid in grids):  # it would do nothing, fast: unchecked, it would win
        return Launch(name, f"grid {grids[0]!r} dispatches no workgroups" if len(grids) == 1
                      else f"its stages' grids {grids!r} dispatch no workgroups")
    grid = grids[0]
    if config.dry_run:
        bench.step(f"{name}: compiled; dry run, not launched")
        if twins is not None:
            twins.prepared(index)
        return Measured(name, index, None)
    try:
        # With checks, the first launch runs on the check's own copies: it is the check's run too.
        checked = check.fresh_args() if check is not None else None
        first_launch = await probe_first_launch(bench, kernel, compiled, grids, checked)
        if isinstance(first_launch, Timeout):
            bench.step(f"{name}: {first_launch.reason}")
            return first_launch
        if check is not None:
            mismatch = await check.mismatch(index, checked)
            if mismatch is not None:
                return mismatch
        warmups = warmups_after(first_launch, config.warmups)
        for _ in range(warmups):
            device.dispatch(compiled, args, grid)
        if warmups and device.timing == Timing.GPU_TIMESTAMP:
            # Timestamps around a pass submitted behind the warmups, still queued, read more than the
            # pass, and calibration's last reading is the candidate's first sample, which decides much
            # of the median of one sampled twice (on lavapipe first readings 1.5-1.9x the next ones,
            # bench/tune_samples.py). The first launch and the check were waited for already; a
            # wall-clock pass waits for the queue itself. A wait is a round trip, some 100 ms in a
            # browser on a CPU adapter: none where no warmup was queued.
            await device.sync()
        repeats, first = await calibrate(device, compiled, args, grid, bench.floor, first_launch)
    except DeviceLost as lost:  # its first launch names it already; its warmups and calibration here
        raise lost.naming(name, "the warmups and calibration") from None
    except Exception as error:
        return candidate_failure(name, error, "launch")
    arm = Arm(index, name, compiled, grid, repeats)
    if first is not None:
        arm.record(first)
    if twins is not None:
        twins.prepared(index)
    return arm
