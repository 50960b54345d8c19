"""``wgtune serve``: the tuner page, its Pyodide and the wgtune wheel, on 127.0.0.1.

Serves exactly three trees and nothing else: the page (``web/``, without its ``node_modules``),
Pyodide from the npm package ``web/node_modules/pyodide`` at ``/pyodide/``, and the wheel the
page installs at ``/wheels/DIGEST/NAME`` (the digest of its bytes: another wheel, another URL),
named by ``/wgtune-config.json`` relative to itself. That is the layout of the library's own
directory (``library.py``): the page's ``wgtune.js`` finds every asset relative to where it was
loaded from. Every response is cross-origin isolated (COOP ``same-origin``, COEP
``require-corp``) so that ``performance.now()`` is fine-grained in the page, and carries the
right types for ``.wasm`` and ``.mjs``, which browsers insist on.

Files carry validators (``ETag``, ``Last-Modified``) and a conditional request for an unchanged
one gets a 304; the wheel may be cached for a year, everything else is revalidated on each use
(``http_cache.py`` says why).

The wheel is built from this checkout with pip (no network: ``--no-deps --no-build-isolation``)
into ``build/web/``, once per state of the sources: the page installs the very code the native
side runs.

A page on another site, or a peer on the network, can still reach a local server, so this one
holds to a few rules. No client can hold the server up (``pooled_server.py``): a request must
arrive whole within ``request_timeout`` of its first byte (else a 408), an answer must be taken
within a deadline that grows with its size, one address may have ``max_per_address`` connections
open at once, and files' bytes are shared by the answers that send them (``file_bytes.py``).
Only loopback names, and the name ``--host`` gives, are answered in ``Host``, and an ``Origin``
must be the page's own: a DNS-rebinding page gets a 403. Dotfiles and dot-directories are never
served, and a malformed path (a NUL or other control character, bad percent-encoding, over 2048
characters) gets a 400 or a 414, never a traceback. Binding beyond loopback prints a warning.
"""

from __future__ import annotations

import errno
import hashlib
import http.server
import ipaddress
import json
import mimetypes
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import wgtune

from .file_bytes import FileBytes
from .http_cache import CachePolicy, Validators, not_modified
from .pooled_server import Limits, PooledHTTPServer

__all__ = ["HostPolicy", "build_wheel", "checkout_root", "exposure_warning", "make_server", "run_serve", "wheel_url"]

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
}
ERROR_CACHE_CONTROL = "no-store"  # a refusal or a 404 is never kept: the next request is asked again

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
MAX_PATH_LENGTH = 2048  # characters of the request target; a longer one gets a 414
WORKERS = 16  # threads answering requests (Chromium opens at most 6 connections per host)
BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")

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


def wheel_url(wheel: Path) -> str:
    """The wheel's URL path relative to the server's root: ``wheels/DIGEST/NAME``, DIGEST from its bytes."""
    return f"wheels/{hashlib.sha256(wheel.read_bytes()).hexdigest()[:16]}/{wheel.name}"


def _host_name(host_header: str) -> str | None:
    """The name of a ``Host`` value (``name``, ``name:port``, ``[v6]:port``), lower case; None if malformed."""
    value = host_header.strip().lower()
    name = value[: value.find("]") + 1] if value.startswith("[") else value.partition(":")[0]
    rest = value[len(name):]
    if not name or (rest and not (rest[0] == ":" and rest[1:].isascii() and rest[1:].isdigit())):
        return None
    return name


