"""The fleet collector: pages report the winners they tuned; the collector serves the fleet's as a bundle.

A web app runs on GPUs it will never own. Each page that opts in (``?collector=URL``,
``wgtune.shareWinners(url)``, ``web/collector.js``) reports the winner of each key it tunes; the
collector counts them per device namespace (``collector_db.py``: agreement, not the last write)
and serves a bundle (``wgtune.store.bundle``) that later visitors with the same GPU start from.

The HTTP interface (``wgtune collect``, ``cli/collect.py``, serves it)::

    POST /v1/reports   {"format": "wgtune.reports/1", "namespace": {...}, "reports": [{...}, ...],
                        "reporter": "install id"}
                       -> 200 {"accepted": N} | 4xx {"error": "why"}: the whole batch or nothing
    GET  /v1/bundle    -> the bundle of the served winners (ETag, Cache-Control: no-cache, 304);
                          ?namespace=JSON: only that device's (what a page fetches);
                          X-Wgtune-Verified-Reporters: the agreeing reporters that verify
    GET  /v1/health    -> {"ok": true, "reports": N (ballots), "rows": N (slots), "sets": [...],
                           "min_reporters": N}

A report is exactly ``set``, ``key``, ``checksum``, ``winner`` (index), ``winner_name`` and
``confidence`` (``Confidence.to_json()`` or null), under the page's ``namespace`` (``wgtune``
version, ``device`` identity: vendor, device, driver, backend; ``tuner``), and the page's
``reporter`` install id (optional). A field beyond these, anywhere, is refused: nothing else
about the user is taken; of the request, only keyed hashes of the install id and the address
are stored (``collector_db.py``), to tell reporters apart, and no headers.

Guards, each a 4xx naming what is wrong, before anything is counted: only sets the collector
knows (the registered kernel families' sets, or those it was given), only each one's current
candidate-list checksum (a stale or forged one: 422), a winner index that exists and names its
candidate; a key of the set's fields, each of the type and in the domain its key function gives
(:class:`KeyDomain`, sampled from the registered family: 422); a body of at most :data:`MAX_BODY`
bytes (413) and :data:`MAX_REPORTS` reports, no slot twice in one batch (400); bounded field
lengths (the namespace's at most :data:`MAX_NAMESPACE_FIELD` characters); at most
:data:`MAX_NAMESPACES` device namespaces in all and :data:`MAX_NAMESPACES_PER_ADDRESS` per
address (422 for a new one past them); JSON only (415 otherwise). Each address (an IPv6 /64 as
one) has a token bucket kept in the database, shared by every collector on it
(:class:`RateLimiter`): a POST of N reports costs N tokens; past them it gets 429 with
``Retry-After`` and nothing is counted (an empty bucket: the body is not even read).
Cross-origin pages may post (CORS: ``Access-Control-Allow-Origin``, preflight).

**One vote per reporter per slot** (namespace, set, key). A reporter is the install id a page
sends (``"reporter"``: a random id it keeps, ``web/collector.js``), or without one the address;
its later report for a slot replaces its earlier vote. Install ids cost nothing to make, so one
address counts at most :data:`PER_ADDRESS` reporters per winner. A winner is served *verified*
with at least ``min_reporters`` agreeing (:data:`MIN_REPORTERS`), else *unverified*; the bundle
response says the threshold (``X-Wgtune-Verified-Reporters``), and a page takes only verified
winners, and checks each on its GPU on first use before it runs it.

What a collector cannot know is whether a tab measured honestly: that is what the count is for.
One address cannot verify a winner alone (it counts at most :data:`PER_ADDRESS` < ``min_reporters``),
and can overturn one only with as many distinct addresses as agree on it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from wgtune.errors import StoreError
from wgtune.gpu.device import DeviceIdentity
from wgtune.key import Key
from wgtune.store.bounded_json import parse_json
from wgtune.store.bundle import BundledEntry, build_bundle, bundle_text
from wgtune.store.confidence import Confidence
from wgtune.store.format import check_namespace, namespace_key
from wgtune.store.validate import checked_entry

from .collector_db import Ballot, VoteDatabase, served_winners
from .collector_sets import KeyDomain, KnownSet, known_sets

__all__ = ["MAX_BODY", "MAX_REPORTS", "MIN_REPORTERS", "PER_ADDRESS", "REPORTS_FORMAT", "Collector", "KeyDomain",
           "KnownSet", "RateLimiter", "Rejected", "Reply", "check_reports", "known_sets"]

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
"""Reports an address gets back per second: 30 reports a minute, far above a page's tunes."""
BURST = MAX_REPORTS
"""An address's bucket, in reports: a fresh page's first tunes go through at once, and so does
a POST of the most reports one may hold (a smaller bucket refuses such a batch for good)."""
MIN_REPORTERS = 3
"""Distinct agreeing reporters that make a served winner verified. Three, not two: one reporter
and one accomplice (or one mistaken machine and a near tie) must not be enough; the threshold
exceeds :data:`PER_ADDRESS`, so verification always takes at least two addresses."""
PER_ADDRESS = 2
"""Reporters one address (an IPv6 /64) counts as, at most, for one winner: a home or an office
of two GPUs of one model counts twice, a script making up install ids still counts twice."""
MAX_NAMESPACES = 10_000
"""Device namespaces a collector holds in all: a new one past it is refused (422). A fleet has
hundreds of GPU models, times drivers and browsers' backends."""
MAX_NAMESPACES_PER_ADDRESS = 8
"""Device namespaces one address may report for: a machine has one or two GPUs, seen through a
browser or two; made-up devices from one address stop here."""
MAX_NAMESPACE_FIELD = 128
"""Characters of each namespace string (wgtune version, tuner, each device field): a driver
description is the longest real one, well under this."""
REPORTER = re.compile(r"[A-Za-z0-9_-]{16,64}")
"""An install id: the random id a page keeps (web/collector.js makes 32 hex digits)."""
MAX_CACHED_BUNDLES = 1024
"""Bundles kept built (one per device asked, and the whole one), each valid while the database's
generation is the one it was built at."""


