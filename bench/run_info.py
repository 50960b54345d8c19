"""What a benchmark's report says about its own run, and where its lines go.

The first line of a file in ``bench/results/`` states the command, the adapter, the date and the
commit, so that a figure can be traced to what produced it (:func:`header_line`); :class:`Report`
prints each line and, with ``--out``, writes it to the file as it comes (a run cut short keeps
what it printed).
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["Report", "commit", "header_line", "report_to"]


class Report:
    """Lines to standard output and, with ``--out``, to a file as they come."""

    def __init__(self, out: TextIO | None) -> None:
        self.out = out

    def line(self, text: str) -> None:
        print(text, flush=True)
        if self.out is not None:
            self.out.write(text + "\n")
            self.out.flush()


def commit() -> str:
    """The checkout's commit (``+changes`` when its tracked files differ from it); where the tree is
    a copy without ``.git`` (a device machine's), ``BENCH_COMMIT`` from the environment, or why
    it is not known."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists() and os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("BENCH_COMMIT") or "commit unknown (no git checkout here; BENCH_COMMIT names it)"
    return f"{head}+changes" if dirty else head


def header_line(adapter: dict, argv: list[str] | None = None) -> str:
    """``# python SCRIPT ARGS on ADAPTER (BACKEND), DATE, wgtune VERSION at COMMIT``."""
    import wgtune

    args = sys.argv[1:] if argv is None else argv
    command = " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *args])
    version = getattr(wgtune, "__version__", "?")
    return (f"# {command} on {adapter.get('device', '?')} ({adapter.get('backend_type', '?')}, "
            f"{adapter.get('description', '')}), {datetime.date.today().isoformat()}, wgtune {version} "
            f"at {commit()}")


@contextmanager
def report_to(path: Path | None, adapter: dict, argv: list[str] | None = None) -> Iterator[Report]:
    """A :class:`Report` to standard output and to ``path`` (when given), its
    :func:`header_line` written first."""
    out = path.open("w") if path is not None else None
    try:
        report = Report(out)
        report.line(header_line(adapter, argv))
        yield report
    finally:
        if out is not None:
            out.close()
