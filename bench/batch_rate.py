"""What a launch of a tuned kernel costs as a program's batch runs it: the wall clock, from outside.

The oracle and the tuner time a pass of launches recorded in full before it is submitted: the
GPU's span plus the host's recording, one after the other. A program's ``with tuner.batch():``
loop runs otherwise: ``tuner.execute`` each time (the hit path: key, lookup, bind), and the
device submits every so many launches, so the GPU runs the first ones while the host records the
next. Its cost a launch is then about the larger of the two, not their sum. That is the figure to
set beside torch's plain one (CUDA events around a Python loop of launches, the GPU running while
Python launches the next).

:func:`batch_seconds` times it with the wall clock only: ``R`` and ``2R`` launches of one call in
a batch, each from the first ``execute`` until the device's queue is done, and the difference
over ``R``, so that what any batch pays once (its first part's recording before the GPU starts,
the wait at the end) drops out, as it does from torch's loop. Where ``R`` is under the device's
128 launches a submission (kernels of more than about 80 us), the batches are one or two
submissions and the figure counts some of the host's recording, as a batch that short pays it:
a few % of such a kernel's time. A benchmark helper, not a test.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, NamedTuple

from wgtune import Args, Tuner, run_inline

__all__ = ["BATCH_SPAN", "BatchCost", "batch_seconds"]

BATCH_SPAN = 0.01  # seconds of work in the shorter batch: edges of ~0.3 ms are a few % of it, and cancel
MOST_LAUNCHES = 8192


class BatchCost(NamedTuple):
    """Seconds a launch in a long batch: until the GPU is done (``seconds``), and until the last
    ``execute`` returned and the batch was submitted (``host``: the host's part; where it is most
    of ``seconds`` the loop is the host's pace, not the GPU's)."""

    seconds: float
    host: float


def batch_seconds(tuner: Tuner, tunables: Any, args: Args, estimate: float, samples: int = 5) -> BatchCost:
    """What a launch of ``tunables`` on ``args`` costs in a long ``tuner.batch()``, by the wall
    clock: the median of ``samples`` batches of ``2R`` launches less the median of ``samples`` of
    ``R``, over ``R`` (``R`` about :data:`BATCH_SPAN` of work at ``estimate`` seconds a launch).
    The tuner must have a winner for the call already (it runs, it does not tune)."""
    launches = max(16, min(MOST_LAUNCHES, int(BATCH_SPAN / max(estimate, 1e-7))))
    device = tuner.device

    def timed(count: int) -> tuple[float, float]:
        run_inline(device.sync())
        started = time.perf_counter()
        with tuner.batch():
            for _ in range(count):
                tuner.execute(tunables, args)
        submitted = time.perf_counter()
        run_inline(device.sync())
        return time.perf_counter() - started, submitted - started

    timed(launches)  # warm: the bind groups and the pass's objects made once
    short, long = [], []
    for _ in range(samples):  # interleaved, so that drift on the host touches both
        short.append(timed(launches))
        long.append(timed(2 * launches))
    return BatchCost(*(_per_launch([s[part] for s in short], [s[part] for s in long], launches) for part in (0, 1)))


def _per_launch(short: list[float], long: list[float], launches: int) -> float:
    marginal = statistics.median(long) - statistics.median(short)
    # Noise can swamp the difference on a very busy host; then the long batch's own average, edges and all.
    return marginal / launches if marginal > 0 else statistics.median(long) / (2 * launches)
