"""The sets candidates are tuned in.

A :class:`TunableSet` is the candidates (``kernel.py``) that compute the same thing, with the
key function that buckets a call into an autotune key and the checksum that ties stored winners
to this exact candidate list. A :class:`PerKeySet` makes its candidates from each key's fields:
it is resolved to the key's own TunableSet at the tuner's door (:meth:`PerKeySet.for_key`), so
everything past the door sees concrete sets only.

Kernels and sets are functions of a call's :class:`~wgtune.sets.args.Args` (``args.py``): its grid,
its uniform values, its key.
"""

from __future__ import annotations

import collections
import hashlib
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..key import Key, key_error, make_key
from ..search.strategies import Search
from .args import Args
from .buffer_names import Output, checked_outputs, written_by
from .kernel import Kernel

__all__ = ["OUTPUT_TYPES", "AnySet", "PerKeySet", "Tolerance", "ToleranceRule", "TunableSet"]

KeyFunction = Callable[[Args], Mapping[str, object]]
# (the call's buffers as bytes, its params) -> one expected value per output buffer.
Reference = Callable[[list[bytes], tuple], Sequence[Any]]
# The typecodes output checks read values as (struct's): floats within tolerance, integers exactly.
OUTPUT_TYPES = ("e", "f", "d", "b", "B", "h", "H", "i", "I")
ToleranceRule = Callable[[Args], float]
"""A tolerance that depends on the call: a matmul's rounding grows with K, say."""
Tolerance = tuple[str | None, float | ToleranceRule | None, float | ToleranceRule | None]
"""An output's ``(typecode, atol, rtol)`` as the set gives them; None: from the output's WGSL
element type (``output_types.py``); a function: of the call's Args (:meth:`TunableSet.tolerances_for`)."""


def _tolerances(
    name: str, outputs: tuple[Output, ...] | None, output_type: object, atol: object, rtol: object
) -> tuple[Tolerance, ...]:
    """``(typecode, atol, rtol)`` for each output, from one value (None included) or one per
    output; a ConfigError naming what is wrong. ``outputs`` None (not known yet): the values are
    checked, not counted."""

    def per_output(value: object, what: str) -> list:
        if value is None or isinstance(value, (str, int, float)) or callable(value):
            return [value] * (len(outputs) if outputs is not None else 1)
        values = list(value)  # type: ignore[call-overload]
        if outputs is not None and len(values) != len(outputs):
            raise ConfigError(f"tunable set {name!r}: {what} gives {len(values)} values for {len(outputs)} outputs")
        return values

    types, atols, rtols = per_output(output_type, "output_type"), per_output(atol, "atol"), per_output(rtol, "rtol")
    for typecode in types:
        if typecode is not None and typecode not in OUTPUT_TYPES:
            raise ConfigError(f"tunable set {name!r}: output_type {typecode!r} is not one of {', '.join(OUTPUT_TYPES)}"
                              " (or None: the WGSL's element type)")
    def given(value: object) -> object:  # a number is checked now, a function on each call
        return value if value is None or callable(value) else _checked_tolerance(name, value, "tolerances")

    atols, rtols = [given(a) for a in atols], [given(r) for r in rtols]
    if outputs is None:
        return ()
    return tuple(zip(types, atols, rtols, strict=True))


