"""The fleet collector: pages report the winners they tuned; the collector serves the fleet's as a bundle.

A web app runs on GPUs it will never own. Each page that opts in (``?collector=URL``,
``wgtune.shareWinners(url)``, ``web/collector.js``) reports the winner of each key it tunes; the
collector counts them per device namespace (``collector_db.py``: agreement, not the last write)
and serves a bundle (``wgtune.store.bundle``) that later visitors with the same GPU start from.

The HTTP interface (``wgtune collect``, ``cli/collect.py``, serves it)::

    POST /v1/reports   {"format": "wgtune.reports/1", "namespace": {...}, "reports": [{...}, ...]}
                       -> 200 {"accepted": N} | 4xx {"error": "why"}: the whole batch or nothing
    GET  /v1/bundle    -> the bundle of the served winners (ETag, Cache-Control: no-cache, 304);
                          ?namespace=JSON: only that device's (what a page fetches)
    GET  /v1/health    -> {"ok": true, "reports": N, "rows": N, "sets": [...]}

A report is exactly ``set``, ``key``, ``checksum``, ``winner`` (index), ``winner_name`` and
``confidence`` (``Confidence.to_json()`` or null), under the page's ``namespace`` (``wgtune``
version, ``device`` identity: vendor, device, driver, backend; ``tuner``). A field beyond these,
anywhere, is refused: nothing else about the user is taken, and nothing about the request (no
address, no headers) is stored.

Guards, each a 4xx naming what is wrong, before anything is counted: only sets the collector
knows (the registered kernel families' sets, or those it was given), only each one's current
candidate-list checksum (a stale or forged one: 422), a winner index that exists and names its
candidate; a body of at most :data:`MAX_BODY` bytes (413) and :data:`MAX_REPORTS` reports;
bounded field lengths; JSON only (415 otherwise). Each client address has a token bucket
(:class:`RateLimiter`, in memory only): past its burst a POST gets 429 with ``Retry-After`` and
is not read. Cross-origin pages may post (CORS: ``Access-Control-Allow-Origin``, preflight).

What a collector cannot know is whether a tab measured honestly: that is what the count is for.
It counts reports, not people: one address can add reports only at its bucket's rate, and a
winner with one report is served as unverified (``"reports": 1``) for the next tab to check.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from wgtune.errors import StoreError
from wgtune.gpu.device import DeviceIdentity
from wgtune.key import Key
from wgtune.sets.tunable import TunableSet
from wgtune.store.bundle import BundledEntry, build_bundle, bundle_text
from wgtune.store.confidence import Confidence
from wgtune.store.format import canonical_namespace, check_namespace
from wgtune.store.validate import MAX_NAME, checked_entry, parse_json

from .collector_db import Vote, VoteDatabase, served_winners

__all__ = ["MAX_BODY", "MAX_REPORTS", "REPORTS_FORMAT", "Collector", "KnownSet", "RateLimiter",
           "Rejected", "Reply", "check_reports", "known_sets"]

REPORTS_FORMAT = "wgtune.reports/1"
MAX_BODY = 32 * 1024
"""Bytes a POST may carry: a batch of reports is a few KiB; anything bigger is not a page's report."""
MAX_REPORTS = 32
"""Reports in one POST: a page sends one per tune, a batch when it flushes a queue."""
MAX_KEY_FIELDS = 16
"""Fields of a reported key (the kernels' keys have 3 to 8)."""
REPORT_FIELDS = frozenset({"set", "key", "checksum", "winner", "winner_name", "confidence"})
NAMESPACE_FIELDS = frozenset({"wgtune", "device", "tuner"})
DEVICE_FIELDS = frozenset(DeviceIdentity.__dataclass_fields__)
RATE = 0.5
"""Tokens a client address gets back per second: 30 reports a minute, far above a page's tunes."""
BURST = 20
"""A client address's bucket: a fresh page's first tunes go through at once."""
MAX_CLIENTS = 10_000
"""Client buckets kept in memory; beyond, the full (idle) ones are forgotten first."""
MAX_CACHED_BUNDLES = 1024
"""Bundles kept built (one per device asked, and the whole one); all are built anew after a report."""


class Rejected(Exception):
    """A request the collector refuses: the HTTP ``status`` and why (sent to the client as JSON)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class KnownSet:
    """What the collector accepts for one set: its current checksum and its candidates' names."""

    name: str
    checksum: str
    candidates: tuple[str, ...]

    @classmethod
    def of(cls, tunables: TunableSet) -> KnownSet:
        return cls(tunables.name, tunables.checksum, tuple(kernel.name for kernel in tunables.candidates))


def known_sets(sets: Iterable[TunableSet] | None = None) -> dict[str, KnownSet]:
    """The sets a collector accepts reports for, by name: ``sets``, or by default the set of every
    registered kernel family (:data:`wgtune.kernels.families.FAMILIES`). A set whose candidates
    are made per key has no one candidate list to check against, so it is not accepted."""
    if sets is None:
        from wgtune.kernels.families import FAMILIES

        sets = [family.build() for family in FAMILIES]
    return {tunables.name: KnownSet.of(tunables) for tunables in sets if isinstance(tunables, TunableSet)}


