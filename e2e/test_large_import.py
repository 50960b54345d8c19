"""Importing and listing 100k stored winners in the page (issue 28): many short tasks, not one long one.

Importing an export of 100k winners was one task of 11-12 s, and ``wgtune.cache()`` afterwards one
of 13 s. Now both work a slice at a time (``backends/idb_transfer.py``). The test first proves
that its long-task observer works (a deliberate busy task of 400 ms is reported), then imports,
lists and exports under the observer and a heartbeat timer, whose ticks count the other tasks the
page ran meanwhile. A second tab open during the import reads its store again once the import is
written (``coordinator.announce_replaced``); a bad document imported after it changes nothing.

A task's length in milliseconds is the machine's as much as the page's: on this machine's two
shared cores a task of 1013 ms was seen to run 5 ms of it, its main thread waiting for a CPU the
rest. So the test holds each call to the issue's target, no task over :data:`TARGET_MS`, in what
the machine cannot stretch: the time the page's main thread was on a CPU within each long task
(``long_tasks.MainThreadClock``: Linux's schedstat of the renderer, sampled alongside). Its probe
proves the clock reads that thread: the probe's busy task was on a CPU or waiting for one for at
least half of it. Where there is no schedstat (not Linux), the calls are held to the shape
slicing gives at any speed, :data:`SHARE`: no task longer than 2% of the call (the old import was
one task of all of it; any one phase left whole, the parse, the write or the reread, is 5-50% of
it). ``python bench/large_import.py`` prints the wall-clock figures (``docs/development.md``).
"""

from __future__ import annotations

import json

import pytest
from long_tasks import FETCH_TEXT, NAMESPACE, OBSERVED, PROBE_MS, WATCH, MainThreadClock, export_text, on_cpu

from wgtune.key import Key
from wgtune.store.format import StoredEntry

pytestmark = pytest.mark.slow  # minutes on SwiftShader: 100k winners in, out twice, and a page load

ENTRIES = 100_000
TARGET_MS = 200
SHARE = 0.02
LOAD_MS = 300_000
EXPORT_PATH = "test-large-export.json"

# The demo's fma key as the store keys it, and its set's checksum: an imported winner for it (its
# first candidate) makes the key a Hit in a tab whose store took the import.
FMA_KEY = """() => JSON.parse(window.wgtune.pyodide.runPython(`
import json
from js import window
problem = window.wgtune.session.problems[("fma", "262144")]
json.dumps([problem.key.to_json(), problem.tunables.checksum])`))"""
KEY_STATE = """() => window.wgtune.catalogue().sets.find((s) => s.name === "fma").keys
  .find((k) => k.key === "262144").state"""


def opened(browser):
    """A tab on the page once it is ready; the first load of a profile starts Python in a worker,
    which a busy machine takes past the harness's minute over."""
    page, log = browser.open(wait=False)
    page.wait_for_function("window.wgtune && window.wgtune.ready", timeout=LOAD_MS)
    page.evaluate("window.wgtune.ready.then(() => true)")
    return page, log


def test_a_hundred_thousand_winners_import_and_list_with_no_long_task(browser, server):
    page, log = opened(browser)
    other, other_log = opened(browser)
    assert other.evaluate(KEY_STATE) == "Miss"
    first = page.evaluate("window.wgtune.catalogue().sets.find((s) => s.name === 'fma').candidates[0]")
    key, checksum = page.evaluate(FMA_KEY)
    fma = StoredEntry("fma", Key(json.loads(key)), checksum, 0, first,
                      ({"name": first, "index": 0, "median": 1e-3, "samples": [1e-3]},))
    text = export_text(page.evaluate(NAMESPACE), ENTRIES - 1)
    text = text.replace('"entries": [\n', f'"entries": [\n{json.dumps(fma.to_json())},\n', 1)
    browser.context.route(f"{server.url}{EXPORT_PATH}", lambda route: route.fulfill(
        status=200, content_type="application/json", body=text))
    assert page.evaluate(FETCH_TEXT, f"{server.url}{EXPORT_PATH}") == len(text)

    clock = MainThreadClock(browser.profile)
    with clock:
        seen = page.evaluate(OBSERVED, PROBE_MS)
    probes = [task for task in seen if task[1] >= PROBE_MS - 5]
    assert probes, f"the {PROBE_MS} ms probe was not observed: {seen}"
    if clock.available:
        ran, waited = on_cpu(clock, *probes[0])
        assert ran + waited >= probes[0][1] / 2, (probes[0], ran, waited)  # the clock reads the page's thread

    with clock:
        imported = page.evaluate(WATCH, ["importCache", ["@text"]])
    print(f"\nimport of {ENTRIES}: {imported['ms'] / 1000:.1f} s, {imported['ticks']} heartbeat ticks")
    assert imported["result"] == ENTRIES
    held_to_the_target(clock, "importCache", imported)
    assert imported["ticks"] >= 100  # the page ran its timer all along, not once at the end
    other.wait_for_function(f"({KEY_STATE})() === 'Hit'", timeout=600_000)  # it read its store again

    for call in ("cache", "exportCache"):
        with clock:
            listed = page.evaluate(WATCH, [call, []])
        print(f"{call}: {listed['ms'] / 1000:.1f} s, {listed['ticks']} heartbeat ticks")
        held_to_the_target(clock, call, listed)
        assert listed["ticks"] >= 100, call
        if call == "cache":
            assert listed["result"] == {"namespaces": 1, "entries": ENTRIES}
        else:
            assert listed["result"]["chars"] >= len(text) - 1000  # the same entries, laid out alike

    # The first bulk entry names no result (replaced in the page: 25 MB through the driver is a minute here).
    failed = page.evaluate("""() => window.wgtune.importCache(window.__exportText.replace(
      '"winner_name":"c0"', '"winner_name":"c9"')).then(() => 'imported', (e) => e.message)""")
    assert failed.endswith("entry 1: winner 0 is 'c0', not 'c9'"), failed
    assert page.evaluate("window.wgtune.storedPage()")["total"] == ENTRIES  # nothing of it was written

    page.evaluate("window.wgtune.clearCache({all: true})")  # the profile as the module found it
    assert log.errors == [] and other_log.errors == []
    page.close()
    other.close()


def held_to_the_target(clock: MainThreadClock, call: str, answer: dict) -> None:
    """No task of the call worked more than TARGET_MS on the main thread (or, without a clock, no
    task was longer than SHARE of the call); each long task printed with what it ran and waited."""
    tasks = [(duration, *on_cpu(clock, answer["at"] + start, duration)) for start, duration, _whose in answer["tasks"]]
    on, off = clock.totals()
    print(f"  {call}: main thread on a CPU {on / 1000:.1f} s, waiting for one {off / 1000:.1f} s; "
          f"longest task {answer['longest']:.0f} ms; tasks over 50 ms (ms long, on a CPU, waiting): "
          f"{sorted((round(t), round(r), round(w)) for t, r, w in tasks)[::-1][:6]}")
    if clock.available:
        assert all(ran < TARGET_MS for _duration, ran, _waited in tasks), (call, sorted(tasks, reverse=True)[:5])
    else:
        assert answer["longest"] < SHARE * answer["ms"], (call, sorted(answer["tasks"], key=lambda task: -task[1])[:5])
