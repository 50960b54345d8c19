"""The fleet collector: reports in over HTTP (127.0.0.1, an ephemeral port, SQLite in tmp), the
served winner per slot by agreement, every guard refusing with a 4xx and storing nothing, and the
bundle it serves read back by ``wgtune.store.bundle.read_bundle``.

The same tests run on PostgreSQL with ``WGTUNE_COLLECTOR_TEST_DB=postgresql://...`` (a database
they may empty: each test drops the collector's tables first; needs the ``collector-postgres`` extra).
The HTTP collector here counts every reporter from 127.0.0.1 (``per_address``): reporters are told
apart by install id; ``test_collector_votes.py`` tests the per-address limits.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from wgtune.backends.collector import MAX_BODY, REPORTS_FORMAT, Collector, KnownSet, RateLimiter, known_sets
from wgtune.backends.collector_db import TABLES, Tally, VoteDatabase, served_winners
from wgtune.cli.collect import make_collector_server
from wgtune.store.bounded_json import parse_json
from wgtune.store.bundle import read_bundle, reports_of
from wgtune.store.format import reduced_namespace

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = {"wgtune": "0.1.0", "device": {"vendor": "acme", "device": "gpu9", "driver": "1.2", "backend": "vulkan"},
             "tuner": "default"}
OTHER_GPU = {**NAMESPACE, "device": {**NAMESPACE["device"], "device": "gpu10"}}
KEY = {"n": 262144, "dtype": "f32", "vec": 4}
FMA = known_sets()["fma"]
POSTGRES = os.environ.get("WGTUNE_COLLECTOR_TEST_DB", "")


def fresh_database(tmp_path: Path) -> VoteDatabase:
    """An empty collector database: SQLite in ``tmp_path``, or the PostgreSQL one named above, emptied."""
    if not POSTGRES:
        return VoteDatabase(tmp_path / "fleet.sqlite3")
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        for table in TABLES:
            connection.execute(f"DROP TABLE IF EXISTS {table}")
    return VoteDatabase(POSTGRES)


def confidence(p_faster: float, runner_up: str | None = None) -> dict:
    return {"runner_up": runner_up or FMA.candidates[0], "ratio": 1.2, "low": 1.1, "high": 1.3, "level": 0.95,
            "p_faster": p_faster, "samples": [10, 10]}


def report(winner: int = 2, *, key: dict = KEY, p_faster: float | None = 0.9, **fields) -> dict:
    return {"set": "fma", "key": key, "checksum": FMA.checksum, "winner": winner,
            "winner_name": FMA.candidates[winner], "confidence": None if p_faster is None else confidence(p_faster),
            **fields}


def body(*reports: dict, namespace: dict = NAMESPACE, reporter: str | None = None, **fields) -> dict:
    sent = {"format": REPORTS_FORMAT, "namespace": namespace, "reports": list(reports), **fields}
    return sent if reporter is None else {**sent, "reporter": reporter}


def install(number: int) -> str:
    """The install id of the ``number``th page (as web/collector.js makes them: 32 hex digits)."""
    return f"{number:032x}"


class Running:
    """A collector served on 127.0.0.1 for one test."""

    def __init__(self, tmp_path: Path, limiter: RateLimiter | None = None, origins: frozenset[str] | None = None):
        self.database = fresh_database(tmp_path)
        self.collector = Collector(self.database, limiter=limiter or RateLimiter(rate=1000.0, burst=1000),
                                   per_address=1000)
        self.server = make_collector_server(self.collector, "127.0.0.1", 0, origins=origins)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def request(self, method: str, path: str, data: bytes | None = None, headers: dict | None = None):
        """(status, headers, body) of one request; 4xx and 5xx are answers, not exceptions."""
        sent = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(sent, timeout=10) as answer:
                return answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    def post(self, obj: object, *, raw: bytes | None = None, content_type: str = "application/json"):
        data = raw if raw is not None else json.dumps(obj).encode()
        status, _headers, text = self.request("POST", "/v1/reports", data, {"Content-Type": content_type})
        return status, json.loads(text)

    def agree(self, *reports: dict, reporters: int = 2, namespace: dict = NAMESPACE) -> None:
        """``reporters`` distinct pages each report ``reports``."""
        for number in range(reporters):
            assert self.post(body(*reports, namespace=namespace, reporter=install(number)))[0] == 200

    def bundle(self) -> bytes:
        status, _headers, text = self.request("GET", "/v1/bundle")
        assert status == 200
        return text

    def entries(self) -> dict[tuple[str, str], object]:
        """The bundle's entries as read_bundle gives them, by (device name, key text)."""
        return {(namespace["device"]["device"], entry.key.to_json()): entry
                for namespace, entries in read_bundle(parse_json(self.bundle())) for entry in entries}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.database.close()


