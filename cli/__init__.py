"""The ``wgtune`` command line: tune the demo suite, inspect the cache and the records.

::

    wgtune tune [--cache-dir DIR | --no-cache] [--records FILE] [--bundle FILE] [--json] [--dry-run] [--checks]
                [--log-level L] [--only SET] [--dawn]
    wgtune cache list | show [--json] [--candidates] | clear | export FILE | import FILE   [--cache-dir DIR]
    wgtune records FILE [--json]
    wgtune bundle OUT [SOURCES...] [--max-bytes N]
    wgtune serve [--host H] [--port P] [--request-timeout S] [--max-per-address N]
    wgtune collect --db PATH_OR_URL [--port P] [--host H] [--origin URL] [--request-timeout S] [--max-per-address N]
    wgtune farm [--workers N [--same-adapter] | --scheduler ADDRESS | --scheduler-file FILE] [--catalogue FILE]
                [--sets MODULE:FUNCTION] [--cache-dir DIR]

Exit status: 0 on success, 1 when a tune failed (no valid kernel, say), 2 for bad arguments or files,
130 when a farm was cancelled (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys

from wgtune.errors import ConfigError, StoreError, WgtuneError

from .console import configure_logging

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wgtune", description="An autotuner for WebGPU compute kernels.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tune = commands.add_parser("tune", help="tune the built-in demo suite on the default adapter")
    tune.add_argument("--cache-dir", help="where winners are kept (default: the user cache directory)")
    tune.add_argument("--records", metavar="FILE", help="append a record of every tune to this JSON Lines file")
    tune.add_argument("--bundle", metavar="FILE",
                      help="seed the tuner with a bundle's winners for this device (default: WGTUNE_BUNDLE)")
    tune.add_argument("--json", action="store_true", help="print a machine-readable summary instead of tables")
    tune.add_argument("--dry-run", action="store_true", help="compile every candidate, launch nothing, store nothing")
    tune.add_argument("--checks", action="store_true", help="check every candidate's output against the reference")
    tune.add_argument("--no-cache", action="store_true", help="keep winners in this process only")
    tune.add_argument("--only", metavar="SET", action="append", help="tune only this set (repeatable)")
    tune.add_argument("--dawn", action="store_true",
                      help="tune on Dawn (pip install 'wgtune[dawn]'): subgroup matrices where the GPU has them")
    tune.add_argument(
        "--log-level", choices=["disabled", "minimal", "full"], help="tune log detail (default: WGTUNE_LOG or minimal)"
    )

    cache = commands.add_parser("cache", help="list, show, clear, export or import stored winners")
    cache_dir_help = "the cache directory (default: WGTUNE_CACHE_DIR or the user cache directory)"
    cache.add_argument("--cache-dir", help=cache_dir_help)
    # Accepted after the action too (`wgtune cache list --cache-dir D`), without overriding one given before it.
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--cache-dir", default=argparse.SUPPRESS, help=cache_dir_help)
    actions = cache.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", parents=[after], help="one line per device namespace")
    show = actions.add_parser("show", parents=[after], help="every stored winner")
    show.add_argument("--json", action="store_true", help="print the entries as JSON (with every candidate's result)")
    show.add_argument("--candidates", action="store_true",
                      help="also a table per entry of every candidate: median, min - max, samples, failures' reasons")
    actions.add_parser("clear", parents=[after], help="forget every stored winner")
    export = actions.add_parser("export", parents=[after], help="write every namespace to one JSON document")
    export.add_argument("file", help="output file, or - for standard output")
    imported = actions.add_parser("import", parents=[after], help="merge an exported document into the cache")
    imported.add_argument("file", help="a document written by export (native or browser)")
    imported.add_argument("--max-bytes", type=byte_count, help="refuse a larger file (default: 512 MiB)")

    farm = commands.add_parser("farm", help="spread a catalogue's tunes over Dask workers, one per GPU adapter")
    farm.add_argument("--workers", type=worker_count, metavar="N",
                      help="a local cluster of N workers, worker i on adapter i (default: 1)")
    farm.add_argument("--same-adapter", action="store_true", help="every local worker on adapter 0 (one GPU, lavapipe)")
    farm.add_argument("--scheduler", metavar="ADDRESS", help="join this Dask scheduler's workers instead (one "
                      "worker per GPU; its adapter: WGTUNE_FARM_ADAPTER, or the number ending its --name)")
    farm.add_argument("--scheduler-file", metavar="FILE", help="join the scheduler that wrote this file "
                      "(dask scheduler --scheduler-file FILE); without either, Dask's scheduler-address config")
    farm.add_argument("--sets", metavar="MODULE:FUNCTION", help="your own sets: a function returning "
                      "wgtune.kernels.family.Family records, importable here and on every worker")
    farm.add_argument("--catalogue", metavar="FILE", help='JSON: {"matmul": [[M, N, K], ...], "fma": [[N]], '
                      '"row_sum": [[rows, cols]], ...} (default: the demo suite)')
    farm.add_argument("--cache-dir", help="where winners are kept (default: the user cache directory)")
    farm.add_argument("--only", metavar="SET", action="append", help="tune only this set (repeatable)")
    farm.add_argument("--retune", action="store_true", help="tune keys whose winners are stored already")
    farm.add_argument("--json", action="store_true", help="print a machine-readable summary instead of tables")

    records = commands.add_parser("records", help="show the tune records of a JSON Lines file")
    records.add_argument("file")
    records.add_argument("--json", action="store_true", help="print the records as JSON lines")
    bundle = commands.add_parser("bundle", help="one file of winners for many devices, from caches, exports, bundles")
    bundle.add_argument("out", metavar="OUT", help="the bundle file to write (replaced whole, never half written)")
    bundle.add_argument("sources", metavar="SOURCES", nargs="*",
                        help="cache directories, export files (native or browser) and bundles "
                             "(default: the user cache directory)")
    bundle.add_argument("--max-bytes", type=byte_count, help="refuse a larger source file (default: 512 MiB)")
    collect = commands.add_parser("collect", help="collect pages' winners and serve the fleet's bundle over HTTP")
    collect.add_argument("--db", required=True, metavar="PATH_OR_URL",
                         help="an SQLite file (made if missing), or postgresql://... (needs psycopg)")
    collect.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    collect.add_argument("--port", type=port, default=8100, help="port (default: 8100; 0 picks a free one)")
    collect.add_argument("--origin", action="append", metavar="URL",
                         help="a page origin browsers let report (CORS, repeatable; default: any). Not access "
                              "control: any HTTP client can still post")
    collect.add_argument("--rate", type=float, default=30.0, help="reports a minute per client address (default: 30)")
    collect.add_argument("--burst", type=int, default=32,
                         help="reports a client address may send at once (default: 32, the most a POST holds; "
                              "a POST of more than this is refused for good)")
    collect.add_argument("--min-reporters", type=int, default=3,
                         help="agreeing reporters that make a winner verified (default: 3)")
    collect.add_argument("--verbose", action="store_true", help="log every request")
    collect.add_argument("--sets", metavar="MODULE:FUNCTION", help="accept reports of your own sets too: a "
                         "function returning wgtune.kernels.family.Family records")
    serve = commands.add_parser("serve", help="serve the tuner page (Pyodide, the wheel) on 127.0.0.1")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=port, default=8000, help="port (default: 8000; 0 picks a free one)")
    serve.add_argument("--web-dir", help="the page's directory (default: web/ of this checkout)")
    serve.add_argument("--wheel", metavar="FILE", help="the wgtune wheel the page installs (default: built here)")
    serve.add_argument("--verbose", action="store_true", help="log every request")
    for server in (collect, serve):  # what one client may take (cli/pooled_server.py's Limits)
        server.add_argument("--request-timeout", type=seconds, metavar="S",
                            help="seconds a request may take to arrive whole from its first byte; a slower "
                                 "one is answered 408 and closed (default: 10)")
        server.add_argument("--max-per-address", type=connection_count, metavar="N",
                            help="connections one client address (an IPv6 /64) may have open at once; "
                                 "newer ones are refused with 503 (default: 64)")
    return parser


def port(text: str) -> int:
    number = int(text)  # argparse turns a ValueError into "invalid port value"
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{number} is not a port: give 0 to 65535")
    return number


def seconds(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: give a number of seconds above 0")
    return value


def connection_count(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number}: give at least 1 connection")
    return number


def worker_count(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number}: give at least 1 worker")
    return number


def byte_count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a number of bytes >= 1")
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging("disabled")  # every command shows problems (a damaged cache document, say)
    try:
        if args.command == "tune":
            from .tune import run_tune

            return run_tune(args)
        if args.command == "serve":
            from .serve import run_serve

            return run_serve(args)
        if args.command == "farm":
            from .farm import run_farm_command

            return run_farm_command(args)
        if args.command == "collect":
            from .collect import run_collect

            return run_collect(args)
        if args.command == "cache":
            from .cache import run_cache

            return run_cache(args)
        if args.command == "bundle":
            from .bundle import run_bundle

            return run_bundle(args)
        from .records import run_records

        return run_records(args)
    except BrokenPipeError:  # whoever read standard output stopped (`| head`): nothing is wrong to say
        _drop_stdout()
        return 1
    except KeyboardInterrupt:  # Ctrl-C: winners stored so far stay stored, the key being tuned is tuned next time
        print("wgtune: interrupted", file=sys.stderr)
        return 130
    except (ConfigError, StoreError, OSError) as error:
        print(f"wgtune: error: {error}", file=sys.stderr)
        return 2
    except WgtuneError as error:
        print(f"wgtune: {error}", file=sys.stderr)
        return 1


def _drop_stdout() -> None:
    """Point standard output at nothing, so that the interpreter's last flush of what is still
    buffered does not fail on the closed pipe again (Python's documented way, ``signal`` docs)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
