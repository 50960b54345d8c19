"""Tuning a key once among several tuners that share a store (browser tabs, say).

Two tuners over one store that miss the same key would each tune it and may pick different
winners. A :class:`Coordinator` is the tuner's way to avoid that without knowing how the others
are reached (the core does no I/O): before it measures, a tune awaits
:meth:`Coordinator.acquire`, which answers once no other tuner is tuning that key, with the entry
another tuner stored for it meanwhile, if any. When that entry is of the set's current
candidates, the key takes it (Pending -> Hit, ``TuneCache.take_stored``) and nothing is measured;
otherwise the tune runs, and :meth:`Coordinator.release` lets the next one go once it is over
(the backend releases only when the winner is stored, so the next one finds it).

The page's coordinator (``backends/tabs.py``) holds a Web Lock per key and reads the key's record
from IndexedDB once it holds it. Natively there is none (``Tuner(coordinator=None)``): a tune
starts at once, as before.

A winner another tuner stored can also arrive unasked (a tab announces it): ``Tuner.take_announced``.
Either way the observer hears :class:`WinnerFromElsewhere`, not the events of a tune.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .key import Key
from .store.format import StoredEntry

__all__ = ["Coordinator", "WinnerFromElsewhere"]


class Coordinator(Protocol):
    """What a tune awaits around measuring a key (see the module doc)."""

    async def acquire(self, set_name: str, key: Key) -> StoredEntry | None:
        """Wait until this tuner may tune the key (no other is tuning it); the entry stored for it
        by then, if any. Raising means the key cannot be coordinated: the tune goes on alone."""
        ...

    async def release(self, set_name: str, key: Key) -> None:
        """The tune that :meth:`acquire` let go is over (its winner stored, or it failed or found
        a stored winner): another tuner waiting for the key may go on."""
        ...


@dataclass(frozen=True, slots=True)
class WinnerFromElsewhere:
    """A key took a winner another tuner tuned and stored: no tune ran here.

    ``announced``: heard from the other tuner as it stored it (``Tuner.take_announced``); False:
    found stored after waiting for the other's tune (:meth:`Coordinator.acquire`).
    """

    entry: StoredEntry
    announced: bool
