"""What each output of a set is, for the output checks: its buffer, its element type, its tolerance,
and whether it may start poisoned.

The WGSL is the source of truth (``ARCHITECTURE.md``): an output declared ``array<u32>`` is
compared as u32 values, exactly; ``array<vec4<f32>>`` as f32 values within tolerance;
``array<atomic<i32>>`` as i32. Read from the first candidate's binding of the output; a set's
``output_type`` overrides it, and where the WGSL says nothing readable (a struct of mixed
members, a source beyond the reflection) the output is compared as f32 (``"f"``) as before.

Default tolerances: f32 and f64 within ``1e-4 + 1e-4 * |reference|``; f16 within
``1e-2 + 2e-3 * |reference|`` (its epsilon is about 1e-3); integers exactly.

*Poison*: a check runs each candidate on fresh copies of the benchmark's buffers, with each
output filled with all-ones bits (NaN in f32 and f16, -1 as i32, the largest u32) so that an
element a candidate leaves unwritten shows (a vec4 kernel's tail, a grid a quarter too small),
even when the buffer it copies already held the right answer (in the page the fallback has just
written it). Not where a kernel reads the output before it writes it: an accumulating atomic
output (a histogram) or an in-place update (``out[i] += x``). :func:`reads_before_writing` tells
those apart from the WGSL's tokens, conservatively: any use of the output but a plain store
(``out[i] = v``, ``out[i].x = v``) or ``arrayLength(&out)`` counts as a read. A candidate of
several stages is judged by the first stage that uses the output (:func:`candidate_reads_first`):
once a stage has stored into it (a split-K matmul's first stage zeroes C), later stages that add
into it read what the candidate wrote, not what the buffer held; an element no stage wrote still
shows as poison.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..errors import ConfigError
from ..wgsl.declarations import Layout, ShaderModule, WgslError, layout
from .args import Args
from .bindings import binding_plan, output_indices
from .buffer_names import Output
from .shaders import shader_of
from .tunable import Kernel, TunableSet

__all__ = ["DEFAULT_TOLERANCES", "OutputSpec", "candidate_reads_first", "output_specs", "reads_before_writing", "uses"]

_TYPECODES = {"f32": "f", "f16": "e", "i32": "i", "u32": "I"}
DEFAULT_TOLERANCES = {"f": (1e-4, 1e-4), "d": (1e-4, 1e-4), "e": (1e-2, 2e-3)}
"""``typecode -> (atol, rtol)`` where the set gives none; integers: exact."""


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One output as the checks compare it: buffer ``index`` of the call, named ``label`` in
    messages, read as ``typecode`` values within ``atol + rtol * |want|``; ``poison``: it starts as
    all-ones bits in a check run (see the module doc); ``declared``: the WGSL's element type, or
    None where it could not be read."""

    index: int
    label: str
    typecode: str
    atol: float
    rtol: float
    poison: bool
    declared: str | None = None


def output_specs(tunables: TunableSet, args: Args) -> tuple[OutputSpec, ...]:
    """Each of ``tunables``' outputs for the call ``args`` (see the module doc); a ConfigError for an
    output that is none of the call's buffers."""
    indices = output_indices(tunables, args)
    first = tunables.candidates[0]
    specs = []
    tolerances = tunables.tolerances_for(args)
    for output, index, (given_type, atol, rtol) in zip(tunables.outputs, indices, tolerances, strict=True):
        name, module = _binding_of(first, output, index, args)
        element = _element(module, name) if module is not None and name is not None else None
        typecode = given_type or _TYPECODES.get(element[0] if element else "", "f")
        default_atol, default_rtol = DEFAULT_TOLERANCES.get(typecode, (0.0, 0.0))
        accumulates = element is not None and element[1]
        reads = name is None or accumulates or any(
            candidate_reads_first(kernel, name) for kernel in tunables.candidates)
        label = f"{name!r} (buffer {index})" if name else f"buffer {index}"
        specs.append(OutputSpec(index, label, typecode, default_atol if atol is None else atol,
                                default_rtol if rtol is None else rtol, poison=not reads,
                                declared=element[0] if element else None))
    return tuple(specs)


