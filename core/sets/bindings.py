"""Where a call's buffers and params bind in each stage of a candidate, read from the stages' WGSL.

:func:`binding_plan` reads, once per candidate, what each stage declares: its storage and uniform
bindings, in any groups. :func:`stage_entries` places one call in one stage:

- buffers given *by name* (``Args({"x": x, "out": out})``, or by ``(group, binding)``): each
  binding the stage declares takes the buffer of its name, or of its slot; the stage's one uniform
  the call does not name takes the params. A name the stage does not declare is simply not bound
  there, so the stages of a multi-pass candidate each take what they use, whatever bindings they
  number them at. A name that no stage of the candidate declares, or a storage binding the call
  gives no buffer for, fails that candidate (a KernelError: the tune goes on with the others).
- buffers given *in order*: buffer ``i`` at the ``i``-th slot, counting each group's bindings from
  0 to the highest the candidate declares in it, group after group, and skipping the params
  uniform's binding. In group 0 that is binding ``i``, or ``i + 1`` past a uniform declared before
  it, as before bindings were read from the WGSL: a candidate that declares fewer bindings (a fused
  one-pass kernel beside a two-pass one) still finds each buffer where the others do. Over several
  groups, the order is only as stable as the candidates' declarations: name the buffers there.
  Where the reflection cannot place the call (a source it cannot read, a candidate with several
  uniforms), buffer ``i`` binds at ``@group(0) @binding(i)`` and the params right after.

A candidate's ``Kernel(scratch=...)`` buffers are the device's to make: each binding of that name,
in any stage, takes a :class:`Scratch` in the answer (the device puts the buffer there), and a
call in order does not count them among its buffers.

A stage with its own ``Kernel(params=...)`` packs those values into its uniform instead of the
call's (:func:`params_of`). :func:`output_indices` finds the call's buffers that a set's outputs
name, through the first candidate's bindings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, KernelError
from .args import Args
from .buffer_names import BufferName, Output
from .shaders import shader_of
from .tunable import Kernel, TunableSet

__all__ = [
    "PARAMS",
    "CandidateBindings",
    "Scratch",
    "Slot",
    "StageBindings",
    "binding_plan",
    "declared_layout",
    "output_indices",
    "params_of",
    "stage_entries",
]


class _Params:
    def __repr__(self) -> str:
        return "PARAMS"


PARAMS: Any = _Params()
"""Stands in :func:`stage_entries`' answer for the uniform buffer of the stage's params."""


@dataclass(frozen=True, slots=True)
class Scratch:
    """Stands in :func:`stage_entries`' answer for the candidate's scratch buffer ``name``, of
    ``size(args)`` bytes (``Kernel.scratch``)."""

    name: str
    size: Callable[[Args], int]


@dataclass(frozen=True, slots=True)
class Slot:
    """A buffer binding a stage declares: a storage buffer, or a uniform (``uniform``)."""

    group: int
    binding: int
    name: str
    uniform: bool
    used: bool = True  # False where the source never mentions it: the pipeline's layout has no place for it

    def __str__(self) -> str:
        return f"{self.name} (@group({self.group}) @binding({self.binding}))"


@dataclass(frozen=True, eq=False)
class CandidateBindings:
    """What the stages of one candidate declare together: every name and ``(group, binding)``
    (``declared``, less its scratch), its one params uniform (``params_at``, None where it declares
    none or several), where a call in order puts each buffer (``positions``: slot -> index; None
    where the candidate declares several uniforms, and a call in order binds by the old rule),
    and its scratch buffers (``scratch``: name -> size in bytes of the call)."""

    declared: frozenset[BufferName]
    params_at: tuple[int, int] | None
    positions: Mapping[tuple[int, int], int] | None
    scratch: Mapping[str, Callable[[Args], int]]


@dataclass(frozen=True, eq=False)
class StageBindings:
    """What one stage declares (``slots``, in ``(group, binding)`` order) and its candidate's plan."""

    slots: tuple[Slot, ...]
    candidate: CandidateBindings


