"""The native device: wgpu-py (Vulkan, Metal, DX12; Mesa's lavapipe on a machine without a GPU).

Works on the caller's own ``wgpu.GPUDevice`` and buffers, so a wgpu-py application tunes the
kernels it already has, or opens an adapter and a device itself (asking for ``timestamp-query``
when the adapter offers it). Times samples with GPU timestamp queries written at the start and
end of the compute pass; without them, with the wall clock around a full sync. The same pass with
no dispatch in it, timed the same way (:meth:`NativeDevice.time_empty_pass`), is what the core
measures the clock's grain from (``wgtune.clock``).

None of these coroutines ever suspends: the core drives them inline.

Seen with wgpu-py 0.32: ``queue.on_submitted_work_done_*`` raise a cffi TypeError, so
:meth:`NativeDevice.sync` reads a small buffer back instead, which waits for all prior work.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import wgpu

from wgtune.device import CompiledKernel, Device, DeviceIdentity, DeviceLimits, Timing
from wgtune.errors import KernelError
from wgtune.tunable import Args, Grid, Kernel, pack_params

__all__ = ["NativeDevice"]

STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
FEATURE_NAMES = {"subgroup": "subgroups"}
# Features a kernel family may use, asked for wherever the adapter has them.
WANTED_FEATURES = ("timestamp-query", "shader-f16", "subgroup", "subgroups")


@dataclass(frozen=True, eq=False)
class _Profile:
    seconds: float | None = None  # measured already (wall clock)
    readback: Any = None  # buffer holding begin/end timestamps (GPU timestamps)


def _identity(info: dict) -> DeviceIdentity:
    vendor = info.get("vendor") or str(info.get("vendor_id", ""))
    device = info.get("device") or str(info.get("device_id", ""))
    return DeviceIdentity(
        vendor=str(vendor),
        device=str(device),
        driver=str(info.get("description", "")),
        backend=str(info.get("backend_type", "")),
    )


def _limits(limits: dict) -> DeviceLimits:
    return DeviceLimits(
        max_workgroup_storage=int(limits["max-compute-workgroup-storage-size"]),
        max_invocations=int(limits["max-compute-invocations-per-workgroup"]),
        max_workgroup_size=(
            int(limits["max-compute-workgroup-size-x"]),
            int(limits["max-compute-workgroup-size-y"]),
            int(limits["max-compute-workgroup-size-z"]),
        ),
        max_workgroups_per_dimension=int(limits["max-compute-workgroups-per-dimension"]),
    )


class NativeDevice(Device):
    """A wgpu-py ``GPUDevice`` behind wgtune's device interface."""

    def __init__(self, device: wgpu.GPUDevice, *, use_timestamps: bool = True) -> None:
        self.gpu = device
        self.queue = device.queue
        info = dict(device.adapter_info) if getattr(device, "adapter_info", None) else {}
        self.identity = _identity(info)
        self.adapter_info = info
        self.limits = _limits(dict(device.limits))
        # WebGPU's names: wgpu-native says "subgroup" where the spec (and browsers) say "subgroups".
        self.features = frozenset(FEATURE_NAMES.get(f, f) for f in device.features)
        self.timestamps = use_timestamps and "timestamp-query" in device.features
        self.timing = Timing.GPU_TIMESTAMP if self.timestamps else Timing.WALL_CLOCK
        self._sync_buffer = device.create_buffer(size=16, usage=STORAGE)
        if self.timestamps:
            self._queries = device.create_query_set(type=wgpu.QueryType.timestamp, count=2)
            self._resolve_buffer = device.create_buffer(
                size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC
            )

    @classmethod
    def open(cls, power_preference: str = "high-performance", *, use_timestamps: bool = True) -> NativeDevice:
        """Open the default adapter's device, with ``timestamp-query`` when the adapter has it."""
        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        if adapter is None:
            raise RuntimeError(
                "no WebGPU adapter: install a Vulkan driver (on Debian without a GPU: "
                "apt-get install mesa-vulkan-drivers)"
            )
        features = [f for f in WANTED_FEATURES if f in adapter.features]
        if not use_timestamps and "timestamp-query" in features:
            features.remove("timestamp-query")
        # The adapter's own compute limits, not WebGPU's defaults: candidates are checked against them.
        limit_names = [name for name in adapter.limits if "compute" in name or "storage-buffer" in name
                       or name == "max-buffer-size"]
        device = adapter.request_device_sync(
            required_features=features, required_limits={name: adapter.limits[name] for name in limit_names}
        )
        return cls(device, use_timestamps=use_timestamps)

    # -- buffers ----------------------------------------------------------------------------

    def create_buffer(self, data: bytes | bytearray | memoryview | None = None, *, size: int = 0) -> Any:
        """A storage buffer (copyable both ways), filled with ``data`` or zeroed to ``size`` bytes."""
        if data is not None:
            return self.gpu.create_buffer_with_data(data=data, usage=STORAGE)
        return self.gpu.create_buffer(size=max(4, size), usage=STORAGE)

    def clone_buffer(self, buffer: Any) -> Any:
        """A copy to benchmark on. A buffer made without COPY_SRC cannot be copied by anyone: its
        stand-in has the same size and usage, zero-filled (timings rarely depend on the values;
        give the set an ``input_gen`` where they do)."""
        usage = buffer.usage | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        copy = self.gpu.create_buffer(size=buffer.size, usage=usage)
        if buffer.usage & wgpu.BufferUsage.COPY_SRC:
            encoder = self.gpu.create_command_encoder()
            encoder.copy_buffer_to_buffer(buffer, 0, copy, 0, buffer.size)
            self.queue.submit([encoder.finish()])
        return copy

    async def read_buffer(self, buffer: Any) -> bytes:
        return bytes(self.queue.read_buffer(buffer))

    def read_buffer_sync(self, buffer: Any) -> bytes:
        return bytes(self.queue.read_buffer(buffer))

    # -- kernels ----------------------------------------------------------------------------

    async def compile(self, kernel: Kernel) -> CompiledKernel:
        then = tuple([await self.compile(stage) for stage in kernel.then])
        try:
            module = self.gpu.create_shader_module(code=_for_naga(kernel.wgsl), label=kernel.name)
            pipeline = self.gpu.create_compute_pipeline(
                layout="auto", compute={"module": module, "entry_point": kernel.entry_point}, label=kernel.name
            )
            layout = pipeline.get_bind_group_layout(0)
        except Exception as error:  # wgpu-py raises GPUValidationError and friends synchronously
            raise KernelError(_clean(error)) from None
        return CompiledKernel(kernel, pipeline, layout, then)

    def _bind_group(self, pipeline: CompiledKernel, args: Args) -> Any:
        group = args.cache.get(pipeline)
        if group is None:
            buffers = list(args.buffers)
            if args.params:
                uniform = args.cache.get("params")
                if uniform is None:
                    uniform = args.cache["params"] = self.gpu.create_buffer_with_data(
                        data=pack_params(args.params), usage=wgpu.BufferUsage.UNIFORM
                    )
                buffers.append(uniform)
            entries = [
                {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)
            ]
            try:
                group = self.gpu.create_bind_group(layout=pipeline.layout, entries=entries)
            except Exception as error:
                raise KernelError(f"cannot bind the call's buffers: {_clean(error)}") from None
            args.cache[pipeline] = group
        return group

    def _encode(
        self, pipeline: CompiledKernel | None, args: Args | None, grid: Grid, repeats: int, timestamps: bool
    ) -> Any:
        """One compute pass of ``repeats`` launches; with no ``pipeline``, the same pass empty (what
        :meth:`time_empty_pass` times)."""
        encoder = self.gpu.create_command_encoder()
        if timestamps:
            compute = encoder.begin_compute_pass(
                timestamp_writes={
                    "query_set": self._queries,
                    "beginning_of_pass_write_index": 0,
                    "end_of_pass_write_index": 1,
                }
            )
        else:
            compute = encoder.begin_compute_pass()
        # Stages in order, each seeing the previous one's writes (dispatches in a pass are ordered).
        steps = pipeline.steps(args, grid, self._bind_group) if pipeline is not None else []
        for _ in range(repeats):
            for stage_pipeline, stage_group, (x, y, z) in steps:
                compute.set_pipeline(stage_pipeline)
                compute.set_bind_group(0, stage_group)
                compute.dispatch_workgroups(x, y, z)
        compute.end()
        return encoder

    def _submit(self, encoder: Any) -> None:
        try:
            self.queue.submit([encoder.finish()])
        except Exception as error:
            raise KernelError(_clean(error)) from None

    def dispatch(self, pipeline: CompiledKernel, args: Args, grid: Grid, repeats: int = 1) -> None:
        self._submit(self._encode(pipeline, args, grid, repeats, timestamps=False))

    async def profile(self, pipeline: CompiledKernel, args: Args, grid: Grid, repeats: int) -> _Profile:
        if not self.timestamps:
            begin, end = await self._wall_clock(lambda: self.dispatch(pipeline, args, grid, repeats))
            return _Profile(seconds=end - begin)
        return self._launch_timed(pipeline, args, grid, repeats)

    async def time_empty_pass(self) -> tuple[float, float]:
        """The raw readings ``profile`` takes for the same pass with no dispatch in it, on the same
        clock: the two timestamps in seconds (as ``resolve`` converts them), or ``perf_counter()``
        before the submission and after the sync."""
        if self.timestamps:
            begin, end = self._timestamps(self._launch_timed(None, None, (0, 0, 0), 0))
            return begin * 1e-9, end * 1e-9
        return await self._wall_clock(lambda: self._submit(self._encode(None, None, (0, 0, 0), 0, False)))

    async def _wall_clock(self, launch: Callable[[], None]) -> tuple[float, float]:
        """``launch``, timed by the wall clock from an idle queue to the end of a full sync: the
        clock's readings (seconds) before and after."""
        await self.sync()
        started = time.perf_counter()
        launch()
        await self.sync()
        return started, time.perf_counter()

    def _launch_timed(self, pipeline: CompiledKernel | None, args: Args | None, grid: Grid, repeats: int) -> _Profile:
        """Submit the pass with timestamps written around it, and their copy to a fresh readback."""
        encoder = self._encode(pipeline, args, grid, repeats, timestamps=True)
        # One readback buffer per sample: samples are resolved after they all ran.
        readback = self.gpu.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.MAP_READ)
        encoder.resolve_query_set(self._queries, 0, 2, self._resolve_buffer, 0)
        encoder.copy_buffer_to_buffer(self._resolve_buffer, 0, readback, 0, 16)
        self._submit(encoder)
        return _Profile(readback=readback)

    def _timestamps(self, profile: _Profile) -> tuple[int, int]:
        """The pass's begin and end timestamps (ns), waiting for its submission to finish."""
        readback = profile.readback
        readback.map_sync(wgpu.MapMode.READ)
        try:
            begin, end = struct.unpack("<QQ", readback.read_mapped())
        finally:
            readback.unmap()
        return begin, end

    async def resolve(self, profile: _Profile) -> float:
        if profile.seconds is not None:
            return profile.seconds
        begin, end = self._timestamps(profile)
        return (end - begin) * 1e-9 if end >= begin else float("nan")

    async def sync(self) -> None:
        try:
            self.queue.read_buffer(self._sync_buffer)
        except Exception as error:
            raise KernelError(_clean(error)) from None


def _for_naga(wgsl: str) -> str:
    """WGSL as wgpu-py 0.32's compiler (naga) takes it: naga has the subgroup builtins but rejects
    the ``enable subgroups;`` directive that the WebGPU spec (and Chrome) require."""
    return _SUBGROUPS_DIRECTIVE.sub("", wgsl) if "subgroups" in wgsl else wgsl


_SUBGROUPS_DIRECTIVE = re.compile(r"^[ \t]*enable[ \t]+subgroups[ \t]*;[ \t]*$", re.MULTILINE)


def _clean(error: BaseException) -> str:
    """The useful part of a wgpu-native error: the message, without its boilerplate."""
    text = str(error).strip()
    lines = [line for line in text.splitlines() if line.strip() and not line.strip().startswith("In wgpu")]
    return "\n".join(lines) or type(error).__name__
