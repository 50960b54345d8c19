"""The demo suite that ``wgtune tune`` runs: every registered family on its demo sizes.

Each :class:`DemoCase` is a tunable set, the problem sizes to tune it on, and ``make_args``,
which builds a call's :class:`~wgtune.Args` for one size on any device that has
``create_buffer(data)`` / ``create_buffer(size=...)`` (the native device, the browser's).
The cases are those of the registry (:data:`wgtune.kernels.families.FAMILIES`) that have
``demo_sizes``, in its order: matmul, fma, row sums, row maxima (``matmul_f16`` has none: many
adapters lack ``shader-f16``). Inputs are pseudo-random but deterministic (a fixed seed per
size), so two runs tune on the same data. Sizes are small enough that tuning the whole suite on
lavapipe (2 CPU cores) with the default 2 warmups and 10 samples takes seconds, and one of each
family's sizes is odd (matmul 192 x 160 x 96 is not a multiple of the 64- and 128-wide tiles;
fma 100003 of any vector width), so the bounds checks are exercised.

The input builders are the families' own (``make_matmul_args`` in :mod:`wgtune.kernels.matmul`,
``make_fma_args`` in :mod:`wgtune.kernels.bandwidth`, ...), named here too.

Pure Python (standard library), as everything in ``wgtune.kernels``: it also runs in Pyodide.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from wgtune import Args, TunableSet

from .bandwidth import FMA_ALPHA, fma_reference, make_fma_args
from .families import FAMILIES
from .family import Size
from .inputs import RANDOM_BLOCK, random_floats
from .matmul import make_matmul_args, matmul_reference
from .reduction import make_row_max_args, make_row_sum_args

__all__ = [
    "FMA_ALPHA",
    "RANDOM_BLOCK",
    "DemoCase",
    "demo_suite",
    "fma_reference",
    "make_fma_args",
    "make_matmul_args",
    "make_row_max_args",
    "make_row_sum_args",
    "matmul_reference",
    "random_floats",
]


class DemoCase(NamedTuple):
    """One family of the demo: tune ``tunables`` on each of ``sizes``; ``make_args(device, size)``."""

    tunables: TunableSet
    sizes: tuple[Size, ...]
    make_args: Callable[[Any, Size], Args]


def demo_suite() -> list[DemoCase]:
    """The cases ``wgtune tune`` (and the page) run: each registered family with demo sizes, its
    set built afresh, in the registry's order."""
    return [DemoCase(family.build(), family.demo_sizes, family.make_args) for family in FAMILIES if family.demo_sizes]
