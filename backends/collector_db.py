"""The collector's storage: agreeing reports counted per winner, and the rule that picks the one served.

A collector (``collector.py``) takes winners that pages report and serves the fleet's winners as a
bundle. What it keeps is a tally, not the reports: one row per (device namespace, set, key,
checksum, winner) with how many reports named that winner and the sum of their ``p_faster`` (how
sure each tune was, ``Confidence.p_faster``). No address, no time of day per report, nothing about
who reported: a report adds one to a count. Its schema::

    votes(namespace, set_name, key, checksum, winner,    the slot and the winner reported for it
          winner_name, reports, p_sum, p_count,          how many reports; sum and count of p_faster
          confidence, p_min,                             the least sure report's Confidence (JSON)
          updated)                                       when the row last changed (Unix seconds)

**The rule** (:func:`served_winners`): per (namespace, set, key, checksum), the winner with the
most reports is served; a tie goes to the higher mean ``p_faster`` (a report without a confidence
counts as 0.5, a coin toss), then to the lower candidate index, so that the answer never depends
on the order reports came in. A served winner carries its agreeing count, ``reports``: with one
it is *unverified* (one tab said so, nothing agrees), with two or more *verified*. Why counts and
not the last write: one tab, mistaken (a noisy machine) or malicious, must not decide what every
later visitor with that GPU runs; it can add one report, and the next tab re-verifies it.
The confidence served is the least sure agreeing report's: the claim every agreeing tune supports.

SQLite by default (standard library; a path); PostgreSQL for a ``postgresql://`` URL through
psycopg (imported only then: ``pip install 'wgtune[collector-postgres]'``). The SQL is written
once, with ``?`` parameters, and given to psycopg with ``%s``; both dialects take the same
``ON CONFLICT ... DO UPDATE`` upsert. One connection, used under a lock, so the server's threads
share it; each batch of reports is one transaction (all of it is counted, or none).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wgtune.errors import StoreError

__all__ = ["SCHEMA", "Served", "Tally", "Vote", "VoteDatabase", "served_winners"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS votes ("
    "namespace TEXT NOT NULL, set_name TEXT NOT NULL, key TEXT NOT NULL, checksum TEXT NOT NULL, "
    "winner INTEGER NOT NULL, winner_name TEXT NOT NULL, reports INTEGER NOT NULL, "
    "p_sum DOUBLE PRECISION NOT NULL, p_count INTEGER NOT NULL, confidence TEXT, p_min DOUBLE PRECISION, "
    "updated DOUBLE PRECISION NOT NULL, PRIMARY KEY (namespace, set_name, key, checksum, winner))",
)

# One report more for its winner; the least sure confidence kept (a report without one keeps the row's).
UPSERT = (
    "INSERT INTO votes (namespace, set_name, key, checksum, winner, winner_name, reports, p_sum, p_count, "
    "confidence, p_min, updated) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?) "
    "ON CONFLICT (namespace, set_name, key, checksum, winner) DO UPDATE SET "
    "reports = votes.reports + 1, p_sum = votes.p_sum + excluded.p_sum, "
    "p_count = votes.p_count + excluded.p_count, "
    "confidence = CASE WHEN excluded.p_min IS NOT NULL AND (votes.p_min IS NULL OR excluded.p_min < votes.p_min) "
    "THEN excluded.confidence ELSE votes.confidence END, "
    "p_min = CASE WHEN excluded.p_min IS NOT NULL AND (votes.p_min IS NULL OR excluded.p_min < votes.p_min) "
    "THEN excluded.p_min ELSE votes.p_min END, "
    "updated = excluded.updated"
)
SELECT_ALL = ("SELECT namespace, set_name, key, checksum, winner, winner_name, reports, p_sum, p_count, confidence, "
              "updated FROM votes")
COUNT = "SELECT COALESCE(SUM(reports), 0), COUNT(*) FROM votes"

UNSURE = 0.5
"""The ``p_faster`` a report without a confidence counts as in a tie: no better than a coin toss."""


@dataclass(frozen=True)
class Vote:
    """One accepted report as the database counts it: texts are canonical JSON (namespace, key)."""

    namespace: str
    set_name: str
    key: str
    checksum: str
    winner: int
    winner_name: str
    confidence: dict | None  # Confidence.to_json(), or None (a tune that ranked one candidate)


@dataclass(frozen=True)
class Tally:
    """One row: how many reports named ``winner`` for the slot, and how sure they were."""

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
        """Mean ``p_faster`` of its reports, those without a confidence counted as :data:`UNSURE`."""
        return (self.p_sum + UNSURE * (self.reports - self.p_count)) / self.reports


@dataclass(frozen=True)
class Served:
    """The winner served for one slot (see the module doc's rule): ``reports`` agree with it, out
    of ``total`` reports for the slot; verified with two or more agreeing."""

    tally: Tally
    total: int

    @property
    def reports(self) -> int:
        return self.tally.reports

    @property
    def verified(self) -> bool:
        return self.tally.reports >= 2


def served_winners(tallies: Iterable[Tally]) -> list[Served]:
    """The served winner of every slot (namespace, set, key, checksum) among ``tallies``: the rule
    of the module doc. In the order of the slots' texts."""
    slots: dict[tuple[str, str, str, str], list[Tally]] = {}
    for tally in tallies:
        slots.setdefault((tally.namespace, tally.set_name, tally.key, tally.checksum), []).append(tally)
    served = []
    for slot in sorted(slots):
        rows = slots[slot]
        best = max(rows, key=lambda row: (row.reports, row.mean_p, -row.winner))
        served.append(Served(best, sum(row.reports for row in rows)))
    return served


class VoteDatabase:
    """The tallies, in SQLite (a path) or PostgreSQL (a ``postgresql://`` URL): see the module doc.

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

    def add(self, votes: Iterable[Vote], *, now: float | None = None) -> int:
        """Count ``votes``, all in one transaction; how many."""
        at = time.time() if now is None else now
        rows = []
        for vote in votes:
            p = vote.confidence["p_faster"] if vote.confidence is not None else None
            text = json.dumps(vote.confidence, sort_keys=True) if vote.confidence is not None else None
            rows.append((vote.namespace, vote.set_name, vote.key, vote.checksum, vote.winner, vote.winner_name,
                         p or 0.0, 0 if p is None else 1, text, p, at))
        with self._transaction() as cursor:
            for row in rows:
                cursor.execute(self._sql(UPSERT), row)
        return len(rows)

    def tallies(self, namespace: str | None = None) -> list[Tally]:
        """Every row (of one namespace's text, if given: the primary key's first column, so an
        indexed read), each a :class:`Tally`; a row whose confidence text is unreadable has none."""
        with self._transaction() as cursor:
            if namespace is None:
                cursor.execute(SELECT_ALL)
            else:
                cursor.execute(self._sql(f"{SELECT_ALL} WHERE namespace = ?"), (namespace,))
            rows = cursor.fetchall()
        return [Tally(*row[:9], _confidence(row[9]), float(row[10])) for row in rows]

    def counts(self) -> tuple[int, int]:
        """How many reports were counted, and in how many rows."""
        with self._transaction() as cursor:
            cursor.execute(COUNT)
            reports, rows = cursor.fetchone()
        return int(reports), int(rows)

    def close(self) -> None:
        with self._lock:
            self._connection.close()


def _confidence(text: object) -> dict | None:
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