@pytest.fixture
def collector(tmp_path):
    running = Running(tmp_path)
    yield running
    running.close()


def test_a_report_is_counted_and_served_in_a_bundle_that_read_bundle_reads(collector):
    assert collector.post(body(report(2))) == (200, {"accepted": 1})
    [(namespace, [entry])] = read_bundle(parse_json(collector.bundle()))
    assert namespace in (NAMESPACE, reduced_namespace(NAMESPACE))  # bundles may write the reduced namespace
    assert (entry.set_name, entry.key.as_dict(), entry.checksum) == ("fma", KEY, FMA.checksum)
    assert (entry.winner, entry.winner_name) == (2, FMA.candidates[2])
    assert entry.confidence.p_faster == 0.9
    assert reports_of(entry) == 1  # one report: served, but unverified


def test_the_winner_with_most_agreeing_reports_is_served_not_the_last_one(collector):
    assert collector.post(body(report(2), reporter=install(1)))[0] == 200
    assert collector.post(body(report(2, p_faster=0.6), reporter=install(2)))[0] == 200
    assert collector.post(body(report(5, p_faster=0.99), reporter=install(3)))[0] == 200  # later, surer, alone
    entry = collector.entries()[("gpu9", json.dumps(KEY, sort_keys=True, separators=(",", ":")))]
    assert (entry.winner, reports_of(entry)) == (2, 2)
    assert entry.confidence.p_faster == 0.6  # the least sure agreeing report's claim


def test_a_tie_in_reports_goes_to_the_surer_winner_then_the_lower_index(collector):
    other = {"n": 1048576, "dtype": "f32", "vec": 4}
    third = {"n": 131072, "dtype": "f32", "vec": 1}
    assert collector.post(body(report(2, p_faster=0.7), report(4, key=other, p_faster=None),
                               report(6, key=third, p_faster=0.8), reporter=install(1)))[0] == 200
    assert collector.post(body(report(3, p_faster=0.95), report(1, key=other, p_faster=None),
                               report(6, key=third, p_faster=0.8), reporter=install(2)))[0] == 200
    served = {key: (entry.winner, reports_of(entry)) for (_, key), entry in collector.entries().items()}
    assert served == {'{"dtype":"f32","n":262144,"vec":4}': (3, 1), '{"dtype":"f32","n":1048576,"vec":4}': (1, 1),
                      '{"dtype":"f32","n":131072,"vec":1}': (6, 2)}


def test_each_device_namespace_keeps_its_own_winner(collector):
    collector.agree(report(2))
    assert collector.post(body(report(7), namespace=OTHER_GPU))[0] == 200
    winners = {device: entry.winner for (device, _), entry in collector.entries().items()}
    assert winners == {"gpu9": 2, "gpu10": 7}


