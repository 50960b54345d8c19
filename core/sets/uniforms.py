"""How a call's params become the uniform buffer its kernel reads.

The kernel's WGSL says what it reads: when the uniform at the params' binding (the one uniform
a stage declares, ``bindings.py``) is a struct, the params are its fields in order, each packed as
the field's type, at the field's offset (WGSL's layout rules, ``wgsl_layout.py``). So an ``f32``
field given the int ``2`` (a JavaScript ``2.0`` arrives so) gets ``2.0``, a ``u32`` field given
a negative number or a fraction is an error naming the field, and numpy's scalars work. A uniform
that is a scalar, a vector, a matrix or a fixed-size array of scalars or vectors (``u32``,
``vec4<u32>``, ``mat4x4<f32>``, ``array<vec4<f32>, 2>``) takes up to its count of lanes as params,
lane after lane (a matrix column after column), each packed and range-checked as its lane's
type, as a struct's field is (``-5`` or ``1.5`` for a ``u32`` lane is an error naming the lane),
the lanes not given zero, more params than lanes an error. A source the reflection cannot read,
or a uniform of another type (an array of structs), keeps the plain rule of
:func:`~wgtune.sets.args.pack_params`: ints as ``u32`` (``i32`` if negative), floats as ``f32``.

:func:`param_names` says what a struct's params are called, so that a caller (JavaScript, say)
can give them by name (:func:`params_by_name`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..errors import ConfigError, KernelError
from ..wgsl.declarations import ShaderModule, WgslError, pack_struct
from ..wgsl.layout import Layout, by_field, layout
from .args import Args, pack_params
from .bindings import binding_plan
from .shaders import shader_of
from .tunable import Kernel, TunableSet

__all__ = ["param_names", "param_scalars", "params_at", "params_by_name", "refuse_params", "uniform_bytes"]

def uniform_bytes(kernel: Kernel, params: Sequence[int | float], binding: int, group: int = 0) -> bytes:
    """The bytes of the uniform ``kernel`` reads ``params`` from at ``@group(group) @binding(binding)``."""
    shader = shader_of(kernel)
    uniform = None
    if shader is not None:
        uniform = next((b for b in shader.bindings if (b.group, b.binding) == (group, binding)), None)
    if uniform is None or uniform.address_space != "uniform":
        return pack_params(params)
    values: object = tuple(params)
    try:
        if not _is_struct(shader, uniform.type):
            try:
                shape = layout(uniform.type, shader, "uniform", kernel.constants or None)
            except WgslError:
                return pack_params(params)
            lanes = _lanes(shape)
            if lanes is None:
                return pack_params(params)
            count, arrange = lanes
            flat = list(params)
            if len(flat) > count:
                raise WgslError(f"{shape.type} holds {count} value{'s' * (count != 1)}, got {len(flat)} params")
            values = arrange(flat + [0] * (count - len(flat)))  # fewer params than lanes: the rest 0
        return pack_struct(shader, uniform.type, values, "uniform", constants=kernel.constants or None)
    except WgslError as error:
        raise WgslError(f"{kernel.name}: params for {uniform.name}: {error}") from None


def refuse_params(tunables: TunableSet, key: object, args: Args) -> None:
    """Raise the WgslError :func:`uniform_bytes` raises where the call's params do not fit the
    uniform of the set's candidate 0 (a string for an ``f32`` field, ``-5`` for a ``u32`` lane):
    asked before a call is tuned, so that it is the call's error, as it is on a key already tuned,
    and not a tune in which every candidate fails for it and the key is remembered as failed."""
    kernel = tunables.candidates[0]
    if kernel.params is not None or not args.params:  # a stage with its own params takes none of the call's
        return
    try:
        at = params_at(kernel)
    except KernelError:  # a candidate the plan cannot place: the tune says why
        return
    if at is not None:
        try:
            uniform_bytes(kernel, args.params, at[1], at[0])
        except WgslError as error:
            raise WgslError(f"set {tunables.name!r} [{key}]: {error}") from None


def _lanes(shape: Layout) -> tuple[int, Callable[[list], object]] | None:
    """How many numbers a uniform of this type (not a struct) holds, and how that many params
    become the value :func:`pack_struct` takes; None for a type whose values are not numbers in
    a row (an array of structs, of arrays, of matrices)."""
    if shape.kind == "scalar":
        return 1, lambda flat: flat[0]
    if shape.kind == "vector" and shape.count is not None:
        return shape.count, list
    if shape.kind == "matrix" and shape.count is not None and shape.element is not None:
        return shape.count * (shape.element.count or 0), list  # column after column, as pack_struct takes
    element = shape.element
    if shape.kind != "array" or shape.count is None or element is None or element.kind not in ("scalar", "vector"):
        return None
    if element.kind == "scalar":
        return shape.count, list
    width = element.count or 1
    return shape.count * width, lambda flat: [flat[at:at + width] for at in range(0, len(flat), width)]


def param_names(kernel: Kernel) -> tuple[str, ...] | None:
    """The field names of the struct ``kernel``'s params uniform is, in order; None where its
    params have no names (no uniform, one of another type, a source the reflection cannot read)."""
    fields = _param_fields(kernel)
    return None if fields is None else tuple(field.name for field in fields)


def param_scalars(kernel: Kernel) -> tuple[str | None, ...] | None:
    """The scalar type (``u32``, ``i32``, ``f32``, ``f16``) of each field of the struct ``kernel``'s
    params uniform is, in order (None for a field that is not a scalar or vector); None where
    :func:`param_names` is."""
    fields = _param_fields(kernel)
    if fields is None:
        return None
    return tuple(field.layout.scalar if field.layout.kind in ("scalar", "vector") else None for field in fields)


def params_at(kernel: Kernel) -> tuple[int, int] | None:
    """``(group, binding)`` of the uniform ``kernel``'s params fill, or None where it has none."""
    plan = binding_plan(kernel)
    return plan[0].candidate.params_at if plan else None


def _param_fields(kernel: Kernel) -> tuple | None:
    shader = shader_of(kernel)
    at = params_at(kernel)
    if shader is None or at is None:
        return None
    uniform = next((b for b in shader.bindings if (b.group, b.binding) == at), None)
    if uniform is None or not _is_struct(shader, uniform.type):
        return None
    try:
        return layout(uniform.type, shader, "uniform", kernel.constants or None).fields
    except WgslError:
        return None


def params_by_name(kernel: Kernel, values: Mapping[str, object]) -> tuple:
    """``values`` (field name -> value) as the params tuple of ``kernel``'s uniform struct, in its
    fields' order; a ConfigError naming what is missing, unknown, or why names cannot be used."""
    names = param_names(kernel)
    if names is None:
        raise ConfigError(f"{kernel.name}: params given by name, but its params uniform is not a struct "
                          "whose fields could name them; give them in order")
    try:
        return tuple(by_field(values, names, f"{kernel.name}: params", "its uniform"))
    except WgslError as error:
        raise ConfigError(str(error)) from None


def _is_struct(shader: ShaderModule, type_text: str) -> bool:
    resolved = type_text
    for alias in shader.aliases:
        if alias.name == resolved:
            resolved = alias.type
    return any(struct.name == resolved for struct in shader.structs)
