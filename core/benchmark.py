"""Benchmarking one candidate: limits, compile, optional output check, warmups, timed samples.

Every failure of the candidate becomes a value (see ``errors.py``); only failures of the tune
as a whole propagate. Each timed sample repeats the dispatch inside one pass until the sample
is long against the clock's grain (``Config.min_sample``), and reports seconds per dispatch.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Awaitable, Callable
from typing import Any

from .config import Config
from .device import Device, check_grid, check_limits
from .errors import ConfigError, InvalidSamples, KernelError, Launch, Mismatch, TuneFailed, Unknown, WgtuneError
from .results import Outcome, Result, Stats
from .tunable import Args, Grid, Kernel, TunableSet

__all__ = ["MAX_REPEATS", "OutputCheck", "clone_args", "run_candidate", "sample_floor"]

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


async def _sample_seconds(device: Device, pipeline: Any, args: Args, grid: Grid, repeats: int) -> float:
    return await device.resolve(await device.profile(pipeline, args, grid, repeats))


async def calibrate(device: Device, pipeline: Any, args: Args, grid: Grid, min_sample: float) -> int:
    """How many dispatches one sample needs to last at least ``min_sample`` seconds."""
    repeats = 1
    for _ in range(CALIBRATION_ROUNDS):
        seconds = await _sample_seconds(device, pipeline, args, grid, repeats)
        if seconds >= min_sample or repeats >= MAX_REPEATS:
            break
        if not math.isfinite(seconds) or seconds <= 0:
            repeats = min(MAX_REPEATS, repeats * 16)  # below the clock's grain: grow fast
        else:
            repeats = min(MAX_REPEATS, max(repeats + 1, math.ceil(repeats * min_sample * 1.2 / seconds)))
    return repeats


async def run_candidate(
    device: Device,
    tunables: TunableSet,
    index: int,
    args: Args,
    config: Config,
    pipeline: PipelineGetter,
    check: OutputCheck | None,
    step: Callable[[str], None],
) -> Result:
    """Benchmark candidate ``index`` of ``tunables`` on ``args``; every failure is a value."""
    kernel: Kernel = tunables.candidates[index]
    name = kernel.name
    problem = check_limits(kernel, device.limits, device.features)
    if problem:
        return Launch(name, problem)
    try:
        compiled = await pipeline(index)
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
        step(f"{name}: compiled; dry run, not launched")
        return Outcome(name, index, None)
    try:
        if check is not None:
            mismatch = await check.mismatch(index)
            if mismatch is not None:
                return mismatch
        for _ in range(config.warmups):
            device.dispatch(compiled, args, grid)
        await device.sync()
        repeats = await calibrate(device, compiled, args, grid, sample_floor(device, config))
        profiles = [await device.profile(compiled, args, grid, repeats) for _ in range(config.samples)]
        durations = [await device.resolve(handle) / repeats for handle in profiles]
    except KernelError as error:
        return Launch(name, f"launch failed: {error}")
    except WgtuneError:
        raise
    except Exception as error:
        return Unknown(name, f"{type(error).__name__}: {error}")
    valid = tuple(d for d in durations if math.isfinite(d) and d > 0)
    step(f"{name}: {len(valid)} of {len(durations)} samples valid, {repeats} dispatches a sample")
    if not valid:
        return InvalidSamples(name)
    return Outcome(name, index, Stats(valid, device.timing))
