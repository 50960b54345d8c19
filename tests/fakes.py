"""A scripted fake device for testing the core without a GPU.

Every candidate is scripted by name (:class:`Script`): how long one dispatch takes, whether it
fails to compile or launch, whether its samples are invalid, whether its output is wrong, and a
tiny Python "kernel" that dispatches run on the buffers (so output checks and in-place writes are
real). The device counts what the core asks of it, so tests can say "no benchmark ran".

Buffers are :class:`FakeBuffer` objects holding a ``bytearray``; :func:`f32` and :func:`floats`
convert between lists of floats and f32 bytes.
"""

from __future__ import annotations

import asyncio
import math
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import wgtune
from wgtune import Args, DeviceIdentity, DeviceLimits, Kernel, KernelError, Timing, TunableSet

__all__ = [
    "FakeBuffer",
    "FakeDevice",
    "Script",
    "add_one_in_place",
    "call",
    "double_into",
    "f32",
    "floats",
    "kernel",
    "make_set",
    "make_tuner",
    "quiet",
    "seconds_of",
    "stored_results",
]

# Runs on a dispatch: (the buffers' bytearrays, the call's params) -> None, writing in place.
FakeKernel = Callable[[list[bytearray], tuple], None]
Duration = float | Sequence[float] | Callable[[int], float]

# Where FakeDevice's quantized clock starts: a day after its origin, so that the readings are as
# large as a real clock's (a GPU's timestamps count from its boot).
CLOCK_START_NS = 86_400 * 10**9 + 123_456_789


def f32(values: Iterable[float]) -> bytearray:
    values = list(values)
    return bytearray(struct.pack(f"<{len(values)}f", *values))


def floats(data: bytes | bytearray | FakeBuffer) -> list[float]:
    raw = data.data if isinstance(data, FakeBuffer) else data
    return list(struct.unpack(f"<{len(raw) // 4}f", bytes(raw)))


def add_one_in_place(buffers: list[bytearray], params: tuple) -> None:
    """buffer 0 += 1, in place."""
    buffers[0][:] = f32(x + 1 for x in floats(buffers[0]))


def double_into(buffers: list[bytearray], params: tuple) -> None:
    """buffer 1 = 2 * buffer 0."""
    buffers[1][:] = f32(2 * x for x in floats(buffers[0]))


@dataclass
class Script:
    """How one candidate behaves on the fake device.

    ``duration`` is seconds per dispatch: a number, a sequence indexed by the candidate's profile
    call (cycled), or a function of that index. 0, negative or NaN make invalid samples.
    ``compile_error`` makes compile raise KernelError with that message; ``launch_error`` makes
    dispatch and profile raise KernelError; ``profile_error`` is raised as-is by profile.
    ``wrong`` corrupts element 0 (f32) of the last buffer after the kernel ran (+1000, or 1000 for a NaN).
    ``stall`` is wall-clock seconds every dispatch really takes (``time.sleep``): a runaway; with
    ``stalls``, only the first that many dispatches take it (a machine busy for a moment).
    ``loses_device`` makes a dispatch lose the device: every later sync raises DeviceLost.
    """

    duration: Duration = 1e-3
    compile_error: str | None = None
    compile_exception: BaseException | None = None
    launch_error: str | None = None
    profile_error: BaseException | None = None
    kernel: FakeKernel | None = None
    wrong: bool = False
    stall: float = 0.0
    stalls: int = 0
    loses_device: bool = False

    def seconds(self, call: int) -> float:
        return seconds_of(self.duration, call)


def seconds_of(duration: Duration, call: int) -> float:
    """A scripted duration at call ``call``: the number, the sequence cycled, or the function's value."""
    if callable(duration):
        return float(duration(call))
    if isinstance(duration, (int, float)):
        return float(duration)
    return float(duration[call % len(duration)])


@dataclass(eq=False)
class FakeBuffer:
    data: bytearray
    label: str = ""

    def __repr__(self) -> str:
        return f"FakeBuffer({self.label or len(self.data)})"

    @property
    def size(self) -> int:
        """Bytes, as a GPUBuffer's ``size`` says."""
        return len(self.data)


