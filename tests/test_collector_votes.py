"""Collector votes that mean agreement (issue 27): one vote per reporter per slot, verified only
with several distinct reporters, keys a call can make, bounded namespaces, a rate limit that counts
reports, and collectors sharing one database that agree. On :class:`Collector` directly, each
report from the client address it names (SQLite in tmp)."""

from __future__ import annotations

import json

import pytest
from test_collector import FMA, KEY, NAMESPACE, OTHER_GPU, body, fresh_database, install, report

from wgtune.backends.collector import MAX_REPORTS, Collector, RateLimiter, Rejected, known_sets
from wgtune.backends.collector_db import address_group
from wgtune.kernels.families import FAMILIES
from wgtune.store.bounded_json import parse_json
from wgtune.store.bundle import read_bundle, reports_of

PLENTY = RateLimiter(rate=1000.0, burst=1000)


@pytest.fixture
def database(tmp_path):
    opened = fresh_database(tmp_path)
    yield opened
    opened.close()


def post(collector: Collector, *reports: dict, address: str = "10.0.0.1", reporter: str | None = None,
         namespace: dict = NAMESPACE):
    return collector.post_reports(json.dumps(body(*reports, namespace=namespace, reporter=reporter)).encode(),
                                  address)


def served(collector: Collector) -> tuple[int, int]:
    """(winner, agreeing reporters) of the one slot served."""
    [(_namespace, [entry])] = read_bundle(parse_json(collector.bundle()))
    return entry.winner, reports_of(entry)


def test_a_batch_of_32_copies_of_one_report_is_refused_naming_the_slot(database):
    collector = Collector(database, limiter=PLENTY)
    with pytest.raises(Rejected) as refused:
        post(collector, *[report(5)] * 32)
    assert refused.value.status == 400 and "report 1: the slot (set 'fma'" in refused.value.reason
    assert database.counts() == (0, 0)


def test_a_reporter_posting_one_report_32_times_holds_one_vote(database):
    collector = Collector(database, limiter=PLENTY)
    for _ in range(32):
        post(collector, report(5), reporter=install(7))
    assert database.counts() == (1, 1)
    assert served(collector) == (5, 1)


def test_a_reporter_s_later_report_replaces_its_vote(database):
    collector = Collector(database, limiter=PLENTY)
    post(collector, report(2), reporter=install(1))
    post(collector, report(5), reporter=install(1))
    assert database.counts() == (1, 1) and served(collector) == (5, 1)


def test_twenty_reports_from_one_reporter_cannot_overturn_three_agreeing_reporters(database):
    collector = Collector(database, limiter=PLENTY)
    for number in range(3):
        post(collector, report(2), address=f"10.0.0.{number + 1}", reporter=install(number))
    assert served(collector) == (2, 3)
    for _ in range(20):  # one reporter, over and over
        post(collector, report(5, p_faster=0.99), address="10.9.9.9", reporter=install(99))
    for number in range(20):  # twenty made-up install ids from one address: it counts as two at most
        post(collector, report(5, p_faster=0.99), address="10.9.9.9", reporter=install(100 + number))
    for _ in range(20):  # and twenty without one: the address is the reporter
        post(collector, report(5, p_faster=0.99), address="10.9.9.9")
    assert served(collector) == (2, 3)


def test_a_winner_is_verified_only_by_min_reporters_agreeing_from_more_than_one_address(database):
    collector = Collector(database, limiter=PLENTY)
    for number in range(5):  # five install ids on one address: two count
        post(collector, report(2), address="10.0.0.1", reporter=install(number))
    [(_, [entry])] = read_bundle(parse_json(collector.bundle()))
    assert reports_of(entry) == 2 < collector.min_reporters == 3  # served, unverified
    post(collector, report(2), address="10.0.0.2", reporter=install(9))
    assert served(collector) == (2, 3)  # verified
    strict = Collector(database, limiter=PLENTY, min_reporters=5)
    assert strict.bundle() != b"" and strict.min_reporters == 5


