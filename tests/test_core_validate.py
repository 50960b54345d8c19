"""The schema check of cache documents and imports (``wgtune.store.validate``) and terminal-safe text
(``wgtune.text``): each finding of issue 12 as a case. Pure core: it runs in Pyodide as well.

The fuzz corpus (``test_store_fuzz.py``) throws thousands of generated inputs at the same code;
these name the cases one by one.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest

from wgtune import Key, StoredEntry, StoreError
from wgtune.runner import run_inline
from wgtune.store.bounded_json import MAX_DEPTH, Unreadable, nesting_depth, parse_json
from wgtune.store.confidence import Confidence
from wgtune.store.documents import DocumentStore
from wgtune.store.format import canonical_namespace, decode_document_leniently, document_text, encode_document
from wgtune.text import printable

pytestmark = pytest.mark.core

LAPTOP = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "laptop"}, "tuner": "default"}


def entry(n: int, names: tuple[str, ...] = ("a", "b")) -> StoredEntry:
    results = tuple({"name": name, "index": i, "median": 1e-3 * (i + 1), "samples": [1e-3 * (i + 1)]}
                    for i, name in enumerate(names))
    return StoredEntry("matmul", Key({"n": n}), "c0ffee", 0, names[0], results)


def document(*entries: StoredEntry) -> dict:
    return json.loads(json.dumps(encode_document(LAPTOP, entries)))


class Texts:
    """The smallest key-value store: one dict of texts, copies set aside in another."""

    def __init__(self, texts: dict[str, str] | None = None) -> None:
        self.texts, self.aside = dict(texts or {}), {}

    def name_for(self, namespace):
        return canonical_namespace(namespace)

    def describe(self, name):
        return "memory"

    async def get(self, name):
        return self.texts.get(name)

    async def put(self, name, text):
        self.texts[name] = text

    async def remove(self, name):
        return self.texts.pop(name, None) is not None

    async def names(self):
        return sorted(self.texts)

    def locked(self, name):
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def held():
            yield

        return held()

    async def set_aside(self, name, *, keep_original):
        self.aside[name] = self.texts[name] if keep_original else self.texts.pop(name)
        return name + ".corrupt"


def load(text: str) -> tuple[list[StoredEntry], Texts]:
    key_values = Texts({canonical_namespace(LAPTOP): text})
    return run_inline(DocumentStore(key_values).load(LAPTOP)), key_values


# -- parsing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1000, 200_000])
def test_a_document_nested_too_deep_is_damaged_set_aside_and_never_a_recursion_error(levels, caplog):
    nested = "[" * levels + "]" * levels
    text = json.dumps({"format": "wgtune.cache/1", **LAPTOP, "entries": []})[:-1] + f', "x": {nested}}}'
    with pytest.raises(StoreError, match="levels deep"):
        parse_json(text)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        loaded, key_values = load(text)
    assert loaded == [] and list(key_values.aside.values()) == [text]
    with pytest.raises(StoreError, match="levels deep"):
        DocumentStore.check_import(text)


def test_bytes_that_are_not_utf8_are_not_json_and_bytes_that_are_parse_as_their_text():
    with pytest.raises(StoreError, match="not JSON: not UTF-8 text"):
        parse_json(b'{"a": "\xff"}')
    assert parse_json('{"a": "é"}'.encode()) == parse_json(bytearray('{"a": "é"}'.encode())) == {"a": "é"}


def test_brackets_inside_strings_do_not_count_as_nesting():
    assert nesting_depth(json.dumps({"a": "[[[[{{{{" * 100, "b": ["\\\"[[["]})) == 2
    assert parse_json(json.dumps({"name": "[" * 1000})) == {"name": "[" * 1000}


def test_huge_numbers_and_duplicated_keys_become_markers_not_errors():
    huge = "1" * 5000
    parsed = parse_json(f'{{"a": {huge}, "b": 9223372036854775808, "c": 9223372036854775807, '
                        '"d": [{"k": 1, "k": 2}]}')
    assert isinstance(parsed["a"], Unreadable) and "5000 digits" in parsed["a"].reason
    assert isinstance(parsed["b"], Unreadable) and parsed["c"] == 2**63 - 1
    assert isinstance(parsed["d"][0], Unreadable) and "twice" in parsed["d"][0].reason
    with pytest.raises(StoreError, match="not JSON"):
        parse_json(b"\xff\xfe")


def test_a_huge_integer_costs_only_its_entry(caplog):
    text = document_text(document(entry(1), entry(2), entry(3))).replace('"n": 2', '"n": ' + "2" * 5000, 1)
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        loaded, key_values = load(text)
    assert [e.key.as_dict()["n"] for e in loaded] == [1, 3] and key_values.aside == {}
    assert "5000 digits" in caplog.text
    with pytest.raises(StoreError, match="5000 digits"):  # an import is taken whole or not at all
        DocumentStore.check_import(text)


def test_digits_that_javascript_writes_for_a_float_read_as_that_float():
    # JSON.stringify writes numbers below 1e21 without an exponent: an export an app parsed and
    # wrote again holds 150000000000000000000 where Python wrote 1.5e+20.
    parsed = parse_json('{"high": 150000000000000000000, "two63": 9223372036854776000, "neg": -1e+20, '
                        '"low": -100000000000000000000, "exact": 9223372036854775808, "odd": 123456789012345678901}')
    assert parsed["high"] == 1.5e20 and isinstance(parsed["high"], float)
    assert parsed["two63"] == 2.0**63 and parsed["low"] == parsed["neg"] == -1e20
    # Digits no float is written as (2**63 exactly, 21 digits no shorter float gives) were meant as integers.
    assert isinstance(parsed["exact"], Unreadable) and isinstance(parsed["odd"], Unreadable)
    assert "an integer of 22 digits" in parse_json('{"a": 1000000000000000000000}')["a"].reason


def test_an_export_rewritten_by_javascript_imports_with_its_confidence():
    sure = Confidence("b", 3.0, 1.2, 1.5e20, 0.95, 0.99, (4, 4))
    text = document_text(document(dataclasses.replace(entry(1), confidence=sure)))
    assert "1.5e+20" in text
    [imported] = DocumentStore.check_import(text.replace("1.5e+20", "150000000000000000000"))["entries"]
    assert imported["confidence"]["high"] == 1.5e20
    counted = text.replace('"winner": 0', '"winner": 10000000000000000000')  # a float where an index goes
    with pytest.raises(StoreError, match="winner"):
        DocumentStore.check_import(counted)


# -- entries -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"winner": 2**63 - 1}, "index in"),
        ({"winner": 2**31}, "index in"),
        ({"winner": 2}, "out of range"),
        ({"winner_name": "b"}, "not 'b'"),
        ({"table": 7}, "must be a string"),
        ({"table": "t" * 300}, "at most 256"),
        ({"checksum": ["c"]}, "must be a string"),
        ({"policy": {}}, "must be a string"),
        ({"key": {"n": float("nan")}}, "finite"),
        ({"key": {"n": [1]}}, "key field"),
        ({"confidence": {"runner_up": "b", "ratio": "2", "low": 1, "high": 3, "level": 0.95, "p_faster": 1}}, "ratio"),
        ({"checked": "yes"}, "checked"),
    ],
)
def test_a_wrong_entry_field_is_refused_naming_it(change, message):
    with pytest.raises(StoreError, match=message):
        StoredEntry.from_json({**entry(1).to_json(), **change})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"median": float("nan")}, "finite"),
        ({"median": 0}, "above 0"),
        ({"samples": []}, "non-empty"),
        ({"samples": [1e-3, float("inf")]}, "finite"),
        ({"samples": [True]}, "number"),
        ({"samples": [-1e-3]}, "above 0"),
        ({"name": "x" * 1000}, "at most 256"),
        ({"index": 5}, "candidate 5"),
        ({"error": "Exploded", "reason": "?"}, "did not run"),
        ({"error": "not a kind!", "reason": "?"}, "unknown candidate error"),
    ],
)
def test_a_wrong_winner_result_is_refused_naming_it(change, message):
    obj = entry(1).to_json()
    obj["results"][0] = {**obj["results"][0], **change}
    with pytest.raises(StoreError, match=message):
        StoredEntry.from_json(obj)


def test_the_winner_must_have_run_and_nulls_need_a_reason():
    obj = entry(1).to_json()
    obj["results"][0] = None
    with pytest.raises(StoreError, match="not_run"):
        StoredEntry.from_json(obj)
    with pytest.raises(StoreError, match="did not run"):
        StoredEntry.from_json({**obj, "not_run": "not chosen"})
    obj["results"][0] = {"name": "a", "error": "Launch", "reason": "too big"}
    with pytest.raises(StoreError, match="did not run"):
        StoredEntry.from_json(obj)


def test_what_older_and_newer_versions_write_still_reads():
    assert StoredEntry.from_json({"table": "t", "key": {"n": 1}, "checksum": "c", "winner": 3}).winner == 3
    obj = entry(1).to_json()
    obj["results"][1]["p99"] = 2e-3  # a newer result field: kept
    obj["future"] = {"x": [1, 2]}
    assert StoredEntry.from_json(obj).results[1]["p99"] == 2e-3


# -- namespaces --------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", [{"device": ["laptop"]}, {"device": {"vendor": {"v": 1}}}, {"tuner": 1e999},
                                   {"wgtune": "v" * 70_000}])
def test_a_wrong_namespace_field_damages_its_document_and_refuses_an_import(field):
    obj = {**document(entry(1)), **field}
    with pytest.raises(StoreError, match="namespace field"):
        decode_document_leniently(obj)
    with pytest.raises(StoreError, match="namespace field"):
        DocumentStore.check_import(json.dumps(obj))
    key_values = Texts({"other": json.dumps(obj)})
    [listed] = run_inline(DocumentStore(key_values).documents())
    assert listed.damage and listed.namespace == {}  # a listing never sees the wrong field


# -- terminal safety ---------------------------------------------------------------------------------


def test_printable_escapes_controls_escape_sequences_and_bidi_overrides():
    assert printable("matmul_wg64") == "matmul_wg64"
    assert printable("名前 ok") == "名前 ok"
    assert printable("\x1b[2J\x1b[31mred\r\n") == "\\x1b[2J\\x1b[31mred\\x0d\\x0a"
    assert printable("a\u202eb\u200b\x9b\x00\U000e0001") == "a\\u202eb\\u200b\\x9b\\x00\\U000e0001"
    assert printable("x" * 10, limit=4) == "xxxx…"
    assert printable(7) == "7"


def test_error_messages_quote_hostile_values_printably():
    obj = {**entry(1).to_json(), "table": "\x1b]0;owned\x07" + "t" * 500}
    with pytest.raises(StoreError) as refused:
        StoredEntry.from_json(obj)
    assert printable(str(refused.value)) == str(refused.value)
    with pytest.raises(StoreError) as refused:
        StoredEntry.from_json({**entry(1).to_json(), "winner_name": "\x1b[2J"})
    assert "\x1b" not in str(refused.value) and "\\x1b[2J" in str(refused.value)
