"""Candidates and the sets they are tuned in.

A :class:`Kernel` is one candidate: WGSL source plus how to launch it. A :class:`TunableSet`
is the candidates that compute the same thing, with the key function that buckets a call into
an autotune key and the checksum that ties stored winners to this exact candidate list.

Kernels and sets are functions of a call's :class:`~wgtune.sets.args.Args` (``args.py``): its grid,
its uniform values, its key.
"""

from __future__ import annotations

import collections
import hashlib
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..key import Key, key_error, make_key
from ..search.strategies import Search
from .args import Args, Grid
from .buffer_names import Output, checked_outputs, written_by

__all__ = ["OUTPUT_TYPES", "Group", "Kernel", "Tolerance", "TunableSet"]

Priority = int | Callable[[Key], int]


@dataclass(frozen=True, slots=True)
class Group:
    """A priority group: the plan benchmarks groups in descending priority, one level at a time.

    ``priority`` is a number or a function of the key; a negative value skips the whole group.
    """

    name: str
    priority: Priority = 0


@dataclass(frozen=True, eq=False)
class Kernel:
    """One WGSL candidate.

    ``grid`` maps the call's :class:`Args` to the number of workgroups to dispatch.
    ``workgroup_size`` and ``workgroup_storage`` (bytes of ``var<workgroup>``) are read from the
    WGSL (with ``constants``) and checked against the device's limits before compiling: some
    drivers accept a kernel over the storage limit and fail later, or never. Declare them only
    where the WGSL cannot tell (a size written in expressions wgtune's reflection does not
    evaluate); a declaration that disagrees with the WGSL fails the candidate with both values
    (``shaders.py``).
    ``priority`` orders candidates within their group (higher first; negative skips).
    ``features`` are the WebGPU device features the WGSL needs (``"shader-f16"``, ``"subgroups"``):
    on a device without one, the candidate is refused before compiling, with the reason.
    ``then`` are further stages, each a Kernel with its own WGSL and grid, dispatched after this
    one in the same pass on the call's buffers (a two-pass reduction, say): one candidate, timed
    as a whole. Each stage binds only what its WGSL declares (``bindings.py``).
    ``constants`` are the values of the WGSL's pipeline-overridable constants (``override
    wg_size: u32;``), keyed as WebGPU's ``constants`` of a compute stage are: by the override's
    name, or by its numeric ``@id`` where it has one. A kernel written with overrides is tuned
    as it is, each candidate one set of values. They are part of the candidate's identity: other
    values, another checksum.
    ``configuration`` is the point of a parameter space this candidate is (parameter name ->
    value), set by :class:`~wgtune.sets.space.Space`: a search's model learns from it (``search.py``).
    It describes the candidate and is not part of its identity (its name and code are).
    ``params``, a function of the call's :class:`Args`, gives this stage's own uniform values
    (pass 2 of a reduction reading how many partials pass 1 wrote, say); without it the stage
    reads the call's ``params``. A function cannot be compared by value, so only the fact that a
    stage has one is part of its identity: change what it computes and rename the candidate (or
    change its WGSL), or stored winners keep standing for the old one.
    ``scratch`` names the candidate's workspace buffers (a split-K matmul's partial sums, say):
    WGSL name -> a function of the call's :class:`Args` giving its size in bytes. The device
    makes them, not the caller, and binds each wherever a stage declares that name (a storage
    binding; a call in order does not count them among its buffers). They are kept with the
    call's bind groups and may be shared by candidates that declare the same name and size, so
    their contents at the start of a launch are undefined: a stage writes what a later one reads.
    Declared on the candidate (its first stage); like ``params``, only the names are part of its
    identity.
    ``runtime_checks`` False: the author vouches that every index of this stage's WGSL is in
    bounds and every loop ends, so a device that can compiles it without the checks WebGPU adds
    to every shader (an index clamped into its array, a bound on each loop). Natively wgpu-native
    can (on an H200 most matmul tiles ran 0-10% faster, skinny kernels up to 33%; some ran slower,
    so it is each kernel's own choice); a browser always checks. Without the checks a wrong index
    is undefined behaviour, not a clamped read: the output checks still catch a wrong answer, and
    the first launch of an isolated tune (``isolate=True``) still contains a hang. Part of the
    identity.
    """

    name: str
    wgsl: str
    grid: Callable[[Args], Grid]
    workgroup_size: Grid | None = None
    workgroup_storage: int | None = None
    entry_point: str = "main"
    priority: Priority = 0
    group: Group | None = None
    features: tuple[str, ...] = ()
    then: tuple[Kernel, ...] = ()
    constants: Mapping[str, int | float | bool] = field(default_factory=dict)
    configuration: Mapping[str, Any] | None = field(default=None, compare=False)
    params: Callable[[Args], Sequence[int | float]] | None = None
    scratch: Mapping[str, Callable[[Args], int]] = field(default_factory=dict)
    runtime_checks: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a kernel needs a non-empty name, got {self.name!r}")
        if not isinstance(self.wgsl, str):
            raise ConfigError(f"kernel {self.name!r}: wgsl must be a str")
        if not callable(self.grid):
            raise ConfigError(f"kernel {self.name!r}: grid must be a function of the call's Args")
        if self.params is not None and not callable(self.params):
            raise ConfigError(f"kernel {self.name!r}: params must be a function of the call's Args")
        if self.workgroup_size is not None:
            size = tuple(self.workgroup_size)
            if len(size) != 3 or any(not isinstance(n, int) or n < 1 for n in size):
                raise ConfigError(f"kernel {self.name!r}: workgroup_size must be three ints >= 1, got {size}")
            object.__setattr__(self, "workgroup_size", size)
        storage = self.workgroup_storage
        if storage is not None and (isinstance(storage, bool) or not isinstance(storage, int) or storage < 0):
            raise ConfigError(f"kernel {self.name!r}: workgroup_storage must be bytes >= 0, got {storage!r}")
        if not isinstance(self.runtime_checks, bool):
            raise ConfigError(
                f"kernel {self.name!r}: runtime_checks must be True or False, got {self.runtime_checks!r}")
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "then", tuple(self.then))
        for stage in self.then:
            if not isinstance(stage, Kernel):
                raise ConfigError(f"kernel {self.name!r}: each stage in then must be a Kernel, got {stage!r}")
        object.__setattr__(self, "constants", _checked_constants(self.name, self.constants))
        object.__setattr__(self, "scratch", _checked_scratch(self.name, self.scratch))
        for stage in self.then:
            if stage.scratch:
                raise ConfigError(f"kernel {self.name!r}: stage {stage.name!r} declares scratch; declare it on "
                                  "the candidate (its first stage), whose stages all bind it by name")

    @property
    def stages(self) -> tuple[Kernel, ...]:
        """This kernel and the stages after it, in dispatch order."""
        return (self, *self.then)

    def fingerprint(self) -> str:
        """What identifies this candidate's code: any change here invalidates stored winners."""
        # An undeclared size or storage reads as the old defaults: the declarations do not change the
        # code, so candidates that gave none keep the checksums their stored winners have.
        size = self.workgroup_size if self.workgroup_size is not None else (64, 1, 1)
        storage = self.workgroup_storage if self.workgroup_storage is not None else 0
        parts = [self.name, self.entry_point, repr(size), str(storage), self.wgsl]
        if self.features:
            parts.append(",".join(sorted(self.features)))
        if self.constants:  # absent when empty: kernels without overrides keep their checksums
            parts.append("constants:" + ",".join(f"{name}={value!r}" for name, value in sorted(self.constants.items())))
        if self.params is not None:  # only its presence: a function has no value to fingerprint
            parts.append("params:function")
        if self.scratch:
            parts.append("scratch:" + ",".join(sorted(self.scratch)))
        if not self.runtime_checks:  # absent when checked: such kernels keep their checksums
            parts.append("runtime_checks:off")
        parts.extend(stage.fingerprint() for stage in self.then)
        return "\x1f".join(parts)


