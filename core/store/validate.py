"""The one schema check of what is read from a cache document or an import: nothing wrong trusted.

Everything a store or an import reads goes through here before it becomes a value:

- :func:`parse_json` parses text with bounds: a document nested deeper than :data:`MAX_DEPTH`
  is damaged (checked on the text before parsing, so no ``RecursionError``, which in Pyodide's
  small stack could be worse; :func:`nesting_depth` reads the text a window at a time, so the
  check needs a few MiB whatever the text's size, and the whole parse about the size of the
  text plus what ``json`` builds; text dense with arrays and objects, which ``json`` builds at ~50
  times their text, is refused: see :data:`CONTAINER_SPAN`); an integer outside a signed 64-bit
  range, a huge number of digits included (which ``int()`` refuses with ValueError), unless its
  digits are how JavaScript writes a float (:data:`JS_PLAIN_DIGITS`), and an
  object with a key given twice become an :class:`Unreadable` marker in place, so that they cost
  only the entry holding them (the entry check rejects a marker), not the whole document;
- :func:`checked_entry` checks every field of an entry: types, bounds (a winner below 2**31 and
  in range of the results, names of bounded length, finite and positive medians and samples),
  and that the winner's name agrees with the result at its index;
- :func:`check_namespace_fields` checks a namespace: JSON scalars or small objects of scalars,
  so that a listing that prints them never meets a list or a marker.

Each raises :class:`~wgtune.errors.StoreError` naming what is wrong, values quoted with
:func:`~wgtune.text.shown` (escaped, cut short). Standard library only, like all of the core.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate

from ..errors import StoreError, error_from_json
from ..key import Key
from ..text import shown
from .confidence import Confidence

__all__ = [
    "CHECKED_JSON",
    "MAX_DEPTH",
    "MAX_NAME",
    "MAX_WINNER",
    "Unreadable",
    "check_bounds",
    "check_namespace_fields",
    "check_result",
    "checked_entry",
    "json_text",
    "nesting_depth",
    "parse_json",
]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a document may have (a real one has about 6)."""
MAX_INT = 2**63
"""Integers read must lie in ``[-MAX_INT, MAX_INT)``: larger ones are no size, index or count."""
MAX_WINNER = 2**31
"""A winner's index is below this (no set has two billion candidates)."""
MAX_NAME = 256
"""Longest set name, candidate name, key field or value, checksum, timing or policy."""
MAX_TEXT = 65536
"""Longest failure reason or not-run reason (a compiler's message can be long)."""
MAX_KEY_FIELDS = 64
MAX_NAMESPACE_FIELDS = 32


