"""Fixtures of the browser tests: one ``wgtune serve`` and one Playwright for the whole run.

Each test module gets its own Chromium profile (a fresh IndexedDB) through ``browser``; a test
that needs a browser restart closes the context and calls ``relaunch()`` on the same profile.
A test that fails on a crashed tab carries Chromium's evidence in its report (the crash dumps
written since it began, the log's tail): see ``harness.crash_evidence``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from harness import ROOT, PageServer, crash_dumps, crash_evidence, launch, open_page

ARTIFACTS = ROOT / "out" / "e2e"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[STARTED] = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed and call.excinfo is not None and "crashed" in str(call.excinfo.value).lower():
        since = item.stash.get(STARTED, call.start)
        # Crashpad writes its dump from another process, a moment after the tab is gone.
        for _ in range(100):
            if crash_dumps(since):
                break
            time.sleep(0.1)
        report.sections.append(("Chromium: crash dumps and log tail", crash_evidence(since)))


STARTED = pytest.StashKey[float]()


@pytest.fixture(scope="session")
def server():
    with PageServer() as running:
        yield running


@pytest.fixture(scope="session")
def playwright():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


class Browser:
    """A Chromium on one profile directory, which can be closed and started again."""

    def __init__(self, playwright, profile: Path, url: str) -> None:
        self.playwright = playwright
        self.profile = profile
        self.url = url
        self.context = launch(playwright, profile)

    def open(self, query: str = "", *, wait: bool = True):
        """A new tab on the page (ready, if ``wait``); returns ``(page, console_log)``."""
        return open_page(self.context, self.url, query, wait=wait)

    def relaunch(self) -> None:
        self.context.close()
        self.context = launch(self.playwright, self.profile)

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def browser(playwright, server, tmp_path_factory):
    running = Browser(playwright, tmp_path_factory.mktemp("chromium-profile"), server.url)
    yield running
    running.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
