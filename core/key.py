"""Autotune keys: which problem a winner answers.

A key is what a tunable set's key function makes of a call's inputs: bucketed sizes, dtypes,
layout. Calls whose keys are equal share one tune and one winner, so bucketing decides how
often wgtune tunes: :func:`anchor` rounds sizes up to a power so that nearby sizes share a key.

A :class:`Key` is a tuple of ``(field, value)`` pairs sorted by field. Being a plain tuple
underneath, it hashes and compares at C speed, which keeps a cache hit a dict lookup.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
from collections.abc import Iterable, Mapping

from .errors import ConfigError

__all__ = ["KEY_MEMO_SIZE", "Key", "KeyMemo", "Scalar", "anchor", "key_error", "make_key"]

Scalar = int | float | str | bool | None


# Integers a key may hold: what the stores and the exports read back (``store.bounded_json.MAX_INT``;
# SQLite's 64 bits). A key accepted here and refused on import would strand its winners.
KEY_INT_RANGE = (-(2**63), 2**63)


def _check_value(field: str, value: object) -> Scalar:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not KEY_INT_RANGE[0] <= value < KEY_INT_RANGE[1]:
            raise ValueError(f"key field {field!r} is {value}: key integers must lie in [-2**63, 2**63), as the "
                             "stores and exports hold them (a 64-bit hash: give it as a string)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"key field {field!r} is {value!r}: keys must be finite")
        # JavaScript has one number type, so a key made in the page or read back from JSON (bundles,
        # exports, the collector) may say 4096.0 where Python says 4096: both must be one slot, one
        # text. Only within the int range: a larger integral float stays the float it was accepted as.
        if value.is_integer() and KEY_INT_RANGE[0] <= value < KEY_INT_RANGE[1]:
            return int(value)
        return value
    raise TypeError(
        f"key field {field!r} is a {type(value).__name__}: key values must be int, float, str, bool or None"
    )


class Key(tuple):
    """A frozen, hashable, JSON-serialisable autotune key.

    An integral float is held as the int it equals (``4096.0`` is ``4096``, text included), as
    JavaScript and JSON do not tell them apart; a non-integral float stays a float, a bool a bool.
    Values compare as Python compares them: ``True == 1``, so keys differing only so are one key
    in memory though their JSON (their stored slot) differs. Use strings for flags where that matters.

    >>> Key({"n": 1024, "dtype": "f32"})
    Key(dtype='f32', n=1024)
    """

    __slots__ = ()

    def __new__(cls, fields: Mapping[str, object] | Iterable[tuple[str, object]] = ()) -> Key:
        items = fields.items() if isinstance(fields, Mapping) else fields
        pairs = []
        for field, value in items:
            if not isinstance(field, str) or not field:
                raise TypeError(f"key field names must be non-empty strings, got {field!r}")
            pairs.append((field, _check_value(field, value)))
        pairs.sort(key=lambda pair: pair[0])
        for first, second in itertools.pairwise(pairs):
            if first[0] == second[0]:
                raise ValueError(f"key field {first[0]!r} appears twice")
        return super().__new__(cls, pairs)

    def as_dict(self) -> dict[str, Scalar]:
        return dict(self)

    def to_json(self) -> str:
        """The canonical text of the key: equal keys give equal text."""
        return json.dumps(dict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | Mapping[str, object]) -> Key:
        """Read a key back from :meth:`to_json` text or its decoded object."""
        value = json.loads(text) if isinstance(text, str) else text
        if not isinstance(value, Mapping):
            raise ValueError(f"a key must be a JSON object, got {type(value).__name__}")
        return cls(value)

    def is_slot(self, text: object) -> bool:
        """Whether a stored slot's key ``text`` is this key's: its own text, or the text an older
        wgtune wrote for it (``{"n":4096.0}`` for ``n=4096``, before integral floats were held as
        ints), so that such a row is read as this key's rather than as damaged."""
        if text == self.to_json():
            return True
        try:
            return isinstance(text, str) and Key.from_json(text).to_json() == self.to_json()
        except (TypeError, ValueError, RecursionError):
            return False

    def __repr__(self) -> str:
        return "Key(" + ", ".join(f"{field}={value!r}" for field, value in self) + ")"

    def __str__(self) -> str:
        return ", ".join(f"{field}={value}" for field, value in self)


def anchor(x: int, max: int | None = None, min: int | None = None, base: int = 2) -> int:
    """Round ``x`` up to the next power of ``base``, then clamp it to ``[min, max]``.

    Integer arithmetic throughout: a float logarithm rounds ``2**29`` up to ``2**30``.
    ``anchor(0)`` and ``anchor(1)`` are 1, the zeroth power.
    """
    if isinstance(x, bool) or not hasattr(type(x), "__index__"):
        raise TypeError(f"anchor() takes an int, got {type(x).__name__}")
    x = operator.index(x)  # numpy's integers too: a size is often np.prod(shape)
    if x < 0:
        raise ValueError(f"anchor() takes a size >= 0, got {x}")
    if base < 2:
        raise ValueError(f"anchor() needs base >= 2, got {base}")
    if base == 2:
        power = 1 << (x - 1).bit_length() if x > 1 else 1
    else:
        power = 1
        while power < x:
            power *= base
    if max is not None and power > max:
        power = max
    if min is not None and power < min:
        power = min
    return power


# How many distinct raw keys a set remembers the Key of; past it the memo starts over.
KEY_MEMO_SIZE = 4096


class KeyMemo:
    """The autotune keys of calls, memoised per set on the key function's raw answer: a call on
    the hot path pays for its key function and a dict lookup, not for building a Key."""

    def __init__(self) -> None:
        self._memo: dict[str, dict[tuple, Key]] = {}

    def key(self, tunables, args) -> Key:
        """The key of ``args`` in ``tunables`` (a TunableSet and its Args); a ConfigError naming
        the set when its key function fails on the call or answers what is not a key.

        An Args is immutable, so the key function's answer for it is kept in ``args.cache`` (by
        the function): a call made again with the same Args (a loop, a batch) costs a dict
        lookup. Key functions must therefore depend on the call alone, as the README says."""
        function = tunables.key_function
        known = args.cache.get(function)
        if known is not None:
            return known
        try:
            raw = tuple(function(args).items())
        except Exception as error:
            raise key_error(tunables.name, error) from error
        memo = self._memo.get(tunables.name)
        if memo is None:
            memo = self._memo[tunables.name] = {}
        try:
            key = memo.get(raw)
        except TypeError:  # an unhashable value: let Key say which field is wrong
            return make_key(tunables.name, raw)
        if key is None:
            if len(memo) >= KEY_MEMO_SIZE:
                memo.clear()
            key = memo[raw] = make_key(tunables.name, raw)
        args.cache[function] = key
        return key


def key_error(set_name: str, error: Exception) -> ConfigError:
    """What a key function's failure on a call is: a ConfigError naming the set and the error."""
    return ConfigError(f"tunable set {set_name!r}: its key function failed on this call: "
                       f"{type(error).__name__}: {error}")


def make_key(set_name: str, fields: Mapping[str, object] | Iterable[tuple[str, object]]) -> Key:
    """A key function's answer as a Key; a ConfigError naming the set when it is not one."""
    try:
        return Key(fields)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"tunable set {set_name!r}: its key function gave no valid key: {error}") from None