class Unreadable:
    """What :func:`parse_json` puts where a value could not be read faithfully (a number out of
    range, an object with a duplicated key). It is not JSON: a check that meets it rejects the
    entry (or the namespace) holding it, so it never reaches a store or a rewrite."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"<unreadable: {self.reason}>"


JS_PLAIN_DIGITS = 21
"""JavaScript writes a number below 1e21 without an exponent: ``JSON.stringify(1.5e20)`` is
``150000000000000000000``. An export that went through ``JSON.parse`` and ``JSON.stringify`` in an
app holds such digits where Python wrote ``1.5e+20`` (a confidence bound, say)."""


def _parse_int(text: str) -> int | float | Unreadable:
    digits = len(text) - text.startswith("-")
    if digits > JS_PLAIN_DIGITS:  # no need to convert (int() refuses 4300+ digits)
        return Unreadable(f"an integer of {digits} digits")
    value = int(text)
    if -MAX_INT <= value < MAX_INT:
        return value
    as_float = _javascript_float(text)
    return as_float if as_float is not None else Unreadable(f"the integer {value} (out of range)")


def _javascript_float(text: str) -> float | None:
    """The float that JavaScript writes as ``text`` (its shortest digits, then zeros), or None when
    ``text`` is not how it writes any float: such digits were meant as a float and read as one lose
    nothing, while a count or index of 20 digits stays unreadable."""
    value = float(text)
    shortest = repr(abs(value)).split("e")[0].replace(".", "").strip("0")
    return value if text.lstrip("-").rstrip("0") == shortest else None


def _parse_object(pairs: list[tuple[str, object]]) -> dict | Unreadable:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _value in pairs if key in seen or seen.add(key))
        return Unreadable(f"an object with the key {shown(twice)} twice")
    return obj


# The tokens of the depth scan: a whole string (its contents skipped: the empty group), a run of
# brackets, or a string cut off by the end of the window (group 1 holds it; always the last token).
# Possessive repeats never backtrack, so a string of any length is matched in constant memory (a
# plain ``(?:[^"\\]|\\.)*`` keeps ~100 bytes of backtracking state per character it repeats).
_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|([\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+\\?\Z)', re.DOTALL)
_STRING_REST = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_STEPS = {"[": 1, "{": 1, "]": -1, "}": -1}
SCAN_WINDOW = 1 << 20
"""Characters the depth scan reads at a time: what it holds (the window's tokens and brackets) is
bounded by the window, whatever the size of the text (~20 bytes a character at worst, ``[],[],...``)."""


def nesting_depth(text: str) -> int:
    """How deep ``text``'s arrays and objects nest, read from its brackets outside strings (an
    upper bound for text that is not JSON, which the parse then refuses anyway).

    One pass, window by window (:data:`SCAN_WINDOW`), in memory bounded by the window, not by the
    text: a string running past a window's end is skipped whole and the next window starts after it.
    """
    return _scan(text)[0]


def _scan(text: str) -> tuple[int, int]:
    """:func:`nesting_depth`, and how many arrays and objects ``text`` opens (outside strings)."""
    if "[" not in text and "{" not in text:
        return 0, 0
    depth = deepest = opened = pos = 0
    size = len(text)
    while pos < size:
        end = min(pos + SCAN_WINDOW, size)
        tokens = _TOKEN.findall(text, pos, end)
        if tokens and tokens[-1][:1] == '"':  # a string the window's end cut: skip it to its real end
            start = end - len(tokens.pop())
            rest = _STRING_REST.match(text, start + 1)
            end = rest.end() if rest else size
        brackets = "".join(tokens)  # the window's brackets outside strings, in order (strings are "")
        del tokens
        if brackets:
            deepest = max(deepest, max(accumulate(map(_STEPS.__getitem__, brackets), initial=depth)))
            opens = brackets.count("[") + brackets.count("{")
            opened += opens
            depth += 2 * opens - len(brackets)
        pos = end
    return deepest, opened


MAX_CONTAINERS = 65536
CONTAINER_SPAN = 16
"""A document may open :data:`MAX_CONTAINERS` arrays and objects, and beyond that one per
:data:`CONTAINER_SPAN` characters of it: ``json`` builds a list of ~90 bytes for each ``[]`` of two
characters (~50 times the text, bench/results/lavapipe-parse-memory.txt), so text dense with them
is refused before it is parsed. A bundle opens one per ~75 characters, an export one per ~40."""


def json_text(data: str | bytes) -> str:
    """``data`` as text: bytes decoded as UTF-8 (StoreError when they are not), text as it is.
    A caller holding large bytes may decode first and drop them before :func:`parse_json`."""
    if isinstance(data, (bytes, bytearray)):
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as error:
            raise StoreError(f"not JSON: not UTF-8 text: {error}") from None
    return data


CHECKED_JSON = json.JSONDecoder(parse_int=_parse_int, object_pairs_hook=_parse_object)
"""The decoder :func:`parse_json` parses with (one for all: ``json.loads`` with hooks builds a
decoder a call, a third of the cost of a small entry's parse)."""


def check_bounds(text: str) -> None:
    """StoreError when ``text`` nests deeper than :data:`MAX_DEPTH` or is dense with arrays and
    objects (:data:`CONTAINER_SPAN`). Text with at most :data:`MAX_DEPTH` brackets that open (inside
    strings or not) is within both bounds without a scan: what a stored entry is, 100k at a time in
    an import."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth, opened = _scan(text)
    if depth > MAX_DEPTH:
        raise StoreError(f"nested {depth} levels deep (at most {MAX_DEPTH})")
    if opened > max(MAX_CONTAINERS, len(text) // CONTAINER_SPAN):
        raise StoreError(f"{opened} arrays and objects in {len(text)} characters (at most {MAX_CONTAINERS}, or one "
                         f"per {CONTAINER_SPAN} characters: more would take ~50 times the text to parse)")


def parse_json(text: str | bytes) -> object:
    """``text`` parsed as JSON with the bounds of the module doc; StoreError when it is not JSON
    (or not UTF-8), nests deeper than :data:`MAX_DEPTH` or is dense with arrays and objects
    (:data:`CONTAINER_SPAN`)."""
    text = json_text(text)
    check_bounds(text)
    try:
        return CHECKED_JSON.decode(text)
    except RecursionError:  # cannot happen under MAX_DEPTH, unless the caller's stack is deep
        raise StoreError("nested too deep to read") from None
    except ValueError as error:  # JSONDecodeError, and a lone surrogate, say
        raise StoreError(f"not JSON: {error}") from None


# -- values --------------------------------------------------------------------------------------


def _what(value: object) -> str:
    if isinstance(value, Unreadable):
        return value.reason
    return f"{shown(value)} ({type(value).__name__})"


def _text(value: object, field: str, limit: int = MAX_NAME, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise StoreError(f"{field} must be a string, got {_what(value)}")
    if len(value) > limit:
        raise StoreError(f"{field} is {len(value)} characters long (at most {limit})")
    if not empty and not value:
        raise StoreError(f"{field} must not be empty")
    return value


def _number(value: object, field: str, *, positive: bool = False) -> float:
    """A finite number (not a bool); ``positive``: above 0, else at least 0 is not required."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise StoreError(f"{field} must be a number, got {_what(value)}")
    if not math.isfinite(value):
        raise StoreError(f"{field} must be finite, got {value!r}")
    if positive and value <= 0:
        raise StoreError(f"{field} must be above 0, got {value!r}")
    return value


def _index(value: object, field: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StoreError(f"{field} must be an integer, got {_what(value)}")
    if not 0 <= value < limit:
        raise StoreError(f"{field} must be an index in [0, {limit}), got {value}")
    return value


def _scalar(value: object, field: str, limit: int = MAX_NAME) -> None:
    """A JSON scalar: a bounded string, an integer (in range: the parse saw to it), a finite
    float, a bool or null."""
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, float):
        _number(value, field)
    elif isinstance(value, str):
        _text(value, field, limit)
    else:
        raise StoreError(f"{field} must be a string, number, bool or null, got {_what(value)}")


def _no_marker(value: object, field: str, depth: int = 0) -> None:
    """A field this version does not read (a newer wgtune's) holds nothing unreadable."""
    if isinstance(value, Unreadable):
        raise StoreError(f"{field} holds {value.reason}")
    if depth < MAX_DEPTH and isinstance(value, (dict, list)):
        for item in value.values() if isinstance(value, dict) else value:
            _no_marker(item, field, depth + 1)


# -- namespaces ----------------------------------------------------------------------------------


def check_namespace_fields(namespace: dict) -> None:
    """Every field of ``namespace`` is a JSON scalar or an object of at most
    :data:`MAX_NAMESPACE_FIELDS` scalars (a device's identity); StoreError naming the one that
    is not."""
    if len(namespace) > MAX_NAMESPACE_FIELDS:
        raise StoreError(f"a namespace has {len(namespace)} fields (at most {MAX_NAMESPACE_FIELDS})")
    for name, value in namespace.items():
        field = f"namespace field {shown(name)}"
        _text(name, field, empty=False)
        if isinstance(value, dict):
            if len(value) > MAX_NAMESPACE_FIELDS:
                raise StoreError(f"{field} has {len(value)} fields (at most {MAX_NAMESPACE_FIELDS})")
            for inner, item in value.items():
                _text(inner, f"{field}'s field {shown(inner)}", empty=False)
                _scalar(item, f"{field}'s field {shown(inner)}", MAX_TEXT)
        else:
            _scalar(value, field, MAX_TEXT)


# -- results -------------------------------------------------------------------------------------

_MEASURED_FIELDS = {"name", "index", "timing", "median", "min", "max", "mean", "variance", "score", "samples",
                    "eliminated_early", "dry_run"}
_ERROR_FIELDS = {"name", "index", "error", "reason"}


def check_result(obj: object, index: int) -> dict:
    """Candidate ``index``'s stored result (what ``results.result_to_json`` writes), checked:
    a failure of a known kind with a name and a reason, a dry run, or a measurement with finite
    samples above 0 (and finite statistics); StoreError otherwise."""
    where = f"result {index}"
    if not isinstance(obj, dict):
        raise StoreError(f"{where} must be an object, got {_what(obj)}")
    _text(obj.get("name"), f"{where}'s name", empty="error" in obj)
    if "index" in obj and _index(obj["index"], f"{where}'s index", MAX_WINNER) != index:
        raise StoreError(f"{where} says it is candidate {obj['index']}")
    if "error" in obj:
        _text(obj["error"], f"{where}'s error")
        error_from_json({"error": obj["error"], "name": "", "reason": ""})  # a known kind, else StoreError
        _text(obj.get("reason"), f"{where}'s reason", MAX_TEXT)
        known = _ERROR_FIELDS
    else:
        known = _MEASURED_FIELDS
        dry_run = obj.get("dry_run", False)
        if not isinstance(dry_run, bool):
            raise StoreError(f"{where}'s dry_run must be true or false, got {_what(dry_run)}")
        if not dry_run:
            samples = obj.get("samples")
            if not isinstance(samples, list) or not samples:
                raise StoreError(f"{where}'s samples must be a non-empty list, got {_what(samples)}")
            for sample in samples:
                _number(sample, f"{where}'s sample", positive=True)
            for stat in ("median", "min", "max", "mean", "score"):
                if stat in obj:
                    _number(obj[stat], f"{where}'s {stat}", positive=True)
            if "variance" in obj and _number(obj["variance"], f"{where}'s variance") < 0:
                raise StoreError(f"{where}'s variance must be at least 0, got {obj['variance']!r}")
            if "timing" in obj:
                _text(obj["timing"], f"{where}'s timing")
            if not isinstance(obj.get("eliminated_early", False), bool):
                raise StoreError(f"{where}'s eliminated_early must be true or false")
    for name, value in obj.items():
        if name not in known:
            _no_marker(value, f"{where}'s field {shown(name)}")
    return obj


# -- entries -------------------------------------------------------------------------------------


def _key(obj: object) -> Key:
    if not isinstance(obj, dict):
        raise StoreError(f"the key must be an object, got {_what(obj)}")
    if len(obj) > MAX_KEY_FIELDS:
        raise StoreError(f"the key has {len(obj)} fields (at most {MAX_KEY_FIELDS})")
    for name, value in obj.items():
        _text(name, "a key field's name", empty=False)
        _scalar(value, f"key field {shown(name)}")
    return Key(obj)


def _confidence(obj: object) -> Confidence | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise StoreError(f"must be an object or null, got {_what(obj)}")
    _text(obj.get("runner_up"), "runner_up")
    for name in ("ratio", "low", "high", "p_faster"):
        _number(obj.get(name), name)
    if not 0 < _number(obj.get("level"), "level") < 1:
        raise StoreError(f"level must be in (0, 1), got {obj['level']!r}")
    samples = obj.get("samples", [0, 0])
    if not isinstance(samples, list) or len(samples) != 2:
        raise StoreError(f"samples must be two counts, got {_what(samples)}")
    for count in samples:
        _index(count, "sample count", MAX_WINNER)
    for name, value in obj.items():
        _no_marker(value, f"field {shown(name)}")
    return Confidence.from_json(obj)


def _or_empty(value: object) -> object:
    """An optional text field: absent or null is the empty text."""
    return "" if value is None else value


_ENTRY_FIELDS = {"table", "key", "checksum", "winner", "winner_name", "results", "policy", "confidence", "not_run",
                 "checked"}


def checked_entry(obj: object) -> dict:
    """The fields of a ``StoredEntry`` read from ``obj`` (its JSON), every one checked (see the
    module doc); StoreError naming the first that is wrong. Absent newer fields take defaults."""
    if not isinstance(obj, dict):
        raise StoreError(f"an entry must be an object, got {_what(obj)}")
    for required in ("table", "key", "checksum", "winner"):
        if required not in obj:
            raise StoreError(f"entry lacks the field {required!r}")
    set_name = _text(obj["table"], "the set's name (table)", empty=False)
    key = _key(obj["key"])
    checksum = _text(obj["checksum"], "checksum", empty=False)
    winner = _index(obj["winner"], "winner", MAX_WINNER)
    winner_name = _text(_or_empty(obj.get("winner_name")), "winner_name")
    policy = _text(_or_empty(obj.get("policy")), "policy")
    not_run = _text(_or_empty(obj.get("not_run")), "not_run", MAX_TEXT)
    results = obj.get("results", [])
    if not isinstance(results, list):
        raise StoreError(f"entry results must be a list, got {_what(results)}")
    for index, result in enumerate(results):
        if result is None:
            if not not_run:
                raise StoreError("entry results may be null only under a not_run reason (a string)")
        else:
            check_result(result, index)
    if results:  # entries stored before results were kept have none to check against
        if winner >= len(results):
            raise StoreError(f"winner {winner} is out of range of the {len(results)} results")
        chosen = results[winner]
        if chosen is None or "error" in chosen:
            raise StoreError(f"winner {winner} did not run: {_what(chosen)}")
        if winner_name and chosen.get("name") != winner_name:
            raise StoreError(f"winner {winner} is {shown(chosen.get('name'))}, not {shown(winner_name)}")
    try:
        confidence = _confidence(obj.get("confidence"))
    except (StoreError, ValueError) as bad:
        raise StoreError(f"entry confidence: {bad}") from None
    checked = obj.get("checked", False)
    if not isinstance(checked, bool):
        raise StoreError(f"entry field checked must be true or false, got {_what(checked)}")
    for name, value in obj.items():
        if name not in _ENTRY_FIELDS:
            _no_marker(value, f"entry field {shown(name)}")
    return {
        "set_name": set_name, "key": key, "checksum": checksum, "winner": winner, "winner_name": winner_name,
        "results": tuple(results), "confidence": confidence, "policy": policy, "not_run": not_run,
        "checked": checked,
    }
