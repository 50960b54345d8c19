"""What :class:`~wgtune.backends.webgpu.WebGPUDevice` needs of a GPU: the shim each backend hands it.

One thin method per WebGPU call the device algorithm makes, named after the call: ``native.py``
implements it over wgpu-py, ``browser.py`` over ``navigator.gpu`` through Pyodide.

Pure Python (the standard library and ``wgtune`` only): it imports in CPython and in Pyodide.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from wgtune.sets.kernel import Kernel

__all__ = ["GPUShim"]


class GPUShim(Protocol):
    """What :class:`WebGPUDevice` needs of a GPU: one thin method per WebGPU call it makes.

    Buffers, pipelines, layouts, bind groups, encoders and query sets are the backend's own
    objects, passed back to it untouched; the algorithm reads only a buffer's ``size`` and
    ``usage``, which wgpu-py and the browser spell alike. A method that fails raises
    :class:`~wgtune.errors.KernelError` with the driver's message, or, where the GPU reports errors
    later (a browser's error scopes), records them for :meth:`reported_error`. The coroutines of a
    native shim never suspend, so the core can drive them inline.
    """

    # GPUBufferUsage flags, as ints.
    MAP_READ: int
    COPY_SRC: int
    COPY_DST: int
    UNIFORM: int
    STORAGE: int
    QUERY_RESOLVE: int

    def create_buffer(self, size: int, usage: int) -> Any:
        """A new buffer of ``size`` bytes (a multiple of 4) and ``usage``, zero-filled."""

    def write_buffer(self, buffer: Any, offset: int, data: bytes | memoryview) -> None:
        """Queue a write of ``data`` (a multiple of 4 bytes) into ``buffer`` at ``offset``."""

    def destroy_buffer(self, buffer: Any) -> None:
        """Free ``buffer``'s memory now, without waiting for the garbage collector."""

    async def map_read(self, buffer: Any, take: Callable[[Any], Any] = bytes) -> Any:
        """``take`` of the contents of a MAP_READ buffer, once the work writing it is done: given a
        bytes-like view of the mapped range before the unmap, it keeps what it needs (by default a
        copy as bytes) and no reference to the view. A shim may wait for all submitted work first:
        the browser's does, natively it would cost a readback per timed sample."""

    def create_query_set(self, count: int) -> Any:
        """A set of ``count`` timestamp queries."""

    def timestamp_writes(self, query_set: Any, beginning_index: int, end_index: int) -> Any:
        """What :meth:`begin_compute_pass` takes to write the pass's begin and end timestamps into
        ``query_set`` at those indices. Made once and reused for every timed pass."""

    def create_bind_group(self, layout: Any, buffers: Sequence[tuple[int, Any]]) -> Any:
        """A bind group of ``layout`` with each ``(binding, buffer)`` pair bound whole."""

    async def compile_module(self, kernel: Kernel) -> tuple[Any, Any]:
        """``kernel``'s WGSL compiled to a compute pipeline (entry point ``kernel.entry_point``,
        layout ``kernel.layout``: "auto", or for "declared" one made from
        ``bindings.declared_layout``, the same object for the same entries): the pipeline and its
        bind group layout 0. Raises KernelError with the compiler's message."""

    async def compile_modules(self, kernels: Sequence[Kernel]) -> list[tuple[Any, Any] | Exception]:
        """:meth:`compile_module` of each kernel, overlapped where the platform can (worker
        threads natively, the browser's concurrent ``createComputePipelineAsync``): each one's
        answer, or its KernelError, in order."""

    def start_compiles(self, kernels: Sequence[Kernel]) -> None:
        """Begin compiling ``kernels`` in the background and return, where the platform can (worker
        threads natively); :meth:`compile_module` then takes each answer. Nothing by default."""

    def drop_started(self, kernels: Sequence[Kernel]) -> None:
        """Forget the compiles :meth:`start_compiles` began for ``kernels`` that nothing took
        (natively those still queued for a thread are cancelled; one running, or one begun on
        Dawn's workers, ends with nobody to take it). Nothing by default."""

    def bind_group_layout(self, pipeline: Any, index: int) -> Any:
        """The pipeline's bind group layout ``index`` (asked for groups other than 0 only)."""

    def create_command_encoder(self) -> Any:
        """A new command encoder."""

    def begin_compute_pass(self, encoder: Any, *, timestamp_writes: Any = None) -> Any:
        """A compute pass begun on ``encoder``, writing timestamps where ``timestamp_writes`` (as
        :meth:`timestamp_writes` made it) is given."""

    # A compute pass's commands, as plain functions of the pass rather than methods of the shim:
    # natively wgpu-py's own functions, in the browser JS's, so that a launch (a pass of many
    # repeats makes thousands) reaches the GPU through no Python frame of wgtune's.
    set_pipeline: Callable[[Any, Any], None]
    """``set_pipeline(compute_pass, pipeline)``"""
    set_bind_group: Callable[[Any, int, Any], None]
    """``set_bind_group(compute_pass, index, bind_group)``"""
    dispatch_workgroups: Callable[[Any, int, int, int], None]
    """``dispatch_workgroups(compute_pass, x, y, z)``"""
    end: Callable[[Any], None]
    """``end(compute_pass)``"""

    def copy_buffer_to_buffer(
        self, encoder: Any, source: Any, source_offset: int, destination: Any, destination_offset: int, size: int
    ) -> None:
        """Encode a copy of ``size`` bytes."""

    def resolve_query_set(
        self, encoder: Any, query_set: Any, first_query: int, query_count: int, destination: Any,
        destination_offset: int,
    ) -> None:
        """Encode the copy of query results (u64 each) into ``destination``."""

    def submit(self, encoder: Any) -> None:
        """Finish ``encoder`` and submit its command buffer to the queue."""

    async def on_submitted_work_done(self) -> None:
        """Wait until the GPU has done all work submitted so far."""

    async def reported_error(self) -> str | None:
        """The first error the GPU reported since the last call, once every submission so far has
        been checked, or None; forgets the others. None always where errors raise at the call."""

    def buffer_problem(self, buffer: Any) -> str | None:
        """Why WebGPU would refuse to bind the call's ``buffer`` where its size and usage do not
        show it and the shim can tell at once: another device's buffer, a destroyed one (natively);
        None otherwise (always, in a browser: the call's error scope catches those)."""

    # Optional, where errors are reported later (a browser): ``submit_launch(encoder, owner)``
    # submits a call's launch after its first, or a batch's launches, and WebGPU's error for it,
    # if any, is handed to ``on_launch_refused(owner, message)`` (set by the device), never to
    # reported_error(); it answers an awaitable that ends once that was done (the error scope
    # closed and the handler ran), which a batch's caller awaits.

    def begin_call_scope(self) -> None:
        """Catch the errors of one call's launch apart from all others, until
        :meth:`end_call_scope` (a browser's error scope, with the shim's own scopes held back
        meanwhile). Nothing where errors raise at the call."""

    def end_call_scope(self) -> Any:
        """Close the call's scope: what :meth:`scope_error` awaits, or None where errors raised at
        the call (natively)."""

    async def scope_error(self, scope: Any) -> str | None:
        """WebGPU's message for the call's scope, once its work was validated, or None."""

    def report_scope(self, scope: Any) -> None:
        """A call's scope nobody awaited: its error goes to :meth:`reported_error` like the rest."""

    def lost(self) -> str | None:
        """Why the device was lost (its reason and message), or None while it is not."""

    def now(self) -> float:
        """The wall clock, in seconds."""
