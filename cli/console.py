"""What every command shares for people: wide tables, and the ``wgtune`` logger on standard error.

Its own module so that the commands (``tune.py``, ``cache.py``, ``records.py``) and the package's
``main`` import it, not each other.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["configure_logging", "wide_console"]


def wide_console():
    """A console for tables: the terminal's width, or wide when the output is a file or a pipe."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=200)


class _StandardError(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a message comes (a test may have swapped it since)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self):
        return sys.stderr


_HANDLER = _StandardError()
_HANDLER.setFormatter(logging.Formatter("%(name)s: %(message)s"))


def configure_logging(level: str) -> None:
    """Show the ``wgtune`` logger on standard error, through one handler however often this is
    called: problems (warnings: a damaged cache document, a record line skipped) always, the
    tuner's log lines too unless ``level`` is ``disabled``. The library itself never configures
    logging; the logger is its only channel for problems."""
    logger = logging.getLogger("wgtune")
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
    logger.setLevel(logging.WARNING if level == "disabled" else logging.INFO)
