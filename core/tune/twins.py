"""Twins: candidates that launch exactly as an earlier candidate does for a key, measured once.

Two candidates of a set may differ only in what a key makes moot: a split-K tile whose chunk
length is a uniform, where the grid caps the chunks so that both get the same chunks; a stage
whose parameter is clamped by the call's shape. For such a key their launches are the same
commands on the same buffers, so measuring the second says nothing the first does not: it only
costs the tune its compile and its samples, and splits a tie between equals by noise.

A candidate's launch for a call is, stage by stage, everything the device is handed: the WGSL,
its entry point, its override constants, the declared sizes and features, whether WebGPU's
runtime checks stay on, the pipeline layout, the grid, the stage's own uniform values and its
scratch buffers' sizes, all worked out on the call's :class:`~wgtune.sets.args.Args` as a launch
works them out. Names, priorities, groups and configurations are not part of it. A candidate
whose grid, params or scratch sizes raise on the call has no launch to compare: it is left to
the tune, which reports its failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..sets.args import Args
from ..sets.kernel import Kernel

__all__ = ["launch_of", "twins"]


def launch_of(kernel: Kernel, args: Args) -> tuple | None:
    """What launching ``kernel`` on ``args`` hands the device, stage by stage, as a value two
    launches compare equal by; None where working it out raises."""
    try:
        return tuple(_stage_launch(stage, args) for stage in kernel.stages)
    except Exception:  # the tune runs it and reports the failure as the candidate's own
        return None


def _stage_launch(stage: Kernel, args: Args) -> tuple[Any, ...]:
    return (
        stage.wgsl, stage.entry_point, stage.workgroup_size, stage.workgroup_storage, tuple(sorted(stage.features)),
        tuple(sorted(stage.constants.items())), stage.runtime_checks, stage.layout,
        tuple(stage.grid(args)),
        None if stage.params is None else tuple(stage.params(args)),
        tuple(sorted((name, size(args)) for name, size in stage.scratch.items())),
    )


def twins(candidates: Sequence[Kernel], indices: Iterable[int], args: Args) -> dict[int, int]:
    """Each of ``indices`` (in the order given) whose launch on ``args`` equals that of an
    earlier one of them, mapped to that earlier candidate's index."""
    first: dict[tuple, int] = {}
    found: dict[int, int] = {}
    for index in indices:
        launch = launch_of(candidates[index], args)
        if launch is None:
            continue
        if launch in first:
            found[index] = first[launch]
        else:
            first[launch] = index
    return found
