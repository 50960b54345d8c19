"""How often the page's Chromium tab crashes ("Target crashed", issue 30), under load, by flags.

Loads the tuner page again and again the ways the browser tests do, with two busy loops
(``while :; do :; done``) started here and stopped at the end, and counts the tabs that crash.
A cycle is: a fresh profile (a first visit: Python's snapshot built in a worker), a reload, two
tabs opened at once, then the browser closed and started again on that profile and one more tab:
five loads, each followed by a small tune of a set defined from JavaScript (Python running under
the page's calls, as in ``e2e/test_js_api.py``). A crash ends its cycle; the next starts afresh.

Chromium's log (every process's stderr) and the crash dumps Crashpad writes are kept: for each
crash this prints the dump's summary (signal, thread, faulting address against that thread's
stack; ``harness.describe_dump``) and the log lines of the crash's last seconds.

``--flags``: ``harness`` (e2e/harness.py's flags: Chromium's defaults, GWP-ASan left to Chromium,
which turns it on in 1% of processes), ``gwp-asan`` (GWP-ASan forced on in every process and
sampling densely, to see at once what those 1% do now and then), ``gwp-asan-off`` (the same dense
sampling with its process sampling at 0), ``gwp-asan-every-process`` (GWP-ASan in every process
at Chromium's own sampling: what one of the 1% does).

``--first-visits``: every load a first visit in a fresh profile instead. ``--stack-switching``: the
page asked to start Pyodide with JSPI (``?stack-switching``), as it did by default before issue
30's fix at the cause: Python back on the JSPI stacks the crashes were found on.

Usage: ``python bench/tab_crash.py --loads 40 --flags harness [--busy 2] [--first-visits] [--stack-switching]
[--out FILE]``
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
import harness
from harness import PageServer, launch, wait_ready

FLAGS = {
    "harness": harness.CHROMIUM_ARGS,
    "gwp-asan": harness.gwp_asan_args("1.0"),
    "gwp-asan-off": harness.gwp_asan_args("0"),
    "gwp-asan-every-process": harness.gwp_asan_args("1.0", sampling=""),
}

LOAD_TIMEOUT_S = 300  # a guard against a page that never loads, not a measurement


class Run:
    def __init__(self, playwright, url: str, flags: list[str], loads: int) -> None:
        self.playwright, self.url, self.flags, self.target = playwright, url, flags, loads
        self.loads = self.crashes = self.other = 0
        self.reports: list[str] = []

    def load(self, page, *, reload: bool = False) -> None:
        self.loads += 1  # a load that crashes counts
        if reload:
            page.reload()
        wait_ready(page)
        state = page.evaluate(harness.SMALL_TUNE, f"crash_probe_{self.loads}")
        if state != "Hit":
            raise RuntimeError(f"the probe's tune ended {state}")

    def cycle(self, profile: Path, *, first_visit_only: bool = False) -> None:
        began = time.time()
        context = launch(self.playwright, profile, self.flags)
        try:
            steps = [
                lambda: self.load(_tab(context, self.url)),
                lambda: self.load(context.pages[-1], reload=True),
                lambda: self.both(context),
            ]
            if first_visit_only:
                self.load(_tab(context, self.url))
                return
            for step in steps:
                if self.loads >= self.target:
                    return
                step()
            context.close()
            if self.loads >= self.target:
                return
            context = launch(self.playwright, profile, self.flags)
            self.load(_tab(context, self.url))
        except Exception as error:  # a crash, or anything else: counted apart, and the run goes on
            crashed = "crash" in str(error).lower()
            self.crashes += crashed
            self.other += not crashed
            time.sleep(2)  # Crashpad writes the dump after the tab is gone
            evidence = harness.crash_evidence(since=began, lines=12)
            report = (f"load {self.loads}: {'CRASH' if crashed else 'ERROR'} "
                      f"{str(error).splitlines()[0]}\n{evidence}")
            self.reports.append(report)
            print(report, flush=True)
        finally:
            with contextlib.suppress(Exception):
                context.close()

    def both(self, context) -> None:
        """Two tabs opened at once, as tests that open a second tab do."""
        first, second = _tab(context, self.url), _tab(context, self.url)
        self.load(first)
        self.load(second)
        second.close()


def _tab(context, url: str):
    page = context.new_page()
    page.set_default_timeout(LOAD_TIMEOUT_S * 1000)
    page.goto(url)
    return page


def busy_loops(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, default=40)
    parser.add_argument("--flags", choices=sorted(FLAGS), default="harness")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the browser")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--first-visits", action="store_true",
                        help="each load a first visit in a fresh profile (where forced GWP-ASan crashes)")
    parser.add_argument("--stack-switching", action="store_true",
                        help="load the page with ?stack-switching: Pyodide on JSPI stacks, as before the fix")
    options = parser.parse_args()

    from playwright.sync_api import sync_playwright

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the busy loops stopped on `timeout` too
    loops = busy_loops(options.busy)
    began = time.time()
    try:
        with PageServer() as server, sync_playwright() as playwright, tempfile.TemporaryDirectory() as scratch:
            url = server.url + ("?stack-switching" if options.stack_switching else "")
            run = Run(playwright, url, FLAGS[options.flags], options.loads)
            cycles = 0
            while run.loads < options.loads:
                cycles += 1
                run.cycle(Path(scratch) / f"profile-{cycles}", first_visit_only=options.first_visits)
                print(f"cycle {cycles}: {run.loads} loads, {run.crashes} crashes, {run.other} other errors",
                      flush=True)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    with open("/proc/loadavg") as file:
        load = file.read().split()[:3]
    kind = ("first visits" if options.first_visits else "loads") + (
        ", Python on JSPI (?stack-switching)" if options.stack_switching else ", Python off JSPI")
    summary = (f"flags {options.flags} ({' '.join(FLAGS[options.flags])}), {options.busy} busy loops, {kind}: "
               f"{run.crashes} tab crashes and {run.other} other errors in {run.loads} loads "
               f"({cycles} cycles, {time.time() - began:.0f} s; load average at the end {' '.join(load)})")
    print(summary)
    if options.out:
        options.out.write_text(summary + "\n\n" + "\n\n".join(run.reports) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
