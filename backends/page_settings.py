"""The settings a page may give its tuner (from its URL, ``/?policy=fixed``, or
``loadWgtune({settings})``), read as the ``WGTUNE_*`` variables are.

Pure Python: ``page.py`` reads them in Pyodide; tested natively too.
"""

from __future__ import annotations

import math
from typing import Any

from wgtune import Config, LogLevel
from wgtune.errors import ConfigError

from .js_errors import js_value

__all__ = ["PAGE_SETTINGS", "page_config", "settle_timeout"]

# What a page may set (from its URL, say ``/?policy=fixed``): how tunes sample, nothing that
# touches files or logs.
PAGE_SETTINGS = (
    "policy", "budget", "screen_budget", "max_samples", "tolerance", "confidence", "warmups", "samples", "min_sample",
    "time_limit", "checks", "wake",
)


def page_config(settings: dict) -> Config:
    """The page's Config from ``settings`` (names of PAGE_SETTINGS, values as text or numbers),
    read as the ``WGTUNE_*`` variables are; a bad name or value is a ConfigError naming it."""
    unknown = sorted(set(settings) - set(PAGE_SETTINGS))
    if unknown:
        raise ConfigError(f"unknown page setting(s) {', '.join(unknown)}; known: {', '.join(PAGE_SETTINGS)}")
    env = {f"WGTUNE_{name.upper()}": str(value) for name, value in settings.items()}
    try:
        return Config.from_env(env, log_level=LogLevel.DISABLED)
    except ConfigError as error:  # said as the page's setting, not as the variable it is read as
        text = str(error)
        for name in settings:
            text = text.replace(f"WGTUNE_{name.upper()}=", f"the page setting {name}=")
        raise ConfigError(text) from None


def settle_timeout(value: Any) -> float:
    """``settle``'s ``timeout`` (seconds, a finite number >= 0; JavaScript's ``undefined`` is the
    default's to give); a ConfigError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"settle: timeout is seconds, a finite number >= 0; got {js_value(value)}", field="timeout")
    return float(value)
