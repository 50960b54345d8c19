"""The demo suite that ``wgtune tune`` runs: both kernel families on a few small problems.

Each :class:`DemoCase` is a tunable set, the problem sizes to tune it on, and ``make_args``,
which builds a call's :class:`~wgtune.Args` for one size on any device that has
``create_buffer(data)`` / ``create_buffer(size=...)`` (the native device, the browser's).
Inputs are pseudo-random but deterministic (a fixed seed per size), so two runs tune on the
same data. Sizes are small enough that tuning the whole suite on lavapipe (2 CPU cores) with
the default 2 warmups and 10 samples takes seconds, and one of each family's sizes is odd
(matmul 192 x 160 x 96 is not a multiple of the 64- and 128-wide tiles; fma 100003 of any
vector width), so the bounds checks are exercised.

Pure Python (standard library), as everything in ``wgtune.kernels``: it also runs in Pyodide.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from wgtune import Args, TunableSet

from .bandwidth import fma_reference, fma_set
from .inputs import RANDOM_BLOCK, random_floats
from .matmul import matmul_reference, matmul_set
from .reduction import make_reduction_args, reduction_set

__all__ = [
    "FMA_ALPHA",
    "RANDOM_BLOCK",
    "DemoCase",
    "demo_suite",
    "fma_reference",
    "make_fma_args",
    "make_matmul_args",
    "matmul_reference",
    "random_floats",
]

Size = tuple[int, ...]

# The scale factor of the demo's fma calls (a float: params pack floats as f32, ints as u32).
FMA_ALPHA = 1.5

MATMUL_SIZES: tuple[Size, ...] = ((128, 128, 128), (192, 160, 96))
FMA_SIZES: tuple[Size, ...] = ((1 << 18,), (1 << 20,), (100_003,))
ROW_SUM_SIZES: tuple[Size, ...] = ((512, 1024), (3, 20_001))
ROW_MAX_SIZES: tuple[Size, ...] = ((512, 1024),)


class DemoCase(NamedTuple):
    """One family of the demo: tune ``tunables`` on each of ``sizes``; ``make_args(device, size)``."""

    tunables: TunableSet
    sizes: tuple[Size, ...]
    make_args: Callable[[Any, Size], Args]


def make_matmul_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(A, B, C)`` for ``C[M, N] = A[M, K] @ B[K, N]`` with seeded inputs; params ``(M, N, K)``."""
    m, n, k = size
    a = random_floats(m * k, seed=f"matmul-a-{m}x{n}x{k}-{seed}")
    b = random_floats(k * n, seed=f"matmul-b-{m}x{n}x{k}-{seed}")
    output = device.create_buffer(size=4 * m * n)
    buffers = (device.create_buffer(a.tobytes()), device.create_buffer(b.tobytes()), output)
    return Args(buffers, (m, n, k))


def make_fma_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(x, b, out)`` of ``N`` f32 with seeded inputs; params ``(N, FMA_ALPHA)``."""
    (n,) = size
    x = random_floats(n, seed=f"fma-x-{n}-{seed}")
    b = random_floats(n, seed=f"fma-b-{n}-{seed}")
    output = device.create_buffer(size=4 * n)
    buffers = (device.create_buffer(x.tobytes()), device.create_buffer(b.tobytes()), output)
    return Args(buffers, (n, FMA_ALPHA))


def make_row_sum_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(x, out)`` for row sums of ``x[rows, cols]``, seeded; params ``(rows, cols)``
    (the two-pass candidates' partials are scratch the device makes)."""
    return make_reduction_args(device, size, "sum", seed)


def make_row_max_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(x, out)`` for row maxima of ``x[rows, cols]``, seeded; params ``(rows, cols)``."""
    return make_reduction_args(device, size, "max", seed)


def demo_suite() -> list[DemoCase]:
    """The cases ``wgtune tune`` (and the page) run: matmul (a square and an odd shape), fma
    (three lengths), row sums (many short rows, a few long ones), row maxima."""
    return [
        DemoCase(matmul_set(), MATMUL_SIZES, make_matmul_args),
        DemoCase(fma_set(), FMA_SIZES, make_fma_args),
        DemoCase(reduction_set("sum"), ROW_SUM_SIZES, make_row_sum_args),
        DemoCase(reduction_set("max"), ROW_MAX_SIZES, make_row_max_args),
    ]
