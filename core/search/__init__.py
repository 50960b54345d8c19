"""The search wing: which candidates of a large parameter space a tune measures.

``registry`` files the strategies by name with their options (``register_strategy``);
``strategies`` holds the two built in (``"model"``, ``"random"``) and the
:class:`~wgtune.search.strategies.Search` a set carries; ``surrogate`` the model the model-based
strategy predicts from. Pure: no device, no tune; the driver that measures what a strategy
proposes is the tune wing's (``wgtune.tune.search_driver``).
"""

from .registry import (
    Strategy,
    StrategyFactory,
    configure_strategy,
    option_error,
    register_strategy,
    registered_strategies,
)
from .strategies import Search

__all__ = [
    "Search",
    "Strategy",
    "StrategyFactory",
    "configure_strategy",
    "option_error",
    "register_strategy",
    "registered_strategies",
]
