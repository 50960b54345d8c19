"""``wgtune cache``: list, show, clear, export and import the stored winners."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from wgtune.adaptive import MIN_SAMPLES
from wgtune.config import Config
from wgtune.documents import DocumentStore
from wgtune.errors import Skip, StoreError
from wgtune.log import format_seconds
from wgtune.results import Measured, Result
from wgtune.runner import run_inline
from wgtune.store import StoredEntry

from .console import wide_console


def _cache(args):
    """The cache directory the command works on: ``--cache-dir``, else ``Config``'s (which reads
    ``WGTUNE_CACHE_DIR``), else the platform's user cache directory."""
    from wgtune.backends.file_store import CacheDirectory

    return CacheDirectory(args.cache_dir or Config.from_env().cache_dir)


def _winner_median(entry) -> float | None:
    for result in entry.results:
        if result is not None and result.get("name") == entry.winner_name and "median" in result:
            return result["median"]
    return None


EARLY_MARK = "~"
EARLY_FOOTNOTE = (
    f"{EARLY_MARK} eliminated early, after fewer than {MIN_SAMPLES} samples: it lost clearly, "
    "but its median is unreliable (one sample may have been descheduled)"
)


def _shown_order(results: tuple[Result, ...], winner: int) -> list[int]:
    """The winner first, then the other measured candidates by median, then the failed ones,
    then those not run (in the set's order within each)."""
    def rank(index: int) -> tuple:
        result = results[index]
        if index == winner:
            return (0, 0.0, index)
        if isinstance(result, Measured):
            return (1, result.stats.median if result.stats is not None else float("inf"), index)
        return (3 if isinstance(result, Skip) else 2, 0.0, index)

    return sorted(range(len(results)), key=rank)


def candidates_table(namespace: dict, entry: StoredEntry, results: tuple[Result, ...]) -> tuple[Table, bool]:
    """One entry's candidates as a table (median, min-max, samples, or the failure's reason), and
    whether a median in it is marked as eliminated early."""
    device = namespace.get("device", {}).get("device", "?")
    title = escape(f"{entry.set_name} [{entry.key}] on {device}: {len(results)} candidates")
    table = Table(title=title, title_justify="left")
    for column, justify in (("#", "right"), ("candidate", "left"), ("median", "right"), ("min - max", "right"),
                            ("samples", "right"), ("note", "left")):
        table.add_column(column, justify=justify)
    marked = False
    never_run = [index for index, result in enumerate(results) if isinstance(result, Skip) and not result.name]
    for index in _shown_order(results, entry.winner):
        result = results[index]
        if index in never_run[:1]:  # stored without names (a search's unchosen): one row for them all
            table.add_row("", f"{len(never_run)} others", "-", "-", "-", escape(f"Skip: {entry.not_run}"))
        if isinstance(result, Skip) and not result.name:
            continue
        name = f"{result.name} (winner)" if index == entry.winner else result.name
        if isinstance(result, Measured) and result.stats is not None:
            stats, early = result.stats, result.eliminated_early
            marked = marked or early
            median = f"{EARLY_MARK}{format_seconds(stats.median)}" if early else format_seconds(stats.median)
            spread = f"{format_seconds(stats.min)} - {format_seconds(stats.max)}"
            note = "eliminated early" if early else ""
            table.add_row(str(index), escape(name), median, spread, str(len(stats.samples)), note)
        elif isinstance(result, Measured):
            table.add_row(str(index), escape(name), "-", "-", "0", "dry run: compiled, not measured")
        else:
            table.add_row(str(index), escape(name), "-", "-", "-", escape(f"{type(result).__name__}: {result.reason}"))
    return table, marked


def _print_candidates(console, rows: list[tuple[dict, StoredEntry]]) -> None:
    """``cache show --candidates``: a table per entry of every candidate's result."""
    marked = False
    for namespace, entry in rows:
        try:
            results = entry.decoded_results()
        except StoreError as error:
            print(f"wgtune: cannot show the candidates of {error}", file=sys.stderr)
            continue
        table, early = candidates_table(namespace, entry, results)
        marked = marked or early
        console.print(table)
    if marked:
        console.print(EARLY_FOOTNOTE)


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
        if args.candidates:
            _print_candidates(console, rows)
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
