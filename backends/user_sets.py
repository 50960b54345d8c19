"""A user's own tunable sets for the farm and the collector: ``--sets module:function``.

``function`` is a function of an importable ``module`` that takes no arguments and returns the
sets as :class:`~wgtune.kernels.family.Family` records (an iterable of them, or one): the
record the registry already keeps for wgtune's own families, which says everything a farm and
a collector need (the set's name and ``build``, its ``dims``, ``make_args`` for a call of a size,
``params`` to plan keys without a device, ``demo_sizes`` as the default catalogue). The families
are added to this process's registry (:mod:`wgtune.kernels.families`), so catalogues, ``--only``
and the collector's accepted sets name them like wgtune's own. A farm's workers import the same
``module:function`` (it must be importable there too: installed, or on their ``PYTHONPATH``).

Loading the same ``module:function`` again (a second farm in one process) replaces the families
it registered before; a family whose name is a set registered otherwise (wgtune's ``matmul``, say)
is a ConfigError naming it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from wgtune.errors import ConfigError
from wgtune.kernels.families import FAMILIES, family_names
from wgtune.kernels.family import Family

__all__ = ["load_sets", "register_sets"]

# The families registered from a ``--sets`` function, by set name: replaced when loaded again.
_loaded: dict[str, Family] = {}


def load_sets(spec: str) -> list[Family]:
    """The families ``module:function`` returns (the function called once); a ConfigError
    saying what is wrong with the spec, the import, the call or what it returned."""
    module_name, _, function_name = (spec or "").partition(":")
    if not module_name or not function_name:
        raise ConfigError(f"--sets {spec!r}: expected module:function (a module on the Python path, "
                          f"a function of it returning Family records)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"--sets {spec}: cannot import {module_name!r}: {error}") from None
    except Exception as error:  # the module's own code failed as it ran
        raise ConfigError(f"--sets {spec}: importing {module_name!r} raised {type(error).__name__}: {error}") from error
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ConfigError(f"--sets {spec}: {module_name} has no function {function_name!r}")
    try:
        returned = function()
    except Exception as error:
        raise ConfigError(f"--sets {spec}: {function_name}() raised {type(error).__name__}: {error}") from error
    families = [returned] if isinstance(returned, Family) else returned
    if not isinstance(families, Iterable) or isinstance(families, str | bytes):
        raise ConfigError(f"--sets {spec}: expected Family records, got {type(returned).__name__}")
    families = list(families)
    wrong = [type(family).__name__ for family in families if not isinstance(family, Family)]
    if wrong or not families:
        raise ConfigError(f"--sets {spec}: expected a list of wgtune.kernels.family.Family, got "
                          + (", ".join(dict.fromkeys(wrong)) if wrong else "none"))
    names = [family.name for family in families]
    if len(set(names)) != len(names):
        raise ConfigError(f"--sets {spec}: two families named alike: {', '.join(names)}")
    return families


def register_sets(spec: str) -> list[Family]:
    """Load ``spec``'s families (:func:`load_sets`) into this process's registry and return them."""
    families = load_sets(spec)
    for family in families:
        before = _loaded.get(family.name)
        if before is not None and before in FAMILIES:
            FAMILIES[FAMILIES.index(before)] = family
        elif family.name in family_names():
            raise ConfigError(f"--sets {spec}: a set named {family.name!r} is registered already "
                              f"(sets: {', '.join(family_names())}); give yours another name")
        else:
            FAMILIES.append(family)
        _loaded[family.name] = family
    return families
