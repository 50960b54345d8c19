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
the wait at the end) drops out, as it does from torch's loop. ``R`` is a whole number of the
device's submissions (``LAUNCHES_PER_SUBMISSION``, 128): so the ``2R`` batch overlaps recording
and running where the ``R`` one is a single submission, and the last part of both is a whole
one, whose GPU time then cancels too. (Before session 31's review ``R`` was any number: for
kernels over about 78 us it was under 128, and over 156 us both batches were one submission
each, so the figure was the plain sum of host and GPU, as the pass's is.) A benchmark helper,
not a test.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, NamedTuple

from wgtune import Args, Tuner, run_inline
from wgtune.backends.batch_recorder import LAUNCHES_PER_SUBMISSION

__all__ = ["BATCH_SPAN", "BatchCost", "batch_seconds"]

BATCH_SPAN = 0.01  # seconds of work in the shorter batch, at least (one submission's launches at most)
MOST_LAUNCHES = 8192  # a multiple of LAUNCHES_PER_SUBMISSION


class BatchCost(NamedTuple):
    """Seconds a launch in a long batch: until the GPU is done (``seconds``), and until the last
    ``execute`` returned and the batch was submitted (``host``: the host's part; where it is most
    of ``seconds`` the loop is the host's pace, not the GPU's)."""

    seconds: float
    host: float


def batch_seconds(tuner: Tuner, tunables: Any, args: Args, estimate: float, samples: int = 5) -> BatchCost:
    """What a launch of ``tunables`` on ``args`` costs in a long ``tuner.batch()``, by the wall
    clock: the median of ``samples`` batches of ``2R`` launches less the median of ``samples`` of
    ``R``, over ``R`` (``R`` about :data:`BATCH_SPAN` of work at ``estimate`` seconds a launch,
    rounded to whole submissions). The tuner must have a winner for the call already (it runs,
    it does not tune)."""
    wanted = int(BATCH_SPAN / max(estimate, 1e-7))
    launches = min(MOST_LAUNCHES, LAUNCHES_PER_SUBMISSION * max(1, round(wanted / LAUNCHES_PER_SUBMISSION)))
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
    shorter = [statistics.median(sample[part] for sample in short) for part in (0, 1)]
    longer = [statistics.median(sample[part] for sample in long) for part in (0, 1)]
    if longer[0] > shorter[0] and longer[1] > shorter[1]:
        return BatchCost((longer[0] - shorter[0]) / launches, (longer[1] - shorter[1]) / launches)
    # Noise can swamp a difference on a very busy host; then the long batch's own averages, edges and all.
    return BatchCost(longer[0] / (2 * launches), longer[1] / (2 * launches))
