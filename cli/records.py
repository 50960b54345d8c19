"""``wgtune records FILE``: the tune records of a JSON Lines file, readable."""

from __future__ import annotations

import json
import time

from rich.markup import escape

from wgtune.tune.log import format_seconds

from .console import wide_console

# How a record's "stored" reads besides true and false (the page's background IndexedDB write).
_STORED = {"pending": "store pending"}


def run_records(args) -> int:
    from pathlib import Path

    from wgtune.backends.records import read_records
    from wgtune.errors import StoreError

    if not Path(args.file).is_file():  # a mistyped name is no empty file of records
        raise StoreError(f"{args.file}: no such file of records")
    rows = read_records(args.file)
    if args.json:
        for envelope, _record in rows:
            print(json.dumps(envelope))
        return 0
    console = wide_console()
    if not rows:
        console.print(f"no records in {args.file}")
        return 0
    for envelope, record in rows:
        at = envelope.get("at")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if isinstance(at, (int, float)) else "?"
        effect = envelope.get("effect", record.effect.value)
        console.print(
            f"[bold]{when}  {escape(f'{record.set_name} [{record.key}]')}[/bold]  "
            f"{effect} ({_STORED.get(record.stored, 'stored') if record.stored else 'not stored'})  "
            f"wall {format_seconds(record.wall)}"
            f"{'  [yellow]dry run[/yellow]' if record.dry_run else ''}"
        )
        console.print(
            f"  winner #{record.winner}; checksum {record.checksum[:12]}; policy {record.policy or '?'}; "
            f"short circuit: {escape(record.short_circuit) if record.short_circuit else 'none'}"
        )
        if record.confidence is not None:
            console.print(f"  confidence: {escape(record.confidence.describe())}")
        for position, trial in enumerate(record.trials, 1):
            console.print(
                f"  {position:3d}. {escape(trial.name):<32} {format_seconds(trial.wall):>12} {trial.samples:>4} samples"
            )
    console.print(f"{len(rows)} record(s) in {args.file}")
    return 0
