"""How long the tuning process may take to answer: the launches it has in hand, and their budget.

The tuning process (``isolated_worker.py``) runs a tune's launches where they can be killed, and
its parent (``remote_device.py``) waits for each answer no longer than this ledger allows. The
ledger knows which candidates' launches were submitted and not yet waited for, and gives each a
budget from the tune's :class:`~wgtune.tune.time_limit.TimeLimit`:

- a candidate not yet timed (its first launch): the limit per launch, as the core's own limit;
- a candidate timed already: the limit, or :data:`LATER_FACTOR` times what its launches took
  when first waited for, whichever is longer. So a sample of thousands of launches of a fast
  kernel may take its due, and a kernel that turns slow on a later launch (a loop bounded by
  data it wrote) is stopped about one limit after it should have returned, not thousands.

Launches of one candidate are waited for before another's are submitted
(:meth:`LaunchLedger.other_candidates`): when a wait runs past its deadline, the launches in hand
are one candidate's, and that candidate is the runaway. Pure bookkeeping: the caller reads the
clock and waits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from wgtune.tune.time_limit import TimeLimit

__all__ = ["LATER_FACTOR", "LAUNCH_SLACK", "LaunchLedger", "deadline"]

LATER_FACTOR = 20.0
"""How many times what a candidate's first launches took its later ones may take (past the
tune's limit). The same kernel on the same buffers: a busy machine slows a CPU adapter's launch
a few times, a first launch carries the round trip to the process and a GPU's warm-up, and a
runaway is slower by orders of magnitude (minutes against 23 ms, ``tests/runaway_kernels.py``)."""

LAUNCH_SLACK = 2.0
"""Seconds added to every wait for launches: the round trip to the tuning process and its own work
around them (binding, encoding, a readback), on a machine busy with other jobs."""


@dataclass
class _Candidate:
    name: str
    launched: int = 0
    """Its launches waited for so far."""
    per_launch: float | None = None
    """Seconds a launch took when its first launches were waited for (round trip included)."""
    observed: bool = True
    """Whether its first launch is one the tune's limit learns from (a candidate's); the wake's
    spin kernel (``wgtune.gpu.wake``) is timed like one but says nothing of the candidates."""


@dataclass
class _Pending:
    candidate: _Candidate
    count: int
    sequence: int
    since: float


@dataclass
class LaunchLedger:
    """The launches submitted and not yet waited for, in order, and each candidate's timing (see
    the module doc). ``limit`` is the tune's; :meth:`begin_tune` gives each tune its own."""

    limit: TimeLimit = field(default_factory=TimeLimit)
    _candidates: dict[int, _Candidate] = field(default_factory=dict)
    _pending: list[_Pending] = field(default_factory=list)
    _sequence: int = 0

    def begin_tune(self, fixed: float | None) -> None:
        """A new tune, with its own limit (``Config.time_limit``) and nothing timed yet."""
        self.limit = TimeLimit(fixed)
        self._candidates.clear()

    def other_candidates(self, kernel: object) -> bool:
        """Whether launches of another candidate than ``kernel`` are in hand: wait for them first."""
        return any(pending.candidate is not self._candidates.get(id(kernel)) for pending in self._pending)

    def submit(self, kernel: object, name: str, count: int, now: float, *, observed: bool = True) -> int:
        """``count`` launches of candidate ``kernel`` (named ``name``) were submitted at ``now``;
        answers their sequence number (what :meth:`done_until` takes). ``observed`` False: its
        first launch does not teach the tune's limit (the wake's spin kernel)."""
        candidate = self._candidates.get(id(kernel))
        if candidate is None or candidate.name != name:
            candidate = self._candidates[id(kernel)] = _Candidate(name, observed=observed)
        self._sequence += 1
        self._pending.append(_Pending(candidate, count, self._sequence, now))
        return self._sequence

    @property
    def in_hand(self) -> bool:
        return bool(self._pending)

    def budget(self) -> float:
        """Seconds the launches in hand may take, all together (0 with none)."""
        counts: dict[int, tuple[_Candidate, int]] = {}
        for pending in self._pending:
            candidate, count = counts.get(id(pending.candidate), (pending.candidate, 0))
            counts[id(candidate)] = (candidate, count + pending.count)
        limit = self.limit.seconds()
        total = 0.0
        for candidate, count in counts.values():
            if candidate.per_launch is None:
                total += limit * count
            else:
                total += max(limit, LATER_FACTOR * count * candidate.per_launch)
        return total

    def done(self, now: float) -> None:
        """Every launch in hand has finished (a sync, a readback answered at ``now``)."""
        self.done_until(self._sequence, now)

    def done_until(self, sequence: int, now: float) -> None:
        """The launches submitted up to ``sequence`` have finished (a timed pass resolved at ``now``)."""
        finished = [pending for pending in self._pending if pending.sequence <= sequence]
        if not finished:
            return
        self._pending = [pending for pending in self._pending if pending.sequence > sequence]
        candidates = {id(pending.candidate): pending.candidate for pending in finished}
        if len(candidates) == 1:
            (candidate,) = candidates.values()
            count = sum(pending.count for pending in finished)
            if candidate.per_launch is None and count > 0:
                candidate.per_launch = max(0.0, now - finished[0].since) / count
                if candidate.launched == 0 and count == 1 and candidate.observed:  # a first launch, alone
                    self.limit.observe(candidate.per_launch)
        for pending in finished:
            pending.candidate.launched += pending.count

    def culprits(self) -> list[str]:
        """The candidates whose launches are in hand (the runaway, when a wait ran past its deadline)."""
        return list(dict.fromkeys(pending.candidate.name for pending in self._pending))

    def describe(self, waited: float) -> str:
        """Why the launches in hand count as a runaway after ``waited`` seconds."""
        if any(pending.candidate.launched == 0 for pending in self._pending):
            return f"its first launch ran past {waited:.3g} s ({self.limit.describe()})"
        times = [pending.candidate.per_launch for pending in self._pending if pending.candidate.per_launch is not None]
        bound = f", or {LATER_FACTOR:.0f}x what its first launches took ({min(times):.3g} s a launch)" if times else ""
        return f"a launch after its first ran past {waited:.3g} s ({self.limit.describe()}{bound})"

    def reset(self) -> None:
        """Forget the launches in hand (their process is gone)."""
        self._pending.clear()


def deadline(budget: float, nbytes: int = 0, base: float = LAUNCH_SLACK) -> float:
    """Seconds to wait for an answer: ``budget`` for launches in hand, ``base`` for the work
    around them, and time to move ``nbytes`` through a pipe on a busy machine (20 MB/s)."""
    return budget + base + nbytes / 20e6 if math.isfinite(budget) else math.inf
