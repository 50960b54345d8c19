"""The collector's storage: one vote per reporter per slot, tallied into the winner served.

A collector (``collector.py``) takes winners that pages report and serves the fleet's winners as a
bundle. What it keeps is a *ballot* per reporter and slot (device namespace, set, key): the
winner that reporter said last, and how sure its tune was. A reporter's later report for a slot
replaces its ballot; it never adds one. Its schema::

    ballots(namespace, set_name, key, reporter,       the slot, and who voted (a keyed hash)
            address,                                  the reporter's address group (a keyed hash)
            checksum, winner, winner_name,            what it voted for
            p_faster, confidence, updated)            how sure (Confidence JSON), when (Unix s)
    buckets(address, tokens, at)                      the rate limit's token buckets, one per address
    meta(name, value)                                 ``generation`` (bumped by every write), ``secret``

No address is stored: ``reporter`` and ``address`` are HMAC-SHA256 of the install id (or address)
under a random ``secret`` made once per database (so every collector on it agrees), which tells
reporters apart without saying who they are. An address group is an IPv4 address or an IPv6 /64
(one machine's share of IPv6).

**Tallies** (:meth:`VoteDatabase.tallies`): per slot, checksum and winner, the number of ballots
for it, where one address group counts at most ``per_address`` of them (its first): install ids
cost nothing to make, addresses do. **The rule** (:func:`served_winners`): per (namespace, set,
key, checksum), the winner with the most counted ballots is served; a tie goes to the higher mean
``p_faster`` (a ballot without a confidence counts as 0.5, a coin toss), then to the lower
candidate index, so that the answer never depends on the order reports came in. A served winner
carries its agreeing count, ``reports``; it is *verified* with at least ``min_reporters`` (see
``collector.py``), else *unverified*. Why ballots and not the last write, nor a count of
reports: one tab, mistaken (a noisy machine) or malicious, must not decide what every later
visitor with that GPU runs, however often it posts. The confidence served is the least sure
agreeing ballot's: the claim every agreeing tune supports.

``generation`` makes bundles cheap and never stale: a collector keeps a built bundle with the
generation it was built at, and serves it again only while the database's generation is the same,
so any number of collectors on one database serve the same bundle after a write to any of them.

SQLite by default (standard library; a path); PostgreSQL for a ``postgresql://`` URL through
psycopg (imported only then: ``pip install 'wgtune[collector-postgres]'``). The SQL is written
once, with ``?`` parameters, and given to psycopg with ``%s``; both dialects take the same
``ON CONFLICT ... DO UPDATE`` upsert. One connection, used under a lock, so the server's threads
share it; each batch of reports is one transaction (all of it is counted, or none). Tables of
the earlier schema (``votes``: counts without reporters) are left as they are and not read.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wgtune.errors import StoreError

from .sqlite_look import tables_of

__all__ = ["SCHEMA", "Ballot", "Served", "Tally", "VoteDatabase", "address_group", "served_winners"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ballots ("
    "namespace TEXT NOT NULL, set_name TEXT NOT NULL, key TEXT NOT NULL, reporter TEXT NOT NULL, "
    "address TEXT NOT NULL, checksum TEXT NOT NULL, winner INTEGER NOT NULL, winner_name TEXT NOT NULL, "
    "p_faster DOUBLE PRECISION, confidence TEXT, updated DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (namespace, set_name, key, reporter))",
    "CREATE INDEX IF NOT EXISTS ballots_by_address ON ballots (address, namespace)",
    "CREATE TABLE IF NOT EXISTS buckets (address TEXT PRIMARY KEY, tokens DOUBLE PRECISION NOT NULL, "
    "at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX IF NOT EXISTS buckets_by_time ON buckets (at)",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
TABLES = ("ballots", "buckets", "meta")
KNOWN_TABLES = frozenset({*TABLES, "votes"})
"""Tables a collector database may have: this schema's, and the earlier one's (``votes``)."""

# A reporter's ballot for a slot: made, or replaced by its later report (never a second one).
UPSERT = (
    "INSERT INTO ballots (namespace, set_name, key, reporter, address, checksum, winner, winner_name, "
    "p_faster, confidence, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (namespace, set_name, key, reporter) DO UPDATE SET "
    "address = excluded.address, checksum = excluded.checksum, winner = excluded.winner, "
    "winner_name = excluded.winner_name, p_faster = excluded.p_faster, confidence = excluded.confidence, "
    "updated = excluded.updated"
)
SELECT_BALLOTS = ("SELECT namespace, set_name, key, checksum, winner, winner_name, address, p_faster, confidence, "
                  "updated FROM ballots")
COUNT = "SELECT COUNT(*), COUNT(DISTINCT namespace || ' ' || set_name || ' ' || key) FROM ballots"
BUMP = "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE name = 'generation'"
# The bucket's tokens now (refilled at ``rate`` since ``at``, at most ``burst``): written as CASE,
# which both dialects take (SQLite's two-argument min() is PostgreSQL's LEAST()).
REFILLED = "(CASE WHEN tokens + (? - at) * ? > ? THEN ? ELSE tokens + (? - at) * ? END)"

UNSURE = 0.5
"""The ``p_faster`` a ballot without a confidence counts as in a tie: no better than a coin toss."""


def address_group(address: str) -> str:
    """The unit one bucket and one ``per_address`` share stand for: an IPv4 address, an IPv6 /64
    (one subscriber's whole prefix: its 2**64 addresses are one), the text itself otherwise."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{parsed}/64", strict=False))
    return str(parsed)


@dataclass(frozen=True)
class Ballot:
    """One accepted report as the database keeps it: texts are canonical JSON (namespace, key);
    who cast it is given beside it (:meth:`VoteDatabase.add`)."""

    namespace: str
    set_name: str
    key: str
    checksum: str
    winner: int
    winner_name: str
    confidence: dict | None  # Confidence.to_json(), or None (a tune that ranked one candidate)


@dataclass(frozen=True)
class Tally:
    """One winner of one slot: how many ballots named it (as counted, see the module doc), and
    how sure they were."""

    namespace: str
    set_name: str
    key: str
    checksum: str
    winner: int
    winner_name: str
    reports: int
    p_sum: float
    p_count: int
    confidence: dict | None
    updated: float

    @property
    def mean_p(self) -> float:
        """Mean ``p_faster`` of its ballots, those without a confidence counted as :data:`UNSURE`."""
        return (self.p_sum + UNSURE * (self.reports - self.p_count)) / self.reports


@dataclass(frozen=True)
class Served:
    """The winner served for one slot (see the module doc's rule): ``reports`` distinct reporters
    agree with it, out of ``total``; verified with at least ``min_reporters`` agreeing."""

    tally: Tally
    total: int
    min_reporters: int = 3

    @property
    def reports(self) -> int:
        return self.tally.reports

    @property
    def verified(self) -> bool:
        return self.tally.reports >= self.min_reporters


def served_winners(tallies: Iterable[Tally], min_reporters: int = 3) -> list[Served]:
    """The served winner of every slot (namespace, set, key, checksum) among ``tallies``: the rule
    of the module doc. In the order of the slots' texts."""
    slots: dict[tuple[str, str, str, str], list[Tally]] = {}
    for tally in tallies:
        slots.setdefault((tally.namespace, tally.set_name, tally.key, tally.checksum), []).append(tally)
    served = []
    for slot in sorted(slots):
        rows = slots[slot]
        best = max(rows, key=lambda row: (row.reports, row.mean_p, -row.winner))
        served.append(Served(best, sum(row.reports for row in rows), min_reporters))
    return served


class VoteDatabase:
    """The ballots, buckets and generation, in SQLite (a path) or PostgreSQL (a ``postgresql://``
    URL): see the module doc.

    Failures of the database raise OSError (a bad path, a server that does not answer); a
    ``postgresql://`` URL without psycopg installed is a StoreError saying what to install.
    """

    def __init__(self, target: str | Path) -> None:
        self.target = str(target)
        self.postgres = self.target.startswith(("postgresql://", "postgres://"))
        self._lock = threading.Lock()
        self._connection = self._connect()
        with self._transaction() as cursor:
            for statement in SCHEMA:
                cursor.execute(statement)
            for name, value in (("generation", "0"), ("secret", secrets.token_hex(32))):
                cursor.execute(self._sql("INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"),
                               (name, value))
            cursor.execute("SELECT value FROM meta WHERE name = 'secret'")
            secret = cursor.fetchone()[0]
        try:
            self._secret = bytes.fromhex(secret)  # the first collector's: all agree
        except (TypeError, ValueError):
            raise StoreError(f"{self!r}: its meta secret is not hex text: damaged, or not wgtune's") from None

    def __repr__(self) -> str:
        shown = self.target.split("@")[-1] if self.postgres else self.target  # never a password
        return f"VoteDatabase({shown!r})"

    def _connect(self) -> Any:
        if self.postgres:
            try:
                import psycopg
            except ImportError:
                raise StoreError("a postgresql:// database needs psycopg: pip install 'wgtune[collector-postgres]'") \
                    from None
            try:
                self._errors = (psycopg.Error,)
                return psycopg.connect(self.target)
            except psycopg.Error as error:
                raise OSError(f"cannot connect to the collector's PostgreSQL database: {error}") from None
        self._errors = (sqlite3.Error,)
        path = Path(self.target)
        if path.is_dir():
            raise OSError(f"{path} is a directory: give the collector database's file (e.g. {path / 'fleet.sqlite3'})")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # Read first through a connection that cannot write: another program's database (a
            # cache database, say) is neither switched to WAL nor given the collector's tables.
            foreign = sorted(tables_of(path) - KNOWN_TABLES)
            if foreign:
                raise StoreError(f"{path} is not a wgtune collector database (it has the tables "
                                 f"{', '.join(repr(name[:40]) for name in foreign[:8])}); not touching it: give --db "
                                 "a new file, or a collector database")
            connection = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as error:
            raise OSError(f"cannot open the collector database {path}: {error}") from None
        return connection

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.postgres else statement

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A cursor in one transaction, under the lock: committed at the end, rolled back on any
        error; the driver's errors raised as OSError."""
        with self._lock:
            try:
                cursor = self._connection.cursor()
                try:
                    yield cursor
                    self._connection.commit()
                finally:
                    cursor.close()
            except self._errors as error:
                self._recover()
                raise OSError(f"the collector database failed: {error}") from error
            except BaseException:
                with suppress(*self._errors):
                    self._connection.rollback()
                raise

    def _recover(self) -> None:
        """After a failed statement: roll back, and where the connection itself is gone (a
        PostgreSQL server restarted) open a new one, so that the next request can succeed."""
        with suppress(*self._errors):
            self._connection.rollback()
        if getattr(self._connection, "closed", False):
            with suppress(OSError, StoreError):  # still down: the next request tries again
                self._connection = self._connect()

    def hashed(self, kind: str, text: str) -> str:
        """``text`` (an address group, an install id) as stored: a keyed hash, never the text."""
        return hmac.new(self._secret, f"{kind}:{text}".encode(), hashlib.sha256).hexdigest()[:32]

    def add(self, ballots: Iterable[Ballot], *, address: str, reporter: str | None = None,
            max_namespaces: int | None = None, max_namespaces_per_address: int | None = None,
            now: float | None = None) -> int:
        """Cast ``ballots`` for one reporter (its install id, else its address), all in one
        transaction that also bumps the generation; how many. A namespace new to the database
        past ``max_namespaces`` in all, or new to this address past ``max_namespaces_per_address``,
        is a ValueError naming the limit, and nothing is cast."""
        at = time.time() if now is None else now
        group = self.hashed("address", address_group(address))
        voter = self.hashed("install", reporter) if reporter is not None else self.hashed("address-only", group)
        rows = []
        for ballot in ballots:
            p = ballot.confidence["p_faster"] if ballot.confidence is not None else None
            text = json.dumps(ballot.confidence, sort_keys=True) if ballot.confidence is not None else None
            rows.append((ballot.namespace, ballot.set_name, ballot.key, voter, group, ballot.checksum, ballot.winner,
                         ballot.winner_name, p, text, at))
        with self._transaction() as cursor:
            for namespace in sorted({row[0] for row in rows}):
                self._check_new_namespace(cursor, namespace, group, max_namespaces, max_namespaces_per_address)
            for row in rows:
                cursor.execute(self._sql(UPSERT), row)
            cursor.execute(BUMP)
        return len(rows)

    def _check_new_namespace(self, cursor: Any, namespace: str, group: str, most: int | None,
                             most_per_address: int | None) -> None:
        if most_per_address is not None:
            cursor.execute(self._sql("SELECT DISTINCT namespace FROM ballots WHERE address = ?"), (group,))
            mine = {row[0] for row in cursor.fetchall()}
            if namespace not in mine and len(mine) >= most_per_address:
                raise ValueError(f"this address reported for {len(mine)} devices already, the most one address "
                                 f"may (a new device namespace is not taken from it)")
        if most is not None:
            cursor.execute(self._sql("SELECT 1 FROM ballots WHERE namespace = ? LIMIT 1"), (namespace,))
            if cursor.fetchone() is None:
                cursor.execute("SELECT COUNT(DISTINCT namespace) FROM ballots")
                if cursor.fetchone()[0] >= most:
                    raise ValueError(f"the collector holds {most} device namespaces, its limit: a new device "
                                     f"is not taken")

    def take(self, address: str, cost: int, *, rate: float, burst: float, now: float | None = None) -> float:
        """Take ``cost`` tokens from the bucket of ``address``'s group (a new one is full: ``burst``;
        it refills at ``rate`` a second): 0.0 when taken, else the seconds until there are enough
        (nothing taken; never, for a cost above the burst: then ``inf``). One atomic UPDATE, so
        every collector on the database shares each bucket. ``cost`` 0 takes nothing, only asks."""
        at = time.time() if now is None else now
        group = self.hashed("address", address_group(address))
        refilled = self._sql(REFILLED)
        refill_args = (at, rate, burst, burst, at, rate)
        with self._transaction() as cursor:
            cursor.execute(self._sql("INSERT INTO buckets (address, tokens, at) VALUES (?, ?, ?) "
                                     "ON CONFLICT (address) DO NOTHING"), (group, float(burst), at))
            if cost:
                cursor.execute(self._sql(f"UPDATE buckets SET tokens = {refilled} - ?, at = ? ")
                               + self._sql(f"WHERE address = ? AND {refilled} >= ?"),
                               (*refill_args, cost, at, group, *refill_args, cost))
                if cursor.rowcount == 1:
                    self._forget_full(cursor, at, rate, burst)
                    return 0.0
            cursor.execute(self._sql(f"SELECT {refilled} FROM buckets WHERE address = ?"), (*refill_args, group))
            tokens = float(cursor.fetchone()[0])
        if tokens >= max(cost, 1):
            return 0.0
        return float("inf") if cost > burst else (max(cost, 1) - tokens) / rate

    def _forget_full(self, cursor: Any, at: float, rate: float, burst: float) -> None:
        """Drop the buckets full again (as a new address's would be): the table holds the active only."""
        cursor.execute(self._sql("DELETE FROM buckets WHERE at < ?"), (at - burst / rate,))

    def generation(self) -> int:
        """The write counter: bumped by every :meth:`add`, by any collector on the database."""
        with self._transaction() as cursor:
            cursor.execute("SELECT value FROM meta WHERE name = 'generation'")
            return int(cursor.fetchone()[0])

    def tallies(self, namespace: str | None = None, *, per_address: int | None = None) -> list[Tally]:
        """Every slot's winners (of one namespace's text, if given: the primary key's first column,
        so an indexed read), each a :class:`Tally` of its ballots, an address group counting at
        most ``per_address`` of them (its earliest); a ballot whose confidence text is unreadable
        has none."""
        with self._transaction() as cursor:
            if namespace is None:
                cursor.execute(SELECT_BALLOTS)
            else:
                cursor.execute(self._sql(f"{SELECT_BALLOTS} WHERE namespace = ?"), (namespace,))
            rows = cursor.fetchall()
        groups: dict[tuple, list[tuple]] = {}
        for row in rows:
            groups.setdefault(tuple(row[:5]), []).append(row)
        tallies = []
        for (space, set_name, key, checksum, winner), ballots in groups.items():
            ballots.sort(key=lambda row: (row[9], row[6]))  # earliest first
            counted, per_group = [], {}
            for row in ballots:
                per_group[row[6]] = per_group.get(row[6], 0) + 1
                if per_address is None or per_group[row[6]] <= per_address:
                    counted.append(row)
            sure = [row for row in counted if row[7] is not None]
            least = min(sure, key=lambda row: row[7]) if sure else None
            tallies.append(Tally(space, set_name, key, checksum, int(winner), counted[0][5], len(counted),
                                 sum(float(row[7]) for row in sure), len(sure),
                                 _confidence(least[8]) if least is not None else None,
                                 max(float(row[9]) for row in counted)))
        return tallies

    def counts(self) -> tuple[int, int]:
        """How many ballots are held (one per reporter and slot), and for how many slots."""
        with self._transaction() as cursor:
            cursor.execute(COUNT)
            ballots, slots = cursor.fetchone()
        return int(ballots), int(slots)

    def close(self) -> None:
        with self._lock:
            self._connection.close()


def _confidence(text: object) -> dict | None:
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except (RecursionError, ValueError):
        return None
    return value if isinstance(value, dict) else None
