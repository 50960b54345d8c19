"""The four states of a key in a tuner's cache, and what a caller does with each.

- :class:`Hit`: the winner is known; run ``index``.
- :data:`MISS`: nothing known; call ``check_tune`` to tune (natively it blocks and answers Hit).
- :data:`PENDING`: a tune of this key is running (in the browser's event loop, or in another
  thread); run the fallback candidate meanwhile.
- :class:`Unchecked`: loaded from the store, not yet checked against the set's current
  candidates in this process; ``check_tune`` turns it into Hit or Miss.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MISS", "PENDING", "Hit", "Miss", "Pending", "TuneState", "Unchecked"]


@dataclass(frozen=True, slots=True)
class Hit:
    index: int


class Miss:
    __slots__ = ()

    def __repr__(self) -> str:
        return "Miss"


class Pending:
    __slots__ = ()

    def __repr__(self) -> str:
        return "Pending"


@dataclass(frozen=True, slots=True)
class Unchecked:
    winner: int
    checksum: str


MISS = Miss()
PENDING = Pending()

TuneState = Hit | Miss | Pending | Unchecked
