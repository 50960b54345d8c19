"""``wgtune serve``: the tuner page, its Pyodide and the wgtune wheel, on 127.0.0.1.

Serves exactly three trees and nothing else: the page (``web/``, without its ``node_modules``),
Pyodide from the npm package ``web/node_modules/pyodide`` at ``/pyodide/``, and the wheel the
page installs at ``/wheels/``. Every response is cross-origin isolated (COOP ``same-origin``,
COEP ``require-corp``) so that ``performance.now()`` is fine-grained in the page, and carries
the right types for ``.wasm`` and ``.mjs``, which browsers insist on.

The wheel is built from this checkout with pip (no network: ``--no-deps --no-build-isolation``)
into ``build/web/``, once per state of the sources: the page installs the very code the native
side runs.
"""

from __future__ import annotations

import errno
import hashlib
import http.server
import json
import mimetypes
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import wgtune

__all__ = ["build_wheel", "checkout_root", "make_server", "run_serve"]

# Types browsers require (WebAssembly streaming compilation, module scripts), and the rest.
TYPES = {
    ".wasm": "application/wasm",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".json": "application/json",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".zip": "application/zip",
    ".whl": "application/zip",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".ts": "text/plain; charset=utf-8",
}

ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}

# What the wheel is built from: a change to any of these builds a new one.
WHEEL_SOURCES = ("pyproject.toml", "core", "backends", "kernels", "cli")


def checkout_root() -> Path:
    """The source checkout this wgtune runs from (the parent of the package's ``core/``)."""
    return Path(wgtune.__file__).resolve().parent.parent


def _sources_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for name in WHEEL_SOURCES:
        path = root / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
        for file in files:
            digest.update(str(file.relative_to(root)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def build_wheel(root: Path, out: Path) -> Path:
    """The wheel of the checkout at ``root``, built into ``out`` unless this state's is there."""
    target = out / f"wheel-{_sources_digest(root)}"
    found = sorted(target.glob("wgtune-*.whl")) if target.is_dir() else []
    if found:
        return found[-1]
    target.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
               "--wheel-dir", str(target), str(root)]
    done = subprocess.run(command, capture_output=True, text=True)
    found = sorted(target.glob("wgtune-*.whl"))
    if done.returncode != 0 or not found:
        raise OSError(f"building the wgtune wheel failed ({' '.join(command)}):\n{done.stderr.strip()}")
    return found[-1]


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "wgtune"
    # Set per server by make_server:
    web_dir: Path
    pyodide_dir: Path
    wheel: Path
    quiet: bool = True

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)

    def _resolve(self, path: str) -> Path | None:
        """The file a URL path names, or None: only inside the three served trees."""
        if path in ("", "/"):
            path = "/index.html"
        if path == "/wgtune-config.json":
            return None
        if path.startswith("/pyodide/"):
            base, rel = self.pyodide_dir, path[len("/pyodide/"):]
        elif path == f"/wheels/{self.wheel.name}":
            return self.wheel
        else:
            base, rel = self.web_dir, path.lstrip("/")
            first = rel.split("/", 1)[0]
            if first == "node_modules" or first.startswith("."):
                return None
        base = base.resolve()
        candidate = (base / rel).resolve()
        if not candidate.is_relative_to(base) or not candidate.is_file():
            return None
        return candidate

    def _send(self, status: int, body: bytes, content_type: str, head_only: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in ISOLATION_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if not head_only:
            self.wfile.write(body)

    def _get(self, head_only: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        if path == "/wgtune-config.json":
            config = {"wheel": f"/wheels/{self.wheel.name}", "version": wgtune.__version__}
            self._send(200, json.dumps(config).encode(), TYPES[".json"], head_only)
            return
        file = self._resolve(path)
        if file is None:
            self._send(404, f"not found: {path}\n".encode(), "text/plain; charset=utf-8", head_only)
            return
        content_type = TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        self._send(200, file.read_bytes(), content_type, head_only)

    def do_GET(self) -> None:
        self._get(head_only=False)

    def do_HEAD(self) -> None:
        self._get(head_only=True)


def make_server(host: str, port: int, web_dir: Path, wheel: Path, *, quiet: bool = True) -> http.server.HTTPServer:
    """A threaded HTTP server for the page (port 0: any free port; see ``server_address``)."""
    pyodide_dir = web_dir / "node_modules" / "pyodide"
    if not (pyodide_dir / "pyodide.mjs").is_file():
        raise OSError(f"Pyodide is not installed in {pyodide_dir}: run `make setup` (npm ci in web/)")
    if not (web_dir / "index.html").is_file():
        raise OSError(f"{web_dir} has no index.html: is it wgtune's web/ directory?")
    handler = type("Handler", (_Handler,), {"web_dir": web_dir, "pyodide_dir": pyodide_dir, "wheel": wheel,
                                            "quiet": quiet})
    try:
        server = http.server.ThreadingHTTPServer((host, port), handler)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise OSError(f"port {port} of {host} is in use: pass --port N (0 picks a free one)") from None
        raise
    server.daemon_threads = True
    return server


def run_serve(args) -> int:
    root = checkout_root()
    web_dir = Path(args.web_dir) if args.web_dir else root / "web"
    if args.wheel:
        wheel = Path(args.wheel)
    else:
        if not (root / "pyproject.toml").is_file():
            raise OSError(f"no source checkout at {root} to build the page's wheel from: pass --wheel FILE")
        print("wgtune: building the wheel the page installs...", file=sys.stderr, flush=True)
        wheel = build_wheel(root, root / "build" / "web")
    server = make_server(args.host, args.port, web_dir, wheel, quiet=not args.verbose)
    host, port = server.server_address[:2]
    print(f"wgtune: serving the tuner page at http://{host}:{port}/  (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
