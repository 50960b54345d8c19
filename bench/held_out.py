"""Held-out shapes (issue 29): a fresh random draw per family for each benchmark run, seeded and printed.

A fixed list of shapes can be tuned to without meaning to; a draw the kernels never saw cannot.
:func:`draw` gives ``count`` shapes of a family from a seed, the same on any machine and Python
3 (``random.Random`` seeded with a string hashes it with SHA-512), so a run's shapes can be
named by its seed and drawn again. :func:`fresh_seed` is a new seed for a run that names none.

Sizes are drawn log-uniform (a matmul's M*N*K, split into M, N and K by random weights, so that
cubes and thin or flat shapes both come up) and kept where a crude model of an H200 puts the
kernel between :data:`SHORT_US` microseconds (a floor of 3 us a launch, matmul at 10 TFLOP/s, memory at 3 TB/s:
rough, but the draw is about kernels of that order, not exactly that long). With ``small``, tiny
sizes for a CPU adapter (lavapipe), where a bench must run in minutes.
"""

from __future__ import annotations

import math
import random
import secrets

__all__ = ["FAMILIES", "SHORT_US", "draw", "fresh_seed", "h200_microseconds"]

FAMILIES = ("matmul", "row_sum", "fma")
SHORT_US = (4.0, 30.0)  # the kernels drawn for a GPU: this long by the model, in microseconds
FLOOR_US, MATMUL_FLOPS, BYTES_PER_S = 3.0, 10e12, 3e12

# Log-uniform ranges: matmul M*N*K; row_sum columns and elements; fma elements.
GPU_RANGES = {"matmul": (2e6, 2e8), "row_sum": ((2, 8192), (300_000, 30_000_000)), "fma": (100_000, 10_000_000)}
SMALL_RANGES = {"matmul": (8**3, 64**3), "row_sum": ((2, 512), (2_000, 64_000)), "fma": (2_000, 64_000)}
MATMUL_SIDES = (8, 8192)  # no side of a drawn matmul outside these


def h200_microseconds(family: str, shape: tuple[int, ...]) -> float:
    """The crude model's time of ``family`` on ``shape``: the launch floor plus the work at the
    rate of the family's bound (FLOP or bytes read and written)."""
    if family == "matmul":
        m, n, k = shape
        return FLOOR_US + 2.0 * m * n * k / MATMUL_FLOPS * 1e6
    if family == "row_sum":
        rows, cols = shape
        return FLOOR_US + 4.0 * (rows * cols + rows) / BYTES_PER_S * 1e6
    if family == "fma":
        return FLOOR_US + 12.0 * shape[0] / BYTES_PER_S * 1e6
    raise ValueError(f"no model for family {family!r}: use one of {', '.join(FAMILIES)}")


def _log_uniform(rng: random.Random, low: float, high: float) -> int:
    return max(int(low), min(int(high), round(math.exp(rng.uniform(math.log(low), math.log(high))))))


def _one(rng: random.Random, family: str, small: bool) -> tuple[int, ...]:
    ranges = SMALL_RANGES if small else GPU_RANGES
    if family == "matmul":
        volume = math.log(_log_uniform(rng, *ranges["matmul"]))
        weights = [rng.uniform(0.15, 1.0) for _ in range(3)]
        return tuple(round(math.exp(volume * weight / sum(weights))) for weight in weights)
    if family == "row_sum":
        (low_cols, high_cols), (low, high) = ranges["row_sum"]
        cols = _log_uniform(rng, low_cols, high_cols)
        return max(1, _log_uniform(rng, low, high) // cols), cols
    return (_log_uniform(rng, *ranges["fma"]),)


def _fits(family: str, shape: tuple[int, ...], small: bool) -> bool:
    if family == "matmul" and not all(MATMUL_SIDES[0] <= side <= MATMUL_SIDES[1] for side in shape):
        return False
    if small:
        return True
    return SHORT_US[0] <= h200_microseconds(family, shape) <= SHORT_US[1]


def draw(family: str, count: int, seed: int, small: bool = False) -> list[tuple[int, ...]]:
    """``count`` distinct shapes of ``family`` (``matmul``: (M, N, K); ``row_sum``: (rows,
    cols); ``fma``: (n,)) drawn from ``seed``: each family its own stream, so adding a family or
    drawing more of one leaves the others' shapes as they were."""
    if family not in FAMILIES:
        raise ValueError(f"cannot draw shapes of {family!r}: use one of {', '.join(FAMILIES)}")
    rng = random.Random(f"{seed}:{family}:{'small' if small else 'gpu'}")
    found: list[tuple[int, ...]] = []
    for _ in range(10_000 * max(1, count)):
        if len(found) == count:
            return found
        shape = _one(rng, family, small)
        if shape not in found and _fits(family, shape, small):
            found.append(shape)
    raise RuntimeError(f"drew only {len(found)} of {count} {family} shapes in the range: the ranges are too narrow")


def fresh_seed() -> int:
    """A new seed for a run that names none: printed with the shapes, it draws them again."""
    return secrets.randbelow(1_000_000)
