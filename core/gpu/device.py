"""The seam between the core and a GPU: what a backend implements.

Async-first, with names close to WebGPU's (and wgpu-py's), because in the browser compiling
reports errors asynchronously and reading a buffer or a timestamp is always a promise. Natively
the same coroutines never suspend, so the core drives them inline (see ``runner.py``).

Encoding and submitting work is synchronous in WebGPU, so :meth:`Device.dispatch`, the hot path
of every call, is a plain method.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..sets.args import Args, Grid
from ..sets.kernel import Kernel
from ..sets.shaders import ShapeError, workgroup_shape
from .comparison import Comparison, compare_bytes, element_size

__all__ = ["CompiledKernel", "Device", "DeviceIdentity", "DeviceLimits", "Timing", "check_grid", "check_limits"]


class Timing:
    GPU_TIMESTAMP = "gpu-timestamp"
    WALL_CLOCK = "wall-clock"


@dataclass(frozen=True, slots=True)
class DeviceIdentity:
    """Which GPU and driver: the store's namespace, so one GPU's winners never serve another."""

    vendor: str
    device: str
    driver: str
    backend: str

    def as_dict(self) -> dict:
        return asdict(self)

    def slug(self) -> str:
        text = "-".join(part for part in (self.vendor, self.device, self.backend) if part)
        return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:80] or "device"


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    """The limits a candidate is checked against before it is compiled."""

    max_workgroup_storage: int = 16384
    max_invocations: int = 256
    max_workgroup_size: Grid = (256, 256, 64)
    max_workgroups_per_dimension: int = 65535
    max_storage_binding: int = 134217728
    """Bytes of the largest storage buffer a binding may hold: what a candidate's scratch is
    checked against (``Kernel.scratch``)."""


def check_limits(kernel: Kernel, limits: DeviceLimits, features: frozenset[str] | None = None) -> str | None:
    """Why ``kernel`` (every stage of it) cannot run on a device with ``limits`` and ``features``,
    or None when it fits. ``features`` None: not checked."""
    for stage in kernel.stages:
        problem = _check_stage(stage, limits, features)
        if problem:
            return problem if stage is kernel else f"stage {stage.name}: {problem}"
    return None


def _check_stage(kernel: Kernel, limits: DeviceLimits, features: frozenset[str] | None) -> str | None:
    if features is not None:
        missing = [name for name in kernel.features if name not in features]
        if missing:
            return f"needs the device feature {', '.join(missing)}, which this device lacks"
    try:
        workgroup_size, storage = workgroup_shape(kernel)
    except ShapeError as error:
        return str(error)
    if storage > limits.max_workgroup_storage:
        return (
            f"exceeds a device limit: {storage} bytes of workgroup storage, "
            f"the device allows {limits.max_workgroup_storage}"
        )
    invocations = workgroup_size[0] * workgroup_size[1] * workgroup_size[2]
    if invocations > limits.max_invocations:
        return (
            f"exceeds a device limit: workgroup {workgroup_size} has {invocations} "
            f"invocations, the device allows {limits.max_invocations}"
        )
    for axis, size, allowed in zip("xyz", workgroup_size, limits.max_workgroup_size, strict=True):
        if size > allowed:
            return f"exceeds a device limit: workgroup size {axis} = {size}, the device allows {allowed}"
    return None


def check_grid(grid: Grid, limits: DeviceLimits) -> str | None:
    if len(grid) != 3 or any(not isinstance(n, int) or n < 0 for n in grid):
        return f"grid must be three ints >= 0, got {grid!r}"
    if max(grid) > limits.max_workgroups_per_dimension:
        return (
            f"exceeds a device limit: dispatch of {grid} workgroups, the device allows "
            f"{limits.max_workgroups_per_dimension} per dimension"
        )
    return None


@dataclass(frozen=True, eq=False)
class CompiledKernel:
    """A kernel as a backend compiled it: its pipeline and bind-group layout 0 (the backend's own
    objects), its further stages, compiled likewise, and what it binds (``bindings.StageBindings``;
    None: the call's buffers at bindings 0, 1, ..., its params right after)."""

    kernel: Kernel
    pipeline: Any
    layout: Any
    then: tuple[CompiledKernel, ...] = ()
    bindings: Any = None

    def steps(self, args: Args, grid: Grid, bind: Callable[[CompiledKernel, Args], Any]) -> list[tuple[Any, Any, Grid]]:
        """What one launch dispatches, in order: each stage's pipeline, bind groups (``bind``) and
        grid. ``grid`` is the first stage's, which the caller has already computed."""
        return [
            (stage.pipeline, bind(stage, args), grid if stage is self else tuple(stage.kernel.grid(args)))
            for stage in (self, *self.then)
        ]


class Device(ABC):
    """A GPU as the core sees it. Backends fill in the bodies.

    Failures of one candidate (a WGSL error, a pipeline the device refuses) raise
    :class:`~wgtune.errors.KernelError` with the compiler's or driver's message.
    """

    identity: DeviceIdentity
    limits: DeviceLimits
    features: frozenset[str] = frozenset()
    """WebGPU feature names the device has (``"shader-f16"``, ``"subgroups"``, ...)."""
    timing: str
    """How :meth:`profile` measures: ``Timing.GPU_TIMESTAMP`` or ``Timing.WALL_CLOCK``."""
    clock_grain: float = 0.0
    """Seconds a reading of the clock may be off by, as the backend states it: only the answer for
    a device whose grain cannot be measured. The tuner measures the grain itself before its first
    tune (``clock.py``) and sizes every sample to that."""
    background_compiles: int = 0
    """How many of the coming candidates the adaptive policy may compile in the background while
    it measures (:meth:`start_compiles`), once the first batch is compiled: none where compiling
    would slow the measuring (a CPU adapter runs kernels on the cores that compile)."""
    idle_clocks: bool = False
    """Whether the device may lower its clock when idle and raise it only under load (a GPU; not a
    CPU adapter, whose clock is the host's): a tune then brings the clock up before it samples
    (``wake.py``). Off by default; the native backend turns it on for every adapter that does not
    say it is a CPU, the browser's for every adapter that is not a fallback adapter (SwiftShader)."""
    compile_width: int = 1
    """How many compiles :meth:`compile_many` overlaps. Where it is 1 a compile costs its full
    time whenever it is made, so the adaptive policy compiles only what it is sure to screen
    (``adaptive.py``); where it is more, compiling a whole batch together costs about one."""

    @abstractmethod
    async def compile(self, kernel: Kernel) -> Any:
        """Compile ``kernel`` to a pipeline; raise KernelError with the compiler's message."""

    async def compile_many(self, kernels: Sequence[Kernel]) -> list[Any]:
        """Compile several kernels at once, where the device can overlap them (threads natively,
        the browser's asynchronous pipeline creation): each kernel's pipeline, or the exception
        its compile raised, in order. This one compiles them one by one; a backend that can do
        better overrides it."""
        compiled: list[Any] = []
        for kernel in kernels:
            try:
                compiled.append(await self.compile(kernel))
            except Exception as error:
                compiled.append(error)
        return compiled

    def start_compiles(self, kernels: Sequence[Kernel]) -> None:  # noqa: B027 (empty on purpose: a hint)
        """Begin compiling ``kernels`` in the background and return at once, where the device can
        (worker threads natively): a hint that they are wanted soon, so that their compiles
        overlap the measuring of the candidates before them. A later :meth:`compile` or
        :meth:`compile_many` of the same kernel takes the answer. This one does nothing."""

    def drop_started(self, kernels: Sequence[Kernel], keep: Sequence[Kernel] = ()) -> None:  # noqa: B027 (a hint)
        """Let go of the compiles :meth:`start_compiles` began for ``kernels`` and nothing took:
        they are no longer wanted, and a kernel made per key would otherwise hold its pipeline
        for good. What ``keep`` has in common with them (a stage of the same code) stays begun.
        This one does nothing."""

    @abstractmethod
    def dispatch(self, pipeline: Any, args: Args, grid: Grid, repeats: int = 1) -> None:
        """Encode ``repeats`` dispatches of ``pipeline`` on ``args`` in one pass and submit them;
        while a batch is open (:meth:`begin_batch`), record them into the batch instead."""

    def launch(self, pipeline: Any, args: Args, grid: Grid) -> None:
        """One launch of a call (``Tuner.execute``): :meth:`dispatch` once. A device that can tell
        raises :class:`~wgtune.errors.LaunchRefused` for a launch WebGPU refuses, as an error of
        this call alone (``WebGPUDevice.launch``); this one only dispatches."""
        self.dispatch(pipeline, args, grid)

    def check_call(self, kernel: Kernel, args: Args) -> None:  # noqa: B027 (empty on purpose: nothing to check)
        """Raise :class:`~wgtune.errors.LaunchRefused` where WebGPU would refuse the call's buffers
        as ``kernel`` binds them (their usage, their size, ...): asked before a call is tuned, so
        that a call no candidate can run on is refused rather than tuned. This one checks nothing."""

    # Batches (``batch.py``). The defaults batch nothing: each dispatch submits at once, which is
    # correct, only slower, so a third party's device needs none of them.

    def begin_batch(self) -> None:  # noqa: B027 (empty on purpose: the default batches nothing)
        """Open a batch: from now until the matching :meth:`end_batch`, :meth:`dispatch` may
        record its launches, in order, to submit them together. A batch opened while one is open
        joins it. A device that records must :meth:`flush` before anything else it submits or
        waits for (a copy, a read, a timed pass, a sync), so that every call sees the launches
        made before it."""

    def end_batch(self) -> None:  # noqa: B027 (empty on purpose: the default batches nothing)
        """Close the batch :meth:`begin_batch` opened; the outermost one submits what was recorded."""

    def flush(self) -> None:  # noqa: B027 (empty on purpose: the default batches nothing)
        """Submit what the open batch recorded so far; the batch stays open. Nothing without one."""

    @abstractmethod
    async def profile(self, pipeline: Any, args: Args, grid: Grid, repeats: int) -> Any:
        """Launch like :meth:`dispatch`, timed; return a handle for :meth:`resolve`."""

    @abstractmethod
    async def resolve(self, profile: Any) -> float:
        """Seconds the profiled pass took on the device."""

    async def time_empty_pass(self) -> tuple[float, float]:
        """The clock's raw begin and end readings, in seconds, around a timed pass that does no
        work, on the clock :meth:`profile` uses: the two GPU timestamps written around an empty
        compute pass, converted to seconds as :meth:`resolve` converts them but not subtracted; or
        the wall clock read before the submission and after the full sync. What the core measures
        the clock's grain from (``clock.py``).

        The readings, not their difference, because a quantized clock shows its step in them: on a
        100 us clock an empty pass nearly always begins and ends in one tick and reads 0, but every
        reading is a multiple of the tick.

        Not abstract: a device that cannot (a third party's, say) raises NotImplementedError and
        keeps its stated :attr:`clock_grain`.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot time an empty pass")

    @abstractmethod
    async def sync(self) -> None:
        """Wait until all submitted work is done; raise what the device reported, if anything."""

    async def pause(self) -> None:  # noqa: B027 (empty on purpose: natively nothing else waits)
        """Let the host run something else before the tune's host-side work goes on: in a page,
        whose main thread runs the tune, the rest comes in a later task (no input, no frame while
        Python works); natively there is nothing to let run, and this returns at once."""

    @abstractmethod
    def create_buffer(self, data: bytes | bytearray | memoryview | None = None, *, size: int = 0) -> Any:
        """A new storage buffer that kernels read and write and that can be copied both ways:
        holding ``data``, or ``size`` zero bytes. How a caller makes the buffers of its Args."""

    @abstractmethod
    def clone_buffer(self, buffer: Any) -> Any:
        """A new buffer with the same size, usage and contents (the copy is queued)."""

    def copy_buffer(self, source: Any, destination: Any) -> None:
        """Queue a copy of ``source``'s contents into ``destination``, a buffer of the same size:
        what lets the output checks run each candidate on buffers they reuse rather than make
        (``checks.OutputCheck.fresh_args``). A device that cannot raises NotImplementedError (this
        one does), and the checks make new buffers instead."""
        raise NotImplementedError(f"{type(self).__name__} cannot copy into a buffer")

    @abstractmethod
    async def read_buffer(self, buffer: Any) -> bytes:
        """The buffer's contents, after all submitted work."""

    async def compare_buffers(
        self, got: Any, want: Any, typecode: str, count: int, atol: float, rtol: float
    ) -> Comparison:
        """The first ``count`` elements of buffers ``got`` and ``want``, as values of ``typecode``,
        compared (``comparison.py``): what an output check asks. This one reads both back and
        compares on the host; a device that can compare where the buffers are (a WebGPU device:
        on the GPU) overrides it, so that nothing large is read back."""
        nbytes = count * element_size(typecode)
        got_bytes, want_bytes = await self.read_buffer(got), await self.read_buffer(want)
        return compare_bytes(got_bytes[:nbytes], want_bytes[:nbytes], typecode, atol, rtol)
