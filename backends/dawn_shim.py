"""The shim of :class:`~wgtune.backends.dawn.DawnDevice`: :class:`DawnShim`, wgpu-py's API over Dawn.

wgpudawn keeps validation errors in one process-wide list that the next call to look raises, on
whichever thread, and Dawn's objects are not thread-safe: a compile on a worker thread failed
another compile, or the tune's wait for the queue (CI saw it once in three runs). So every call
stays on the calling thread, and the pipelines compile in parallel the way Dawn offers:
``create_compute_pipeline_async``, which Dawn runs on its own workers and whose error comes back
with its own promise. Each module is still made on the calling thread (Tint's parse and checks,
the smaller part); the driver's compile of the pipelines, most of the cost, overlaps, though only
two at a time: on an H100 92 matmul pipelines took 8.1-8.2 s at once against 15.6-18.1 s one by
one, and 1.4-1.5 s on the same device from 16 threads of ours, before session 34
(``bench/results/h100-dawn-compiles-session36.txt``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wgtune.errors import KernelError
from wgtune.sets.kernel import Kernel

from . import wgpu_shim
from .wgpu_shim import WgpuShim, _clean

__all__ = ["DawnShim"]


class _Begun:
    """A pipeline Dawn is compiling: :meth:`result` waits for it, as a Future's would (the
    pipeline and its bind group layout, or the KernelError)."""

    def __init__(self, promise: Any = None, group: Any = None, error: KernelError | None = None) -> None:
        self._promise, self._group, self._error = promise, group, error

    def result(self) -> tuple[Any, Any] | KernelError:
        if self._error is None:
            try:
                pipeline = self._promise.sync_wait()
                group = self._group if self._group is not None else pipeline.get_bind_group_layout(0)
                return pipeline, group
            except Exception as error:
                self._error = KernelError(_clean(error))
        return self._error


class DawnShim(WgpuShim):
    """:class:`~wgtune.backends.wgpu_shim.WgpuShim` on a wgpudawn device (see the module doc)."""

    @property
    def compile_width(self) -> int:
        """As many as wgpu-native's threads, though Dawn compiles two at a time (its default
        platform's worker pool, which wgpudawn's instance gets, runs two task threads): a queue that
        deep keeps both fed. On an H200 a width of 2 made the first 4096^3 tune 6.96-7.62 s and the
        second 1.59-1.64 s, against 6.04-6.70 s and 1.13-1.18 s with 16
        (``bench/results/h200-dawn-compiles-session36.txt``)."""
        return wgpu_shim.COMPILE_THREADS

    def _begin(self, kernel: Kernel) -> _Begun:
        try:
            layout, compute, group = self._pipeline_parts(kernel)
            promise = self.device.create_compute_pipeline_async(layout=layout, compute=compute, label=kernel.name)
            return _Begun(promise, group)
        except Exception as error:
            return _Begun(error=KernelError(_clean(error)))

    async def _create_pipeline(self, kernel: Kernel) -> tuple[Any, Any]:
        answer = self._begin(kernel).result()
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def compile_modules(self, kernels: Sequence[Kernel]) -> list[tuple[Any, Any] | Exception]:
        """Each begun at once (those begun ahead taken), then each waited for, in order."""
        begun = [self._take_started(kernel) or self._begin(kernel) for kernel in kernels]
        return [each.result() for each in begun]

    def start_compiles(self, kernels: Sequence[Kernel]) -> None:
        """Begin each on Dawn's workers and return: :meth:`compile_module` and
        :meth:`compile_modules` take a begun compile's answer, waiting for it if it is not done."""
        for kernel in kernels:
            if id(kernel) not in self._started:
                self._started[id(kernel)] = (kernel, self._begin(kernel))
