"""What one tune of one key is given: one value instead of a dozen loose arguments.

The tuner builds a :class:`TuneRequest` at a miss and hands it to :func:`~wgtune.tune.tuning.measure_key`;
the tune's :class:`~wgtune.tune.measure.Bench` reads the device, the set and the settings from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..config import Config
from ..errors import CandidateError
from ..gpu.device import Device
from ..key import Key
from ..sets.args import Args, Grid
from ..sets.kernel import Kernel
from ..sets.tunable import TunableSet
from .pipelines import PipelineCache

__all__ = ["LaunchGuard", "TuneRequest"]


def _ignore(_item: object) -> None:
    return None


class LaunchGuard(Protocol):
    """Runs a candidate's first launch where one that never returns can be stopped (natively, a
    child process: ``backends/isolation.py``), before the tune's own device runs it."""

    async def first_launch(self, kernel: Kernel, grids: list[Grid], args: Args, limit: float) -> float | None:
        """Seconds ``kernel``'s stages took on ``args`` with ``grids`` (possibly more than
        ``limit``), or None when they ran past ``limit`` and were stopped; KernelError when the
        launch failed."""
        ...


@dataclass(frozen=True)
class TuneRequest:
    """One tune of ``key`` of the concrete set ``tunables`` on ``device``.

    ``args`` is the call to tune on: ``snapshot`` True when it is already the tune's own copy
    of the call (``Settler.snapshot``), else the tune copies it (or the set's ``input_gen`` makes
    its inputs). ``emit`` receives the tune's events (a TrialFinished per candidate), ``step`` the
    log's steps; ``guard`` runs each first launch where a runaway can be stopped; ``ruled_out``
    candidates are not launched, their failures taken as they are (``TuneCache.ruled_out``).
    """

    device: Device
    pipelines: PipelineCache
    config: Config
    tunables: TunableSet
    key: Key
    args: Args
    emit: Callable[[object], None] = _ignore
    step: Callable[[str], None] = _ignore
    guard: LaunchGuard | None = None
    ruled_out: Mapping[int, CandidateError] = field(default_factory=dict)
    snapshot: bool = False