def test_a_page_asks_for_its_own_device_s_winners_only(collector):
    collector.agree(report(2))
    assert collector.post(body(report(7), namespace=OTHER_GPU))[0] == 200
    query = urllib.parse.quote(json.dumps(OTHER_GPU))
    status, headers, text = collector.request("GET", f"/v1/bundle?namespace={query}")
    assert status == 200 and headers["ETag"]
    [(namespace, [entry])] = read_bundle(parse_json(text))
    assert namespace in (OTHER_GPU, reduced_namespace(OTHER_GPU)) and entry.winner == 7
    unknown = urllib.parse.quote(json.dumps({**OTHER_GPU, "tuner": "other"}))
    assert read_bundle(parse_json(collector.request("GET", f"/v1/bundle?namespace={unknown}")[2])) == []
    for bad in ("not-json", urllib.parse.quote(json.dumps({"device": "x"}))):
        status, _headers, text = collector.request("GET", f"/v1/bundle?namespace={bad}")
        assert status == 400 and "namespace" in json.loads(text)["error"]


FORGED = [
    ("unknown set", body({**report(), "set": "mine"}), 422, "unknown set 'mine'"),
    ("unknown candidate", body({**report(), "winner": len(FMA.candidates)}), 422, "has no candidate"),
    ("misnamed candidate", body({**report(2), "winner_name": FMA.candidates[3]}), 422, "not 'f32_"),
    ("wrong checksum", body({**report(), "checksum": "0" * 32}), 422, "not its current candidate list"),
    ("forged runner-up", body({**report(), "confidence": confidence(0.9, "evil")}), 422, "confidence.runner_up"),
    ("a field about the user", body(report(), user_agent="Mozilla"), 400, "['user_agent'] not accepted"),
    ("a report field too many", body(report(ip="10.0.0.1")), 400, "['ip'] not accepted"),
    ("a namespace field too many", body(report(), namespace={**NAMESPACE, "city": "Paris"}), 400, "city"),
    ("a device field too many", body(report(), namespace={**NAMESPACE, "device": {**NAMESPACE["device"], "gpu_id": 1}}),
     400, "namespace.device"),
    ("a long name", body({**report(), "set": "x" * 300}), 400, "at most 256"),
    ("too many key fields", body(report(key={f"k{i}": i for i in range(17)})), 400, "at most 16"),
    ("no reports", body(), 400, "1 to 32"),
    ("a wrong format", {**body(report()), "format": "other/1"}, 400, "format must be"),
    ("a probability above 1", body(report(p_faster=1.5)), 400, "probability"),
]


@pytest.mark.parametrize(("what", "forged", "status", "reason"), FORGED, ids=[case[0] for case in FORGED])
def test_a_forged_report_is_refused_with_its_reason_and_changes_nothing(collector, what, forged, status, reason):
    collector.agree(report(2))
    before = collector.bundle()
    answer, refusal = collector.post(forged)
    assert answer == status, refusal
    assert reason in refusal["error"]
    assert collector.bundle() == before
    assert collector.database.counts() == (2, 1)


def test_one_bad_report_in_a_batch_refuses_the_whole_batch(collector):
    other = {**KEY, "n": 1 << 20}
    answer, refusal = collector.post(body(report(2), report(3, key=other), {**report(4), "checksum": "stale"}))
    assert answer == 422 and refusal["error"].startswith("report 2:")
    assert collector.database.counts() == (0, 0)


def test_malformed_json_an_oversize_body_and_a_wrong_type_are_refused(collector):
    assert collector.post(None, raw=b'{"format": "wgtune.reports/1", "namespace": ')[0] == 400
    assert collector.post(None, raw=b"[" * 100 + b"]" * 100)[0] == 400  # nested too deep to be a report
    status, text = collector.post(None, raw=b'{"a": 1, "a": 2}')  # a key given twice, said so
    assert status == 400 and "the key 'a' twice" in text["error"]
    big = json.dumps(body(report(key={"n": 1, "pad": "x" * 200}))).encode() + b" " * MAX_BODY
    status, refusal = collector.post(None, raw=big)
    assert status == 413 and str(MAX_BODY) in refusal["error"]
    status, refusal = collector.post(body(report()), content_type="text/plain")
    assert status == 415
    assert collector.database.counts() == (0, 0)


