"""Watching the page's main thread while it imports or lists many stored winners (issue 28):
shared by ``e2e/test_large_import.py`` and ``bench/large_import.py``.

:data:`OBSERVED` first proves that long tasks are seen in this browser (a deliberate busy task
of 400 ms must be reported), so that "no long task" can never pass by seeing nothing; then
:data:`WATCH` runs one of the API's calls under a ``longtask`` observer and a heartbeat timer,
whose ticks count the other tasks the page ran meanwhile (one long task lets almost none run).
:func:`export_text` is an export of many winners as ``wgtune cache export`` writes it.

A long task's length is the machine's as much as the page's: on two shared cores the renderer's
main thread was seen to wait for a CPU 39 of 58 s of an import, and a "task" of 1013 ms ran 5 ms
of it. :class:`MainThreadClock` reads how long the main thread of each renderer was on a CPU
(Linux ``/proc/PID/schedstat``, sampled every few milliseconds) so that :func:`on_cpu` can tell
what a long task spent working from what it spent waiting: the page's own work, sliced or not,
is what the first is, at any load.
"""

from __future__ import annotations

import bisect
import glob
import json
import threading
import time
from pathlib import Path

from wgtune.key import Key
from wgtune.store.format import DOCUMENT_FORMAT, EXPORT_FORMAT, StoredEntry, check_namespace

# The observer must report a task this long, busy on purpose, before any "no long task" counts.
PROBE_MS = 400

OBSERVED = """async (probeMs) => {
  const seen = [];
  const observer = new PerformanceObserver((list) => seen.push(
    ...list.getEntries().map((e) => [performance.timeOrigin + e.startTime, e.duration])));
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
# [start after the call, duration, whose: "self" or another context's], when the call started
# (`at`: ms since the epoch, as Python's time.time() * 1000) and the heartbeat's ticks.
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
  return { result: summary, ms, ticks, tasks, at: performance.timeOrigin + started,
           longest: Math.max(0, ...tasks.map(([, duration]) => duration)) };
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


class MainThreadClock:
    """How long the main thread of each renderer of the browser on ``profile`` has been on a CPU
    and runnable but waiting for one (ms, from ``/proc/PID/schedstat``: the process's first thread,
    a renderer's main thread), sampled every :data:`PERIOD` s from a thread of the test while a
    ``with`` block runs. ``available`` is False where there is no such file (not Linux)."""

    PERIOD = 0.004

    def __init__(self, profile: Path | str) -> None:
        self.profile = str(profile)
        self.samples: dict[str, list[tuple[float, float, float]]] = {}
        self._running = False
        self._thread: threading.Thread | None = None

    @property
    def available(self) -> bool:
        return Path("/proc/self/schedstat").exists()

    def _renderers(self) -> list[str]:
        found = []
        for directory in glob.glob("/proc/[0-9]*"):
            try:
                command = Path(directory, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if f"--user-data-dir={self.profile} " in command + " " and "--type=renderer" in command:
                found.append(f"{directory}/schedstat")
        return found

    def _sample(self, files: list[str]) -> None:
        looked = time.monotonic()
        while self._running:
            if time.monotonic() - looked > 0.25:  # a navigation may start a renderer meanwhile
                files, looked = self._renderers(), time.monotonic()
            now = time.time() * 1000
            for name in files:
                try:
                    ran, waited, _slices = Path(name).read_text().split()
                except (OSError, ValueError):
                    continue
                self.samples.setdefault(name, []).append((now, int(ran) / 1e6, int(waited) / 1e6))
            time.sleep(self.PERIOD)

    def __enter__(self) -> MainThreadClock:
        self.samples, self._running = {}, True
        self._thread = threading.Thread(target=self._sample, args=(self._renderers(),), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._running = False
        if self._thread is not None:
            self._thread.join()

    def page_thread(self) -> list[tuple[float, float, float]]:
        """The samples of the renderer that ran the most meanwhile: the page's (the others idled)."""
        return max(self.samples.values(), key=lambda series: series[-1][1] - series[0][1], default=[])

    def totals(self) -> tuple[float, float]:
        """(ms on a CPU, ms waiting for one) of the page's main thread over the block."""
        series = self.page_thread()
        return (series[-1][1] - series[0][1], series[-1][2] - series[0][2]) if series else (0.0, 0.0)


def on_cpu(clock: MainThreadClock, start: float, duration: float) -> tuple[float, float]:
    """(ms on a CPU, ms waiting for one) of the page's main thread from ``start`` (ms since the
    epoch) for ``duration`` ms, at most: between the last sample at or before the start and the
    first at or after the end. The samples come every few ms, or on a busy machine when the test
    gets to take them, so the span may take in neighbouring tasks' work too: never less than the
    task's own, which is what an assertion over it needs."""
    series = clock.page_thread()
    if not series:
        return 0.0, 0.0
    times = [sample[0] for sample in series]
    first = series[max(bisect.bisect_right(times, start) - 1, 0)]
    last = series[min(bisect.bisect_left(times, start + duration), len(series) - 1)]
    return last[1] - first[1], last[2] - first[2]
