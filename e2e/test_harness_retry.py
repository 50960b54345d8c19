"""The harness opens a page again when its tab crashes while loading, once, and says so."""

from __future__ import annotations

import pytest
from harness import open_page
from playwright.sync_api import Error as PlaywrightError


class FakePage:
    def __init__(self, failure: str | None) -> None:
        self.failure, self.closed, self.address = failure, False, None

    def on(self, event, handler) -> None:
        pass

    def goto(self, address: str) -> None:
        self.address = address

    def wait_for_function(self, expression: str, timeout: int) -> None:
        if self.failure:
            raise PlaywrightError(self.failure)

    def evaluate(self, expression: str) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


class FakeContext:
    def __init__(self, *failures: str | None) -> None:
        self.failures, self.pages = list(failures), []

    def new_page(self) -> FakePage:
        self.pages.append(FakePage(self.failures.pop(0) if self.failures else None))
        return self.pages[-1]


def test_a_tab_that_crashes_while_loading_is_opened_once_more_with_a_warning():
    context = FakeContext("Page.wait_for_function: Target crashed")
    with pytest.warns(UserWarning, match="crashed while the page loaded"):
        page, _ = open_page(context, "http://127.0.0.1:1/", "?x")
    assert len(context.pages) == 2 and context.pages[0].closed and page is context.pages[1]
    assert page.address == "http://127.0.0.1:1/?x" and not page.closed


def test_a_second_crash_or_another_error_fails():
    with pytest.raises(PlaywrightError, match="crashed"), pytest.warns(UserWarning, match="opening it again"):
        open_page(FakeContext("Target crashed", "Target crashed"), "http://127.0.0.1:1/")
    context = FakeContext("Timeout 60000ms exceeded")
    with pytest.raises(PlaywrightError, match="Timeout"):
        open_page(context, "http://127.0.0.1:1/")
    assert len(context.pages) == 1
