"""The thin seam between :class:`~wgtune.backends.webgpu.WebGPUDevice` and wgpu-py: :class:`WgpuShim`.

The WebGPU calls the device makes (buffers, compiles, bind groups, passes, submission, error
scopes), each on a wgpu-py ``GPUDevice``. wgpu-py raises errors at the call: each becomes a
:class:`~wgtune.errors.KernelError` with the driver's message (:func:`_clean`). None of the shim's
coroutines ever suspends: the core drives them inline. Pipelines are compiled on up to
:data:`COMPILE_THREADS` threads at once (``compile_modules``, ``start_compiles``) on wgpu-native,
on the calling thread alone on any other implementation (:attr:`WgpuShim.compile_threads`; Dawn's
shim, ``dawn_shim.py``, has Dawn compile them in parallel instead).

Seen with wgpu-py 0.32: ``queue.on_submitted_work_done_*`` raise a cffi TypeError, so the shim
waits for submitted work by reading a small buffer back, which waits for all prior work.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import wgpu

from wgtune.errors import KernelError
from wgtune.runner import run_inline
from wgtune.sets.bindings import declared_layout
from wgtune.sets.kernel import Kernel

from .native_adapters import is_wgpu_native
from .unchecked import create_unchecked_module
from .webgpu import as_value

__all__ = ["COMPILE_THREADS", "WgpuShim"]

# Threads that compile pipelines at once: as many as the cores, up to 16 (past that the H200's
# driver gained nothing).
COMPILE_THREADS = max(1, min(16, os.cpu_count() or 1))


class WgpuShim:
    """The WebGPU calls :class:`~wgtune.backends.webgpu.WebGPUDevice` makes, on a wgpu-py
    ``GPUDevice`` (see :class:`~wgtune.backends.gpu_shim.GPUShim` for what each one does)."""

    MAP_READ = int(wgpu.BufferUsage.MAP_READ)
    COPY_SRC = int(wgpu.BufferUsage.COPY_SRC)
    COPY_DST = int(wgpu.BufferUsage.COPY_DST)
    UNIFORM = int(wgpu.BufferUsage.UNIFORM)
    STORAGE = int(wgpu.BufferUsage.STORAGE)
    QUERY_RESOLVE = int(wgpu.BufferUsage.QUERY_RESOLVE)

    now = staticmethod(time.perf_counter)

    def __init__(self, device: wgpu.GPUDevice) -> None:
        self.device = device
        self.queue = device.queue
        # wgpu-native's own entry points (trusted modules, a pass's commands) for its devices
        # only: another implementation of wgpu-py's API (Dawn's, ``dawn.py``) has its own handles.
        self.wgpu_native = is_wgpu_native(device)
        # wgpu-py's own functions where they cost nothing: the device's bound method, and the
        # encoder's and the pass's methods as plain functions of the object, taken from the
        # classes this device's objects really are; a pass's commands straight from wgpu-native.
        self.create_command_encoder = device.create_command_encoder
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.end()
        encoder_type, pass_type = type(encoder), type(compute)
        self.begin_compute_pass = encoder_type.begin_compute_pass  # (encoder, *, timestamp_writes=None)
        self.set_pipeline, self.set_bind_group, self.dispatch_workgroups = (
            _pass_commands(pass_type) if self.wgpu_native
            else (pass_type.set_pipeline, pass_type.set_bind_group, pass_type.dispatch_workgroups))
        self.end = pass_type.end
        self._compilers: ThreadPoolExecutor | None = None  # made on the first compile of several
        self._started: dict[int, tuple[Kernel, Future]] = {}  # compiles begun ahead, by id(kernel)
        self._probe_layout: Any = None  # buffer_problem's bind group layout, made on first use
        # Declared layouts (Kernel.layout), one per set of entries, so that stages declaring the
        # same bindings get one layout object and can share bind groups; compile threads make them.
        self._layouts: dict[tuple, tuple[Any, Any]] = {}
        self._layouts_lock = threading.Lock()
        # Read back to wait for the queue (see the module's docstring).
        self._sync_buffer = device.create_buffer(size=16, usage=self.STORAGE | self.COPY_SRC | self.COPY_DST)

    @property
    def compile_threads(self) -> int:
        """Threads that compile at once: :data:`COMPILE_THREADS` on wgpu-native, which captures each
        call's errors on the thread that made it; 1 (the calling thread) on any other implementation
        of wgpu-py's API, whose errors may not be the thread's (Dawn's: ``dawn_shim.py``)."""
        return COMPILE_THREADS if self.wgpu_native else 1

    @property
    def compile_width(self) -> int:
        """How many compiles :meth:`compile_modules` overlaps (``Device.compile_width``)."""
        return self.compile_threads

    # -- buffers ----------------------------------------------------------------------------

    def create_buffer(self, size: int, usage: int) -> Any:
        try:
            return self.device.create_buffer(size=size, usage=usage)
        except Exception as error:
            raise KernelError(_clean(error)) from None

    def write_buffer(self, buffer: Any, offset: int, data: bytes | memoryview) -> None:
        try:
            self.queue.write_buffer(buffer, offset, data)
        except Exception as error:
            raise KernelError(_clean(error)) from None

    def destroy_buffer(self, buffer: Any) -> None:
        buffer.destroy()

    async def map_read(self, buffer: Any, take: Callable[[Any], Any] = bytes) -> Any:
        try:
            buffer.map_sync(wgpu.MapMode.READ)
            try:
                return take(buffer.read_mapped(copy=False))  # one copy (take's), made before the unmap
            finally:
                buffer.unmap()
        except Exception as error:
            raise KernelError(_clean(error)) from None

    def create_query_set(self, count: int) -> Any:
        return self.device.create_query_set(type=wgpu.QueryType.timestamp, count=count)

    def timestamp_writes(self, query_set: Any, beginning_index: int, end_index: int) -> dict:
        return {
            "query_set": query_set,
            "beginning_of_pass_write_index": beginning_index,
            "end_of_pass_write_index": end_index,
        }

    # -- pipelines and bindings -------------------------------------------------------------

    async def compile_module(self, kernel: Kernel) -> tuple[Any, Any]:
        started = self._take_started(kernel)
        if started is None:
            return await self._create_pipeline(kernel)
        module = started.result()
        if isinstance(module, Exception):
            raise module
        return module

    async def _create_pipeline(self, kernel: Kernel) -> tuple[Any, Any]:
        try:
            layout, compute, group = self._pipeline_parts(kernel)
            pipeline = self.device.create_compute_pipeline(layout=layout, compute=compute, label=kernel.name)
            return pipeline, group if group is not None else pipeline.get_bind_group_layout(0)
        except Exception as error:  # wgpu-py raises GPUValidationError and friends synchronously
            raise KernelError(_clean(error)) from None

    def _pipeline_parts(self, kernel: Kernel) -> tuple[Any, dict, Any]:
        """``kernel``'s pipeline but the pipeline itself: its layout (``"auto"`` or the declared one),
        its compute stage (the module made) and its declared bind group layout (None for "auto")."""
        if not self.wgpu_native:  # Dawn takes the spec's WGSL and always checks, as browsers do
            module = self.device.create_shader_module(code=kernel.wgsl, label=kernel.name)
        elif kernel.runtime_checks:
            module = self.device.create_shader_module(code=_for_naga(kernel.wgsl), label=kernel.name)
        else:
            module = create_unchecked_module(self.device, _for_naga(kernel.wgsl), kernel.name)
        compute = {"module": module, "entry_point": kernel.entry_point}
        if kernel.constants:
            compute["constants"] = {name: float(value) for name, value in kernel.constants.items()}
        if kernel.layout == "auto":
            return "auto", compute, None
        layout, group = self._declared_layout(kernel)
        return layout, compute, group

    def _declared_layout(self, kernel: Kernel) -> tuple[Any, Any]:
        """The pipeline layout and bind group layout of ``kernel``'s declared bindings
        (``bindings.declared_layout``), made once per set of entries."""
        entries = declared_layout(kernel)
        with self._layouts_lock:
            made = self._layouts.get(entries)
            if made is None:
                group = self.device.create_bind_group_layout(entries=[
                    {"binding": binding, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": kind}}
                    for binding, kind in entries])
                made = self._layouts[entries] = (self.device.create_pipeline_layout(bind_group_layouts=[group]), group)
        return made

    async def compile_modules(self, kernels: Sequence[Kernel]) -> list[tuple[Any, Any] | Exception]:
        """Compiled from worker threads: the driver's compiler is most of a pipeline's cost and runs
        outside the GIL, so they overlap (51 matmul pipelines on an H200: 7.4 s one by one, 0.86 s
        from 16 threads). wgpu-py captures each call's errors per thread."""
        if len(kernels) < 2 or self.compile_threads == 1:
            return [await as_value(self.compile_module(kernel)) for kernel in kernels]
        pool = self._pool()
        futures = [self._take_started(kernel) or pool.submit(self._compile_on_worker, kernel) for kernel in kernels]
        return [future.result() for future in futures]

    def start_compiles(self, kernels: Sequence[Kernel]) -> None:
        """Begin compiling on the worker threads and return: the GPU goes on measuring the
        candidates before them meanwhile. :meth:`compile_module` and :meth:`compile_modules`
        take a begun compile's answer, waiting for it if it is not done. Nothing where compiles stay
        on the calling thread (:attr:`compile_threads` 1): they are made when taken."""
        if self.compile_threads == 1:
            return
        pool = self._pool()
        for kernel in kernels:
            if id(kernel) not in self._started:
                self._started[id(kernel)] = (kernel, pool.submit(self._compile_on_worker, kernel))

    def drop_started(self, kernels: Sequence[Kernel]) -> None:
        """Forget the compiles begun for ``kernels`` and not taken; those still queued for a thread
        are cancelled, and one running ends with nobody to take its pipeline (so does every one
        :class:`DawnShim` began: Dawn's workers have no cancel)."""
        for kernel in kernels:
            begun = self._take_started(kernel)
            if isinstance(begun, Future):
                begun.cancel()

    def _take_started(self, kernel: Kernel) -> Future | None:
        begun = self._started.pop(id(kernel), None)
        return begun[1] if begun is not None and begun[0] is kernel else None

    def _compile_on_worker(self, kernel: Kernel) -> tuple[Any, Any] | Exception:
        return run_inline(as_value(self._create_pipeline(kernel)))

    def close(self) -> None:
        """Stop the compile threads; compiles begun ahead and not yet taken are dropped. A later
        compile of several starts them again."""
        self._started.clear()
        if self._compilers is not None:
            self._compilers.shutdown(wait=False, cancel_futures=True)
            self._compilers = None

    def _pool(self) -> ThreadPoolExecutor:
        if self._compilers is None:
            self._compilers = ThreadPoolExecutor(self.compile_threads, thread_name_prefix="wgtune-compile")
        return self._compilers

    def bind_group_layout(self, pipeline: Any, index: int) -> Any:
        try:
            return pipeline.get_bind_group_layout(index)
        except Exception as error:
            raise KernelError(_clean(error)) from None

    def create_bind_group(self, layout: Any, buffers: Sequence[tuple[int, Any]]) -> Any:
        entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in buffers]
        try:
            return self.device.create_bind_group(layout=layout, entries=entries)
        except Exception as error:
            raise KernelError(_clean(error)) from None

    def buffer_problem(self, buffer: Any) -> str | None:
        """Another device's buffer (wgpu-py keeps each buffer's device), or a destroyed one: a
        probe bind group over its first word, which wgpu-core refuses at once for a destroyed
        buffer (wgpu-py itself does not tell). Only STORAGE buffers of a whole word or more are
        probed: the device checked usage and size first."""
        owner = getattr(buffer, "_device", None)
        if owner is not None and owner is not self.device:
            return "the buffer belongs to another GPUDevice"
        if not int(buffer.usage) & self.STORAGE or buffer.size < 4:
            return None
        if self._probe_layout is None:
            self._probe_layout = self.device.create_bind_group_layout(entries=[{
                "binding": 0, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "read-only-storage"}}])
        try:
            self.device.create_bind_group(layout=self._probe_layout, entries=[
                {"binding": 0, "resource": {"buffer": buffer, "offset": 0, "size": 4}}])
        except Exception as error:
            text = _clean(error)
            return "the buffer was destroyed" if "destroyed" in text else text
        return None

    # A call's launch: wgpu-py raises at the call, so there is no scope to keep.

    def begin_call_scope(self) -> None:
        return None

    def end_call_scope(self) -> None:
        return None

    async def scope_error(self, scope: Any) -> str | None:
        return None

    def report_scope(self, scope: Any) -> None:
        return None

    # -- commands ---------------------------------------------------------------------------

    def copy_buffer_to_buffer(
        self, encoder: Any, source: Any, source_offset: int, destination: Any, destination_offset: int, size: int
    ) -> None:
        encoder.copy_buffer_to_buffer(source, source_offset, destination, destination_offset, size)

    def resolve_query_set(
        self, encoder: Any, query_set: Any, first_query: int, query_count: int, destination: Any,
        destination_offset: int,
    ) -> None:
        encoder.resolve_query_set(query_set, first_query, query_count, destination, destination_offset)

    def submit(self, encoder: Any) -> None:
        try:
            self.queue.submit([encoder.finish()])
        except Exception as error:
            raise KernelError(_clean(error)) from None

    # -- waiting ----------------------------------------------------------------------------

    async def on_submitted_work_done(self) -> None:
        try:
            self.queue.read_buffer(self._sync_buffer)
        except Exception as error:
            raise KernelError(_clean(error)) from None

    async def reported_error(self) -> None:
        """Always None: wgpu-py raises every error at the call that caused it."""
        return None

    def lost(self) -> None:
        """Always None: wgpu-py raises at the call on a lost device."""
        return None


