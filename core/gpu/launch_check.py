"""Why WebGPU would refuse to launch a candidate on a call's buffers, found before it is asked.

WebGPU refuses a launch whose buffers do not fit what the stage binds: a storage binding's buffer
without ``STORAGE`` usage (a uniform's without ``UNIFORM``), one smaller than the binding needs,
a storage buffer whose size is not a whole number of 4-byte words or is over the device's
``maxStorageBufferBindingSize``, and a dispatch over ``maxComputeWorkgroupsPerDimension``. In a
browser it says so only later, through an error scope, and a refusal nobody asked about turns
up in whatever reads the device's errors next (another set's tune, say); natively wgpu-native
even aborts the process on a zero-byte binding. So the device checks each call here first, once
per stage and ``Args`` (where it makes the call's bind groups), and once per ``Args`` for the
grids (on a call's first launch): a refusal is a
:class:`~wgtune.errors.LaunchRefused` that names the binding, raised for that call.

What cannot be read from a buffer's ``size`` and ``usage`` (a destroyed buffer, another device's
buffer in a browser) is left to WebGPU's own error for the call's first launch (the device's
error scope, ``backends/webgpu.py``).

Pure standard library: it runs in CPython and in Pyodide.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..sets.args import Args, Grid
from ..sets.kernel import Kernel
from ..sets.shaders import shader_of
from ..wgsl.declarations import WgslError, layout
from .device import DeviceLimits, check_grid

__all__ = ["STORAGE", "UNIFORM", "BindingNeed", "binding_needs", "buffer_refusal", "describe_binding",
           "grid_refusal", "usage_names"]

# GPUBufferUsage flags, as the WebGPU spec numbers them (wgpu-py's BufferUsage has the same values).
_USAGE_FLAGS = ("MAP_READ", "MAP_WRITE", "COPY_SRC", "COPY_DST", "INDEX", "VERTEX", "UNIFORM", "STORAGE",
                "INDIRECT", "QUERY_RESOLVE")
UNIFORM = 0x40
STORAGE = 0x80
WORD = 4  # a storage binding's size must be a multiple of 4 bytes


@dataclass(frozen=True, slots=True)
class BindingNeed:
    """What one binding a stage declares asks of the buffer bound there: its WGSL ``name``,
    whether it is a ``uniform`` (else storage), and ``min_bytes`` (WebGPU's minimum binding size:
    a fixed type's whole size, one element of a runtime-sized array; None where the reflection
    cannot lay the type out)."""

    name: str
    uniform: bool
    min_bytes: int | None


_NEEDS: weakref.WeakKeyDictionary[Kernel, dict[tuple[int, int], BindingNeed]] = weakref.WeakKeyDictionary()


def binding_needs(stage: Kernel) -> dict[tuple[int, int], BindingNeed]:
    """Each storage and uniform binding of ``stage``'s WGSL by ``(group, binding)``, with what it
    needs of its buffer; read once per kernel. Empty for a source the reflection cannot read."""
    needs = _NEEDS.get(stage)
    if needs is None:
        needs = _NEEDS[stage] = _read_needs(stage)
    return needs


def _read_needs(stage: Kernel) -> dict[tuple[int, int], BindingNeed]:
    shader = shader_of(stage)
    if shader is None:
        return {}
    needs = {}
    for binding in shader.bindings:
        if binding.address_space not in ("storage", "uniform"):
            continue
        try:
            size: int | None = layout(binding.type, shader, binding.address_space, stage.constants or None).size
        except WgslError:
            size = None
        needs[(binding.group, binding.binding)] = BindingNeed(binding.name, binding.address_space == "uniform", size)
    return needs


def usage_names(usage: int) -> str:
    """``usage`` as its GPUBufferUsage flags' names: ``COPY_SRC|COPY_DST``."""
    names = [name for bit, name in enumerate(_USAGE_FLAGS) if usage & (1 << bit)]
    return "|".join(names) or "none"


def buffer_refusal(
    stage: Kernel, entries: Iterable[tuple[int, int, Any]], limits: DeviceLimits, is_buffer: Any = None,
) -> str | None:
    """Why WebGPU would refuse to bind the call's buffers in ``entries`` (``(group, binding,
    buffer)``, as ``bindings.stage_entries`` gives them) to ``stage``, or None. Entries whose
    buffer ``is_buffer`` says is not the call's own (the params' uniform, scratch: the device makes
    those) are skipped; so is a binding the reflection cannot read."""
    needs = binding_needs(stage)
    for group, binding, buffer in entries:
        need = needs.get((group, binding))
        if need is None or (is_buffer is not None and not is_buffer(buffer)):
            continue
        problem = _buffer_problem(need, buffer, limits)
        if problem:
            return f"{describe_binding(stage, group, binding)}: {problem}"
    return None


def describe_binding(stage: Kernel, group: int, binding: int) -> str:
    """``binding 1 'out' (@group(0) @binding(1)) of candidate 'wg64'``: how a refusal names a binding."""
    need = binding_needs(stage).get((group, binding))
    name = f" {need.name!r}" if need is not None else ""
    return f"binding {binding}{name} (@group({group}) @binding({binding})) of candidate {stage.name!r}"


def _buffer_problem(need: BindingNeed, buffer: Any, limits: DeviceLimits) -> str | None:
    try:
        size, usage = int(buffer.size), int(buffer.usage)
    except (AttributeError, TypeError, ValueError):
        return f"{buffer!r} is not a GPUBuffer (it has no size and usage)"
    flag, flag_name = (UNIFORM, "UNIFORM") if need.uniform else (STORAGE, "STORAGE")
    if not usage & flag:
        return f"the buffer lacks {flag_name} usage (it has {usage_names(usage)})"
    if size == 0:
        return "the buffer has 0 bytes (WebGPU binds no empty buffer)"
    if need.min_bytes is not None and size < need.min_bytes:
        return f"the buffer has {size} bytes, the binding needs at least {need.min_bytes}"
    if not need.uniform:
        if size % WORD:
            return f"the buffer has {size} bytes, not a multiple of 4 (WebGPU binds storage in whole 4-byte words)"
        if size > limits.max_storage_binding:
            return f"the buffer has {size} bytes, the device binds at most {limits.max_storage_binding} of storage"
    return None


def grid_refusal(kernel: Kernel, args: Args, grid: Grid, limits: DeviceLimits) -> str | None:
    """Why WebGPU would refuse to dispatch ``kernel`` (each stage, ``grid`` the first one's) on
    ``args``: a grid over the device's workgroups per dimension; None when every stage fits."""
    for stage in kernel.stages:
        stage_grid = grid if stage is kernel else tuple(stage.grid(args))
        problem = check_grid(stage_grid, limits)
        if problem:
            return f"candidate {kernel.name!r}" + ("" if stage is kernel else f", stage {stage.name!r}") + \
                f": {problem}"
    return None
