"""The native records sink: one JSON line per tune, appended to a file (``WGTUNE_RECORDS``).

JSON Lines because records only ever accumulate: appending a line is cheap, never rewrites what
is there, and a reader can skip a line it cannot read without losing the others. Several
processes may append to one file, so each append is made under a :class:`filelock.FileLock` on
a sibling ``.lock`` file; a line left unfinished by a process that died mid-write is closed off
before the next line, so the damage stays on that one line.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from filelock import FileLock

from wgtune.errors import StoreError
from wgtune.store.record import RECORD_KIND, TuneRecord, envelope

__all__ = ["JsonlRecords", "read_records"]

logger = logging.getLogger("wgtune")

LOCK_TIMEOUT = 60.0
"""Seconds an append waits for another process's lock; ``filelock.Timeout`` is an OSError."""


class JsonlRecords:
    """A :class:`~wgtune.store.record.RecordSink` appending each record's envelope to ``path``."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock = FileLock(str(self.path) + ".lock", timeout=LOCK_TIMEOUT)

    def __repr__(self) -> str:
        return f"JsonlRecords({str(self.path)!r})"

    def write(self, record: TuneRecord) -> None:
        """Append ``record`` as one line (its envelope, stamped now). Raises OSError."""
        line = json.dumps(envelope(record, time.time())).encode("utf-8") + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.path, "ab+") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":  # a writer died mid-line: end its line, not ours
                    line = b"\n" + line
            handle.write(line)  # append mode: lands at the end whatever the position
            handle.flush()


def _parse(line: bytes) -> tuple[dict, TuneRecord] | None:
    """A line's envelope and record; None for a line of another kind. Raises ValueError."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8: {error}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"a record line is a JSON object, got {type(obj).__name__}")
    if obj.get("kind", RECORD_KIND) != RECORD_KIND:
        return None  # a kind this version does not know: not damage, not ours
    body = obj.get("record")
    if not isinstance(body, dict):
        raise ValueError("the line has no record object")
    try:
        return obj, TuneRecord.from_json(body)
    except StoreError as bad:
        raise ValueError(str(bad)) from None


def read_records(path: str | os.PathLike) -> list[tuple[dict, TuneRecord]]:
    """Every readable record of ``path``, in file order, each with its envelope.

    Unreadable lines are skipped; how many, and where the first was, is told by one warning on
    the ``wgtune`` logger. Lines of another ``kind`` are skipped quietly. A
    missing file has no records; any other I/O failure raises OSError.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    rows: list[tuple[dict, TuneRecord]] = []
    skipped: list[tuple[int, str]] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            row = _parse(line)
        except ValueError as error:  # json.JSONDecodeError is a ValueError
            skipped.append((number, str(error)))
            continue
        if row is not None:
            rows.append(row)
    if skipped:
        first, reason = skipped[0]
        logger.warning(
            "skipped %d unreadable line(s) of %s (the first, line %d: %s)", len(skipped), path, first, reason
        )
    return rows
