"""Reflection of a WGSL module's declarations: what a host needs to bind, size and fill its buffers.

``reflect(source)`` reads the module-scope declarations of WGSL written by anyone (ONNX Runtime
Web, TensorFlow.js, WebLLM, Burn, hand-written) and answers a :class:`ShaderModule`:

- ``bindings``: ``@group(g) @binding(b) var<storage[, read|read_write]> name: T;`` and
  ``var<uniform>``, and texture/sampler variables (address space ``"handle"``, type text only);
- ``structs`` (members with ``@align``/``@size``), ``aliases``, ``constants`` (``const``; the
  value where it is plain arithmetic), ``overrides`` (type, default text, ``@id``);
- ``entry_points``: ``@compute @workgroup_size(..)`` (and ``@vertex``/``@fragment``) functions,
  the workgroup size as ints where it is made of literals and consts, else as expression text,
  resolved for given override values by :meth:`EntryPoint.workgroup_size_with`;
- ``workgroup_vars`` with their byte sizes, and :meth:`ShaderModule.workgroup_storage_with`;
- ``enables`` and ``requires`` directives.

Layout and packing (:func:`layout`, :func:`pack_struct`) live in :mod:`wgtune.wgsl.layout` and are
re-exported here. Attributes may stand in any order, on the same line or the lines before;
``//`` and nested ``/* */`` comments may be anywhere; struct members may end in ``,`` or ``;``.

What it does not read, by design: function bodies and parameters (skipped as balanced braces),
so nothing about which variables an entry point uses (``workgroup_storage_with`` counts every
``var<workgroup>``: an upper bound for a module with several entry points); ``var<private>``
and other non-resource variables; expressions beyond the arithmetic of
:func:`wgtune.wgsl.layout.evaluate` (a const such as ``vec3(1.0)`` is recorded with value None;
a size written with ``select`` or shifts is an error saying so); template arguments containing
``<`` or ``>`` as comparisons; the pre-2022 ``[[group(0), binding(0)]]`` syntax (an error).
It checks what it reads (names declared twice, storage access modes, resources without
``@group``/``@binding``, ``@compute`` without ``@workgroup_size``, and the layouts the spec forbids:
workgroup variables' at once, a buffer's when :func:`layout` or :func:`pack_struct` is asked for
it), but it is no validator: a module it accepts may still fail to compile. Uniform buffers are
held to the spec's extra uniform constraints (16-byte array strides, 16-aligned struct and array
members) unless the module says ``requires uniform_buffer_standard_layout;``: the spec states
them as constraints to check, not as rules that move offsets, so a violation is an error.

Why write one: no maintained WGSL parser runs in Pyodide without compiled code. naga and
wgsl-parse are Rust, tree-sitter-wgsl is a C extension, wgsl_reflect and webgpu-utils are
JavaScript (natively out of reach), and wgpu-py 0.32 exposes no reflection. Module-scope
declarations are regular enough to read from a token stream, which keeps this pure Python.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .layout import Field, Layout, layout, pack_struct
from .reader import Attr, ModuleReader
from .syntax import (
    Alias,
    Constant,
    DependsOnOverride,
    Member,
    NotArithmetic,
    Override,
    Scope,
    Struct,
    Token,
    Value,
    WgslError,
    evaluate,
    tokenize,
)

__all__ = [
    "Alias", "Binding", "Constant", "EntryPoint", "Field", "Layout", "Member", "Override",
    "ShaderModule", "Struct", "WgslError", "WorkgroupVar", "layout", "pack_struct", "reflect",
]


@dataclass(frozen=True, slots=True)
class Binding:
    """A resource variable. ``address_space`` is ``"storage"``, ``"uniform"`` or ``"handle"``
    (textures, samplers); ``access`` is ``"read"`` or ``"read_write"`` for storage, else None."""

    group: int
    binding: int
    name: str
    address_space: str
    access: str | None
    type: str
    line: int


@dataclass(frozen=True)
class EntryPoint:
    """An entry point function. ``workgroup_size`` (compute only, else None) holds ints where the
    expressions are literals or consts, and expression text (``"WG"``) where they need overrides."""

    name: str
    stage: str
    workgroup_size: tuple[int | str, int | str, int | str] | None
    line: int
    scope: Scope = field(repr=False, compare=False)

    def workgroup_size_with(self, constants: Mapping[str, Any] | None = None) -> tuple[int, int, int]:
        """The workgroup size with these override values (keyed as WebGPU keys pipeline
        constants), the overrides' defaults for the others."""
        if self.workgroup_size is None:
            raise WgslError(f"fn {self.name} (line {self.line}) is a {self.stage} entry point: no workgroup size")
        what = f"@workgroup_size of fn {self.name} (line {self.line})"
        x, y, z = (d if isinstance(d, int) else _positive(self.scope.evaluate(d, constants, what=what), d, what)
                   for d in self.workgroup_size)
        return x, y, z


