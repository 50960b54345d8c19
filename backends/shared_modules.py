"""One compile per distinct stage code: stages of any candidates that run the same WGSL share a pipeline.

Candidates of a set often have a stage in common: every kgrid tile's first stage zeroes C with
the same code, every tile that reads a copy of A has the same copy stage, and two tiles that
differ only in their grid or params (a kgrid tile at 256 and at 512 chunks) have one WGSL. Of
the f32 matmul set's 139 stages, 104 are distinct. Compiling the others again costs the driver's
whole compile each time (the largest shared one is 25 KB of WGSL) and keeps a second copy of the
same machine code on the device.

A pipeline binds nothing itself: bind groups are made per call (``bind_groups.py``: per stage
under the "auto" layout; under a declared one, one shared by the stages that bind the same
buffers), so stages with the same code, entry point, constants, runtime checks, features and
layout (``Kernel.layout``) can run one pipeline. Its label is the first such stage's name. A failed
compile is not kept here: the tuner keeps each candidate's failure itself
(``PipelineCache.failed``), and a later compile of the same code asks the driver again, for a
stage that asks: the driver's message names its label (Dawn's and the browser's do), so it never
names another set's stage that failed on that code first. Stages of one code in one compile share its one error.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from wgtune.errors import KernelError
from wgtune.sets.kernel import Kernel

from .gpu_shim import GPUShim

__all__ = ["SharedModules", "module_key"]


def module_key(stage: Kernel) -> Hashable:
    """What decides a stage's compiled pipeline: equal keys compile to interchangeable pipelines."""
    return (stage.wgsl, stage.entry_point, tuple(sorted(stage.constants.items())), stage.runtime_checks,
            stage.features, stage.layout)


class SharedModules:
    """The pipelines compiled through ``shim``, one per :func:`module_key`.

    Each key is always compiled from the first stage seen with it (its *representative*), so a
    compile begun ahead (:meth:`start`) is the one a later :meth:`compile_many` takes, whichever
    candidate asks for it.
    """

    def __init__(self, shim: GPUShim) -> None:
        self._shim = shim
        self._compiled: dict[Hashable, tuple[Any, Any]] = {}
        self._representatives: dict[Hashable, Kernel] = {}

    def _not_compiled(self, stages: Sequence[Kernel]) -> dict[Hashable, Kernel]:
        """Each code of ``stages`` that is not compiled yet, once, as its representative."""
        wanted: dict[Hashable, Kernel] = {}
        for stage in stages:
            key = module_key(stage)
            if key not in self._compiled and key not in wanted:
                wanted[key] = self._representatives.setdefault(key, stage)
        return wanted

    async def compile(self, stage: Kernel) -> tuple[Any, Any]:
        """``stage``'s ``(pipeline, bind group layout 0)``, compiled unless a stage of the same
        code was. Raises the shim's KernelError, in ``stage``'s name (see the module doc)."""
        key = module_key(stage)
        module = self._compiled.get(key)
        if module is None:
            representative = self._representatives.setdefault(key, stage)
            try:
                module = await self._shim.compile_module(representative)
            except KernelError:
                self._representatives.pop(key, None)
                if representative.name == stage.name:
                    raise
                module = await self._shim.compile_module(stage)  # begun for another stage: its error names that one
            self._compiled[key] = module
        return module

    async def compile_many(self, stages: Sequence[Kernel]) -> list[tuple[Any, Any] | Exception]:
        """Each of ``stages`` compiled, the codes not compiled yet once each, all at once through
        the shim (``GPUShim.compile_modules``): each stage's module, or its code's KernelError
        in the name of a stage of ``stages`` (see the module doc), in order."""
        wanted = self._not_compiled(stages)
        failed = await self._compile(wanted)
        # A code begun ahead for a stage not asked for here (another set's) that failed: asked again for one that is.
        names = {stage.name for stage in stages}
        again = {key: next(stage for stage in stages if module_key(stage) == key)
                 for key, error in failed.items() if isinstance(error, KernelError) and wanted[key].name not in names}
        if again:
            failed = {key: error for key, error in failed.items() if key not in again} | await self._compile(again)
        return [failed[key] if key in failed else self._compiled[key] for key in map(module_key, stages)]

    async def _compile(self, wanted: dict[Hashable, Kernel]) -> dict[Hashable, Exception]:
        """Compile each stage of ``wanted`` (by code) through the shim and keep the modules; each
        failed code's error. A failed code keeps no representative: a later compile of it is in
        the name of the stage that asks."""
        failed: dict[Hashable, Exception] = {}
        if not wanted:
            return failed
        for key, module in zip(wanted, await self._shim.compile_modules(list(wanted.values())), strict=True):
            if isinstance(module, Exception):
                failed[key] = module
                self._representatives.pop(key, None)
            else:
                self._compiled[key] = module
        return failed

    def start(self, stages: Sequence[Kernel]) -> None:
        """Begin compiling, in the background where the shim can (``GPUShim.start_compiles``),
        the codes of ``stages`` that are not compiled yet, once each."""
        begun = self._not_compiled(stages)
        if begun:
            self._shim.start_compiles(list(begun.values()))

    def drop_started(self, stages: Sequence[Kernel], keep: Sequence[Kernel] = ()) -> None:
        """Let go of the begun, untaken compiles of ``stages``' codes (``GPUShim.drop_started``),
        and of their representatives: a later compile of such a code begins afresh. A code that
        a stage of ``keep`` has, or that is compiled, is left as it is."""
        kept = {module_key(stage) for stage in keep}
        dropped = [self._representatives.pop(key, None) for key in dict.fromkeys(map(module_key, stages))
                   if key not in kept and key not in self._compiled]
        dropped = [stage for stage in dropped if stage is not None]
        if dropped:
            self._shim.drop_started(dropped)