class Rejected(Exception):
    """A request the collector refuses: the HTTP ``status`` and why (sent to the client as JSON)."""

    def __init__(self, status: int, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.retry_after = status, reason, retry_after


def _check_namespace(obj: object) -> str:
    """The key of a report's namespace (exactly ``wgtune``, ``device`` and ``tuner``) under the
    namespace rule (``format.namespace_key``): reports from pages of two patch releases, or two
    driver point releases of one GPU, count for one namespace, and a bundle asked for by either
    form is the same."""
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
        if not isinstance(value, str) or len(value) > MAX_NAMESPACE_FIELD:
            raise Rejected(400, f"namespace.{name} must be a string of at most {MAX_NAMESPACE_FIELD} characters")
    try:
        return namespace_key(check_namespace(obj))
    except StoreError as bad:
        raise Rejected(400, f"namespace: {bad}") from None


def _check_report(obj: object, namespace: str, known: Mapping[str, KnownSet]) -> Ballot:
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
    domain = tunables.key_domain
    why = domain.check(fields["key"].as_dict()) if domain is not None else None
    if why is not None:
        raise Rejected(422, f"set {name!r}: {why}: no call of the set makes this key")
    confidence: Confidence | None = fields["confidence"]
    if confidence is not None and not 0.0 <= confidence.p_faster <= 1.0:
        raise Rejected(400, f"confidence.p_faster must be a probability, got {confidence.p_faster!r}")
    if confidence is not None and confidence.runner_up not in tunables.candidates:
        raise Rejected(422, f"set {name!r} has no candidate {confidence.runner_up[:100]!r} (confidence.runner_up)")
    return Ballot(namespace, name, fields["key"].to_json(), tunables.checksum, winner, tunables.candidates[winner],
                confidence.to_json() if confidence is not None else None)


@dataclass(frozen=True)
class Reports:
    """A POST's body, read: its reports as the JSON gave them (not yet checked), the namespace's
    object, and the install id it names (None: the address stands for the reporter)."""

    namespace: object
    reports: list
    reporter: str | None


def read_reports(body: bytes) -> Reports:
    """The body's envelope checked (format, fields, the reporter id, 1 to :data:`MAX_REPORTS`
    reports); the reports themselves are :func:`check_reports`'."""
    try:
        obj = parse_json(body)
    except StoreError as bad:
        raise Rejected(400, f"the body is not JSON: {bad}") from None
    if not isinstance(obj, dict):
        raise Rejected(400, "the body must be a JSON object: {format, namespace, reports, reporter}")
    extra = sorted(set(obj) - {"format", "namespace", "reports", "reporter"})
    if extra:
        raise Rejected(400, f"field(s) {extra} not accepted: the body carries only format, namespace, reports "
                            f"and reporter")
    if obj.get("format") != REPORTS_FORMAT:
        raise Rejected(400, f"format must be {REPORTS_FORMAT!r}")
    reporter = obj.get("reporter")
    if reporter is not None and not (isinstance(reporter, str) and REPORTER.fullmatch(reporter)):
        raise Rejected(400, "reporter must be an install id: 16 to 64 letters, digits, '-' or '_'")
    reports = obj.get("reports")
    if not isinstance(reports, list) or not 1 <= len(reports) <= MAX_REPORTS:
        raise Rejected(400, f"reports must be a list of 1 to {MAX_REPORTS} reports")
    return Reports(obj.get("namespace"), reports, reporter)


def check_reports(body: bytes | Reports, known: Mapping[str, KnownSet]) -> list[Ballot]:
    """The ballots of a POST's body, every report checked (see the module doc); Rejected naming
    the first thing wrong, and then nothing of the batch is counted. A slot (set, key) twice in
    one batch is refused: one reporter has one vote per slot."""
    read = body if isinstance(body, Reports) else read_reports(body)
    namespace = _check_namespace(read.namespace)
    ballots: list[Ballot] = []
    first: dict[tuple[str, str], int] = {}
    for index, report in enumerate(read.reports):
        try:
            ballot = _check_report(report, namespace, known)
        except Rejected as bad:
            raise Rejected(bad.status, f"report {index}: {bad.reason}") from None
        slot = (ballot.set_name, ballot.key)
        if slot in first:
            raise Rejected(400, f"report {index}: the slot (set {ballot.set_name!r}, key {ballot.key[:200]}) is "
                                f"report {first[slot]}'s too: one vote per reporter and slot, once per batch")
        first[slot] = index
        ballots.append(ballot)
    return ballots


@dataclass(frozen=True)
class RateLimiter:
    """The rate limit: a token bucket per address (an IPv6 /64 as one), ``burst`` reports at once,
    then ``rate`` a second; a report costs one token, so a POST of N reports costs N. The buckets
    live in the collector's database (:meth:`VoteDatabase.take`), so every collector on one
    database shares them; this is the policy only."""

    rate: float = RATE
    burst: int = BURST

    def __post_init__(self) -> None:
        if not (self.rate > 0 and self.burst >= 1):
            raise ValueError(f"a rate limit needs rate > 0 and burst >= 1, got {self.rate} and {self.burst}")


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
    sends them). A bundle is built from what the database holds, and kept only with the
    database's generation it was built at: any write, by any collector on the database, makes
    the next request build it anew, so collectors sharing a database serve the same bytes. Its
    ``built`` time is the last served change's, so an unchanged database gives byte-identical
    bundles (one ETag).

    ``min_reporters`` (:data:`MIN_REPORTERS`) agreeing reporters make a winner verified;
    ``per_address`` (:data:`PER_ADDRESS`) is the most reporters one address counts as per winner;
    the namespace limits are :data:`MAX_NAMESPACES` and :data:`MAX_NAMESPACES_PER_ADDRESS`."""

    def __init__(self, database: VoteDatabase, known: Mapping[str, KnownSet] | None = None,
                 limiter: RateLimiter | None = None, *, min_reporters: int = MIN_REPORTERS,
                 per_address: int = PER_ADDRESS, max_namespaces: int = MAX_NAMESPACES,
                 max_namespaces_per_address: int = MAX_NAMESPACES_PER_ADDRESS) -> None:
        if min_reporters < 1 or per_address < 1:
            raise ValueError(f"min_reporters and per_address must be at least 1, got {min_reporters}, {per_address}")
        self.database = database
        self.known = dict(known) if known is not None else known_sets()
        self.limiter = limiter if limiter is not None else RateLimiter()
        self.min_reporters, self.per_address = min_reporters, per_address
        self.max_namespaces, self.max_namespaces_per_address = max_namespaces, max_namespaces_per_address
        self._lock = threading.Lock()
        self._bundles: dict[str | None, tuple[int, bytes]] = {}  # namespace text (None: all) -> (generation, bytes)

    def wait(self, address: str) -> float:
        """Seconds until ``address`` may post one report (0: now), taking nothing: the HTTP edge
        asks before it reads a body."""
        return self.database.take(address, 0, rate=self.limiter.rate, burst=self.limiter.burst)

    def post_reports(self, body: bytes, address: str = "local") -> Reply:
        """Cast a POST's reports as the reporter's ballots, all or none (:func:`check_reports`),
        from client ``address``. Its reports are paid for first, one token each, checked or not:
        Rejected 429 (with ``retry_after``) when the address's bucket lacks them."""
        read = read_reports(body)
        wait = self.database.take(address, len(read.reports), rate=self.limiter.rate, burst=self.limiter.burst)
        if wait:
            more = "" if wait != float("inf") else f" (a batch of {len(read.reports)} is more than its burst)"
            raise Rejected(429, f"too many reports from this address{more}: retry in {min(wait, 3600):.0f} s",
                           retry_after=min(wait, 3600.0))
        ballots = check_reports(read, self.known)
        try:
            self.database.add(ballots, address=address, reporter=read.reporter, max_namespaces=self.max_namespaces,
                              max_namespaces_per_address=self.max_namespaces_per_address)
        except ValueError as limit:
            raise Rejected(422, str(limit)) from None
        return Reply.json(200, {"accepted": len(ballots)})

    def bundle(self, namespace: object = None) -> bytes:
        """The bundle of the served winners (``bundle_text``), for current checksums only; with
        ``namespace`` (a page's, as its JSON gives it) only that device's: what a page fetches,
        so that it downloads its own GPU's winners, not the fleet's. Rejected (400) for a
        namespace that is not one."""
        only = None if namespace is None else _check_namespace(namespace)
        generation = self.database.generation()  # read first: a write after it makes the next request rebuild
        with self._lock:
            found = self._bundles.get(only)
            if found is not None and found[0] == generation:
                return found[1]
        text = bundle_text(self._build(only)).encode()
        with self._lock:
            if len(self._bundles) >= MAX_CACHED_BUNDLES:  # many devices asked: start the cache afresh
                self._bundles.clear()
            self._bundles[only] = (generation, text)
        return text

    def _build(self, only: str | None) -> dict:
        documents: dict[str, list[BundledEntry]] = {}
        latest = 0.0
        tallies = self.database.tallies(only, per_address=self.per_address)
        for served in served_winners(tallies, self.min_reporters):
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
        ballots, slots = self.database.counts()
        return Reply.json(200, {"ok": True, "reports": ballots, "rows": slots, "sets": sorted(self.known),
                                "min_reporters": self.min_reporters})

