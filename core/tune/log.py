"""Tune logging through the standard ``logging`` module, logger ``wgtune``.

Three levels (``Config.log_level`` or ``WGTUNE_LOG``): ``disabled``; ``minimal``, one line per
tune with the winner and the top-3 medians; ``full``, that line plus every step and every
candidate's result. Messages go out at INFO.

They show by themselves when asked for (``WGTUNE_LOG`` set, or ``Config(log_to_stderr=True)``):
when such a tuner is built with ``minimal`` or ``full`` and nobody has configured logging (no
handler on the ``wgtune`` logger nor on the root logger), :func:`show_log_on_stderr` attaches
one handler of wgtune's own that writes the lines to standard error (the browser's console in
Pyodide). A caller who configures logging, before or after, gets no extra handler: wgtune's
stands aside as soon as another is there (the CLI's, say).
"""

from __future__ import annotations

import logging
import sys
import threading

from ..config import LogLevel
from ..key import Key
from ..store.results import Measured, Result
from .outcome import TuneOutcome

__all__ = ["TuneLog", "describe", "format_seconds", "logger", "say_checks_are_off", "show_log_on_stderr"]

logger = logging.getLogger("wgtune")
# A library prints nothing by itself: without a handler of its own, Python's last resort would
# print wgtune's warnings on stderr where nobody asked for its lines (WGTUNE_LOG unset).
_QUIET = logging.NullHandler()
logger.addHandler(_QUIET)


def _configured_elsewhere() -> bool:
    """Whether someone else shows wgtune's lines: a handler on the root logger, or another
    handler on ``wgtune`` (then the auto handler drops the record, so no line shows twice)."""
    return bool(logging.getLogger().handlers) or any(handler not in (_AUTO_HANDLER, _QUIET)
                                                     for handler in logger.handlers)


class _StandardError(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a message comes (a test may have swapped it)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)
        self.addFilter(lambda _record: not _configured_elsewhere())

    @property
    def stream(self):
        return sys.stderr


_AUTO_HANDLER = _StandardError()
_AUTO_HANDLER.setFormatter(logging.Formatter("%(name)s: %(message)s"))
_AUTO_LOCK = threading.Lock()


def show_log_on_stderr(level: LogLevel) -> bool:
    """Make a tune's log lines show on standard error when nobody configured logging; True if
    this call attached wgtune's handler.

    Python drops INFO lines of a logger without handlers, so ``WGTUNE_LOG=minimal`` would print
    nothing until the caller set logging up. At ``minimal`` or ``full``, with no handler on the
    ``wgtune`` logger nor on the root logger, this attaches wgtune's own (once per process,
    however many tuners are built) and lets INFO through, unless the logger has a level of its
    own. ``disabled`` attaches nothing.
    """
    if level is LogLevel.DISABLED:
        return False
    with _AUTO_LOCK:
        if any(handler is not _QUIET for handler in logger.handlers) or logging.getLogger().handlers:
            return False
        logger.addHandler(_AUTO_HANDLER)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
        return True


def format_seconds(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def describe(result: Result) -> str:
    """One candidate's result in a line: its timing, or its failure with the reason."""
    if isinstance(result, Measured):
        if result.stats is None:
            return f"{result.name}: compiled (dry run, not measured)"
        stats = result.stats
        count = len(stats.samples)
        early = (
            f" (eliminated early after {count} sample{'' if count == 1 else 's'}: median unreliable)"
            if result.eliminated_early else ""
        )
        return (
            f"{result.name}: median {format_seconds(stats.median)}, min {format_seconds(stats.min)}, "
            f"max {format_seconds(stats.max)}, {len(stats.samples)} samples ({stats.timing}){early}"
        )
    return f"{result.name}: {type(result).__name__}: {result.reason}"


class TuneLog:
    """Collects one tune's steps (at ``full``) and writes its summary."""

    def __init__(self, level: LogLevel, set_name: str, key: Key) -> None:
        self.level = level
        self.where = f"{set_name} [{key}]"
        self.steps: list[str] | None = [] if level is LogLevel.FULL else None

    def step(self, message: str) -> None:
        if self.steps is not None:
            self.steps.append(message)

    def finish(self, outcome: TuneOutcome) -> None:
        if self.level is LogLevel.DISABLED:
            return
        top = ", ".join(f"{result.name}={format_seconds(result.stats.median)}" for result in outcome.ranked()[:3])
        sure = f"; {outcome.confidence.describe()}" if outcome.confidence is not None else ""
        logger.info("fastest for %s: %s; top 3 medians: %s%s", self.where, outcome.winner_name,
                    top or "none measured", sure)
        if outcome.warning:
            logger.warning("%s: %s", self.where, outcome.warning)
        if self.steps is not None:
            for message in self.steps:
                logger.info("  step: %s", message)
            for index in outcome.order:
                logger.info("  result: %s", describe(outcome.results[index]))

    def failed(self, reason: str) -> None:
        if self.level is not LogLevel.DISABLED:
            logger.warning("tune of %s failed: %s", self.where, reason)


_said_checks_off = False


def say_checks_are_off() -> None:
    """Log, once per process, that output checks are off: the user's choice, but one that lets a
    wrong kernel win."""
    global _said_checks_off
    if not _said_checks_off:
        _said_checks_off = True
        logger.warning("output checks are off (checks=False or WGTUNE_CHECKS=0): a candidate that computes a wrong "
                       "answer can win")
