"""``wgtune bundle OUT.json [SOURCES...]``: one versioned file of winners for many devices.

Sources are cache directories (the SQLite database, ``wgtune.sqlite3``), export files
(``wgtune.export/1``, or one ``wgtune.cache/1`` document: the page's export is one) and other
bundles; without any, the user cache directory (``WGTUNE_CACHE_DIR``). Every source is read and
checked before anything is written: a source that cannot be read (missing, not JSON, not a
wgtune file) is an error naming it, and nothing is written. Within a source that can be read, an
entry that cannot (a damaged row, a bad entry of an export) is dropped and counted, with why.
The bundle is written to a temporary file beside ``OUT`` and renamed over it, so a failure never
leaves half a bundle under the name asked for. See ``wgtune.store.bundle`` for the format and the
merge rule.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from wgtune.config import Config
from wgtune.errors import StoreError
from wgtune.runner import run_inline
from wgtune.store.bounded_json import parse_json
from wgtune.store.bundle import BUNDLE_FORMAT, build_bundle, bundle_text, read_bundle
from wgtune.store.format import (
    DOCUMENT_FORMAT,
    EXPORT_FORMAT,
    StoredEntry,
    canonical_namespace,
    decode_document_leniently,
)
from wgtune.text import printable, shown

__all__ = ["Gathered", "gather", "run_bundle"]

SHOWN_PROBLEMS = 5
"""How many dropped entries the summary names one by one (the rest are counted)."""


@dataclass
class Gathered:
    """What the sources gave: (namespace, entries) per document, and each dropped entry's why."""

    documents: list[tuple[dict, list[StoredEntry]]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def _from_cache_dir(path: Path, gathered: Gathered) -> None:
    """A cache directory's database, read through the store contract's ``Database``."""
    from wgtune.backends.cache_transfer import SqliteDatabase
    from wgtune.backends.sqlite_store import DATABASE_NAME

    with SqliteDatabase(path) as database:
        if database.is_empty_cache():  # reading would create a database: say what is missing instead
            raise StoreError(f"{path} is not a wgtune cache directory (no {DATABASE_NAME} in it)")
        listing = run_inline(database.entries())
    gathered.documents.extend(listing.by_namespace())
    gathered.dropped.extend(f"{path}: {problem}" for problem in listing.problems)


def _from_file(path: Path, gathered: Gathered, max_bytes: int) -> None:
    size = path.stat().st_size
    if size > max_bytes:
        raise StoreError(f"{path} is {size} bytes, over the limit of {max_bytes} (see --max-bytes)")
    obj = parse_json(path.read_bytes())
    kind = obj.get("format") if isinstance(obj, dict) else None
    if kind == EXPORT_FORMAT:
        namespaces = obj.get("namespaces")
        if not isinstance(namespaces, list):
            raise StoreError("the export's namespaces must be a list")
        documents = namespaces
    elif kind == DOCUMENT_FORMAT:
        documents = [obj]
    elif isinstance(kind, str) and kind.startswith("wgtune.bundle/"):
        gathered.documents.extend(read_bundle(obj))  # a bundle is taken whole or not at all
        return
    else:
        found = shown(kind) if isinstance(obj, dict) else f"a JSON {type(obj).__name__}"
        raise StoreError(f"not a wgtune export, cache document or bundle (format {found}; want "
                         f"{EXPORT_FORMAT!r}, {DOCUMENT_FORMAT!r} or {BUNDLE_FORMAT!r})")
    for position, document in enumerate(documents):
        try:
            namespace, entries, problems = decode_document_leniently(document)
        except StoreError as bad:
            raise StoreError(f"namespace {position}: {bad}") from None
        gathered.documents.append((namespace, entries))
        gathered.dropped.extend(f"{path}: namespace {position}: {problem}" for problem in problems)


def gather(sources: list[str], *, max_bytes: int) -> Gathered:
    """Read every source (a cache directory, an export, a bundle). Raises StoreError naming the
    source that cannot be read; entries that cannot be read are dropped with why."""
    gathered = Gathered()
    for source in sources:
        path = Path(source)
        try:
            if path.is_dir():
                _from_cache_dir(path, gathered)
            elif path.exists():
                _from_file(path, gathered, max_bytes)
            else:
                raise StoreError("no such file or directory")
        except (StoreError, OSError) as bad:
            raise StoreError(f"source {source}: {printable(bad)}") from None
    return gathered


def _write(target: Path, text: str) -> None:
    """``text`` to ``target`` through a temporary file beside it, renamed once complete."""
    temp = target.with_name(f".{target.name}.partial")
    try:
        with temp.open("w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        temp.replace(target)
    finally:
        temp.unlink(missing_ok=True)


def run_bundle(args) -> int:
    """``wgtune bundle OUT [SOURCES...]``: build, write, and print what is in the bundle."""
    if args.sources:
        sources = args.sources
    else:  # WGTUNE_CACHE_DIR, else the platform's user cache directory, as open_tuner keeps winners there
        from wgtune.backends.file_store import default_cache_dir

        sources = [str(Config.from_env().cache_dir or default_cache_dir())]
    from wgtune.store.contract import IMPORT_LIMIT

    gathered = gather(sources, max_bytes=args.max_bytes or IMPORT_LIMIT)
    bundle = build_bundle(gathered.documents)
    target = Path(args.out)
    if target.is_dir():
        raise StoreError(f"{target} is a directory: give the bundle's file name")
    if not target.parent.is_dir():
        raise StoreError(f"{target}: no such directory {str(target.parent)!r}")
    _write(target, bundle_text(bundle))
    namespaces = bundle["namespaces"]
    devices = {canonical_namespace(ns["device"]) if isinstance(ns.get("device"), dict) else repr(ns)
               for ns in namespaces}
    sets = {entry["table"] for ns in namespaces for entry in ns["entries"]}
    keys = {(entry["table"], canonical_namespace(entry["key"])) for ns in namespaces for entry in ns["entries"]}
    entries = sum(len(ns["entries"]) for ns in namespaces)
    read = sum(len(entries) for _namespace, entries in gathered.documents)
    print(f"wrote {args.out}: {entries} winner(s) for {len(devices)} device(s) ({len(namespaces)} namespace(s)), "
          f"{len(keys)} key(s) of {len(sets)} set(s), from {len(sources)} source(s)")
    if read > entries:
        print(f"merged {read - entries} entr{'y' if read - entries == 1 else 'ies'} given by more than one source "
              "(kept the one with the higher confidence)")
    if gathered.dropped:
        print(f"dropped {len(gathered.dropped)} invalid entr{'y' if len(gathered.dropped) == 1 else 'ies'}:",
              file=sys.stderr)
        for problem in gathered.dropped[:SHOWN_PROBLEMS]:
            print(f"  {printable(problem)}", file=sys.stderr)
        if len(gathered.dropped) > SHOWN_PROBLEMS:
            print(f"  ... and {len(gathered.dropped) - SHOWN_PROBLEMS} more", file=sys.stderr)
    return 0
