"""``wgtune collect``: the fleet collector (``wgtune.backends.collector``) served over HTTP.

::

    wgtune collect --db fleet.sqlite3 --port 8100 [--host 127.0.0.1] [--origin URL ...] [--min-reporters 3]
    wgtune collect --db postgresql://user@host/db --port 8100      # pip install 'wgtune[collector-postgres]'

The logic (what a report may say, how reports are counted, the rate limit, the bundle) is the
backend's, without sockets; this module is its HTTP edge: the routes, CORS (pages of any origin
may post unless ``--origin`` lists the ones that may), the body limits read from the headers
before the body (and an address whose bucket is empty), the bundle's ``ETag``, ``Cache-Control:
no-cache`` (``http_cache.py``) and ``X-Wgtune-Verified-Reporters`` (exposed to pages by CORS).
Any number of these servers may share one database: they share its buckets and its bundles. It
serves on the project's pooled server (``pooled_server.py``), which slow clients cannot hold up:
a request is read whole (its body up to ``MAX_BODY``) before a worker sees it, within a deadline.
"""

from __future__ import annotations

import errno
import http.server
import re
from urllib.parse import parse_qs, urlsplit

from wgtune.backends.collector import MAX_BODY, MIN_REPORTERS, Collector, RateLimiter, Rejected, Reply
from wgtune.backends.collector_db import VoteDatabase
from wgtune.errors import ConfigError, StoreError
from wgtune.store.bounded_json import parse_json

from .http_cache import CachePolicy, Validators, not_modified
from .pooled_server import Limits, PooledHTTPServer
from .serve import serve_until_interrupted, server_url

__all__ = ["CollectorHandler", "make_collector_server", "run_collect"]

VERIFIED_HEADER = "X-Wgtune-Verified-Reporters"  # on a bundle: agreeing reporters that verify a winner
WORKERS = 16


