"""The stage that zeroes C before a candidate that splits K adds into it (kgrid and tail tiles,
split skinny kernels, their padded forms): its WGSL, its grid, and the candidate it heads.

A tile that adds into C cannot also clear it (no workgroup knows whether the others have added yet),
so a first stage of its own sets the outputs the adds go to to zero: all of C, or for a tail tile
only its cut blocks' rows, the last of C (:meth:`~wgtune.kernels.matmul.tile.MatmulTile.zeroed`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from wgtune import Args, Kernel

from ..common import ceil_div, wrapped_grid

__all__ = ["ZERO_WORKGROUP", "zero_stage", "zero_wgsl", "zeroing_c_first"]

# Invocations of the stage that zeroes C before a candidate that splits K adds into it.
ZERO_WORKGROUP = 256


def zero_wgsl(from_end: bool = False, declared: bool = False) -> str:
    """The first stage of a candidate that splits K (kgrid tiles, split skinny kernels): C (f32,
    ``M x N``) set to zero, or with ``from_end`` as many of its last elements as the grid has
    invocations (a tail tile's cut blocks are its last rows). It uses C and the params; with
    ``declared`` it declares A and B too, unused, so that its bindings are those of the stage
    after it (``Kernel.layout``)."""
    store = ("  let count = p.m * p.n;\n  if (index < count) { c[count - 1u - index] = 0.0; }\n" if from_end
             else "  if (index < p.m * p.n) { c[index] = 0.0; }\n")
    inputs = ("@group(0) @binding(0) var<storage, read> a: array<f32>;\n"
              "@group(0) @binding(1) var<storage, read> b: array<f32>;\n") if declared else ""
    return (
        inputs
        + "@group(0) @binding(2) var<storage, read_write> c: array<f32>;\n"
        "struct Params { m: u32, n: u32, k: u32 }\n"
        "@group(0) @binding(3) var<uniform> p: Params;\n\n"
        f"@compute @workgroup_size({ZERO_WORKGROUP}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,\n"
        "        @builtin(local_invocation_index) li: u32) {\n"
        f"  let index = (wid.y * groups.x + wid.x) * {ZERO_WORKGROUP}u + li;\n"
        + store
        + "}\n"
    )


def zero_stage(name: str, features: tuple[str, ...], zeroed: Callable[[int, int, int], int] | None = None,
               layout: str = "auto") -> Kernel:
    """The stage ``name`` that zeroes C, or, given ``zeroed``, that many of its last elements for a
    call's M, N, K (``zeroed`` may say 0: its grid is then empty), with ``layout`` (``Kernel.layout``;
    "declared": A and B declared too)."""

    def grid(args: Args) -> tuple[int, int, int]:
        m, n, k = args.params[:3]
        elements = zeroed(m, n, k) if zeroed else m * n
        return wrapped_grid(ceil_div(elements, ZERO_WORKGROUP))

    return Kernel(name, zero_wgsl(from_end=zeroed is not None, declared=layout == "declared"), grid=grid,
                  workgroup_size=(ZERO_WORKGROUP, 1, 1), workgroup_storage=0, features=features, layout=layout)


def zeroing_c_first(kernel: Kernel, options: dict, zeroed: Callable[[int, int, int], int] | None = None) -> Kernel:
    """A candidate that adds into C: :func:`zero_stage` first, named as the candidate, then
    ``kernel`` as the stage ``<name>_add``; ``options`` (group, priority) go to the candidate.
    Where ``kernel`` reads the call's params (M, N, K, as the zeroing stage does) and C is zeroed
    whole, both stages declare A, B, C and the params alike and share one bind group, set once a
    launch (``Kernel.layout``); a kernel with params of its own (a tail's wave) binds apart."""
    layout = "declared" if kernel.params is None and zeroed is None else "auto"
    first = zero_stage(kernel.name, kernel.features, zeroed, layout)
    return replace(first, then=(replace(kernel, name=f"{kernel.name}_add", layout=layout),), **options)