def test_a_flood_gets_429_and_counts_nothing_past_the_bucket(tmp_path):
    running = Running(tmp_path, limiter=RateLimiter(rate=0.01, burst=3))
    try:
        answers = [running.post(body(report(2)))[0] for _ in range(12)]
        assert answers[:3] == [200, 200, 200] and set(answers[3:]) == {429}
        assert running.database.counts() == (1, 1)  # one reporter: its one ballot, cast again within the burst
        status, headers, text = running.request("POST", "/v1/reports", json.dumps(body(report(2))).encode(),
                                                 {"Content-Type": "application/json"})
        assert status == 429 and int(headers["Retry-After"]) >= 1 and "too many" in json.loads(text)["error"]
        assert running.request("GET", "/v1/bundle")[0] == 200  # reading is not limited
    finally:
        running.close()


def test_the_token_bucket_refills_at_its_rate_and_forgets_idle_clients(tmp_path):
    database = fresh_database(tmp_path)
    take = lambda address, now, cost=1: database.take(address, cost, rate=2.0, burst=2, now=now)  # noqa: E731
    assert [take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.5]
    assert take("a", 0.5) == 0.0  # one token back after half a second
    assert take("b", 0.5) == 0.0  # another address has its own bucket
    assert take("a", 0.5, cost=3) == float("inf")  # more than a burst: never
    take("c", 10.0)  # later: the idle buckets, full again, are forgotten
    with database._transaction() as cursor:
        cursor.execute("SELECT COUNT(*) FROM buckets")
        assert cursor.fetchone()[0] == 1


def test_the_bundle_has_an_etag_and_a_conditional_get_gets_304(collector):
    collector.post(body(report(2)))
    status, headers, _ = collector.request("GET", "/v1/bundle")
    assert status == 200 and headers["Cache-Control"] == "no-cache" and headers["ETag"]
    status, _, empty = collector.request("GET", "/v1/bundle", headers={"If-None-Match": headers["ETag"]})
    assert (status, empty) == (304, b"")
    collector.post(body(report(2), reporter=install(2)))  # a second reporter agrees: the bundle changes
    status, changed, _ = collector.request("GET", "/v1/bundle", headers={"If-None-Match": headers["ETag"]})
    assert status == 200 and changed["ETag"] != headers["ETag"]