class CollectorHandler(http.server.BaseHTTPRequestHandler):
    """The HTTP edge of a :class:`Collector` (set per server, with ``origins``: the page origins
    that may post, None for any). Refusals are JSON ``{"error": why}`` and never cached."""

    server_version = "wgtune-collector"
    collector: Collector
    origins: frozenset[str] | None = None
    quiet: bool = True

    def log_message(self, format: str, *args: object) -> None:
        if not self.quiet:
            super().log_message(format, *args)

    def _cors(self) -> list[tuple[str, str]]:
        origin = self.headers.get("Origin")
        if self.origins is None:
            return [("Access-Control-Allow-Origin", "*")]
        return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")] if origin in self.origins else []

    def _send(self, reply: Reply, *, head_only: bool = False) -> None:
        self.send_response(reply.status)
        for name, value in (*reply.headers, *self._cors(), ("Cross-Origin-Resource-Policy", "cross-origin"),
                            ("X-Content-Type-Options", "nosniff")):
            self.send_header(name, value)
        if not any(name == "Cache-Control" for name, _ in reply.headers):
            self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if not head_only:
            self.wfile.write(reply.body)

    def _refuse(self, status: int, reason: str, *headers: tuple[str, str]) -> None:
        self._send(Reply.json(status, {"error": reason}, *headers))

    def do_OPTIONS(self) -> None:
        """The preflight of a page's JSON POST from another origin."""
        self._send(Reply(204, b"", (("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
                                    ("Access-Control-Allow-Headers", "Content-Type"),
                                    ("Access-Control-Max-Age", "86400"))))

    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/v1/reports":
            self._refuse(404, "POST goes to /v1/reports")
            return
        origin = self.headers.get("Origin")
        if self.origins is not None and origin is not None and origin not in self.origins:
            self._refuse(403, f"pages of {origin[:100]!r} may not report here")
            return
        address = self.client_address[0]
        try:
            wait = self.collector.wait(address)  # an empty bucket: the body is not parsed
        except OSError as error:
            self.close_connection = True
            self._refuse(503, f"the collector's database failed, nothing was counted: {error}")
            return
        if wait:
            self.close_connection = True  # the body is not parsed
            self._refuse(429, f"too many reports from this address: retry in {wait:.0f} s",
                         ("Retry-After", str(max(1, round(wait)))))
            return
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            self.close_connection = True
            self._refuse(415, f"reports are application/json, not {kind[:60] or 'untyped'!r}")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True
            self._refuse(411, "a report needs a Content-Length")
            return
        if not 0 < length <= MAX_BODY:
            self.close_connection = True
            self._refuse(413, f"a POST carries 1 to {MAX_BODY} bytes, this one {length}")
            return
        body = self.rfile.read(length)  # read already, whole, by the server (pooled_server.py)
        try:
            self._send(self.collector.post_reports(body, address))
        except Rejected as bad:
            later = () if bad.retry_after is None else (("Retry-After", str(max(1, round(bad.retry_after)))),)
            self._refuse(bad.status, bad.reason, *later)
        except OSError as error:  # the database: the reports were not counted
            self._refuse(503, f"the collector's database failed, nothing was counted: {error}")

    def _get(self, head_only: bool) -> None:
        path = self.path.split("?")[0]
        if path == "/v1/health":
            self._send(self.collector.health(), head_only=head_only)
            return
        if path != "/v1/bundle":
            self._refuse(404, "GET /v1/bundle or /v1/health")
            return
        query = parse_qs(urlsplit(self.path).query)
        try:
            namespace = parse_json(query["namespace"][-1]) if "namespace" in query else None
            body = self.collector.bundle(namespace)
        except StoreError as bad:
            self._refuse(400, f"namespace= must be a device namespace's JSON: {bad}")
            return
        except Rejected as bad:
            self._refuse(bad.status, bad.reason)
            return
        validators = Validators.of_body(body)
        headers = (("Content-Type", "application/json"), ("Cache-Control", CachePolicy.REVALIDATE.value),
                   ("ETag", validators.etag), (VERIFIED_HEADER, str(self.collector.min_reporters)),
                   ("Access-Control-Expose-Headers", VERIFIED_HEADER))
        if not_modified(validators, self.headers.get("If-None-Match"), None):
            self._send(Reply(304, b"", headers), head_only=True)
        else:
            self._send(Reply(200, body, headers), head_only=head_only)

    def _get_or_refuse(self, head_only: bool) -> None:
        try:
            self._get(head_only)
        except OSError as error:  # the database could not be read
            self._refuse(503, f"the collector's database failed: {error}")

    def do_GET(self) -> None:
        self._get_or_refuse(head_only=False)

    def do_HEAD(self) -> None:
        self._get_or_refuse(head_only=True)


def make_collector_server(collector: Collector, host: str = "127.0.0.1", port: int = 0, *,
                          origins: frozenset[str] | None = None, quiet: bool = True,
                          limits: Limits | None = None, workers: int = WORKERS) -> PooledHTTPServer:
    """The collector's HTTP server, bound (port 0: a free one, see ``server_address``); ``limits``:
    what one client may take (``Limits``' defaults)."""
    handler = type("Handler", (CollectorHandler,), {"collector": collector, "origins": origins, "quiet": quiet})
    try:
        return PooledHTTPServer((host, port), handler, limits=limits, max_body=MAX_BODY, workers=workers,
                                quiet=quiet)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise OSError(f"port {port} of {host} is in use: pass --port N (0 picks a free one)") from None
        raise


def run_collect(args) -> int:
    """``wgtune collect``: open the database, serve until Ctrl-C."""
    if not (args.rate > 0 and args.burst >= 1):
        raise ConfigError(f"--rate must be above 0 and --burst at least 1, got {args.rate} and {args.burst}")
    min_reporters = getattr(args, "min_reporters", MIN_REPORTERS)
    if min_reporters < 1:
        raise ConfigError(f"--min-reporters must be at least 1, got {min_reporters}")
    database = VoteDatabase(args.db)
    limiter = RateLimiter(rate=args.rate / 60.0, burst=args.burst)
    known = None
    if getattr(args, "sets", None):  # your own sets too (--sets module:function), after the registry's
        from wgtune.backends.collector import known_sets
        from wgtune.backends.user_sets import register_sets
        from wgtune.kernels.families import FAMILIES

        register_sets(args.sets)
        known = known_sets([family.build() for family in FAMILIES])
    collector = Collector(database, known=known, limiter=limiter, min_reporters=min_reporters)
    origins = frozenset(origin.rstrip("/") for origin in args.origin) if args.origin else None
    for origin in origins or ():  # what a browser sends in Origin: scheme://host[:port], nothing after
        if not re.fullmatch(r"https?://[^/\s?#]+", origin):
            raise ConfigError(f"--origin {origin!r}: give a page origin as a browser sends it, like "
                              "https://example.com or http://127.0.0.1:8000")
    server = make_collector_server(collector, args.host, args.port, origins=origins, quiet=not args.verbose,
                                   limits=Limits.of_args(args))
    url = server_url(server, args.host)
    print(f"wgtune: collecting winners at {url}/v1/reports, bundle at {url}/v1/bundle"
          f" ({database!r}; Ctrl-C to stop)", flush=True)
    try:
        serve_until_interrupted(server)
    finally:
        database.close()
    return 0