@dataclass(frozen=True)
class FakePipeline:
    kernel: Kernel


@dataclass(frozen=True)
class FakeProfile:
    name: str
    seconds: float
    repeats: int


@dataclass(eq=False)
class FakeDevice(wgtune.Device):
    """A device whose behaviour per candidate comes from ``scripts`` (by candidate name).

    ``suspend`` names the async methods that really suspend (``await asyncio.sleep(0)``) before
    answering, like the browser's promises: ``True`` means ``{"resolve"}``.
    ``on_profile(name, repeats)`` is called at the start of every profile, outside any lock: a
    test can block there or look at the tuner's state mid-tune.
    ``empty_pass`` is how long the pass :meth:`time_empty_pass` times really takes (a Duration,
    by call; counted in ``empty_passes``, its raw readings kept in ``empty_readings``), and
    ``clock_quantum`` the step of the clock that reads it, in seconds. A quantized clock runs on
    from a day after its origin, 37 us (plus a nanosecond more each call) between passes, and
    reads the true begin and end rounded down to its step, as Chrome reads timestamps. With the
    default quantum 0 every pass reads ``(0.0, duration)``: the readings are the scripted
    durations exactly, and the default 0.0 measures a grain of 0, so only ``min_sample`` sets the
    floor.

    Batches are a GPU's: while one is open, dispatches are recorded and their kernels run only
    when the batch is submitted (``flush``, the outermost ``end_batch``, or any read, copy, sync
    or profile first). ``submissions`` counts what reached the "GPU": each dispatch outside a
    batch, each flush of a batch that recorded something, each profile.
    """

    scripts: dict[str, Script] = field(default_factory=dict)
    timing: str = Timing.GPU_TIMESTAMP
    identity: DeviceIdentity = field(default_factory=lambda: DeviceIdentity("fake", "fake-gpu", "1.0", "test"))
    limits: DeviceLimits = field(default_factory=DeviceLimits)
    suspend: bool | Iterable[str] = False
    on_profile: Callable[[str, int], None] | None = None
    sync_error: BaseException | None = None
    empty_pass: Duration = 0.0
    clock_quantum: float = 0.0

    def __post_init__(self) -> None:
        if self.suspend is True:
            self.suspend = {"resolve"}
        self.suspend = frozenset(self.suspend or ())
        self.lock = threading.Lock()
        self.compiles: Counter[str] = Counter()
        self.compiled_together: list[list[str]] = []  # each compile_many call's kernels
        self.dispatches: Counter[str] = Counter()
        self.profiles: dict[str, list[int]] = {}
        self.resolves = 0
        self.syncs = 0
        self.clones = 0
        self.reads = 0
        self.empty_passes = 0
        self.empty_readings: list[tuple[float, float]] = []
        self.submissions = 0
        self.batch_depth = 0
        self.recorded: list[tuple[FakePipeline, Args, int]] = []  # the open batch's launches, in order
        self._clock_ns = CLOCK_START_NS  # the quantized clock's true time, in whole ns

    # -- scripting ----------------------------------------------------------------------------

    def script(self, name: str, **fields: Any) -> Script:
        """Set (or update) the script of candidate ``name``."""
        script = self.scripts.setdefault(name, Script())
        for field_name, value in fields.items():
            if not hasattr(script, field_name):
                raise AttributeError(f"Script has no field {field_name!r}")
            setattr(script, field_name, value)
        return script

    def _script(self, name: str) -> Script:
        return self.scripts.setdefault(name, Script())

    def buffer(self, values: Iterable[float] = (), label: str = "") -> FakeBuffer:
        return FakeBuffer(f32(values), label)

    @property
    def profile_count(self) -> int:
        return sum(len(calls) for calls in self.profiles.values())

    @property
    def dispatch_count(self) -> int:
        return sum(self.dispatches.values())

    async def _maybe_suspend(self, method: str) -> None:
        if method in self.suspend:
            await asyncio.sleep(0)

    # -- the Device interface -----------------------------------------------------------------

    async def compile(self, kernel: Kernel) -> FakePipeline:
        await self._maybe_suspend("compile")
        script = self._script(kernel.name)
        with self.lock:
            self.compiles[kernel.name] += 1
        if script.compile_exception is not None:
            raise script.compile_exception
        if script.compile_error is not None:
            raise KernelError(script.compile_error)
        return FakePipeline(kernel)

    async def compile_many(self, kernels):
        self.compiled_together.append([kernel.name for kernel in kernels])
        return await super().compile_many(kernels)

    def _run(self, pipeline: FakePipeline, args: Args, repeats: int) -> None:
        script = self._script(pipeline.kernel.name)
        if script.launch_error is not None:
            raise KernelError(script.launch_error)
        if script.stall and (not script.stalls or self.dispatches[pipeline.kernel.name] <= script.stalls):
            time.sleep(script.stall)
        if script.loses_device:
            self.sync_error = wgtune.DeviceLost("unknown: the GPU watchdog reset it")
        buffers = [buffer.data for buffer in args.buffers]
        if script.kernel is not None:
            for _ in range(repeats):
                script.kernel(buffers, args.params)
        if script.wrong and buffers and len(buffers[-1]) >= 4:
            (value,) = struct.unpack_from("<f", buffers[-1])
            struct.pack_into("<f", buffers[-1], 0, value + 1000.0 if value == value else 1000.0)  # NaN: poison

    def dispatch(self, pipeline: FakePipeline, args: Args, grid, repeats: int = 1) -> None:
        with self.lock:
            self.dispatches[pipeline.kernel.name] += 1
            if self.batch_depth:
                self.recorded.append((pipeline, args, repeats))
                return
            self.submissions += 1
        self._run(pipeline, args, repeats)

    def begin_batch(self) -> None:
        with self.lock:
            self.batch_depth += 1

    def end_batch(self) -> None:
        with self.lock:
            self.batch_depth -= 1
            outermost = self.batch_depth == 0
        if outermost:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            recorded, self.recorded = self.recorded, []
            self.submissions += bool(recorded)
        for pipeline, args, repeats in recorded:
            self._run(pipeline, args, repeats)

    async def profile(self, pipeline: FakePipeline, args: Args, grid, repeats: int) -> FakeProfile:
        name = pipeline.kernel.name
        if self.on_profile is not None:
            self.on_profile(name, repeats)
        await self._maybe_suspend("profile")
        self.flush()
        script = self._script(name)
        with self.lock:
            self.submissions += 1
            calls = self.profiles.setdefault(name, [])
            call = len(calls)
            calls.append(repeats)
        if script.profile_error is not None:
            raise script.profile_error
        self._run(pipeline, args, repeats)
        return FakeProfile(name, script.seconds(call) * repeats, repeats)

    async def resolve(self, profile: FakeProfile) -> float:
        await self._maybe_suspend("resolve")
        with self.lock:
            self.resolves += 1
        return profile.seconds

    async def time_empty_pass(self) -> tuple[float, float]:
        await self._maybe_suspend("time_empty_pass")
        with self.lock:
            call = self.empty_passes
            self.empty_passes += 1
            duration = seconds_of(self.empty_pass, call)
            reading = self._read_clock(call, duration)
            self.empty_readings.append(reading)
        return reading

    def _read_clock(self, call: int, duration: float) -> tuple[float, float]:
        """The clock's raw readings (seconds) around pass ``call`` lasting ``duration``."""
        if self.clock_quantum <= 0 or not math.isfinite(duration):
            return 0.0, duration
        # In whole nanoseconds, as timestamps are counted, then to seconds as the backends convert.
        step = round(self.clock_quantum * 1e9)
        begin = self._clock_ns
        end = begin + round(duration * 1e9)
        self._clock_ns = max(begin, end) + 37_000 + call
        return begin // step * step * 1e-9, end // step * step * 1e-9

    async def sync(self) -> None:
        await self._maybe_suspend("sync")
        self.flush()
        with self.lock:
            self.syncs += 1
        if self.sync_error is not None:
            raise self.sync_error

    def create_buffer(self, data: bytes | bytearray | memoryview | None = None, *, size: int = 0) -> FakeBuffer:
        return FakeBuffer(bytearray(data) if data is not None else bytearray(size))

    def clone_buffer(self, buffer: FakeBuffer) -> FakeBuffer:
        self.flush()
        with self.lock:
            self.clones += 1
        return FakeBuffer(bytearray(buffer.data), buffer.label + "'")

    async def read_buffer(self, buffer: FakeBuffer) -> bytes:
        await self._maybe_suspend("read_buffer")
        self.flush()
        with self.lock:
            self.reads += 1
        return bytes(buffer.data)


