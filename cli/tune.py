"""``wgtune tune``: tune the demo suite natively, with progress and a results table."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from wgtune.config import Config
from wgtune.errors import ConfigError
from wgtune.key import Key
from wgtune.state import Hit
from wgtune.store.confidence import Confidence
from wgtune.tune.events import TrialFinished, TuneFinished, TuneStarted
from wgtune.tune.log import format_seconds

from .console import configure_logging, wide_console

if TYPE_CHECKING:
    from wgtune.kernels.demo import DemoCase


@dataclass
class KeySummary:
    """One key's line in the results: what won, how fast, against what."""

    set_name: str
    key: Key
    status: str  # "tuned" or "hit"
    winner: str
    median: float | None = None
    runner_up: str | None = None
    runner_up_median: float | None = None
    first_median: float | None = None
    confidence: Confidence | None = None

    @property
    def speedup(self) -> float | None:
        if self.median and self.first_median:
            return self.first_median / self.median
        return None

    def to_json(self) -> dict:
        return {
            "set": self.set_name,
            "key": self.key.as_dict(),
            "status": self.status,
            "winner": self.winner,
            "median": self.median,
            "runner_up": self.runner_up,
            "runner_up_median": self.runner_up_median,
            "first_median": self.first_median,
            "speedup_over_first": self.speedup,
            "confidence": self.confidence.to_json() if self.confidence is not None else None,
        }


def summarize(
    set_name: str, key: Key, status: str, winner: str, results: list[dict], first: str,
    confidence: Confidence | None = None,
) -> KeySummary:
    measured = [r for r in results if r is not None and "median" in r]
    medians = {r["name"]: r["median"] for r in measured}
    ranked = [r["name"] for r in sorted(measured, key=lambda r: r["median"])]
    runner_up = confidence.runner_up if confidence is not None else next((n for n in ranked if n != winner), None)
    return KeySummary(
        set_name=set_name,
        key=key,
        status=status,
        winner=winner,
        median=medians.get(winner),
        runner_up=runner_up,
        runner_up_median=medians.get(runner_up) if runner_up else None,
        first_median=medians.get(first),
        confidence=confidence,
    )


def chosen_cases(only: list[str] | None) -> list[DemoCase]:
    """The demo suite's cases that ``--only`` names (all without it), in the suite's order; a name
    that is no set of the suite is a ConfigError naming it and the sets (exit 2, before any work)."""
    from wgtune.kernels.demo import demo_suite

    suite = demo_suite()
    known = [case.tunables.name for case in suite]
    unknown = [name for name in dict.fromkeys(only or ()) if name not in known]
    if unknown:
        raise ConfigError(f"--only: unknown set(s) {', '.join(unknown)}; sets: {', '.join(known)}")
    return [case for case in suite if not only or case.tunables.name in only]


