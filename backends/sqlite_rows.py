"""The cache database's tables, and how a stored entry is a row of it (``sqlite_store.py``).

The schema, the statements that write an entry, and the entry's text both ways: kept apart from
the database's connection and transactions so that export and import (``cache_transfer.py``)
and the store share one definition of a row.
"""

from __future__ import annotations

import json

from wgtune.errors import StoreError
from wgtune.store.format import StoredEntry
from wgtune.text import shown

__all__ = ["INSERT_IF_ABSENT", "SCHEMA", "SCHEMA_VERSION", "UPSERT", "decode_row", "entry_text"]

SCHEMA_VERSION = 1

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS namespaces (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS entries (namespace_id INTEGER NOT NULL REFERENCES namespaces(id), "
    "set_name TEXT NOT NULL, key TEXT NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (namespace_id, set_name, key))",
    "CREATE TABLE IF NOT EXISTS damaged (id INTEGER PRIMARY KEY, namespace TEXT, set_name TEXT, key TEXT, "
    "entry TEXT NOT NULL, reason TEXT NOT NULL, at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS migrated (id INTEGER PRIMARY KEY, file TEXT NOT NULL, entries INTEGER NOT NULL, "
    "at TEXT NOT NULL)",
)

UPSERT = ("INSERT INTO entries (namespace_id, set_name, key, entry) VALUES (?, ?, ?, ?) "
          "ON CONFLICT (namespace_id, set_name, key) DO UPDATE SET entry = excluded.entry")
INSERT_IF_ABSENT = ("INSERT INTO entries (namespace_id, set_name, key, entry) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (namespace_id, set_name, key) DO NOTHING")

def entry_text(entry: StoredEntry) -> str:
    """An entry's row text: its JSON (``StoredEntry.to_json``), compact, non-ASCII kept."""
    return json.dumps(entry.to_json(), separators=(",", ":"), ensure_ascii=False)


def decode_row(text: object, set_name: object = None, key_text: object = None) -> StoredEntry:
    """A row's entry, every field checked (``StoredEntry.from_json``); StoreError naming what is wrong.

    Given the row's ``set_name`` and ``key_text`` (its columns), an entry that names another set or
    key is damaged too: a row answers for its own slot only (the store contract's lookup).

    Rows are this store's own writes (``entry_text``), so the text is parsed with plain ``json``:
    ``bounded_json.parse_json``'s guards for outside text cost four times as much, and a load reads
    every row of the namespace. What they guard against still cannot crash a load: nesting too deep
    (RecursionError), a number too long (ValueError), a field of the wrong type or out of bounds
    (``from_json``'s checks) each make the row damaged, skipped and kept aside."""
    if not isinstance(text, str | bytes):
        raise StoreError(f"the row holds {type(text).__name__}, not JSON text")
    try:
        obj = json.loads(text)
    except (RecursionError, ValueError) as error:
        raise StoreError(f"the row is not JSON: {shown(error, 200)}") from None
    try:
        entry = StoredEntry.from_json(obj)
    except (RecursionError, TypeError, ValueError) as error:  # not expected past the checks: still a skip
        raise StoreError(f"entry is malformed: {shown(error, 200)}") from None
    if set_name is not None and (entry.set_name != set_name or not entry.key.is_slot(key_text)):
        raise StoreError(f"the row of {shown(set_name)} [{shown(key_text)}] holds the entry of "
                         f"{shown(entry.set_name)} [{shown(entry.key.to_json())}]")
    return entry
