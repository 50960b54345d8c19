"""How far the matmul sets' outputs may be from the answer, for the output checks.

Candidates sum a call's K products in different orders (one chain, slices, K chunks added by
atomics or a second stage), so their f32 outputs differ by rounding, and that grows with K, not
with the output: each of the K additions rounds a partial sum whose size grows like sqrt(k), so
an output that comes out near zero still carries the rounding of partial sums in the hundreds.
Simulated in numpy on the seeded inputs (magnitudes in [0.5, 1), random signs), one chain
against two slices and against the exact sum, K of 4096 to 524288 (200 to 3,904 outputs each):
the largest difference was 5e-8 to 7.4e-8 times K, so :data:`ROUNDING_PER_K` (2e-7) leaves
almost three times that for outputs by the million. Measured on an H100 too: at K = 52036 four
two-slice tiles gave -0.152214 for an exact -0.151055 (1.2e-3 off, 2.2e-8 * K), which a fixed
``atol`` of 1e-3 called wrong. A kernel that drops or repeats a product errs by the product, 0.25
or more on these inputs: past ``atol`` for K up to about a million (``atol`` is 0.2 there); past
that a check sees only errors of many products, as f32 sums cannot tell one from rounding.
"""

from __future__ import annotations

import math

from wgtune import Args

__all__ = ["F16_OUTPUTS", "F16_PRODUCTS_TOLERANCE", "F32_TOLERANCE", "ROUNDING_PER_K"]

ROUNDING_PER_K = 2e-7
"""What each step along K may add to the absolute difference of two right outputs (the module doc)."""


def _k(args: Args) -> int:
    return int(args.params[2])  # the sets' params are (M, N, K)


def f32_atol(args: Args) -> float:
    """The ``matmul`` set's: 1e-3 for entries of order 1, plus the rounding along K."""
    return 1e-3 + ROUNDING_PER_K * _k(args)


def f16_atol(args: Args) -> float:
    """The ``matmul_f16`` set's: 1e-2 for entries near zero rounded to f16, plus the f32 sums'
    rounding along K."""
    return 1e-2 + ROUNDING_PER_K * _k(args)


def f16_products_atol(args: Args) -> float:
    """The ``matmul_f16_products`` set's: inputs rounded to f16 (2**-11 relative each) err like a
    random walk, about sqrt(K) * 7e-5 for entries of order 1 (4e-3 at K = 4096; the largest of
    millions five times that), so 5e-2 up to K of about 16384 and 4e-4 * sqrt(K) past it, plus
    the f32 sums' rounding along K."""
    k = _k(args)
    return max(5e-2, 4e-4 * math.sqrt(k)) + ROUNDING_PER_K * k


F32_TOLERANCE = {"atol": f32_atol, "rtol": 1e-3}
"""The ``matmul`` set's output checks: ``atol`` of the call's K (:func:`f32_atol`), ``rtol`` 1e-3."""
F16_OUTPUTS = {"output_type": "e", "atol": f16_atol, "rtol": 2e-3}
"""The ``matmul_f16`` set's: f16 outputs compared as values, an ulp or two apart (a driver fusing
one kernel's multiply-adds and not another's) is the same answer: ``rtol`` 2e-3 is two ulps of f16."""
F16_PRODUCTS_TOLERANCE = {"atol": f16_products_atol, "rtol": 5e-3}
"""The ``matmul_f16_products`` set's (:func:`f16_products_atol`); a wrong index or a K step left out
errs by a product, 0.25 or more."""
