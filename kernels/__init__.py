"""Kernel families for wgtune: WGSL candidate generators and the tunable sets built from them.

- :mod:`wgtune.kernels.matmul`: tiled matrix multiply (sets ``"matmul"``, f32, and ``"matmul_f16"``).
- :mod:`wgtune.kernels.reduction`: sum and max along the last axis (sets ``"row_sum"``, ``"row_max"``).
- :mod:`wgtune.kernels.bandwidth`: ``out = alpha * x + b``, a memory-bound stream (set ``"fma"``).
- :mod:`wgtune.kernels.families`: the registry, :data:`FAMILIES`: one :class:`Family` record per
  set (:mod:`wgtune.kernels.family`), which the demo suite, the farm, the collector and the benches
  iterate. A new family is a module declaring its ``Family`` and one line there.
- :mod:`wgtune.kernels.demo`: the suite ``wgtune tune`` and the page run, with input builders.

The bigger families are packages: :mod:`wgtune.kernels.matmul` (the sets; tile shapes in
``matmul.tile``, the WGSL generators in ``matmul.wgsl``, ``matmul.vector`` and ``matmul.skinny``,
split-K partials in ``matmul.partials``, the candidate lists in ``matmul.tiles``, keys and groups
in ``matmul.keys``) and
:mod:`wgtune.kernels.reduction` (the sets; WGSL in ``reduction.wgsl`` and ``reduction.masked``).
Shared helpers: :mod:`~wgtune.kernels.common` (ceiling division, the 2-D grid) and
:mod:`~wgtune.kernels.inputs` (deterministic pseudo-random inputs).

Standard library only, like the core: the same code runs natively and in Pyodide.
"""

from .bandwidth import fma_reference, fma_set
from .demo import DemoCase, demo_suite
from .families import FAMILIES, family_named, family_names, register
from .family import Family
from .matmul import matmul_f16_set, matmul_reference, matmul_set
from .reduction import reduction_set, row_max_reference, row_sum_reference

__all__ = [
    "FAMILIES",
    "DemoCase",
    "Family",
    "demo_suite",
    "family_named",
    "family_names",
    "fma_reference",
    "fma_set",
    "matmul_f16_set",
    "matmul_reference",
    "matmul_set",
    "reduction_set",
    "register",
    "row_max_reference",
    "row_sum_reference",
]