def _binding_of(candidate: Kernel, output: Output, index: int, args: Args) -> tuple[str | None, ShaderModule | None]:
    """The WGSL name of the binding that call buffer ``index`` (the set's ``output``) takes in
    ``candidate``, and the module of the stage declaring it; Nones where the reflection cannot say."""
    if isinstance(output, str):
        wanted: object = output
    elif args.names is not None:
        wanted = args.names[index]
    elif isinstance(output, tuple):
        wanted = output
    else:
        try:
            plan = binding_plan(candidate)
        except Exception:  # a candidate whose scratch cannot bind: its own tune reports it
            plan = None
        positions = plan[0].candidate.positions if plan else None
        slot = next((at for at, position in (positions or {}).items() if position == index), None)
        wanted = slot if slot is not None else (0, index)
    for stage in candidate.stages:
        module = shader_of(stage)
        if module is None:
            continue
        for binding in module.bindings:
            if binding.address_space == "storage" and wanted in (binding.name, (binding.group, binding.binding)):
                return binding.name, module
    return None, None


def _element(module: ShaderModule, name: str) -> tuple[str, bool] | None:
    """The scalar type of binding ``name``'s elements and whether they are atomic; None for a
    type of several scalars (a struct of f32 and u32) or one the reflection cannot lay out."""
    try:
        laid = layout(module.binding(name).type, module)
    except (WgslError, ConfigError, KeyError):
        return None
    scalars: set[str] = set()
    atomic = _scalars(laid, scalars)
    return (scalars.pop(), atomic) if len(scalars) == 1 else None


def _scalars(laid: Layout, into: set[str]) -> bool:
    """Add the scalar types ``laid`` is made of to ``into``; whether any of them is atomic."""
    if laid.kind == "struct":
        return any([_scalars(field.layout, into) for field in laid.fields])
    if laid.kind == "array" and laid.element is not None:
        return _scalars(laid.element, into)
    if laid.scalar is not None:
        into.add(laid.scalar)
    return laid.kind == "atomic"


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_SPACE = re.compile(r"\s*")
_MEMBER = re.compile(r"\s*\.\s*\w+")
_LENGTH_OF = re.compile(r"arrayLength\s*\(\s*&\s*$")  # what precedes a name whose length is taken


def candidate_reads_first(kernel: Kernel, name: str) -> bool:
    """Whether ``kernel``'s first stage that uses the variable ``name`` (see :func:`uses`) reads
    it before writing it (:func:`reads_before_writing`); False where no stage uses it."""
    for stage in kernel.stages:
        if uses(stage.wgsl, name):
            return reads_before_writing(stage.wgsl, name)
    return False


@functools.lru_cache(maxsize=4096)
def uses(source: str, name: str) -> bool:
    """Whether WGSL ``source`` uses the variable ``name`` anywhere but in its declaration and
    ``arrayLength(&name)``, which touches no element (by the same tokens as
    :func:`reads_before_writing`: a local of the same name counts as a use). A stage that only
    takes the output's length (a bound) neither reads nor writes it, so it does not decide."""
    text = _COMMENT.sub(" ", source)
    for match in re.finditer(rf"(?<![\w.]){re.escape(name)}\b", text):
        if text.startswith(":", _SPACE.match(text, match.end()).end()):
            continue
        if _LENGTH_OF.search(text, max(0, match.start() - 64), match.start()):
            continue
        return True
    return False


@functools.lru_cache(maxsize=4096)
def reads_before_writing(source: str, name: str) -> bool:
    """Whether WGSL ``source`` uses the variable ``name`` other than by plain stores into it and
    ``arrayLength(&name)`` (see the module doc). A regular expression over the source, not a
    parse (a set of a hundred 5 KB kernels is read in milliseconds): a use it cannot place, a
    comment it cannot strip, a local of the same name, counts as a read, the safe answer."""
    text = _COMMENT.sub(" ", source)
    for match in re.finditer(rf"(?<![\w.]){re.escape(name)}\b", text):
        before = text[:match.start()].rstrip()
        after = _SPACE.match(text, match.end()).end()
        if text.startswith(":", after):  # its declaration (or a struct member of that name)
            continue
        if before.endswith("&"):
            if re.search(r"arrayLength\s*\(\s*&$", before):
                continue
            return True
        if not _plain_store(text, match.end()):
            return True
    return False


def _plain_store(text: str, at: int) -> bool:
    """Whether ``text[at:]`` is an index or member access ending in a lone ``=`` (a store, not
    ``==`` or a compound ``+=``)."""
    accessed = False
    while True:
        at = _SPACE.match(text, at).end()
        if text.startswith("[", at):
            depth = 0
            while at < len(text):
                depth += {"[": 1, "]": -1}.get(text[at], 0)
                at += 1
                if depth == 0:
                    break
            accessed = True
            continue
        member = _MEMBER.match(text, at)
        if member:
            at, accessed = member.end(), True
            continue
        break
    return accessed and text.startswith("=", at) and not text.startswith("==", at)
