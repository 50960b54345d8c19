"""Small facts every kernel family shares: ceiling division, the 2-D grid, f32 size, a directive,
compiling without runtime checks.

Pure Python (the standard library and wgtune's core), as everything in ``wgtune.kernels``: it also
runs in Pyodide.
"""

from __future__ import annotations

from dataclasses import replace

from wgtune import Kernel

__all__ = ["F32_BYTES", "GRID_ROW", "SUBGROUPS_DIRECTIVE", "ceil_div", "with_runtime_checks", "wrapped_grid"]

F32_BYTES = 4

# Workgroups along x before a grid wraps onto y (WebGPU's per-dimension limit is 65535).
GRID_ROW = 32768

# WGSL requires this directive before subgroup builtins (browsers enforce it); naga as shipped
# with wgpu-py 0.32 rejects it but accepts the builtins, so the native backend drops it.
SUBGROUPS_DIRECTIVE = "enable subgroups;\n"


def ceil_div(numerator: int, denominator: int) -> int:
    """``ceil(numerator / denominator)`` in integers (a positive ``denominator``)."""
    return -(-numerator // denominator)


def wrapped_grid(groups: int) -> tuple[int, int, int]:
    """A grid of ``groups`` workgroups laid out row-major, wrapped onto y past ``GRID_ROW`` on x
    (a kernel numbers its workgroup ``wid.y * num_workgroups.x + wid.x``; the last row may
    dispatch a few past ``groups``, which the kernel must skip)."""
    if groups <= GRID_ROW:
        return (groups, 1, 1)
    return (GRID_ROW, ceil_div(groups, GRID_ROW), 1)


def with_runtime_checks(kernel: Kernel, checks: bool) -> Kernel:
    """``kernel`` with every stage compiled with (True) or without (False) WebGPU's runtime checks
    where the device can leave them out (``Kernel.runtime_checks``). The families' indices are in
    bounds and their loops end by construction, which the tests check over odd sizes; on an H200
    most candidates ran faster without (``bench/runtime_checks.py``)."""
    stages = tuple(replace(stage, runtime_checks=checks) for stage in kernel.then)
    return replace(kernel, runtime_checks=checks, then=stages)