# -- building sets and calls ------------------------------------------------------------------


def kernel(name: str, **fields: Any) -> Kernel:
    """A fake candidate: WGSL is a comment naming it; one workgroup unless ``grid`` says otherwise."""
    fields.setdefault("wgsl", f"// {name}\n")
    fields.setdefault("grid", lambda args: (1, 1, 1))
    return Kernel(name=name, **fields)


def _default_key(args: Args) -> dict:
    return {"n": args.params[0] if args.params else 0}


def make_set(
    *candidates: str | Kernel,
    name: str = "fake",
    key: Callable[[Args], dict] | None = None,
    **set_fields: Any,
) -> TunableSet:
    """A TunableSet of fake candidates, given by name (or as Kernels). The key is ``{"n": params[0]}``."""
    kernels = [c if isinstance(c, Kernel) else kernel(c) for c in candidates]
    return TunableSet(name, kernels, key or _default_key, **set_fields)


def call(device: FakeDevice, *buffers: Sequence[float], n: int = 4) -> Args:
    """A call's Args: one f32 buffer per list of values, and ``n`` as the only param (the key)."""
    return Args(tuple(device.buffer(values, f"b{i}") for i, values in enumerate(buffers)), (n,))


def make_tuner(device: FakeDevice, config: wgtune.Config | None = None, **kwargs: Any) -> wgtune.Tuner:
    """A tuner on ``device`` with a memory store, memory records and a :func:`quiet` config.

    Tunes run inline unless ``spawn`` says otherwise, in Pyodide too (whose default spawner is
    ``spawn_task``): the fake device answers at once, so the same tests hold in both worlds.
    """
    kwargs.setdefault("spawn", wgtune.run_inline)
    kwargs.setdefault("store", wgtune.MemoryStore())
    kwargs.setdefault("records", wgtune.MemoryRecords())
    return wgtune.Tuner(device, config=config or quiet(), **kwargs)


async def settle(tuner: wgtune.Tuner, tunables: TunableSet, key: wgtune.Key, rounds: int = 20_000) -> wgtune.TuneState:
    """Let the event loop run until the key leaves Pending; its state then."""
    for _ in range(rounds):
        state = tuner.fastest(tunables, key)
        if state is not wgtune.PENDING:
            return state
        await asyncio.sleep(0)
    raise AssertionError("the key stayed Pending")


def stored_results(tuner: wgtune.Tuner, tunables: TunableSet, key: wgtune.Key | None = None) -> dict[str, dict]:
    """Every candidate's result as the store kept it, by candidate name (key defaults to n=4)."""
    key = key if key is not None else wgtune.Key({"n": 4})
    entry = tuner.store.entries[(tunables.name, key)]
    return {result["name"]: result for result in entry.results}


def quiet(**overrides: Any) -> wgtune.Config:
    """A fast, silent config: few samples, no repeats calibration, logging off."""
    settings: dict[str, Any] = {"log_level": "disabled", "warmups": 1, "samples": 3, "min_sample": 0.0}
    settings.update(overrides)
    return wgtune.Config(**settings)
