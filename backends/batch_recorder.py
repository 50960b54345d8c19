"""The launches of an open batch (``wgtune.batch``), recorded into one compute pass of a command
buffer and submitted together: :class:`~wgtune.backends.webgpu.WebGPUDevice`'s part of batches.

While a batch is open, each launch is encoded into the pass instead of being submitted, and the
pipeline and bind groups are set only where they change (in a batch of small launches those
calls are much of the cost of recording one). Every ``LAUNCHES_PER_SUBMISSION`` launches, and
whenever anything else is about to reach the GPU (a read, a copy, a sync, a timed pass), the
device calls :meth:`BatchRecorder.flush`, so order is kept.

WebGPU refuses a submission whole: one launch on a buffer destroyed since it was recorded, and
none of the submission's launches runs. Each submission therefore carries the calls recorded in
it, and what an outermost batch submitted is kept (:class:`Submitted`): the device drops the
bind groups of every call of a refused submission and says which calls they were
(``CallLaunches.take_batch_verdict``: ``batch.submit()``'s promise in the page).

Pure Python (the standard library and ``wgtune`` only): it imports in CPython and in Pyodide.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wgtune.errors import LaunchRefused, WgtuneError
from wgtune.gpu.device import CompiledKernel
from wgtune.sets.args import Args, Grid

__all__ = ["LAUNCHES_PER_SUBMISSION", "NOTHING_BOUND", "STEPS", "BatchRecorder", "Submitted", "encode_launches",
           "launch_steps"]

NOTHING_BOUND = (None, None)  # a pass's (pipeline, first bind group) before it has set any
STEPS = "steps"  # with a CompiledKernel of several stages, the key in ``args.cache`` of its kept launch steps
# Launches a batch records before it submits them and goes on in a new command buffer, so that
# the GPU runs those while the next are recorded instead of idling until the end. Recording a
# launch costs the CPU about as long as a small kernel runs (7-10 us on an H200's host, against
# 2-3 us for an fma over 64K-1M floats) and a submission some 40 us, so per batch it costs about
# launches * record + submissions * 40 us + the last submission's kernels: least near
# sqrt(1000 * 40 / 3) ~ 110 launches a submission for 1000. Measured there (1000 launches, us
# each, one submission -> 128 a submission): fma over 64K 10.4 -> 9.6, 1M 13.9 -> 12.1, 16M
# 59.4 -> 50.5 (the GPU's own time: 48.6).
LAUNCHES_PER_SUBMISSION = 128


class Submitted:
    """What one outermost batch submitted, where WebGPU says later whether it took each submission
    (a browser): the awaitables that end once each submission's error scope has closed, the
    LaunchRefused of each refused one, and whether a caller took them (``taken``)."""

    __slots__ = ("closing", "refusals", "taken")

    def __init__(self) -> None:
        self.closing: list[Any] = []
        self.refusals: list[LaunchRefused] = []
        self.taken = False


class BatchRecorder:
    """The open batch of ``device``: how many batches are open (``depth``: nested ones join), the
    encoder and pass recording its launches (None until its first launch after a flush), what
    that pass has set, how many launches it holds and of which calls (``calls``: ``(args,
    kernel)``), what the open outermost batch submitted so far (``submitted``) and what the last
    one to end submitted, until a caller takes it (``ended``)."""

    __slots__ = ("bound", "calls", "compute", "depth", "device", "encoder", "ended", "launches", "submitted")

    def __init__(self, device: Any) -> None:  # its WebGPUDevice (which imports this module)
        self.device = device
        self.depth = 0
        self.encoder: Any = None
        self.compute: Any = None
        self.bound: tuple[Any, Any] = NOTHING_BOUND
        self.launches = 0  # recorded since the last submission
        self.calls: list[tuple[Args, CompiledKernel]] = []
        self.submitted: Submitted | None = None
        self.ended: Submitted | None = None

    def begin(self) -> None:
        """Open a batch (one inside another joins it)."""
        if not self.depth:
            self.submitted, self.ended = Submitted(), None
        self.depth += 1

    def end(self) -> None:
        """Close one batch; the outermost submits what was recorded."""
        if not self.depth:
            raise WgtuneError("end_batch without an open batch")
        self.depth -= 1
        if not self.depth:
            try:
                self.flush()
            finally:
                self.ended, self.submitted = self.submitted, None

    def flush(self) -> None:
        """Submit the launches recorded so far as one command buffer (one compute pass); the next
        launch begins a new one."""
        compute = self.compute
        if compute is None:
            return
        encoder, calls, launches = self.encoder, self.calls, self.launches
        self.compute = self.encoder = None  # gone even if the submission fails: never submitted twice
        self.launches, self.calls = 0, []
        device = self.device
        device._end_pass(compute)
        device._submit_recorded(encoder, calls, launches, self.submitted)

    def record(self, kernel: CompiledKernel, args: Args, grid: Grid, repeats: int) -> None:
        """Encode the launches into the pass, begun by the first launch after a flush; submit
        them once there are ``LAUNCHES_PER_SUBMISSION``."""
        device = self.device
        steps = launch_steps(device, kernel, args, grid)  # first: a call that cannot bind fails unrecorded
        compute = self.compute
        if compute is None:
            self.encoder = device._create_command_encoder()
            compute = self.compute = device._begin_compute_pass(self.encoder)
            self.bound = NOTHING_BOUND
        try:
            self.bound = encode_launches(device._pass_commands, compute, steps, repeats, self.bound)
        except BaseException:
            self.bound = NOTHING_BOUND  # what the pass has set is unknown now: set all again
            raise
        self.launches += repeats
        self.calls.append((args, kernel))
        if self.launches >= LAUNCHES_PER_SUBMISSION:
            self.flush()


def launch_steps(device: Any, kernel: CompiledKernel, args: Args, grid: Grid) -> Sequence[tuple[Any, Any, Grid]]:
    """What one launch of ``kernel`` on ``args`` dispatches (``CompiledKernel.steps``) on
    ``device`` (its WebGPUDevice), worked out as each launch of a batch works it out: the bind
    groups looked up. A kernel of several stages has its steps worked out once per ``args`` (an
    Args is immutable) and kept in its cache beside its bind groups, as the tuner keeps its first
    grid: a split-K tile's later grid is microseconds of Python, which every launch of a batch
    and of a timed pass paid again. One stage needs no list."""
    if not kernel.then:
        return ((kernel.pipeline, device._bind_groups(kernel, args), grid),)
    kept = args.cache.get((kernel, STEPS))
    if kept is None or kept[0] != grid:
        kept = args.cache[(kernel, STEPS)] = (grid, kernel.steps(args, grid, device._bind_groups))
    return kept[1]


def encode_launches(
    commands: tuple[Any, Any, Any], compute: Any, steps: Sequence[tuple[Any, Any, Grid]], repeats: int,
    bound: tuple[Any, Any],
) -> tuple[Any, Any]:
    """Encode ``repeats`` launches of ``steps`` (``CompiledKernel.steps``) into the pass
    ``compute`` with ``commands`` (the device's ``set_pipeline``, ``set_bind_group`` and
    ``dispatch_workgroups``), where the pass's pipeline and first bind group are ``bound`` now
    (``NOTHING_BOUND`` in a new pass); answers what they are after.

    Within a pass a pipeline and a bind group stay set across dispatches, and a group stays set
    across a change of pipeline where both pipelines have its layout: they are set only where
    they change. The same bind group object means the same further groups (``args.cache`` keeps
    them per stage and call), and a layout its pipeline has (stages share a group only where
    their layout is one object: ``Kernel.layout``). A batch records its launches so, and a timed
    pass too, so that a candidate is charged what recording a launch costs in a batch: a kernel
    of one stage a dispatch a launch, one of two stages both stages' pipelines and groups as well
    (on an H200's host 1.4 us against 3-5 us a launch, as long as a short kernel:
    ``bench/launch_parts.py``), its group once where its stages share one."""
    set_pipeline, set_bind_group, dispatch_workgroups = commands
    current_pipeline, current_group = bound
    for _ in range(repeats):
        for pipeline, (index, group, more), (x, y, z) in steps:
            if pipeline is not current_pipeline:
                set_pipeline(compute, pipeline)
                current_pipeline = pipeline
            if group is not current_group:
                set_bind_group(compute, index, group)
                if more:  # the groups past the first, for a stage that binds several
                    for more_index, more_group in more:
                        set_bind_group(compute, more_index, more_group)
                current_group = group
            dispatch_workgroups(compute, x, y, z)
    return current_pipeline, current_group
