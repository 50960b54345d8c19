"""What a fleet collector knows of each set it accepts: its checksum, its candidates, its keys.

A report names a set, a key, the set's candidate-list checksum and a winner. The collector takes
it only for a set it knows (:func:`known_sets`: every registered kernel family's set, or the sets
it was given), under that set's current checksum, for a winner that is one of its candidates,
and for a key its key function can make (:class:`KeyDomain`, learnt by running the key function
on sampled sizes of the family): a key no call can produce is not stored.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from wgtune.sets.tunable import TunableSet

__all__ = ["KEY_SAMPLES", "MAX_KEY_INT", "KeyDomain", "KnownSet", "known_sets"]

KEY_SAMPLES = (1, 3, 6, 7, 64, 100, 255, 1024, 4097, 4098, 65536, 100_003, (1 << 24) + 1)
"""The sizes (per dim; every combination) a family's key function runs on to learn its key domain:
every residue modulo 4 among them (a vector width a key holds follows it: fma's ``vec`` is 2 for
an N of 4k + 2, which none of the sizes was, so every page's report of such a key was refused)."""
MAX_KEY_INT = 2**53
"""Integers of a key are below this (a JavaScript number holds them exactly)."""


@dataclass(frozen=True)
class KeyDomain:
    """The keys a set's key function can make, as far as the collector checks: exactly these
    ``fields``, each of its type (``int``, ``float``, ``str``, ``bool``, ``None``); a field whose
    values are few (strings, booleans, small integers such as a vector width) only those values;
    an integer field that was a power of two on every sampled size (a bucketed size) only powers
    of two. Learnt by running the key function on sampled sizes (:meth:`of_family`), so a key
    with another field, a value of another type or one no call buckets to is refused."""

    fields: Mapping[str, str]
    values: Mapping[str, frozenset]
    powers_of_two: frozenset[str]

    @classmethod
    def of_family(cls, family: object, tunables: TunableSet) -> KeyDomain | None:
        """The domain of ``tunables``' keys over the family's ``params`` of :data:`KEY_SAMPLES`
        sizes; None when no sampled size makes a key, or the keys' field names differ."""
        keys = []
        for size in itertools.product(KEY_SAMPLES, repeat=len(family.dims)):
            try:
                keys.append(tunables.key(family.key_args(size)).as_dict())
            except Exception:  # a size the family does not take: sampled, not required
                continue
        names = {frozenset(key) for key in keys}
        if len(names) != 1:
            return None
        fields = {name: {_kind(key[name]) for key in keys} for name in keys[0]}
        if any(len(kinds) != 1 for kinds in fields.values()):
            return None
        values, powers = {}, set()
        for name, (kind,) in fields.items():
            seen = frozenset(key[name] for key in keys)
            if kind in ("str", "bool", "None") or (kind == "int" and len(seen) <= 4 and max(seen) <= 16):
                values[name] = seen
            elif kind == "int" and all(value > 0 and value & (value - 1) == 0 for value in seen):
                powers.add(name)
        return cls({name: kind for name, (kind,) in fields.items()}, values, frozenset(powers))

    def check(self, key: Mapping[str, object]) -> str | None:
        """Why ``key`` is not one of the domain's, or None."""
        if set(key) != set(self.fields):
            extra, missing = sorted(set(key) - set(self.fields)), sorted(set(self.fields) - set(key))
            why = f"the key's fields must be {sorted(self.fields)}"
            if extra:
                why += f"; not the set's: {[name[:40] for name in extra[:4]]}"
            return why + (f"; missing: {missing}" if missing else "")
        for name, kind in self.fields.items():
            value = key[name]
            if _kind(value) != kind:
                return f"key field {name!r} must be a {kind}, got {json.dumps(value)[:40]}"
            if name in self.values and value not in self.values[name]:
                shown = json.dumps(value)[:40]
                return f"key field {name!r} is {shown}: the set's keys have {sorted(self.values[name], key=str)}"
            if kind == "int" and not 0 <= value < MAX_KEY_INT:
                return f"key field {name!r} is {value}: out of range"
            if name in self.powers_of_two and (value < 1 or value & (value - 1)):
                return f"key field {name!r} is {value}: the set buckets it to a power of two"
        return None


_DOMAINS: dict[tuple[str, str], KeyDomain | None] = {}  # (set name, checksum) -> its family's, learnt once


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


@dataclass(frozen=True)
class KnownSet:
    """What the collector accepts for one set: its current checksum, its candidates' names, and
    the domain of its keys (None: a set of no registered family, whose keys are checked as
    scalars of bounded length only)."""

    name: str
    checksum: str
    candidates: tuple[str, ...]
    key_domain: KeyDomain | None = None

    @classmethod
    def of(cls, tunables: TunableSet) -> KnownSet:
        """The set as the collector knows it; its key domain from the registered family of its
        name, when there is one (:meth:`KeyDomain.of_family`)."""
        from wgtune.kernels.families import FAMILIES

        family = next((family for family in FAMILIES if family.name == tunables.name), None)
        domain = None
        if family is not None:
            learnt = (family.name, tunables.checksum)
            if learnt not in _DOMAINS:
                _DOMAINS[learnt] = KeyDomain.of_family(family, tunables)
            domain = _DOMAINS[learnt]
        return cls(tunables.name, tunables.checksum, tuple(kernel.name for kernel in tunables.candidates), domain)


def known_sets(sets: Iterable[TunableSet] | None = None) -> dict[str, KnownSet]:
    """The sets a collector accepts reports for, by name: ``sets``, or by default the set of every
    registered kernel family (:data:`wgtune.kernels.families.FAMILIES`). A set whose candidates
    are made per key has no one candidate list to check against, so it is not accepted."""
    if sets is None:
        from wgtune.kernels.families import FAMILIES

        sets = [family.build() for family in FAMILIES]
    return {tunables.name: KnownSet.of(tunables) for tunables in sets if isinstance(tunables, TunableSet)}
