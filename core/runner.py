"""How a tune's coroutine is driven: inline (native) or as a task on the event loop (browser).

The tune is a coroutine over the async device interface. Natively no device method ever
suspends, so :func:`run_inline` steps it to completion without an event loop: it neither needs
nor disturbs one the caller may be running (Jupyter's, say). In Pyodide the WebLoop is always
running; :func:`spawn_task` schedules the tune there and answers Pending at once.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from .state import PENDING, TuneState

__all__ = ["Spawner", "default_spawner", "run_inline", "spawn_task"]

Spawner = Callable[[Coroutine[Any, Any, TuneState], set], TuneState]


def run_inline(coro: Coroutine[Any, Any, Any], tasks: set | None = None) -> Any:
    """Run a coroutine that never suspends; return its value or raise its exception."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError(
        "the device suspended a tune that was driven inline: this device needs an event loop; "
        "use Tuner.tune_async() or a Tuner built with spawn=spawn_task"
    )


def spawn_task(coro: Coroutine[Any, Any, TuneState], tasks: set) -> TuneState:
    """Schedule the tune on the running event loop and answer Pending at once.

    ``tasks`` keeps a strong reference to every task until it ends: the loop keeps only weak
    ones, and a collected task would leave its key Pending forever.
    """
    task = asyncio.get_running_loop().create_task(coro)  # no running loop: RuntimeError, not a lost task
    tasks.add(task)

    def forget(done: asyncio.Future) -> None:
        tasks.discard(done)
        if not done.cancelled():
            done.exception()  # retrieved: the tuner already recorded it and reset the key

    task.add_done_callback(forget)
    return PENDING


def default_spawner() -> Spawner:
    return spawn_task if sys.platform == "emscripten" else run_inline
