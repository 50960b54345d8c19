"""``wgtune cache``: list, show, clear, export and import the winners of the cache database
(``wgtune.sqlite3`` in the cache directory; see ``wgtune.backends.sqlite_store``), through the
store contract's ``Database`` (``wgtune.store.contract``): the same verbs the page uses on IndexedDB.
The native database's verbs never suspend, so they run inline (``wgtune.runner.run_inline``)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from wgtune.config import Config
from wgtune.errors import ConfigError, Skip, StoreError
from wgtune.runner import run_inline
from wgtune.store.format import StoredEntry
from wgtune.store.results import Measured, Result
from wgtune.text import printable
from wgtune.tune.adaptive import MIN_SAMPLES
from wgtune.tune.log import format_seconds

from .console import wide_console


def _database(args):
    """The cache database the command works on (a ``Database``), in ``--cache-dir``, else ``Config``'s
    directory (which reads ``WGTUNE_CACHE_DIR``), else the platform's user cache directory."""
    from wgtune.backends.cache_transfer import SqliteDatabase

    return SqliteDatabase(args.cache_dir or Config.from_env().cache_dir)


def _safe(text: object) -> str:
    """Text read from the cache or an import, shown in a table: non-printable characters escaped
    (``wgtune.text.printable``), Rich's markup escaped."""
    return escape(printable(text))


def _device_field(namespace: dict, field: str) -> str:
    """A field of the namespace's device (``"?"`` when the namespace has no such field), printable."""
    device = namespace.get("device")
    return printable(device.get(field, "?")) if isinstance(device, dict) else "?"


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
    device = _device_field(namespace, "device")
    title = _safe(f"{entry.set_name} [{entry.key}] on {device}: {len(results)} candidates")
    table = Table(title=title, title_justify="left")
    for column, justify in (("#", "right"), ("candidate", "left"), ("median", "right"), ("min - max", "right"),
                            ("samples", "right"), ("note", "left")):
        table.add_column(column, justify=justify)
    marked = False
    never_run = [index for index, result in enumerate(results) if isinstance(result, Skip) and not result.name]
    for index in _shown_order(results, entry.winner):
        result = results[index]
        if index in never_run[:1]:  # stored without names (a search's unchosen): one row for them all
            table.add_row("", f"{len(never_run)} others", "-", "-", "-", _safe(f"Skip: {entry.not_run}"))
        if isinstance(result, Skip) and not result.name:
            continue
        name = f"{result.name} (winner)" if index == entry.winner else result.name
        if isinstance(result, Measured) and result.stats is not None:
            stats, early = result.stats, result.eliminated_early
            marked = marked or early
            median = f"{EARLY_MARK}{format_seconds(stats.median)}" if early else format_seconds(stats.median)
            spread = f"{format_seconds(stats.min)} - {format_seconds(stats.max)}"
            note = "eliminated early" if early else ""
            table.add_row(str(index), _safe(name), median, spread, str(len(stats.samples)), note)
        elif isinstance(result, Measured):
            table.add_row(str(index), _safe(name), "-", "-", "0", "dry run: compiled, not measured")
        else:
            table.add_row(str(index), _safe(name), "-", "-", "-", _safe(f"{type(result).__name__}: {result.reason}"))
    return table, marked


def _print_candidates(console, rows: list[tuple[dict, StoredEntry]]) -> None:
    """``cache show --candidates``: a table per entry of every candidate's result."""
    marked = False
    for namespace, entry in rows:
        try:
            results = entry.decoded_results()
        except StoreError as error:
            print(f"wgtune: cannot show the candidates of {printable(error)}", file=sys.stderr)
            continue
        table, early = candidates_table(namespace, entry, results)
        marked = marked or early
        console.print(table)
    if marked:
        console.print(EARLY_FOOTNOTE)


def _list(console, database) -> None:
    """``cache list``: the database, then one line per namespace with its entries."""
    namespaces = run_inline(database.namespaces())
    if not namespaces:
        console.print(f"no stored winners in {database.where}")
        return
    table = Table(title=f"wgtune cache: {database.where}")
    for column in ("device", "backend", "driver", "tuner", "wgtune", "entries"):
        table.add_column(column)
    for summary in namespaces:
        namespace, count = summary.namespace, str(summary.entries)
        if summary.damaged:
            count += f" [red](+{summary.damaged} damaged, kept aside)[/red]"
        table.add_row(*(escape(_device_field(namespace, field)) for field in ("device", "backend", "driver")),
                      _safe(namespace.get("tuner", "?")), _safe(namespace.get("wgtune", "?")), count)
    console.print(table)