def _check_namespace(obj: object) -> str:
    """The canonical text of a report's namespace, exactly ``wgtune``, ``device`` and ``tuner``."""
    if not isinstance(obj, dict):
        raise Rejected(400, "namespace must be an object: {wgtune, device, tuner}")
    extra, missing = set(obj) - NAMESPACE_FIELDS, NAMESPACE_FIELDS - set(obj)
    if extra or missing:
        raise Rejected(400, f"namespace must have exactly the fields {sorted(NAMESPACE_FIELDS)}"
                            f"{f'; not accepted: {sorted(extra)}' if extra else ''}"
                            f"{f'; missing: {sorted(missing)}' if missing else ''}")
    device = obj["device"]
    if not isinstance(device, dict) or set(device) != DEVICE_FIELDS:
        raise Rejected(400, f"namespace.device must be an object of exactly {sorted(DEVICE_FIELDS)}")
    for name, value in [("wgtune", obj["wgtune"]), ("tuner", obj["tuner"]),
                        *((f"device.{inner}", item) for inner, item in device.items())]:
        if not isinstance(value, str) or len(value) > MAX_NAME:
            raise Rejected(400, f"namespace.{name} must be a string of at most {MAX_NAME} characters")
    try:
        return canonical_namespace(check_namespace(obj))
    except StoreError as bad:
        raise Rejected(400, f"namespace: {bad}") from None


def _check_report(obj: object, namespace: str, known: Mapping[str, KnownSet]) -> Vote:
    """One report as a vote, or Rejected naming what is wrong with it."""
    if not isinstance(obj, dict):
        raise Rejected(400, "a report must be an object")
    extra = sorted(set(obj) - REPORT_FIELDS)
    if extra:
        raise Rejected(400, f"field(s) {extra} not accepted: a report carries only {sorted(REPORT_FIELDS)}")
    missing = sorted(REPORT_FIELDS - {"confidence"} - set(obj))
    if missing:
        raise Rejected(400, f"a report lacks {missing}")
    if isinstance(obj["key"], dict) and len(obj["key"]) > MAX_KEY_FIELDS:
        raise Rejected(400, f"the key has {len(obj['key'])} fields (at most {MAX_KEY_FIELDS})")
    entry = {"table": obj["set"], "key": obj["key"], "checksum": obj["checksum"], "winner": obj["winner"],
             "winner_name": obj["winner_name"], "confidence": obj.get("confidence")}
    try:
        fields = checked_entry(entry)  # types and lengths, as any stored entry's
    except StoreError as bad:
        raise Rejected(400, str(bad)) from None
    name = fields["set_name"]
    tunables = known.get(name)
    if tunables is None:
        raise Rejected(422, f"unknown set {name[:100]!r}: this collector takes reports for {sorted(known)}")
    if fields["checksum"] != tunables.checksum:
        raise Rejected(422, f"set {name!r}: checksum {fields['checksum'][:100]!r} is not its current candidate "
                            f"list's ({tunables.checksum}): a stale page or a forged report")
    winner = fields["winner"]
    if winner >= len(tunables.candidates):
        raise Rejected(422, f"set {name!r} has no candidate {winner} (it has {len(tunables.candidates)})")
    if fields["winner_name"] != tunables.candidates[winner]:
        raise Rejected(422, f"set {name!r}: candidate {winner} is {tunables.candidates[winner]!r}, "
                            f"not {fields['winner_name'][:100]!r}")
    confidence: Confidence | None = fields["confidence"]
    if confidence is not None and not 0.0 <= confidence.p_faster <= 1.0:
        raise Rejected(400, f"confidence.p_faster must be a probability, got {confidence.p_faster!r}")
    if confidence is not None and confidence.runner_up not in tunables.candidates:
        raise Rejected(422, f"set {name!r} has no candidate {confidence.runner_up[:100]!r} (confidence.runner_up)")
    return Vote(namespace, name, fields["key"].to_json(), tunables.checksum, winner, tunables.candidates[winner],
                confidence.to_json() if confidence is not None else None)


