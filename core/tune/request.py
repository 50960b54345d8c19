"""What one tune of one key is given: one value instead of a dozen loose arguments.

The tuner builds a :class:`TuneRequest` at a miss and hands it to :func:`~wgtune.tune.tuning.measure_key`;
the tune's :class:`~wgtune.tune.measure.Bench` reads the device, the set and the settings from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..config import Config
from ..errors import CandidateError
from ..gpu.device import Device
from ..key import Key
from ..sets.args import Args
from ..sets.tunable import TunableSet
from .pipelines import PipelineCache

if TYPE_CHECKING:
    from .outcome import TuneOutcome

__all__ = ["LaunchGuard", "TuneRequest"]


def _ignore(_item: object) -> None:
    return None


class LaunchGuard(Protocol):
    """Runs a tune where a launch that never returns can be stopped (natively, in a tuning
    process: ``backends/isolation.py``): the tuner hands it each tune it would measure itself, and
    each winner from elsewhere it would check."""

    async def measure(self, request: TuneRequest) -> TuneOutcome:
        """What :func:`~wgtune.tune.tuning.measure_key` answers for ``request``, its launches
        bounded; a candidate stopped past the time limit is a Timeout result."""
        ...

    async def verify(self, device: Device, pipelines: PipelineCache, tunables: TunableSet, key: Key, args: Args,
                     winner: int) -> str | None:
        """What :func:`~wgtune.tune.verify.verify_winner` answers, its launches bounded; a winner
        stopped past the time limit is not used (the reason says why)."""
        ...


@dataclass(frozen=True)
class TuneRequest:
    """One tune of ``key`` of the concrete set ``tunables`` on ``device``.

    ``args`` is the call to tune on: ``snapshot`` True when it is already the tune's own copy
    of the call (``Settler.snapshot``, in the page), else the tune copies the buffers a candidate may
    write and reads the call's others as they are (``measure.clone_written``), or the set's
    ``input_gen`` makes its inputs. ``emit`` receives the tune's events (a TrialFinished per candidate), ``step`` the
    log's steps; ``ruled_out`` candidates are not launched, their failures taken as they are
    (``TuneCache.ruled_out``, and a :class:`LaunchGuard`'s runaways). ``finalists`` is told, as the
    adaptive policy's rounds begin, the candidates still in the running (fastest so far first): the
    winner is one of them, so a :class:`LaunchGuard` whose winner serves on another device than the
    tune's begins compiling them there while the rounds decide (``backends/isolation.py``). It is
    not told under the fixed policy, which has no rounds, nor where a candidate short-circuits the
    screening.
    """

    device: Device
    pipelines: PipelineCache
    config: Config
    tunables: TunableSet
    key: Key
    args: Args
    emit: Callable[[object], None] = _ignore
    step: Callable[[str], None] = _ignore
    ruled_out: Mapping[int, CandidateError] = field(default_factory=dict)
    snapshot: bool = False
    finalists: Callable[[list[int]], None] = _ignore
