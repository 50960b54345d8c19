"""Kernel families for wgtune: WGSL candidate generators and the tunable sets built from them.

- :mod:`wgtune.kernels.matmul`: tiled matrix multiply (sets ``"matmul"``, f32, and ``"matmul_f16"``).
- :mod:`wgtune.kernels.reduction`: sum and max along the last axis (sets ``"row_sum"``, ``"row_max"``).
- :mod:`wgtune.kernels.bandwidth`: ``out = alpha * x + b``, a memory-bound stream (set ``"fma"``).
- :mod:`wgtune.kernels.demo`: the suite ``wgtune tune`` and the page run, with input builders.

The WGSL generators of the bigger families are modules of their own (:mod:`~wgtune.kernels.matmul_wgsl`,
:mod:`~wgtune.kernels.matmul_vector` and :mod:`~wgtune.kernels.matmul_skinny`, with the candidate lists in
:mod:`~wgtune.kernels.matmul_tiles`; :mod:`~wgtune.kernels.reduction_wgsl` and
:mod:`~wgtune.kernels.reduction_masked`). Shared helpers:
:mod:`~wgtune.kernels.common` (ceiling division, the 2-D grid) and :mod:`~wgtune.kernels.inputs`
(deterministic pseudo-random inputs).

Standard library only, like the core: the same code runs natively and in Pyodide.
"""

from .bandwidth import fma_reference, fma_set
from .demo import DemoCase, demo_suite
from .matmul import matmul_f16_set, matmul_reference, matmul_set
from .reduction import reduction_set, row_max_reference, row_sum_reference

__all__ = [
    "DemoCase",
    "demo_suite",
    "fma_reference",
    "fma_set",
    "matmul_f16_set",
    "matmul_reference",
    "matmul_set",
    "reduction_set",
    "row_max_reference",
    "row_sum_reference",
]
