"""How a call's params become the uniform buffer its kernel reads.

The kernel's WGSL says what it reads: when the uniform at the params' binding (the one uniform
a stage declares, ``bindings.py``) is a struct, the params are its fields in order, each packed as
the field's type, at the field's offset (WGSL's layout rules, ``wgsl_layout.py``). So an ``f32``
field given the int ``2`` (a JavaScript ``2.0`` arrives so) gets ``2.0``, a ``u32`` field given
a negative number or a fraction is an error naming the field, and numpy's scalars work. A source
the reflection cannot read, or a uniform that is not a struct (``vec4<u32>``, say), keeps the
plain rule of :func:`~wgtune.tunable.pack_params`: ints as ``u32`` (``i32`` if negative), floats
as ``f32``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .shaders import shader_of
from .tunable import Kernel, pack_params
from .wgsl import ShaderModule, WgslError, pack_struct

__all__ = ["uniform_bytes"]

def uniform_bytes(kernel: Kernel, params: Sequence[int | float], binding: int, group: int = 0) -> bytes:
    """The bytes of the uniform ``kernel`` reads ``params`` from at ``@group(group) @binding(binding)``."""
    shader = shader_of(kernel)
    uniform = None
    if shader is not None:
        uniform = next((b for b in shader.bindings if (b.group, b.binding) == (group, binding)), None)
    if uniform is None or uniform.address_space != "uniform" or not _is_struct(shader, uniform.type):
        return pack_params(params)
    try:
        return pack_struct(shader, uniform.type, tuple(params), "uniform", constants=kernel.constants or None)
    except WgslError as error:
        raise WgslError(f"{kernel.name}: params for {uniform.name}: {error}") from None


def _is_struct(shader: ShaderModule, type_text: str) -> bool:
    resolved = type_text
    for alias in shader.aliases:
        if alias.name == resolved:
            resolved = alias.type
    return any(struct.name == resolved for struct in shader.structs)
