"""The budget of the launches the tuning process has in hand (``backends/launch_ledger.py``): pure
bookkeeping, driven here with a clock of its own."""

from __future__ import annotations

import math

import pytest

from wgtune.backends.launch_ledger import LATER_FACTOR, LAUNCH_SLACK, LaunchLedger, deadline
from wgtune.tune.time_limit import FIRST_LIMIT, FLOOR, RELATIVE_FACTOR


class Candidate:
    """A stand-in for a Kernel: the ledger knows candidates by identity and name."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_a_first_launch_gets_the_tunes_limit_and_what_it_took_sets_the_limit_of_the_next():
    ledger, a, b = LaunchLedger(), Candidate("a"), Candidate("b")
    ledger.begin_tune(None)
    assert ledger.budget() == 0 and not ledger.in_hand
    ledger.submit(a, "a", 1, now=10.0)
    assert ledger.budget() == FIRST_LIMIT  # nothing to compare the first candidate with
    assert ledger.describe(61.0).startswith("its first launch ran past 61 s (the first candidate's time limit")
    ledger.done(now=10.5)
    assert not ledger.in_hand
    ledger.submit(b, "b", 1, now=11.0)
    assert ledger.budget() == pytest.approx(RELATIVE_FACTOR * 0.5)  # the core's limit, relative to a's 0.5 s
    ledger.done(now=11.001)
    ledger.submit(b, "b", 1, now=12.0)
    assert ledger.budget() == pytest.approx(FLOOR)  # b took 1 ms: its later launches get the floor


def test_later_launches_may_take_the_limit_or_a_multiple_of_what_their_first_took():
    ledger, a = LaunchLedger(), Candidate("a")
    ledger.begin_tune(5.0)
    ledger.submit(a, "a", 1, now=0.0)
    ledger.done(now=0.01)  # 10 ms a launch
    ledger.submit(a, "a", 3, now=1.0)  # warmups, or a timed pass of 3
    assert ledger.budget() == 5.0  # 3 launches of 10 ms are far inside the limit
    sequence = ledger.submit(a, "a", 1000, now=1.1)  # a pass of a thousand
    assert ledger.budget() == pytest.approx(LATER_FACTOR * 1003 * 0.01)
    assert ledger.describe(9.0) == ("a launch after its first ran past 9 s (the time limit of 5 s, or 20x what "
                                    "its first launches took (0.01 s a launch))")
    ledger.done_until(sequence - 1, now=1.2)
    assert ledger.budget() == pytest.approx(LATER_FACTOR * 1000 * 0.01)
    assert ledger.culprits() == ["a"]


def test_launches_in_hand_are_one_candidates_unless_another_is_submitted_first():
    ledger, a, b = LaunchLedger(), Candidate("a"), Candidate("b")
    ledger.begin_tune(2.0)
    assert not ledger.other_candidates(a)
    ledger.submit(a, "a", 1, now=0.0)
    assert not ledger.other_candidates(a) and ledger.other_candidates(b)  # the device waits for a's first
    ledger.submit(b, "b", 2, now=0.0)
    assert ledger.culprits() == ["a", "b"]
    assert ledger.budget() == 2.0 + 2 * 2.0
    ledger.done(now=1.0)  # waited for together: neither is timed by it
    ledger.submit(a, "a", 1, now=2.0)
    assert ledger.budget() == 2.0  # not timed alone: the limit per launch
    assert ledger.describe(3.0) == "a launch after its first ran past 3 s (the time limit of 2 s)"
    ledger.reset()
    assert not ledger.in_hand and ledger.culprits() == []


def test_a_new_tune_starts_with_its_own_limit_and_nothing_timed():
    ledger, a = LaunchLedger(), Candidate("a")
    ledger.begin_tune(None)
    ledger.submit(a, "a", 1, now=0.0)
    ledger.done(now=0.001)
    ledger.begin_tune(None)
    ledger.submit(a, "a", 1, now=1.0)
    assert ledger.budget() == FIRST_LIMIT


def test_a_deadline_adds_the_slack_and_time_to_move_the_bytes():
    assert deadline(3.0) == 3.0 + LAUNCH_SLACK
    assert deadline(0.0, 40_000_000, base=60.0) == pytest.approx(62.0)
    assert deadline(math.inf) == math.inf


def test_a_launch_that_is_not_a_candidate_s_teaches_the_limit_nothing():
    # The wake's spin kernel is timed in the tuning process like a candidate (``gpu/wake.py``): its
    # first launch of a few ms must not become the relative limit of the set's first candidate.
    ledger, spin, a = LaunchLedger(), Candidate("wgtune_wake_spin"), Candidate("a")
    ledger.begin_tune(None)
    ledger.submit(spin, "wgtune_wake_spin", 1, now=0.0, observed=False)
    ledger.done(now=0.003)
    ledger.submit(a, "a", 1, now=1.0)
    assert ledger.budget() == FIRST_LIMIT  # still the first candidate's limit
    ledger.done(now=1.5)
    ledger.submit(a, "a", 1, now=2.0)
    assert ledger.budget() == pytest.approx(RELATIVE_FACTOR * 0.5)  # learnt from a, not from the spin
