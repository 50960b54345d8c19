"""A fuzz corpus for what the cache may hold and an import may bring: nothing crashes, nothing lost.

The store users have is the SQLite database (``backends/sqlite_store.py``): its rows are fuzzed
(damaged entry texts, entries of another slot) and its file (truncated, bit-flipped, garbage),
and hostile imports go through its ``Database.import_from``. The old JSON documents are fuzzed
too, as the migration source they are now (``sqlite_migrate.py`` reads them with the same lenient
decoder as ``DocumentStore``): what follows about documents is that path.

From one valid document (two namespaces' worth for imports), seeded generators make damaged
documents and hostile imports: truncations, bit flips, byte insertions, deep nesting, huge
numbers, NaN, wrong types, escape sequences in names, duplicated keys, huge strings, winners
out of range or misnamed. For each:

- reading (``DocumentStore.load``, the listing ``documents()``, ``check_import``) raises nothing
  but :class:`StoreError` where that is documented (no RecursionError, TypeError, ValueError);
- no valid entry is lost: every entry of the input that a reference parser (written here, apart
  from wgtune's) finds equal to a valid original, or that a mutation left valid on purpose, is
  read back, unless the document as a whole is damaged (then it is set aside, its bytes kept);
- every entry read back is sound: its results decode, its winner is a measured result of its
  name, it serializes as JSON;
- an import is refused whole (a StoreError whose message is printable and short, the store
  unchanged) or every one of its entries lands, and the cache then lists without damage.

Seeds are fixed: a failure names its seed and mutation, and reproduces. Native only: about
2000 inputs, a few seconds here; Pyodide would take too long for the core run.
"""

from __future__ import annotations

import io
import json
import math
import random
import sqlite3
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal

import pytest

from wgtune import Key, Measured, StoredEntry, StoreError
from wgtune.backends.cache_transfer import SqliteDatabase
from wgtune.backends.file_store import CacheDirectory, FileStore
from wgtune.backends.sqlite_store import SqliteStore
from wgtune.runner import run_inline
from wgtune.store.confidence import Confidence
from wgtune.store.documents import DocumentStore
from wgtune.store.format import DOCUMENT_FORMAT, EXPORT_FORMAT, canonical_namespace, document_text, encode_document
from wgtune.text import printable

DOCUMENTS = 1200
IMPORTS = 1200
NOT_RUN = "not chosen by the search"
LAPTOP = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "laptop", "backend": "vulkan"}, "tuner": "default"}
SERVER = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "server", "backend": "metal"}, "tuner": "default"}


def make_entry(i: int, set_name: str = "matmul") -> StoredEntry:
    def measured(index: int, median: float) -> dict:
        samples = [median, median * 1.05, median * 0.98]
        return {"name": f"k{i}_{index}", "index": index, "timing": "gpu-timestamp", "median": median,
                "min": min(samples), "max": max(samples), "mean": sum(samples) / 3, "variance": 1e-12,
                "score": median, "samples": samples}

    results = (measured(0, 2e-3), measured(1, 1e-3), {"name": f"k{i}_2", "error": "Launch", "reason": "too big"},
               None, measured(4, 3e-3))
    confidence = Confidence(f"k{i}_0", 2.0, 1.5, 2.5, 0.95, 0.99, (3, 3))
    return StoredEntry(set_name, Key({"n": 2**i, "dtype": "f32"}), "c0ffee" * 5, 1, f"k{i}_1", results,
                       confidence, "adaptive", NOT_RUN)


ORIGINALS = [make_entry(i, "matmul" if i % 2 else "softmax") for i in range(6)]


