"""Where winners are kept between processes: the namespace, the entry and the document format.

A store holds the winners of one *namespace*: one device (vendor, device, driver, backend), one
tuner name, one wgtune release line; so one GPU's winners never serve another. A namespace keeps
only what decides *which GPU and which wgtune line* (:func:`reduced_namespace`): the wgtune
version's major.minor and the driver's major version, so that a wgtune patch release or a driver
point update keeps every winner; whether a winner is still of the set's current candidates is the
checksum's question, asked on the key's first claim. Namespaces written before that rule (the full
version texts) read as the reduced one they map to (:func:`namespaces_matching`). What a store promises
(reads never crash on damaged data, a save replaces one slot, lookup answers one slot or nothing)
is the contract of ``contract.py``; this module is the format it keeps entries in, and the
in-memory store.

The document format (JSON) is shared by the file store and the export/import of winners; the
SQLite and IndexedDB stores keep each entry as its own record, in the entry's JSON of this format.
New fields get defaults, so older documents still decode. The logic
that keeps documents (merging, damaged data, export and import) is in ``documents.py``; what is
read is parsed with bounds and checked field by field (``bounded_json.py``, ``validate.py``: parse with
:func:`~wgtune.store.bounded_json.parse_json`, then decode here), so nothing wrong is trusted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ..errors import Skip, StoreError
from ..gpu.device import DeviceIdentity
from ..key import Key
from ..text import json_kind, shown, shown_json
from ..version import __version__
from .bounded_json import Unreadable, parse_json
from .confidence import Confidence
from .results import Result, result_from_json
from .validate import check_namespace_fields, checked_entry

__all__ = [
    "DOCUMENT_FORMAT",
    "EXPORT_FORMAT",
    "WRITE_PENDING",
    "MemoryStore",
    "StoredEntry",
    "canonical_namespace",
    "check_namespace",
    "decode_document",
    "decode_document_leniently",
    "decode_export",
    "document_text",
    "encode_document",
    "encode_export",
    "namespace_for",
    "namespace_key",
    "namespace_of",
    "namespaces_matching",
    "read_namespace",
    "reduced_driver",
    "reduced_namespace",
    "reduced_version",
]

DOCUMENT_FORMAT = "wgtune.cache/1"
EXPORT_FORMAT = "wgtune.export/1"

RESERVED_FIELDS = ("format", "entries")
"""The document's own top-level fields: a namespace field of one of these names would clash."""


_RELEASE_LINE = re.compile(r"(\d+)\.(\d+)(?=$|[.+-]|[a-z])")
"""A version's major.minor at its start: ``0.1.7`` -> ``0.1``, ``0.2.0rc1`` -> ``0.2``."""

_DOTTED_NUMBER = re.compile(r"(?<![\d.])(\d+)(?:\.\d+)+(?![\d.]*\d)")
"""A version number in a driver's text (digits joined by dots): it keeps its first number."""


def reduced_version(version: str) -> str:
    """A wgtune version as a namespace keeps it: its major.minor (``"0.1.7"`` -> ``"0.1"``).

    Why the release line and not the full version: a patch release fixes bugs without changing
    what a stored winner means (the keys, the candidates' meaning, the measuring), and winners of
    candidates it did change are caught by their checksum. A minor release (or a major one) may
    change what the checksum cannot see, so its winners start afresh. Text that is not a version
    is kept as it is."""
    line = _RELEASE_LINE.match(version)
    return f"{line[1]}.{line[2]}" if line else version


def reduced_driver(driver: str) -> str:
    """A driver's text as a namespace keeps it: every dotted version number in it cut to its
    first number, the rest kept (``"580.95.05"`` -> ``"580"``, ``"Mesa 25.0.7 (LLVM 19.1.7)"`` ->
    ``"Mesa 25 (LLVM 19)"``, Chrome's ``""`` stays ``""``).

    Why the major version: NVIDIA's first number is its driver branch (580), Mesa's the year of
    its releases (25); the numbers after it are updates of that branch, whose compilers make the
    same code of the same WGSL or near enough that a winner stays the winner, and a winner that
    no longer compiles is demoted and tuned again. A change the tuner would see as a different
    GPU (a new branch) still starts afresh."""
    return _DOTTED_NUMBER.sub(r"\1", driver)


