"""The reduction families' inputs and exact outputs: seeded calls and pure-Python references.

Pure Python (standard library and wgtune's core), as everything in ``wgtune.kernels``: it also
runs in Pyodide, where the page checks candidates against these references.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Any

from wgtune import Args

from ..common import F32_BYTES
from ..family import Size
from ..inputs import random_floats
from .wgsl import reduction_op

__all__ = [
    "INPUT_BLOCK", "make_reduction_args", "make_row_max_args", "make_row_sum_args", "row_max_check",
    "row_max_reference", "row_sum_check", "row_sum_reference",
]


INPUT_BLOCK = 1 << 22  # values of x made from one seed by make_reduction_args


def make_reduction_args(device: Any, size: tuple[int, int], op: str, seed: int = 0) -> Args:
    """Buffers ``(x, out)`` for ``x[rows, cols]`` with seeded inputs; params ``(rows, cols)``. No
    scratch: the two-pass candidates' partials are the device's (``Kernel(scratch=...)``).

    The values are those of :func:`wgtune.kernels.inputs.random_floats` (magnitudes in [0.5, 1),
    random signs), made in blocks of ``INPUT_BLOCK`` values with a seed each: one call of it
    cannot make 2**26 values or more (``random.randbytes`` takes at most 2**31 bits).
    """
    reduction_op(op)
    rows, cols = size
    count = rows * cols
    x = array("f")
    for block, begin in enumerate(range(0, count, INPUT_BLOCK)):
        x.extend(random_floats(min(INPUT_BLOCK, count - begin), seed=f"reduce-{op}-{rows}x{cols}-{seed}-{block}"))
    buffers = (device.create_buffer(x.tobytes()), device.create_buffer(size=F32_BYTES * rows))
    return Args(buffers, (rows, cols))


def _rows(x: Sequence[float], rows: int, cols: int) -> list[Sequence[float]]:
    if len(x) < rows * cols:
        raise ValueError(f"x has {len(x)} values, {rows} x {cols} needs {rows * cols}")
    return [x[r * cols : (r + 1) * cols] for r in range(rows)]


def row_sum_reference(x: Sequence[float], rows: int, cols: int) -> list[float]:
    """Each row's sum, correctly rounded to a double (``math.fsum``); 0.0 for an empty row."""
    return [math.fsum(row) for row in _rows(x, rows, cols)]


def row_max_reference(x: Sequence[float], rows: int, cols: int) -> list[float]:
    """Each row's maximum; ``-inf`` for an empty row; NaN where the row has one (the kernels
    may or may not propagate it)."""
    result = []
    for row in _rows(x, rows, cols):
        if any(math.isnan(value) for value in row):
            result.append(math.nan)
        else:
            result.append(max(row, default=-math.inf))
    return result


def make_row_sum_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(x, out)`` for row sums of ``x[rows, cols]``, seeded; params ``(rows, cols)``
    (the two-pass candidates' partials are scratch the device makes)."""
    return make_reduction_args(device, size, "sum", seed)


def make_row_max_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(x, out)`` for row maxima of ``x[rows, cols]``, seeded; params ``(rows, cols)``."""
    return make_reduction_args(device, size, "max", seed)


def row_sum_check(inputs: Sequence[Sequence[float]], params: tuple) -> list[float]:
    return row_sum_reference(inputs[0], *params[:2])


def row_max_check(inputs: Sequence[Sequence[float]], params: tuple) -> list[float]:
    return row_max_reference(inputs[0], *params[:2])
