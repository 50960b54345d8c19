"""wgtune hosted inside another site (issue 13): the library under a sub-path of a plain static
server, its assets found relative to it or to ``baseUrl``, no demo unless asked."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from harness import READY_TIMEOUT_MS, ConsoleLog, launch
from hosting_site import HostingSite
from test_js_api import DEFINE_AND_TUNE

# Every GPUBuffer the page creates, in bytes: registered before any script of the page runs.
COUNT_BUFFERS = """
window.__bufferBytes = 0;
const create = GPUDevice.prototype.createBuffer;
GPUDevice.prototype.createBuffer = function (descriptor) {
  window.__bufferBytes += descriptor.size;
  return create.call(this, descriptor);
};
"""


@pytest.fixture(scope="module")
def site():
    with HostingSite() as running:
        yield running


@pytest.fixture(scope="module")
def context(playwright, tmp_path_factory):
    browser = launch(playwright, tmp_path_factory.mktemp("chromium-hosting"))
    yield browser
    browser.close()


def open_site(context, url: str):
    """The site's page at ``url`` once its loader settled: ``(page, log, outcome)``, the outcome
    ``{ok: true, ...}`` or ``{ok: false, message}``."""
    page = context.new_page()
    log = ConsoleLog(page)
    page.add_init_script(COUNT_BUFFERS)
    page.goto(url)
    page.wait_for_function("!!window.siteReady", timeout=READY_TIMEOUT_MS)
    outcome = page.evaluate(
        """() => window.siteReady.then(
            (api) => ({ok: true, version: api.version, sets: api.catalogue().sets, bytes: window.__bufferBytes,
                       config: api.pyodide.runPython("import wgtune; wgtune.__file__")}),
            (error) => ({ok: false, message: error.message}))"""
    )
    return page, log, outcome


def test_the_library_loads_from_a_sub_path_of_another_site_with_no_demo(site, context):
    page, log, outcome = open_site(context, site.page_url)
    assert outcome["ok"], outcome
    assert outcome["sets"] == []  # no demo keys unless asked
    # The demo's 8 keys would be about 22 MB of buffers; the clock's measurement needs a few bytes.
    assert outcome["bytes"] < 100_000
    assert log.errors == []
    # Every asset came from the library's directory on this site, none from / or another origin.
    assets = [url for url in log.requests if url.startswith(site.origin) and url != site.page_url]
    assert assets and all(url.startswith(f"{site.origin}/site/vendor/wgtune/") for url in assets)
    assert any(url.endswith("/site/vendor/wgtune/pyodide/pyodide.asm.wasm") for url in assets)
    assert any("/site/vendor/wgtune/wheels/" in url and url.endswith(".whl") for url in assets)
    assert [url for url in log.requests if not url.startswith((site.origin, "data:", "blob:"))] == []
    assert page.evaluate("crossOriginIsolated") is True
    assert "ready" in page.locator("#status").inner_text()
    page.close()


def test_a_base_url_puts_the_assets_apart_from_the_modules(site, context):
    page, log, outcome = open_site(context, f"{site.page_url}?module=./js/wgtune.js&base=vendor/wgtune")
    assert outcome["ok"], outcome
    pyodide = [url for url in log.requests if "pyodide.asm.wasm" in url]
    assert pyodide == [f"{site.origin}/site/vendor/wgtune/pyodide/pyodide.asm.wasm"]
    assert any(url == f"{site.origin}/site/js/wgtune.js" for url in log.requests)
    assert log.errors == []
    page.close()


def test_a_pyodide_url_puts_pyodide_apart_from_the_other_assets(site, context):
    library = site.root / "site" / "vendor" / "wgtune"
    shutil.copytree(library / "pyodide", site.root / "site" / "runtime" / "pyodide", dirs_exist_ok=True)
    page, log, outcome = open_site(context, f"{site.page_url}?pyodide=runtime/pyodide/")
    assert outcome["ok"], outcome
    pyodide = [url for url in log.requests if "/pyodide/" in url.partition("?")[0]]  # not the page's query
    assert pyodide and all(url.startswith(f"{site.origin}/site/runtime/pyodide/") for url in pyodide)
    assert any("/site/vendor/wgtune/wheels/" in url for url in log.requests)  # the rest from the base URL
    assert log.errors == []
    page.close()
    page, _, outcome = open_site(context, f"{site.page_url}?pyodide=/nowhere/")
    assert not outcome["ok"] and f"{site.origin}/nowhere/pyodide.mjs" in outcome["message"]
    assert "pyodideUrl" in outcome["message"] and "baseUrl" not in outcome["message"]
    page.close()


def test_a_wrong_base_url_fails_with_a_message_naming_it(site, context):
    page, _, outcome = open_site(context, f"{site.page_url}?base=/elsewhere/")
    assert not outcome["ok"]
    assert "could not load" in outcome["message"] and f"{site.origin}/elsewhere/" in outcome["message"]
    assert "baseUrl" in outcome["message"]
    page.close()


def test_the_demo_page_asks_for_the_demo_and_pays_its_buffers(server, context):
    page = context.new_page()
    page.add_init_script(COUNT_BUFFERS)
    page.goto(server.url)
    page.wait_for_function("window.wgtune && window.wgtune.ready", timeout=READY_TIMEOUT_MS)
    page.evaluate("window.wgtune.ready.then(() => true)")
    sets = [s["name"] for s in page.evaluate("window.wgtune.catalogue().sets")]
    assert sets == ["matmul", "fma", "row_sum", "row_max"]
    assert page.evaluate("window.__bufferBytes") > 20_000_000  # what the counter sees when the demo is there
    page.close()


def test_a_site_with_no_python_of_its_own_tunes_its_kernel_from_javascript(site, context):
    """The site's page writes only JavaScript: it defines a set, tunes it on its own buffers with
    an f32 param given as 2.0, and gets the right output (the same script as test_js_api's)."""
    page, log, outcome = open_site(context, site.page_url)
    assert outcome["ok"], outcome
    page.evaluate("async () => { window.wgtune = await window.siteReady; }")
    answer = page.evaluate(DEFINE_AND_TUNE, {"n": 777, "uniform": "struct"})
    assert answer["settled"]["state"] == "Hit" and answer["ran"]["ran"] == answer["settled"]["winner"]
    np.testing.assert_array_equal(np.array(answer["y"], dtype=np.float32), 2.0 * np.arange(777, dtype=np.float32))
    assert log.errors == []
    page.close()
