"""Going on after the page's GPU device was lost (``web/wgtune.js`` opens another from the same
adapter and calls :meth:`~wgtune.backends.page.PageSession.reopen`): :func:`reopen_session`.

The tunes the loss interrupted end first; then a new tuner over the same store and records, on the
new device, with every registered key's call made again on it; each interrupted tune starts again
without the candidate whose launches were running when the device was lost (its first launch, its
warmups and calibration, or a timed sample of it: ``DeviceLost.during``), ruled out: it would lose
this device too.

Importable only in Pyodide (it makes the browser device).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from wgtune.errors import DeviceLost
from wgtune.gpu.clock import clock_grain as measure_grain
from wgtune.state import Pending

from .browser import BrowserDevice

__all__ = ["reopen_session"]


async def reopen_session(session: Any, gpu_device: Any, adapter_info: Any, wait: float) -> list[str]:
    """Reopen ``session`` (a :class:`~wgtune.backends.page.PageSession`) on ``gpu_device``, waiting
    up to ``wait`` seconds for the interrupted tunes to end; the keys tuned again, as ``"set key"``."""
    old = session.tuner
    deadline = time.monotonic() + wait
    while old.running and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    interrupted: dict[tuple[str, str], DeviceLost | None] = {}
    for (set_name, label), problem in session.problems.items():
        failure = old.failures.get((problem.tunables.name, problem.key))
        if isinstance(failure, DeviceLost) or isinstance(old.fastest(problem.tunables, problem.key), Pending):
            interrupted[(set_name, label)] = failure if isinstance(failure, DeviceLost) else None
    info = adapter_info.to_py() if hasattr(adapter_info, "to_py") else dict(adapter_info)
    session.device = BrowserDevice(gpu_device, info, use_timestamps=session.use_timestamps,
                                   clock_grain=session.clock_grain)
    session.clock_grain = await measure_grain(session.device)
    session.tuner = None
    await session.reload()
    cases, session.problems = session.cases, {}
    for case in cases:
        await session.add_case(case)
    again = []
    for (set_name, label), lost in interrupted.items():
        problem = session.problems.get((set_name, label))
        if problem is None:
            continue
        if lost is not None and lost.candidate is not None:
            session.tuner.rule_out(problem.tunables, problem.key, lost.candidate,
                                   f"the GPU device was lost during {lost.its_launches} ({lost.reason})")
        session.check(set_name, label)
        again.append(f"{set_name} {label}")
    return again
