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

__all__ = ["FAMILIES", "SHORT_US", "draw", "draw_suite", "fresh_seed", "h200_microseconds"]

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


def log_uniform(rng: random.Random, low: float, high: float) -> int:
    """An integer from ``low`` to ``high``, log-uniform: every order of size as likely."""
    return max(int(low), min(int(high), round(math.exp(rng.uniform(math.log(low), math.log(high))))))


def _one(rng: random.Random, family: str, small: bool) -> tuple[int, ...]:
    ranges = SMALL_RANGES if small else GPU_RANGES
    if family == "matmul":
        volume = math.log(log_uniform(rng, *ranges["matmul"]))
        weights = [rng.uniform(0.15, 1.0) for _ in range(3)]
        return tuple(round(math.exp(volume * weight / sum(weights))) for weight in weights)
    if family == "row_sum":
        (low_cols, high_cols), (low, high) = ranges["row_sum"]
        cols = log_uniform(rng, low_cols, high_cols)
        return max(1, log_uniform(rng, low, high) // cols), cols
    return (log_uniform(rng, *ranges["fma"]),)


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


# The shape suite's draw (bench/shapes.py): sizes of any length, in classes issue 29 names.
THIN_MAX = {False: 64, True: 8}  # thin: M or N at most this (a GPU's sizes, lavapipe's)
FLAT_MAX = {False: 256, True: 16}  # flat: K at most this
SUITE_SIDES = {False: (512, 8192), True: (32, 256)}  # the long sides of thin and flat shapes
SUITE_VOLUME = {False: (1e7, 6.9e10), True: (8**3, 96**3)}  # M*N*K of the other shapes
REDUCTION_ELEMENTS = {False: (1_000_000, 270_000_000), True: (2_000, 64_000)}
REDUCTION_COLS = {False: (2, 65_536), True: (2, 2048)}
MATMUL_CLASSES = ("thin", "flat", "general")


def matmul_class(m: int, n: int, k: int, small: bool = False) -> str:
    """``thin`` (M or N at most 64), ``flat`` (K at most 256, M and N over 64), or ``general``
    (with ``small``, 8 and 16)."""
    if min(m, n) <= THIN_MAX[small]:
        return "thin"
    return "flat" if k <= FLAT_MAX[small] else "general"


def _suite_matmul(rng: random.Random, wanted: str, small: bool) -> tuple[int, int, int]:
    low, high = SUITE_SIDES[small]
    if wanted == "thin":
        short = log_uniform(rng, 1, THIN_MAX[small])
        long_side, k = log_uniform(rng, low, high), log_uniform(rng, low, high)
        return (short, long_side, k) if rng.random() < 0.5 else (long_side, short, k)
    if wanted == "flat":
        return log_uniform(rng, low, high), log_uniform(rng, low, high), log_uniform(rng, 4, FLAT_MAX[small])
    volume = math.log(log_uniform(rng, *SUITE_VOLUME[small]))
    weights = [rng.uniform(0.15, 1.0) for _ in range(3)]
    m, n, k = (round(math.exp(volume * weight / sum(weights))) for weight in weights)
    return m, n, k


def draw_suite(family: str, count: int, seed: int, small: bool = False) -> list[tuple[tuple[int, ...], str]]:
    """``count`` distinct shapes of ``family`` (``matmul``: (M, N, K); ``row_sum``: (rows, cols))
    of any length, each with its class, drawn from ``seed``: the shape suite's held-out part.
    Matmuls are drawn a class at a time in turn (thin, flat, general: log-uniform within each),
    so that each class issue 29 sets a target for has a third of the draw; reductions are drawn
    log-uniform in elements and columns, classed ``narrow`` (at most 64 columns) or ``wide``."""
    if family not in ("matmul", "row_sum"):
        raise ValueError(f"no suite draw of {family!r}: use matmul or row_sum")
    rng = random.Random(f"{seed}:{family}:suite:{'small' if small else 'gpu'}")
    found: list[tuple[tuple[int, ...], str]] = []
    for _ in range(10_000 * max(1, count)):
        if len(found) == count:
            return found
        if family == "matmul":
            shape = _suite_matmul(rng, MATMUL_CLASSES[len(found) % len(MATMUL_CLASSES)], small)
            fits = all(1 <= side <= MATMUL_SIDES[1] for side in shape)
            tag = matmul_class(*shape, small=small)
            fits = fits and tag == MATMUL_CLASSES[len(found) % len(MATMUL_CLASSES)]
        else:
            cols = log_uniform(rng, *REDUCTION_COLS[small])
            shape = (max(1, log_uniform(rng, *REDUCTION_ELEMENTS[small]) // cols), cols)
            tag, fits = ("narrow" if cols <= THIN_MAX[False] else "wide"), True
        if fits and shape not in [known for known, _ in found]:
            found.append((shape, tag))
    raise RuntimeError(f"drew only {len(found)} of {count} {family} suite shapes: the ranges are too narrow")


def fresh_seed() -> int:
    """A new seed for a run that names none: printed with the shapes, it draws them again."""
    return secrets.randbelow(1_000_000)