def test_an_ipv6_prefix_is_one_address():
    assert address_group("2001:db8:1:2::1") == address_group("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert address_group("2001:db8:1:3::1") != address_group("2001:db8:1:2::1")
    assert address_group("::ffff:10.0.0.1") == "10.0.0.1"


def test_two_collectors_on_one_database_serve_the_same_bundle_after_a_report_to_either(database, tmp_path):
    other_connection = type(database)(database.target)  # a second process's connection
    first, second = Collector(database, limiter=PLENTY), Collector(other_connection, limiter=PLENTY)
    try:
        assert first.bundle() == second.bundle()  # both built (and kept) empty
        post(first, report(2), reporter=install(1))
        assert second.bundle() == first.bundle() and served(second) == (2, 1)
        post(second, report(2), address="10.0.0.2", reporter=install(2))
        assert first.bundle() == second.bundle() and served(first) == (2, 2)
        query = NAMESPACE
        assert first.bundle(query) == second.bundle(query)
    finally:
        other_connection.close()


def test_two_collectors_share_one_rate_limit(database):
    other_connection = type(database)(database.target)
    limit = RateLimiter(rate=0.001, burst=3)
    first, second = Collector(database, limiter=limit), Collector(other_connection, limiter=limit)
    try:
        post(first, report(2), reporter=install(1))
        post(second, report(2), reporter=install(2))
        post(first, report(2), reporter=install(3))
        with pytest.raises(Rejected) as refused:
            post(second, report(2), reporter=install(4))
        assert refused.value.status == 429 and refused.value.retry_after >= 1
        assert second.wait("10.0.0.1") > 0 and second.wait("10.0.0.2") == 0
    finally:
        other_connection.close()


def test_rate_limiting_counts_reports_not_requests(database):
    collector = Collector(database, limiter=RateLimiter(rate=0.001, burst=5))
    keys = [{**KEY, "n": 1 << shift} for shift in range(10, 20)]
    assert json.loads(post(collector, *(report(2, key=key) for key in keys[:4])).body) == {"accepted": 4}
    with pytest.raises(Rejected) as refused:  # two reports, one token left
        post(collector, *(report(2, key=key) for key in keys[4:6]))
    assert refused.value.status == 429
    post(collector, report(2, key=keys[6]))  # one report: the last token
    with pytest.raises(Rejected) as refused:
        post(collector, *(report(2, key=key) for key in keys[7:10]))
    assert refused.value.status == 429 and database.counts() == (5, 5)
    with pytest.raises(Rejected) as refused:  # more than a burst: never, and said so
        Collector(database, limiter=RateLimiter(rate=1.0, burst=2)).post_reports(
            json.dumps(body(*(report(2, key=key) for key in keys[:3]))).encode(), "10.0.0.5")
    assert "more than its burst" in refused.value.reason
    # The default bucket takes the largest batch a POST may hold, from a fresh address.
    most = [{**KEY, "n": 1 << shift} for shift in range(10, 10 + MAX_REPORTS)]
    answer = Collector(database).post_reports(json.dumps(body(*(report(2, key=key) for key in most))).encode(),
                                              "10.0.0.6")
    assert json.loads(answer.body) == {"accepted": MAX_REPORTS}


KEYS_NO_CALL_MAKES = [
    ("a field the set does not have", {**KEY, "a": 1}, "not the set's: ['a']"),
    ("a field missing", {"n": 262144, "dtype": "f32"}, "missing: ['vec']"),
    ("another key altogether", {"a": 1}, "the key's fields must be"),
    ("a padded field", {**KEY, "pad": "x" * 200}, "not the set's"),
    ("a size of another type", {**KEY, "n": "262144"}, "must be a int"),
    ("a size no bucket has", {**KEY, "n": 262145}, "power of two"),
    ("a dtype the set has not", {**KEY, "dtype": "f64"}, "'dtype'"),
    ("a vector width the set has not", {**KEY, "vec": 3}, "'vec'"),
    ("a negative size", {**KEY, "n": -4}, "out of range"),
]


@pytest.mark.parametrize(("what", "key", "reason"), KEYS_NO_CALL_MAKES, ids=[case[0] for case in KEYS_NO_CALL_MAKES])
def test_a_key_no_call_of_the_set_makes_is_refused(database, what, key, reason):
    collector = Collector(database, limiter=PLENTY)
    with pytest.raises(Rejected) as refused:
        post(collector, report(2, key=key))
    assert refused.value.status == 422 and reason in refused.value.reason, refused.value.reason
    assert database.counts() == (0, 0)


def test_every_family_s_demo_keys_are_accepted():
    known = known_sets()
    for family in FAMILIES:
        tunables = family.build()
        domain = known[family.name].key_domain
        assert domain is not None, family.name
        for size in family.demo_sizes:
            assert domain.check(tunables.key(family.key_args(size)).as_dict()) is None, (family.name, size)


def test_device_namespaces_are_bounded_per_address_and_in_all(database):
    collector = Collector(database, limiter=PLENTY, max_namespaces_per_address=2, max_namespaces=3)
    gpus = [{**NAMESPACE, "device": {**NAMESPACE["device"], "device": f"gpu{number}"}} for number in range(4)]
    post(collector, report(2), namespace=gpus[0])
    post(collector, report(2), namespace=gpus[1])
    post(collector, report(3), namespace=gpus[1])  # a device it reported for already
    with pytest.raises(Rejected) as refused:
        post(collector, report(2), namespace=gpus[2])
    assert refused.value.status == 422 and "devices already" in refused.value.reason
    post(collector, report(2), address="10.0.0.2", namespace=gpus[2])
    with pytest.raises(Rejected) as refused:
        post(collector, report(2), address="10.0.0.3", namespace=gpus[3])
    assert refused.value.status == 422 and "3 device namespaces" in refused.value.reason
    long_device = {**OTHER_GPU, "device": {**OTHER_GPU["device"], "driver": "d" * 129}}
    with pytest.raises(Rejected) as refused:
        post(collector, report(2), address="10.0.0.4", namespace=long_device)
    assert refused.value.status == 400 and "at most 128" in refused.value.reason


def test_a_reporter_id_must_be_an_install_id(database):
    collector = Collector(database, limiter=PLENTY)
    for bad in ("short", "x" * 65, "spaces are not ids 1234", 12345678901234567):
        with pytest.raises(Rejected) as refused:
            collector.post_reports(json.dumps({**body(report(2)), "reporter": bad}).encode(), "10.0.0.1")
        assert refused.value.status == 400 and "install id" in refused.value.reason
    assert FMA.key_domain is not None


def test_pages_of_two_patch_releases_and_driver_point_releases_vote_in_one_namespace(database):
    collector = Collector(database, limiter=PLENTY)
    older = {**NAMESPACE, "wgtune": "0.1.0", "device": {**NAMESPACE["device"], "driver": "580.95.05"}}
    newer = {**NAMESPACE, "wgtune": "0.1.7", "device": {**NAMESPACE["device"], "driver": "580.159.04"}}
    post(collector, report(2), address="10.0.0.1", reporter=install(1), namespace=older)
    post(collector, report(2), address="10.0.0.2", reporter=install(2), namespace=newer)
    post(collector, report(2), address="10.0.0.3", reporter=install(3), namespace=older)
    [(namespace, [entry])] = read_bundle(parse_json(collector.bundle()))
    assert (entry.winner, reports_of(entry)) == (2, 3)  # one slot, verified by the three together
    assert namespace["wgtune"] == "0.1" and namespace["device"]["driver"] == "580"
    # A page of either release asks for its device's bundle and gets the same one.
    assert collector.bundle(older) == collector.bundle(newer)
    another_branch = {**NAMESPACE, "device": {**NAMESPACE["device"], "driver": "590.10"}}
    post(collector, report(5), address="10.0.0.4", reporter=install(4), namespace=another_branch)
    assert len(read_bundle(parse_json(collector.bundle()))) == 2  # a new driver branch starts afresh
