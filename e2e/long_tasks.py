"""Watching the page's main thread while it imports or lists many stored winners (issue 28):
shared by ``e2e/test_large_import.py`` and ``bench/large_import.py``.

:data:`OBSERVED` first proves that long tasks are seen in this browser (a deliberate busy task
of 400 ms must be reported), so that "no long task" can never pass by seeing nothing; then
:data:`WATCH` runs one of the API's calls under a ``longtask`` observer and a heartbeat timer,
whose ticks count the other tasks the page ran meanwhile (one long task lets almost none run).
:func:`export_text` is an export of many winners as ``wgtune cache export`` writes it.
"""

from __future__ import annotations

import json

from wgtune.key import Key
from wgtune.store.format import DOCUMENT_FORMAT, EXPORT_FORMAT, StoredEntry, check_namespace

# The observer must report a task this long, busy on purpose, before any "no long task" counts.
PROBE_MS = 400

OBSERVED = """async (probeMs) => {
  const seen = [];
  const observer = new PerformanceObserver((list) => seen.push(...list.getEntries().map((e) => e.duration)));
  observer.observe({ type: "longtask" });
  await new Promise((resolve) => setTimeout(() => {
    const until = performance.now() + probeMs;
    while (performance.now() < until);
    resolve();
  }, 0));
  await new Promise((resolve) => setTimeout(resolve, 300)); // entries are delivered after the task
  observer.disconnect();
  return seen;
}"""

# Runs `window.wgtune[call](...args)` (args: strings, or "@text" for the fetched export) and
# answers what it resolved to (a count, or a summary of a document or text), its long tasks as
# [start after the call, duration, whose: "self" or another context's] and the heartbeat's ticks.
# Timers are clamped to >= 4 ms when nested, so a tick every 10 ms is a fair count of the chances
# the page had to run something else.
WATCH = """async ([call, args]) => {
  const tasks = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) tasks.push([entry.startTime - started, entry.duration, entry.name]);
  });
  const started = performance.now();
  observer.observe({ type: "longtask" });
  let ticks = 0;
  let ticking = true;
  const tick = () => { ticks += 1; if (ticking) setTimeout(tick, 10); };
  setTimeout(tick, 10);
  const result = await window.wgtune[call](...args.map((arg) => arg === "@text" ? window.__exportText : arg));
  const ms = performance.now() - started;
  ticking = false;
  await new Promise((resolve) => setTimeout(resolve, 300));
  observer.disconnect();
  const summary = typeof result === "string" ? { chars: result.length, head: result.slice(0, 60) }
    : result && typeof result === "object"
      ? { namespaces: result.namespaces?.length,
          entries: (result.namespaces ?? []).reduce((n, d) => n + d.entries.length, 0) }
      : result;
  return { result: summary, ms, ticks, tasks, longest: Math.max(0, ...tasks.map(([, duration]) => duration)) };
}"""

# The page's device namespace as the store keeps it.
NAMESPACE = """() => JSON.parse(window.wgtune.pyodide.runPython(
  "import json; from js import window; json.dumps(window.wgtune.session.namespace)"))"""

FETCH_TEXT = """async (url) => {
  window.__exportText = await (await fetch(url)).text();
  return window.__exportText.length;
}"""


def entry(number: int) -> StoredEntry:
    """A winner of a matmul-like key with two candidates' medians: ~170 bytes, as the issue's
    17 MB of 100k winners."""
    results = tuple({"name": f"c{c}", "index": c, "median": 1e-3 * (c + 1), "samples": [1e-3 * (c + 1)]}
                    for c in range(2))
    return StoredEntry(f"set{number % 7}", Key({"m": number, "n": 64}), "c0ffee", 0, "c0", results,
                       policy="adaptive")


def export_text(namespace: dict, count: int, first: int = 0) -> str:
    """``count`` winners of ``namespace`` as one ``wgtune.export/1`` document, an entry a line
    (as ``wgtune cache export`` writes them)."""
    head = json.dumps({"format": DOCUMENT_FORMAT, **check_namespace(namespace)})[:-1]
    lines = ",\n".join(json.dumps(entry(n).to_json(), separators=(",", ":")) for n in range(first, first + count))
    return f'{{"format": "{EXPORT_FORMAT}", "namespaces": [\n{head}, "entries": [\n{lines}\n]}}\n]}}\n'
