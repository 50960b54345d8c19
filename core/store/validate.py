"""The one schema check of what is read from a cache document or an import: nothing wrong trusted.

Everything a store or an import reads is parsed with bounds first (:mod:`.bounded_json`:
``parse_json``, which puts an :class:`~wgtune.store.bounded_json.Unreadable` marker where a value
could not be read faithfully), then checked here before it becomes a value:

- :func:`checked_entry` checks every field of an entry: types, bounds (a winner below 2**31 and
  in range of the results, names of bounded length, finite and positive medians and samples),
  and that the winner's name agrees with the result at its index; a marker anywhere rejects it;
- :func:`check_namespace_fields` checks a namespace: JSON scalars or small objects of scalars,
  so that a listing that prints them never meets a list or a marker.

Each raises :class:`~wgtune.errors.StoreError` naming what is wrong, values quoted with
:func:`~wgtune.text.shown` (escaped, cut short). Standard library only, like all of the core.
"""

from __future__ import annotations

import math

from ..errors import StoreError, error_from_json
from ..key import Key
from ..text import shown
from .bounded_json import MAX_DEPTH, Unreadable
from .confidence import Confidence

__all__ = [
    "MAX_NAME",
    "MAX_WINNER",
    "check_namespace_fields",
    "check_result",
    "checked_entry",
]

MAX_WINNER = 2**31
"""A winner's index is below this (no set has two billion candidates)."""
MAX_NAME = 256
"""Longest set name, candidate name, key field or value, checksum, timing or policy."""
MAX_TEXT = 65536
"""Longest failure reason or not-run reason (a compiler's message can be long)."""
MAX_KEY_FIELDS = 64
MAX_NAMESPACE_FIELDS = 32


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
    """Candidate ``index``'s stored result (what ``results.result_to_json`` writes), checked: a
    failure with a kind (a known one, or a later release's name: ``errors.error_from_json``) and a
    reason, a dry run, or a measurement with finite samples above 0 (and finite statistics);
    StoreError otherwise."""
    where = f"result {index}"
    if not isinstance(obj, dict):
        raise StoreError(f"{where} must be an object, got {_what(obj)}")
    _text(obj.get("name"), f"{where}'s name", empty="error" in obj)
    if "index" in obj and _index(obj["index"], f"{where}'s index", MAX_WINNER) != index:
        raise StoreError(f"{where} says it is candidate {obj['index']}")
    if "error" in obj:
        _text(obj["error"], f"{where}'s error")
        error_from_json({"error": obj["error"], "name": "", "reason": ""})  # a kind's name, else StoreError
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
