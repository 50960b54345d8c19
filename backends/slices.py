"""Long work on the page's main thread, a slice at a time (issue 28: no task over 200 ms).

Python runs on the page's main thread (the tuner drives the page's ``GPUDevice``), so a loop over
100k stored winners is, unbroken, one task of seconds: no input, no drawing, no timer meanwhile.
A loop that checks :meth:`Slices.due` as it goes and awaits :meth:`Slices.pause` when it says so
ends its task after about :data:`SLICE_SECONDS` and goes on in a later one.

Why ``asyncio.sleep(0)`` is enough: Pyodide's WebLoop schedules every ready callback with
``scheduleCallback(callback, 0)``, which in a page's main thread posts a message on a
``MessageChannel`` (not a microtask, not a 4 ms-clamped timer): the coroutine resumes in a task
of its own, after the tasks already queued (a timer, an input event, a frame).
``bench/large_import.py`` counts a 10 ms heartbeat timer's ticks during an import to show it.
Natively (the tests, on asyncio's own loop) the same await lets other coroutines run.

The budget is time, not a count of items: an item costs 10 to 300 us from one machine to the next
(and on one machine under load), and a fixed count tuned on one is a long task on another.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["SLICE_SECONDS", "Slices"]

SLICE_SECONDS = 0.01
"""How long a slice works before it lets the page run something else."""


class Slices:
    """The clock of one piece of long work: ``if slices.due(): await slices.pause()``."""

    def __init__(self, budget: float = SLICE_SECONDS) -> None:
        self.budget = budget
        self.pauses = 0
        """How many times the work let the page run (what the tests count)."""
        self._since = time.perf_counter()

    def due(self) -> bool:
        """Whether this slice has worked its budget (cheap: call it for every item)."""
        return time.perf_counter() - self._since >= self.budget

    async def pause(self) -> None:
        """End this slice: the work goes on in a later task of the page."""
        await asyncio.sleep(0)
        self.pauses += 1
        self._since = time.perf_counter()

    def restart(self) -> None:
        """A slice starts now (after an await that was a task boundary of its own: a request)."""
        self._since = time.perf_counter()
