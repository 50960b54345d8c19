"""How a call's params become the uniform buffer its kernel reads.

The kernel's WGSL says what it reads: when the uniform at the params' binding (the one uniform
a stage declares, ``bindings.py``) is a struct, the params are its fields in order, each packed as
the field's type, at the field's offset (WGSL's layout rules, ``wgsl_layout.py``). So an ``f32``
field given the int ``2`` (a JavaScript ``2.0`` arrives so) gets ``2.0``, a ``u32`` field given
a negative number or a fraction is an error naming the field, and numpy's scalars work. A float
vector or fixed-size float array (``vec4<f32>``, ``array<f32, 4>``) takes up to its count of
params, each as a float, the rest zero. A source the reflection cannot read, or a uniform of
another type, keeps the plain rule of :func:`~wgtune.sets.args.pack_params`: ints as ``u32``
(``i32`` if negative), floats as ``f32``; so an integer vector keeps a float's bits, which a
kernel reads back with ``bitcast<f32>``.

:func:`param_names` says what a struct's params are called, so that a caller (JavaScript, say)
can give them by name (:func:`params_by_name`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import ConfigError
from ..wgsl.declarations import ShaderModule, WgslError, pack_struct
from ..wgsl.layout import by_field, layout
from .args import pack_params
from .bindings import binding_plan
from .shaders import shader_of
from .tunable import Kernel

__all__ = ["param_names", "param_scalars", "params_at", "params_by_name", "uniform_bytes"]

def uniform_bytes(kernel: Kernel, params: Sequence[int | float], binding: int, group: int = 0) -> bytes:
    """The bytes of the uniform ``kernel`` reads ``params`` from at ``@group(group) @binding(binding)``."""
    shader = shader_of(kernel)
    uniform = None
    if shader is not None:
        uniform = next((b for b in shader.bindings if (b.group, b.binding) == (group, binding)), None)
    if uniform is None or uniform.address_space != "uniform":
        return pack_params(params)
    values = tuple(params)
    if not _is_struct(shader, uniform.type):
        try:
            shape = layout(uniform.type, shader, "uniform", kernel.constants or None)
        except WgslError:
            return pack_params(params)
        element = shape if shape.kind == "vector" else shape.element if shape.kind == "array" else None
        floats = element is not None and element.kind in ("vector", "scalar") and element.scalar in ("f32", "f16")
        lanes = shape.count if shape.kind == "vector" or (element is not None and element.kind == "scalar") else None
        if not floats or lanes is None or len(values) > lanes:
            return pack_params(params)
        values = values + (0,) * (lanes - len(values))  # fewer params than lanes: the rest 0
    try:
        return pack_struct(shader, uniform.type, values, "uniform", constants=kernel.constants or None)
    except WgslError as error:
        raise WgslError(f"{kernel.name}: params for {uniform.name}: {error}") from None


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