def as_json(value: object) -> object:
    """What ``value`` reads back as from stored JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


ORIGINAL_JSON = [as_json(entry.to_json()) for entry in ORIGINALS]


# -- writing hostile JSON ------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """Text put into the document as it is: a 5000-digit number, ``NaN``, a deep nesting."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """An object written from its pairs, duplicated keys included."""

    pairs: tuple


def write(value: object) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs):
        return "{" + ", ".join(f"{json.dumps(k)}: {write(v)}" for k, v in value.pairs) + "}"
    if isinstance(value, dict):
        return write(Pairs(tuple(value.items())))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(write(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def deep(levels: int, inner: str = "1") -> Raw:
    return Raw("[" * levels + inner + "]" * levels)


HOSTILE_VALUES = [
    [], {}, "x", "", 1.5, True, False, None, -1, 0, 2**31, 2**63, -(2**63) - 1, Raw("1" * 5000), Raw("-" + "9" * 4400),
    Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e999"), "\x1b[2J\x1b[31mred", "a\u202eb", "x" * 100_000,
    deep(30), deep(70), deep(2000), {"a": [1, {"b": None}]}, [None], ["1"], [float("1e-9"), -1.0],
    Pairs((("a", 1), ("a", 2))),
]


# -- the reference parser and the soundness of what is read ---------------------------------------


class Unparsed:
    """Where the reference parser met something it will not trust (a duplicated key, a huge int)."""


def reference_parse(text: str) -> object:
    """The mutated text as a careful reader sees it, or Unparsed; independent of wgtune's parser."""
    def pairs(items: list) -> object:
        keys = [key for key, _value in items]
        return dict(items) if len(set(keys)) == len(keys) else Unparsed()

    def integer(digits: str) -> object:
        if len(digits.lstrip("-")) > 21:
            return Unparsed()
        if -(2**63) <= int(digits) < 2**63:
            return int(digits)
        # Beyond 64 bits, the digits JSON.stringify writes for a float (its shortest %g, then zeros) are that float.
        number = float(digits)
        shortest = next(f"{number:.{places}g}" for places in range(1, 18) if float(f"{number:.{places}g}") == number)
        return number if str(int(Decimal(shortest))) == digits else Unparsed()

    try:
        obj = json.loads(text, object_pairs_hook=pairs, parse_int=integer)
    except (ValueError, RecursionError):
        return Unparsed()
    return obj if depth_of(obj) <= 64 else Unparsed()


