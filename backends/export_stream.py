"""Reading a ``wgtune.export/1`` document (or one ``wgtune.cache/1`` document) entry by entry.

An export of 100k winners is tens of megabytes: parsed whole it is one tree of Python objects and,
in the page, one task of seconds. :func:`read_export` walks the document's structure by hand and
parses each entry and namespace field with ``json`` as it comes, each checked as every import is
(``bounded_json.parse_json``, ``StoredEntry.from_json``), so a caller can stage entries as they come
(``cache_transfer.py``: SQLite's temporary tables) or stop between two (``idb_transfer.py``: the
page's main thread, a slice at a time).

Anything it does not expect (a bad entry, an odd shape, repeated fields) raises :class:`Unusual`:
the caller then reads the text the plain way (``DocumentStore.check_import`` and
``store.decode_export`` on the whole), which gives the exact error, or imports the odd but valid
file. Neither writes anything before all of the text was read and checked.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator

from wgtune.errors import StoreError
from wgtune.store.bounded_json import CHECKED_JSON, check_bounds
from wgtune.store.format import DOCUMENT_FORMAT, EXPORT_FORMAT, StoredEntry, as_imported, check_namespace

__all__ = ["CHUNK", "ExportStream", "Unusual", "read_export"]

CHUNK = 1 << 20


class Unusual(Exception):
    """The stream met something it does not handle: the plain path decides."""


class ExportStream:
    """JSON text read in chunks of at least ``chunk`` characters or bytes from ``read(size)``, which
    answers text or UTF-8 bytes ('' or b'' at the end): whitespace, single characters, and whole
    values by ``raw_decode``."""

    def __init__(self, read: Callable[[int], str | bytes], chunk: int = CHUNK) -> None:
        self.read = read
        self.chunk = chunk
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()  # a byte-order mark (Windows editors) is no text
        self.buffer, self.pos, self.eof = "", 0, False
        self.json = json.JSONDecoder()

    def _fill(self, at_least: int = 0) -> bool:
        if self.eof:
            return False
        data = self.read(max(at_least, self.chunk))
        if isinstance(data, str):
            text = data
        else:
            try:
                text = self.decoder.decode(data, final=not data)
            except UnicodeDecodeError:
                raise Unusual from None
        self.eof = not data
        self.buffer = self.buffer[self.pos:] + text
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ('' at the end), not consumed."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos] in " \t\n\r":
                self.pos += 1
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self._fill():
                return ""

    def take(self, expected: str) -> None:
        if self.peek() != expected:
            raise Unusual
        self.pos += 1

    def value(self, *, checked: bool = True) -> object:
        """The next JSON value; ``checked``: parsed as every import is (``bounded_json.parse_json``: depth,
        numbers, repeated keys). A value must end before the buffer does (a number cut at a chunk's
        end would read short), so the buffer grows (doubling) until it does, or the text ends."""
        self.peek()
        decoder = CHECKED_JSON if checked else self.json
        while True:
            try:
                value, end = decoder.raw_decode(self.buffer, self.pos)
                if end < len(self.buffer) or self.eof:
                    break
            except (RecursionError, ValueError):
                if self.eof:
                    raise Unusual from None
            self._fill(len(self.buffer) - self.pos)
        start, self.pos = self.pos, end
        if checked:
            try:
                check_bounds(self.buffer[start:end])
            except StoreError:
                raise Unusual from None
        return value

    def members(self) -> Iterator[str]:
        """The keys of the object that starts here, each left for the caller to read its value."""
        self.take("{")
        if self.peek() == "}":
            self.pos += 1
            return
        seen = set()
        while True:
            key = self.value(checked=False)
            if not isinstance(key, str) or key in seen:
                raise Unusual
            seen.add(key)
            self.take(":")
            yield key
            if self.peek() == "}":
                self.pos += 1
                return
            self.take(",")

    def items(self) -> Iterator[None]:
        """Once per element of the array that starts here, each left for the caller to read."""
        self.take("[")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield
            if self.peek() == "]":
                self.pos += 1
                return
            self.take(",")


def _entries(stream: ExportStream, doc: int) -> Iterator[tuple[int, StoredEntry]]:
    for _ in stream.items():
        try:
            yield doc, as_imported(StoredEntry.from_json(stream.value()))
        except StoreError:
            raise Unusual from None


def _namespace(doc: int, fields: dict) -> tuple[int, dict]:
    """A document's fields, read whole: it is a wgtune document, or the plain path decides."""
    if fields.pop("format", None) != DOCUMENT_FORMAT:
        raise Unusual
    return doc, check_namespace(fields)


def read_export(stream: ExportStream) -> Iterator[tuple[int, StoredEntry | dict]]:
    """The export in ``stream``, in the order of its text: ``(doc, entry)`` for each entry (as an
    import keeps it: ``as_imported``) and ``(doc, namespace)`` once a document's fields are read
    (after its entries, when they come first). ``doc`` numbers the export's documents from 1; 0 is
    the top level, a document of its own when the text is one ``wgtune.cache/1`` document. Entries
    of a ``doc`` that never gets a namespace are not part of the import (an export's own top-level
    ``entries``, which the plain path ignores too). Raises :class:`Unusual` (see the module doc),
    or StoreError for a namespace that is not one."""
    top: dict = {}
    for key in stream.members():
        if key == "namespaces" and stream.peek() == "[":
            top[key] = True
            for doc, _ in enumerate(stream.items(), start=1):
                fields: dict = {}
                for field in stream.members():
                    if field == "entries" and stream.peek() == "[":
                        yield from _entries(stream, doc)
                    elif field == "entries":
                        raise Unusual
                    else:
                        fields[field] = stream.value()
                yield _namespace(doc, fields)
        elif key == "entries" and stream.peek() == "[":
            yield from _entries(stream, 0)
        elif key in ("namespaces", "entries"):
            raise Unusual
        else:
            top[key] = stream.value()
    if stream.peek() != "":
        raise Unusual
    if top.get("format") == DOCUMENT_FORMAT and "namespaces" not in top:
        yield _namespace(0, top)
    elif top.get("format") != EXPORT_FORMAT or "namespaces" not in top:
        raise Unusual