def _is_ip_literal(name: str) -> bool:
    """Whether a Host name is an address (``[v6]`` in brackets), which no DNS rebinding can produce."""
    try:
        address = ipaddress.ip_address(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
    except ValueError:
        return False
    return name.startswith("[") == (address.version == 6)


def _is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class HostPolicy:
    """The ``Host`` names the server answers to: the guard against DNS rebinding.

    A page of another site whose name the attacker points at 127.0.0.1 reaches the server with
    its own name in ``Host``; refusing every name but ours keeps it from reading the page or the
    wheel. An address (``192.168.1.7``) is accepted only where the server listens on every
    interface: a rebinding attack needs a name it controls, never an address.
    """

    names: frozenset[str]
    any_ip_literal: bool = False

    @classmethod
    def for_bind(cls, host: str) -> HostPolicy:
        """Loopback names, the name or address ``host`` gives, or for a wildcard bind any address and this hostname."""
        if host in WILDCARD_HOSTS:
            return cls(LOOPBACK_NAMES | {socket.gethostname().lower()}, any_ip_literal=True)
        return cls(LOOPBACK_NAMES | {f"[{host.lower()}]" if ":" in host else host.lower()})

    def allows(self, host_header: str) -> bool:
        """Whether a request with this ``Host`` value is answered."""
        name = _host_name(host_header)
        return name is not None and (name in self.names or (self.any_ip_literal and _is_ip_literal(name)))

    @staticmethod
    def same_origin(origin: str, host_header: str | None) -> bool:
        """Whether an ``Origin`` is the page's own: ``http://`` and the very ``Host`` of the request."""
        return host_header is not None and origin.strip().lower() == f"http://{host_header.strip().lower()}"


class _BadPath(ValueError):
    """A request target the server answers with ``status`` (400 or 414) and ``reason``, not a lookup."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def _request_path(target: str) -> str:
    """The decoded path of a request target; raises ``_BadPath`` (400 or 414) for a malformed one."""
    if len(target) > MAX_PATH_LENGTH:
        raise _BadPath(414, f"request path longer than {MAX_PATH_LENGTH} characters")
    try:
        path = urlsplit(target).path or "/"
    except ValueError:
        raise _BadPath(400, "malformed request target") from None
    if BAD_PERCENT.search(path):
        raise _BadPath(400, "bad percent-encoding in path")
    try:
        decoded = unquote(path, errors="strict")
    except UnicodeDecodeError:
        raise _BadPath(400, "path is not UTF-8") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
        raise _BadPath(400, "control character in path")
    if not decoded.startswith("/"):
        raise _BadPath(400, "path does not start with /")
    return decoded


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "wgtune"
    # Set per server by make_server:
    web_dir: Path
    pyodide_dir: Path
    wheel: Path
    wheel_path: str  # the wheel's URL path, "/wheels/DIGEST/NAME"
    hosts: HostPolicy
    files: FileBytes
    quiet: bool = True

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)

    def _refusal(self) -> tuple[int, str] | None:
        """Why this request is refused whatever its path (a status and a reason), or None."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) > 1:
            return 400, "more than one Host header"
        host = hosts[0] if hosts else None
        if host is not None and not self.hosts.allows(host):
            return 403, (f"Host {host[:100]!r} is not served here (a guard against DNS rebinding): open the page at "
                         "http://127.0.0.1:PORT/, or pass --host NAME")
        origin = self.headers.get("Origin")
        if origin is not None and not self.hosts.same_origin(origin, host):
            return 403, f"cross-origin request from {origin[:100]!r} refused"
        return None

    def _resolve(self, path: str) -> Path | None:
        """The file a URL path names, or None: only inside the three served trees, never a dotfile."""
        if path == "/":
            path = "/index.html"
        if path == self.wheel_path:
            return self.wheel
        segments = path.split("/")[1:]
        if any(segment.startswith(".") for segment in segments):  # dotfiles, dot-directories, `.`, `..`
            return None
        if segments[0] == "pyodide":
            base, rel = self.pyodide_dir.resolve(), segments[1:]
        elif segments[0] in ("node_modules", "wheels", "wgtune-config.json"):
            return None
        else:
            base, rel = self.web_dir.resolve(), segments
        try:
            candidate = base.joinpath(*rel).resolve()
            if not candidate.is_relative_to(base) or not candidate.is_file():
                return None
        except (OSError, ValueError):  # a name too long for the file system, a symlink loop
            return None
        if any(part.startswith(".") for part in candidate.relative_to(base).parts):  # reached through a symlink
            return None
        return candidate

    def _send(self, status: int, body: bytes, content_type: str | None, head_only: bool, *,
              cache_control: str = ERROR_CACHE_CONTROL, validators: Validators | None = None) -> None:
        """One response; a 304 (``content_type`` None) has the same headers as its 200 but no body."""
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        for name, value in (*ISOLATION_HEADERS.items(), *(validators.headers() if validators else {}).items()):
            self.send_header(name, value)
        self.send_header("Cache-Control", cache_control)
        self.end_headers()
        if not head_only and content_type is not None:
            self.wfile.write(body)

    def _send_text(self, status: int, text: str, head_only: bool) -> None:
        self._send(status, f"{text}\n".encode(), "text/plain; charset=utf-8", head_only)

    def _send_cached(self, body: bytes | None, content_type: str, head_only: bool, policy: CachePolicy,
                     validators: Validators) -> None:
        """A 200 with ``body``, or a 304 where the request's validators still match (``body`` is then
        not needed: None)."""
        if body is None or not_modified(validators, self.headers.get("If-None-Match"),
                                        self.headers.get("If-Modified-Since")):
            self._send(304, b"", None, head_only, cache_control=policy.value, validators=validators)
        else:
            self._send(200, body, content_type, head_only, cache_control=policy.value, validators=validators)

    def _get(self, head_only: bool) -> None:
        refusal = self._refusal()
        if refusal is not None:
            self._send_text(*refusal, head_only)
            return
        try:
            path = _request_path(self.path)
        except _BadPath as bad:
            self._send_text(bad.status, bad.reason, head_only)
            return
        if path == "/wgtune-config.json":
            # Relative to the config's own URL, as in a copied library directory (library.py).
            body = json.dumps({"wheel": self.wheel_path[1:], "version": wgtune.__version__}).encode()
            self._send_cached(body, TYPES[".json"], head_only, CachePolicy.REVALIDATE, Validators.of_body(body))
            return
        file = self._resolve(path)
        try:
            validators = Validators.of_file(file.stat()) if file is not None else None
            unchanged = validators is not None and not_modified(
                validators, self.headers.get("If-None-Match"), self.headers.get("If-Modified-Since"))
            body = None if file is None or unchanged else self.files.read(file, file.stat())
        except OSError:
            file = None
        if file is None:
            self._send_text(404, f"not found: {path[:200]}", head_only)
            return
        content_type = TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        policy = CachePolicy.IMMUTABLE if file == self.wheel else CachePolicy.REVALIDATE
        self._send_cached(body, content_type, head_only, policy, validators)

    def do_GET(self) -> None:
        self._get(head_only=False)

    def do_HEAD(self) -> None:
        self._get(head_only=True)


def exposure_warning(host: str) -> str | None:
    """The warning for a bind beyond loopback (``--host 0.0.0.0``), or None for a loopback one."""
    if _is_loopback(host):
        return None
    where = "this machine" if host in WILDCARD_HOSTS else host
    return (f"wgtune: warning: --host {host or '0.0.0.0'} exposes the server to the network: anyone who can reach "
            f"{where} can load the page and the wheel. Leave out --host to serve on 127.0.0.1 only.")


def make_server(host: str, port: int, web_dir: Path, wheel: Path, *, quiet: bool = True,
                limits: Limits | None = None, workers: int = WORKERS) -> PooledHTTPServer:
    """The page's HTTP server, bound (port 0: any free port; see ``server_address``); warns on stderr
    when ``host`` is beyond loopback. ``limits``: what one client may take (``Limits``' defaults)."""
    pyodide_dir = web_dir / "node_modules" / "pyodide"
    if not (pyodide_dir / "pyodide.mjs").is_file():
        raise OSError(f"Pyodide is not installed in {pyodide_dir}: run `make setup` (npm ci in web/)")
    if not (web_dir / "index.html").is_file():
        raise OSError(f"{web_dir} has no index.html: is it wgtune's web/ directory?")
    if not wheel.is_file():
        raise OSError(f"no wheel at {wheel}: pass --wheel FILE, or leave it out to build one from this checkout")
    handler = type("Handler", (_Handler,), {"web_dir": web_dir, "pyodide_dir": pyodide_dir, "wheel": wheel,
                                            "wheel_path": f"/{wheel_url(wheel)}", "hosts": HostPolicy.for_bind(host),
                                            "quiet": quiet, "files": FileBytes()})
    try:
        server = PooledHTTPServer((host, port), handler, limits=limits, workers=workers, quiet=quiet)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise OSError(f"port {port} of {host} is in use: pass --port N (0 picks a free one)") from None
        raise
    warning = exposure_warning(host)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return server


def run_serve(args) -> int:
    """``wgtune serve``: build the wheel unless given, then serve until Ctrl-C."""
    root = checkout_root()
    web_dir = Path(args.web_dir) if args.web_dir else root / "web"
    if args.wheel:
        wheel = Path(args.wheel)
    else:
        if not (root / "pyproject.toml").is_file():
            raise OSError(f"no source checkout at {root} to build the page's wheel from: pass --wheel FILE")
        print("wgtune: building the wheel the page installs...", file=sys.stderr, flush=True)
        wheel = build_wheel(root, root / "build" / "web")
    server = make_server(args.host, args.port, web_dir, wheel, quiet=not args.verbose, limits=Limits.of_args(args))
    print(f"wgtune: serving the tuner page at {server_url(server, args.host)}/  (Ctrl-C to stop)", flush=True)
    serve_until_interrupted(server)
    return 0


def server_url(server: http.server.HTTPServer, host: str) -> str:
    """``http://HOST:PORT`` of a listening ``server`` bound to ``host``, as a browser opens it
    (the loopback for a wildcard address, an IPv6 address in brackets)."""
    port = server.server_address[1]
    shown = "127.0.0.1" if host in WILDCARD_HOSTS else f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve_until_interrupted(server: http.server.HTTPServer) -> None:
    """Serve until Ctrl-C, then close the listening socket."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