def depth_of(value: object, level: int = 0) -> int:
    if level > 64:
        return level
    if isinstance(value, dict):
        return max((depth_of(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((depth_of(v, level + 1) for v in value), default=level + 1)
    return level


DEFAULTS = {"winner_name": "", "results": [], "policy": "", "not_run": "", "checked": False}
"""What an entry's optional fields read as when absent or null."""


def ident(entry: object) -> tuple | None:
    """What identifies an entry read back: its slot, winner and every result (an entry keeps its
    results' every field; fields of its own that this version does not know are not kept)."""
    if not isinstance(entry, dict):
        return None
    fields = {field: DEFAULTS.get(field) if entry.get(field) is None else entry[field]
              for field in [*ENTRY_FIELDS, "checked"]}
    if isinstance(fields["confidence"], dict):  # read into a Confidence: only its own fields are kept
        fields["confidence"] = {"samples": [0, 0], **{k: v for k, v in fields["confidence"].items() if k in
                                                      ("runner_up", "ratio", "low", "high", "level", "p_faster",
                                                       "samples")}}
    try:
        return tuple(json.dumps(value, sort_keys=True) for value in fields.values())
    except (TypeError, ValueError):
        return None


def sound(entry: StoredEntry) -> None:
    """What every entry read back must be."""
    results = entry.decoded_results()
    if results:
        winner = results[entry.winner]
        assert isinstance(winner, Measured) and winner.stats is not None
        assert not entry.winner_name or winner.name == entry.winner_name
        assert all(math.isfinite(s) and s > 0 for s in winner.stats.samples)
    json.dumps(entry.to_json())
    assert 0 <= entry.winner < 2**31 and len(entry.set_name) <= 256


def same_top(obj: object, namespace: dict, fmt: str = DOCUMENT_FORMAT) -> bool:
    """Whether a parsed document is, outside its entries, the original one."""
    return (isinstance(obj, dict) and obj.get("format") == fmt and isinstance(obj.get("entries"), list)
            and {k: v for k, v in obj.items() if k not in ("format", "entries")} == namespace)


# -- an in-memory key-value store ------------------------------------------------------------------


class MemoryKeyValues:
    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.aside: dict[str, str] = {}

    def name_for(self, namespace: dict) -> str:
        return canonical_namespace(namespace)

    def describe(self, name: str) -> str:
        return f"memory:{name}"

    async def get(self, name: str) -> str | None:
        return self.texts.get(name)

    async def put(self, name: str, text: str) -> None:
        self.texts[name] = text

    async def remove(self, name: str) -> bool:
        return self.texts.pop(name, None) is not None

    async def names(self) -> list[str]:
        return sorted(self.texts)

    @asynccontextmanager
    async def locked(self, name: str):
        yield

    async def set_aside(self, name: str, *, keep_original: bool) -> str:
        copy = f"{name}.corrupt-{len(self.aside)}"
        self.aside[copy] = self.texts[name] if keep_original else self.texts.pop(name)
        return copy


# -- mutations of one entry ------------------------------------------------------------------------
# Each takes (rng, the entry's JSON) and gives (the hostile entry, whether it is still valid).

ENTRY_FIELDS = ["table", "key", "checksum", "winner", "winner_name", "results", "policy", "confidence", "not_run"]


def wrong_field(rng, entry):
    field = rng.choice(ENTRY_FIELDS)
    return {**entry, field: rng.choice(HOSTILE_VALUES)}, None


def drop_field(rng, entry):
    field = rng.choice(ENTRY_FIELDS)
    return {k: v for k, v in entry.items() if k != field}, None


def wrong_winner(rng, entry):
    winner = rng.choice([2, 3, 5, 99, 2**31, 2**63 - 1, Raw("9" * 30), -1, 1.0, "1", True])
    return {**entry, "winner": winner}, None


def misnamed_winner(rng, entry):
    return {**entry, "winner_name": rng.choice(["k0", entry["results"][0]["name"], "", "\x1b[0m"])}, None


def bad_result(rng, entry):
    results = list(entry["results"])
    index = rng.choice([0, 1, 4])
    field, value = rng.choice([("median", Raw("NaN")), ("median", -1.0), ("median", 0), ("samples", []),
                               ("samples", [Raw("Infinity")]), ("samples", ["1"]), ("samples", [True]),
                               ("samples", [-2e-3]), ("name", 7), ("name", "y" * 1000), ("index", 3),
                               ("variance", -1.0), ("eliminated_early", "yes"), ("extra", Raw("7" * 5000)),
                               ("timing", []), ("dry_run", 1), ("min", Raw("1e999"))])
    results[index] = {**results[index], field: value}
    return {**entry, "results": results}, None


def bad_failure(rng, entry):
    results = list(entry["results"])
    results[2] = rng.choice([{"name": "z", "error": "Exploded", "reason": "?"}, {"name": "z", "error": "Launch"},
                             {"name": "z", "error": "Launch", "reason": 5}, "Launch", 3, [],
                             {"name": "z", "error": "Launch", "reason": "r" * 70_000}])
    return {**entry, "results": results}, None


def null_result(rng, entry):
    results = list(entry["results"])
    results[rng.choice([0, 1, 2])] = None
    return {**entry, "results": results, **({"not_run": rng.choice(["", None, 3])} if rng.random() < 0.5 else {})}, None


def duplicated_key(rng, entry):
    field = rng.choice(ENTRY_FIELDS)
    return Pairs((*entry.items(), (field, entry[field]))), None


def bad_key(rng, entry):
    key = rng.choice([{"n": [1]}, {"n": {"m": 1}}, {"": 1}, {"n": Raw("NaN")}, {"n": Raw("3" * 400)},
                      {f"f{i}": i for i in range(100)}, {"n": "v" * 1000}, [], "n=1"])
    return {**entry, "key": key}, None


def bad_confidence(rng, entry):
    confidence = dict(entry["confidence"])
    field = rng.choice(["ratio", "low", "level", "p_faster", "samples", "runner_up"])
    confidence[field] = rng.choice([Raw("NaN"), "2", True, [1], [1, 2, 3], [-1, 2], 1.5, None, Raw("1" * 5000)])
    return {**entry, "confidence": confidence}, None


def escaped_names(rng, entry):
    """Names with terminal escapes, bidi overrides, NUL: hostile to print, valid to store."""
    evil = rng.choice(["\x1b[2J\x1b[H", "\r\x1b]0;owned\x07", "a\u202egnp.exe", "\x00\x7f\x9b", "名前\u200b"])
    results = list(entry["results"])
    results[1] = {**results[1], "name": results[1]["name"] + evil}
    return {**entry, "table": entry["table"] + evil, "winner_name": results[1]["name"], "results": results,
            "key": {**entry["key"], "dtype": evil}}, True


def newer_fields(rng, entry):
    """Fields a newer wgtune may write: kept, the entry valid."""
    results = list(entry["results"])
    results[0] = {**results[0], "p99": 3e-3, "notes": {"a": [1, 2]}}
    return {**entry, "future": {"x": [1, "two", None]}, "results": results}, True


def deep_inside(rng, entry):
    return {**entry, rng.choice(["future", "policy", "key"]): deep(rng.choice([10, 63, 70, 1500]))}, None


ENTRY_MUTATIONS = [wrong_field, drop_field, wrong_winner, misnamed_winner, bad_result, bad_failure, null_result,
                   duplicated_key, bad_key, bad_confidence, escaped_names, newer_fields, deep_inside]


# -- mutations of the whole text -------------------------------------------------------------------


def document_parts(namespace: dict, entries: list) -> str:
    return write({"format": DOCUMENT_FORMAT, **namespace, "entries": entries})


def text_mutation(rng, text: str) -> tuple[str, str]:
    data = bytearray(text.encode("utf-8"))
    kind = rng.choice(["truncate", "flip", "insert", "delete", "wrap-deep", "splice-brackets"])
    if kind == "truncate":
        return data[: rng.randrange(len(data))].decode("utf-8", "replace"), kind
    if kind == "flip":
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "insert":
        at = rng.randrange(len(data))
        data[at:at] = rng.choice([b"{", b"[", b"]", b'"', b"\\", b"\x00", b",", b"NaN", b"\xff\xfe", b"1" * 5000])
    elif kind == "delete":
        at = rng.randrange(len(data))
        del data[at: at + rng.randint(1, 20)]
    elif kind == "wrap-deep":
        levels = rng.choice([65, 1000, 50_000])
        return "[" * levels + text + "]" * levels, kind
    else:
        at = rng.randrange(len(data))
        data[at:at] = b"[" * 100_000
    return bytes(data).decode("utf-8", "replace"), kind


NAMESPACE_MUTATIONS = [
    ("device-a-list", {"device": ["laptop"]}),
    ("device-nested", {"device": {"vendor": {"inner": "v"}}}),
    ("tuner-huge-int", {"tuner": Raw("1" * 5000)}),
    ("tuner-nan", {"tuner": Raw("NaN")}),
    ("wgtune-huge-string", {"wgtune": "v" * 100_000}),
    ("device-escapes", {"device": {"vendor": "v", "device": "\x1b[2Jlaptop", "backend": "vulkan"}}),
    ("format", {"format": "wgtune.cache/2"}),
    ("entries-an-object", {"entries": {}}),
    ("many-fields", {f"f{i}": i for i in range(40)}),
]


def damaged_document(seed: int) -> tuple[str, list, str]:
    """A damaged document (its text), the entries that must be read back if it is accepted as a
    whole, and what was done to it."""
    rng = random.Random(seed)
    entries: list = list(ORIGINAL_JSON)
    kept = list(range(len(entries)))
    valid_mutants = []
    what = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        position = rng.randrange(len(entries))
        mutation = rng.choice(ENTRY_MUTATIONS)
        entries[position], valid = mutation(rng, ORIGINAL_JSON[position])
        what.append(f"{mutation.__name__}@{position}")
        if position in kept:
            kept.remove(position)
        if valid:
            valid_mutants.append(entries[position])
    namespace: dict = dict(LAPTOP)
    mode = rng.random()
    if mode < 0.15:
        name, change = rng.choice(NAMESPACE_MUTATIONS)
        what.append(name)
        text = write({"format": DOCUMENT_FORMAT, **namespace, "entries": entries, **change})
    else:
        text = document_parts(namespace, entries)
    if 0.15 <= mode < 0.45:
        text, kind = text_mutation(rng, text)
        what.append(kind)
    must = [ORIGINAL_JSON[i] for i in kept] + [as_json(json.loads(write(e))) for e in valid_mutants
                                                if not isinstance(e, Pairs)]
    return text, must, " ".join(what)


def check_read(text: str, must: list, what: str) -> str:
    """Read a damaged document every way the store does; the outcome's name."""
    key_values = MemoryKeyValues()
    name = canonical_namespace(LAPTOP)
    key_values.texts[name] = text
    listed = run_inline(DocumentStore(key_values).documents())  # a listing moves nothing
    assert [document.name for document in listed] == [name]
    listing = listed[0]
    loaded = run_inline(DocumentStore(key_values).load(LAPTOP))  # never raises for damaged data
    for entry in loaded + listing.entries:
        sound(entry)
    reference = reference_parse(text)
    whole = same_top(reference, LAPTOP)
    if listing.damage is not None:
        assert not whole, f"{what}: a document that is whole outside its entries was refused: {listing.damage}"
        assert loaded == [] and list(key_values.aside.values()) == [text], what  # set aside, bytes kept
        assert printable(listing.damage) == listing.damage, what
        return "document set aside"
    wanted = {ident(entry) for entry in must}
    present = [ident(entry) for entry in reference["entries"] if ident(entry) in wanted] if whole else []
    got = [as_json(entry.to_json()) for entry in listing.entries]
    if whole:
        have = {ident(entry) for entry in got}
        missing = [entry for entry in present if entry not in have]
        assert not missing, f"{what}: lost {len(missing)} valid entries: {listing.problems}"
        assert [as_json(e.to_json()) for e in loaded] == got, what
    for problem in listing.problems:
        assert printable(problem) == problem and len(problem) < 2000, what
    return "entries skipped" if listing.problems else "all kept"


@pytest.mark.parametrize("block", range(4))
def test_damaged_documents_never_crash_and_lose_no_valid_entry(block):
    outcomes: dict[str, int] = {}
    for seed in range(block * DOCUMENTS // 4, (block + 1) * DOCUMENTS // 4):
        text, must, what = damaged_document(seed)
        try:
            outcome = check_read(text, must, what)
        except AssertionError as failure:
            raise AssertionError(f"seed {seed}: {failure}") from None
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert sum(outcomes.values()) == DOCUMENTS // 4
    assert len(outcomes) == 3, outcomes  # each kind of outcome is exercised


# -- hostile imports -------------------------------------------------------------------------------


def hostile_import(seed: int) -> tuple[str, bool, str]:
    """An import's text, whether it must be taken (nothing in it is wrong), what was done."""
    rng = random.Random(10**6 + seed)
    laptop, server = list(ORIGINAL_JSON[:3]), list(ORIGINAL_JSON[3:])
    what, valid = [], True
    for _ in range(rng.choice([0, 1, 1, 2])):
        target, originals = rng.choice([(laptop, ORIGINAL_JSON[:3]), (server, ORIGINAL_JSON[3:])])
        position = rng.randrange(len(target))
        mutation = rng.choice(ENTRY_MUTATIONS)
        target[position], still = mutation(rng, originals[position])
        what.append(mutation.__name__)
        valid = valid and bool(still)
    namespaces = [{"format": DOCUMENT_FORMAT, **LAPTOP, "entries": laptop},
                  {"format": DOCUMENT_FORMAT, **SERVER, "entries": server}]
    mode = rng.random()
    if mode < 0.15:
        name, change = rng.choice(NAMESPACE_MUTATIONS)
        namespaces[rng.randrange(2)].update(change)
        what.append(name)
        valid = valid and name == "device-escapes"
    if mode < 0.7 or rng.random() < 0.5:
        text = write({"format": EXPORT_FORMAT, "namespaces": namespaces})
    else:
        text = write(namespaces[0])  # a single namespace document
    if 0.7 <= mode < 0.9:
        text, kind = text_mutation(rng, text)
        what.append(kind)
        valid = False  # maybe harmless (a flipped bit in a reason): taken or refused, both are right
        # (the reference below still requires what must land when it is taken)
    return text, valid, " ".join(what) or "untouched"


def distinct_slots(imported: list[dict]) -> int:
    """How many entries an import taken whole stores, from the reference parse of its namespace
    documents: one per (canonical namespace, set, key), a key given twice (in one document, or in
    two of the same namespace) counted once, as imports count what they stored."""
    return len({(canonical_namespace({k: v for k, v in document.items() if k not in ("format", "entries")}),
                 entry["table"], json.dumps(entry["key"], sort_keys=True, separators=(",", ":")))
                for document in imported for entry in document["entries"]})


def check_import(text: str, valid: bool, what: str) -> str:
    key_values = MemoryKeyValues()
    documents = DocumentStore(key_values)
    run_inline(documents.save(LAPTOP, [make_entry(9)]))  # something stored already
    before = dict(key_values.texts)
    try:
        obj = DocumentStore.check_import(text)
        count = run_inline(documents.import_document(obj))
    except StoreError as error:
        message = str(error)
        assert not valid, f"{what}: a valid import was refused: {message}"
        assert printable(message) == message and len(message) < 2000, what
        assert key_values.texts == before, what  # refused whole: nothing written
        return "refused"
    reference = reference_parse(text)
    imported = reference["namespaces"] if isinstance(reference, dict) and "namespaces" in reference else [reference]
    assert isinstance(imported, list) and all(isinstance(n, dict) for n in imported), what
    assert count == distinct_slots(imported), what  # every entry landed, a key given twice counted once
    listed = run_inline(documents.documents())
    assert all(d.damage is None and not d.problems for d in listed), what  # and reads back clean
    landed = {ident(as_json(e.to_json())) for d in listed for e in d.entries}
    for document in imported:
        for entry in document["entries"]:
            assert ident(entry) in landed, what
    for document in listed:
        for entry in document.entries:
            sound(entry)
        for value in document.namespace.values():  # what a listing prints: scalars or flat objects
            assert not isinstance(value, list)
            assert not isinstance(value, dict) or all(not isinstance(v, (dict, list)) for v in value.values())
    return "taken"


@pytest.mark.parametrize("block", range(4))
def test_hostile_imports_are_refused_whole_or_land_whole(block):
    outcomes: dict[str, int] = {}
    for seed in range(block * IMPORTS // 4, (block + 1) * IMPORTS // 4):
        text, valid, what = hostile_import(seed)
        try:
            outcome = check_import(text, valid, what)
        except AssertionError as failure:
            raise AssertionError(f"seed {seed}: {failure}") from None
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert set(outcomes) == {"refused", "taken"}, outcomes


# -- the same on files -----------------------------------------------------------------------------


def test_damaged_documents_on_files_are_set_aside_byte_for_byte_and_copies_stay_few(tmp_path):
    namespace = {**LAPTOP}
    store = FileStore(tmp_path, namespace)
    seen = 0
    for seed in range(0, DOCUMENTS, 12):
        text, _must, what = damaged_document(seed)
        store.path.write_bytes(text.encode("utf-8"))
        entries = FileStore(tmp_path, namespace).load()
        for entry in entries:
            sound(entry)
        if not store.path.exists():  # set aside: its copy holds the very bytes
            copies = sorted(tmp_path.glob(store.path.name + ".corrupt-*"))
            assert copies and copies[-1].read_bytes() == text.encode("utf-8"), what
            seen += 1
    assert seen > 5
    CacheDirectory(tmp_path)  # opening tidies
    assert len(list(tmp_path.glob("*.corrupt-*"))) <= 5
    assert document_text(encode_document(namespace, ORIGINALS))  # the originals still encode


# -- the SQLite store users have -------------------------------------------------------------------

ROWS = 240
FILES = 60


def damaged_rows(seed: int) -> tuple[dict[int, str], list[int], str]:
    """Row texts to write over some of the originals' rows, the positions left whole, and what was done."""
    rng = random.Random(2 * 10**6 + seed)
    texts: dict[int, str] = {}
    what = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        position = rng.randrange(len(ORIGINALS))
        kind = rng.random()
        if kind < 0.5:
            mutation = rng.choice(ENTRY_MUTATIONS)
            mutant, _valid = mutation(rng, ORIGINAL_JSON[position])
            texts[position] = write(mutant)
            what.append(f"{mutation.__name__}@{position}")
        elif kind < 0.6:  # another slot's entry, whole: damaged for this slot
            texts[position] = json.dumps(ORIGINAL_JSON[(position + 1) % len(ORIGINALS)])
            what.append(f"misplaced@{position}")
        else:
            texts[position], mutated = text_mutation(rng, json.dumps(ORIGINAL_JSON[position]))
            what.append(f"{mutated}@{position}")
    kept = [position for position in range(len(ORIGINALS)) if position not in texts]
    return texts, kept, " ".join(what)


def rewrite_rows(path, texts: dict[int, str]) -> None:
    with sqlite3.connect(path) as connection:
        for position, text in texts.items():
            original = ORIGINALS[position]
            connection.execute("UPDATE entries SET entry = ? WHERE set_name = ? AND key = ?",
                               (text, original.set_name, original.key.to_json()))


@pytest.mark.parametrize("block", range(2))
def test_damaged_rows_never_crash_and_cost_only_themselves(tmp_path, block):
    outcomes: dict[str, int] = {}
    for seed in range(block * ROWS // 2, (block + 1) * ROWS // 2):
        directory = tmp_path / str(seed)
        store = SqliteStore(directory, LAPTOP).open()
        store.save_many(ORIGINALS)
        store.database.close()
        texts, kept, what = damaged_rows(seed)
        rewrite_rows(store.path, texts)
        try:
            by_key = SqliteStore(directory, LAPTOP).open()
            looked = [by_key.lookup(original.set_name, original.key) for original in ORIGINALS]
            loaded = SqliteStore(directory, LAPTOP).open().load()
        except Exception as failure:  # nothing may escape a read of damaged rows
            raise AssertionError(f"seed {seed} ({what}): {failure!r}") from None
        for position in kept:
            assert looked[position] == ORIGINALS[position], f"seed {seed} ({what}): lost a valid entry"
            assert ORIGINALS[position] in loaded, f"seed {seed} ({what}): lost a valid entry"
        for found in [*loaded, *(entry for entry in looked if entry is not None)]:
            sound(found)
        for position, found in enumerate(looked):
            assert found is None or found.slot == ORIGINALS[position].slot, f"seed {seed} ({what}): another slot's"
        with sqlite3.connect(store.path) as connection:
            rows = connection.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            aside = connection.execute("SELECT COUNT(*) FROM damaged").fetchone()[0]
        assert rows + aside == len(ORIGINALS), f"seed {seed} ({what}): a row was dropped, not set aside"
        outcome = "set aside" if aside else "all kept"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert set(outcomes) == {"set aside", "all kept"}, outcomes


def damaged_file(rng, data: bytes) -> tuple[bytes, str]:
    data = bytearray(data)
    kind = rng.choice(["truncate", "flip", "zero-page", "garbage", "header"])
    if kind == "truncate":
        return bytes(data[: rng.randrange(len(data))]), kind
    if kind == "flip":
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "zero-page":
        at = rng.randrange(0, len(data), 4096)
        data[at: at + 4096] = bytes(min(4096, len(data) - at))
    elif kind == "garbage":
        return rng.randbytes(rng.choice([0, 10, 5000])), kind
    else:
        data[rng.randrange(16, 100)] ^= 0xFF
    return bytes(data), kind


def test_damaged_database_files_are_refused_or_set_aside_never_a_crash(tmp_path):
    source = tmp_path / "source"
    store = SqliteStore(source, LAPTOP).open()
    store.save_many(ORIGINALS)
    store.database.close()
    original = store.path.read_bytes()
    outcomes: dict[str, int] = {}
    for seed in range(FILES):
        rng = random.Random(3 * 10**6 + seed)
        data, kind = damaged_file(rng, original)
        directory = tmp_path / str(seed)
        directory.mkdir()
        (directory / "wgtune.sqlite3").write_bytes(data)
        try:
            database = SqliteDatabase(directory)
            opened = asyncio_free(database.open(LAPTOP))
            loaded = opened.load()
            for found in loaded:
                sound(found)
            outcome = "read" if loaded else "read empty"
            asyncio_free(database.entries())
            database.close()
        except (OSError, StoreError) as error:
            assert printable(str(error)) == str(error) or "\\" in repr(error), f"seed {seed} ({kind})"
            outcome = "refused"
        except Exception as failure:
            raise AssertionError(f"seed {seed} ({kind}): {failure!r}") from None
        if any(directory.glob("wgtune.sqlite3.corrupt-*")):
            outcome = "set aside"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert "set aside" in outcomes and len(outcomes) >= 2, outcomes


def asyncio_free(coro):
    """A Database verb of the native database: it never suspends."""
    return run_inline(coro)


def check_sqlite_import(directory, text: str, valid: bool, what: str) -> str:
    database = SqliteDatabase(directory)
    run_inline(database.open(LAPTOP)).save(make_entry(9))  # something stored already
    before = run_inline(database.entries()).entries
    try:
        count = run_inline(database.import_from(io.BytesIO(text.encode("utf-8", "surrogatepass"))))
    except StoreError as error:
        message = str(error)
        assert not valid, f"{what}: a valid import was refused: {message}"
        assert len(message) < 2000, what
        assert run_inline(database.entries()).entries == before, what  # refused whole: nothing written
        database.close()
        return "refused"
    reference = reference_parse(text)
    imported = reference["namespaces"] if isinstance(reference, dict) and "namespaces" in reference else [reference]
    assert count == distinct_slots(imported), what
    listing = run_inline(database.entries())
    assert listing.problems == [], what
    landed = {ident(as_json(e.to_json())) for _namespace, e in listing.entries}
    for document in imported:
        for raw in document["entries"]:
            assert ident(raw) in landed, what
    for _namespace, found in listing.entries:
        sound(found)
    database.close()
    return "taken"


def test_hostile_imports_into_the_sqlite_database_are_refused_whole_or_land_whole(tmp_path):
    outcomes: dict[str, int] = {}
    for seed in range(0, IMPORTS, 4):
        text, valid, what = hostile_import(seed)
        try:
            outcome = check_sqlite_import(tmp_path / str(seed), text, valid, what)
        except AssertionError as failure:
            raise AssertionError(f"seed {seed}: {failure}") from None
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert set(outcomes) == {"refused", "taken"}, outcomes


OLD_DOCUMENT = "v-laptop-vulkan--default--0.1.0--0123abcd.json"
"""Named as the old store named its documents: the migration takes no other file."""


def test_damaged_documents_migrate_into_the_database_losing_no_valid_entry(tmp_path):
    """The migration path: a damaged old document's valid entries land in the database, its
    damaged ones in the ``damaged`` table, a document that cannot be read is kept aside."""
    for seed in range(0, DOCUMENTS, 20):
        text, must, what = damaged_document(seed)
        directory = tmp_path / str(seed)
        directory.mkdir()
        (directory / OLD_DOCUMENT).write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            store = SqliteStore(directory, LAPTOP).open()
            loaded = store.load()
        except Exception as failure:
            raise AssertionError(f"seed {seed} ({what}): {failure!r}") from None
        for found in loaded:
            sound(found)
        reference = reference_parse(text)
        if same_top(reference, LAPTOP) and not any(directory.glob(OLD_DOCUMENT + ".corrupt*")):
            wanted = {ident(entry) for entry in must}
            present = {ident(entry) for entry in reference["entries"]} & wanted
            have = {ident(as_json(entry.to_json())) for entry in loaded}
            assert present <= have, f"seed {seed} ({what}): lost a valid entry in the migration"
        store.database.close()
