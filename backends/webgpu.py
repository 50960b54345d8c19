"""The WebGPU device algorithm, written once for every world wgtune runs in.

Natively (wgpu-py) and in the browser (``navigator.gpu`` through Pyodide) a device does the same
things in the same order: it binds a call's buffers (and its params, as a uniform) once per
pipeline, one bind group per group the stage's WGSL declares (``wgtune.sets.bindings``), encodes one
compute pass of repeated launches (or, in a batch, records launches into one pass submitted
later: ``wgtune.batch``), times a pass with GPU timestamps or the wall clock, reads
timestamps and buffers back, and compiles kernels with their later stages. Only
the spelling of the GPU calls differs (``create_bind_group`` against ``createBindGroup``, errors
raised at the call against errors collected in error scopes), so :class:`WebGPUDevice` holds the
algorithm and each backend hands it a *shim*: a small object whose thin methods are named after
the WebGPU calls they make (:class:`~wgtune.backends.gpu_shim.GPUShim` lists them). ``native.py`` and ``browser.py`` are
those shims, with the device classes that open them. What ``Tuner.execute``'s launches add (a
launch WebGPU refuses is that call's error, ``LaunchRefused``) is :class:`CallLaunches`, in
``call_launches.py``.

Pure Python (the standard library and ``wgtune`` only): it imports in CPython and in Pyodide.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from wgtune.errors import DeviceLost, KernelError
from wgtune.gpu.comparison import Comparison
from wgtune.gpu.device import CompiledKernel, Device, DeviceLimits, Timing
from wgtune.sets.args import Args, Grid
from wgtune.sets.bindings import binding_plan
from wgtune.sets.kernel import Kernel

from .batch_recorder import NOTHING_BOUND, BatchRecorder, encode_launches, launch_steps
from .bind_groups import BindGroups
from .call_launches import CallLaunches
from .compare_pass import COMPARE, GPU_KINDS, compare_on_gpu
from .gpu_shim import GPUShim
from .shared_modules import SharedModules

__all__ = ["TimedPass", "WebGPUDevice", "as_value"]

TIMESTAMPS_BYTES = 16  # the two u64 timestamps written at the beginning and the end of a pass
NO_GRID: Grid = (0, 0, 0)


class TimedPass:
    """What :meth:`WebGPUDevice.profile` answers: the seconds the wall clock measured, or the
    MAP_READ buffer that will hold the pass's begin and end timestamps, with the seconds the host
    took to encode the pass (``host``: added to the timestamps' span, see :meth:`WebGPUDevice.resolve`)."""

    __slots__ = ("host", "readback", "seconds")

    def __init__(self, seconds: float | None = None, readback: Any = None, host: float = 0.0) -> None:
        self.seconds = seconds
        self.readback = readback
        self.host = host


class WebGPUDevice(BindGroups, CallLaunches, Device):
    """A WebGPU device behind wgtune's device interface, talking to the GPU through ``shim``.

    ``timestamps``: time passes with GPU timestamp queries (the device must have
    ``timestamp-query``); otherwise with the wall clock around a full sync. Subclasses set the
    device's ``identity``, ``limits`` and ``features``; ``limits`` are WebGPU's defaults until then.
    """

    limits = DeviceLimits()

    def __init__(self, shim: GPUShim, *, timestamps: bool) -> None:
        self.shim = shim
        self.timestamps = timestamps
        self.timing = Timing.GPU_TIMESTAMP if timestamps else Timing.WALL_CLOCK
        self._storage_usage = shim.STORAGE | shim.COPY_SRC | shim.COPY_DST
        # Looked up once: every dispatch calls these, and a lookup (or a bound method) per call costs.
        self._create_command_encoder = shim.create_command_encoder
        self._begin_compute_pass = shim.begin_compute_pass
        self._pass_commands = (shim.set_pipeline, shim.set_bind_group, shim.dispatch_workgroups)
        self._end_pass = shim.end
        self._submit = shim.submit
        self._timestamp_writes: Any = None
        self._batch = BatchRecorder(self)  # the open batch's launches (``wgtune.batch``)
        self._init_call_launches(shim)
        self._modules = SharedModules(shim)  # compiled stages, one pipeline per distinct code
        self._compare: CompiledKernel | None = None  # the output checks' comparison pass, once compiled
        if timestamps:
            self._queries = shim.create_query_set(2)
            self._resolve_buffer = shim.create_buffer(TIMESTAMPS_BYTES, shim.QUERY_RESOLVE | shim.COPY_SRC)
            self._timestamp_writes = shim.timestamp_writes(self._queries, 0, 1)

    # -- buffers ----------------------------------------------------------------------------

    def create_buffer(self, data: bytes | bytearray | memoryview | None = None, *, size: int = 0) -> Any:
        """A storage buffer (copyable both ways), filled with ``data`` or zeroed to ``size`` bytes.
        Sizes round up to whole 4-byte words, as WebGPU's copies and writes need; the padding is 0."""
        raw = memoryview(data).cast("B") if data is not None else None
        nbytes = len(raw) if raw is not None else size
        padded = (nbytes + 3) // 4 * 4
        buffer = self.shim.create_buffer(max(4, padded), self._storage_usage)
        if raw is not None and nbytes:
            self.shim.write_buffer(buffer, 0, raw if padded == nbytes else bytes(raw) + bytes(padded - nbytes))
        return buffer

    def clone_buffer(self, buffer: Any) -> Any:
        """A copy to benchmark on (the copy is queued). A buffer made without COPY_SRC cannot be
        copied by anyone: its stand-in has the same size and usage, zero-filled (timings rarely
        depend on the values; give the set an ``input_gen`` where they do)."""
        shim = self.shim
        self.flush()  # the copy must see the launches a batch recorded before it
        size, usage = buffer.size, buffer.usage
        copy = shim.create_buffer(size, usage | shim.COPY_SRC | shim.COPY_DST)
        if usage & shim.COPY_SRC:
            encoder = shim.create_command_encoder()
            shim.copy_buffer_to_buffer(encoder, buffer, 0, copy, 0, size)
            self._submit(encoder)
        return copy

    def copy_buffer(self, source: Any, destination: Any) -> None:
        """Queue ``source``'s contents into ``destination`` (same size), after the launches a batch
        recorded."""
        self.flush()
        encoder = self.shim.create_command_encoder()
        self.shim.copy_buffer_to_buffer(encoder, source, 0, destination, 0, source.size)
        self._submit(encoder)

    async def read_buffer(self, buffer: Any, take: Callable[[Any], Any] = bytes) -> Any:
        """The buffer's contents after all submitted work, through a staging copy; raises the
        first error the GPU reported for earlier work instead, if any. ``take``: what is made of
        the staging copy while it is mapped (``GPUShim.map_read``): by default bytes, the one copy;
        a tuning process's memory file written from it straight, no second one
        (``remote_device.py``)."""
        self.flush()
        shim = self.shim
        size = buffer.size
        staging = shim.create_buffer(size, shim.MAP_READ | shim.COPY_DST)
        try:
            encoder = shim.create_command_encoder()
            shim.copy_buffer_to_buffer(encoder, buffer, 0, staging, 0, size)
            self._submit(encoder)
            await self._raise_reported_error()
            try:
                return await shim.map_read(staging, take)  # waits for the copy, queued after all earlier work
            except KernelError as error:
                self._raise_if_lost()
                raise KernelError(f"reading a buffer back failed: {error}") from None
        finally:
            shim.destroy_buffer(staging)

    async def compare_buffers(
        self, got: Any, want: Any, typecode: str, count: int, atol: float, rtol: float
    ) -> Comparison:
        """Compared on the GPU by the comparison pass (``compare_pass.py``): 32 bytes come back,
        not the buffers. Types the pass does not know (f64, 8- and 16-bit integers) are compared
        on the host."""
        if typecode not in GPU_KINDS:
            return await super().compare_buffers(got, want, typecode, count, atol, rtol)
        if self._compare is None:
            self._compare = await self.compile(COMPARE)
        return await compare_on_gpu(self, self._compare, got, want, typecode, count, atol, rtol)

    # -- kernels ----------------------------------------------------------------------------

    async def compile(self, kernel: Kernel) -> CompiledKernel:
        """``kernel`` and each stage of its ``then``, compiled, each with what it binds
        (``bindings.binding_plan``); KernelError with the compiler's message for the first that
        fails."""
        return _assemble(kernel, [await self._modules.compile(stage) for stage in kernel.stages])

    async def compile_many(self, kernels: Sequence[Kernel]) -> list[CompiledKernel | Exception]:
        """Every stage of every kernel compiled at once through the shim's
        :meth:`GPUShim.compile_modules` (overlapped where the platform can; each distinct code
        once: ``shared_modules.py``); each kernel's CompiledKernel, or the KernelError of its first
        stage that failed, in order."""
        stages = [stage for kernel in kernels for stage in kernel.stages]
        modules = iter(await self._modules.compile_many(stages))
        compiled: list[CompiledKernel | Exception] = []
        for kernel in kernels:
            mine = [next(modules) for _ in kernel.stages]
            failed = next((module for module in mine if isinstance(module, Exception)), None)
            compiled.append(failed if failed is not None else _assemble(kernel, mine))
        return compiled

    def start_compiles(self, kernels: Sequence[Kernel]) -> None:
        """Begin compiling every stage of ``kernels`` where the shim can
        (:meth:`GPUShim.start_compiles`); a later compile takes the answers."""
        self._modules.start([stage for kernel in kernels for stage in kernel.stages])

    def drop_started(self, kernels: Sequence[Kernel], keep: Sequence[Kernel] = ()) -> None:
        """The begun compiles of ``kernels``' stages let go, those of a code ``keep`` has kept
        (:meth:`SharedModules.drop_started`)."""
        self._modules.drop_started([stage for kernel in kernels for stage in kernel.stages],
                                   keep=[stage for kernel in keep for stage in kernel.stages])

    def _encode(
        self, kernel: CompiledKernel | None, args: Args | None, grid: Grid, repeats: int, timestamp_writes: Any
    ) -> Any:
        """An encoder holding one compute pass of ``repeats`` launches of ``kernel`` (each launch
        every stage in order, each seeing the previous one's writes: dispatches in a pass are
        ordered), recorded launch by launch as a batch records as many calls (``launch_steps``,
        then ``encode_launches``: each launch's steps looked up in the call's cache, a stage's
        pipeline and groups set only where they change), so that the host's time to record
        it is what those launches cost a batch; with no ``kernel``, the same pass empty (what
        :meth:`time_empty_pass` times)."""
        encoder = self._create_command_encoder()
        if timestamp_writes is None:
            compute = self._begin_compute_pass(encoder)
        else:
            compute = self._begin_compute_pass(encoder, timestamp_writes=timestamp_writes)
        if kernel is not None:
            bound, commands = NOTHING_BOUND, self._pass_commands
            for _ in range(repeats):
                bound = encode_launches(commands, compute, launch_steps(self, kernel, args, grid), 1, bound)
        self._end_pass(compute)
        return encoder

    def dispatch(self, pipeline: CompiledKernel, args: Args, grid: Grid, repeats: int = 1) -> None:
        if self._batch.depth:
            self._batch.record(pipeline, args, grid, repeats)
        else:
            self._submit(self._encode(pipeline, args, grid, repeats, None))

    # -- batches (``batch_recorder.py``) ------------------------------------------------------

    def begin_batch(self) -> None:
        self._batch.begin()

    def end_batch(self) -> None:
        self._batch.end()

    def flush(self) -> None:
        """Submit the launches the open batch recorded so far (see ``BatchRecorder.flush``):
        called before every other submission and wait, so that they see those launches."""
        self._batch.flush()


    # -- timing -----------------------------------------------------------------------------

    async def profile(self, pipeline: CompiledKernel, args: Args, grid: Grid, repeats: int) -> TimedPass:
        if self.timestamps:
            return self._launch_timed(pipeline, args, grid, repeats)
        # Submitted at once, in a batch too: the clock stops when the queue is done with it.
        begin, end = await self._wall_clock(lambda: self._submit(self._encode(pipeline, args, grid, repeats, None)))
        return TimedPass(seconds=end - begin)

    async def resolve(self, profile: TimedPass) -> float:
        """Seconds the pass took: its span between the GPU's timestamps plus the host's time to
        record it (:meth:`_encode`: as a batch records its launches). A pass recorded in full, then
        submitted, costs both, one after the other, as a call alone and a batch of up to 128
        launches do (a longer batch is submitted part by part, and its GPU runs while the host
        records the next part, which this does not credit: ``bench/batch_rate.py``): for a
        kernel of a few microseconds the recording of each stage's dispatch is as long as the
        kernel, and timestamps alone ranked two-stage candidates first that run slower in every
        way calls run (``bench/results/h200-short-kernels.txt``). On an H200's host the commands of
        a launch of one stage record in about 1.5 us, of two stages in 3-5 us
        (``bench/launch_parts.py``), and working out a later stage's grid and groups costs its
        Python on top. The wall clock (no timestamps) counts both already. A pass whose end
        timestamp is not after its begin (a zero duration, or a clock that went backwards) is not a
        valid sample: NaN, which the core discards."""
        if profile.seconds is not None:
            return profile.seconds
        begin, end = await self._timestamps(profile)
        return (end - begin) * 1e-9 + profile.host if end > begin else float("nan")

    async def time_empty_pass(self) -> tuple[float, float]:
        """The raw readings ``profile`` takes for the same pass with no dispatch in it, on the same
        clock: the two timestamps in seconds (as ``resolve`` converts them, not checked for order:
        the core discards a pass that ends before it begins), or the wall clock before the
        submission and once its work is done."""
        if self.timestamps:  # the timestamps alone: their grain is the clock's (the host's encoding is not)
            begin, end = await self._timestamps(self._launch_timed(None, None, NO_GRID, 0))
            return begin * 1e-9, end * 1e-9
        return await self._wall_clock(lambda: self._submit(self._encode(None, None, NO_GRID, 0, None)))

    async def _wall_clock(self, launch: Callable[[], None]) -> tuple[float, float]:
        """``launch``, timed by the wall clock from an idle queue until its work is done: the
        clock's readings, in seconds, before and after. Errors the GPU reported for the launch
        raise after the second reading, so they cost the measurement nothing."""
        await self.sync()
        started = self.shim.now()
        launch()
        await self.shim.on_submitted_work_done()
        ended = self.shim.now()
        await self._raise_reported_error()
        return started, ended

    def _launch_timed(self, kernel: CompiledKernel | None, args: Args | None, grid: Grid, repeats: int) -> TimedPass:
        """Submit the pass with timestamps written around it, and their copy to a fresh readback
        buffer: one per pass, since a caller may submit several before it resolves them (the core
        resolves each before the next; ``bench/tune_samples.py``'s burst does not)."""
        self.flush()
        shim = self.shim
        started = shim.now()
        encoder = self._encode(kernel, args, grid, repeats, self._timestamp_writes)
        host = shim.now() - started
        readback = shim.create_buffer(TIMESTAMPS_BYTES, shim.COPY_DST | shim.MAP_READ)
        shim.resolve_query_set(encoder, self._queries, 0, 2, self._resolve_buffer, 0)
        shim.copy_buffer_to_buffer(encoder, self._resolve_buffer, 0, readback, 0, TIMESTAMPS_BYTES)
        self._submit(encoder)
        return TimedPass(readback=readback, host=host)

    async def _timestamps(self, timed: TimedPass) -> tuple[int, int]:
        """The pass's begin and end timestamps (ns), once its submission is done; the readback
        buffer is freed."""
        readback = timed.readback
        try:
            await self._raise_reported_error()
            try:
                data = await self.shim.map_read(readback)
            except KernelError as error:
                self._raise_if_lost()
                raise KernelError(f"reading timestamps failed: {error}") from None
        finally:
            self.shim.destroy_buffer(readback)
        begin, end = struct.unpack("<QQ", data)
        return begin, end

    # -- errors -----------------------------------------------------------------------------

    async def sync(self) -> None:
        """Wait for all submitted work (an open batch's launches submitted first); raise the first
        error the GPU reported for it."""
        self.flush()
        await self.shim.on_submitted_work_done()
        await self._raise_reported_error()

    async def _raise_reported_error(self) -> None:
        """Raise what the GPU reported since the last wait: DeviceLost when the device is gone
        (nothing it says means anything then), else the first error as a KernelError. A call's
        launch errors are not among them (:meth:`launch`), unless nobody took them."""
        self._forward_untaken_scope()
        self._raise_if_lost()
        error = await self.shim.reported_error()
        self._raise_if_lost()
        if error is not None:
            raise KernelError(error)

    def _raise_if_lost(self) -> None:
        lost = self.shim.lost()
        if lost is not None:
            raise DeviceLost(lost)


async def as_value(awaitable: Awaitable[Any]) -> Any:
    """What ``awaitable`` returns, or the exception it raised, as a value (one compile of
    several failing must not lose the others)."""
    try:
        return await awaitable
    except Exception as error:
        return error


def _assemble(kernel: Kernel, modules: Sequence[tuple[Any, Any]]) -> CompiledKernel:
    """``kernel`` as compiled: each stage's ``(pipeline, bind group layout 0)`` in ``modules``,
    with what it binds (``bindings.binding_plan``)."""
    plan = binding_plan(kernel)
    first, *then = (
        CompiledKernel(stage, pipeline, layout, (), plan[index] if plan else None)
        for index, (stage, (pipeline, layout)) in enumerate(zip(kernel.stages, modules, strict=True))
    )
    return CompiledKernel(kernel, first.pipeline, first.layout, tuple(then), first.bindings)
