"""Bounded parsing (issue 27 item 5): what is read from outside is parsed in memory proportional to
its size, and a file over its stated limit is refused before it is read.

The depth scan (``bounded_json.nesting_depth``) once cost ~120 bytes a character of one string (a regex
over the whole text); it now reads the text window by window. These check that it counts what the
old scan counted, on random text and every window size, and that its memory no longer grows with a
string's length. Pure core, except the file limits (a bundle read through ``backends.local``).
"""

from __future__ import annotations

import json
import os
import random
import re
import tracemalloc
from itertools import accumulate

import pytest

from wgtune import StoreError
from wgtune.store import bounded_json
from wgtune.store.bounded_json import MAX_DEPTH, nesting_depth, parse_json
from wgtune.store.bundle import BUNDLE_LIMIT, bundle_text, check_bundle_size, parse_bundle

# The pure-core tests are marked core (they also run inside Pyodide); the file limits read through the
# native backend (backends.local), which the page does not have.

_OLD_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_OLD_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_OLD_STEP = str.maketrans({"[": "+", "{": "+", "]": "-", "}": "-"})


def old_nesting_depth(text: str) -> int:
    """The scan this replaced, verbatim (a regex over the whole text), as the reference; below 0
    (closers first) read as 0, which the new scan gives and which is no nesting either way."""
    brackets = _OLD_NOT_BRACKET.sub("", _OLD_STRING.sub("", text)) if "[" in text or "{" in text else ""
    if not brackets:
        return 0
    return max(0, max(accumulate(1 if step == "+" else -1 for step in brackets.translate(_OLD_STEP))))


def random_value(rng: random.Random, depth: int) -> object:
    """A JSON value nesting up to ``depth`` levels, its strings full of brackets, quotes and escapes."""
    kind = rng.randrange(5) if depth > 0 else rng.randrange(3)
    if kind == 0:
        return "".join(rng.choice(['[', ']', '{', '}', '"', '\\', '\\"', 'a', '\n', 'é', '😀', '\\\\'])
                       for _ in range(rng.randrange(12)))
    if kind == 1:
        return rng.choice([0, -1, 1.5, True, None])
    if kind == 2:
        return rng.choice(["", "[[[", '"]}', "\\"])
    if kind == 3:
        return [random_value(rng, depth - 1) for _ in range(rng.randrange(4))]
    return {f"k{i}[{{\"": random_value(rng, depth - 1) for i in range(rng.randrange(4))}


@pytest.mark.core
def test_the_scan_counts_what_the_old_scan_counted_on_random_documents_at_every_window_size(monkeypatch):
    rng = random.Random(27)
    for _ in range(400):
        text = json.dumps(random_value(rng, rng.randrange(8)), ensure_ascii=rng.random() < 0.5)
        expected = old_nesting_depth(text)
        for window in (1, 2, 3, 7, bounded_json.SCAN_WINDOW):
            monkeypatch.setattr(bounded_json, "SCAN_WINDOW", window)
            assert nesting_depth(text) == expected, (text, window)


@pytest.mark.core
def test_the_scan_counts_what_the_old_scan_counted_on_random_text_that_is_not_json(monkeypatch):
    rng = random.Random(5)
    alphabet = ['[', ']', '{', '}', '"', '\\', 'a', ',', '\n', '😀']
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(30)))
        for window in (1, 2, 5, bounded_json.SCAN_WINDOW):
            monkeypatch.setattr(bounded_json, "SCAN_WINDOW", window)
            assert nesting_depth(text) == old_nesting_depth(text), (text, window)


def test_the_scan_counts_what_the_old_scan_counted_on_the_fuzz_corpus(monkeypatch):
    from test_store_fuzz import HOSTILE_VALUES, text_mutation, write

    rng = random.Random(11)
    texts = [write({"entries": [value], "x": value}) for value in HOSTILE_VALUES]
    texts += [text_mutation(rng, texts[rng.randrange(len(texts))])[0] for _ in range(60)]
    for text in texts:
        for window in (3, 1000, bounded_json.SCAN_WINDOW):
            monkeypatch.setattr(bounded_json, "SCAN_WINDOW", window)
            assert nesting_depth(text) == old_nesting_depth(text)


@pytest.mark.core
def test_a_string_cut_by_a_window_in_the_middle_of_an_escape_is_skipped_whole(monkeypatch):
    text = json.dumps({"a": 'x\\"[[[' * 50, "b": [[1]]})
    for window in range(1, 40):
        monkeypatch.setattr(bounded_json, "SCAN_WINDOW", window)
        assert nesting_depth(text) == 3