def run_tune(args) -> int:
    from wgtune.backends.local import open_tuner

    cases = chosen_cases(args.only)
    overrides = {}
    if args.cache_dir:
        overrides["cache_dir"] = args.cache_dir
    if args.records:
        overrides["records"] = args.records
    if args.bundle:
        overrides["bundle"] = args.bundle
    if args.dry_run:
        overrides["dry_run"] = True
    if args.checks:
        overrides["checks"] = True
    if args.no_cache:
        overrides["cache"] = False
    if args.log_level:
        overrides["log_level"] = args.log_level
    config = Config.from_env(**overrides)
    configure_logging(config.log_level.value if not args.json else "disabled")

    console = Console(stderr=True)
    trials: dict[tuple[str, Key], dict[int, object]] = {}  # each candidate's latest result
    started: list[tuple[str, Key]] = []
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, disable=args.json,
    )
    bars: dict[str, int] = {}
    sizes_of: dict[str, int] = {}  # candidates per key of each set

    def observe(event: object) -> None:
        if isinstance(event, TuneFinished) and event.set_name in bars:
            # Candidates the plan skipped never report: count the key as done.
            unreported = sizes_of[event.set_name] - len(trials[(event.set_name, event.key)])
            progress.advance(bars[event.set_name], unreported)
        if isinstance(event, TuneStarted):
            started.append((event.set_name, event.key))
            trials[(event.set_name, event.key)] = {}
        elif isinstance(event, TrialFinished):
            seen = trials[(event.set_name, event.key)]
            if event.index not in seen and event.set_name in bars:  # a finalist reports again at the end
                progress.advance(bars[event.set_name])
            seen[event.index] = event.result

    device = None
    if args.dawn:
        from wgtune.backends.dawn import DawnDevice

        device = DawnDevice.open()
    tuner = open_tuner(device, config=config, observer=observe)
    if not args.json:
        console.print(store_line(tuner, config), highlight=False)
    summaries: list[KeySummary] = []
    with progress:
        for case in cases:
            tunables = case.tunables
            sizes_of[tunables.name] = len(tunables)
            bars[tunables.name] = progress.add_task(
                f"{tunables.name} ({len(case.sizes)} keys)", total=len(case.sizes) * len(tunables)
            )
            for size in case.sizes:
                call = case.make_args(tuner.device, size)
                key = tuner.key(tunables, call)
                tunes_before = len(started)
                state = tuner.check_tune(tunables, key, call)
                tuner.execute(tunables, call)
                winner = tunables.candidates[state.index].name if isinstance(state, Hit) else "?"
                first = tunables.candidates[0].name
                tuned = len(started) > tunes_before  # this size tuned its key (another may share it)
                if not tuned:
                    progress.advance(bars[tunables.name], len(tunables))
                # What the tune decided, or what the store said of a hit: the key's entry either way.
                entry = tuner.cache.entry(tunables, key)
                results = list(entry.results) if entry is not None else []
                confidence = entry.confidence if entry is not None else None
                status = "tuned" if tuned else "hit"
                summaries.append(summarize(tunables.name, key, status, winner, results, first, confidence))
    if args.json:
        json.dump({"dry_run": config.dry_run, "device": tuner.device.identity.as_dict(),
                   "keys": [s.to_json() for s in summaries]}, sys.stdout, indent=2)
        print()
    else:
        print_table(wide_console(), tuner, summaries)
        hits = sum(s.status == "hit" for s in summaries)
        kept = "" if tuner.store is None or config.dry_run else f"; winners kept in {tuner.store.where}"
        console.print(escape(f"{hits} hit(s), {len(summaries) - hits} tuned{kept}"), highlight=False)
    return 0


def store_line(tuner, config: Config) -> str:
    """Where this run reads and keeps winners, and how many it found (printed before tuning)."""
    if tuner.store is None:
        from wgtune.backends.local import dry_run_leaves_unmade

        unmade = dry_run_leaves_unmade(config)  # a dry run with nothing stored: open_tuner left it unopened
        if unmade is not None:
            return escape(f"winners: none stored in {unmade}; a dry run stores nothing (no database made)")
        why = "the cache is off" if not config.cache else "the store could not be opened (see the warning)"
        return f"winners: kept in this process only ({why})"
    return escape(f"winners: {tuner.store.where} ({tuner.store.count()} stored for this device)")


def _time(seconds: float | None) -> str:
    return format_seconds(seconds) if seconds else "-"


def print_table(console: Console, tuner, summaries: list[KeySummary]) -> None:
    identity = tuner.device.identity
    table = Table(title=f"wgtune on {identity.device} ({identity.backend}, {tuner.device.timing})")
    columns = ("set", "key", "status", "winner", "median", "runner-up", "confidence", "speedup vs first")
    for column in columns:
        table.add_column(column, justify="right" if column in ("median", "speedup vs first") else "left")
    for s in summaries:
        runner_up = f"{s.runner_up} ({_time(s.runner_up_median)})" if s.runner_up else "-"
        speedup = f"{s.speedup:.2f}x" if s.speedup else "-"
        sure = s.confidence.short() if s.confidence is not None else "-"
        table.add_row(s.set_name, str(s.key), s.status, s.winner, _time(s.median), runner_up, sure, speedup)
    console.print(table)
    console.print(
        "confidence: the runner-up's time over the winner's (round by round), its interval, and the "
        "probability that the winner is the faster"
    )


__all__ = ["KeySummary", "chosen_cases", "run_tune", "store_line", "summarize"]
