"""What the page hears of a finished tune (``backends/page_events.py``): who judged its outputs and
the warning when the set's default was found wrong, as ``web/events.js`` shows them."""

from __future__ import annotations

import pytest

from wgtune.backends.page_events import event_message, execute_saying_start
from wgtune.key import Key
from wgtune.state import MISS, Hit, Pending
from wgtune.tune.events import TuneFinished
from wgtune.tune.outcome import TuneOutcome


def finished(**checks) -> dict:
    outcome = TuneOutcome("scale", Key({"n": 1000}), "sum", "wg128", (), (1, 0), None, None, (), "adaptive", False,
                          **checks)
    return event_message(TuneFinished(outcome), lambda set_name, key: (set_name, str(key)))


def test_a_finished_tune_says_who_judged_and_that_its_default_was_wrong():
    warning = "candidate 0 (quarter), the set's default, is wrong here: disagrees with the 3 candidates that agree"
    message = finished(checked=True, judge="agreement", warning=warning)
    assert message["type"] == "finished" and message["winner"] == "wg128"
    assert message["judge"] == "agreement" and message["warning"] == warning


def test_an_unchecked_tune_has_no_judge_and_no_warning():
    message = finished()
    assert message["judge"] == "" and message["warning"] is None


class _Tuner:
    """States before and after an execute, as a tuner on the event loop gives them."""

    def __init__(self, before, after) -> None:
        self.states = [before, after]

    def fastest(self, _tunables, _key):
        return self.states[0]

    def execute(self, _tunables, _args):
        self.states.pop(0)
        return "kernel"


@pytest.mark.parametrize(("before", "after", "said"), [
    (MISS, Pending(), True),  # this call began the tune
    (Pending(), Pending(), False),  # a tune under way: check or an earlier call said so
    (Hit(0), Hit(0), False),
    (MISS, MISS, False),  # nothing began (a failed key answers without a tune)
])
def test_an_execute_says_pending_only_where_it_began_the_tune(before, after, said):
    heard = []
    assert execute_saying_start(_Tuner(before, after), None, Key({"n": 1}), None, lambda: heard.append(1)) == "kernel"
    assert heard == ([1] if said else [])
