"""Candidates: one kernel of a set, and the priority groups a plan benchmarks them in.

A :class:`Kernel` is one candidate: WGSL source plus how to launch it (its grid, params,
constants, scratch and later stages, all functions of a call's :class:`~wgtune.sets.args.Args`).
Its fingerprint is what a set's checksum is made of, so a stored winner stands for exactly
this source.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..key import Key
from .args import Args, Grid

__all__ = ["LAYOUTS", "Group", "Kernel", "Priority"]

Priority = int | Callable[[Key], int]

LAYOUTS = ("auto", "declared")
"""The values of :attr:`Kernel.layout`."""


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
    a tune in a tuning process (natively, ``isolate=True``) still contains a hang. Part of the
    identity.
    ``layout`` is the stage's pipeline layout, as WebGPU's ``layout`` of a compute pipeline:
    ``"auto"``, what the stage's WGSL uses, or ``"declared"``, one bind group layout of every
    buffer binding its WGSL declares in group 0, used or not (``bindings.declared_layout``).
    Stages that declare the same bindings then have one layout, and where a call binds the same
    buffers (and params) at each, one bind group serves them all: a launch of such a candidate
    sets its bind group once, not once a stage (a bind group set costs the host about as much as
    a dispatch, ``bench/pass_commands.py``). Part of the identity.
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
    layout: str = "auto"

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
        if self.layout not in LAYOUTS:
            raise ConfigError(f"kernel {self.name!r}: layout must be one of {', '.join(map(repr, LAYOUTS))}, "
                              f"got {self.layout!r}")
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
        if self.layout != "auto":  # absent when auto: such kernels keep their checksums
            parts.append(f"layout:{self.layout}")
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
