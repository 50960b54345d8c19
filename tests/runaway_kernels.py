"""Kernels that run away, for the tests of the tuning process (``backends/isolation.py``).

Lavapipe ends every invocation after 65535 loop iterations in all, so a kernel cannot loop for
ever there: these spin every invocation of many workgroups instead. :data:`COUNTED` counts its
launches in its ``launches`` buffer (one atomic add per workgroup) and spins from launch
``FROM`` (0: the first) on, so it can be fast on its first launches and run away on a later
one. On lavapipe here a launch of 16384 workgroups took 23 ms without the spin and 65-98 s with
it (load 9 on 2 cores); 262144 spinning workgroups would take hours.
"""

from __future__ import annotations

import numpy as np

from wgtune import Args, Kernel, TunableSet

N = 4096

COUNTED = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> launches: array<atomic<u32>>;
override FROM: u32 = 4294967295u;
var<workgroup> steps: u32;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(local_invocation_index) l: u32,
        @builtin(num_workgroups) n: vec3<u32>) {
    if (l == 0u) {
        let launch = atomicAdd(&launches[0], 1u) / (n.x * n.y * n.z);
        steps = select(0u, 60000u, launch >= FROM);
    }
    let limit = workgroupUniformLoad(&steps);
    let i = g.x + g.y * n.x * 64u;
    var a = limit + i;
    var b = i ^ 0x9e3779b9u;
    for (var s = 0u; s < limit; s++) {
        a = a * 1664525u + 1013904223u;
        b = b * 22695477u + 1u;
    }
    if (i < arrayLength(&y)) { y[i] = 2.0 * x[i]; }
    if (a == 7u && b == 9u) { y[0] = -1.0; }  // never both: keeps the loop from being optimised away
}
"""

NEVER = (64, 4096, 1)
"""A grid whose launch, spinning, would take hours."""
LATER = (64, 256, 1)
"""A grid whose launch takes tens of milliseconds without the spin and minutes with it."""


def steady(name: str) -> Kernel:
    """A candidate that doubles ``x`` into ``y`` and never spins (64 workgroups)."""
    return Kernel(name, COUNTED + f"// {name}\n", grid=lambda args: (64, 1, 1))


def runaway(name: str, from_launch: int = 0, grid: tuple[int, int, int] = NEVER) -> Kernel:
    """A candidate that doubles ``x`` into ``y``, spinning from its launch ``from_launch`` (0:
    the first) on every copy of the buffers it runs on."""
    return Kernel(name, COUNTED, grid=lambda args: grid, constants={"FROM": from_launch})


def counted_set(name: str, *candidates: Kernel, n: int = N) -> TunableSet:
    return TunableSet(name, list(candidates), key=lambda args: {"n": n}, outputs=("y",))


def call(device) -> tuple[Args, np.ndarray]:
    x = np.arange(N, dtype=np.float32)
    return Args({"x": device.create_buffer(x.tobytes()), "y": device.create_buffer(size=4 * N),
                 "launches": device.create_buffer(size=16)}), x


def doubled(device, args: Args) -> np.ndarray:
    return np.frombuffer(device.read_buffer_sync(args.buffer("y")), dtype=np.float32)
