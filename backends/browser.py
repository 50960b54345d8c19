"""The browser device: WebGPU (``navigator.gpu``) driven from Pyodide through its JS FFI.

The same interface as the native device, on a ``GPUDevice`` that the page opened (see
``web/wgtune.js``) or that an embedding page handed over. Every promise WebGPU returns is
awaited, so the core's tune suspends on the JS event loop and the page stays responsive.

Timing: GPU timestamp queries where the device has ``timestamp-query``; otherwise the wall
clock (``performance.now()``) around ``queue.onSubmittedWorkDone()``. Either clock is coarse in
a browser (Chrome quantizes timestamps on real GPUs; ``performance.now()`` is 5 us when the page
is cross-origin isolated, 100 us when not, and every wall-clock reading pays for a submission and
a promise), so the core measures the clock's grain with :meth:`BrowserDevice.time_empty_pass`
(see ``wgtune.clock``) and repeats dispatches inside each timed pass until a sample is long
against it.

Validation errors in WebGPU are asynchronous: each submission runs inside an error scope whose
result is collected by :meth:`BrowserDevice.sync`, which raises it as a KernelError. Nothing
becomes an "uncaptured error" in the console.

Importable only in Pyodide (it imports ``js`` and ``pyodide.ffi``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import js
from pyodide.ffi import JsException, create_proxy, jsnull, to_js

from wgtune.device import CompiledKernel, Device, DeviceIdentity, DeviceLimits, Timing
from wgtune.errors import KernelError
from wgtune.tunable import Args, Grid, Kernel, pack_params

__all__ = ["BrowserDevice"]

def _js(value: Any) -> Any:
    """A Python descriptor (dicts, lists, JS objects inside) as a plain JS object."""
    return to_js(value, dict_converter=js.Object.fromEntries)


def _absent(value: Any) -> bool:
    """JS ``null`` arrives as ``jsnull`` and ``undefined`` as None: both mean nothing."""
    return value is None or value is jsnull


def _message(error: BaseException | Any) -> str:
    text = getattr(error, "message", None) or str(error)
    return str(text).strip() or type(error).__name__


@dataclass(frozen=True, eq=False)
class _Profile:
    seconds: float | None = None  # measured already (wall clock)
    readback: Any = None  # MAP_READ buffer receiving the begin/end timestamps


def identity_of(info: dict) -> DeviceIdentity:
    """The store's identity of a browser adapter: what ``GPUAdapterInfo`` tells."""
    return DeviceIdentity(
        vendor=str(info.get("vendor", "")),
        device=str(info.get("architecture") or info.get("device", "")),
        driver=str(info.get("description", "")),
        backend="webgpu",
    )


def limits_of(gpu_device: Any) -> DeviceLimits:
    limits = gpu_device.limits
    return DeviceLimits(
        max_workgroup_storage=int(limits.maxComputeWorkgroupStorageSize),
        max_invocations=int(limits.maxComputeInvocationsPerWorkgroup),
        max_workgroup_size=(
            int(limits.maxComputeWorkgroupSizeX),
            int(limits.maxComputeWorkgroupSizeY),
            int(limits.maxComputeWorkgroupSizeZ),
        ),
        max_workgroups_per_dimension=int(limits.maxComputeWorkgroupsPerDimension),
    )


