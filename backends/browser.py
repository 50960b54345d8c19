"""The browser device: WebGPU (``navigator.gpu``) driven from Pyodide through its JS FFI.

A ``GPUDevice`` that the page opened (see ``web/wgtune.js``) or that an embedding page handed
over, behind the same interface as the native device: what the device does is
:class:`~wgtune.backends.webgpu.WebGPUDevice`'s, and this module is the thin
:class:`BrowserShim` it calls WebGPU through, and :class:`BrowserDevice`, which opens one. Every
promise WebGPU returns is awaited, so the core's tune suspends on the JS event loop and the page
stays responsive.

Timing: GPU timestamp queries where the device has ``timestamp-query``; otherwise the wall
clock (``performance.now()``) around ``queue.onSubmittedWorkDone()``. Either clock is coarse in
a browser (Chrome quantizes timestamps on real GPUs; ``performance.now()`` is 5 us when the page
is cross-origin isolated, 100 us when not, and every wall-clock reading pays for a submission and
a promise), so the core measures the clock's grain with ``time_empty_pass`` (see
``wgtune.gpu.clock``) and repeats dispatches inside each timed pass until a sample is long against it.

Validation errors in WebGPU are asynchronous: the calls that a kernel or a call's buffers can make
fail (binding the buffers, submitting the work) run inside an error scope whose result the shim
collects, and the device's ``sync`` raises the first as a KernelError. A call's first launch on its
buffers (``WebGPUDevice.launch``) has an error scope of its own instead, which ``set.execute``
awaits (``js_sets.py``): its errors are that call's, never a later tune's. None of those becomes an
"uncaptured error" in the console.

A tune waiting on WebGPU may be cancelled (``wgtune.dispose()``, ``page_dispose.py``), and WebGPU
answers afterwards all the same. What it waits on is shielded (:func:`asyncio.shield`), so the
cancel never reaches a future WebGPU's answer still resolves: Pyodide's ``PyodideFuture.then``
sets its future's result without asking whether that future was cancelled meanwhile, which
printed ``InvalidStateError: invalid state`` to the console after a dispose mid-tune.

Importable only in Pyodide (it imports ``js`` and ``pyodide.ffi``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import js
from pyodide.ffi import JsException, create_proxy, jsnull, to_js

from wgtune.errors import KernelError
from wgtune.gpu.device import DeviceIdentity, DeviceLimits
from wgtune.sets.bindings import declared_layout
from wgtune.sets.kernel import Kernel

from .webgpu import WebGPUDevice, as_value

__all__ = ["BrowserDevice", "BrowserShim", "identity_of", "js_object", "limits_of"]


def js_object(value: Any) -> Any:
    """A Python value (dicts, lists, JS objects inside) as plain JS: dicts as objects, not Maps."""
    return to_js(value, dict_converter=js.Object.fromEntries)



def _absent(value: Any) -> bool:
    """JS ``null`` arrives as ``jsnull`` and ``undefined`` as None: both mean nothing."""
    return value is None or value is jsnull


def _message(error: BaseException | Any) -> str:
    text = getattr(error, "message", None) or str(error)
    return str(text).strip() or type(error).__name__


def _unbound(interface: Any, name: str) -> Any:
    """WebGPU's method ``name`` of ``interface`` as a plain JS function of (object, *args):
    ``Function.prototype.call`` bound to the method. Calling it from Python is one call into JS,
    with no Python frame and no look-up of the method on the object."""
    return js.Function.prototype.call.bind(getattr(interface.prototype, name))


class BrowserShim:
    """The WebGPU calls :class:`~wgtune.backends.webgpu.WebGPUDevice` makes, on a browser's
    ``GPUDevice`` (see :class:`~wgtune.backends.gpu_shim.GPUShim` for what each one does)."""

    def __init__(self, gpu_device: Any) -> None:
        self.gpu = gpu_device
        self.queue = gpu_device.queue
        usage = js.GPUBufferUsage
        self.MAP_READ = int(usage.MAP_READ)
        self.COPY_SRC = int(usage.COPY_SRC)
        self.COPY_DST = int(usage.COPY_DST)
        self.UNIFORM = int(usage.UNIFORM)
        self.STORAGE = int(usage.STORAGE)
        self.QUERY_RESOLVE = int(usage.QUERY_RESOLVE)
        self.create_command_encoder = gpu_device.createCommandEncoder
        self._plain_pass = js_object({})  # the descriptor of a pass without timestamps, made once
        compute_pass = js.GPUComputePassEncoder
        self.set_pipeline = _unbound(compute_pass, "setPipeline")
        self.set_bind_group = _unbound(compute_pass, "setBindGroup")
        self.dispatch_workgroups = _unbound(compute_pass, "dispatchWorkgroups")
        self.end = _unbound(compute_pass, "end")
        # Each error scope reports here; reported_error() answers the first and clears them.
        # A callback rather than a list of promises: calls that never sync keep nothing alive.
        self._errors: list[str] = []
        self._last_scope: Any = None
        self._in_call = False  # a call's scope is open (begin_call_scope): the others are not pushed
        self._layouts: dict[tuple, tuple[Any, Any]] = {}  # declared layouts (Kernel.layout) by their entries
        self._launch_owners: deque = deque()  # submit_launch's owners, oldest first
        self._on_launch_scope = create_proxy(self._launch_scope_closed)
        self.on_launch_refused: Any = None  # set by the device: (owner, message) -> None
        self._on_scope = create_proxy(self._scope_closed)
        # Why the device was lost, once its ``lost`` promise resolves (a GPU watchdog, destroy()).
        self._lost: str | None = None
        self._on_lost = create_proxy(self._device_lost)
        gpu_device.lost.then(self._on_lost)

    def _device_lost(self, info: Any) -> None:
        self._lost = f"{getattr(info, 'reason', '') or 'unknown'}: {_message(info)}"

    def lost(self) -> str | None:
        return self._lost

    # -- error scopes -----------------------------------------------------------------------

    def _scope_closed(self, error: Any) -> None:
        if not _absent(error):
            self._errors.append(_message(error))

    def _push_scope(self) -> None:
        if not self._in_call:  # inside a call's scope, its errors are the call's
            self.gpu.pushErrorScope("validation")

    def _pop_scope(self) -> None:
        if not self._in_call:
            self._last_scope = self.gpu.popErrorScope().then(self._on_scope)

    def submit_launch(self, encoder: Any, owner: Any) -> Any:
        """:meth:`submit` for a call's launch after its first, or a batch's launches: its error, if
        WebGPU reports one, goes to ``on_launch_refused(owner, message)`` (the device's), not to
        :meth:`reported_error`. The scopes close in order, so the owners wait in a queue. Answers
        the promise that resolves once that was done (a batch's caller awaits it)."""
        self.gpu.pushErrorScope("validation")
        try:
            self.queue.submit(to_js([encoder.finish()]))
        finally:
            self._launch_owners.append(owner)
            closed = self.gpu.popErrorScope().then(self._on_launch_scope)
        return closed

    def _launch_scope_closed(self, error: Any) -> None:
        owner = self._launch_owners.popleft()
        if not _absent(error) and self.on_launch_refused is not None:
            self.on_launch_refused(owner, _message(error))

    def begin_call_scope(self) -> None:
        """Open one call's error scope: every error of the calls made until :meth:`end_call_scope`
        (binding, encoding, submitting its launch) is caught there, none in the scopes that
        :meth:`reported_error` reads."""
        self.gpu.pushErrorScope("validation")
        self._in_call = True

    def end_call_scope(self) -> Any:
        """Close the call's scope: the promise of its GPUError (or null)."""
        self._in_call = False
        return self.gpu.popErrorScope()

    async def scope_error(self, scope: Any) -> str | None:
        """WebGPU's message for a call's scope (:meth:`end_call_scope`), or None."""
        error = await asyncio.shield(scope)  # a cancelled caller leaves the scope to close (module doc)
        return None if _absent(error) else _message(error)

    def report_scope(self, scope: Any) -> None:
        """A call's scope nobody awaited: its error goes to :meth:`reported_error`, as any scope's."""
        handled = scope.then(self._on_scope)
        self._last_scope = handled if self._last_scope is None else js.Promise.all(to_js([self._last_scope, handled]))

    def buffer_problem(self, buffer: Any) -> None:
        """Always None: a GPUBuffer tells neither its device nor whether it was destroyed; the
        call's error scope catches both."""
        return None

    async def reported_error(self) -> str | None:
        if self._last_scope is not None:
            # Scopes close in order: the last one closing means all have. Shielded: a tune
            # cancelled here (a dispose) must not cancel the future that WebGPU's answer, still to
            # come, resolves through PyodideFuture.then (see the module doc); other tunes await it too.
            await asyncio.shield(self._last_scope)
            self._last_scope = None
        if not self._errors:
            return None
        first, self._errors = self._errors[0], []
        return first

    # -- buffers ----------------------------------------------------------------------------

    # Buffers and writes are not scoped: wgtune sizes and aligns them itself, and a scope costs a
    # promise and a call back into Python (a read_buffer makes one buffer, a timed sample one).

    def create_buffer(self, size: int, usage: int) -> Any:
        return self.gpu.createBuffer(js_object({"size": size, "usage": usage}))

    def write_buffer(self, buffer: Any, offset: int, data: bytes | memoryview) -> None:
        self.queue.writeBuffer(buffer, offset, to_js(memoryview(data)))

    def destroy_buffer(self, buffer: Any) -> None:
        buffer.destroy()

    async def map_read(self, buffer: Any, take: Callable[[Any], Any] = bytes) -> Any:
        # All submitted work first, not only the work writing this buffer: on a software GPU
        # (SwiftShader) the passes still queued, timed ones included, share the CPU with the page,
        # so the page waits idle rather than run on and slow them.
        await self.queue.onSubmittedWorkDone()
        try:
            await buffer.mapAsync(js.GPUMapMode.READ)
            data = buffer.getMappedRange().to_bytes()
            buffer.unmap()
        except JsException as error:
            raise KernelError(_message(error)) from None
        return take(data)  # bytes already (to_bytes copied them): bytes() keeps them as they are

    def create_query_set(self, count: int) -> Any:
        return self.gpu.createQuerySet(js_object({"type": "timestamp", "count": count}))

    def timestamp_writes(self, query_set: Any, beginning_index: int, end_index: int) -> Any:
        """The whole pass descriptor, converted to JS once."""
        return js_object({"timestampWrites": {
            "querySet": query_set, "beginningOfPassWriteIndex": beginning_index, "endOfPassWriteIndex": end_index,
        }})

    # -- pipelines and bindings -------------------------------------------------------------

    async def compile_module(self, kernel: Kernel) -> tuple[Any, Any]:
        gpu = self.gpu
        layouts = await self._declared_layout(kernel) if kernel.layout == "declared" else None
        gpu.pushErrorScope("validation")
        module = gpu.createShaderModule(js_object({"code": kernel.wgsl, "label": kernel.name}))
        problem = await gpu.popErrorScope()
        messages = await module.getCompilationInfo()
        errors = [
            f"{kernel.name}:{m.lineNum}:{m.linePos}: {m.message}" for m in messages.messages if m.type == "error"
        ]
        if errors or not _absent(problem):
            raise KernelError("\n".join(errors) or _message(problem))
        compute = {"module": module, "entryPoint": kernel.entry_point}
        if kernel.constants:  # GPUPipelineConstantValue is a double
            compute["constants"] = {name: float(value) for name, value in kernel.constants.items()}
        descriptor = {"layout": "auto" if layouts is None else layouts[0], "compute": compute, "label": kernel.name}
        try:
            pipeline = await gpu.createComputePipelineAsync(js_object(descriptor))
        except JsException as error:  # a GPUPipelineError: the pipeline's own validation failed
            raise KernelError(_message(error)) from None
        return pipeline, pipeline.getBindGroupLayout(0) if layouts is None else layouts[1]

    async def _declared_layout(self, kernel: Kernel) -> tuple[Any, Any]:
        """The pipeline layout and bind group layout of ``kernel``'s declared bindings
        (``bindings.declared_layout``; a KernelError where it has none), made once per set of
        entries, in an error scope of their own: one WebGPU refuses (more storage buffers than
        the device binds in a stage, say) is that candidate's KernelError, and is not kept."""
        entries = declared_layout(kernel)
        made = self._layouts.get(entries)
        if made is None:
            gpu = self.gpu
            gpu.pushErrorScope("validation")
            group = gpu.createBindGroupLayout(js_object({"entries": [
                {"binding": binding, "visibility": js.GPUShaderStage.COMPUTE, "buffer": {"type": kind}}
                for binding, kind in entries]}))
            layout = gpu.createPipelineLayout(js_object({"bindGroupLayouts": [group]}))
            problem = await gpu.popErrorScope()
            if not _absent(problem):
                raise KernelError(f"{kernel.name}: its declared layout: {_message(problem)}")
            made = self._layouts[entries] = (layout, group)
        return made

    async def compile_modules(self, kernels: Sequence[Kernel]) -> list[tuple[Any, Any] | Exception]:
        """All at once: each compile's synchronous part (module, error scope) runs before its
        first wait, so the scopes never interleave, and the browser overlaps the
        ``createComputePipelineAsync`` calls on its own threads. Each compile's coroutine is made
        in its own task: a tune cancelled before those tasks ran (a dispose) leaves none never
        awaited (Python warns of one on the console)."""

        async def compiled(kernel: Kernel) -> tuple[Any, Any] | Exception:
            return await as_value(self.compile_module(kernel))

        return list(await asyncio.gather(*(compiled(kernel) for kernel in kernels)))

    def bind_group_layout(self, pipeline: Any, index: int) -> Any:
        self._push_scope()  # an index the pipeline lacks surfaces here, collected by reported_error()
        try:
            return pipeline.getBindGroupLayout(index)
        finally:
            self._pop_scope()

    def create_bind_group(self, layout: Any, buffers: Sequence[tuple[int, Any]]) -> Any:
        entries = [{"binding": i, "resource": {"buffer": b}} for i, b in buffers]
        self._push_scope()  # a binding error surfaces here, collected by reported_error()
        try:
            return self.gpu.createBindGroup(js_object({"layout": layout, "entries": entries}))
        finally:
            self._pop_scope()

    # -- commands ---------------------------------------------------------------------------

    def begin_compute_pass(self, encoder: Any, *, timestamp_writes: Any = None) -> Any:
        return encoder.beginComputePass(self._plain_pass if timestamp_writes is None else timestamp_writes)

    def copy_buffer_to_buffer(
        self, encoder: Any, source: Any, source_offset: int, destination: Any, destination_offset: int, size: int
    ) -> None:
        encoder.copyBufferToBuffer(source, source_offset, destination, destination_offset, size)

    def resolve_query_set(
        self, encoder: Any, query_set: Any, first_query: int, query_count: int, destination: Any,
        destination_offset: int,
    ) -> None:
        encoder.resolveQuerySet(query_set, first_query, query_count, destination, destination_offset)

    def submit(self, encoder: Any) -> None:
        self._push_scope()
        try:
            self.queue.submit(to_js([encoder.finish()]))
        finally:
            self._pop_scope()

    # -- waiting ----------------------------------------------------------------------------

    async def on_submitted_work_done(self) -> None:
        await self.queue.onSubmittedWorkDone()

    def now(self) -> float:
        return js.performance.now() / 1000.0


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
        max_storage_binding=int(limits.maxStorageBufferBindingSize),
    )


class BrowserDevice(WebGPUDevice):
    """A WebGPU ``GPUDevice`` (a JS object) behind wgtune's device interface.

    ``adapter_info`` is the adapter's ``GPUAdapterInfo`` as a dict (vendor, architecture,
    device, description). ``clock_grain`` is the fallback until the core measures the grain
    (``wgtune.gpu.clock``): the page passes the step of ``performance.now()`` it saw in JS.
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
        self.clock_grain = max(float(clock_grain), 1e-6)
        # A GPU's clock idles; a fallback adapter (Chrome's SwiftShader) runs on the host's cores. A
        # browser tells no more (an adapter's type is one of Chrome's developer features).
        self.idle_clocks = not self.adapter_info.get("isFallbackAdapter", False)
        timestamps = bool(use_timestamps and gpu_device.features.has("timestamp-query"))
        super().__init__(BrowserShim(gpu_device), timestamps=timestamps)

    async def pause(self) -> None:
        """The rest in a later task of the page (``slices.py`` says why ``sleep(0)`` is one)."""
        await asyncio.sleep(0)
