"""Progress events a tuner reports while it works: for progress bars, pages and tests.

Small frozen values handed to the tuner's ``observer`` callback, in the order they happen.
"""

from __future__ import annotations

from dataclasses import dataclass

from .key import Key
from .results import Result

__all__ = ["TrialFinished", "TuneFailedEvent", "TuneFinished", "TuneStarted"]


@dataclass(frozen=True, slots=True)
class TuneStarted:
    set_name: str
    key: Key
    candidates: int


@dataclass(frozen=True, slots=True)
class TrialFinished:
    set_name: str
    key: Key
    index: int
    result: Result
    wall: float


@dataclass(frozen=True, slots=True)
class TuneFinished:
    set_name: str
    key: Key
    winner: int
    winner_name: str
    stored: bool


@dataclass(frozen=True, slots=True)
class TuneFailedEvent:
    set_name: str
    key: Key
    reason: str
