"""Tune logging through the standard ``logging`` module, logger ``wgtune``.

Three levels (``Config.log_level`` or ``WGTUNE_LOG``): ``disabled``; ``minimal``, one line per
tune with the winner and the top-3 medians; ``full``, that line plus every step and every
candidate's result. Messages go out at INFO: attach a handler (the CLI does) to see them.
"""

from __future__ import annotations

import logging

from .config import LogLevel
from .key import Key
from .outcome import TuneOutcome
from .results import Measured, Result

__all__ = ["TuneLog", "format_seconds", "logger"]

logger = logging.getLogger("wgtune")


def format_seconds(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def describe(result: Result) -> str:
    if isinstance(result, Measured):
        if result.stats is None:
            return f"{result.name}: compiled (dry run, not measured)"
        stats = result.stats
        return (
            f"{result.name}: median {format_seconds(stats.median)}, min {format_seconds(stats.min)}, "
            f"max {format_seconds(stats.max)}, {len(stats.samples)} samples ({stats.timing})"
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
        if self.steps is not None:
            for message in self.steps:
                logger.info("  step: %s", message)
            for index in outcome.order:
                logger.info("  result: %s", describe(outcome.results[index]))

    def failed(self, reason: str) -> None:
        if self.level is not LogLevel.DISABLED:
            logger.warning("tune of %s failed: %s", self.where, reason)