def test_pages_of_another_origin_may_post_after_a_preflight(collector):
    status, headers, _ = collector.request("OPTIONS", "/v1/reports", headers={
        "Origin": "http://127.0.0.1:8000", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert status == 204 and headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in headers["Access-Control-Allow-Methods"] and headers["Access-Control-Allow-Headers"]
    status, headers, _ = collector.request("GET", "/v1/bundle", headers={"Origin": "http://127.0.0.1:8000"})
    assert headers["Access-Control-Allow-Origin"] == "*"


def test_with_origins_listed_only_those_pages_may_post(tmp_path):
    running = Running(tmp_path, origins=frozenset({"http://app.example"}))
    try:
        data = json.dumps(body(report(2))).encode()
        ok = running.request("POST", "/v1/reports", data, {"Content-Type": "application/json",
                                                           "Origin": "http://app.example"})
        assert ok[0] == 200 and ok[1]["Access-Control-Allow-Origin"] == "http://app.example"
        refused = running.request("POST", "/v1/reports", data, {"Content-Type": "application/json",
                                                                "Origin": "http://evil.example"})
        assert refused[0] == 403 and running.database.counts() == (1, 1)
    finally:
        running.close()


def test_winners_of_an_older_candidate_list_are_kept_but_not_served(tmp_path):
    database = fresh_database(tmp_path)
    old = Collector(database, known={"fma": KnownSet("fma", "old-checksum", FMA.candidates)})
    old.post_reports(json.dumps(body({**report(2), "checksum": "old-checksum"})).encode())
    assert read_bundle(parse_json(old.bundle()))[0][1][0].checksum == "old-checksum"
    current = Collector(database)  # the collector restarted with today's sets
    assert read_bundle(parse_json(current.bundle())) == []
    assert database.counts() == (1, 1)


def test_an_unchanged_collector_serves_the_same_bytes_after_a_restart(tmp_path):
    database = fresh_database(tmp_path)
    for number in range(2):
        Collector(database).post_reports(json.dumps(body(report(2), reporter=install(number))).encode())
    first = Collector(database).bundle()
    assert Collector(database).bundle() == first  # "built" is the last change's time, not now


def test_the_served_winner_rule_on_tallies():
    def tally(winner: int, reports: int, p_sum: float, p_count: int) -> Tally:
        return Tally("ns", "fma", "k", "c", winner, f"w{winner}", reports, p_sum, p_count, None, 0.0)

    [served] = served_winners([tally(1, 3, 1.5, 3), tally(2, 2, 2.0, 2)])
    assert (served.tally.winner, served.reports, served.total, served.verified) == (1, 3, 5, True)
    [served] = served_winners([tally(1, 1, 0.0, 0), tally(2, 1, 0.6, 1)])  # 0.5 for no confidence vs 0.6
    assert (served.tally.winner, served.verified) == (2, False)
    [served] = served_winners([tally(4, 1, 0.7, 1), tally(3, 1, 0.7, 1)])
    assert served.tally.winner == 3


def test_the_known_sets_are_the_kernels_sets_with_their_current_checksums():
    from wgtune.kernels import fma_set, matmul_f16_set, matmul_set

    known = known_sets()
    assert set(known) == {"matmul", "matmul_f16", "fma", "row_sum", "row_max"}
    for tunables in (fma_set(), matmul_set(), matmul_f16_set()):
        assert known[tunables.name].checksum == tunables.checksum
        assert known[tunables.name].candidates == tuple(kernel.name for kernel in tunables.candidates)


def test_every_key_a_registered_family_makes_on_fresh_sizes_is_in_its_learnt_domain():
    """The collector learns each family's keys from sampled sizes: a key a real call makes (fma
    on N = 4098 holds vec 2) must not be refused for a residue the samples missed."""
    import itertools
    import random

    from wgtune.kernels.families import FAMILIES

    known, rng = known_sets(), random.Random(20261205)
    sizes = [4098, 2, 5, 1030, 8191] + [rng.randrange(1, 1 << 20) for _ in range(4)]
    for family in FAMILIES:
        tunables, domain = family.build(), known[family.name].key_domain
        for size in itertools.islice(itertools.product(sizes, repeat=len(family.dims)), 300):
            key = tunables.key(family.key_args(size)).as_dict()
            assert domain.check(key) is None, (family.name, size, key, domain.check(key))


def test_wgtune_collect_serves_until_stopped_and_refuses_a_bad_rate(tmp_path):
    command = [sys.executable, "-c", "from wgtune.cli import main; raise SystemExit(main())", "collect",
               "--db", str(tmp_path / "fleet.sqlite3"), "--port", "0"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url, line
        with urllib.request.urlopen(url.group(0) + "/v1/health", timeout=10) as answer:
            health = json.loads(answer.read())
        assert health["ok"] and health["reports"] == 0 and "fma" in health["sets"]
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()
    bad = subprocess.run([*command[:-2], "--rate", "0"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--rate" in bad.stderr
    bad = subprocess.run([*command[:-2], "--origin", "notaurl"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--origin 'notaurl': give a page origin as a browser sends it" in bad.stderr


def test_a_database_that_fails_answers_503_and_the_collector_keeps_serving(collector):
    collector.database._connection.close()  # the database goes away under the running server
    status, refusal = collector.post(body(report(2)))
    assert status == 503 and "nothing was counted" in refusal["error"]
    status, _headers, text = collector.request("GET", "/v1/health")  # an answer, not a dropped connection:
    answer = json.loads(text)  # 503 on SQLite; PostgreSQL's connection is opened again after a failure
    assert (status, "database failed" in answer.get("error", "")) in ((503, True), (200, False))