def _checked_scratch(kernel: str, scratch: object) -> dict[str, Callable[[Args], int]]:
    """A kernel's scratch buffers as a plain dict, or a ConfigError naming what is wrong."""
    if not isinstance(scratch, Mapping):
        raise ConfigError(f"kernel {kernel!r}: scratch must map WGSL names to functions of the call's Args "
                          f"giving bytes, got {type(scratch).__name__}")
    for name, size in scratch.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"kernel {kernel!r}: scratch name {name!r} is not a WGSL identifier")
        if not callable(size):
            raise ConfigError(f"kernel {kernel!r}: scratch {name!r} needs a function of the call's Args giving "
                              f"its size in bytes, got {size!r}")
    return dict(scratch)


def _checked_constants(kernel: str, constants: object) -> dict[str, int | float | bool]:
    """A kernel's pipeline constants as a plain dict, or a ConfigError naming what is wrong."""
    if not isinstance(constants, Mapping):
        raise ConfigError(f"kernel {kernel!r}: constants must be a mapping of override name to number")
    checked: dict[str, int | float | bool] = {}
    for name, value in constants.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"kernel {kernel!r}: constant names must be non-empty strings, got {name!r}")
        if not isinstance(value, numbers.Real) or not math.isfinite(value):  # numpy's scalars are Real too
            raise ConfigError(f"kernel {kernel!r}: constant {name} = {value!r}; give a finite number or a bool")
        if isinstance(value, bool):
            checked[name] = value
        else:
            checked[name] = int(value) if isinstance(value, numbers.Integral) else float(value)
    return checked


