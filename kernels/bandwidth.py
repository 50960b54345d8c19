"""A memory-bound family: ``out[i] = alpha * x[i] + b[i]`` over long f32 arrays.

A pure function of its inputs (``out`` is never read), so running it again, as the benchmark
does, gives the same result. Call convention: buffers ``(x, b, out)`` at bindings 0, 1, 2, then
params ``(N, alpha)`` as a uniform at binding 3; ``alpha`` must be a Python float (an int would
be packed as a u32).

Candidates differ in the three things that decide how close a streaming kernel gets to memory
bandwidth:

- vector width: the arrays are bound as ``array<f32>``, ``array<vec2<f32>>`` or
  ``array<vec4<f32>>``. A vec-W binding only reaches the first ``N - N % W`` elements, so the
  key records the widest width that divides N (``"vec"``), and candidates wider than that are
  skipped by the plan (negative priority). A winner therefore never serves a call it cannot
  finish.
- elements (vectors) per invocation: 1 to 8, strided by the workgroup size so that neighbouring
  invocations always touch neighbouring words.
- workgroup size: 64 to 256.
- a *tail* (``_tail``): vec4 loads over the first ``N - N % 4`` elements, then a second stage of
  four invocations for the last 1-3 as f32. Planned only where 4 does not divide N (and N is
  past TAIL_MIN_N), where the plain vec4 candidates are skipped. On an H200 an odd N of 10^7
  reached 83% of torch with f32 candidates alone (3.21 vs 3.86 TB/s) and 96% with a tail
  (3.68 TB/s; ``bench/kernel_probe.py --full --only fma``, ``bench/results/h200-fma.txt``); at
  N = 1000003 the f32 candidates still won, and the tune picks per key.

The candidates are compiled with WebGPU's runtime checks: on an H200 leaving them out changed no
candidate's speed (unchecked / checked 0.99-1.01 over 10 sizes, ``bench/runtime_checks.py --full
--only fma``, ``bench/results/h200-runtime-checks.txt``).

Workgroups are laid out on a 2-D grid (row-major over ``num_workgroups.x``) because WebGPU
allows at most 65535 workgroups per dimension.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wgtune import Args, Kernel, TunableSet, anchor
from wgtune.key import Key

from .common import F32_BYTES, ceil_div, wrapped_grid
from .family import Family, Size
from .inputs import random_floats

__all__ = [
    "FMA_ALPHA",
    "FMA_FAMILY",
    "FMA_VARIANTS",
    "TAIL_MIN_N",
    "FmaVariant",
    "fma_kernel",
    "fma_key",
    "fma_reference",
    "fma_set",
    "fma_wgsl",
    "make_fma_args",
    "tail_wgsl",
    "widest_vector",
]

VECTOR_WIDTHS = (4, 2, 1)


def widest_vector(n: int) -> int:
    """The widest vector width (4, 2 or 1) that divides ``n``: the widest binding that covers it."""
    return next(width for width in VECTOR_WIDTHS if n % width == 0)


@dataclass(frozen=True)
class FmaVariant:
    """One candidate's shape: vector ``width``, vectors ``per_thread``, invocations per ``workgroup``."""

    width: int
    per_thread: int
    workgroup: int
    tail: bool = False

    def __post_init__(self) -> None:
        if self.width not in VECTOR_WIDTHS:
            raise ValueError(f"{self}: width must be one of {VECTOR_WIDTHS}")
        if self.tail and self.width == 1:
            raise ValueError(f"{self}: a tail follows vector loads (width 2 or 4)")
        if self.per_thread < 1 or not 1 <= self.workgroup <= 256:
            raise ValueError(f"{self}: per_thread must be >= 1 and workgroup within 1..256")

    @property
    def name(self) -> str:
        kind = "f32" if self.width == 1 else f"vec{self.width}"
        return f"{kind}_x{self.per_thread}_wg{self.workgroup}" + ("_tail" if self.tail else "")

    @property
    def elements_per_workgroup(self) -> int:
        return self.width * self.per_thread * self.workgroup


def fma_wgsl(variant: FmaVariant) -> str:
    """WGSL for one variant: workgroup ``w`` covers vectors ``[w * per_thread * wg, ...)``."""
    element = "f32" if variant.width == 1 else f"vec{variant.width}<f32>"
    span = variant.per_thread * variant.workgroup
    body = "".join(
        f"  let i{j} = base + {j * variant.workgroup}u;\n"
        f"  if (i{j} < count) {{ out[i{j}] = p.alpha * x[i{j}] + b[i{j}]; }}\n"
        for j in range(variant.per_thread)
    )
    return f"""\
@group(0) @binding(0) var<storage, read> x: array<{element}>;
@group(0) @binding(1) var<storage, read> b: array<{element}>;
@group(0) @binding(2) var<storage, read_write> out: array<{element}>;
struct Params {{ n: u32, alpha: f32 }}
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size({variant.workgroup}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {{
  let count = p.n / {variant.width}u;
  let group = wid.y * groups.x + wid.x;
  let base = group * {span}u + lane;
{body}}}
"""


TAIL_MIN_N = 4096
"""The smallest N (as keyed) on which tail candidates are planned: a vec4 binding needs 16 bytes
at least, and short arrays are a launch's cost whatever their loads (a chosen bound, not a
measured crossover: on the H200 the tail lost at 10^6 and won at 10^7)."""


