"""The pipeline cache: every compiled candidate on one device, and each set's fallback.

Compiling is the dearest step of a tune (in the browser above all), so a candidate is compiled
once per process and reused by its tune, by the output checks, by every later key of its set and
by every later call; a candidate that does not compile is not tried again either. A tune
compiles the candidates it is about to measure together (:meth:`PipelineCache.compile_ahead`,
``Device.compile_many``), overlapped where the platform can: worker threads natively, concurrent
``createComputePipelineAsync`` in the browser.

One question is answered here and only here: *which candidates of a set, in the set's order, fit
the device and compile* (:meth:`PipelineCache.usable`). The first of them is the set's fallback
(what runs while a key is Pending, and the winner of nothing-to-compare), in the set's order
because its first candidate is meant to be its safe default, unless a check found it wrong: a
candidate the output checks disqualified (``checks.py``) is distrusted (:meth:`PipelineCache.distrust`),
and the next one serves as the fallback from then on.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from typing import Any

from ..errors import (
    CandidateError,
    ConfigError,
    KernelError,
    Launch,
    Mismatch,
    NoValidKernelFound,
    candidate_failure,
)
from ..gpu.device import Device, check_limits
from ..runner import Spawner, run_inline
from ..sets.kernel import Kernel
from ..sets.tunable import TunableSet

__all__ = ["PipelineCache"]


class PipelineCache:
    """Compiled candidates per (set name, index) on ``device``, and each set's fallback index."""

    def __init__(self, device: Device, spawn: Spawner = run_inline) -> None:
        self.device = device
        self._spawn = spawn
        self.compiled: dict[tuple[str, int], Any] = {}
        """``(set name, index) -> pipeline``: read it (the hot path does), never write it."""
        self.failed: dict[tuple[str, int], KernelError] = {}
        """``(set name, index) -> why it does not compile``: a compile error is the device's
        answer for good, so no later tune or key compiles that candidate again."""
        self._fallbacks: dict[str, int] = {}
        self.distrusted: dict[str, set[int]] = {}
        """``set name -> candidates an output check found wrong``: none of them is the fallback."""
        self._compiling: set[tuple[str, int]] = set()
        self._tasks: set = set()  # compiles running on the event loop (strong references)

    def get(self, set_name: str, index: int) -> Any | None:
        """Candidate ``index``'s pipeline if compiled: the hot path, a dict lookup."""
        return self.compiled.get((set_name, index))

    async def compile(self, tunables: TunableSet, index: int) -> Any:
        """Candidate ``index``'s pipeline, compiled on first use. Raises the device's KernelError."""
        slot = (tunables.name, index)
        pipeline = self.compiled.get(slot)
        if pipeline is None:
            if slot in self.failed:
                raise self.failed[slot]
            try:
                pipeline = await self.device.compile(tunables.candidates[index])
            except KernelError as error:
                self.failed[slot] = error
                raise
            self.compiled[slot] = pipeline
        return pipeline

    async def compile_ahead(self, tunables: TunableSet, indices: Iterable[int]) -> None:
        """Compile those of candidates ``indices`` that fit the device and are not compiled yet,
        all at once (``Device.compile_many``: overlapped where the platform can), before the
        sampler needs them; :meth:`compile` then answers each from here. Failures are kept for
        :meth:`compile` to raise, as if it had compiled the candidate itself."""
        todo = self._to_compile(tunables, indices)
        if len(todo) < 2:  # nothing to overlap: compile() does it when it is needed
            return
        compiled = await self.device.compile_many([tunables.candidates[index] for index in todo])
        for index, pipeline in zip(todo, compiled, strict=True):
            if isinstance(pipeline, KernelError):
                self.failed[(tunables.name, index)] = pipeline
            elif not isinstance(pipeline, Exception):  # another error: compile() tries again and raises it
                self.compiled[(tunables.name, index)] = pipeline

    def start_compiles(self, tunables: TunableSet, indices: Iterable[int]) -> None:
        """Begin compiling those of candidates ``indices`` that fit the device and are not
        compiled yet, in the background where the device can (``Device.start_compiles``); a
        later :meth:`compile` or :meth:`compile_ahead` takes them."""
        todo = self._to_compile(tunables, indices)
        if todo:
            self.device.start_compiles([tunables.candidates[index] for index in todo])

    def drop_started(self, tunables: TunableSet, indices: Iterable[int], keep: Sequence[Kernel] = ()) -> None:
        """Let go of the compiles :meth:`start_compiles` began for candidates ``indices`` that
        nothing took (``Device.drop_started``), but not what the kernels of ``keep`` have of them."""
        dropped = [tunables.candidates[index] for index in dict.fromkeys(indices)
                   if (tunables.name, index) not in self.compiled]
        if dropped:
            self.device.drop_started(dropped, keep=keep)

    def _to_compile(self, tunables: TunableSet, indices: Iterable[int]) -> list[int]:
        device = self.device
        return [
            index for index in dict.fromkeys(indices)
            if (tunables.name, index) not in self.compiled and (tunables.name, index) not in self.failed
            and check_limits(tunables.candidates[index], device.limits, device.features) is None
        ]

    def drop(self, set_name: str) -> None:
        """Forget a set's pipelines and fallback: its name now means other candidates."""
        for table in (self.compiled, self.failed):
            for slot in [slot for slot in table if slot[0] == set_name]:
                del table[slot]
        self._fallbacks.pop(set_name, None)
        self.distrusted.pop(set_name, None)

    async def distrust(self, tunables: TunableSet, indices: Iterable[int]) -> None:
        """Candidates ``indices`` gave a wrong answer in a checked tune: none of them serves as the
        set's fallback from now on. Where the fallback was one of them, the next usable candidate
        is compiled now (on the event loop a call cannot wait for it)."""
        wrong = self.distrusted.setdefault(tunables.name, set())
        wrong.update(indices)
        if self._fallbacks.get(tunables.name) in wrong:
            del self._fallbacks[tunables.name]
            with contextlib.suppress(NoValidKernelFound):  # nothing left: prepare() says so at the next call
                await self.prepare(tunables)

    async def usable(
        self, tunables: TunableSet, exclude: Collection[int] = (), failures: list[CandidateError] | None = None
    ) -> AsyncIterator[tuple[int, Any]]:
        """The candidates that fit the device and compile, in the set's order, with their
        pipelines; those in ``exclude`` are passed over. Why each other one is unusable is
        appended to ``failures``. Errors that are the whole tune's propagate."""
        for index, kernel in enumerate(tunables.candidates):
            if index in exclude:
                continue
            problem = check_limits(kernel, self.device.limits, self.device.features)
            if problem:
                if failures is not None:
                    failures.append(Launch(kernel.name, problem))
                continue
            try:
                pipeline = await self.compile(tunables, index)
            except Exception as error:
                if failures is not None:
                    failures.append(candidate_failure(kernel.name, error, "compile"))
                continue
            yield index, pipeline

    async def prepare(self, tunables: TunableSet) -> int:
        """The set's fallback, compiled ahead of any call (the page does this for every set): its
        first candidate that fits the device, compiles and was not found wrong (:meth:`distrust`).

        Raises NoValidKernelFound, with each candidate's reason, when there is none.
        """
        index = self._fallbacks.get(tunables.name)
        if index is not None:
            return index
        failures: list[CandidateError] = []
        wrong = self.distrusted.get(tunables.name, set())
        async for index, _pipeline in self.usable(tunables, exclude=wrong, failures=failures):
            self._fallbacks[tunables.name] = index
            return index
        failures += [Mismatch(tunables.candidates[index].name, "an output check found it wrong") for index in wrong]
        raise NoValidKernelFound(tunables.name, None, tuple(failures))  # of no one key: the set's

    def ready(self, tunables: TunableSet) -> bool:
        """Whether :meth:`fallback` answers at once: the set's fallback is compiled, or compiles
        inline when asked (natively). On the event loop a call awaits :meth:`prepare` first."""
        return tunables.name in self._fallbacks or self._spawn is run_inline

    def fallback(self, tunables: TunableSet) -> int:
        """The first candidate, in the set's order, that fits the device and compiles."""
        index = self._fallbacks.get(tunables.name)
        if index is not None:
            return index
        try:
            return run_inline(self.prepare(tunables))
        except RuntimeError as error:  # the compile suspended: on the event loop it must be awaited
            raise ConfigError(f"the fallback of {tunables.name!r} is not compiled yet: await tuner.prepare() "
                              "for it before a call on the event loop") from error

    def compile_for_call(
        self, tunables: TunableSet, index: int, on_broken: Callable[[BaseException], None]
    ) -> Any | None:
        """Compile a winner known without a tune (stored, pinned, the only candidate) for a call.

        Natively it compiles inline (a KernelError propagates). On the event loop compiling
        suspends, so it becomes a task and this answers None until the pipeline is ready; a
        compile that fails there calls ``on_broken`` with the error instead of raising.
        """
        if self._spawn is run_inline:
            return run_inline(self.compile(tunables, index))
        slot = (tunables.name, index)
        if slot not in self._compiling:
            self._compiling.add(slot)

            async def compile_winner() -> None:
                try:
                    await self.compile(tunables, index)
                except Exception as error:
                    on_broken(error)
                finally:
                    self._compiling.discard(slot)

            self._spawn(compile_winner(), self._tasks)
        return None
