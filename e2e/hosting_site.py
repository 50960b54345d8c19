"""Another site that hosts wgtune: its own page at ``/site/``, the library copied under ``/site/vendor/wgtune/``.

What a web developer does with the library (README, "Hosting wgtune in your site"): write the
library's directory (``wgtune.cli.library.export_library``) into the site's files and serve
them with any static server. This one is Python's plain ``http.server`` (not ``wgtune serve``),
with only what the README asks of a host: the cross-origin isolation headers, the types of
``.mjs`` and ``.wasm``, and ``Cache-Control`` (validators: ``Last-Modified``, as most static
servers send). Used by ``test_hosting.py`` and ``bench/page_load.py``.

The site's page loads the library without the demo and sets ``window.siteReady`` to the loader's
promise. Its query may name the module to import (``?module=js/wgtune.js``), the base URL
(``?base=vendor/wgtune/``) and Pyodide's (``?pyodide=runtime/pyodide/``), all relative to the page.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import tempfile
import threading
from pathlib import Path

from harness import ROOT

from wgtune.cli.library import export_library, library_modules
from wgtune.cli.serve import build_wheel

SITE_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>A site that hosts wgtune</title><link rel="icon" href="data:,"></head>
<body>
<h1>A site of its own</h1>
<p id="status">Loading wgtune…</p>
<script type="module">
  const params = new URLSearchParams(location.search);
  const status = document.getElementById("status");
  const options = { onStatus: (text) => { status.textContent = text; } };
  if (params.has("base")) options.baseUrl = params.get("base");
  if (params.has("pyodide")) options.pyodideUrl = params.get("pyodide");
  window.siteReady = import(params.get("module") ?? "./vendor/wgtune/wgtune.js")
    .then(({ loadWgtune }) => loadWgtune(options));
  window.siteReady.then(
    (api) => { status.textContent = `wgtune ${api.version} ready, ${api.catalogue().sets.length} sets`; },
    (error) => { status.textContent = `failed: ${error.message}`; },
  );
</script>
</body>
</html>
"""


class StaticHandler(http.server.SimpleHTTPRequestHandler):
    """A plain static server, plus the headers a host of wgtune adds (README)."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
                      ".json": "application/json", ".whl": "application/zip"}
    cache_control = "no-cache"

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cache-Control", self.cache_control)
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


class HostingSite:
    """The site on a free port of 127.0.0.1 for a ``with`` block: ``page_url`` is its page."""

    def __init__(self, cache_control: str = "no-cache") -> None:
        self.cache_control = cache_control
        self.root = Path(tempfile.mkdtemp(prefix="wgtune-site-"))
        self.page_url = ""

    def __enter__(self) -> HostingSite:
        site = self.root / "site"
        library = site / "vendor" / "wgtune"
        export_library(library, ROOT / "web", build_wheel(ROOT, ROOT / "build" / "web"))
        (site / "index.html").write_text(SITE_PAGE)
        (site / "js").mkdir()
        for module in library_modules(ROOT / "web"):  # the modules alone, their assets elsewhere: for ?base=
            shutil.copyfile(library / module, site / "js" / module)
        handler = type("Handler", (StaticHandler,), {"cache_control": self.cache_control})
        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(self.root)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.page_url = f"{self.origin}/site/"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.root, ignore_errors=True)
