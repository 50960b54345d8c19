"""``wgtune records FILE``: the tune records of a JSON Lines file, readable."""

from __future__ import annotations

import json
import time

from rich.console import Console
from rich.table import Table
from wgtune.log import format_seconds


def run_records(args) -> int:
    from wgtune.backends.records import read_records

    rows = read_records(args.file)
    if args.json:
        for envelope, _record in rows:
            print(json.dumps(envelope))
        return 0
    console = Console()
    if not rows:
        console.print(f"no records in {args.file}")
        return 0
    table = Table(title=f"tune records: {args.file}")
    for column in ("when", "set", "key", "winner", "trials (in run order)", "wall", "stored", "effect", "dry run"):
        table.add_column(column)
    for envelope, record in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(envelope.get("at", 0)))
        trials = ", ".join(f"{t.name} {format_seconds(t.wall)}" for t in record.trials) or "-"
        table.add_row(when, record.table, str(record.key), f"#{record.winner}", trials, format_seconds(record.wall),
                      "yes" if record.stored else "no", envelope.get("effect", "?"), "yes" if record.dry_run else "no")
    console.print(table)
    console.print(f"{len(rows)} record(s)")
    return 0
