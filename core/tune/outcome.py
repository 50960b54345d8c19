"""A tune's outcome: the one value that says everything a tune decided.

The tuner builds one :class:`TuneOutcome` per tune that found a winner, and every reader takes
it from there instead of working it out again: the tune cache and the store keep its
:meth:`~TuneOutcome.entry`, the records sink writes its :meth:`~TuneOutcome.record`, the log
prints its ranking, and the ``TuneFinished`` event hands it to the CLI's table and the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Skip
from ..key import Key
from ..store.confidence import Confidence
from ..store.format import StoredEntry
from ..store.record import Trial, TuneRecord
from ..store.results import Measured, Result, result_to_json

__all__ = ["TuneOutcome"]


@dataclass(frozen=True)
class TuneOutcome:
    """What one tune of one key decided.

    ``results`` has every candidate's result in the set's order (measured, failed, skipped);
    ``order`` ranks them, winner first; ``confidence`` says how sure the tune is of the winner
    over the runner-up; ``trials`` are the candidates that ran, in the order they ran, with their
    cost; ``wall`` is the time from the key's miss to this answer; ``stored`` whether the store
    took it (a dry run or a cache that is off keeps it in this process only; ``"pending"`` while
    the store writes it in the background); ``checked`` whether the candidates' outputs were
    checked (``Config.checks``); ``judge`` who decided what is right (``"reference"``,
    ``"agreement"``, or ``""`` where nothing was compared); ``warning`` what the checks found that
    the user should hear of (the set's default, candidate 0, is wrong here); ``not_run`` why the
    candidates a search never chose were not run.
    """

    set_name: str
    key: Key
    checksum: str
    winner_name: str
    results: tuple[Result, ...]
    order: tuple[int, ...]
    confidence: Confidence | None
    short_circuit: str | None
    trials: tuple[Trial, ...]
    policy: str
    dry_run: bool
    wall: float = 0.0
    stored: bool | str = False
    not_run: str | None = None
    checked: bool = False
    judge: str = ""
    warning: str | None = None

    @property
    def winner(self) -> int:
        return self.order[0]

    def ranked(self) -> list[Measured]:
        """The measured candidates, fastest first."""
        return [
            result for result in (self.results[i] for i in self.order)
            if isinstance(result, Measured) and result.stats is not None
        ]

    def entry(self) -> StoredEntry:
        """The key's winner as the store keeps it."""
        return StoredEntry(
            self.set_name,
            self.key,
            self.checksum,
            self.winner,
            self.winner_name,
            tuple(None if self._never_run(result) else result_to_json(result) for result in self.results),
            self.confidence,
            self.policy,
            self.not_run or "",
            self.checked,
        )

    def _never_run(self, result: Result) -> bool:
        """Whether ``result`` is a candidate the search never chose: the entry keeps it as null
        under its ``not_run`` reason, not as a result of its own (a search of thousands measures
        a few dozen)."""
        return self.not_run is not None and isinstance(result, Skip) and result.reason == self.not_run

    def record(self) -> TuneRecord:
        """The tune's account for a records sink."""
        return TuneRecord(
            set_name=self.set_name,
            key=self.key,
            checksum=self.checksum,
            winner=self.winner,
            trials=self.trials,
            short_circuit=self.short_circuit,
            wall=self.wall,
            dry_run=self.dry_run,
            stored=self.stored,
            confidence=self.confidence,
            policy=self.policy,
            warning=self.warning,
        )
