"""The bootstrap statement of how sure a tune is of its winner, and how it is kept."""

from __future__ import annotations

import json
import random

import pytest

from wgtune import Key, StoredEntry, StoreError, TuneRecord
from wgtune.confidence import Confidence, bootstrap_ratio, median
from wgtune.record import Trial

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def test_identical_samples_give_a_ratio_of_one_and_no_spread():
    interval = bootstrap_ratio([1e-3] * 6, [1e-3] * 6)
    assert (interval.ratio, interval.low, interval.high, interval.p_faster) == (1.0, 1.0, 1.0, 0.0)


def test_clearly_separated_samples_give_an_interval_above_one():
    rng = random.Random(7)
    fast = [1e-3 * (1 + 0.05 * rng.random()) for _ in range(10)]
    slow = [1.5e-3 * (1 + 0.05 * rng.random()) for _ in range(10)]
    interval = bootstrap_ratio(fast, slow)
    assert 1.4 < interval.low <= interval.ratio <= interval.high < 1.6
    assert interval.p_faster == 1.0


def test_overlapping_samples_give_an_interval_across_one():
    rng = random.Random(8)
    a = [1e-3 * (1 + 0.3 * rng.random()) for _ in range(8)]
    b = [1e-3 * (1 + 0.3 * rng.random()) for _ in range(8)]
    interval = bootstrap_ratio(a, b)
    assert interval.low < 1 < interval.high


def test_a_wider_level_gives_a_wider_interval_and_the_same_samples_the_same_answer():
    rng = random.Random(9)
    a = [1e-3 * (1 + 0.2 * rng.random()) for _ in range(9)]
    b = [1.1e-3 * (1 + 0.2 * rng.random()) for _ in range(9)]
    narrow, wide = bootstrap_ratio(a, b, 0.5), bootstrap_ratio(a, b, 0.99)
    assert wide.low <= narrow.low and narrow.high <= wide.high
    assert bootstrap_ratio(a, b) == bootstrap_ratio(a, b)


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="samples"):
        bootstrap_ratio([], [1.0])
    with pytest.raises(ValueError, match="level"):
        bootstrap_ratio([1.0], [1.0], level=1.0)


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0, 2.0, 3.0]) == 2.5


SURE = Confidence("b", 1.25, 1.2, 1.3, 0.95, 0.99, (12, 9))


def test_a_confidence_round_trips_and_reads_well():
    assert Confidence.from_json(json.loads(json.dumps(SURE.to_json()))) == SURE
    assert SURE.short() == "1.250x [1.200, 1.300] p=0.99"
    assert "vs b" in SURE.describe() and "95% interval" in SURE.describe() and "12 and 9 samples" in SURE.describe()


@pytest.mark.parametrize("bad", [None, [], {"runner_up": "b"}, {**SURE.to_json(), "ratio": "fast"}])
def test_a_malformed_confidence_is_a_value_error(bad):
    with pytest.raises(ValueError, match="confidence"):
        Confidence.from_json(bad)


def entry_json(**fields) -> dict:
    entry = StoredEntry("t", Key({"n": 1}), "sum", 0, "a", ({"name": "a", "samples": [1e-3]},), SURE, "adaptive")
    return {**entry.to_json(), **fields}


def test_a_stored_entry_keeps_its_confidence_and_policy():
    decoded = StoredEntry.from_json(json.loads(json.dumps(entry_json())))
    assert decoded.confidence == SURE and decoded.policy == "adaptive"


def test_an_entry_stored_before_confidence_existed_still_reads():
    old = entry_json()
    del old["confidence"], old["policy"]
    decoded = StoredEntry.from_json(old)
    assert decoded.confidence is None and decoded.policy == "" and decoded.winner_name == "a"


def test_an_entry_with_a_malformed_confidence_is_a_store_error_naming_it():
    with pytest.raises(StoreError, match="entry confidence"):
        StoredEntry.from_json(entry_json(confidence={"ratio": 2}))


def test_a_record_keeps_confidence_policy_and_sample_counts_and_old_records_read():
    record = TuneRecord("t", Key({"n": 1}), "sum", 1, (Trial("a", 0.1, 1), Trial("b", 0.2, 14)), None, 0.5,
                        False, True, SURE, "adaptive")
    assert TuneRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    old = record.to_json()
    del old["confidence"], old["policy"]
    for trial in old["trials"]:
        del trial["samples"]
    decoded = TuneRecord.from_json(old)
    assert decoded.confidence is None and decoded.trials[1] == Trial("b", 0.2, 0)
    with pytest.raises(StoreError, match="confidence"):
        TuneRecord.from_json({**record.to_json(), "confidence": {"ratio": 1}})
