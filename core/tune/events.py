"""Progress events a tuner reports while it works: for progress bars, pages and tests.

Small frozen values handed to the tuner's ``observer`` callback, in the order they happen.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..key import Key
from ..store.results import Result
from .outcome import TuneOutcome

__all__ = ["TrialFinished", "TuneFailedEvent", "TuneFinished", "TuneStarted"]


@dataclass(frozen=True, slots=True)
class TuneStarted:
    set_name: str
    key: Key
    candidates: int


@dataclass(frozen=True, slots=True)
class TrialFinished:
    """A candidate's result so far. The adaptive policy reports each candidate once it is
    screened and again when it leaves the running, with all its samples: the later event for
    the same index replaces the earlier."""

    set_name: str
    key: Key
    index: int
    result: Result
    wall: float


@dataclass(frozen=True, slots=True)
class TuneFinished:
    """A tune found its winner: everything it decided is in ``outcome``."""

    outcome: TuneOutcome

    @property
    def set_name(self) -> str:
        return self.outcome.set_name

    @property
    def key(self) -> Key:
        return self.outcome.key


@dataclass(frozen=True, slots=True)
class TuneFailedEvent:
    set_name: str
    key: Key
    reason: str
