"""Bundles in the page (issue 15): a browser tunes a key, its winners become a bundle, and a fresh
browser that loads the bundle with ``?bundle=`` gets a Hit for the key with no tuning: the winner is
checked once on this GPU before it serves (issue 25: run beside two other candidates and compared,
no candidate timed), so its first check answers Pending, then Hit.

The bundle is built from the page's own export: SwiftShader's device identity in Chromium is not
lavapipe's, so native winners would not be this GPU's. It is served on the page's origin through
Playwright's routing, so that the test writes nothing into ``web/``.
"""

from __future__ import annotations

import pytest
from harness import launch, open_page, run_winner

from wgtune.store.bundle import build_bundle, bundle_text
from wgtune.store.format import decode_export

BUNDLE_PATH = "test-winners.bundle.json"
SET, KEY = "fma", "262144"


@pytest.fixture
def fresh_context(playwright, tmp_path):
    """A browser on a new profile: an empty IndexedDB, no winner stored."""
    context = launch(playwright, tmp_path / "fresh-profile")
    yield context
    context.close()


def test_a_fresh_browser_that_loads_a_bundle_gets_a_hit_with_no_tuning(browser, server, fresh_context, artifacts):
    tuning, log = browser.open()
    if tuning.evaluate("([s, k]) => window.wgtune.check(s, k)", [SET, KEY])["state"] != "Hit":
        tuned = tuning.evaluate("([s, k]) => window.wgtune.settle(s, k)", [SET, KEY])
        assert tuned["state"] == "Hit", tuned
    winner = tuning.evaluate("([s, k]) => window.wgtune.check(s, k)", [SET, KEY])["winner"]
    tuning.evaluate("window.wgtune.flush()")
    bundle = build_bundle(decode_export(tuning.evaluate("window.wgtune.cache()")))
    assert log.errors == []
    tuning.close()

    fetched = []

    def serve_bundle(route):
        fetched.append(route.request.url)
        route.fulfill(status=200, content_type="application/json", body=bundle_text(bundle))

    fresh_context.route(f"{server.url}{BUNDLE_PATH}", serve_bundle)
    page, fresh_log = open_page(fresh_context, server.url, f"?bundle={BUNDLE_PATH}")
    assert fetched == [f"{server.url}{BUNDLE_PATH}"]
    started = page.evaluate("""() => {
      window.startedTunes = [];
      window.wgtune.on((event) => { if (event.type === "started") window.startedTunes.push(event); });
      return window.wgtune.records().length;
    }""")
    assert started == 0
    answer = page.evaluate("([s, k]) => window.wgtune.check(s, k)", [SET, KEY])
    assert answer["state"] in ("Pending", "Hit"), answer  # Pending while the bundle's winner is checked here
    settled = page.evaluate("([s, k]) => window.wgtune.settle(s, k)", [SET, KEY])
    assert settled["state"] == "Hit" and settled["winner"] == winner, settled
    # The first call may run the fallback while the winner compiles on the event loop (as for a
    # stored winner after a reload); the winner runs once compiled, still with no tune.
    ran = run_winner(page, SET, KEY)
    assert ran is not None and ran["ran"] == winner and ran["state"] == "Hit"
    page.wait_for_timeout(200)  # events are delivered as microtasks: give any a chance to arrive
    assert page.evaluate("[window.startedTunes.length, window.wgtune.records().length]") == [0, 0]
    status = page.locator("#status").inner_text()
    assert "winner(s) for this GPU from the bundle test-winners.bundle.json" in status, status
    page.wait_for_function("([s, k]) => document.querySelector(`tr[data-key='${s}/${k}'] td.state`)"
                           "?.dataset.state === 'Hit'", arg=[SET, KEY], timeout=5000)  # the keys panel says so
    page.screenshot(path=str(artifacts / "page-bundle-seeded.png"), full_page=True)
    assert fresh_log.errors == []
    page.close()


def test_load_bundle_refuses_a_bad_bundle_or_another_origin_and_seeds_nothing_for_an_unknown_gpu(browser):
    page, log = browser.open()
    answers = page.evaluate("""async () => {
      const attempt = async (source) => {
        try { return await window.wgtune.loadBundle(source); } catch (error) { return error.message; }
      };
      const other = { format: "wgtune.bundle/1", built: "2026-12-01T02:30:00Z", wgtune: window.wgtune.version,
        namespaces: [{ wgtune: window.wgtune.version, tuner: "default", device: { vendor: "acme", device: "X9" },
          entries: [{ table: "fma", key: { n: 262144 }, checksum: "c", winner: 0, winner_name: "a" }] }] };
      return {
        version: await attempt({ ...other, format: "wgtune.bundle/2" }),
        entry: await attempt({ ...other, namespaces: [{ ...other.namespaces[0], entries: [{ table: "fma" }] }] }),
        origin: await attempt("https://example.com/winners.json"),
        missing: await attempt("no-such-bundle.json"),
        unknown: await attempt(other),
      };
    }""")
    assert "bundle version '2' is not one this wgtune" in answers["version"]
    assert "entry 0 of namespace 0 of the bundle: entry lacks the field 'key'" in answers["entry"]
    assert "is on https://example.com, not on this page's origin" in answers["origin"]
    assert "/no-such-bundle.json answered 404" in answers["missing"]
    assert answers["unknown"] == {"seeded": 0, "entries": 1, "namespaces": 1}
    # The failed fetch of a missing bundle is the only console error (Chromium logs every 404).
    assert all("404" in error for error in log.errors), log.errors
    page.close()
