"""Rows saved from a malformed cache database: every one SQLite can still read, moved into the
fresh database made in its place, so that a damaged page costs its own rows, not every winner
(``sqlite_open.py`` calls these once it has set the malformed file aside)."""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

from wgtune.errors import StoreError

from .sqlite_look import connect_read_only
from .sqlite_rows import INSERT_IF_ABSENT, decode_row

__all__ = ["copy_rows", "readable_rows"]


def readable_rows(path: Path, timeout: float,
                  uncounted: list[str] | None = None) -> Iterator[tuple[str, str, str, str] | None]:
    """Every entry row SQLite can still read in the malformed database at ``path`` (a copy set aside,
    with its ``-wal``), as (namespace text, set, key text, entry text), read one row at a time so
    that a damaged page costs only its own rows; then None for each row of the file that could
    not be read. Nothing where the file cannot be opened or its namespaces read. A file cut
    short (a copy interrupted) gives the rows of the pages it still has.

    How many rows could not be read is the file's count of its rows (:func:`_row_count`) less
    those read, where it can be counted; where it cannot (a file cut short lacks pages of both
    its table and its index), the rows known (through the index or the table) but unreadable:
    those of the pages that cannot be read are not known at all, so at least that many were lost,
    and ``uncounted``, where given, gets why (once the rows have been read)."""
    try:
        connection = connect_read_only(path, timeout, truncated=True)
        namespaces = dict(connection.execute("SELECT id, namespace FROM namespaces").fetchall())
    except sqlite3.Error:
        if uncounted is not None:
            cut = _cut_short(path)
            uncounted.append(f"its tables cannot be read{f' ({cut})' if cut else ''}, so how many rows it held "
                             "cannot be known")
        return
    try:
        total, why = _row_count(connection, path)
        indexed: set[int] = set()  # rows the index knows: each was a row of the table
        with contextlib.suppress(sqlite3.Error):  # through the primary key's index (covering), as far as it reads
            indexed.update(rowid for (rowid,) in connection.execute(
                "SELECT rowid FROM entries ORDER BY namespace_id, set_name, key") if _is_rowid(rowid))
        walked: set[int] = set()  # rowids of cells read walking the table (a damaged page's may be garbage)
        try:
            last = connection.execute("SELECT max(rowid) FROM entries").fetchone()[0] or 0
        except sqlite3.Error:  # the rightmost pages are damaged or gone (a file cut short): walk as far as rowids go
            last = 2 ** 63 - 1
        # through the table, on past a damaged page a rowid at a time (a page holds tens of rows), then
        # in growing strides: a damaged rightmost page may claim any rowid up to 2**63
        after, end, failed = 0, max(last, max(indexed, default=0)), 0
        while after < end:
            try:
                for (rowid,) in connection.execute("SELECT rowid FROM entries WHERE rowid > ? ORDER BY rowid",
                                                   (after,)):
                    if _is_rowid(rowid):  # not a cell of zeros (cut short), which would send the walk back to 0
                        walked.add(rowid)
                        after = rowid
                break
            except sqlite3.Error:
                failed += 1
                after += 1 if failed <= 1000 else 2 ** min(failed - 1000, 62)
        read = unreadable = 0  # rows read; rows known that could not be
        for rowid in sorted(indexed | walked):
            try:
                row = connection.execute("SELECT namespace_id, set_name, key, entry FROM entries WHERE rowid = ?",
                                         (rowid,)).fetchone()
            except sqlite3.Error:
                unreadable += 1
                continue
            if row is None:
                if rowid in indexed:  # a row the index knows that the table cannot find is a row lost too
                    unreadable += 1
                continue  # a cell the walk read in a damaged page that the table cannot find is no row known
            if row[0] not in namespaces:
                unreadable += 1
                continue
            read += 1
            yield namespaces[row[0]], row[1], row[2], row[3]
        if total is not None and total >= read:
            unreadable = total - read
        elif uncounted is not None:
            uncounted.append(why or f"it counts {total} row(s), fewer than the {read} read: its count is damaged")
        yield from itertools.repeat(None, unreadable)
    finally:
        connection.close()


def _row_count(connection: sqlite3.Connection, path: Path) -> tuple[int | None, str]:
    """How many rows the entries table holds, by SQLite's count (``count(*)``: it adds up the cells
    each page's header counts, so a damaged cell still counts), through the table's pages and
    through its index's, each where all of them are there; (count, "") where one or both give the
    same, else (None, why it cannot be told)."""
    counts: list[int] = []
    for query in ("SELECT count(*) FROM entries NOT INDEXED",
                  "SELECT count(*) FROM entries INDEXED BY sqlite_autoindex_entries_1"):
        with contextlib.suppress(sqlite3.Error):
            counts.append(connection.execute(query).fetchone()[0])
    if len(set(counts)) == 1:
        return counts[0], ""
    if counts:
        return None, f"its table counts {counts[0]} row(s) and its index {counts[1]}"
    cut = _cut_short(path)
    if cut:
        return None, f"{cut}, and how many rows the missing pages held cannot be known"
    return None, "pages of both its table and its index cannot be read, and how many rows they held cannot be known"


def _is_rowid(rowid: object) -> bool:
    """Whether a rowid read from a damaged file can be a row's: SQLite numbers rows from 1 (wgtune
    never gives one), and a damaged cell may read as 0 or NULL."""
    return isinstance(rowid, int) and rowid > 0


def _cut_short(path: Path) -> str:
    """Where the file at ``path`` holds fewer pages than its header says (a copy interrupted), that
    said: ``the file is cut short, with N whole page(s) of the P its header counts``; else an
    empty string."""
    try:
        with open(path, "rb") as file:
            header = file.read(100)
            size = os.fstat(file.fileno()).st_size
    except OSError:
        return ""
    if len(header) < 100 or header[24:28] != header[92:96]:  # the header's page count is stale (SQLite's rule)
        return ""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if not page_size or size >= pages * page_size:
        return ""
    return f"the file is cut short, with {size // page_size} whole page(s) of the {pages} its header counts"


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