KeyFunction = Callable[[Args], Mapping[str, object]]
# (the call's buffers as bytes, its params) -> one expected value per output buffer.
Reference = Callable[[list[bytes], tuple], Sequence[Any]]
# The typecodes output checks read values as (struct's): floats within tolerance, integers exactly.
OUTPUT_TYPES = ("e", "f", "d", "b", "B", "h", "H", "i", "I")
Tolerance = tuple[str | None, float | None, float | None]
"""An output's ``(typecode, atol, rtol)`` as the set gives them; None: from the output's WGSL
element type (``output_types.py``)."""


def _tolerances(
    name: str, outputs: tuple[Output, ...] | None, output_type: object, atol: object, rtol: object
) -> tuple[Tolerance, ...]:
    """``(typecode, atol, rtol)`` for each output, from one value (None included) or one per
    output; a ConfigError naming what is wrong. ``outputs`` None (not known yet): the values are
    checked, not counted."""

    def per_output(value: object, what: str) -> list:
        if value is None or isinstance(value, (str, int, float)):
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
    for tolerance in atols + rtols:
        if tolerance is None:
            continue
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
            raise ConfigError(f"tunable set {name!r}: tolerances must be numbers >= 0, got {tolerance!r}")
    if outputs is None:
        return ()
    return tuple((t, None if a is None else float(a), None if r is None else float(r))
                 for t, a, r in zip(types, atols, rtols, strict=True))


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
    may be one value for every output or a sequence with one per output. Not given, the outputs
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
    key function's answer): for kernels whose sizes a template bakes into the source. Each key
    then gets a set of its own (:meth:`for_key`), which the tuner tunes, compiles and stores
    like any other.
    """

    def __init__(
        self,
        name: str,
        candidates: Sequence[Kernel] | Callable[[dict[str, Any]], Sequence[Kernel]],
        key: KeyFunction,
        *,
        outputs: Sequence[Output] | None = None,
        input_gen: InputGenerator | None = None,
        output_type: str | Sequence[str | None] | None = None,
        atol: float | Sequence[float | None] | None = None,
        rtol: float | Sequence[float | None] | None = None,
        reference: Reference | None = None,
        short_circuit: Callable[[Key], float | None] | None = None,
        search: Search | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a tunable set needs a non-empty name, got {name!r}")
        self.specialize: Callable[[dict[str, Any]], Sequence[Kernel]] | None = None
        if callable(candidates):  # made per key: each key's candidates are a set of their own
            self.name, self.key_function, self.specialize = name, key, candidates
            self.candidates, self.checksum, self.index_of, self.search = (), "", {}, search
            self._children: dict[Key, TunableSet] = {}
            self._options = {"outputs": outputs, "input_gen": input_gen, "output_type": output_type, "atol": atol,
                             "rtol": rtol, "reference": reference, "short_circuit": short_circuit, "search": search}
            return
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

    def for_key(self, key: Key) -> TunableSet:
        """The set that tunes ``key``: this one, or for a set whose candidates are made per key,
        the set of the key's candidates, named ``name[key]``, made on the key's first call and
        kept (its checksum covers the candidates as made for the key, so a stored winner stands
        for exactly that source). A ConfigError names the key when they cannot be made."""
        if self.specialize is None:
            return self
        found = self._children.get(key)
        if found is None:
            try:
                made = self.specialize(key.as_dict())
            except ConfigError:
                raise
            except Exception as error:
                raise ConfigError(f"tunable set {self.name!r}: its candidates for [{key}] could not be made: "
                                  f"{type(error).__name__}: {error}") from error
            found = self._children[key] = TunableSet(f"{self.name}[{key}]", made, self.key_function, **self._options)
        return found

    def __len__(self) -> int:
        return len(self.candidates)

    def __repr__(self) -> str:
        if self.specialize is not None:
            return f"TunableSet({self.name!r}, candidates made per key)"
        return f"TunableSet({self.name!r}, {len(self.candidates)} candidates)"

    def key(self, args: Args) -> Key:
        """The autotune key of a call; a ConfigError naming the set when its key function fails."""
        try:
            fields = self.key_function(args)
        except Exception as error:
            raise key_error(self.name, error) from error
        return make_key(self.name, fields)
