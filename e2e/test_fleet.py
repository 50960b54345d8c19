"""Winners shared across a fleet, end to end: three fresh browser profiles tune the same fma key and
report their winners to a collector on 127.0.0.1 (``?collector=URL``); the collector's bundle
serves the agreed winner; a fourth fresh profile takes it from the collector and gets a Hit without
tuning; forged reports (an unknown candidate, a stale checksum, a flood) leave the bundle as it was.

The page is served by ``wgtune serve`` (the ``server`` fixture) and the collector on another port:
another origin, so the reports cross it by CORS, as a web app's would.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from harness import launch, open_page, run_winner

from wgtune.backends.collector import REPORTS_FORMAT, Collector, RateLimiter
from wgtune.backends.collector_db import VoteDatabase
from wgtune.cli.collect import make_collector_server
from wgtune.store.bounded_json import parse_json
from wgtune.store.bundle import read_bundle, reports_of

# An fma key: seconds to tune on SwiftShader. Its best candidates are near-tied there, so tunes of
# it may name different winners: the fleet then needs more reports before two agree (see below).
SET, LABEL, N = "fma", "1048576", 1048576
OTHER_LABEL = "262144"  # a key reported once, by hand: unverified
TUNE_MS = 240_000  # seconds on SwiftShader with idle cores; the limit only catches a hang
TABS, MAX_TABS = 3, 6


@pytest.fixture(scope="module")
def collector(tmp_path_factory):
    database = VoteDatabase(tmp_path_factory.mktemp("collector") / "fleet.sqlite3")
    # Every tab posts from 127.0.0.1: each profile is a reporter by its install id, and the one
    # address may count as all of them (per_address); two agreeing reporters verify here (the
    # page reads that from the bundle's X-Wgtune-Verified-Reporters), to keep the tabs few.
    running = Collector(database, limiter=RateLimiter(rate=1e-6, burst=MAX_TABS + 3), min_reporters=2,
                        per_address=MAX_TABS)
    server = make_collector_server(running, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    running.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield running
    server.shutdown()
    server.server_close()
    database.close()


def get_bundle(url: str) -> bytes:
    with urllib.request.urlopen(f"{url}/v1/bundle", timeout=10) as answer:
        return answer.read()


def post(url: str, body: dict) -> int:
    sent = urllib.request.Request(f"{url}/v1/reports", data=json.dumps(body).encode(), method="POST",
                                  headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(sent, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def tune_and_report(playwright, server_url: str, collector_url: str, profile, *, again: bool = False) -> None:
    """A fresh profile opens the page, turns sharing on from JavaScript (sending only: taking the
    fleet's winners, it would get a Hit once two tabs agreed, and tune nothing), tunes the key,
    and its report reaches the collector. ``again``: then it tunes the key once more, which
    sends nothing (one page's winner must not look like two tabs agreeing)."""
    context = launch(playwright, profile)
    try:
        page, log = open_page(context, server_url)
        page.evaluate("(url) => window.wgtune.shareWinners(url, {receive: false})"
                      ".then((sharing) => { window.wgtune.sharing = sharing; })", collector_url)
        assert page.evaluate(f"window.wgtune.check({SET!r}, {LABEL!r}).state") == "Pending"
        assert page.evaluate(f"window.wgtune.settle({SET!r}, {LABEL!r}, {{timeout: {TUNE_MS / 1000}}})"
                             ".then((s) => s.state)") == "Hit"
        page.wait_for_function("window.wgtune.sharing.sent === 1", timeout=30_000)
        assert page.evaluate("window.wgtune.sharing.error") is None
        line = page.locator("#sharing").inner_text()
        assert f"Sharing winners with {collector_url}" in line and "1 winner(s) of this page sent" in line, line
        if again:
            page.evaluate("window.wgtune.clearCache()")
            assert page.evaluate(f"window.wgtune.check({SET!r}, {LABEL!r}).state") == "Pending"
            page.evaluate(f"window.wgtune.settle({SET!r}, {LABEL!r}, {{timeout: {TUNE_MS / 1000}}})")
            page.wait_for_function("window.wgtune.records().length === 2")
            page.wait_for_timeout(500)  # a report would be posted at once
            assert page.evaluate("window.wgtune.sharing.sent") == 1
        assert log.errors == []
    finally:
        context.close()


def served(url: str) -> tuple[dict, dict]:
    """The bundle's namespace (the one device here) and its entries by key label's n."""
    [(namespace, entries)] = read_bundle(parse_json(get_bundle(url)))
    return namespace, {entry.key.as_dict()["n"]: entry for entry in entries}


@pytest.mark.slow  # minutes on SwiftShader: four fresh browser profiles, each loading the page and tuning
def test_three_tabs_share_a_winner_and_a_fresh_one_starts_from_it(playwright, server, collector, tmp_path,
                                                                     artifacts):
    # Three fresh tabs tune the key and report. SwiftShader's near-tied candidates may make them
    # disagree (three winners, one report each: nothing verified); a fleet then waits for more
    # reports, and so does this test, up to MAX_TABS: two agreeing reports verify the winner.
    tabs = 0
    while tabs < TABS or (reports_of(served(collector.url)[1][N]) < collector.min_reporters and tabs < MAX_TABS):
        tune_and_report(playwright, server.url, collector.url, tmp_path / f"profile-{tabs}", again=tabs == 0)
        tabs += 1
    namespace, entries = served(collector.url)
    entry = entries[N]
    assert entry.set_name == SET
    assert reports_of(entry) >= 2, f"{tabs} tabs' winners never agreed: {collector.database.tallies()}"
    assert collector.database.counts()[0] == tabs  # one vote per tab (its install id), each counted once

    # One more key, reported once (by hand): served unverified, which no page takes untuned.
    known = collector.known[SET]
    lone = {"set": SET, "key": {**entry.key.as_dict(), "n": int(OTHER_LABEL)}, "checksum": known.checksum,
            "winner": 0, "winner_name": known.candidates[0], "confidence": None}
    assert post(collector.url, {"format": REPORTS_FORMAT, "namespace": namespace, "reports": [lone]}) == 200
    bundle = get_bundle(collector.url)
    assert reports_of(served(collector.url)[1][int(OTHER_LABEL)]) == 1

    # Forged reports: each refused with its reason. The flood meets an empty bucket (the burst
    # lowered to the two forged reports: the database's bucket holds at most that) and is not read.
    collector.limiter = RateLimiter(rate=1e-6, burst=2)
    honest = {"set": SET, "key": entry.key.as_dict(), "checksum": known.checksum, "winner": entry.winner,
              "winner_name": entry.winner_name, "confidence": None}
    poison = next(index for index in range(len(known.candidates)) if index != entry.winner)
    forged = [
        {**honest, "winner": len(known.candidates), "winner_name": "fma_evil"},  # no such candidate
        {**honest, "checksum": "0" * 32},  # not the current candidate list
    ]
    assert [post(collector.url, {"format": REPORTS_FORMAT, "namespace": namespace, "reports": [report]})
            for report in forged] == [422, 422]
    flood = {**honest, "winner": poison, "winner_name": known.candidates[poison]}
    answers = [post(collector.url, {"format": REPORTS_FORMAT, "namespace": namespace, "reports": [flood] * 4})
               for _ in range(50)]
    assert set(answers) == {429}
    assert get_bundle(collector.url) == bundle
    assert collector.database.counts()[0] == tabs + 1

    # A fourth, fresh profile: the collector's verified winner is checked once on this GPU (no
    # tune: nothing timed, no record), then a Hit; the unverified one is left for this page to tune.
    context = launch(playwright, tmp_path / "profile-fresh")
    try:
        page, log = open_page(context, server.url, f"?collector={collector.url}")
        page.wait_for_function("window.wgtune.sharing !== undefined")
        page.evaluate("() => { window.events = []; window.wgtune.on((e) => window.events.push(e)); }")
        sharing = page.evaluate("({seeded: window.wgtune.sharing.seeded, unverified: window.wgtune.sharing.unverified,"
                                " error: window.wgtune.sharing.error})")
        assert sharing == {"seeded": 1, "unverified": 1, "error": None}
        states = {key["key"]: key["state"] for s in page.evaluate("window.wgtune.catalogue().sets")
                  if s["name"] == SET for key in s["keys"]}
        assert states[OTHER_LABEL] == "Miss"  # not seeded: a tune here would re-verify it
        state = page.evaluate(f"window.wgtune.check({SET!r}, {LABEL!r})")
        assert state["state"] in ("Pending", "Hit"), state  # Pending while the collector's winner is checked here
        state = page.evaluate(f"window.wgtune.settle({SET!r}, {LABEL!r})")
        assert (state["state"], state["winner"]) == ("Hit", entry.winner_name)
        # The first calls may run the fallback while the winner compiles (as for a stored winner
        # after a reload); the winner runs once compiled, and still nothing is tuned.
        ran = run_winner(page, SET, LABEL)
        assert ran is not None and ran["ran"] == entry.winner_name
        page.wait_for_timeout(300)  # events arrive as microtasks: none may be a tune's (the check is no tune)
        assert page.evaluate("window.events.filter((e) => ['started', 'record'].includes(e.type))") == []
        assert page.evaluate("window.wgtune.records()") == []
        line = page.locator("#sharing").inner_text()
        assert f"Sharing winners with {collector.url}" in line
        assert "1 verified winner(s)" in line and "1 unverified left to tune here" in line
        page.screenshot(path=str(artifacts / "page-fleet-shared.png"), full_page=False)
        assert log.errors == []
    finally:
        context.close()
    assert get_bundle(collector.url) == bundle  # the fourth tab tuned nothing, so reported nothing
