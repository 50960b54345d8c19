"""Loading wgtune in a page, first and second time (Debian Chromium, WebGPU on SwiftShader).

Loads a page twice in one Chromium profile (the second load finds what the first left in the
HTTP cache and in V8's code cache) and, with ``--restart``, a third time after the browser was
closed and started again on that profile (only what is on disk). For each load it prints:

- time to ready: from navigation start to the loader's promise resolving, on the page's own
  clock (``performance.now()`` has the navigation start as its origin);
- bytes: over the network (``transferSize`` of every resource: a 304's headers count, a body
  from the HTTP cache does not) and the bodies the page used (``encodedBodySize``), with how
  many resources came from the cache (no transfer) or were revalidated (a 304, a few hundred
  bytes of headers). These are the main thread's requests: on a first load Python starts in a
  worker, whose own downloads (Pyodide, the wheel: about 13.8 MB) are not in the page's timeline;
- where Python came from (``python``): a stored snapshot, a worker, or the main thread;
- the longest main-thread task during the load (PerformanceObserver ``longtask``, registered
  before any script of the page runs), and how many tasks were over 200 ms;
- the loader's phases (``api.loadPhases``: device, Pyodide, wheel, session), to see what blocks.

Two pages: ``--page demo`` is the tuner page at ``/`` of ``wgtune serve`` (it asks for the demo:
8 keys, their buffers and fallbacks); ``--page site`` (default) is a page of another site that
hosts the library under ``/site/vendor/wgtune/`` and loads it without the demo (see
``e2e/hosting_site.py``). Timings are noisy on a shared machine: ``--rounds`` repeats the whole
measurement in fresh profiles and prints each round and the spread.

Usage: ``python bench/page_load.py [--page site|demo] [--rounds 3] [--restart]``
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
from harness import PageServer, launch

# Registered before any script of the page: every task over 50 ms from the navigation on.
LONGTASKS = """
window.__longtasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__longtasks.push([entry.startTime, entry.duration]);
}).observe({type: "longtask", buffered: true});
"""

# The figures of one load, read in the page once the loader is ready.
FIGURES = """async (readyExpression) => {
  const api = await eval(readyExpression);
  const readyAt = performance.now();
  const resources = [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")];
  const during = window.__longtasks.filter(([start]) => start <= readyAt).map(([, duration]) => duration);
  return {
    readyMs: readyAt,
    loaderMs: api.readyMs,
    phases: api.loadPhases ?? null,
    keys: api.catalogue().sets.reduce((sum, set) => sum + set.keys.length, 0),
    transferred: resources.reduce((sum, r) => sum + r.transferSize, 0),
    body: resources.reduce((sum, r) => sum + r.encodedBodySize, 0),
    resources: resources.length,
    fromCache: resources.filter((r) => r.transferSize === 0 && r.encodedBodySize > 0).length,
    revalidated: resources.filter((r) => r.transferSize > 0 && r.transferSize < 1000 && r.encodedBodySize > 1000)
      .length,
    longest: Math.max(0, ...during),
    over200: during.filter((d) => d > 200).length,
    longtasks: during,
  };
}"""

READY = {"demo": "window.wgtune.ready", "site": "window.siteReady"}


def load_once(context, url: str, page_kind: str) -> dict:
    """One load in a new tab of ``context``: its figures (see the module doc)."""
    page = context.new_page()
    try:
        page.add_init_script(LONGTASKS)
        page.goto(url)
        expression = READY[page_kind]
        page.wait_for_function(f"!!({expression})", timeout=120_000)
        return page.evaluate(FIGURES, expression)
    finally:
        page.close()


def one_round(playwright, url: str, page_kind: str, restart: bool) -> list[tuple[str, dict]]:
    """First load, second load (same browser), and after a restart if asked, in a fresh profile."""
    with tempfile.TemporaryDirectory(prefix="wgtune-bench-load-") as profile:
        context = launch(playwright, Path(profile))
        loads = [("first", load_once(context, url, page_kind)), ("second", load_once(context, url, page_kind))]
        context.close()
        if restart:
            context = launch(playwright, Path(profile))
            loads.append(("after restart", load_once(context, url, page_kind)))
            context.close()
    return loads


def describe(name: str, figures: dict) -> str:
    phases = figures["phases"]
    shown = ", ".join(f"{step} {ms / 1000:.2f}" if isinstance(ms, (int, float)) else f"{step}: {ms}"
                      for step, ms in phases.items()) if phases else "-"
    return (f"  {name:14} ready {figures['readyMs'] / 1000:5.2f} s | "
            f"network {figures['transferred'] / 1e6:6.2f} MB of {figures['body'] / 1e6:5.2f} MB "
            f"({figures['fromCache']} cached, {figures['revalidated']} revalidated, "
            f"{figures['resources']} resources) | "
            f"longest task {figures['longest']:5.0f} ms ({figures['over200']} over 200 ms) | "
            f"keys {figures['keys']} | phases (s): {shown} | tasks over 50 ms: "
            f"{', '.join(f'{ms:.0f}' for ms in figures['longtasks']) or '-'}")


@contextlib.contextmanager
def serving(page_kind: str):
    """The URL of the page to load, served for the block."""
    if page_kind == "demo":
        with PageServer() as server:
            yield server.url
    else:
        from hosting_site import HostingSite

        with HostingSite() as site:
            yield site.page_url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", choices=sorted(READY), default="site", help="which page to load (default: site)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh profiles to measure in (default 3)")
    parser.add_argument("--restart", action="store_true", help="also load once after restarting the browser")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rounds = []
    with serving(args.page) as url, sync_playwright() as playwright:
        one_round(playwright, url, args.page, restart=False)  # warms the OS's file cache and the wheel build only
        print(f"wgtune page load benchmark: {url} ({args.page} page), Chromium, {args.rounds} rounds")
        for number in range(args.rounds):
            loads = one_round(playwright, url, args.page, args.restart)
            rounds.append(loads)
            print(f"round {number + 1}")
            for name, figures in loads:
                print(describe(name, figures))
    print()
    print(f"{'load':14} {'ready (s): median [min-max]':>30} {'longest task (ms): median [min-max]':>38} "
          f"{'network MB':>11}")
    for index, (name, _) in enumerate(rounds[0]):
        ready = [loads[index][1]["readyMs"] / 1000 for loads in rounds]
        longest = [loads[index][1]["longest"] for loads in rounds]
        network = [loads[index][1]["transferred"] / 1e6 for loads in rounds]
        print(f"{name:14} {statistics.median(ready):>14.2f} [{min(ready):.2f}-{max(ready):.2f}]"
              f"{statistics.median(longest):>22.0f} [{min(longest):.0f}-{max(longest):.0f}]"
              f"{statistics.median(network):>16.2f}")
    print("targets: second load ready < 1.5 s; no main-thread task over 200 ms during a load")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
