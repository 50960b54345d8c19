"""A batch opened from JavaScript (``wgtune.batch``, ``web/batch.js``), and WebGPU's word on it.

Launches recorded in a batch are submitted together (``core/batch.py``), and WebGPU refuses a
submission whole: a launch on a buffer destroyed after it was recorded, and none of the launches
in that submission runs, the valid ones included. In a browser WebGPU says so only after the
submit has returned, so :meth:`JsBatch.submit` answers an awaitable of it
(``CallLaunches.take_batch_verdict``): it raises a LaunchRefused that names the calls of each
refused submission (``set 'scale' [n=1024]``), whose bind groups are dropped meanwhile, so that
each one's next ``execute`` is a checked first launch again (the call on the destroyed buffer is
refused then, the others run). ``batch.submit()`` returns it as a promise.

Pure Python: imports in CPython (where it is tested) and in Pyodide.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

__all__ = ["JsBatch"]


class JsBatch:
    """A batch of ``tuner``'s launches, open from now until :meth:`submit`."""

    javascript_facing = True  # what it answers to JavaScript is wrapped so (js_errors.Facing)

    def __init__(self, tuner: Any) -> None:
        self._batch = tuner.batch()
        self._device = tuner.device

    @property
    def open(self) -> bool:
        """Whether launches are still being recorded into this batch."""
        return self._batch.open

    def submit(self) -> Awaitable[None] | None:
        """Submit what the batch recorded and close it (a batch inside another leaves that to the
        outer one); WebGPU's word on its submissions: an awaitable that raises LaunchRefused for
        those it refused, or None where there is nothing to wait for (a batch inside another, a
        device that raises at the submit itself)."""
        self._batch.submit()
        take = getattr(self._device, "take_batch_verdict", None)
        return None if take is None else take()
