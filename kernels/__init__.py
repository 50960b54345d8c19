"""Kernel families for wgtune: WGSL candidate generators and the tunable sets built from them.

- :mod:`wgtune.kernels.matmul`: tiled f32 matrix multiply (set ``"matmul"``).
- :mod:`wgtune.kernels.bandwidth`: ``out = alpha * x + b``, a memory-bound stream (set ``"fma"``).
- :mod:`wgtune.kernels.demo`: the suite ``wgtune tune`` runs, with input builders and CPU references.

Standard library only, like the core: the same code runs natively and in Pyodide.
"""

from .bandwidth import fma_reference, fma_set
from .demo import DemoCase, demo_suite
from .matmul import matmul_reference, matmul_set

__all__ = ["DemoCase", "demo_suite", "fma_reference", "fma_set", "matmul_reference", "matmul_set"]
