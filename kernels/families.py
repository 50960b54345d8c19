"""The registry of kernel families: every :class:`~wgtune.kernels.family.Family`, one line each.

The demo suite, the tuning farm's catalogues, the fleet collector and ``bench/kernels.py`` iterate
:data:`FAMILIES` and name no family themselves; a new family is a module declaring its ``Family``
and one line here (or :func:`register`, for one defined outside ``wgtune.kernels``). The order is
the order they are listed and tuned in (the demo suite's too).

Pure Python (standard library and wgtune's core), as everything in ``wgtune.kernels``: it also
runs in Pyodide.
"""

from __future__ import annotations

from wgtune.errors import ConfigError

from .bandwidth import FMA_FAMILY
from .family import Family
from .matmul import MATMUL_F16_FAMILY, MATMUL_FAMILY
from .reduction import ROW_MAX_FAMILY, ROW_SUM_FAMILY

__all__ = ["FAMILIES", "family_named", "family_names", "register"]

FAMILIES: list[Family] = [
    MATMUL_FAMILY,
    MATMUL_F16_FAMILY,
    FMA_FAMILY,
    ROW_SUM_FAMILY,
    ROW_MAX_FAMILY,
]
"""Every kernel family, in order. Read it when you need it (it is the list, not a copy of it):
a family registered later is seen by every caller from then on."""


def family_names() -> list[str]:
    """The set names of the registered families, in order."""
    return [family.name for family in FAMILIES]


def family_named(name: str, where: str = "") -> Family:
    """The registered family whose set is ``name``; a ConfigError naming the known ones otherwise
    (``where``, when given, starts the message: the file or option that named it)."""
    for family in FAMILIES:
        if family.name == name:
            return family
    prefix = f"{where}: " if where else ""
    raise ConfigError(f"{prefix}unknown set {name!r}; sets: {', '.join(family_names())}")


def register(family: Family) -> Family:
    """Add ``family`` to the registry (after the others) and return it; a ConfigError when a
    family of that set name is registered already (catalogues and reports name sets, so one
    name is one family)."""
    if not isinstance(family, Family):
        raise ConfigError(f"register() takes a Family, got {type(family).__name__}")
    if family.name in family_names():
        raise ConfigError(f"a family named {family.name!r} is registered already")
    FAMILIES.append(family)
    return family
