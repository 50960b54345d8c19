"""A row or record an older wgtune stored under an integral float's key text (``{"n":4096.0}``,
before such floats were held as ints) still reads as that key's entry, not as a damaged one."""

from __future__ import annotations

import json

import pytest

from wgtune import Key, StoredEntry
from wgtune.backends.idb_records import decode_record
from wgtune.backends.sqlite_rows import decode_row, entry_text
from wgtune.errors import StoreError

OLD_TEXT = '{"n":4096.0}'


def entry() -> StoredEntry:
    return StoredEntry("s", Key({"n": 4096}), "c0ffee", 0, "a")


def test_a_sqlite_row_under_the_old_float_text_reads_as_the_ints_entry() -> None:
    found = decode_row(entry_text(entry()), "s", OLD_TEXT)
    assert found.key == Key({"n": 4096}) and found.key.to_json() == '{"n":4096}'
    with pytest.raises(StoreError, match="holds the entry of"):
        decode_row(entry_text(entry()), "s", '{"n":4097.0}')


def test_an_indexeddb_record_under_the_old_float_text_reads_as_the_ints_entry() -> None:
    text = json.dumps(entry().to_json(), separators=(",", ":"))
    assert decode_record("s", OLD_TEXT, text).key == Key({"n": 4096})
    with pytest.raises(StoreError, match="holds"):
        decode_record("s", '{"n":4097}', text)