def binding_plan(candidate: Kernel) -> tuple[StageBindings, ...] | None:
    """Each stage's bindings as its WGSL declares them (see the module doc); None where a stage's
    source cannot be read (or has no compute entry point): calls then bind by the old rule. A
    KernelError where the candidate's scratch cannot be bound (a name no stage declares as storage,
    or a source beyond the reflection)."""
    declared: list[tuple[Slot, ...]] = []
    scratch = candidate.scratch
    for stage in candidate.stages:
        shader = shader_of(stage)
        if shader is None or not any(entry.stage == "compute" for entry in shader.entry_points):
            if scratch:
                raise KernelError(f"{candidate.name}: its scratch buffers bind by the names its WGSL declares, "
                                  f"and wgtune cannot read the bindings of stage {stage.name!r}")
            return None
        slots = [Slot(b.group, b.binding, b.name, b.address_space == "uniform", b.name not in shader.unused)
                 for b in shader.bindings if b.address_space in ("storage", "uniform")]
        declared.append(tuple(sorted(slots, key=lambda s: (s.group, s.binding))))
    every = [slot for slots in declared for slot in slots]
    for name in scratch:
        kinds = {slot.uniform for slot in every if slot.name == name}
        if kinds != {False}:
            raise KernelError(f"{candidate.name}: scratch {name!r} is " + (
                "declared by no stage" if not kinds else "declared as a uniform: scratch is a storage buffer"))
    # Slots that only scratch takes are not the call's: a call in order skips them. (Stages number
    # their bindings as they like: scratch at one stage's binding 1 may be another's binding 0.)
    theirs = [slot for slot in every if slot.name not in scratch]
    own = {(s.group, s.binding) for s in every if s.name in scratch} - {(s.group, s.binding) for s in theirs}
    every = theirs
    uniforms = {(s.group, s.binding) for s in every if s.uniform}
    params_at = next(iter(uniforms)) if len(uniforms) == 1 else None
    positions: dict[tuple[int, int], int] | None = None
    if len(uniforms) <= 1:
        highest: dict[int, int] = {}
        for slot in every:
            highest[slot.group] = max(highest.get(slot.group, -1), slot.binding)
        positions = {}
        for group in sorted(highest):
            for binding in range(highest[group] + 1):
                if (group, binding) != params_at and (group, binding) not in own:
                    positions[(group, binding)] = len(positions)
    names = {s.name for s in every} | {(s.group, s.binding) for s in every}
    plan = CandidateBindings(frozenset(names), params_at, positions, scratch)
    return tuple(StageBindings(slots, plan) for slots in declared)


def declared_layout(stage: Kernel) -> tuple[tuple[int, str], ...]:
    """The bind group layout of a stage with ``layout="declared"``: ``(binding, buffer type)`` for
    each buffer its WGSL declares in group 0, used or not, in binding order, the type as WebGPU's
    ``GPUBufferBindingType`` names it (``"uniform"``, ``"storage"`` for read_write,
    ``"read-only-storage"`` for read). Stages with equal answers share one layout, so one bind
    group. A KernelError where the stage's WGSL cannot be read, or declares what such a layout
    does not take (a binding in another group, a texture or sampler)."""
    shader = shader_of(stage)
    if shader is None:
        raise KernelError(f"{stage.name}: layout='declared' needs WGSL whose bindings wgtune can read")
    entries = []
    for binding in shader.bindings:
        buffer = binding.address_space in ("storage", "uniform")
        if binding.group != 0 or not buffer:
            raise KernelError(f"{stage.name}: layout='declared' takes buffers in group 0 only, and the WGSL "
                              f"declares {binding.name} (@group({binding.group}) @binding({binding.binding})"
                              f"{'' if buffer else ', not a buffer'})")
        kind = ("uniform" if binding.address_space == "uniform"
                else "storage" if binding.access == "read_write" else "read-only-storage")
        entries.append((binding.binding, kind))
    return tuple(sorted(entries))


def params_of(stage: Kernel, args: Args) -> tuple[int | float, ...]:
    """The values of ``stage``'s params uniform for the call: its own ``params(args)``, if it has
    that function, else the call's ``params``."""
    return args.params if stage.params is None else tuple(stage.params(args))


def stage_entries(plan: StageBindings | None, args: Args, stage: str) -> list[tuple[int, int, Any]]:
    """``(group, binding, buffer)`` for each binding of the stage (``plan``, named ``stage`` in
    errors) for the call ``args``, :data:`PARAMS` where its params uniform goes; a KernelError
    saying why the call does not fit the stage (see the module doc)."""
    if args.names is not None:
        return _by_name(plan, args, stage)
    buffers = args.buffers
    if plan is not None and plan.candidate.positions is None and plan.candidate.scratch:
        raise KernelError(f"{stage}: this candidate declares several uniforms and scratch, so a call in order "
                          "cannot say where its buffers go: name them")
    if plan is None or plan.candidate.positions is None:
        return [(0, index, buffer) for index, buffer in enumerate(buffers)] + [(0, len(buffers), PARAMS)]
    positions, params_at, scratch = plan.candidate.positions, plan.candidate.params_at, plan.candidate.scratch
    entries, missing = [], []
    for slot in plan.slots:
        at = (slot.group, slot.binding)
        if slot.name in scratch:
            entries.append((slot.group, slot.binding, Scratch(slot.name, scratch[slot.name])))
        elif at == params_at:
            entries.append((slot.group, slot.binding, PARAMS))
        elif positions[at] < len(buffers):
            entries.append((slot.group, slot.binding, buffers[positions[at]]))
        else:
            missing.append(f"{slot} as buffer {positions[at]}")
    if missing:
        raise KernelError(f"{stage} declares {', '.join(missing)}, but the call gives {len(buffers)} buffers "
                          "(in order: by (group, binding), the params uniform skipped)")
    return entries


