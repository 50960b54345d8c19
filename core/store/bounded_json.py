"""JSON read with bounds: what a store or an import parses before :mod:`.validate` checks it.

:func:`parse_json` parses text with bounds: a document nested deeper than :data:`MAX_DEPTH` is
damaged (checked on the text before parsing, so no ``RecursionError``, which in Pyodide's small
stack could be worse; :func:`nesting_depth` reads the text a window at a time, so the check needs
a few MiB whatever the text's size, and the whole parse about the size of the text plus what
``json`` builds; text dense with arrays and objects, which ``json`` builds at ~50 times their
text, is refused: see :data:`CONTAINER_SPAN`); an integer outside a signed 64-bit range, a huge
number of digits included (which ``int()`` refuses with ValueError), unless its digits are how
JavaScript writes a float (:data:`JS_PLAIN_DIGITS`), and an object with a key given twice become
an :class:`Unreadable` marker in place, so that they cost only the entry holding them (the entry
check rejects a marker), not the whole document.

Each failure is a :class:`~wgtune.errors.StoreError` naming what is wrong. Standard library only,
like all of the core.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate

from ..errors import StoreError
from ..text import shown

__all__ = [
    "CHECKED_JSON",
    "MAX_CONTAINERS",
    "MAX_DEPTH",
    "Unreadable",
    "check_bounds",
    "json_text",
    "nesting_depth",
    "parse_json",
]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a document may have (a real one has about 6)."""
MAX_INT = 2**63
"""Integers read must lie in ``[-MAX_INT, MAX_INT)``: larger ones are no size, index or count."""


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
    """``data`` as text: bytes decoded as UTF-8 with a leading byte-order mark dropped (StoreError
    when they are not UTF-8), text as it is. A caller holding large bytes may decode first and
    drop them before :func:`parse_json`."""
    if isinstance(data, (bytes, bytearray)):
        try:
            return bytes(data).decode("utf-8-sig")  # a leading byte-order mark (Windows editors) is no text
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
    (:data:`CONTAINER_SPAN`), or is itself a value that cannot be read faithfully (a whole
    document with a repeated key: an :class:`Unreadable` marker is for values inside it)."""
    text = json_text(text)
    check_bounds(text)
    try:
        value = CHECKED_JSON.decode(text)
    except RecursionError:  # cannot happen under MAX_DEPTH, unless the caller's stack is deep
        raise StoreError("nested too deep to read") from None
    except ValueError as error:  # JSONDecodeError, and a lone surrogate, say
        raise StoreError(f"not JSON: {error}") from None
    if isinstance(value, Unreadable):
        raise StoreError(f"it is {value.reason}, which JSON readers read differently")
    return value
