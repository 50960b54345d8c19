"""A call's launches on a WebGPU device: what WebGPU refuses is the error of the call that caused it.

:class:`CallLaunches` is the part of :class:`~wgtune.backends.webgpu.WebGPUDevice` that
``Tuner.execute`` goes through (``Device.launch``, ``Device.check_call``). A call's buffers are
checked where its bind groups are made, once per stage and ``Args`` (``launch_check.py``: usage
and size against what the WGSL binds; :meth:`GPUShim.buffer_problem`: another device's buffer or
a destroyed one, where the shim can tell at once), and a call's first launch of a candidate has
its grids checked and runs inside the shim's *call scope*:

- natively wgpu-py raises at the call: the error is raised as LaunchRefused there;
- in a browser WebGPU says so later: the scope is kept for the caller
  (:meth:`CallLaunches.take_launch_scope`; ``set.execute`` awaits it), and a later launch of the
  same call that WebGPU refuses (a buffer destroyed since) drops the call's bind groups, so that
  its next launch is a first one again and is refused for it.

None of it reaches the errors a tune's ``sync`` reads, unless no caller takes a first launch's
scope (a page's own key, run by label), whose error then goes there as it always did.

A batch's submission (``batch_recorder.py``) is refused whole: every call recorded in it has its
bind groups dropped (its next launch is a checked first one again: the call on a destroyed
buffer is refused then, the others run), and the refusal, naming those calls (by
:data:`CALL_NAME` where their caller gave one), is the batch's: raised at the submit natively,
and in a browser the answer of :meth:`CallLaunches.take_batch_verdict`, which ``batch.submit()``
awaits.

Pure Python (the standard library and ``wgtune`` only): it imports in CPython and in Pyodide.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

from wgtune.errors import KernelError, LaunchRefused
from wgtune.gpu.device import CompiledKernel, DeviceLimits
from wgtune.gpu.launch_check import buffer_refusal, describe_binding, grid_refusal
from wgtune.sets.args import Args, Grid
from wgtune.sets.bindings import PARAMS, Scratch, binding_plan, stage_entries
from wgtune.sets.kernel import Kernel
from wgtune.tune.log import logger

from .batch_recorder import STEPS, Submitted
from .bind_groups import DECLARED_GROUPS

__all__ = ["CALL_NAME", "CallLaunches"]

CALL_NAME = "wgtune:call-name"
"""The key in ``args.cache`` of what errors name a call by, where its caller says
(``set 'scale' [n=1024]``: ``js_sets.py``); a call without one is named by its candidate."""


class CallLaunches:
    """A call's launches and their refusals, as a part of ``WebGPUDevice`` (which provides
    ``shim``, ``limits``, ``_bind_groups``, ``_encode``, ``_submit``, ``_batch`` and ``flush``)."""

    shim: Any
    limits: DeviceLimits
    _batch: Any
    _submit: Any

    def _init_call_launches(self, shim: Any) -> None:
        self._launch_scope: tuple[Args, CompiledKernel, Any] | None = None  # see take_launch_scope
        # Where WebGPU reports errors later (a browser): a call's launches after its first are
        # submitted in scopes whose errors go back to that call (_refused_later), not to sync().
        self._submit_launch = getattr(shim, "submit_launch", None)
        if self._submit_launch is not None:
            shim.on_launch_refused = self._refused_later

    def _refuse_buffers(self, stage: Kernel, entries: Sequence[tuple[int, int, Any]]) -> None:
        """LaunchRefused, naming the binding, where WebGPU would refuse one of the call's buffers
        in ``entries`` for ``stage``: its usage or size (``launch_check.buffer_refusal``), or what
        the shim can tell at once (another device's buffer, a destroyed one:
        :meth:`GPUShim.buffer_problem`). Run once per stage and call, where its bind groups are made."""
        problem = buffer_refusal(stage, entries, self.limits, _is_call_buffer)
        if problem is None:
            for group, binding, buffer in entries:
                found = self.shim.buffer_problem(buffer) if _is_call_buffer(buffer) else None
                if found:
                    problem = f"{describe_binding(stage, group, binding)}: {found}"
                    break
        if problem:
            raise LaunchRefused(problem)

    def check_call(self, kernel: Kernel, args: Args) -> None:
        """LaunchRefused where WebGPU would refuse the call's buffers as ``kernel``'s stages bind
        them (usage, size, another device's, destroyed where the shim can tell): asked before a
        call is tuned, so that a call no candidate can run on is refused, not tuned. Once per
        call (kept in ``args.cache``); a call the candidate cannot place at all is left to the
        tune, which says why for each candidate."""
        if args.cache.get(_CALL_CHECKED) is kernel:
            return
        try:
            plan = binding_plan(kernel)
            stages = [stage_entries(plan[index] if plan else None, args, stage.name)
                      for index, stage in enumerate(kernel.stages)]
        except KernelError:
            stages = []
        for stage, entries in zip(kernel.stages, stages, strict=False):
            self._refuse_buffers(stage, entries)
        args.cache[_CALL_CHECKED] = kernel

    def launch(self, pipeline: CompiledKernel, args: Args, grid: Grid) -> None:
        """One launch of a call: :meth:`dispatch`, with what WebGPU refuses raised as
        LaunchRefused for this call. A call's first launch of a candidate (its bind groups not
        made yet) is :meth:`_first_launch`: checked, and submitted alone, inside an error scope
        where WebGPU reports errors later (a browser). The launches after it cost one dict lookup
        more than a dispatch."""
        if pipeline not in args.cache:
            self._first_launch(pipeline, args, grid)
        elif self._batch.depth:
            self._batch.record(pipeline, args, grid, 1)
        elif self._submit_launch is not None:  # a browser: WebGPU's word on it comes later
            self._submit_launch(self._encode(pipeline, args, grid, 1, None), (args, pipeline))
        else:
            try:
                self._submit(self._encode(pipeline, args, grid, 1, None))
            except KernelError as error:  # natively: raised at the call (a buffer destroyed since)
                raise _refused(pipeline, args, error) from None

    def _first_launch(self, pipeline: CompiledKernel, args: Args, grid: Grid) -> None:
        """The call's first launch of ``pipeline``: every stage's grid checked against the
        device's limits and its buffers (:meth:`_refuse_buffers`, as its bind groups are made),
        inside the shim's call scope, with the launch's submission where no batch is open (in a
        batch the launch is recorded as any other, and only its bind groups are in the scope: a
        buffer destroyed before the batch is submitted is the batch's error). Where the shim
        reports errors later, the scope is kept for the caller (:meth:`take_launch_scope`); a
        scope nobody takes goes where :meth:`sync` finds it."""
        problem = grid_refusal(pipeline.kernel, args, grid, self.limits)
        if problem:
            raise LaunchRefused(problem)
        self._forward_untaken_scope()
        batched = self._batch.depth
        shim = self.shim
        shim.begin_call_scope()
        try:
            if batched:
                for stage in (pipeline, *pipeline.then):
                    self._bind_groups(stage, args)
            else:
                self._submit(self._encode(pipeline, args, grid, 1, None))
        except LaunchRefused:
            raise
        except KernelError as error:
            raise _refused(pipeline, args, error) from None
        finally:
            scope = shim.end_call_scope()
        if scope is not None:
            self._launch_scope = (args, pipeline, scope)
        if batched:
            self._batch.record(pipeline, args, grid, 1)

    def take_launch_scope(self, args: Args) -> Awaitable[None] | None:
        """What WebGPU says of the first launch just made on ``args``, where it says so later (a
        browser's error scope): an awaitable that raises LaunchRefused with WebGPU's message and
        the launch's bindings, or returns when WebGPU took it. None where the launch was checked
        at the call (natively, and every launch after a call's first). Taken by the caller right
        after ``Tuner.execute`` (``js_sets.JsSet.execute``); once taken, nothing of it reaches
        :meth:`sync`."""
        found = self._launch_scope
        if found is None or found[0] is not args:
            return None
        self._launch_scope = None
        return self._scope_verdict(*found)

    async def _scope_verdict(self, args: Args, pipeline: CompiledKernel, scope: Any) -> None:
        message = await self.shim.scope_error(scope)
        if message is not None:
            _drop_bind_groups(args, pipeline)
            raise _refused(pipeline, args, message)

    def _refused_later(self, owner: tuple[Args, CompiledKernel] | _BatchPart, message: str) -> None:
        """WebGPU refused a launch after the call's first (a buffer destroyed since), or a batch's
        submission, and said so once the call had returned (``GPUShim.submit_launch``): the
        calls' bind groups are dropped, so that each one's next launch is a first one again and
        is refused for it if it is the one to blame; no tune sees it. A batch's refusal is its
        caller's (:meth:`take_batch_verdict`): said here only where none took it."""
        if isinstance(owner, _BatchPart):
            refused = _refuse_batch(owner.calls, owner.launches, message)
            submitted = owner.submitted
            if submitted is not None:
                submitted.refusals.append(refused)
            if submitted is None or not submitted.taken:
                logger.warning("%s; each call's next launch is checked again", refused)
            return
        args, pipeline = owner
        _drop_bind_groups(args, pipeline)
        logger.warning("WebGPU refused a launch of %s on a call it ran before: %s; the call's next launch says so",
                       pipeline.kernel.name, " ".join(message.split()))

    def _submit_recorded(self, encoder: Any, calls: list[tuple[Args, CompiledKernel]], launches: int,
                         submitted: Submitted | None) -> None:
        """Submit a batch's ``launches``, recorded for ``calls`` (``BatchRecorder.flush``).
        Natively a refusal raises here; in a browser WebGPU says so later (:meth:`_refused_later`),
        and ``submitted`` keeps when its scope closes, for :meth:`take_batch_verdict`."""
        if self._submit_launch is None:
            try:
                self._submit(encoder)
            except KernelError as error:
                raise _refuse_batch(calls, launches, str(error)) from None
            return
        closing = self._submit_launch(encoder, _BatchPart(calls, launches, submitted))
        if submitted is not None:
            submitted.closing.append(closing)

    def take_batch_verdict(self) -> Awaitable[None] | None:
        """What WebGPU says of the batch that just ended (its outermost ``end_batch``), where it
        says so later (a browser): an awaitable that raises its submissions' refusals as one
        LaunchRefused naming their calls, or returns once WebGPU took them all. None for a batch
        inside another (the outer one's says), or where refusals raise at the submit (natively).
        Once taken, a refusal is the taker's alone (no warning)."""
        submitted = self._batch.ended
        if submitted is None or self._submit_launch is None:
            return None
        self._batch.ended = None
        submitted.taken = True
        return _batch_verdict(submitted)

    def _forward_untaken_scope(self) -> None:
        """A first launch's scope that no caller took: its error is reported as before, to the
        next :meth:`sync` (``GPUShim.report_scope``)."""
        found = self._launch_scope
        if found is not None:
            self._launch_scope = None
            self.shim.report_scope(found[2])


_CALL_CHECKED = "wgtune:call-checked"  # args.cache: the kernel whose bindings check_call found fine


class _BatchPart:
    """The owner of one submission of a batch (``GPUShim.submit_launch``): the calls recorded in it,
    how many launches, and what its batch submitted."""

    __slots__ = ("calls", "launches", "submitted")

    def __init__(self, calls: list[tuple[Args, CompiledKernel]], launches: int, submitted: Submitted | None) -> None:
        self.calls = calls
        self.launches = launches
        self.submitted = submitted


def _drop_bind_groups(args: Args, pipeline: CompiledKernel) -> None:
    """Forget the call's bind groups for ``pipeline``: its next launch is a first one again, checked
    and scoped anew."""
    for stage in (pipeline, *pipeline.then):
        args.cache.pop(stage, None)
    args.cache.pop((pipeline, STEPS), None)  # the launch steps kept with them (``launch_steps``)
    args.cache.pop(DECLARED_GROUPS, None)  # groups its stages may share with others' (made again as needed)


def _refuse_batch(calls: list[tuple[Args, CompiledKernel]], launches: int, message: str) -> LaunchRefused:
    """WebGPU refused a batch's submission of ``launches`` for ``calls``: drop each call's bind
    groups, and answer the LaunchRefused naming the calls (:data:`CALL_NAME`, else the candidate),
    how many of each."""
    named: dict[str, set[int]] = {}
    for args, pipeline in calls:
        _drop_bind_groups(args, pipeline)
        name = args.cache.get(CALL_NAME) or f"candidate {pipeline.kernel.name!r}"
        named.setdefault(name, set()).add(id(args))
    listed = ", ".join(name if len(ids) == 1 else f"{name} ({len(ids)} calls)" for name, ids in named.items())
    said = " ".join(line.strip() for line in message.splitlines() if line.strip())
    return LaunchRefused(f"WebGPU refused a batch's submission of {launches} launch{'es' * (launches != 1)}, "
                         f"so none of them ran: {listed}: {said}")


async def _batch_verdict(submitted: Submitted) -> None:
    for closing in submitted.closing:  # each ends once its scope closed and _refused_later had its say
        await closing
    if len(submitted.refusals) == 1:
        raise submitted.refusals[0]
    if submitted.refusals:
        raise LaunchRefused("; ".join(str(refused) for refused in submitted.refusals))


def _is_call_buffer(buffer: Any) -> bool:
    """Whether an entry of ``stage_entries`` is one of the call's own buffers (not the params'
    uniform or a scratch buffer, which the device makes)."""
    return buffer is not PARAMS and not isinstance(buffer, Scratch)


def _refused(pipeline: CompiledKernel, args: Args, error: BaseException | str) -> LaunchRefused:
    """WebGPU's refusal of a launch of ``pipeline`` on ``args``, as LaunchRefused naming the
    candidate and the call's bindings (WebGPU's message names a buffer only by its label)."""
    said = " ".join(line.strip() for line in str(error).splitlines() if line.strip())  # one line: JS shows the last
    return LaunchRefused(f"WebGPU refused candidate {pipeline.kernel.name!r} on this call "
                         f"({_bound(pipeline, args)}): {said}")


def _bound(pipeline: CompiledKernel, args: Args) -> str:
    """Where the call's buffers bind in ``pipeline``'s first stage: ``x at @group(0) @binding(0), ...``."""
    try:
        entries = stage_entries(pipeline.bindings, args, pipeline.kernel.name)
    except KernelError:
        return f"{len(args.buffers)} buffers"
    names = {index: name for index, name in enumerate(args.names or ())}
    described = []
    for group, binding, buffer in entries:
        if not _is_call_buffer(buffer):
            continue
        index = next((i for i, given in enumerate(args.buffers) if given is buffer), None)
        name = names.get(index) if index is not None else None
        label = repr(name) if name is not None else f"buffer {index}"
        described.append(f"{label} at @group({group}) @binding({binding})")
    return ", ".join(described) or "no buffers"
