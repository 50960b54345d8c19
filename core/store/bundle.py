"""Bundles: one versioned file of winners for many devices, shipped with a web app or a program.

A web app runs on GPUs it will never own; its users' browsers (or a farm) tune them. A bundle
gathers what they learned so that a later user with the same GPU starts from it: the tuner's
cache is *seeded* from the bundle's entries for its own namespace (:meth:`TuneCache.seed
<wgtune.cache.TuneCache.seed>`), each as a stored winner is, Unchecked, so the cache compares
its checksum with the set's current candidates on the key's first claim: a Hit when they match,
a Miss (tuned as usual) when the bundle is stale. Nothing here re-decides that. A seed must also
name its winner as the set names the candidate at its index (:func:`misnamed`): one that does not
is ignored on its first claim, with the reason logged, and the key is tuned.

Namespaces are matched by the namespace rule (:func:`~wgtune.store.format.reduced_namespace`):
wgtune's major.minor and the driver's major version, so a bundle of a newer wgtune patch release
or of another driver point release of the same GPU seeds, one of another minor wgtune does not.
:func:`build_bundle` writes reduced namespaces (merging the point releases of one GPU), and
:func:`entries_for` reads a bundle written with full versions too.

The format (JSON, :func:`bundle_text` writes it canonically)::

    {"format": "wgtune.bundle/1", "built": "2026-12-01T02:30:00Z", "wgtune": "0.1.0",
     "namespaces": [{<namespace fields, as in exports>, "entries": [<entry>, ...]}, ...]}

An entry is a :class:`~wgtune.store.format.StoredEntry`'s JSON trimmed to what seeding needs (set,
key, checksum, winner, winner_name, confidence, policy, checked): every candidate's results are
dropped to keep bundles small. It may carry ``"reports": N``, how many agreeing reports stand
behind it (a collector counts them): read back as a :class:`BundledEntry`.

Standard library only: it runs in Pyodide too (the page's loader reads bundles with it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ..errors import StoreError
from ..text import shown
from ..version import __version__
from .bounded_json import Unreadable, json_text, parse_json
from .format import (
    RESERVED_FIELDS,
    StoredEntry,
    canonical_namespace,
    check_namespace,
    namespace_key,
    namespaces_matching,
    reduced_namespace,
)
from .validate import MAX_WINNER

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_LIMIT",
    "BundledEntry",
    "build_bundle",
    "bundle_text",
    "entries_for",
    "misnamed",
    "read_bundle",
    "reports_of",
]

BUNDLE_FORMAT = "wgtune.bundle/1"
_FORMAT_NAME = BUNDLE_FORMAT.rsplit("/", 1)[0]

BUNDLE_LIMIT = 128 * 1024 * 1024
"""The largest bundle read, in bytes: one is parsed whole and kept as stored entries (~7.3 times its
size at the peak, bench/results/lavapipe-parse-memory.txt), and a web app's bundle holds a few
thousand winners (~300 bytes each), so 128 MiB is room for ~440 000 and a load within ~1 GiB. A
larger file is refused before it is read (:func:`check_bundle_size`)."""

SEEDING_FIELDS = ("table", "key", "checksum", "winner", "winner_name", "confidence", "policy", "checked")
"""The entry fields a bundle keeps: what seeding a cache needs (the results are dropped)."""

_BUILT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


@dataclass(frozen=True)
class BundledEntry(StoredEntry):
    """A stored entry as a bundle carries it: with how many agreeing reports stand behind it
    (0: not counted). A collector makes these; :func:`read_bundle` gives them back."""

    reports: int = 0


def reports_of(entry: StoredEntry) -> int:
    """How many reports stand behind ``entry`` (0 for a plain stored entry)."""
    return entry.reports if isinstance(entry, BundledEntry) else 0


def _strength(entry: StoredEntry) -> tuple:
    """How strongly ``entry`` stands: the merge keeps the stronger (see :func:`build_bundle`)."""
    confidence = entry.confidence
    sure = (1, confidence.p_faster, confidence.low, confidence.ratio) if confidence is not None else (0, 0.0, 0.0, 0.0)
    return (*sure, entry.checked, reports_of(entry), json.dumps(_entry_json(entry), sort_keys=True))


def _entry_json(entry: StoredEntry) -> dict:
    full = entry.to_json()
    trimmed = {name: full[name] for name in SEEDING_FIELDS if name in full}
    trimmed["checked"] = entry.checked
    if reports_of(entry):
        trimmed["reports"] = reports_of(entry)
    return trimmed


def build_bundle(documents: Iterable[tuple[dict, Iterable[StoredEntry]]], *, built: str | None = None) -> dict:
    """A bundle (a JSON-ready dict) of ``documents``, each a namespace and its entries.

    Each namespace is written reduced (:func:`~wgtune.store.format.reduced_namespace`), so sources
    of one GPU under two driver point releases or wgtune patch releases are one namespace.
    Sources may overlap (two caches of the same GPU, a bundle and its own source): for one
    (namespace, set, key) the merge keeps the entry with the higher confidence, that is the
    higher ``p_faster``, then the higher ``low`` (the surer speedup), then ``ratio``; an entry
    without a confidence loses to any with one; on a tie a checked entry beats an unchecked one,
    then more reports win, then the entry's JSON text decides (so the result never depends on
    the sources' order). Reports are not added up: two sources may count the same reports.
    Namespaces are ordered by their canonical text, entries by set and key, so the same winners
    give the same bundle. ``built`` (ISO-8601 UTC) defaults to now. Raises StoreError for a
    namespace that cannot be stored (see :func:`~wgtune.store.format.check_namespace`).
    """
    merged: dict[str, tuple[dict, dict[tuple, StoredEntry]]] = {}
    for namespace, entries in documents:
        namespace = reduced_namespace(check_namespace(namespace))
        _, slots = merged.setdefault(namespace_key(namespace), (namespace, {}))
        for entry in entries:
            slot = (entry.set_name, entry.key.to_json())
            known = slots.get(slot)
            if known is None or _strength(entry) > _strength(known):
                slots[slot] = entry
    built = built if built is not None else datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _check_built(built)
    return {
        "format": BUNDLE_FORMAT,
        "built": built,
        "wgtune": __version__,
        "namespaces": [
            {**namespace, "entries": [_entry_json(slots[slot]) for slot in sorted(slots)]}
            for _, (namespace, slots) in sorted(merged.items())
        ],
    }


def bundle_text(bundle: dict) -> str:
    """A bundle as it is written: canonical JSON (sorted keys, no spaces), ending with a newline."""
    return json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def _check_built(built: object) -> str:
    if not isinstance(built, str) or not _BUILT.fullmatch(built):
        raise StoreError(f"the bundle's built time must be ISO-8601 UTC text like '2026-12-01T02:30:00Z', "
                         f"got {shown(built)}")
    try:
        datetime.fromisoformat(built.replace("Z", "+00:00"))
    except ValueError as bad:
        raise StoreError(f"the bundle's built time {shown(built)} is no date: {bad}") from None
    return built


def _bundled(raw: object, where: str) -> StoredEntry:
    try:
        entry = StoredEntry.from_json(raw)
    except StoreError as bad:
        raise StoreError(f"{where}: {bad}") from None
    reports = raw.get("reports", 0)  # from_json saw that raw is an object
    if isinstance(reports, bool) or not isinstance(reports, int) or not 0 <= reports < MAX_WINNER:
        shown_reports = reports.reason if isinstance(reports, Unreadable) else shown(reports)
        raise StoreError(f"{where}: reports must be a count (an integer from 0), got {shown_reports}")
    if not reports:
        return entry
    return BundledEntry(**{name: getattr(entry, name) for name in entry.__dataclass_fields__}, reports=reports)


def check_bundle_size(size: int, max_bytes: int = BUNDLE_LIMIT) -> None:
    """StoreError when a bundle of ``size`` bytes is over ``max_bytes``: checked before a bundle is
    read (the file's size from ``stat``), and again on what was read (at most ``max_bytes + 1``)."""
    if size > max_bytes:
        raise StoreError(f"the bundle is {size} bytes, over the bundle limit of {max_bytes} bytes")


def parse_bundle(data: str | bytes, *, max_bytes: int = BUNDLE_LIMIT) -> list[tuple[dict, list[StoredEntry]]]:
    """A bundle's text (a file's bytes, or the text a page fetched) parsed with bounds
    (:func:`~wgtune.store.bounded_json.parse_json`) and read (:func:`read_bundle`); StoreError for text
    over ``max_bytes`` (characters, for a ``str``), before it is parsed."""
    check_bundle_size(len(data), max_bytes)
    data = json_text(data)  # the bytes dropped now (when the caller holds none), not after the parse
    obj = parse_json(data)
    del data
    return read_bundle(obj)


def read_bundle(obj: object) -> list[tuple[dict, list[StoredEntry]]]:
    """Every namespace of a bundle and its entries, ``obj`` as :func:`~wgtune.store.bounded_json.parse_json`
    parsed it; every field checked first. Raises StoreError naming the first thing wrong (its
    format or version, the built time, a namespace, an entry, a namespace or key given twice):
    a bundle is taken whole or not at all, as an import is."""
    if isinstance(obj, Unreadable):
        raise StoreError(f"the bundle is {obj.reason}")
    if not isinstance(obj, dict):
        raise StoreError(f"a wgtune bundle is a JSON object, got {type(obj).__name__}")
    found = obj.get("format")
    if not isinstance(found, str) or not found.startswith(_FORMAT_NAME + "/"):
        raise StoreError(f"not a wgtune bundle (format {shown(found)}, want {BUNDLE_FORMAT!r})")
    if found != BUNDLE_FORMAT:
        raise StoreError(f"bundle version {shown(found[len(_FORMAT_NAME) + 1:])} is not one this wgtune "
                         f"({__version__}) reads (it reads {BUNDLE_FORMAT!r})")
    _check_built(obj.get("built"))
    if not isinstance(obj.get("wgtune"), str) or not obj["wgtune"]:
        raise StoreError(f"the bundle's wgtune version must be a non-empty string, got {shown(obj.get('wgtune'))}")
    namespaces = obj.get("namespaces")
    if not isinstance(namespaces, list):
        raise StoreError(f"the bundle's namespaces must be a list, got {shown(namespaces)}")
    documents: list[tuple[dict, list[StoredEntry]]] = []
    seen: set[str] = set()
    for position, document in enumerate(namespaces):
        where = f"namespace {position} of the bundle"
        if not isinstance(document, dict):
            raise StoreError(f"{where} must be an object, got {shown(document)}")
        raw_entries = document.get("entries")
        if not isinstance(raw_entries, list):
            raise StoreError(f"{where}: its entries must be a list, got {shown(raw_entries)}")
        namespace = {name: value for name, value in document.items() if name not in RESERVED_FIELDS}
        if not namespace:
            raise StoreError(f"{where} has no namespace fields (a device, a tuner, a wgtune version)")
        try:
            namespace = check_namespace(namespace)
        except StoreError as bad:
            raise StoreError(f"{where}: {bad}") from None
        text = canonical_namespace(namespace)
        if text in seen:
            raise StoreError(f"{where} is given twice: {shown(text)}")
        seen.add(text)
        entries, slots = [], set()
        for index, raw in enumerate(raw_entries):
            entry = _bundled(raw, f"entry {index} of {where}")
            if entry.slot in slots:
                raise StoreError(f"entry {index} of {where}: {entry.set_name} [{entry.key}] is given twice")
            slots.add(entry.slot)
            entries.append(entry)
        documents.append((namespace, entries))
    return documents


def entries_for(documents: Iterable[tuple[dict, Iterable[StoredEntry]]], namespace: dict) -> list[StoredEntry]:
    """The entries of ``documents`` (as :func:`read_bundle` gives them) for ``namespace`` (a
    device's, :func:`~wgtune.store.format.namespace_for`): none for a device the bundle does not know.

    Every namespace of the bundle that reads as ``namespace`` counts (the same
    :func:`~wgtune.store.format.namespace_key`: the same GPU, tuner and wgtune major.minor, under
    any driver point release or wgtune patch release). Of a slot two of them hold, the entry of the
    preferred namespace is given (:func:`~wgtune.store.format.namespaces_matching`: ``namespace``'s
    own text, then the newest release's), so each slot comes once."""
    by_text: dict[str, list[StoredEntry]] = {}
    for found, entries in documents:
        by_text.setdefault(canonical_namespace(found), []).extend(entries)
    chosen: dict[tuple, StoredEntry] = {}
    for text in reversed(namespaces_matching(namespace, by_text)):  # the preferred last: it wins its slots
        chosen.update((entry.slot, entry) for entry in by_text[text])
    return list(chosen.values())


def misnamed(entry: StoredEntry, tunables: object) -> str | None:
    """Why ``entry``'s winner does not name the candidate its index points to in ``tunables`` (a
    :class:`~wgtune.sets.tunable.TunableSet` of the entry's key), or None when it does.

    A bundle drops the results that let a stored entry's name be checked when it is read, so a
    seed's name is checked against the set instead: an index that points to another candidate
    than the one named (a bundle built from a list ordered otherwise, a mistake, a forgery) is
    never run. Only asked of a seed of the set's current candidates (the same checksum): of other
    candidates it is a Miss anyway."""
    candidates = tunables.candidates  # type: ignore[attr-defined]
    if not 0 <= entry.winner < len(candidates):
        return None  # out of range: the checksum and range checks already make it a Miss
    name = candidates[entry.winner].name
    if entry.winner_name == name:
        return None
    return (f"the bundle's winner of {entry.set_name} [{entry.key}] is candidate {entry.winner} named "
            f"{shown(entry.winner_name)}, but the set's candidate {entry.winner} is {shown(name)}: ignored, "
            f"the key is tuned")