def _checked_tolerance(name: str, value: object, what: str) -> float:
    """``value`` as a tolerance: a number >= 0, else a ConfigError naming the set."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:  # numpy's too
        raise ConfigError(f"tunable set {name!r}: {what} must be numbers >= 0 (or functions of the call "
                          f"giving one), got {value!r}")
    return float(value)


InputGenerator = Callable[[Any, Key, Args], Args]
EXHAUSTIVE_LIMIT = 10_000
"""The most candidates a set without a search has: a tune measures every one (a compile and a
benchmark each)."""


class TunableSet:
    """Candidates that compute the same thing, tuned per key.

    ``key`` makes the autotune key of a call (use :func:`~wgtune.anchor` to bucket sizes).
    ``outputs`` are the buffers the kernels write, each an index into the call's buffers, a WGSL
    variable's name (``"out"``) or a ``(group, binding)``: the output checks (``Config.checks``)
    compare them (``checks.py``), as values of each output's WGSL element type (``f32``, ``f16``,
    ``i32``, ``u32``, atomics and vectors of them), or as ``output_type`` where it is given (a
    typecode: ``"f"`` f32, ``"e"`` f16, ``"d"`` f64, ``"i"`` i32, ``"I"`` u32, and the 8- and
    16-bit integer codes). Floats agree within ``atol + rtol * |reference|`` (by default 1e-4 and
    1e-4; 1e-2 and 2e-3 for f16), integers exactly unless a tolerance is given. Each of the three
    may be one value for every output or a sequence with one per output; ``atol`` and ``rtol``
    may also be functions of the call's :class:`Args` giving a number, for rounding that grows
    with a size (a matmul's with K: :func:`~wgtune.kernels.matmul.matmul_set`). Not given, the outputs
    are the ``var<storage, read_write>`` bindings of the first candidate, less scratch that a later
    stage only reads (``buffer_names.written_by``) and less its declared ``scratch``; give them
    where that candidate writes other scratch, and ``outputs=()`` for no checks at all.
    ``reference(inputs, params)``, if given, says what the outputs should be: it receives the
    benchmark's buffers as bytes (before any kernel ran; an output that no kernel reads before
    writing it holds a poison pattern, see ``checks.py``) and the call's params, and returns one
    value per output (bytes, anything with ``tobytes()`` such as a numpy array of the output's
    type, or a sequence of numbers) filling the output buffer. With it, every candidate, the
    first one and a set of one too, is checked against it; without it the candidates judge each
    other: the largest group that agrees is right (``checks.py``).
    ``input_gen(device, key, args)`` makes the benchmark's inputs; by default every buffer is
    copied, so benchmarks never write the caller's buffers and in-place kernels tune safely.
    The first candidate must be a safe default that handles every call of the set: it is the
    fallback while a tune is pending (whatever the key), until a check finds it wrong.
    Params are packed by Python type: pass floats for ``f32`` fields (an int becomes a ``u32``).
    ``short_circuit(key)`` may give a time in seconds per dispatch (a roofline bound for the key,
    say) or None: the first candidate whose median meets it ends the tune and wins, and the tune
    record names it.
    ``search`` (a :class:`~wgtune.search.strategies.Search`) makes a tune measure only a budget of the
    candidates, chosen by a strategy: for sets too large to measure whole (``search.py``).
    ``candidates`` may also be a function that makes them from a key's fields (a dict, the
    key function's answer): for kernels whose sizes a template bakes into the source. The set is
    then a :class:`PerKeySet`.
    """

    def __new__(cls, name: str, candidates: object, *args: Any, **options: Any) -> Any:
        # Candidates made per key: the set is a PerKeySet, a type of its own (see the class doc).
        if cls is TunableSet and callable(candidates):
            return PerKeySet(name, candidates, *args, **options)
        return super().__new__(cls)

    def __init__(
        self,
        name: str,
        candidates: Sequence[Kernel],
        key: KeyFunction,
        *,
        outputs: Sequence[Output] | None = None,
        input_gen: InputGenerator | None = None,
        output_type: str | Sequence[str | None] | None = None,
        atol: float | ToleranceRule | Sequence[float | ToleranceRule | None] | None = None,
        rtol: float | ToleranceRule | Sequence[float | ToleranceRule | None] | None = None,
        reference: Reference | None = None,
        short_circuit: Callable[[Key], float | None] | None = None,
        search: Search | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a tunable set needs a non-empty name, got {name!r}")
        candidates = tuple(candidates)
        if not candidates:
            raise ConfigError(f"tunable set {name!r} has no candidates")
        for candidate in candidates:
            if not isinstance(candidate, Kernel):
                raise ConfigError(f"tunable set {name!r}: {candidate!r} is not a Kernel")
        names = [candidate.name for candidate in candidates]
        duplicates = sorted(n for n, count in collections.Counter(names).items() if count > 1)
        if duplicates:
            raise ConfigError(f"tunable set {name!r}: candidate names repeat: {', '.join(duplicates)}")
        self.name = name
        self.candidates = candidates
        self.key_function = key
        self._outputs = None if outputs is None else checked_outputs(name, outputs)
        self.outputs_given = outputs is not None
        """Whether the set named its outputs (``outputs=()``: the user's word that there is nothing to check)."""
        self.input_gen = input_gen
        self.output_type = output_type
        self.atol = atol
        self.rtol = rtol
        self._tolerances = _tolerances(name, self._outputs, output_type, atol, rtol)
        if reference is not None and not callable(reference):
            raise ConfigError(f"tunable set {name!r}: reference must be a function of (inputs, params)")
        self.reference = reference
        if short_circuit is not None and not callable(short_circuit):
            raise ConfigError(f"tunable set {name!r}: short_circuit must be a function of the key")
        self.short_circuit = short_circuit
        if search is not None and not isinstance(search, Search):
            raise ConfigError(f"tunable set {name!r}: search must be a wgtune.Search, got {search!r}")
        if search is None and len(candidates) > EXHAUSTIVE_LIMIT:
            raise ConfigError(f"tunable set {name!r} has {len(candidates)} candidates, more than a tune measures "
                              f"one by one ({EXHAUSTIVE_LIMIT}): give it search=wgtune.Search(...)")
        self.search = search
        self.index_of = {candidate.name: index for index, candidate in enumerate(candidates)}
        digest = hashlib.sha256()
        for candidate in candidates:
            digest.update(candidate.fingerprint().encode())
            digest.update(b"\x1e")
        self.checksum = digest.hexdigest()[:32]

    @property
    def outputs(self) -> tuple[Output, ...]:
        """The outputs the checks compare: as given, or (read from the first candidate's WGSL on
        first use, since sets are built by the hundred and reading costs) its written bindings."""
        if self._outputs is None:
            first = self.candidates[0]
            written = tuple(name for name in written_by([stage.wgsl for stage in first.stages])
                            if name not in first.scratch)
            self._tolerances = _tolerances(self.name, written, self.output_type, self.atol, self.rtol)
            self._outputs = written
        return self._outputs

    @property
    def tolerances(self) -> tuple[Tolerance, ...]:
        """``(typecode, atol, rtol)`` of each output as given (None: see ``output_types.py``)."""
        self.outputs  # noqa: B018 (derives them, and their tolerances, on first use)
        return self._tolerances

    def tolerances_for(self, args: Args) -> tuple[tuple[str | None, float | None, float | None], ...]:
        """``(typecode, atol, rtol)`` of each output for the call ``args``: a tolerance given as a
        function is called with it (a ConfigError naming the set if it raises or gives no number
        >= 0); None: see ``output_types.py``."""
        def for_call(value: float | ToleranceRule | None, what: str) -> float | None:
            if not callable(value):
                return value
            try:
                answer = value(args)
            except Exception as error:
                raise ConfigError(f"tunable set {self.name!r}: its {what} function raised on the call "
                                  f"{args.params}: {type(error).__name__}: {error}") from error
            return _checked_tolerance(self.name, answer, f"{what} functions' answers")

        return tuple((typecode, for_call(atol, "atol"), for_call(rtol, "rtol"))
                     for typecode, atol, rtol in self.tolerances)

    def for_key(self, key: Key) -> TunableSet:
        """The set that tunes ``key``: this one (a :class:`PerKeySet` answers the key's own)."""
        return self

    def __len__(self) -> int:
        return len(self.candidates)

    def __repr__(self) -> str:
        return f"TunableSet({self.name!r}, {len(self.candidates)} candidates)"

    def key(self, args: Args) -> Key:
        """The autotune key of a call; a ConfigError naming the set when its key function fails."""
        try:
            fields = self.key_function(args)
        except Exception as error:
            raise key_error(self.name, error) from error
        return make_key(self.name, fields)


class PerKeySet:
    """A set whose candidates are made from each key's fields (a dict, the key function's
    answer): for kernels whose sizes a template bakes into the source.

    ``TunableSet(name, make_candidates, key, ...)`` with a function for candidates makes one;
    the options are a TunableSet's. Each key gets a :class:`TunableSet` of its own, named
    ``name[key]``, made on the key's first call and kept (:meth:`for_key`): its checksum covers
    the candidates as made for the key, so a stored winner stands for exactly that source. The
    tuner resolves a PerKeySet once, at the door of each public entry point; it has no
    candidates of its own to tune.
    """

    def __init__(
        self,
        name: str,
        candidates: Callable[[dict[str, Any]], Sequence[Kernel]],
        key: KeyFunction,
        **options: Any,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a tunable set needs a non-empty name, got {name!r}")
        if not callable(candidates):
            raise ConfigError(f"tunable set {name!r}: a PerKeySet's candidates are a function of the key's fields")
        self.name, self.make_candidates, self.key_function = name, candidates, key
        self._options = options
        self._sets: dict[Key, TunableSet] = {}

    def key(self, args: Args) -> Key:
        """The autotune key of a call; a ConfigError naming the set when its key function fails."""
        return TunableSet.key(self, args)  # type: ignore[arg-type]  # the same function of name and key_function

    def for_key(self, key: Key) -> TunableSet:
        """The set of ``key``'s candidates; a ConfigError names the key when they cannot be made."""
        found = self._sets.get(key)
        if found is None:
            try:
                made = self.make_candidates(key.as_dict())
            except ConfigError:
                raise
            except Exception as error:
                raise ConfigError(f"tunable set {self.name!r}: its candidates for [{key}] could not be made: "
                                  f"{type(error).__name__}: {error}") from error
            found = self._sets[key] = TunableSet(f"{self.name}[{key}]", made, self.key_function, **self._options)
        return found

    def __repr__(self) -> str:
        return f"PerKeySet({self.name!r}, candidates made per key)"


AnySet = TunableSet | PerKeySet
"""What the tuner's public entry points take: a set, or one that makes its candidates per key."""
