"""What the page hears of a finished tune (``backends/page_events.py``): who judged its outputs and
the warning when the set's default was found wrong, as ``web/events.js`` shows them."""

from __future__ import annotations

from wgtune.backends.page_events import event_message
from wgtune.key import Key
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
