"""``wgtune cache``: list, show, clear, export and import the stored winners."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.table import Table

from wgtune.errors import StoreError
from wgtune.log import format_seconds

from . import wide_console


def _directory(args) -> Path:
    from wgtune.backends.file_store import default_cache_dir

    return Path(args.cache_dir or default_cache_dir())


def _winner_median(entry) -> float | None:
    for result in entry.results:
        if result.get("name") == entry.winner_name and "median" in result:
            return result["median"]
    return None


def run_cache(args) -> int:
    from wgtune.backends import file_store

    directory = _directory(args)
    console = wide_console()
    if args.action == "list":
        paths = file_store.list_documents(directory)
        if not paths:
            console.print(f"no stored winners in {directory}")
            return 0
        table = Table(title=f"wgtune cache: {directory}")
        for column in ("file", "device", "backend", "tuner", "wgtune", "entries"):
            table.add_column(column)
        for path in paths:
            try:
                namespace, entries = file_store.read_document(path)
            except StoreError as error:
                table.add_row(path.name, f"[red]unreadable: {error}[/red]", "", "", "", "")
                continue
            device = namespace.get("device", {})
            table.add_row(path.name, str(device.get("device", "?")), str(device.get("backend", "?")),
                          str(namespace.get("tuner", "?")), str(namespace.get("wgtune", "?")), str(len(entries)))
        console.print(table)
        return 0
    if args.action == "show":
        rows = []
        for path in file_store.list_documents(directory):
            try:
                namespace, entries = file_store.read_document(path)
            except StoreError as error:
                print(f"wgtune: skipping an unreadable document: {error}", file=sys.stderr)
                continue
            rows += [(namespace, entry) for entry in entries]
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
            table.add_row(str(namespace.get("device", {}).get("device", "?")), entry.table, str(entry.key),
                          f"{entry.winner_name} (#{entry.winner})", format_seconds(median) if median else "-",
                          sure, str(len(entry.results)), entry.checksum[:12])
        console.print(table if rows else f"no stored winners in {directory}")
        return 0
    if args.action == "clear":
        removed = file_store.clear_all(directory)
        console.print(f"removed {removed} document(s) from {directory}")
        return 0
    if args.action == "export":
        document = file_store.export_all(directory)
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
    count = file_store.import_document(directory, document)
    console.print(f"imported {count} winner(s) into {directory}")
    return 0