@pytest.mark.core
def test_a_string_of_4_mib_parses_in_well_under_10_times_its_size():
    text = json.dumps({"device": 'x[{\\"}]\\\\' * (4 * 1024 * 1024 // 10)})
    tracemalloc.start()
    try:
        assert nesting_depth(text) == 1
        depth_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        parse_json(text)
        parse_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the scan: about one window (a string cut by its end is copied once), not ~120 bytes a character
    assert depth_peak < 2 * bounded_json.SCAN_WINDOW < len(text) // 2
    assert parse_peak < 10 * len(text)  # the parse: the string itself, and json's own copy while building it


@pytest.mark.core
def test_a_deep_document_is_still_refused_with_its_depth_named():
    with pytest.raises(StoreError, match=f"nested 100000 levels deep \\(at most {MAX_DEPTH}\\)"):
        parse_json("[" * 100_000 + "]" * 100_000)
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


@pytest.mark.core
def test_text_dense_with_arrays_is_refused_before_json_builds_them_and_a_real_document_is_not():
    dense = "[" + "[]," * bounded_json.MAX_CONTAINERS + "[]]"
    with pytest.raises(StoreError, match=f"{bounded_json.MAX_CONTAINERS + 2} arrays and objects in {len(dense)} "
                                         f"characters \\(at most {bounded_json.MAX_CONTAINERS}, or one per 16"):
        parse_json(dense)
    assert len(parse_json("[" + "[]," * (bounded_json.MAX_CONTAINERS - 2) + "[]]")) == bounded_json.MAX_CONTAINERS - 1
    padded = "[" + '["0123456789abcd"],' * bounded_json.MAX_CONTAINERS + "[]]"  # one per 19 characters
    assert len(parse_json(padded)) == bounded_json.MAX_CONTAINERS + 1
    entries = [{"table": "matmul", "key": {"n": i}, "checksum": "c0ffee", "winner": 0, "winner_name": "a",
                "confidence": {"samples": [1, 2]}} for i in range(30_000)]
    assert len(parse_json(json.dumps({"entries": entries}, separators=(",", ":")))["entries"]) == 30_000


# -- limits before reading ----------------------------------------------------------------------------


BUNDLE = {"built": "2026-12-01T02:30:00Z", "format": "wgtune.bundle/1", "wgtune": "0.1.0", "namespaces": [
    {"wgtune": "0.1.0", "tuner": "default", "device": {"vendor": "v", "device": "laptop"}, "entries": [
        {"table": "matmul", "key": {"n": 1}, "checksum": "c0ffee", "winner": 0, "winner_name": "a"}]}]}


@pytest.mark.core
def test_bundle_text_over_the_limit_is_refused_before_it_is_parsed(monkeypatch):
    text = bundle_text(BUNDLE)
    assert len(parse_bundle(text)[0][1]) == 1

    def never(_text):
        raise AssertionError("parsed")

    monkeypatch.setattr("wgtune.store.bundle.parse_json", never)
    with pytest.raises(StoreError, match=f"is {len(text)} bytes, over the bundle limit of {len(text) - 1} bytes"):
        parse_bundle(text, max_bytes=len(text) - 1)
    with pytest.raises(StoreError, match="over the bundle limit"):
        check_bundle_size(BUNDLE_LIMIT + 1)


def test_a_bundle_file_over_the_limit_is_refused_before_a_byte_is_read(tmp_path, monkeypatch):
    from wgtune.backends.local import load_bundle

    huge = tmp_path / "huge-bundle.json"
    with open(huge, "wb") as out:  # sparse: 1 GiB on paper, nothing on disk
        out.truncate(1024 * 1024 * 1024)
    reads = []
    real_open = open

    class Counting:
        def __init__(self, file):
            self.file = file

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def fileno(self):
            return self.file.fileno()

        def read(self, *args):
            reads.append(args)
            return self.file.read(*args)

    monkeypatch.setattr("builtins.open", lambda *a, **k: Counting(real_open(*a, **k)))
    with pytest.raises(StoreError, match=f"huge-bundle.json: the bundle is {2**30} bytes, over the bundle limit "
                                         f"of {BUNDLE_LIMIT} bytes"):
        load_bundle(huge)
    assert reads == []


def test_a_bundle_file_under_the_limit_loads_and_one_over_a_given_limit_is_refused(tmp_path):
    from wgtune.backends.local import load_bundle

    path = tmp_path / "bundle.json"
    path.write_text(bundle_text(BUNDLE), encoding="utf-8")
    assert len(load_bundle(path)[0][1]) == 1
    with pytest.raises(StoreError, match=r"bundle\.json: the bundle is \d+ bytes, over the bundle limit of 10 bytes"):
        load_bundle(path, max_bytes=10)


def test_a_bundle_file_whose_size_stat_cannot_tell_is_read_no_further_than_the_limit(tmp_path, monkeypatch):
    from wgtune.backends.local import load_bundle

    path = tmp_path / "bundle.json"
    path.write_text(bundle_text(BUNDLE) + " " * 1000, encoding="utf-8")
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], 0, *real_fstat(fd)[7:])))
    with pytest.raises(StoreError, match="the bundle is 101 bytes, over the bundle limit of 100 bytes"):
        load_bundle(path, max_bytes=100)  # a pipe, or a file that grew: limit + 1 bytes read, then refused