class BrowserDevice(Device):
    """A WebGPU ``GPUDevice`` (a JS object) behind wgtune's device interface.

    ``adapter_info`` is the adapter's ``GPUAdapterInfo`` as a dict (vendor, architecture,
    device, description). ``clock_grain`` is the fallback until the core measures the grain
    (``wgtune.clock.measure_clock_grain``): the page passes the step of ``performance.now()`` it
    saw in JS.
    """

    def __init__(
        self, gpu_device: Any, adapter_info: dict, *, use_timestamps: bool = True, clock_grain: float = 100e-6
    ) -> None:
        self.gpu = gpu_device
        self.queue = gpu_device.queue
        self.adapter_info = dict(adapter_info)
        self.identity = identity_of(self.adapter_info)
        self.limits = limits_of(gpu_device)
        self.features = frozenset(str(name) for name in gpu_device.features)
        self.timestamps = bool(use_timestamps and gpu_device.features.has("timestamp-query"))
        self.timing = Timing.GPU_TIMESTAMP if self.timestamps else Timing.WALL_CLOCK
        self.clock_grain = max(float(clock_grain), 1e-6)
        # Each submission's error scope reports here; sync() raises the first and clears them.
        # A callback rather than a list of promises: calls that never sync keep nothing alive.
        self._errors: list[str] = []
        self._last_scope: Any = None
        self._on_scope = create_proxy(self._scope_closed)
        usage = js.GPUBufferUsage
        self._storage = usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        if self.timestamps:
            self._queries = gpu_device.createQuerySet(_js({"type": "timestamp", "count": 2}))
            self._resolve_buffer = gpu_device.createBuffer(
                _js({"size": 16, "usage": usage.QUERY_RESOLVE | usage.COPY_SRC})
            )

    # -- buffers ----------------------------------------------------------------------------

    def create_buffer(self, data: bytes | bytearray | memoryview | None = None, *, size: int = 0) -> Any:
        """A storage buffer (copyable both ways), filled with ``data`` or zeroed to ``size`` bytes."""
        raw = memoryview(data).cast("B") if data is not None else None
        nbytes = len(raw) if raw is not None else size
        padded = (nbytes + 3) // 4 * 4  # WebGPU sizes and writes come in whole 4-byte words
        buffer = self.gpu.createBuffer(_js({"size": max(4, padded), "usage": self._storage}))
        if raw is not None and nbytes:
            payload = raw if padded == nbytes else bytes(raw) + bytes(padded - nbytes)
            self.queue.writeBuffer(buffer, 0, to_js(payload))
        return buffer

    def clone_buffer(self, buffer: Any) -> Any:
        """A copy to benchmark on; a buffer without COPY_SRC gets a zero-filled stand-in."""
        usage = js.GPUBufferUsage
        copy = self.gpu.createBuffer(
            _js({"size": buffer.size, "usage": buffer.usage | usage.COPY_SRC | usage.COPY_DST})
        )
        if buffer.usage & usage.COPY_SRC:
            encoder = self.gpu.createCommandEncoder()
            encoder.copyBufferToBuffer(buffer, 0, copy, 0, buffer.size)
            self._submit(encoder)
        return copy

    async def read_buffer(self, buffer: Any) -> bytes:
        usage = js.GPUBufferUsage
        staging = self.gpu.createBuffer(_js({"size": buffer.size, "usage": usage.MAP_READ | usage.COPY_DST}))
        try:
            encoder = self.gpu.createCommandEncoder()
            encoder.copyBufferToBuffer(buffer, 0, staging, 0, buffer.size)
            self._submit(encoder)
            await self.sync()
            try:
                await staging.mapAsync(js.GPUMapMode.READ)
            except JsException as error:
                raise KernelError(f"reading a buffer back failed: {_message(error)}") from None
            data = staging.getMappedRange().to_bytes()
            staging.unmap()
            return bytes(data)
        finally:
            staging.destroy()

    # -- kernels ----------------------------------------------------------------------------

    async def compile(self, kernel: Kernel) -> CompiledKernel:
        then = tuple([await self.compile(stage) for stage in kernel.then])
        gpu = self.gpu
        gpu.pushErrorScope("validation")
        module = gpu.createShaderModule(_js({"code": kernel.wgsl, "label": kernel.name}))
        problem = await gpu.popErrorScope()
        messages = await module.getCompilationInfo()
        errors = [
            f"{kernel.name}:{m.lineNum}:{m.linePos}: {m.message}" for m in messages.messages if m.type == "error"
        ]
        if errors or not _absent(problem):
            raise KernelError("\n".join(errors) or _message(problem))
        descriptor = {"layout": "auto", "compute": {"module": module, "entryPoint": kernel.entry_point},
                      "label": kernel.name}
        try:
            pipeline = await gpu.createComputePipelineAsync(_js(descriptor))
        except JsException as error:  # a GPUPipelineError: the pipeline's own validation failed
            raise KernelError(_message(error)) from None
        return CompiledKernel(kernel, pipeline, pipeline.getBindGroupLayout(0), then)

    def _bind_group(self, pipeline: CompiledKernel, args: Args) -> Any:
        group = args.cache.get(pipeline)
        if group is None:
            buffers = list(args.buffers)
            if args.params:
                uniform = args.cache.get("params")
                if uniform is None:
                    data = pack_params(args.params)
                    usage = js.GPUBufferUsage
                    uniform = self.gpu.createBuffer(_js({"size": len(data), "usage": usage.UNIFORM | usage.COPY_DST}))
                    self.queue.writeBuffer(uniform, 0, to_js(memoryview(data)))
                    args.cache["params"] = uniform
                buffers.append(uniform)
            entries = [{"binding": i, "resource": {"buffer": b}} for i, b in enumerate(buffers)]
            # Binding errors surface in the submission's error scope, collected by sync().
            group = self.gpu.createBindGroup(_js({"layout": pipeline.layout, "entries": entries}))
            args.cache[pipeline] = group
        return group

    def _encode(
        self, pipeline: CompiledKernel | None, args: Args | None, grid: Grid, repeats: int, timestamps: bool
    ) -> Any:
        """One compute pass of ``repeats`` launches; with no ``pipeline``, the same pass empty (what
        :meth:`time_empty_pass` times)."""
        encoder = self.gpu.createCommandEncoder()
        descriptor = {}
        if timestamps:
            descriptor["timestampWrites"] = {
                "querySet": self._queries, "beginningOfPassWriteIndex": 0, "endOfPassWriteIndex": 1,
            }
        compute = encoder.beginComputePass(_js(descriptor))
        # Stages in order, each seeing the previous one's writes (dispatches in a pass are ordered).
        steps = pipeline.steps(args, grid, self._bind_group) if pipeline is not None else []
        for _ in range(repeats):
            for stage_pipeline, stage_group, (x, y, z) in steps:
                compute.setPipeline(stage_pipeline)
                compute.setBindGroup(0, stage_group)
                compute.dispatchWorkgroups(x, y, z)
        compute.end()
        return encoder

    def _scope_closed(self, error: Any) -> None:
        if not _absent(error):
            self._errors.append(_message(error))

    def _pop_scope(self) -> None:
        self._last_scope = self.gpu.popErrorScope().then(self._on_scope)

    def _submit(self, encoder: Any) -> None:
        self.gpu.pushErrorScope("validation")
        self.queue.submit(to_js([encoder.finish()]))
        self._pop_scope()

    def dispatch(self, pipeline: CompiledKernel, args: Args, grid: Grid, repeats: int = 1) -> None:
        self.gpu.pushErrorScope("validation")  # binding errors belong to this dispatch too
        try:
            self._submit(self._encode(pipeline, args, grid, repeats, timestamps=False))
        finally:
            self._pop_scope()

    async def profile(self, pipeline: CompiledKernel, args: Args, grid: Grid, repeats: int) -> _Profile:
        if not self.timestamps:
            begin, end = await self._wall_clock(lambda: self.dispatch(pipeline, args, grid, repeats))
            return _Profile(seconds=end - begin)
        return self._launch_timed(pipeline, args, grid, repeats)

    async def time_empty_pass(self) -> tuple[float, float]:
        """The raw readings ``profile`` takes for the same pass with no dispatch in it, on the same
        clock: the two timestamps in seconds (as ``resolve`` converts them), or
        ``performance.now()`` in seconds before the submission and once its work is done."""
        if not self.timestamps:
            return await self._wall_clock(lambda: self._submit(self._encode(None, None, (0, 0, 0), 0, False)))
        # Not checked for order here: grain_of discards a pass that ends before it begins.
        begin, end = await self._timestamps(self._launch_timed(None, None, (0, 0, 0), 0))
        return begin * 1e-9, end * 1e-9

    async def _wall_clock(self, launch: Callable[[], None]) -> tuple[float, float]:
        """``launch``, timed by ``performance.now()`` from an idle queue until its work is done:
        the clock's readings, in seconds, before and after."""
        await self.sync()
        started = js.performance.now()
        launch()
        await self.queue.onSubmittedWorkDone()
        ended = js.performance.now()
        await self.sync()
        return started / 1000.0, ended / 1000.0

    def _launch_timed(self, pipeline: CompiledKernel | None, args: Args | None, grid: Grid, repeats: int) -> _Profile:
        """Submit the pass with timestamps written around it, and their copy to a fresh readback."""
        self.gpu.pushErrorScope("validation")  # binding errors belong to this launch too
        try:
            encoder = self._encode(pipeline, args, grid, repeats, timestamps=True)
            usage = js.GPUBufferUsage
            readback = self.gpu.createBuffer(_js({"size": 16, "usage": usage.COPY_DST | usage.MAP_READ}))
            encoder.resolveQuerySet(self._queries, 0, 2, self._resolve_buffer, 0)
            encoder.copyBufferToBuffer(self._resolve_buffer, 0, readback, 0, 16)
            self._submit(encoder)
        finally:
            self._pop_scope()
        return _Profile(readback=readback)

    async def _timestamps(self, profile: _Profile) -> tuple[int, int]:
        """The pass's begin and end timestamps (ns), once its submission is done."""
        await self.sync()
        readback = profile.readback
        try:
            await readback.mapAsync(js.GPUMapMode.READ)
            begin, end = struct.unpack("<QQ", readback.getMappedRange().to_bytes())
            readback.unmap()
        except JsException as error:
            raise KernelError(f"reading timestamps failed: {_message(error)}") from None
        finally:
            readback.destroy()
        return begin, end

    async def resolve(self, profile: _Profile) -> float:
        if profile.seconds is not None:
            return profile.seconds
        begin, end = await self._timestamps(profile)
        return (end - begin) * 1e-9 if end > begin else float("nan")

    async def sync(self) -> None:
        """Wait for all submitted work; raise the first validation error of its submissions."""
        await self.queue.onSubmittedWorkDone()
        if self._last_scope is not None:
            await self._last_scope  # scopes close in order: the last one closing means all have
            self._last_scope = None
        if self._errors:
            first, self._errors = self._errors[0], []
            raise KernelError(first)