def _by_name(plan: StageBindings | None, args: Args, stage: str) -> list[tuple[int, int, Any]]:
    names = args.names or ()
    if plan is None:
        raise KernelError(f"{stage}: the call names its buffers, but wgtune cannot read this stage's bindings "
                          "from its WGSL; give the buffers in order")
    scratch = plan.candidate.scratch
    own = [name for name in names if name in scratch]
    if own:
        raise KernelError(f"the call gives {', '.join(map(repr, own))}, which this candidate makes itself "
                          "(its scratch)")
    unknown = [name for name in names if name not in plan.candidate.declared]
    if unknown:
        known = sorted(str(name) for name in plan.candidate.declared if isinstance(name, str))
        raise KernelError(f"the call names {', '.join(map(repr, unknown))}, which no stage of this candidate "
                          f"declares (they declare {', '.join(known) or 'no buffers'})")
    index_of = {name: index for index, name in enumerate(names)}
    entries, missing, unnamed_uniforms = [], [], []
    for slot in plan.slots:
        if slot.name in scratch:
            entries.append((slot.group, slot.binding, Scratch(slot.name, scratch[slot.name])))
            continue
        by_name, by_slot = index_of.get(slot.name), index_of.get((slot.group, slot.binding))
        if by_name is not None and by_slot is not None:
            raise KernelError(f"{stage}: the call gives {slot} twice, by name and by (group, binding)")
        index = by_name if by_name is not None else by_slot
        if index is not None:
            entries.append((slot.group, slot.binding, args.buffers[index]))
        elif slot.uniform:
            unnamed_uniforms.append(slot)
        else:
            missing.append(str(slot))
    if missing:
        raise KernelError(f"{stage} declares storage {', '.join(missing)}, for which the call gives no buffer")
    if len(unnamed_uniforms) > 1:
        raise KernelError(f"{stage} declares the uniforms {', '.join(map(str, unnamed_uniforms))}: name the "
                          "call's buffers for all but the one its params fill")
    entries += [(slot.group, slot.binding, PARAMS) for slot in unnamed_uniforms]
    return sorted(entries, key=lambda entry: entry[:2])


def output_indices(tunables: TunableSet, args: Args) -> tuple[int, ...]:
    """The index in ``args.buffers`` of each of the set's outputs (an index as it is; a name or
    ``(group, binding)`` found through the first candidate's bindings); a ConfigError for one
    that is none of the call's buffers."""
    plan = binding_plan(tunables.candidates[0])
    slots = [slot for stage in plan or () for slot in stage.slots]
    return tuple(_output_index(tunables.name, plan, slots, args, output) for output in tunables.outputs)


def _output_index(set_name: str, plan: tuple[StageBindings, ...] | None, slots: list[Slot], args: Args,
                  output: Output) -> int:
    count = len(args.buffers)
    if isinstance(output, int):
        if output < count:
            return output
        raise ConfigError(f"tunable set {set_name!r}: output {output} is not a buffer of a call with {count}")
    # The first candidate's bindings that this output names, by name or by (group, binding).
    named = [slot for slot in slots if output in (slot.name, (slot.group, slot.binding))]
    if args.names is not None:
        aliases = [output] + [alias for slot in named for alias in (slot.name, (slot.group, slot.binding))]
        for alias in aliases:
            if alias in args.names:
                return args.names.index(alias)
    else:
        at = (named[0].group, named[0].binding) if named else output if isinstance(output, tuple) else None
        index = _position(plan, at) if at is not None else None
        if index is not None and index < count:
            return index
    raise ConfigError(f"tunable set {set_name!r}: output {output!r} is none of the call's buffers "
                      f"({'named ' + ', '.join(map(repr, args.names)) if args.names else f'{count} in order'})")


def _position(plan: tuple[StageBindings, ...] | None, at: tuple[int, int]) -> int | None:
    """The index of the buffer a call in order binds at ``at`` (see the module doc), or None."""
    candidate = plan[0].candidate if plan else None
    if candidate is None or candidate.positions is None:
        return at[1] if at[0] == 0 else None  # the old rule: buffer i at @group(0) @binding(i)
    return None if at == candidate.params_at else candidate.positions.get(at)
