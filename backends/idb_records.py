"""One stored winner as an IndexedDB record: ``[namespace, set, key]`` to the entry's JSON text.

Shared by the store (``indexeddb.py``) and the slice-at-a-time import and export
(``idb_transfer.py``), which the store's export goes through.
"""

from __future__ import annotations

import json

from wgtune.errors import StoreError
from wgtune.store.bounded_json import parse_json
from wgtune.store.format import StoredEntry
from wgtune.text import shown

__all__ = ["decode_record", "record_of", "slot_text"]


def record_of(namespace_text: str, entry: StoredEntry) -> list[str]:
    """An entry as ``idb.putEntries`` writes it: ``[namespace, set, key, text]``."""
    text = json.dumps(entry.to_json(), separators=(",", ":"), ensure_ascii=False)
    return [namespace_text, entry.set_name, entry.key.to_json(), text]


def slot_text(set_name: object, key_text: object) -> str:
    """A record's set and key as one string (``rpartition("\\0")`` gives them back: a key's JSON
    holds no NUL): a dict of 100k of them, text to text, is nothing Python's garbage collector
    walks, where one keyed by tuples is walked whole on its passes."""
    return f"{set_name}\0{key_text}"


def decode_record(set_name: object, key_text: object, text: object) -> StoredEntry:
    """The entry of the record at ``[namespace, set_name, key_text]``, every field checked; a
    StoreError naming what is wrong, also when the entry is not that set's and key's."""
    if not isinstance(text, str):
        raise StoreError(f"the record holds a {type(text).__name__}, not an entry's text")
    entry = StoredEntry.from_json(parse_json(text))
    if entry.set_name != set_name or not entry.key.is_slot(key_text):
        raise StoreError(f"the record of {shown(set_name)} [{shown(key_text)}] holds "
                         f"{entry.set_name} [{entry.key.to_json()}]")
    return entry
