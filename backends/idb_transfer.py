"""Importing and exporting the page's stored winners a slice at a time (issue 28).

An export of 100k winners is some 17-26 MB of JSON. Parsed, checked and written whole, importing it
was one task of the page of 11-12 s, and listing it (``wgtune.cache()``) one of 13 s: no input,
no drawing meanwhile. Here every long loop works in slices (``slices.py``: ~10 ms of work, then a
task boundary), and each IndexedDB request reads or writes a bounded part.

**Import** (:func:`import_export`): the text is read an entry at a time (``export_stream.py``:
each entry parsed and checked as every import is) and the checked entries are staged in the page's
memory (``idb.importer``, ``web/idb.js``); only when all of the text was read and checked are they
written, in one IndexedDB transaction whose puts are issued a slice per task. So an import is
still all or none: a bad document writes nothing (its error is raised before the transaction
begins), a failed write aborts the whole transaction, and another tab never sees half of it.
Text the stream does not expect (an odd shape, a bad entry) is read the plain way
(``DocumentStore.check_import``), which gives the exact error, or imports the odd but valid
document: that parse is one task, paid only by such documents.

**Export** (:func:`export_text`, :func:`export_document`): records are read
:data:`EXPORT_SLICE` at a time in key order (``idb.entriesAfter``: namespace, set, key), each
checked (a damaged one is left out, logged) and handed to the page as it comes: as pieces of text
joined by JavaScript, or as entries parsed by JavaScript a slice at a time into the export's
object, so that neither a 26 MB Python string nor a 26 MB ``JSON.parse`` is one task. The text is
laid out as ``wgtune cache export`` writes it (an entry a line); entries are the stored texts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from wgtune.errors import StoreError
from wgtune.store.bounded_json import parse_json
from wgtune.store.documents import DocumentStore
from wgtune.store.format import DOCUMENT_FORMAT, EXPORT_FORMAT, StoredEntry, canonical_namespace, check_namespace
from wgtune.store.format import decode_export as decode_whole
from wgtune.text import shown

from .export_stream import ExportStream, Unusual, read_export
from .idb_records import decode_record
from .slices import Slices

__all__ = ["EXPORT_SLICE", "TEXT_PIECE", "ExportDocument", "JsExportDocument", "TextSource", "export_document",
           "export_text", "import_export"]

logger = logging.getLogger("wgtune")

EXPORT_SLICE = 500
"""Records one request of an export reads: reading them is a few milliseconds."""

TEXT_PIECE = 1 << 18
"""Characters of an import's text taken from JavaScript at a time."""


class TextSource:
    """An import's text, taken a piece at a time: a Python ``str``, or a JavaScript string through
    an object with ``length`` and ``slice(start, end)`` (crossing into Python whole, 26 MB of
    text is one copy of 100 ms or more; a piece at a time it is many small ones)."""

    def __init__(self, text: Any) -> None:
        self.text = text
        self.length = len(text) if isinstance(text, str) else int(text.length)
        self.at = 0

    def read(self, size: int) -> str:
        start, self.at = self.at, min(self.length, self.at + size)
        return self.text[start:self.at] if isinstance(self.text, str) else str(self.text.slice(start, self.at))

    def whole(self) -> str:
        """All of the text (the plain path's parse needs it as one string)."""
        if isinstance(self.text, str):
            return self.text
        return "".join(str(self.text.slice(start, start + TEXT_PIECE)) for start in range(0, self.length, TEXT_PIECE))


def _entry_text(entry: StoredEntry) -> str:
    return json.dumps(entry.to_json(), separators=(",", ":"), ensure_ascii=False)