def check_reports(body: bytes, known: Mapping[str, KnownSet]) -> list[Vote]:
    """The votes of a POST's body, every report checked (see the module doc); Rejected naming the
    first thing wrong, and then nothing of the batch is counted."""
    try:
        obj = parse_json(body)
    except StoreError as bad:
        raise Rejected(400, f"the body is not JSON: {bad}") from None
    if not isinstance(obj, dict):
        raise Rejected(400, "the body must be a JSON object: {format, namespace, reports}")
    extra = sorted(set(obj) - {"format", "namespace", "reports"})
    if extra:
        raise Rejected(400, f"field(s) {extra} not accepted: the body carries only format, namespace and reports")
    if obj.get("format") != REPORTS_FORMAT:
        raise Rejected(400, f"format must be {REPORTS_FORMAT!r}")
    namespace = _check_namespace(obj.get("namespace"))
    reports = obj.get("reports")
    if not isinstance(reports, list) or not 1 <= len(reports) <= MAX_REPORTS:
        raise Rejected(400, f"reports must be a list of 1 to {MAX_REPORTS} reports")
    votes = []
    for index, report in enumerate(reports):
        try:
            votes.append(_check_report(report, namespace, known))
        except Rejected as bad:
            raise Rejected(bad.status, f"report {index}: {bad.reason}") from None
    return votes


@dataclass
class RateLimiter:
    """A token bucket per client address, in memory only: ``burst`` requests at once, then
    ``rate`` a second. :meth:`wait` answers 0 (go: a token taken) or the seconds until the next."""

    rate: float = RATE
    burst: int = BURST
    max_clients: int = MAX_CLIENTS
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # address -> (tokens, when)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, client: str, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, then = self._buckets.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
            self._buckets[client] = (tokens - 1.0 if wait == 0.0 else tokens, now)  # most recent last
            if len(self._buckets) > self.max_clients:
                self._forget(now)
            return wait

    def _forget(self, now: float) -> None:
        """Drop buckets that are full again (as a new client's would be), then the least recent."""
        for client, (tokens, then) in list(self._buckets.items()):
            if tokens + (now - then) * self.rate >= self.burst:
                del self._buckets[client]
        while len(self._buckets) > self.max_clients:
            del self._buckets[next(iter(self._buckets))]


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, transport-free: status, JSON or bundle body, extra headers."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def json(cls, status: int, value: object, *headers: tuple[str, str]) -> Reply:
        return cls(status, (json.dumps(value) + "\n").encode(), (("Content-Type", "application/json"), *headers))


class Collector:
    """The collector's logic over a :class:`~wgtune.backends.collector_db.VoteDatabase`, without
    sockets: :meth:`post_reports` and :meth:`bundle` answer :class:`Reply` values (the handler
    sends them). The bundle is built once per change of the tallies, and its ``built`` time is the
    last change's, so an unchanged collector serves byte-identical bundles (one ETag)."""

    def __init__(self, database: VoteDatabase, known: Mapping[str, KnownSet] | None = None,
                 limiter: RateLimiter | None = None) -> None:
        self.database = database
        self.known = dict(known) if known is not None else known_sets()
        self.limiter = limiter if limiter is not None else RateLimiter()
        self._lock = threading.Lock()
        self._bundles: dict[str | None, bytes] = {}  # by namespace text (None: every device's)

    def post_reports(self, body: bytes) -> Reply:
        """Count a POST's reports, all or none (:func:`check_reports`). The rate limit is the HTTP
        edge's: it answers 429 before reading the body, with :attr:`limiter`."""
        votes = check_reports(body, self.known)
        with self._lock:
            self.database.add(votes)
            self._bundles.clear()
        return Reply.json(200, {"accepted": len(votes)})

    def bundle(self, namespace: object = None) -> bytes:
        """The bundle of the served winners (``bundle_text``), for current checksums only; with
        ``namespace`` (a page's, as its JSON gives it) only that device's: what a page fetches,
        so that it downloads its own GPU's winners, not the fleet's. Rejected (400) for a
        namespace that is not one."""
        only = None if namespace is None else _check_namespace(namespace)
        with self._lock:
            found = self._bundles.get(only)
            if found is None:
                if len(self._bundles) >= MAX_CACHED_BUNDLES:  # many devices asked: start the cache afresh
                    self._bundles.clear()
                found = self._bundles[only] = bundle_text(self._build(only)).encode()
            return found

    def _build(self, only: str | None) -> dict:
        documents: dict[str, list[BundledEntry]] = {}
        latest = 0.0
        for served in served_winners(self.database.tallies(only)):
            tally = served.tally
            known = self.known.get(tally.set_name)
            if known is None or known.checksum != tally.checksum:
                continue  # a set this collector no longer knows, or an older candidate list
            latest = max(latest, tally.updated)
            confidence = None
            if tally.confidence is not None:
                try:
                    confidence = Confidence.from_json(tally.confidence)
                except (TypeError, ValueError):
                    confidence = None
            documents.setdefault(tally.namespace, []).append(BundledEntry(
                tally.set_name, Key.from_json(tally.key), tally.checksum, tally.winner, tally.winner_name,
                confidence=confidence, reports=served.reports))
        built = datetime.fromtimestamp(int(latest), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return build_bundle(((json.loads(text), entries) for text, entries in documents.items()), built=built)

    def health(self) -> Reply:
        reports, rows = self.database.counts()
        return Reply.json(200, {"ok": True, "reports": reports, "rows": rows, "sets": sorted(self.known)})

