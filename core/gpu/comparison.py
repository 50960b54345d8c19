"""How two outputs of one kernel call compare: a few numbers, not the outputs.

An output check (``checks.py``) compares each candidate's output buffer with the judge's (the
set's reference, or the candidates that agree) element by element, as values of the output's
WGSL element type (:data:`ELEMENT_TYPES`): floats agree within ``atol + rtol * |want|`` (NaN
with NaN, an infinity only with itself), integers exactly unless a tolerance is given. What
comes back is a :class:`Comparison`: the largest absolute and relative errors, how many
elements disagree and the first of them. A WebGPU device reduces the two buffers to those
numbers on the GPU (``backends/compare_pass.py``), so nothing large is read back;
:func:`compare_bytes` is the same comparison on the host, the answer of a device that cannot.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

__all__ = ["ELEMENT_TYPES", "FLOAT_TYPES", "Comparison", "compare_bytes", "element_size"]

ELEMENT_TYPES = {"e": "f16", "f": "f32", "d": "f64", "b": "i8", "B": "u8", "h": "i16", "H": "u16", "i": "i32",
                 "I": "u32"}
"""The typecodes outputs are compared as (struct's), with the type each stands for."""
FLOAT_TYPES = frozenset("efd")
TINY = 1.1754944e-38
"""The smallest normal f32: a relative error is taken against at least this (no division by 0)."""


def element_size(typecode: str) -> int:
    return struct.calcsize(typecode)


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two outputs compared: ``count`` elements, ``mismatches`` of them beyond tolerance, the
    first at ``first`` (None when they agree) where the candidate gave ``got`` and the judge
    ``want``; the largest absolute and relative errors over every element (``math.inf`` where a
    NaN or an infinity disagrees)."""

    count: int
    mismatches: int
    first: int | None = None
    got: float | None = None
    want: float | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0

    @property
    def agree(self) -> bool:
        return self.mismatches == 0

    def describe(self) -> str:
        """``"12 of 4096 values differ; first at [17]: 0.5 vs 1.0; max abs error 0.7"``."""
        if self.agree:
            return f"all {self.count} values agree"
        text = f"{self.mismatches} of {self.count} values differ"
        if self.first is not None:
            text += f"; first at [{self.first}]: {_shown(self.got)} vs {_shown(self.want)}"
        return text + f"; max abs error {_shown(self.max_abs)}"


def _shown(value: float | None) -> str:
    if value is None:
        return "?"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return repr(value)
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def compare_bytes(got: bytes, want: bytes, typecode: str, atol: float, rtol: float) -> Comparison:
    """``got`` against ``want``, both read as little-endian values of ``typecode`` (the length of
    ``want`` is what is compared; ``got`` must hold at least as much): see the module doc."""
    size = element_size(typecode)
    count = len(want) // size
    a = struct.unpack_from(f"<{count}{typecode}", got)
    b = struct.unpack_from(f"<{count}{typecode}", want)
    exact = typecode not in FLOAT_TYPES and atol == 0 and rtol == 0
    mismatches, first, max_abs, max_rel = 0, None, 0.0, 0.0
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y or (math.isnan(x) and math.isnan(y)):
            continue
        if math.isfinite(x) and math.isfinite(y):
            error = float(abs(x - y))
            relative = error / max(abs(y), TINY)
            ok = not exact and error <= atol + rtol * abs(y)
        else:  # an infinity or a NaN against anything else: no tolerance admits it
            error = relative = math.inf
            ok = False
        max_abs, max_rel = max(max_abs, error), max(max_rel, relative)
        if not ok:
            mismatches += 1
            if first is None:
                first = i
    if first is None:
        return Comparison(count, 0, max_abs=max_abs, max_rel=max_rel)
    return Comparison(count, mismatches, first, a[first], b[first], max_abs, max_rel)