async def import_export(idb: Any, text: Any, slices: Slices | None = None) -> int:
    """Merge the export (or one namespace document) in ``text`` (a str, or see :class:`TextSource`)
    into IndexedDB in one transaction; the number of entries stored (:func:`_stored`: a namespace,
    set and key the text gives twice counts once). StoreError naming what is wrong before
    anything is written (see the module doc)."""
    slices = slices or Slices()
    source = TextSource(text)
    importer = idb.importer()
    rows: list[list] = []
    namespaces: dict[int, str] = {}
    counts: dict[int, int] = {}
    given: set[tuple[int, str, str]] = set()
    try:
        for doc, item in read_export(ExportStream(source.read, chunk=TEXT_PIECE)):
            if isinstance(item, StoredEntry):
                key = item.key.to_json()
                rows.append([doc, item.set_name, key, _entry_text(item)])
                counts[doc] = counts.get(doc, 0) + 1
                given.add((doc, item.set_name, key))
            else:
                namespaces[doc] = canonical_namespace(item)
            if slices.due():
                importer.add(json.dumps(rows, ensure_ascii=False))
                rows = []
                await slices.pause()
    except Unusual:
        return await _import_plainly(idb, source.whole(), slices)
    importer.add(json.dumps(rows, ensure_ascii=False))
    written = int(await importer.write(json.dumps(namespaces, ensure_ascii=False)))
    slices.restart()
    expected = sum(counts.get(doc, 0) for doc in namespaces)
    if written != expected:  # a page bug, not a document's: say so rather than miscount
        raise StoreError(f"IndexedDB wrote {written} of the import's {expected} entries")
    return _stored(given, namespaces)


def _stored(given: set[tuple[int, str, str]], namespaces: dict[int, str]) -> int:
    """How many entries an import stored, of the ``(doc, set, key)`` its entries ``given``: each
    namespace, set and key once. The page's writer puts each entry it is handed (``written``
    counts a key given twice twice, one record stored: the last put), and an entry of a document
    with no namespace (an export's stray top-level ``entries``) is none of them."""
    return len({(namespaces[doc], set_name, key) for doc, set_name, key in given if doc in namespaces})


async def _import_plainly(idb: Any, text: str, slices: Slices) -> int:
    """The plain path: the whole text parsed and checked at once (one task), then staged and
    written as :func:`import_export` does; the number of entries stored, as it counts them."""
    decoded = decode_whole(DocumentStore.check_import(text))  # StoreError before anything is staged
    await slices.pause()
    importer = idb.importer()
    rows: list[list] = []
    namespaces: dict[int, str] = {}
    given: set[tuple[int, str, str]] = set()
    for doc, (namespace, entries) in enumerate(decoded):
        namespaces[doc] = canonical_namespace(check_namespace(namespace))
        for entry in entries:
            key = entry.key.to_json()
            rows.append([doc, entry.set_name, key, _entry_text(entry)])
            given.add((doc, entry.set_name, key))
            if slices.due():
                importer.add(json.dumps(rows, ensure_ascii=False))
                rows = []
                await slices.pause()
    importer.add(json.dumps(rows, ensure_ascii=False))
    written = int(await importer.write(json.dumps(namespaces, ensure_ascii=False)))
    expected = sum(len(entries) for _namespace, entries in decoded)
    if written != expected:  # as import_export says it
        raise StoreError(f"IndexedDB wrote {written} of the import's {expected} entries")
    return _stored(given, namespaces)


# -- export ---------------------------------------------------------------------------------------


async def _exported(idb: Any, slices: Slices) -> AsyncIterator[tuple[str, dict, list[str]]]:
    """Every readable stored entry in key order, in runs: ``(namespace text, its fields, entry
    texts)``, consecutive runs of one namespace as they come. Damaged records and namespaces are
    left out, logged."""
    after: list | None = None
    fields_of: dict[str, dict | None] = {}
    problems: list[str] = []
    while True:
        rows = json.loads(str(await idb.entriesAfter(*(after or (None, None, None)), EXPORT_SLICE)))
        slices.restart()  # the request was a task boundary of its own
        run, texts = "", []
        for namespace_text, set_name, key_text, value in rows:
            if namespace_text != run:
                if texts:
                    yield run, fields_of[run], texts
                run, texts = namespace_text, []
                if run not in fields_of:
                    fields_of[run] = _namespace_fields(run, problems)
            if fields_of[run] is None:
                continue
            try:
                decode_record(set_name, key_text, value)
            except StoreError as error:
                problems.append(f"{shown(set_name)} [{shown(key_text)}]: {error}")
                continue
            texts.append(value)
            if slices.due():
                yield run, fields_of[run], texts
                texts = []
                await slices.pause()
        if texts:
            yield run, fields_of[run], texts
        if len(rows) < EXPORT_SLICE:
            break
        after = rows[-1][:3]
    if problems:
        logger.warning("not exporting %d damaged record(s): %s", len(problems), problems[0])