def _pass_commands(pass_type: type) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]]:
    """``set_pipeline(pass, pipeline)``, ``set_bind_group(pass, index, group)`` (no dynamic
    offsets: wgtune binds none) and ``dispatch_workgroups(pass, x, y, z)``: wgpu-native's own
    functions, called straight. Recording a launch into a batch costs the host about as long as a
    small kernel runs, and wgpu-py's methods add a frame, an error capture per call and, for
    bind groups, a C array of the offsets: 0.7 us against 0.27 us a dispatch here (lavapipe's
    host), and 13.2 against 12.1 us a launch in batches of a 1M fma on an H200's host for the
    bind groups alone. wgpu-core validates a pass's commands when it ends, so the errors these
    could report are raised by ``end`` and ``submit``, which still go through wgpu-py. Where
    wgpu-py has no such functions, its methods."""
    try:
        from wgpu.backends.wgpu_native._ffi import ffi, lib

        set_pipeline_c = lib.wgpuComputePassEncoderSetPipeline
        set_bind_group_c = lib.wgpuComputePassEncoderSetBindGroup
        dispatch_c = lib.wgpuComputePassEncoderDispatchWorkgroups
    except (ImportError, AttributeError):
        return pass_type.set_pipeline, pass_type.set_bind_group, pass_type.dispatch_workgroups
    no_offsets = ffi.NULL

    def set_pipeline(compute: Any, pipeline: Any) -> None:
        set_pipeline_c(compute._internal, pipeline._internal)

    def set_bind_group(compute: Any, index: int, bind_group: Any) -> None:
        set_bind_group_c(compute._internal, index, bind_group._internal, 0, no_offsets)

    def dispatch_workgroups(compute: Any, x: int, y: int, z: int) -> None:
        dispatch_c(compute._internal, x, y, z)

    return set_pipeline, set_bind_group, dispatch_workgroups


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
