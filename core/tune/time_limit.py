"""How long one launch of a candidate may take in a tune.

A candidate that takes far longer than its peers (a tile that thrashes at this shape, a loop
whose bound came out huge) would otherwise cost the tune every warmup, calibration round and
sample it takes, and a kernel that never returns would hang it. So each candidate's first launch
is timed on its own before anything else runs it (``measure.probe_first_launch``): past the limit
it is a :class:`~wgtune.errors.Timeout` result, launched no more, and the tune goes on. Past the
default limit (relative, below) it is launched once more first, and out only if that launch is
past it too: one reading of a wall clock on a loaded machine is weak evidence for a verdict that
is final (a page's event loop or GPU process descheduled for seconds, say). A limit the user set
is taken at its word: one launch.

The limit is the configured one (``WGTUNE_TIME_LIMIT``, seconds), or by default relative to what
the tune has seen: :data:`RELATIVE_FACTOR` times the fastest first launch so far, never under
:data:`FLOOR` (so a fast set's limit still forgives a noisy machine). The first candidate tried,
usually the set's fallback, has nothing to be compared with and gets :data:`FIRST_LIMIT`.

In process, a launch that has started cannot be stopped: the limit is read when it returns, which
bounds what a slow candidate costs but not a kernel that never returns. So natively a tune runs
where it can be killed, a tuning process (``backends/isolation.py``, on unless
``WGTUNE_ISOLATE=0``), whose waits are bounded by this limit, every launch's, not only the first
(``backends/launch_ledger.py``).
"""

from __future__ import annotations

__all__ = ["FIRST_LIMIT", "FLOOR", "RELATIVE_FACTOR", "TimeLimit"]

RELATIVE_FACTOR = 100.0
FLOOR = 2.0
FIRST_LIMIT = 60.0


class TimeLimit:
    """The limit of one tune: ``fixed`` seconds, or (None) relative to the fastest first launch."""

    def __init__(self, fixed: float | None = None) -> None:
        self.fixed = fixed
        self.fastest: float | None = None

    def seconds(self) -> float:
        """The longest the next candidate's first launch may take."""
        if self.fixed is not None:
            return self.fixed
        if self.fastest is None:
            return FIRST_LIMIT
        return max(FLOOR, RELATIVE_FACTOR * self.fastest)

    def observe(self, seconds: float) -> None:
        """A first launch that finished within the limit took ``seconds``."""
        if self.fastest is None or seconds < self.fastest:
            self.fastest = seconds

    def describe(self) -> str:
        if self.fixed is not None:
            return f"the time limit of {self.fixed:.3g} s"
        if self.fastest is None:
            return f"the first candidate's time limit of {FIRST_LIMIT:.3g} s"
        return (f"the time limit of {self.seconds():.3g} s ({RELATIVE_FACTOR:.0f}x the fastest first launch, "
                f"at least {FLOOR:.3g} s)")
