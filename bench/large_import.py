"""The page's main thread with 100k stored winners: loading, importing and listing them (issue 28).

Prints, in Debian's Chromium (WebGPU on SwiftShader), in a fresh profile:

- the first visit and a reload: the longest main-thread task of each load (``longtask``,
  observed before any script of the page runs), how many were over 200 ms, and where Python
  came from (a worker's snapshot, the stored snapshot);
- that the observer sees a deliberate busy task of 400 ms (else "no long task" means nothing);
- importing an export of ``--entries`` winners of this device (``wgtune.importCache``), then
  ``wgtune.cache()`` (the export as an object), ``wgtune.exportCache()`` (as text) and one page
  of the stored-winners panel (``storedPage``): for each, its time, its longest task, its tasks
  over 50 ms and how many 10 ms heartbeat ticks ran meanwhile (other tasks the page could run);
- a reload with the winners stored: the load's longest task;
- for each call, how long the page's renderer main thread ran and how long it was ready to run but
  waited for a CPU (Linux ``/proc/PID/schedstat``): on a shared machine a task of 10 ms of work is
  a task of hundreds of milliseconds when the thread waits, and this tells the two apart.

Timings are noisy on a shared machine: ``--rounds`` repeats the calls.

Usage: ``python bench/large_import.py [--entries 100000] [--rounds 1]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
from harness import PageServer, launch
from long_tasks import FETCH_TEXT, NAMESPACE, OBSERVED, PROBE_MS, WATCH, MainThreadClock, export_text, on_cpu

LOAD_TASKS = """
window.__loadTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__loadTasks.push([entry.startTime, entry.duration]);
}).observe({ type: "longtask", buffered: true });
"""
EXPORT_PATH = "bench-large-export.json"


# The loader's steps as python.js and wgtune.js name them in the timeline.
MEASURES = """() => performance.getEntriesByType("measure").filter((m) => m.name.startsWith("wgtune: "))
  .map((m) => [m.name.slice(8), m.startTime, m.duration])"""


def load(page, name: str, clock: MainThreadClock, navigate) -> None:
    """``navigate()`` (a goto, a reload), then the load's long tasks and steps, each long task with
    what its main thread ran and waited (``clock``)."""
    with clock:
        navigate()
        page.wait_for_function("window.wgtune && window.wgtune.ready", timeout=300_000)  # a busy first visit
    tasks = page.evaluate("window.__loadTasks")
    origin = page.evaluate("performance.timeOrigin")
    phases = page.evaluate("window.wgtune.ready.then((api) => api.loadPhases)")
    durations = [duration for _start, duration in tasks]
    shown = ", ".join(f"{key} {value:.0f}" if isinstance(value, (int, float)) else f"{key}: {value}"
                      for key, value in phases.items())
    print(f"{name:28} longest task {max(durations, default=0):5.0f} ms, {sum(d > 200 for d in durations)} over "
          f"200 ms, {len(durations)} over 50 ms ({', '.join(f'{d:.0f}' for d in durations) or '-'}); "
          f"phases (ms): {shown}")
    for step, start, duration in page.evaluate(MEASURES):
        inside = [(d, s) for s, d in tasks if s < start + duration and s + d > start]
        longest, at = max(inside, default=(0, 0))
        ran, waited = on_cpu(clock, origin + at, longest) if longest else (0, 0)
        print(f"{'':30}{step}: {duration:6.0f} ms, its longest task {longest:5.0f} ms"
              + (f" (on a CPU {ran:.0f} ms, waiting for one {waited:.0f} ms)" if longest else ""))


def watched(page, name: str, call: str, *args: str, profile: str = "") -> dict:
    with MainThreadClock(profile) as clock:
        answer = page.evaluate(WATCH, [call, list(args)])
    tasks = [duration for _start, duration, _whose in answer["tasks"]]
    ran, waited = clock.totals()
    scheduled = f"; its main thread ran {ran / 1000:.1f} s, waited for a CPU {waited / 1000:.1f} s" if ran else ""
    print(f"{name:28} {answer['ms'] / 1000:6.2f} s, longest task {answer['longest']:5.0f} ms, "
          f"{sum(d > 200 for d in tasks)} over 200 ms, {len(tasks)} over 50 ms, {answer['ticks']} heartbeat ticks; "
          f"answered {answer['result']}{scheduled}")
    return answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000, help="winners in the import (default 100000)")
    parser.add_argument("--rounds", type=int, default=1, help="times each call is measured (default 1)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with PageServer() as server, sync_playwright() as playwright, \
            tempfile.TemporaryDirectory(prefix="wgtune-bench-import-") as profile:
        context = launch(playwright, Path(profile))
        context.add_init_script(LOAD_TASKS)
        page = context.new_page()
        clock = MainThreadClock(profile)
        print(f"wgtune large import benchmark: {server.url}, Chromium, {args.entries} winners")
        load(page, "first visit", clock, lambda: page.goto(server.url))
        load(page, "reload", clock, page.reload)

        text = export_text(page.evaluate(NAMESPACE), args.entries)
        context.route(f"{server.url}{EXPORT_PATH}", lambda route: route.fulfill(
            status=200, content_type="application/json", body=text))
        chars = page.evaluate(FETCH_TEXT, f"{server.url}{EXPORT_PATH}")
        seen = page.evaluate(OBSERVED, PROBE_MS)
        probe = ", ".join(f"{duration:.0f} ms" for _at, duration in seen) or "nothing"
        print(f"the observer saw the {PROBE_MS} ms probe as {probe}; "
              f"export: {chars / 1e6:.1f} M characters")
        for number in range(args.rounds):
            suffix = f" (round {number + 1})" if args.rounds > 1 else ""
            watched(page, f"importCache{suffix}", "importCache", "@text", profile=profile)
            watched(page, f"cache(){suffix}", "cache", profile=profile)
            watched(page, f"exportCache(){suffix}", "exportCache", profile=profile)
            watched(page, f"storedPage(){suffix}", "storedPage", profile=profile)
        load(page, f"reload with {args.entries} stored", clock, page.reload)
        context.close()
    print("target: no main-thread task over 200 ms while importing or listing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