def _namespace_fields(text: str, problems: list[str]) -> dict | None:
    try:
        return check_namespace(parse_json(text))  # bounded: a stored namespace is text like any other
    except (ValueError, TypeError, AttributeError, StoreError) as error:
        problems.append(f"namespace {shown(text)}: {error}")
        return None


async def export_text(idb: Any, push: Callable[[str], Any], slices: Slices | None = None) -> tuple[int, int]:
    """Every readable stored entry as ``wgtune.export/1`` text laid out as ``wgtune cache export``
    writes it, handed to ``push`` a piece at a time (their concatenation is the text); (entries,
    namespaces)."""
    slices = slices or Slices()
    push(json.dumps({"format": EXPORT_FORMAT})[:-1] + ', "namespaces": [')
    current, entries, namespaces = None, 0, 0
    async for namespace_text, fields, texts in _exported(idb, slices):
        if namespace_text != current:
            header = json.dumps({"format": DOCUMENT_FORMAT, **fields}, ensure_ascii=False)[:-1] + ', "entries": [\n'
            push(("\n]},\n" if current is not None else "\n") + header + ",\n".join(texts))
            current, namespaces = namespace_text, namespaces + 1
        else:
            push(",\n" + ",\n".join(texts))
        entries += len(texts)
    push("\n]}\n]}\n" if current is not None else "]}\n")
    return entries, namespaces


class ExportDocument:
    """The export as Python objects, built from the parts :func:`export_document` hands over."""

    def __init__(self) -> None:
        self.value: Any = None
        self._entries: Any = None

    def parse(self, text: str) -> Any:
        return json.loads(text)

    def add(self, kind: str, text: str) -> None:
        """``kind`` "export": the document without namespaces; "namespace": one, without entries
        (the next entries are its); "entries": a JSON list of entries."""
        part = self.parse(text)
        if kind == "export":
            self.value = part
        elif kind == "namespace":
            self._append(self._get(self.value, "namespaces"), [part])
            self._entries = self._get(part, "entries")
        else:
            self._append(self._entries, part)

    def _get(self, value: Any, name: str) -> Any:
        return value[name]

    def _append(self, target: Any, items: Any) -> None:
        target.extend(items)


class JsExportDocument(ExportDocument):
    """The export as JavaScript objects (what ``wgtune.cache()`` answers), each part parsed by
    ``JSON.parse``: a slice of entries is a parse of some 200 KB, never one of the whole export."""

    def __init__(self, js: Any) -> None:
        super().__init__()
        self.js = js

    def parse(self, text: str) -> Any:
        return self.js.JSON.parse(text)

    def _get(self, value: Any, name: str) -> Any:
        return getattr(value, name)

    def _append(self, target: Any, items: Any) -> None:
        self.js.Array.prototype.push.apply(target, items)


async def export_document(idb: Any, document: ExportDocument, slices: Slices | None = None) -> Any:
    """Every readable stored entry as a ``wgtune.export/1`` document built in ``document`` a
    slice at a time; its value."""
    slices = slices or Slices()
    document.add("export", json.dumps({"format": EXPORT_FORMAT, "namespaces": []}))
    current = None
    async for namespace_text, fields, texts in _exported(idb, slices):
        if namespace_text != current:
            document.add("namespace", json.dumps({"format": DOCUMENT_FORMAT, **fields, "entries": []},
                                                 ensure_ascii=False))
            current = namespace_text
        document.add("entries", "[" + ",".join(texts) + "]")
    return document.value
