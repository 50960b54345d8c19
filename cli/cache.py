"""``wgtune cache``: list, show, clear, export and import the stored winners."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.table import Table

from wgtune.config import Config
from wgtune.documents import DocumentStore
from wgtune.errors import StoreError
from wgtune.log import format_seconds
from wgtune.runner import run_inline

from .console import wide_console


def _cache(args):
    """The cache directory the command works on: ``--cache-dir``, else ``Config``'s (which reads
    ``WGTUNE_CACHE_DIR``), else the platform's user cache directory."""
    from wgtune.backends.file_store import CacheDirectory

    return CacheDirectory(args.cache_dir or Config.from_env().cache_dir)


def _winner_median(entry) -> float | None:
    for result in entry.results:
        if result.get("name") == entry.winner_name and "median" in result:
            return result["median"]
    return None


def run_cache(args) -> int:
    cache = _cache(args)
    directory, documents = cache.directory, DocumentStore(cache)
    console = wide_console()
    if args.action == "list":
        listed = run_inline(documents.documents())
        if not listed:
            console.print(f"no stored winners in {directory}")
            return 0
        table = Table(title=f"wgtune cache: {directory}")
        for column in ("file", "device", "backend", "tuner", "wgtune", "entries"):
            table.add_column(column)
        for document in listed:
            if document.damage is not None:
                table.add_row(document.name, f"[red]unreadable: {document.damage}[/red]", "", "", "", "")
                continue
            namespace, count = document.namespace, str(len(document.entries))
            if document.problems:
                count += f" [red](+{len(document.problems)} unreadable)[/red]"
            device = namespace.get("device", {})
            table.add_row(document.name, str(device.get("device", "?")), str(device.get("backend", "?")),
                          str(namespace.get("tuner", "?")), str(namespace.get("wgtune", "?")), count)
        console.print(table)
        return 0
    if args.action == "show":
        rows = []
        for document in run_inline(documents.documents()):
            if document.damage is not None:
                print(f"wgtune: skipping an unreadable document: {document.where}: {document.damage}", file=sys.stderr)
                continue
            if document.problems:
                print(f"wgtune: skipping {len(document.problems)} unreadable entries of {document.where}: "
                      f"{document.problems[0]}", file=sys.stderr)
            rows += [(document.namespace, entry) for entry in document.entries]
        if args.json:
            json.dump([{"device": ns.get("device"), **e.to_json()} for ns, e in rows], sys.stdout, indent=2)
            print()
            return 0
        table = Table(title=f"stored winners: {directory}")
        for column in ("device", "set", "key", "winner", "median", "confidence", "candidates", "checksum"):
            table.add_column(column)
        for namespace, entry in rows:
            median = _winner_median(entry)
            sure = f"{entry.confidence.short()} vs {entry.confidence.runner_up}" if entry.confidence else "-"
            table.add_row(str(namespace.get("device", {}).get("device", "?")), entry.set_name, str(entry.key),
                          f"{entry.winner_name} (#{entry.winner})", format_seconds(median) if median else "-",
                          sure, str(len(entry.results)), entry.checksum[:12])
        console.print(table if rows else f"no stored winners in {directory}")
        return 0
    if args.action == "clear":
        removed = run_inline(documents.clear_all())
        console.print(f"removed {removed} document(s) from {directory}")
        return 0
    if args.action == "export":
        document = run_inline(documents.export())
        text = json.dumps(document, indent=2)
        if args.file == "-":
            print(text)
        else:
            Path(args.file).write_text(text + "\n")
            count = sum(len(ns.get("entries", [])) for ns in document["namespaces"])
            console.print(f"exported {count} winner(s) from {len(document['namespaces'])} namespace(s) to {args.file}")
        return 0
    # import
    try:
        document = json.loads(sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise StoreError(f"{args.file} is not JSON: {error}") from None
    count = run_inline(documents.import_document(document))
    console.print(f"imported {count} winner(s) into {directory}")
    return 0
