"""The search strategies by name: what ``Search(strategy=NAME, options={...})`` can name.

A strategy comes in two steps, so that its settings are checked when a set is made and not in
the middle of a tune:

1. **Configured**: ``register_strategy(name, factory)`` files a factory under ``name``; a
   ``Search`` calls ``factory(**options)`` once, at its own construction. The factory checks its
   options and raises :class:`~wgtune.errors.ConfigError` (``option_error`` words it) for a bad
   one; an option it does not take, or one it needs and was not given, is refused here before it
   is called, with the options it does take.
2. **Started**: for each tune, the configured strategy's ``start(pool, parameters, budget, seed)``
   gives a :class:`Strategy`, the object the tune's driver (``wgtune.tune.search_driver``) asks
   for candidates: ``propose(observed, count)``.

A factory is usually a frozen dataclass whose fields are its options (with defaults)::

    @register_strategy("first")
    @dataclass(frozen=True)
    class FirstStrategies:
        '''The candidates in the plan's order.'''
        def start(self, pool, parameters, budget, seed):
            return OrderStrategy(pool)

Pure: no device and no tune. ``tests/test_search_sweep.py`` sweeps every registered strategy
over recorded timings, so a new one is held to the same bar as the others.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ..errors import ConfigError

__all__ = [
    "Strategy",
    "StrategyFactory",
    "configure_strategy",
    "option_error",
    "register_strategy",
    "registered_strategies",
]


class Strategy(Protocol):
    """Proposes which candidates to measure next.

    ``observed`` maps each candidate index measured so far to its seconds per dispatch (None: it
    failed); the answer is up to ``count`` indices of the pool, none of them observed, none twice.
    An empty answer ends the search.
    """

    def propose(self, observed: Mapping[int, float | None], count: int) -> list[int]: ...


class StrategyFactory(Protocol):
    """A strategy with its options set: starts one :class:`Strategy` per tune.

    ``pool`` is the candidate indices the tune may measure (the plan's order, the set's default
    first); ``parameters[i]`` candidate ``i``'s configuration (``Kernel.configuration``, None where
    it has none); ``budget`` how many the tune measures; ``seed`` the search's seed.
    """

    def start(
        self, pool: Sequence[int], parameters: Sequence[Mapping[str, Any] | None], budget: int, seed: int
    ) -> Strategy: ...


_REGISTRY: dict[str, Callable[..., StrategyFactory]] = {}

F = TypeVar("F", bound=Callable[..., StrategyFactory])


def register_strategy(name: str, factory: F | None = None) -> Any:
    """File ``factory`` (a callable of keyword options giving a :class:`StrategyFactory`) under
    ``name``; as a decorator when ``factory`` is left out. A name already taken is refused."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a search strategy needs a non-empty name, got {name!r}")

    def register(made: F) -> F:
        if not callable(made):
            raise ConfigError(f"search strategy {name!r}: {made!r} is not a factory of its options")
        if name in _REGISTRY and _REGISTRY[name] is not made:
            raise ConfigError(f"search strategy {name!r} is registered already")
        _REGISTRY[name] = made
        return made

    return register if factory is None else register(factory)


def registered_strategies() -> tuple[str, ...]:
    """The registered strategies' names, in the order they were registered."""
    return tuple(_REGISTRY)


def configure_strategy(name: str, options: Mapping[str, Any]) -> StrategyFactory:
    """Strategy ``name`` with ``options`` set, checked (see the module doc)."""
    factory = _REGISTRY.get(name) if isinstance(name, str) else None
    if factory is None:
        raise ConfigError(f"search strategy {name!r} is not one of {', '.join(sorted(_REGISTRY))}")
    if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
        raise ConfigError(f"search strategy {name!r}: options must be a mapping of names to values, got {options!r}")
    known = _options_of(factory)
    if known is not None:
        unknown = sorted(set(options) - set(known))
        if unknown:
            takes = ", ".join(known) or "none"
            raise ConfigError(f"search strategy {name!r}: unknown option {unknown[0]!r} (its options: {takes})")
        missing = [option for option, required in known.items() if required and option not in options]
        if missing:
            raise ConfigError(f"search strategy {name!r}: option {missing[0]!r} is required")
    try:
        return factory(**options)
    except ConfigError:
        raise
    except (TypeError, ValueError) as error:
        raise ConfigError(f"search strategy {name!r}: {error}") from None


def option_error(strategy: str, option: str, value: Any, why: str) -> ConfigError:
    """The error for a bad option, worded the same for every strategy."""
    return ConfigError(f"search strategy {strategy!r}: option {option}={value!r}: {why}")


def _options_of(factory: Callable[..., Any]) -> dict[str, bool] | None:
    """The keyword options ``factory`` takes (name -> required), or None when it takes any."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    options: dict[str, bool] = {}
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            options[parameter.name] = parameter.default is inspect.Parameter.empty
    return options
