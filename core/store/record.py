"""What a tune leaves beside its answer: the tune record.

The store keeps a key's winner and every candidate's result. What it cannot say is how the tune
went: which candidates ran and in what order, what each cost to compile and benchmark and how
many samples it got, the policy, how sure the tune is of its winner, whether a candidate short-
circuited the tune, how long the key took from its miss to its answer. A :class:`TuneRecord`
is that account, written once per tune to a records sink (a JSON Lines file natively).

Its effect is ``changed`` when the store took the answer, ``observed`` when the answer stays in
this process (the cache was off, or a dry run measured nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from ..errors import StoreError
from ..key import Key
from .confidence import Confidence

__all__ = ["RECORD_KIND", "MemoryRecords", "RecordEffect", "RecordSink", "Trial", "TuneRecord", "envelope"]

RECORD_KIND = "autotune"


class RecordEffect(StrEnum):
    CHANGED = "changed"
    OBSERVED = "observed"


@dataclass(frozen=True, slots=True)
class Trial:
    """One candidate's run within a tune: compiling and benchmarking it, in seconds, and how
    many valid samples it got (the adaptive policy gives the hopeless few, the finalists many)."""

    name: str
    wall: float
    samples: int = 0


@dataclass(frozen=True)
class TuneRecord:
    """How one autotune key was decided, as a records sink keeps it (JSON field ``table`` is the
    set's name, as in CubeCL's tune records)."""

    set_name: str
    key: Key
    checksum: str
    winner: int
    trials: tuple[Trial, ...]
    short_circuit: str | None
    wall: float
    dry_run: bool
    stored: bool | str  # "pending": the store was still writing it in the background
    confidence: Confidence | None = None
    policy: str = ""
    warning: str | None = None
    """What the output checks found that a reader should hear of (the set's default is wrong here)."""

    @property
    def effect(self) -> RecordEffect:
        return RecordEffect.CHANGED if self.stored else RecordEffect.OBSERVED

    def to_json(self) -> dict:
        return {
            "table": self.set_name,
            "entry": {"key": self.key.as_dict(), "checksum": self.checksum},
            "winner": self.winner,
            "trials": [{"name": t.name, "wall": t.wall, "samples": t.samples} for t in self.trials],
            "short_circuit": self.short_circuit,
            "wall": self.wall,
            "dry_run": self.dry_run,
            "stored": self.stored,
            "policy": self.policy,
            "confidence": self.confidence.to_json() if self.confidence is not None else None,
            **({"warning": self.warning} if self.warning else {}),
        }

    @classmethod
    def from_json(cls, obj: dict) -> TuneRecord:
        """Decode :meth:`to_json`; raises StoreError naming what is wrong."""
        try:
            return cls._from_json(obj)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise StoreError(f"not a tune record: {type(error).__name__}: {error}") from None

    @classmethod
    def _from_json(cls, obj: dict) -> TuneRecord:
        entry = obj["entry"]
        winner = obj["winner"]
        if isinstance(winner, bool) or not isinstance(winner, int) or winner < 0:
            raise ValueError(f"winner must be an index >= 0, got {winner!r}")
        short_circuit = obj.get("short_circuit")
        if short_circuit is not None and not isinstance(short_circuit, str):
            raise ValueError(f"short_circuit must be a name or null, got {short_circuit!r}")
        confidence = obj.get("confidence")
        return cls(
            set_name=str(obj["table"]),
            key=Key.from_json(entry["key"]),
            checksum=str(entry["checksum"]),
            winner=winner,
            trials=tuple(
                Trial(str(t["name"]), float(t["wall"]), int(t.get("samples", 0))) for t in obj.get("trials", [])
            ),
            short_circuit=short_circuit,
            wall=float(obj["wall"]),
            dry_run=bool(obj.get("dry_run", False)),
            stored=obj["stored"] if obj.get("stored") == "pending" else bool(obj.get("stored", False)),
            confidence=Confidence.from_json(confidence) if confidence is not None else None,
            policy=str(obj.get("policy") or ""),
            warning=str(obj["warning"]) if obj.get("warning") else None,
        )


def envelope(record: TuneRecord, at: float) -> dict:
    """The line a sink writes: the record with its kind, effect and wall-clock time (Unix seconds)."""
    return {"kind": RECORD_KIND, "effect": record.effect.value, "at": at, "record": record.to_json()}


class RecordSink(Protocol):
    def write(self, record: TuneRecord) -> None: ...


@dataclass
class MemoryRecords:
    """Keeps records in a list: the browser's page reads them from here, and so do tests."""

    records: list[TuneRecord] = field(default_factory=list)

    def write(self, record: TuneRecord) -> None:
        self.records.append(record)
