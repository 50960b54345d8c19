"""What a candidate's own WGSL says of it: its reflection, its workgroup size and storage.

Each kernel's source is reflected once (``wgsl.py``), on first use, and kept for as long as the
kernel lives; reading is lazy because it costs about as much as the kernel's other Python, and a
set of hundreds of candidates is built when a page loads.

:func:`workgroup_shape` is what the device's limits are checked against (``device.py``): the
workgroup size of the kernel's entry point and the bytes of its ``var<workgroup>`` declarations,
read from the WGSL with the kernel's pipeline constants. A kernel may declare them
(``Kernel(workgroup_size=..., workgroup_storage=...)``); a declaration that disagrees with its
WGSL is an error, since a wrong one lets a kernel over a device's limit through to a driver that
may misbehave on it. Where the WGSL cannot tell (a source the reflection cannot read, a size
written in expressions it does not evaluate), the declaration is taken as it is, and an
undeclared kernel is taken as 64 x 1 x 1 with no workgroup storage.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from .tunable import Grid, Kernel
from .wgsl import ShaderModule, WgslError, reflect

__all__ = ["ShapeError", "StageBindings", "binding_plan", "shader_of", "workgroup_shape"]

_SHADERS: weakref.WeakKeyDictionary[Kernel, ShaderModule | None] = weakref.WeakKeyDictionary()
_SHAPES: weakref.WeakKeyDictionary[Kernel, tuple[Grid, int] | WgslError] = weakref.WeakKeyDictionary()

UNDECLARED_SIZE: Grid = (64, 1, 1)


class ShapeError(WgslError):
    """A kernel's declared workgroup size or storage disagrees with its WGSL."""


def shader_of(kernel: Kernel) -> ShaderModule | None:
    """The reflection of ``kernel``'s WGSL, or None for a source the reflection cannot read."""
    if kernel not in _SHADERS:
        try:
            _SHADERS[kernel] = reflect(kernel.wgsl)
        except WgslError:
            _SHADERS[kernel] = None
    return _SHADERS[kernel]


@dataclass(frozen=True)
class StageBindings:
    """What one stage binds: ``(binding, index of the call's buffer)`` for each storage binding it
    declares, and the binding of its params uniform (None when it declares none)."""

    buffers: tuple[tuple[int, int], ...]
    params_at: int | None


def binding_plan(candidate: Kernel) -> tuple[StageBindings, ...] | None:
    """How each stage of ``candidate`` binds a call, from what the stages' WGSL declares in group 0.

    The call's buffers are bound in binding order, the params uniform's binding skipped: buffer
    ``i`` at binding ``i``, or at ``i + 1`` past a uniform declared before it. So the usual layout
    (buffers at 0, 1, ..., the uniform after them) binds as it always did, and a uniform at
    binding 0 with storage at 1 and 2 takes the params at 0 and the buffers at 1 and 2. Each stage
    binds only what it declares, so the stages of a multi-pass candidate declare just the buffers
    they use. None where a stage's source cannot be read (no compute entry point) or declares
    another group or more than one uniform, or where the stages put their uniform at different
    bindings: then every stage binds buffer ``i`` at binding ``i`` and the params right after, as
    before reflection.
    """
    declared = []
    for stage in candidate.stages:
        shader = shader_of(stage)
        if shader is None or not any(entry.stage == "compute" for entry in shader.entry_points):
            return None
        if any(binding.group != 0 for binding in shader.bindings):
            return None
        uniforms = [b.binding for b in shader.bindings if b.address_space == "uniform"]
        if len(uniforms) > 1:
            return None
        storage = sorted(b.binding for b in shader.bindings if b.address_space == "storage")
        declared.append((storage, uniforms[0] if uniforms else None))
    uniforms = {uniform for _, uniform in declared if uniform is not None}
    if len(uniforms) > 1:
        return None
    params_at = uniforms.pop() if uniforms else None  # the candidate's one params binding skips a buffer
    return tuple(
        StageBindings(tuple((b, b - (params_at is not None and params_at < b)) for b in storage), uniform)
        for storage, uniform in declared
    )


def workgroup_shape(kernel: Kernel) -> tuple[Grid, int]:
    """``kernel``'s workgroup size and bytes of workgroup storage (see the module doc); a
    ShapeError naming both values when a declaration disagrees with the WGSL."""
    found = _SHAPES.get(kernel)
    if found is None:
        try:
            found = _read_shape(kernel)
        except ShapeError as error:
            found = error
        _SHAPES[kernel] = found
    if isinstance(found, ShapeError):
        raise found
    return found


def _read_shape(kernel: Kernel) -> tuple[Grid, int]:
    size, storage, single = _from_wgsl(kernel)
    declared_size, declared_storage = kernel.workgroup_size, kernel.workgroup_storage
    if declared_size is not None and size is not None and tuple(declared_size) != size:
        raise ShapeError(f"{kernel.name} declares workgroup_size {tuple(declared_size)}, its WGSL says {size}")
    # Several entry points may share a module: its storage total is then only an upper bound.
    if declared_storage is not None and storage is not None and single and declared_storage != storage:
        raise ShapeError(
            f"{kernel.name} declares workgroup_storage {declared_storage}, its WGSL's var<workgroup> take {storage} "
            "bytes (each rounded up to 16, as WebGPU counts them)"
        )
    size = tuple(declared_size) if declared_size is not None else size or UNDECLARED_SIZE
    storage = declared_storage if declared_storage is not None else storage or 0
    return size, storage  # type: ignore[return-value]


def _from_wgsl(kernel: Kernel) -> tuple[Grid | None, int | None, bool]:
    """The WGSL's workgroup size and storage for ``kernel``'s entry point and constants (None
    where it cannot tell), and whether the module has a single compute entry point."""
    shader = shader_of(kernel)
    if shader is None:
        return None, None, False
    constants = kernel.constants or None
    computes = [entry for entry in shader.entry_points if entry.stage == "compute"]
    try:
        size = shader.entry_point(kernel.entry_point).workgroup_size_with(constants)
    except WgslError:
        size = None
    try:
        storage = shader.workgroup_storage_with(constants)
    except WgslError:
        storage = None
    return size, storage, len(computes) == 1
