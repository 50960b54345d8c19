"""What the page hears of tunes: the tuner's events as the JSON messages ``web/events.js`` takes,
and this page load's tune records.

Each message names the set as the page does and the key by its label (the size the page shows,
``"128x128x128"``), through the session's ``page_key``; a set made per key tunes each key as its
own set, ``name[key]``, which the page shows under its own name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from wgtune.coordinator import WinnerFromElsewhere
from wgtune.key import Key
from wgtune.state import Miss, Pending
from wgtune.store.record import TuneRecord, envelope
from wgtune.store.results import result_to_json
from wgtune.tune.events import TrialFinished, TuneFailedEvent, TuneFinished, TuneStarted

__all__ = ["PageRecords", "event_message", "execute_saying_start"]

PageKey = Callable[[str, Key], tuple[str, str]]


class PageRecords:
    """The tune records of this page load, newest last; each is also reported to the page, with
    the label of its key (the size the page shows, ``"128x128x128"``) as ``label``."""

    def __init__(self, notify: Callable[[dict], None], label: Callable[[str, Key], str]) -> None:
        self.items: list[dict] = []
        self.notify = notify
        self.label = label

    def write(self, record: TuneRecord) -> None:
        item = {**envelope(record, time.time()), "label": self.label(record.set_name, record.key)}
        self.items.append(item)
        self.notify({"type": "record", "record": item})


def event_message(event: object, page_key: PageKey) -> dict | None:
    """The page's message for a tuner event, or None for an event the page does not show."""
    if isinstance(event, TuneStarted):
        name, label = page_key(event.set_name, event.key)
        return {"type": "started", "set": name, "key": label, "candidates": event.candidates}
    if isinstance(event, TrialFinished):
        name, label = page_key(event.set_name, event.key)
        return {"type": "trial", "set": name, "key": label, "index": event.index,
                "result": result_to_json(event.result), "wall": event.wall}
    if isinstance(event, TuneFinished):
        outcome = event.outcome
        name, label = page_key(outcome.set_name, outcome.key)
        # judge: who said which outputs are right ("reference", "agreement", "" unchecked);
        # warning: the set's default (candidate 0) gave a wrong answer here, so it is the fallback no more.
        return {"type": "finished", "set": name, "key": label, "winner": outcome.winner_name,
                "stored": outcome.stored, "confidence": _confidence(outcome.confidence),
                "short_circuit": outcome.short_circuit, "judge": outcome.judge, "warning": outcome.warning}
    if isinstance(event, TuneFailedEvent):
        name, label = page_key(event.set_name, event.key)
        return {"type": "failed", "set": name, "key": label, "reason": event.reason}
    if isinstance(event, WinnerFromElsewhere):
        # Another tab tuned the key: the page shows its winner as it shows a finished tune's,
        # and "elsewhere" says no tune ran here ("announced": heard, not waited for).
        entry = event.entry
        name, label = page_key(entry.set_name, entry.key)
        return {"type": "finished", "set": name, "key": label, "winner": entry.winner_name, "stored": True,
                "confidence": _confidence(entry.confidence), "short_circuit": None, "elsewhere": True,
                "announced": event.announced}
    return None


def _confidence(confidence: object) -> dict | None:
    return confidence.to_json() if confidence is not None else None


def execute_saying_start(tuner: Any, tunables: Any, key: Key, args: Any, started: Callable[[], None]) -> Any:
    """``tuner.execute(tunables, args)`` (the kernel that ran), calling ``started`` where this call
    began the key's tune (a Miss that is Pending after it): the page hears ``pending`` whichever call
    started a tune, as ``check`` says it. On a Hit, one more dict lookup."""
    missed = isinstance(tuner.fastest(tunables, key), Miss)
    kernel = tuner.execute(tunables, args)
    if missed and isinstance(tuner.fastest(tunables, key), Pending):
        started()
    return kernel