def reduced_namespace(namespace: dict) -> dict:
    """``namespace`` under the current namespace rule (see the module doc): its ``wgtune`` cut to
    major.minor (:func:`reduced_version`), its ``device``'s ``driver`` to the major version
    (:func:`reduced_driver`); every other field as it is. A reduced namespace reduces to itself;
    one written before the rule (full versions) reduces to the namespace the same GPU and wgtune
    line has now. Fields of other types are kept as they are (a namespace of one's own)."""
    reduced = dict(namespace)
    if isinstance(reduced.get("wgtune"), str):
        reduced["wgtune"] = reduced_version(reduced["wgtune"])
    device = reduced.get("device")
    if isinstance(device, dict) and isinstance(device.get("driver"), str):
        reduced["device"] = {**device, "driver": reduced_driver(device["driver"])}
    return reduced


def namespace_for(identity: DeviceIdentity, tuner: str = "default") -> dict:
    """The namespace of ``identity``'s winners under tuner ``tuner`` for this wgtune release line
    (:func:`reduced_namespace`: the same after a wgtune patch release or a driver point update)."""
    return reduced_namespace({"wgtune": __version__, "device": identity.as_dict(), "tuner": tuner})


def namespace_key(namespace: dict) -> str:
    """What namespaces are matched by: the canonical text of the reduced namespace. Two
    namespaces with the same key hold winners of the same GPU and wgtune line."""
    return canonical_namespace(reduced_namespace(namespace))


def _release_numbers(text: str) -> tuple:
    """How new the release a namespace's text names is: its wgtune version's and driver's numbers."""
    namespace = namespace_of(text)
    device = namespace.get("device")
    driver = device.get("driver") if isinstance(device, dict) else None
    # Each number as (digits, text): compared as numbers are, without int() (which refuses text
    # of thousands of digits, and a namespace's text is read from the store).
    numbers = [[(len(n), n) for n in (digits.lstrip("0") or "0" for digits in re.findall(r"\d+", value))]
               if isinstance(value, str) else [] for value in (namespace.get("wgtune"), driver)]
    return tuple(tuple(found) for found in numbers)


def namespaces_matching(namespace: dict, stored: Iterable[str]) -> list[str]:
    """The canonical texts among ``stored`` that read as ``namespace`` (the same
    :func:`namespace_key`): a store's own namespace and those written under earlier namespace
    rules (full versions). Ordered by preference, for a slot more than one of them holds:
    ``namespace``'s own text first (when stored), then the newest release first (wgtune version,
    then driver), then by text, so the order never depends on the order stored."""
    own, wanted, stored = canonical_namespace(namespace), namespace_key(namespace), set(stored)
    others = {text for text in stored if text != own and namespace_key(namespace_of(text)) == wanted}
    newest_first = sorted(others, key=lambda text: (_release_numbers(text), text), reverse=True)
    return ([own] if own in stored else []) + newest_first


