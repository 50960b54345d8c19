"""A winner from elsewhere, checked once on this device before it serves.

A winner this store's tunes did not decide (a bundle's, a collector's, an import's, or one stored
by a tune without output checks) says only that some device found that candidate fastest. Before
its first call here, :func:`verify_winner` asks what a tune would have asked of it:

- does it fit the call as the plan would admit it? Its priority for this key (a vec4 kernel's
  plan skips an N that 4 does not divide), the device's limits and features, its grids;
- does it compile, and does it give the right answer? Against the set's reference where it has
  one; otherwise it is run beside up to :data:`PANEL` other candidates that fit, and it must be
  in the largest group that agrees (``checks.py``'s rule: a tie or a minority fails it).

A winner that passes is a Hit: stored as checked, so it is checked once, or for a bundle's seed
kept checked in memory (seeds are never stored: a newer bundle replaces them), so it is checked
once a process; one that fails is not used: the key is tuned, with the reason in the log.
Compiling a few candidates and running each once is what this costs, against compiling and
sampling every candidate for a tune.
"""

from __future__ import annotations

from collections.abc import Collection

from ..errors import KernelError
from ..gpu.device import Device, check_grid, check_limits
from ..key import Key
from ..sets.args import Args
from ..sets.tunable import TunableSet
from .checks import OutputCheck
from .measure import clone_args
from .pipelines import PipelineCache
from .plan import Plan
from .twins import launch_of

__all__ = ["PANEL", "verify_winner"]

PANEL = 2
"""Other candidates a winner from elsewhere is run beside, without a reference."""


def misfit(tunables: TunableSet, key: Key, winner: int, device: Device | None = None, args: Args | None = None,
           skipped: Collection[int] | None = None) -> str | None:
    """Why candidate ``winner`` does not fit ``key`` (and the call ``args`` on ``device``, where
    given) as a tune's plan would admit it; None when it fits. ``skipped``: the key's plan's
    skipped candidates, where the caller has them (else the plan is made here)."""
    kernel = tunables.candidates[winner]
    if winner in (skipped if skipped is not None else Plan(tunables.candidates, key).skipped):
        return f"{kernel.name} is not planned for this key (its priority here is negative)"
    if device is not None:
        problem = check_limits(kernel, device.limits, device.features)
        if problem:
            return f"{kernel.name} {problem}"
    if args is not None and device is not None:
        try:
            grids = [tuple(stage.grid(args)) for stage in kernel.stages]
        except Exception as error:
            return f"{kernel.name}'s grid failed on this call: {type(error).__name__}: {error}"
        for grid in grids:
            problem = check_grid(grid, device.limits)
            if problem:
                return f"{kernel.name}: {problem}"
        if all(0 in grid for grid in grids):
            return f"{kernel.name} dispatches no workgroups for this call"
    return None


async def verify_winner(
    device: Device, pipelines: PipelineCache, tunables: TunableSet, key: Key, args: Args, winner: int
) -> str | None:
    """Why candidate ``winner``, chosen elsewhere, must not serve ``key`` here (see the module
    doc); None when it may. Failures of the whole device propagate."""
    name = tunables.candidates[winner].name
    plan = Plan(tunables.candidates, key)  # once, not per candidate of the panel
    skipped = set(plan.skipped)
    problem = misfit(tunables, key, winner, device, args, skipped)
    if problem:
        return problem
    try:
        await pipelines.compile(tunables, winner)
    except KernelError as error:
        return f"{name} does not compile here: {error}"
    if not tunables.outputs:
        return None
    bench_args = tunables.input_gen(device, key, args) if tunables.input_gen else clone_args(device, args)
    check = OutputCheck(device, tunables, bench_args, pipelines, among=plan.planned)  # the winner is planned
    try:
        mismatch = await check.mismatch(winner)
    except KernelError as error:
        return f"{name} failed to launch here: {error}"
    if tunables.reference is not None:
        return mismatch.reason if mismatch is not None else None
    panel = 0
    # The winner's twins (the same launch: twins.py) would only agree with it: they are no witnesses.
    launch = launch_of(tunables.candidates[winner], bench_args)
    for index in range(len(tunables)):
        if panel == PANEL:
            break
        if index == winner or misfit(tunables, key, index, device, bench_args, skipped) is not None:
            continue
        if launch is not None and launch_of(tunables.candidates[index], bench_args) == launch:
            continue
        try:
            await pipelines.compile(tunables, index)
            await check.mismatch(index)
        except KernelError:
            continue
        panel += 1
    verdict = (await check.judge_all()).get(winner)
    return verdict.reason if verdict is not None else None
