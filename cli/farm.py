"""``wgtune farm``: a catalogue's tunes spread over Dask workers, one per GPU adapter (``backends/farm.py``).

::

    wgtune farm --workers 2                       # a local cluster, worker i on adapter i
    wgtune farm --workers 2 --same-adapter        # both on adapter 0 (one GPU; lavapipe)
    wgtune farm --scheduler tcp://host:8786       # a cluster you run (or --scheduler-file, or Dask's config)
    wgtune farm --catalogue shapes.json           # {"matmul": [[M, N, K], ...], "fma": [[N]], ...}
    wgtune farm --sets my_kernels:families        # your own sets (Family records), on every worker too

A catalogue may name the set of any registered kernel family (``wgtune.kernels.families.FAMILIES``)
or of ``--sets``, each size one number per dim of its family; an unknown set is an error naming the
known ones. Each key is tuned once per device type among the workers. Progress over every tune,
then a summary per worker; winners are merged into the cache database as they arrive, under each
worker's device. Ctrl-C cancels what is left and keeps what finished. Exit status: 0 when every
job found its winner, 1 when some failed (or the scheduler was lost), 130 when cancelled.
"""

from __future__ import annotations

import json
import logging
import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from wgtune.config import Config
from wgtune.errors import ConfigError
from wgtune.tune.log import format_seconds

from .console import wide_console

__all__ = ["run_farm_command"]

CANCELLED = 130  # what a shell reports for a command stopped by Ctrl-C


def run_farm_command(args) -> int:
    try:
        import distributed  # noqa: F401 (only to say how to get it)
    except ImportError:
        raise ConfigError("wgtune farm needs Dask distributed: pip install 'wgtune[farm]'") from None
    import dask
    from distributed import Client

    from wgtune.backends.farm import (
        SchedulerLost,
        WinnerMerger,
        default_catalogue,
        load_catalogue,
        local_cluster,
    )

    joined = args.scheduler or args.scheduler_file
    if args.scheduler and args.scheduler_file:
        raise ConfigError("give --scheduler or --scheduler-file, not both")
    if joined and (args.workers is not None or args.same_adapter):
        raise ConfigError("--scheduler joins a cluster that has its workers: --workers and --same-adapter do not apply")
    configured = None if joined or args.workers is not None else dask.config.get("scheduler-address", None)
    overrides = {"cache_dir": args.cache_dir} if args.cache_dir else {}
    config = Config.from_env(**overrides)
    only = args.only
    if args.sets:
        from wgtune.backends.user_sets import register_sets

        families = register_sets(args.sets)
        if only is None and not args.catalogue:  # the default catalogue: your sets' demo sizes
            only = [family.name for family in families]
    jobs = load_catalogue(args.catalogue, only) if args.catalogue else default_catalogue(only)
    merger = WinnerMerger(config.cache_dir)
    console = Console(stderr=True)
    cluster = None
    quiet = _QuietDask()
    try:
        if joined or configured:
            address = args.scheduler or configured
            where = address or f"the scheduler of {args.scheduler_file}"
            with quiet:
                client = Client(address, scheduler_file=args.scheduler_file, timeout="30s")
        else:
            cluster = local_cluster(args.workers or 1, same_adapter=args.same_adapter)
            client = Client(cluster)
            where = "a local cluster"
        with quiet, client:  # quiet until the client is closed too (its reconnection's tracebacks)
            _check_versions(client)
            link = _dashboard(client) if (joined or configured) else None
            console.print(escape(f"farm on {where}" + (f"; dashboard: {link}" if link else "")), highlight=False)
            report = _run(client, jobs, merger, config, console, args)
    except KeyboardInterrupt:  # before the jobs went out (the cluster starting): nothing to keep
        console.print("cancelled before any job ran")
        return CANCELLED
    except SchedulerLost as lost:
        console.print(escape(f"wgtune: {lost}"), highlight=False, soft_wrap=True)
        return 1
    finally:
        if cluster is not None:
            cluster.close()
        merger.close()
    if args.json:
        json.dump(_as_json(report, merger), sys.stdout, indent=2)
        print()
    else:
        _print_summary(wide_console(), report, merger)
    if report.cancelled:
        return CANCELLED
    return 1 if report.failed else 0