def _show(console, database, args) -> None:
    """``cache show``: every stored winner, as a table or as JSON."""
    listing = run_inline(database.entries())
    rows, problems = listing.entries, listing.problems
    if problems:
        print(f"wgtune: left out what could not be read in {database.where} ({len(problems)} problem(s), the first: "
              f"{printable(problems[0])})", file=sys.stderr)
    if args.json:
        json.dump([{"device": ns.get("device"), **e.to_json()} for ns, e in rows], sys.stdout, indent=2)
        print()
        return
    table = Table(title=f"stored winners: {database.where}")
    for column in ("device", "set", "key", "winner", "median", "confidence", "candidates", "checksum"):
        table.add_column(column)
    for namespace, entry in rows:
        median = _winner_median(entry)
        sure = _safe(f"{entry.confidence.short()} vs {entry.confidence.runner_up}") if entry.confidence else "-"
        table.add_row(escape(_device_field(namespace, "device")), _safe(entry.set_name),
                      _safe(entry.key), _safe(f"{entry.winner_name} (#{entry.winner})"),
                      format_seconds(median) if median else "-", sure, str(len(entry.results)),
                      _safe(entry.checksum[:12]))
    console.print(table if rows else f"no stored winners in {database.where}")
    if args.candidates:
        _print_candidates(console, rows)


def _cache_file(database, target: Path) -> bool:
    """Whether ``target`` is one of the cache's own files: the database, its ``-wal``, ``-shm``,
    lock or set-aside copies, an old document (``cache_files.is_wgtune_file``), or a symbolic link to one."""
    from wgtune.backends.cache_files import DATABASE_NAME, is_wgtune_file

    real = Path(os.path.realpath(target))
    return real.parent == Path(os.path.realpath(database.path.parent)) and (
        real.name.startswith(DATABASE_NAME) or is_wgtune_file(real.name))


def _export(console, database, args) -> None:
    """``cache export``: one ``wgtune.export/1`` document, written as the rows are read.

    A regular file is written whole or not at all (a temporary file, renamed); a link is followed
    (its target is written, the link stays); a device or a FIFO (``/dev/stdout``) is written to
    as it is, never replaced by a file. The cache's own files are refused: an export over the
    database would replace every winner with their JSON."""
    if args.file == "-":
        run_inline(database.export_to(sys.stdout))
        return
    if _cache_file(database, Path(args.file)):
        raise ConfigError(f"not exporting onto {args.file}: it is one of the cache's own files ({database.where}); "
                          "name another file")
    try:
        kind = os.stat(args.file).st_mode  # through links, /dev/stdout's too
    except FileNotFoundError:
        kind = None
    if kind is not None and not stat.S_ISREG(kind):  # a device, a FIFO (a directory: IsADirectoryError)
        with open(args.file, "w", encoding="utf-8") as out:
            count, namespaces = run_inline(database.export_to(out))
        # on standard error: the device may be standard output (/dev/stdout), the document's own
        print(f"exported {count} winner(s) from {namespaces} namespace(s) to {args.file}", file=sys.stderr)
        return
    target = Path(os.path.realpath(args.file))  # a link's target is replaced, the link stays
    if not target.parent.is_dir():  # said of the name asked for, not of the temporary file beside it
        raise ConfigError(f"cannot export to {args.file}: no such directory {str(target.parent)!r}")
    temp = target.with_name(f".{target.name}.partial")
    try:
        with temp.open("w", encoding="utf-8") as out:
            count, namespaces = run_inline(database.export_to(out))
        temp.replace(target)  # a failed export leaves no half file under the name asked for
    finally:
        temp.unlink(missing_ok=True)
    console.print(f"exported {count} winner(s) from {namespaces} namespace(s) to {args.file}")


def run_cache(args) -> int:
    """``wgtune cache ACTION``: list, show, clear, export or import the cache database's winners.
    A cache with nothing stored is read without creating a database (``SqliteDatabase``)."""
    from wgtune.store.contract import IMPORT_LIMIT

    console = wide_console()
    with _database(args) as database:
        if args.action == "list":
            _list(console, database)
        elif args.action == "show":
            _show(console, database, args)
        elif args.action == "export":
            _export(console, database, args)
        elif args.action == "clear":
            namespaces, removed, damaged = run_inline(database.clear())
            also = f" and {damaged} damaged row(s)" if damaged else ""
            console.print(f"removed {removed} winner(s) of {namespaces} namespace(s){also} from {database.where}")
        else:
            source = sys.stdin.buffer if args.file == "-" else args.file
            max_bytes = getattr(args, "max_bytes", None) or IMPORT_LIMIT
            count = run_inline(database.import_from(source, max_bytes=max_bytes))
            console.print(f"imported {count} winner(s) into {database.where}")
    return 0