@dataclass(frozen=True)
class WorkgroupVar:
    """``var<workgroup> name: type;``: ``size`` in bytes, None where it depends on overrides
    (then :meth:`size_with` gives it for their values)."""

    name: str
    type: str
    size: int | None
    line: int
    scope: Scope = field(repr=False, compare=False)

    def size_with(self, constants: Mapping[str, Any] | None = None) -> int:
        return layout(self.type, self.scope, "workgroup", constants).size


@dataclass(frozen=True)
class ShaderModule(Scope):
    """A reflected WGSL module; also the :class:`Scope` that :func:`layout` and :func:`pack_struct`
    resolve names in."""

    bindings: tuple[Binding, ...]
    entry_points: tuple[EntryPoint, ...]
    workgroup_vars: tuple[WorkgroupVar, ...]
    unused: frozenset[str] = frozenset()
    """Names of bindings the source never mentions past their declaration (comments aside): a
    pipeline's "auto" layout leaves them out, so a bind group must too (a fill kernel that
    declares its input, a candidate that bakes the size its siblings read from the uniform)."""

    def binding(self, name: str) -> Binding:
        for b in self.bindings:
            if b.name == name:
                return b
        raise WgslError(f"no binding named {name!r} (the module binds {', '.join(b.name for b in self.bindings)})")

    def entry_point(self, name: str | None = None) -> EntryPoint:
        """The entry point ``name``, or with no name the module's only compute entry point."""
        found = [e for e in self.entry_points if e.name == name or (name is None and e.stage == "compute")]
        if len(found) != 1:
            names = ", ".join(e.name for e in self.entry_points) or "none"
            raise WgslError(f"no single entry point {name or '(compute)'!r}: the module has {names}")
        return found[0]

    def workgroup_storage_with(self, constants: Mapping[str, Any] | None = None) -> int:
        """Bytes of workgroup memory, counted as WebGPU counts them against
        maxComputeWorkgroupStorageSize: the sum of roundUp(16, SizeOf(T)) (createComputePipeline),
        here over every ``var<workgroup>`` of the module."""
        return sum(-(-v.size_with(constants) // 16) * 16 for v in self.workgroup_vars)


def _positive(value: Value, expr: str, what: str) -> int:
    if not isinstance(value, int) or value <= 0:
        raise WgslError(f"{what}: {expr!r} is {value!r}, not a positive integer")
    return value


# -- resolving ------------------------------------------------------------------------------------

def reflect(source: str) -> ShaderModule:
    """The module-scope declarations of ``source`` (see the module's docstring for what is read)."""
    found = ModuleReader(tokenize(source, bodies=False)).module()
    # Consts first, then overrides (their @id), struct members (@align, @size), then the rest.
    scope = Scope((), tuple(found.aliases), _constants(found.consts), (), tuple(found.enables), tuple(found.requires))
    overrides = tuple(Override(name.text, t, d, _attribute(scope, a, "id", f"override {name.text}"), name.line)
                      for name, t, d, a in found.overrides)
    scope = replace(scope, overrides=overrides)
    structs = tuple(Struct(name.text, tuple(Member(m.text, t, _attribute(scope, a, "align", f"{name.text}.{m.text}"),
                                                   _attribute(scope, a, "size", f"{name.text}.{m.text}"), m.line)
                                            for m, t, a in members), name.line)
                    for name, members in found.structs)
    scope = replace(scope, structs=structs)
    bindings, workgroup_vars = _variables(scope, found.variables)
    entry_points = tuple(_entry_point(scope, name, attrs) for name, attrs in found.functions
                         if any(a.name in ("compute", "vertex", "fragment") for a in attrs))
    mentions = Counter(_IDENTIFIER.findall(_COMMENT.sub(" ", source)))
    return ShaderModule(scope.structs, scope.aliases, scope.constants, scope.overrides, scope.enables,
                        scope.requires, bindings, entry_points, workgroup_vars,
                        unused=frozenset(b.name for b in bindings if mentions[b.name] <= 1))


# What reflect counts a binding's mentions with: identifiers outside comments, not after a "."
# (``g.x`` is no use of a binding ``x``). What it may count too much (a struct member of the same
# name, a name in a nested comment, ``a . x``) only keeps a binding, as before.
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_IDENTIFIER = re.compile(r"(?<![.\w])[^\W\d]\w*")


def _constants(consts: dict[str, tuple[str | None, str, int]]) -> tuple[Constant, ...]:
    """Each const with its value where it is arithmetic over literals and other consts."""
    values: dict[str, Value | None] = {}

    def value(name: str, stack: tuple[str, ...]) -> Value:
        if name not in consts or name in stack:
            raise NotArithmetic(f"{name} is not a const")
        if name not in values:
            try:
                values[name] = evaluate(consts[name][1], lambda n: value(n, (*stack, name)), f"const {name}")
            except WgslError:  # not arithmetic (a vector, a bool, a call): no value
                values[name] = None
        number = values[name]
        if number is None:
            raise NotArithmetic(f"{name} is not a number")
        return number

    for name in consts:
        with contextlib.suppress(NotArithmetic):
            value(name, ())
    return tuple(Constant(n, t, e, values[n], line) for n, (t, e, line) in consts.items())


def _attribute(scope: Scope, attrs: list[Attr], name: str, what: str) -> int | None:
    """The value of ``@name(expr)`` (a const-expression), or None where there is none."""
    found = [a for a in attrs if a.name == name]
    if not found:
        return None
    if len(found[0].args) != 1:
        raise WgslError(f"line {found[0].line}: @{name} of {what} takes one value")
    where = f"line {found[0].line}: @{name}({found[0].args[0]}) of {what}"
    try:
        value = scope.evaluate(found[0].args[0], what=where, overrides=False)
    except DependsOnOverride as needs:
        raise WgslError(f"{where} must be a const-expression, but uses override {needs.name!r}") from None
    if not isinstance(value, int) or value < 0:
        raise WgslError(f"{where} must be a non-negative integer, not {value!r}")
    return value


def _variables(scope: Scope, variables: list[tuple[Token, str | None, str | None, str | None, list[Attr]]],
               ) -> tuple[tuple[Binding, ...], tuple[WorkgroupVar, ...]]:
    bindings: list[Binding] = []
    workgroup_vars: list[WorkgroupVar] = []
    for name, space, access, type_text, attrs in variables:
        group, binding = (_attribute(scope, attrs, a, f"var {name.text}") for a in ("group", "binding"))
        what = f"var {name.text} (line {name.line})"
        resource = space in ("storage", "uniform") or (space is None and type_text is not None)
        if resource and (group is None or binding is None or type_text is None):
            raise WgslError(f"{what}: a resource variable needs @group, @binding and a type")
        if not resource and (group is not None or binding is not None):
            raise WgslError(f"{what}: @group/@binding on a var<{space}>")
        if space == "storage" and access not in (None, "read", "read_write"):
            raise WgslError(f"{what}: storage access must be read or read_write, not {access!r}")
        if space != "storage" and access is not None:
            raise WgslError(f"{what}: only storage variables take an access mode (found {access!r})")
        if resource:
            assert group is not None and binding is not None and type_text is not None
            kind = space or "handle"
            access = access or ("read" if kind == "storage" else None)
            bindings.append(Binding(group, binding, name.text, kind, access, type_text, name.line))
        elif space == "workgroup":
            if type_text is None:
                raise WgslError(f"{what}: a var<workgroup> needs a type")
            try:
                size: int | None = layout(type_text, scope, "workgroup", overrides=False).size
            except DependsOnOverride:
                size = None
            workgroup_vars.append(WorkgroupVar(name.text, type_text, size, name.line, scope))
    return tuple(bindings), tuple(workgroup_vars)


def _entry_point(scope: Scope, name: Token, attrs: list[Attr]) -> EntryPoint:
    stage = next(a.name for a in attrs if a.name in ("compute", "vertex", "fragment"))
    if stage != "compute":
        return EntryPoint(name.text, stage, None, name.line, scope)
    sizes = [a for a in attrs if a.name == "workgroup_size"]
    if not sizes or not 1 <= len(sizes[0].args) <= 3:
        raise WgslError(f"line {name.line}: @compute fn {name.text} needs @workgroup_size(x[, y[, z]])")
    what = f"@workgroup_size of fn {name.text} (line {name.line})"
    dims: list[int | str] = []
    for expr in [*sizes[0].args, "1", "1"][:3]:
        try:
            dims.append(_positive(scope.evaluate(expr, what=what, overrides=False), expr, what))
        except DependsOnOverride:
            dims.append(expr)  # resolved by EntryPoint.workgroup_size_with
    return EntryPoint(name.text, stage, (dims[0], dims[1], dims[2]), name.line, scope)
