"""Rows saved from a malformed cache database: every one SQLite can still read, moved into the
fresh database made in its place, so that a damaged page costs its own rows, not every winner
(``sqlite_open.py`` calls these once it has set the malformed file aside)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

from wgtune.errors import StoreError

from .sqlite_look import connect_read_only
from .sqlite_rows import INSERT_IF_ABSENT, decode_row

__all__ = ["copy_rows", "readable_rows"]


def readable_rows(path: Path, timeout: float) -> Iterator[tuple[str, str, str, str] | None]:
    """Every entry row SQLite can still read in the malformed database at ``path`` (a copy set aside,
    with its ``-wal``), as (namespace text, set, key text, entry text), read one row at a time so
    that a damaged page costs only its own rows; None for each row known (through the index or
    the table) but unreadable. Nothing where the file cannot be opened or its namespaces read. A
    file cut short (a copy interrupted) gives the rows of the pages it still has."""
    try:
        connection = connect_read_only(path, timeout, truncated=True)
        namespaces = dict(connection.execute("SELECT id, namespace FROM namespaces").fetchall())
    except sqlite3.Error:
        return
    try:
        rowids: set[int] = set()
        with contextlib.suppress(sqlite3.Error):  # through the primary key's index (covering), as far as it reads
            rowids.update(rowid for (rowid,) in connection.execute(
                "SELECT rowid FROM entries ORDER BY namespace_id, set_name, key"))
        try:
            last = connection.execute("SELECT max(rowid) FROM entries").fetchone()[0] or 0
        except sqlite3.Error:  # the rightmost pages are damaged or gone (a file cut short): walk as far as rowids go
            last = 2 ** 63 - 1
        # through the table, on past a damaged page a rowid at a time (a page holds tens of rows), then
        # in growing strides: a damaged rightmost page may claim any rowid up to 2**63
        after, end, failed = 0, max(last, max(rowids, default=0)), 0
        while after < end:
            try:
                for (rowid,) in connection.execute("SELECT rowid FROM entries WHERE rowid > ? ORDER BY rowid",
                                                   (after,)):
                    rowids.add(rowid)
                    after = rowid
                break
            except sqlite3.Error:
                failed += 1
                after += 1 if failed <= 1000 else 2 ** min(failed - 1000, 62)
        for rowid in sorted(rowids):
            try:
                row = connection.execute("SELECT namespace_id, set_name, key, entry FROM entries WHERE rowid = ?",
                                         (rowid,)).fetchone()
            except sqlite3.Error:
                yield None
                continue
            # a rowid the index knows that the table cannot find is a row lost too
            yield (namespaces[row[0]], row[1], row[2], row[3]) if row is not None and row[0] in namespaces else None
    finally:
        connection.close()


def copy_rows(connection: sqlite3.Connection, rows: Iterable[tuple[str, str, str, str] | None]) -> tuple[int, int]:
    """Write ``rows`` (:func:`readable_rows`) that decode as their slot's entry where their slot is
    free, inside the caller's write transaction; (rows written, rows lost)."""
    recovered = lost = 0
    ids: dict[str, int] = {}
    for row in rows:
        if row is None:
            lost += 1
            continue
        namespace, set_name, key_text, text = row
        try:
            decode_row(text, set_name, key_text)
        except StoreError:
            lost += 1
            continue
        if namespace not in ids:
            connection.execute("INSERT INTO namespaces (namespace) VALUES (?) ON CONFLICT (namespace) DO NOTHING",
                               (namespace,))
            ids[namespace] = connection.execute("SELECT id FROM namespaces WHERE namespace = ?",
                                                (namespace,)).fetchone()[0]
        recovered += connection.execute(INSERT_IF_ABSENT, (ids[namespace], set_name, key_text, text)).rowcount
    return recovered, lost