def canonical_namespace(namespace: dict) -> str:
    """One text per namespace (sorted keys, no spaces): how stores compare and index them."""
    return json.dumps(namespace, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def read_namespace(text: object) -> dict:
    """A namespace from its canonical text (:func:`canonical_namespace`) as a store keeps it,
    checked as a document's namespace is: parsed with bounds (:func:`~wgtune.store.bounded_json.parse_json`:
    no RecursionError, no huge integers), a JSON object of scalars or small objects of scalars
    (:func:`~wgtune.store.validate.check_namespace_fields`), no field named as the document's own.
    StoreError naming what is wrong."""
    if not isinstance(text, str):
        raise StoreError(f"a namespace is JSON text, got {type(text).__name__}")
    namespace = parse_json(text)
    if not isinstance(namespace, dict):
        raise StoreError(f"a namespace is a JSON object, got {shown(text, 80)}")
    check_namespace_fields(namespace)
    clash = [name for name in RESERVED_FIELDS if name in namespace]
    if clash:
        raise StoreError(f"namespace fields {clash} clash with the document's own fields")
    return namespace


def namespace_of(text: object) -> dict:
    """A namespace from its canonical text (:func:`read_namespace`), for a listing; text that is
    not a namespace reads as ``{"unreadable": <the text, cut short>}`` rather than failing it."""
    try:
        return read_namespace(text)
    except StoreError:
        return {"unreadable": shown(text, 200)}


def check_namespace(namespace: dict) -> dict:
    """``namespace`` as it will be stored (a JSON round trip: a copy the caller cannot mutate).

    Raises StoreError when a field is named like one of the document's own fields
    (:data:`RESERVED_FIELDS`): the document puts the namespace's fields beside them; or when a
    field is not a JSON scalar or a small object of scalars (see
    :func:`~wgtune.store.validate.check_namespace_fields`): a document holding it would read as damaged.
    """
    clash = [name for name in RESERVED_FIELDS if name in namespace]
    if clash:
        raise StoreError(f"namespace fields {clash} clash with the document's own fields {list(RESERVED_FIELDS)}")
    check_namespace_fields(namespace)
    return json.loads(canonical_namespace(namespace))


@dataclass(frozen=True)
class StoredEntry:
    """A key's winner as stored: under the checksum of the candidate list it was tuned with,
    with every candidate's result, the policy that sampled them and how sure it was of the
    winner (entries stored before confidence existed have none). ``checked``: the tune ran the
    output checks (``Config.checks``), so its winner agreed with the reference; an entry without
    it is tuned again, once, by a tuner with checks on.

    ``set_name`` is the tunable set's name; its JSON field is ``"table"``, as documents have
    always named it.
    """

    set_name: str
    key: Key
    checksum: str
    winner: int
    winner_name: str
    results: tuple[dict | None, ...] = ()
    confidence: Confidence | None = None
    policy: str = ""
    not_run: str = ""
    checked: bool = False

    def to_json(self) -> dict:
        return {
            "table": self.set_name,
            "key": self.key.as_dict(),
            "checksum": self.checksum,
            "winner": self.winner,
            "winner_name": self.winner_name,
            "results": list(self.results),
            "policy": self.policy,
            "confidence": self.confidence.to_json() if self.confidence is not None else None,
            **({"not_run": self.not_run} if self.not_run else {}),
            **({"checked": True} if self.checked else {}),
        }

    @classmethod
    def from_json(cls, obj: object) -> StoredEntry:
        """An entry read back from its JSON (``obj`` as :func:`~wgtune.store.bounded_json.parse_json` parsed
        it), every field checked first (:func:`~wgtune.store.validate.checked_entry`): types, bounds, the
        winner in range and named as its result. Raises StoreError naming what is wrong."""
        try:
            return cls(**checked_entry(obj))
        except (TypeError, ValueError) as bad:  # not expected past the checks: still never a crash
            raise StoreError(f"entry is malformed: {shown(bad, 200)}") from None

    def decoded_results(self) -> tuple[Result, ...]:
        """Every candidate's result as a value (``Measured`` or a failure), in the set's order.

        ``results`` stays JSON so that an entry keeps what it read (newer fields too); this
        decodes it. A candidate the tune never ran for the entry's ``not_run`` reason (a search
        that measured a few of thousands) is stored as null, not as a result naming it: it comes
        back as ``Skip`` with that reason and no name (the set knows it). Raises StoreError for a
        result that cannot be read.
        """
        try:
            return tuple(Skip("", self.not_run) if result is None else result_from_json(result, index)
                         for index, result in enumerate(self.results))
        except StoreError as bad:
            raise StoreError(f"{self.set_name} [{self.key}]: {bad}") from None
        except (AttributeError, KeyError, TypeError, ValueError) as bad:
            raise StoreError(f"{self.set_name} [{self.key}]: a stored result is malformed: {bad!r}") from None

    @property
    def slot(self) -> tuple[str, Key]:
        """Where the entry is kept: one entry per set and key."""
        return (self.set_name, self.key)


WRITE_PENDING = "pending"
"""What :meth:`Store.save` answers when the write goes on in the background (IndexedDB's)."""


@dataclass
class MemoryStore:
    """A store that lives as long as the process: for tests, and for ``WGTUNE_CACHE=off``-like uses.

    It keeps the :class:`~wgtune.store.contract.Store` contract (``tests/test_store_contract.py``)
    with every member written out: it cannot inherit the protocol's defaults (``contract.py``
    imports this module). It holds values, so nothing in it can be damaged; a save is "durable"
    for as long as the process lives.
    """

    namespace: dict = field(default_factory=dict)
    entries: dict[tuple[str, Key], StoredEntry] = field(default_factory=dict)
    where = "memory"
    read_by_key = False  # the tuner takes every entry at open: a dict is read whole at no cost

    def load(self) -> list[StoredEntry]:
        return list(self.entries.values())

    def lookup(self, set_name: str, key: Key) -> StoredEntry | None:
        return self.entries.get((set_name, key))

    def save(self, entry: StoredEntry) -> None:
        self.entries[entry.slot] = entry

    def clear(self) -> None:
        self.entries.clear()

    def count(self) -> int:
        return len(self.entries)


def encode_document(namespace: dict, entries: Iterable[StoredEntry]) -> dict:
    """One namespace's winners as a JSON-ready document, entries in a stable order.

    Raises StoreError for a namespace with a reserved field (see :func:`check_namespace`).
    """
    namespace = check_namespace(namespace)
    ordered = sorted(entries, key=lambda e: (e.set_name, e.key.to_json()))
    return {"format": DOCUMENT_FORMAT, **namespace, "entries": [e.to_json() for e in ordered]}


def document_text(document: dict) -> str:
    """A document as stored: indented JSON, non-ASCII kept as is, ending with a newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def decode_document(obj: object) -> tuple[dict, list[StoredEntry]]:
    """Read a namespace document: its namespace fields and its entries. Raises StoreError."""
    namespace, entries, problems = decode_document_leniently(obj)
    if problems:
        raise StoreError(problems[0])
    return namespace, entries


def decode_document_leniently(obj: object) -> tuple[dict, list[StoredEntry], list[str]]:
    """Like :func:`decode_document`, but a damaged entry is skipped, not fatal.

    Returns the namespace, the entries that decode, and what was wrong with the others: one bad
    entry must not cost every other winner of the device. A damaged document (not a wgtune
    document, entries not a list, a namespace field that is not a scalar or a small object of
    scalars) still raises StoreError.
    """
    if isinstance(obj, Unreadable):
        raise StoreError(f"the document is {obj.reason}")
    if not isinstance(obj, dict):
        raise StoreError(f"a wgtune cache document is a JSON object, got {type(obj).__name__}")
    if obj.get("format") != DOCUMENT_FORMAT:
        raise StoreError(f"not a wgtune cache document (format {shown_json(obj.get('format'))}, "
                         f"want {shown_json(DOCUMENT_FORMAT)})")
    raw_entries = obj.get("entries", [])
    if not isinstance(raw_entries, list):
        raise StoreError("the document's entries must be a list")
    namespace = {k: v for k, v in obj.items() if k not in RESERVED_FIELDS}
    check_namespace_fields(namespace)
    entries, problems = [], []
    for position, raw in enumerate(raw_entries):
        try:
            entries.append(StoredEntry.from_json(raw))
        except StoreError as error:
            problems.append(f"entry {position}: {error}")
    return namespace, entries, problems


def encode_export(documents: Iterable[dict]) -> dict:
    """Several namespace documents as one export document (moves winners between machines)."""
    return {"format": EXPORT_FORMAT, "namespaces": list(documents)}


def decode_export(obj: object) -> list[tuple[dict, list[StoredEntry]]]:
    """Read an export document, or a single namespace document, checking every entry first.

    ``obj`` as :func:`~wgtune.store.bounded_json.parse_json` parsed it. Raises StoreError for the first
    thing wrong: an import is taken whole or not at all. Every entry comes back as not checked
    (``checked=False``): a winner imported was checked, if at all, on another device, so its first
    use here checks it once (``verify.py``).
    """
    return [(namespace, [as_imported(entry) for entry in entries]) for namespace, entries in _decode_export(obj)]


def as_imported(entry: StoredEntry) -> StoredEntry:
    """``entry`` as an import keeps it: not checked on this device."""
    return replace(entry, checked=False) if entry.checked else entry


def _decode_export(obj: object) -> list[tuple[dict, list[StoredEntry]]]:
    if isinstance(obj, dict) and obj.get("format") == DOCUMENT_FORMAT:
        return [decode_document(obj)]
    if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
        want = f'want an object whose "format" is {shown_json(EXPORT_FORMAT)}'
        if not isinstance(obj, dict):
            raise StoreError(f"not a wgtune export: {json_kind(obj)} ({want})")
        got = f"format {shown_json(obj['format'])}" if "format" in obj else 'no "format"'
        raise StoreError(f"not a wgtune export ({got}; {want})")
    namespaces = obj.get("namespaces")
    if not isinstance(namespaces, list):
        raise StoreError("the export's namespaces must be a list")
    decoded = []
    for position, document in enumerate(namespaces):
        try:
            decoded.append(decode_document(document))
        except StoreError as error:
            raise StoreError(f"namespace {position} of the export: {error}") from None
    return decoded