def tail_wgsl(width: int) -> str:
    """The tail stage: the last ``N % width`` elements, as f32, one invocation each."""
    return f"""\
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
struct Params {{ n: u32, alpha: f32 }}
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size({width}, 1, 1)
fn main(@builtin(local_invocation_index) lane: u32) {{
  let i = p.n - p.n % {width}u + lane;
  if (i < p.n) {{ out[i] = p.alpha * x[i] + b[i]; }}
}}
"""


def _tail_priority(width: int):
    """Plan the candidate where ``width`` does not divide N (its plain twin is skipped there) and N
    is past TAIL_MIN_N; skip it elsewhere."""

    def priority(key: Key) -> int:
        fields = dict(key)
        return 0 if fields.get("vec", 1) % width != 0 and fields["n"] >= TAIL_MIN_N else -1

    return priority


def _vector_priority(width: int):
    """Skip (priority -1) the candidate on keys whose N its vector binding cannot cover."""

    def priority(key: Key) -> int:
        return 0 if dict(key).get("vec", 1) % width == 0 else -1

    return priority


def fma_kernel(variant: FmaVariant) -> Kernel:
    """The candidate for ``variant``, on a grid that wraps onto y past ``common.GRID_ROW`` workgroups."""

    def grid(args: Args) -> tuple[int, int, int]:
        return wrapped_grid(ceil_div(args.params[0], variant.elements_per_workgroup))

    if variant.tail:
        tail = Kernel(f"{variant.name}_rest", tail_wgsl(variant.width), grid=lambda args: (1, 1, 1),
                      workgroup_size=(variant.width, 1, 1))
        return Kernel(variant.name, fma_wgsl(variant), grid=grid, workgroup_size=(variant.workgroup, 1, 1),
                      priority=_tail_priority(variant.width), then=(tail,))
    return Kernel(
        variant.name,
        fma_wgsl(variant),
        grid=grid,
        workgroup_size=(variant.workgroup, 1, 1),
        priority=0 if variant.width == 1 else _vector_priority(variant.width),
    )


# Candidate 0 is the plainest: one f32 per invocation.
FMA_VARIANTS: tuple[FmaVariant, ...] = (
    FmaVariant(width=1, per_thread=1, workgroup=64),
    FmaVariant(width=1, per_thread=1, workgroup=256),
    FmaVariant(width=1, per_thread=4, workgroup=64),
    FmaVariant(width=1, per_thread=8, workgroup=256),
    FmaVariant(width=2, per_thread=1, workgroup=64),
    FmaVariant(width=2, per_thread=4, workgroup=128),
    FmaVariant(width=4, per_thread=1, workgroup=64),
    FmaVariant(width=4, per_thread=1, workgroup=256),
    FmaVariant(width=4, per_thread=2, workgroup=64),
    FmaVariant(width=4, per_thread=4, workgroup=64),
    FmaVariant(width=4, per_thread=8, workgroup=256),
    FmaVariant(width=4, per_thread=1, workgroup=256, tail=True),
    FmaVariant(width=4, per_thread=4, workgroup=64, tail=True),
)


def fma_key(args: Args) -> dict[str, object]:
    """N bucketed to a power of two, plus the widest vector width that divides the exact N."""
    n = args.params[0]
    return {"n": anchor(n), "dtype": "f32", "vec": widest_vector(n)}


def fma_set(variants: tuple[FmaVariant, ...] = FMA_VARIANTS) -> TunableSet:
    """The ``fma`` set. Each output is one rounding of ``alpha * x + b`` (fused or not)."""
    return TunableSet(
        "fma",
        [fma_kernel(variant) for variant in variants],
        key=fma_key,
        outputs=(2,),
        atol=1e-5,
        rtol=1e-5,
    )


def fma_reference(x: list[float], b: list[float], alpha: float) -> list[float]:
    """``alpha * x + b`` in pure Python (in double precision; compare with an f32 tolerance)."""
    return [alpha * xi + bi for xi, bi in zip(x, b, strict=True)]


# -- the family ------------------------------------------------------------------------------------

# The scale factor of the demo's fma calls (a float: params pack floats as f32, ints as u32).
FMA_ALPHA = 1.5


def make_fma_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(x, b, out)`` of ``N`` f32 with seeded inputs; params ``(N, FMA_ALPHA)``."""
    (n,) = size
    x = random_floats(n, seed=f"fma-x-{n}-{seed}")
    b = random_floats(n, seed=f"fma-b-{n}-{seed}")
    output = device.create_buffer(size=F32_BYTES * n)
    buffers = (device.create_buffer(x.tobytes()), device.create_buffer(b.tobytes()), output)
    return Args(buffers, (n, FMA_ALPHA))


def _fma_params(size: Size) -> tuple:
    return (size[0], FMA_ALPHA)


def _fma_check(inputs: Sequence[Sequence[float]], params: tuple) -> list[float]:
    x, b = inputs
    return fma_reference(list(x), list(b), params[1])


FMA_FAMILY = Family(
    name="fma",
    build=fma_set,
    dims=("N",),
    make_args=make_fma_args,
    reference=_fma_check,
    params=_fma_params,
    # Three lengths, one of them odd (100003: no vector width divides it).
    demo_sizes=((1 << 18,), (1 << 20,), (100_003,)),
)
"""The ``fma`` set in the registry (:mod:`wgtune.kernels.families`)."""
