"""Twins: candidates that launch exactly as another does for a call, measured once.

Two candidates of a set may differ only in what a key makes moot: a split-K tile whose chunk
length is a uniform, where the call's K caps the chunks so that both get the same ones; a stage
whose parameter is clamped by the call's shape. For such a call their launches are the same
commands on the same buffers, so measuring the second says nothing the first does not: it only
costs the tune a compile and its samples, and splits a tie between equals by noise.

A candidate's launch for a call is, stage by stage, everything the device is handed: the WGSL,
its entry point, its override constants, the declared sizes and features, whether WebGPU's
runtime checks stay on, the pipeline layout, the grid, the stage's own uniform values (typed: an
int and a float are other bytes) and its scratch buffers' sizes, all worked out on the call's
:class:`~wgtune.sets.args.Args` as a launch works them out. Names, priorities, groups and
configurations are not part of it. A candidate whose grid, params or scratch sizes raise has no
launch to compare: the tune runs it and reports its failure.

The tune decides as each candidate's turn comes (:class:`Twins`, read by
``measure.prepare_candidate``), not ahead: a twin is set aside only once a candidate of the same
launch was prepared to be sampled (compiled, launched, checked), and it then shares that
candidate's fate, its verdict of the output checks included. A twin whose first such candidate
was pruned, skipped or failed is run as any candidate; one of a candidate ruled out before the tune
(a runaway, a lost device) is ruled out with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import CandidateError, Skip
from ..sets.args import Args
from ..sets.kernel import Kernel

__all__ = ["Twins", "launch_of"]


def launch_of(kernel: Kernel, args: Args) -> tuple | None:
    """What launching ``kernel`` on ``args`` hands the device, stage by stage, as a value two
    launches compare equal by; None where working it out raises."""
    try:
        return tuple(_stage_launch(stage, args) for stage in kernel.stages)
    except Exception:  # the tune runs it and reports the failure as the candidate's own
        return None


def _stage_launch(stage: Kernel, args: Args) -> tuple[Any, ...]:
    params = None if stage.params is None else tuple((type(v).__name__, repr(v)) for v in stage.params(args))
    return (
        stage.wgsl, stage.entry_point, stage.workgroup_size, stage.workgroup_storage, tuple(sorted(stage.features)),
        tuple(sorted(stage.constants.items())), stage.runtime_checks, stage.layout,
        tuple(stage.grid(args)), params,
        tuple(sorted((name, size(args)) for name, size in stage.scratch.items())),
    )


class Twins:
    """One tune's twins: which candidate each candidate's launch was first prepared by.

    ``args`` are the calls the launches must be the same on: the call's own, and the benchmark's
    inputs where the set makes its own (``input_gen``)."""

    def __init__(self, candidates: Sequence[Kernel], args: Sequence[Args]) -> None:
        self._candidates = candidates
        self._args = tuple(args)
        self._launches: dict[int, tuple | None] = {}
        self._first: dict[tuple, int] = {}  # a launch -> the candidate first prepared with it
        self.set_aside: dict[int, int] = {}
        """Each twin set aside -> the candidate measured for it."""

    def also_on(self, args: Args) -> None:
        """Launches must be the same on ``args`` too (a set's generated inputs); before any candidate
        is prepared."""
        self._args += (args,)
        self._launches.clear()

    def _launch(self, index: int) -> tuple | None:
        if index not in self._launches:
            launches = tuple(launch_of(self._candidates[index], args) for args in self._args)
            self._launches[index] = None if None in launches else launches
        return self._launches[index]

    def same_launch(self, index: int, other: int) -> bool:
        """Whether candidates ``index`` and ``other`` launch exactly alike."""
        launch = self._launch(index)
        return launch is not None and launch == self._launch(other)

    def measured_as(self, index: int) -> int | None:
        """The candidate prepared before with candidate ``index``'s launch, if any."""
        launch = self._launch(index)
        return self._first.get(launch) if launch is not None else None

    def first_of_each(self, indices: Sequence[int]) -> list[int]:
        """Those of ``indices`` whose launch no candidate prepared before has, and no one before them
        in ``indices``: what to compile ahead. A twin left out is compiled at its turn if it is run."""
        seen: set[tuple] = set()
        kept = []
        for index in indices:
            launch = self._launch(index)
            if launch is not None:
                if launch in self._first or launch in seen:
                    continue
                seen.add(launch)
            kept.append(index)
        return kept

    def prepared(self, index: int) -> None:
        """Candidate ``index`` was prepared to be sampled: its launch's twins coming after it are set aside."""
        launch = self._launch(index)
        if launch is not None:
            self._first.setdefault(launch, index)

    def set_aside_for(self, index: int, measured: int) -> Skip:
        """Set candidate ``index`` aside as ``measured``'s twin: its result."""
        self.set_aside[index] = measured
        return Skip(self._candidates[index].name, f"measured as {self._candidates[measured].name}: for this call "
                    "it launches exactly as that one does")

    def ruled_out_with(self, index: int, ruled_out: Mapping[int, CandidateError]) -> CandidateError | None:
        """Where a candidate ruled out before the tune has candidate ``index``'s launch, ``index``'s
        result: the same failure, naming it."""
        launch = self._launch(index)
        if launch is None:
            return None
        for other, failure in ruled_out.items():
            if other != index and self._launch(other) == launch:
                return replace(failure, name=self._candidates[index].name,
                               reason=f"launches exactly as {self._candidates[other].name}, ruled out: "
                                      f"{failure.reason}")
        return None
