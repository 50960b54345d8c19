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

from ..wgsl.declarations import ShaderModule, WgslError, reflect
from .args import Grid
from .tunable import Kernel

__all__ = ["ShapeError", "shader_of", "workgroup_shape"]

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
