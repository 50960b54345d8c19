"""Benchmarking one candidate: limits, compile, optional output check, warmups, timed samples.

Every failure of the candidate becomes a value (see ``errors.py``); only failures of the tune
as a whole propagate. Each timed sample repeats the dispatch inside one pass until the sample
is long against the clock's grain (``Config.min_sample``), and reports seconds per dispatch.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .config import Config
from .device import Device, check_grid, check_limits
from .errors import (
    CandidateError,
    ConfigError,
    InvalidSamples,
    KernelError,
    Launch,
    Mismatch,
    TuneFailed,
    Unknown,
    WgtuneError,
)
from .results import Outcome, Result, Stats
from .tunable import Args, Grid, Kernel, TunableSet

__all__ = [
    "MAX_REPEATS",
    "Arm",
    "Bench",
    "OutputCheck",
    "calibrate",
    "clone_args",
    "prepare_candidate",
    "run_candidate",
    "sample_floor",
]

# A dispatch is repeated at most this often in one sample: past it the clock is not the limit.
MAX_REPEATS = 4096
# Rounds of measuring a sample before settling its repeat count.
CALIBRATION_ROUNDS = 4
# A sample lasts at least this many grains of the device's clock: a reading is off by up to one
# grain, so a sample of 50 grains is measured to within 2%.
GRAIN_MULTIPLE = 50


def sample_floor(device: Device, config: Config) -> float:
    """The shortest a timed sample may be on ``device``: the configured floor, or 50 grains of
    its clock if that is longer."""
    return max(config.min_sample, GRAIN_MULTIPLE * device.clock_grain)

PipelineGetter = Callable[[int], Awaitable[Any]]


def clone_args(device: Device, args: Args) -> Args:
    """The same call on copies of its buffers: what benchmarks run on, by default."""
    return args.with_buffers([device.clone_buffer(buffer) for buffer in args.buffers])


class OutputCheck:
    """Runs candidates on identical inputs and compares their outputs with the reference's.

    The reference is the first candidate, in the set's order, that compiles and runs: a set's
    first candidate is its trusted default. Each run gets fresh copies of the pristine benchmark
    inputs, so kernels that write in place cannot skew one another.
    """

    def __init__(
        self, device: Device, tunables: TunableSet, args: Args, pipeline: PipelineGetter, skipped=()
    ) -> None:
        bad = [index for index in tunables.outputs if not 0 <= index < len(args.buffers)]
        if bad:
            raise ConfigError(
                f"tunable set {tunables.name!r}: outputs {bad} are not buffers of a call with {len(args.buffers)}"
            )
        self.device = device
        self.skipped = frozenset(skipped)  # the plan's skips for this key may not fit the call
        self.tunables = tunables
        self.pristine = clone_args(device, args)
        self.pipeline = pipeline
        self.reference: list[bytes] | None = None
        self.reference_name: str | None = None

    async def outputs_of(self, index: int) -> list[bytes]:
        kernel = self.tunables.candidates[index]
        args = clone_args(self.device, self.pristine)
        pipeline = await self.pipeline(index)
        self.device.dispatch(pipeline, args, tuple(kernel.grid(args)))
        return [await self.device.read_buffer(args.buffers[i]) for i in self.tunables.outputs]

    async def ensure_reference(self) -> None:
        if self.reference is not None:
            return
        for index, kernel in enumerate(self.tunables.candidates):
            if index in self.skipped:
                continue
            try:
                if check_limits(kernel, self.device.limits, self.device.features) is None:
                    self.reference = await self.outputs_of(index)
                    self.reference_name = kernel.name
                    return
            except Exception:  # any failure of a would-be reference: try the next candidate
                continue
        raise TuneFailed(f"output checks of {self.tunables.name}: no candidate could produce reference outputs")

    async def mismatch(self, index: int) -> Mismatch | None:
        await self.ensure_reference()
        name = self.tunables.candidates[index].name
        outputs = await self.outputs_of(index)
        for slot, (got, want) in enumerate(zip(outputs, self.reference, strict=True)):
            problem = compare(got, want, self.tunables.output_type, self.tunables.atol, self.tunables.rtol)
            if problem:
                output = self.tunables.outputs[slot]
                return Mismatch(name, f"output buffer {output} disagrees with {self.reference_name}: {problem}")
        return None


def compare(got: bytes, want: bytes, typecode: str, atol: float, rtol: float) -> str | None:
    """Why two outputs differ beyond tolerance, or None."""
    if len(got) != len(want):
        return f"{len(got)} bytes, reference has {len(want)}"
    a, b = array(typecode), array(typecode)
    usable = len(got) - len(got) % a.itemsize
    a.frombytes(got[:usable])
    b.frombytes(want[:usable])
    exact = typecode not in "fd"
    bad = 0
    first = None
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        # Infinities agree only with themselves (inf - inf is NaN; a tolerance relative to inf admits all).
        close = math.isfinite(y) and abs(x - y) <= atol + rtol * abs(y)
        ok = x == y or (not exact and (close or (math.isnan(x) and math.isnan(y))))
        if not ok:
            bad += 1
            if first is None:
                first = (i, x, y)
    if not bad:
        return None
    i, x, y = first
    return f"{bad} of {len(a)} values differ; first at [{i}]: {x!r} vs {y!r}"


async def calibrate(
    device: Device, pipeline: Any, args: Args, grid: Grid, min_sample: float
) -> tuple[int, float | None]:
    """How many dispatches one sample needs to last at least ``min_sample`` seconds, and the
    last calibration reading in seconds per dispatch when it already was such a sample (the
    adaptive policy keeps it as the candidate's first sample)."""
    repeats = 1
    for _ in range(CALIBRATION_ROUNDS):
        seconds = await device.resolve(await device.profile(pipeline, args, grid, repeats))
        if repeats >= MAX_REPEATS or (math.isfinite(seconds) and seconds >= min_sample):
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

    async def sample(self, device: Device, args: Args, count: int = 1) -> None:
        """Take ``count`` timed samples (submitted together, then resolved)."""
        profiles = [await device.profile(self.compiled, args, self.grid, self.repeats) for _ in range(count)]
        for handle in profiles:
            seconds = await device.resolve(handle) / self.repeats
            if math.isfinite(seconds) and seconds > 0:
                self.samples.append(seconds)
            else:
                self.invalid += 1

    def result(self, timing: str) -> Result:
        if not self.samples:
            return InvalidSamples(self.name)
        return Outcome(self.name, self.index, Stats(tuple(self.samples), timing))


def failure_of_sampling(name: str, error: Exception) -> CandidateError:
    """What a candidate that raised while it was being sampled gets as its result."""
    if isinstance(error, KernelError):
        return Launch(name, f"launch failed: {error}")
    return Unknown(name, f"{type(error).__name__}: {error}")


@dataclass(frozen=True)
class Bench:
    """What benchmarking one key's candidates needs: the device, the set, the benchmark's inputs,
    the settings, the compiled pipeline of a candidate (by index), the output check if any, and
    where steps are logged."""

    device: Device
    tunables: TunableSet
    args: Args
    config: Config
    pipeline: PipelineGetter
    check: OutputCheck | None = None
    step: Callable[[str], None] = lambda _message: None


async def prepare_candidate(bench: Bench, index: int) -> Arm | Result:
    """Limits, compile, grids, output check, warmups and calibration of candidate ``index``.

    Answers an :class:`Arm` ready to sample, or the candidate's result when it cannot be sampled:
    its error as a value, or a bare Outcome in a dry run.
    """
    device, tunables, args, config, check = bench.device, bench.tunables, bench.args, bench.config, bench.check
    kernel: Kernel = tunables.candidates[index]
    name = kernel.name
    problem = check_limits(kernel, device.limits, device.features)
    if problem:
        return Launch(name, problem)
    try:
        compiled = await bench.pipeline(index)
    except KernelError as error:
        return Launch(name, f"compile failed: {error}")
    except WgtuneError:
        raise
    except Exception as error:
        return Unknown(name, f"compile raised {type(error).__name__}: {error}")
    try:
        grids = [tuple(stage.grid(args)) for stage in kernel.stages]
    except Exception as error:
        return Unknown(name, f"grid function failed: {type(error).__name__}: {error}")
    for stage, stage_grid in zip(kernel.stages, grids, strict=True):
        problem = check_grid(stage_grid, device.limits)
        if problem:
            return Launch(name, problem if stage is kernel else f"stage {stage.name}: {problem}")
    grid = grids[0]
    if config.dry_run:
        bench.step(f"{name}: compiled; dry run, not launched")
        return Outcome(name, index, None)
    try:
        if check is not None:
            mismatch = await check.mismatch(index)
            if mismatch is not None:
                return mismatch
        for _ in range(config.warmups):
            device.dispatch(compiled, args, grid)
        await device.sync()
        repeats, first = await calibrate(device, compiled, args, grid, sample_floor(device, config))
    except WgtuneError as error:
        if isinstance(error, KernelError):
            return failure_of_sampling(name, error)
        raise
    except Exception as error:
        return failure_of_sampling(name, error)
    arm = Arm(index, name, compiled, grid, repeats)
    if first is not None:
        arm.samples.append(first)
    return arm


async def run_candidate(bench: Bench, index: int) -> Result:
    """Benchmark candidate ``index`` the fixed way: ``config.samples`` samples, one after another.

    Every failure of the candidate is a value. (The seed's fixed-sample policy; the calibration
    reading is not kept, so every candidate has exactly ``config.samples`` samples.)
    """
    arm = await prepare_candidate(bench, index)
    if not isinstance(arm, Arm):
        return arm
    arm.samples.clear()
    samples = bench.config.samples
    try:
        await arm.sample(bench.device, bench.args, samples)
    except WgtuneError as error:
        if isinstance(error, KernelError):
            return failure_of_sampling(arm.name, error)
        raise
    except Exception as error:
        return failure_of_sampling(arm.name, error)
    bench.step(f"{arm.name}: {len(arm.samples)} of {samples} samples valid, {arm.repeats} dispatches a sample")
    return arm.result(bench.device.timing)