class _QuietDask:
    """Dask's own log lines (a lost connection's tracebacks, its reconnection attempts) kept out of
    the farm's output while it runs: the farm says what went wrong, in one line."""

    def __enter__(self) -> None:
        names = [name for name in logging.root.manager.loggerDict if name.split(".")[0] in ("distributed", "tornado")]
        self.levels = {name: logging.getLogger(name).level for name in {"distributed", "tornado", *names}}
        for name in self.levels:
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)

    def __exit__(self, *exc: object) -> None:
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)


def _dashboard(client) -> str | None:
    """The cluster's dashboard link, when its scheduler serves one."""
    try:
        services = client.scheduler_info(n_workers=0).get("services", {})
    except Exception:  # a link for the output: never worth failing the farm over
        return None
    return client.dashboard_link if "dashboard" in services else None


def _check_versions(client) -> None:
    """Dask's own check that the client and the workers run the same Python, Dask and so on
    (``client.get_versions(check=True)``), its mismatch a ConfigError; wgtune's version is
    checked per worker by the farm."""
    try:
        client.get_versions(check=True)
    except ValueError as error:
        raise ConfigError(f"the cluster's versions differ from this client's: {error}") from None


def _run(client, jobs, merger, config, console, args):
    from wgtune.backends.farm import run_farm

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=args.json)
    bar = {}

    def started(report, submitted: int) -> None:
        for address, state in sorted(report.unusable.items()):
            progress.console.print(escape(f"worker {state.get('name', address)} ({address}) cannot tune, given no "
                                          f"jobs: {state.get('error')}"), highlight=False)
        workers = len(report.workers)
        devices = len({state["resource"] for state in report.workers.values()})
        skipped = f", {len(report.skipped)} already stored" if report.skipped else ""
        bar["id"] = progress.add_task(f"farm: {submitted} tune(s) on {workers} worker(s) of {devices} device "
                                      f"type(s){skipped}", total=submitted)

    def finished(result) -> None:
        progress.advance(bar["id"])
        if not result.ok:
            progress.console.print(escape(f"failed: {result.job.label} on {result.worker or '?'}: {result.error}"),
                                   highlight=False)

    with progress:
        return run_farm(client, jobs, merger, config, retune=args.retune, sets=args.sets, on_start=started,
                        on_result=finished)


def _print_summary(console: Console, report, merger) -> None:
    table = Table(title="wgtune farm: jobs per worker")
    for column in ("worker", "adapter", "device", "done", "failed", "tune time"):
        table.add_column(column, justify="right" if column in ("adapter", "done", "failed", "tune time") else "left")
    for worker, row in sorted(report.per_worker().items()):
        table.add_row(escape(worker), str(row["adapter"]), escape(str(row["device"])), str(row["done"]),
                      str(row["failed"]), format_seconds(row["seconds"]))
    if report.results:
        console.print(table)
    for result in report.failed:
        console.print(escape(f"failed: {result.job.label} [{result.job.key}]: {result.error}"), highlight=False)
    not_run = report.jobs - len(report.skipped) - len(report.results)
    console.print(escape(
        f"{len(report.done)} done, {len(report.failed)} failed, "
        f"{report.retried} retried (ran, failed, ran again: their worker died or they raised), "
        f"{len(report.skipped)} already stored" + (f", {not_run} cancelled" if report.cancelled else "")
        + f" of {report.jobs} job(s) in {format_seconds(report.wall)} on {len(report.workers)} worker(s); "
        f"winners kept in {merger.path}"), highlight=False)


def _as_json(report, merger) -> dict:
    return {
        "jobs": report.jobs, "done": len(report.done), "failed": len(report.failed), "retried": report.retried,
        "skipped": len(report.skipped), "cancelled": report.cancelled, "wall": report.wall, "store": str(merger.path),
        "workers": report.per_worker(),
        "unusable": {state.get("name", address): state.get("error") for address, state in report.unusable.items()},
        "results": [{"set": r.job.set_name, "size": list(r.job.size), "key": r.job.key.as_dict(), "worker": r.worker,
                     "device": r.device, "winner": r.entry.winner_name if r.entry else None, "error": r.error,
                     "seconds": r.seconds} for r in report.results],
    }
