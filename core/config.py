"""Settings, from the API or from the environment.

Environment variables (each overrides the default; a bad value raises ConfigError naming it):

==================== ==================================================================
``WGTUNE_LOG``        ``disabled`` | ``minimal`` (winner and top-3 medians) | ``full``
``WGTUNE_CACHE``      ``on`` | ``off``: off keeps winners in this process only
``WGTUNE_CACHE_DIR``  where the file store keeps its documents (native)
``WGTUNE_RECORDS``    a JSON Lines file that receives a record of every tune (native)
``WGTUNE_PIN``        pins: ``SET=CANDIDATE`` or ``SET[field=value,...]=CANDIDATE``, ``;``-separated
``WGTUNE_CHECKS``     ``1`` to check every candidate's output against the reference's
``WGTUNE_DRY_RUN``    ``1``: launches compile but do not execute; nothing is stored
``WGTUNE_WARMUPS``    untimed launches before sampling (default 2)
``WGTUNE_SAMPLES``    timed samples per candidate (default 10)
``WGTUNE_MIN_SAMPLE`` shortest timed sample in seconds (default 0.001): dispatches repeat in
                      one pass until a sample is at least this long
==================== ==================================================================
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from .errors import ConfigError
from .key import Key

__all__ = ["Config", "LogLevel", "Pin"]


class LogLevel(StrEnum):
    DISABLED = "disabled"
    MINIMAL = "minimal"
    FULL = "full"


@dataclass(frozen=True)
class Pin:
    """Run ``candidate`` for the keys of ``set`` that match ``fields`` (all keys when empty)."""

    set: str
    candidate: str
    fields: tuple[tuple[str, str], ...] = ()

    def matches(self, set_name: str, key: Key) -> bool:
        if set_name != self.set:
            return False
        values = {name: str(value) for name, value in key}
        return all(values.get(name) == value for name, value in self.fields)


_PIN = re.compile(r"^\s*(?P<set>[^\[\]=]+?)\s*(?:\[(?P<fields>[^\]]*)\])?\s*=\s*(?P<candidate>\S+)\s*$")

DEFAULT_WARMUPS = 2
DEFAULT_SAMPLES = 10
# One timed sample should span many ticks of the coarsest clock we meet (wall clock around a
# full sync costs tens of microseconds; browsers quantize GPU timestamps to ~100 us).
DEFAULT_MIN_SAMPLE = 1e-3


def parse_pins(text: str) -> tuple[Pin, ...]:
    pins = []
    for part in filter(str.strip, text.split(";")):
        match = _PIN.match(part)
        if match is None:
            raise ConfigError(
                f"WGTUNE_PIN: cannot read {part.strip()!r}; write SET=CANDIDATE or SET[k=v,...]=CANDIDATE"
            )
        fields = []
        for item in filter(str.strip, (match["fields"] or "").split(",")):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"WGTUNE_PIN: key filter {item.strip()!r} in {part.strip()!r} is not field=value")
            fields.append((name.strip(), value.strip()))
        pins.append(Pin(match["set"], match["candidate"], tuple(fields)))
    return tuple(pins)


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "on", "true", "yes"):
        return True
    if value in ("0", "off", "false", "no"):
        return False
    raise ConfigError(f"{name}={raw!r}: use on/off (or 1/0)")


def _number(env: Mapping[str, str], name: str, default, kind, least):
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: not a {kind.__name__}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r}: must be a finite number")
    if value < least:
        raise ConfigError(f"{name}={raw!r}: must be >= {least}")
    return value


@dataclass(frozen=True)
class Config:
    """How a tuner behaves. ``Config.from_env()`` reads the ``WGTUNE_*`` variables."""

    log_level: LogLevel = LogLevel.MINIMAL
    cache: bool = True
    cache_dir: str | None = None
    records: str | None = None
    pins: tuple[Pin, ...] = ()
    checks: bool = False
    dry_run: bool = False
    warmups: int = DEFAULT_WARMUPS
    samples: int = DEFAULT_SAMPLES
    min_sample: float = DEFAULT_MIN_SAMPLE

    def __post_init__(self) -> None:
        if not isinstance(self.log_level, LogLevel):
            try:
                object.__setattr__(self, "log_level", LogLevel(self.log_level))
            except ValueError:
                raise ConfigError(
                    f"log level {self.log_level!r}: use one of {', '.join(level.value for level in LogLevel)}"
                ) from None
        if self.samples < 1:
            raise ConfigError(f"samples must be >= 1, got {self.samples}")
        if self.warmups < 0:
            raise ConfigError(f"warmups must be >= 0, got {self.warmups}")
        if not (math.isfinite(self.min_sample) and self.min_sample >= 0):
            raise ConfigError(f"min_sample must be a finite number of seconds >= 0, got {self.min_sample}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides) -> Config:
        env = os.environ if env is None else env
        log = (env.get("WGTUNE_LOG") or LogLevel.MINIMAL.value).strip().lower()
        if log not in {level.value for level in LogLevel}:
            raise ConfigError(f"WGTUNE_LOG={log!r}: use disabled, minimal or full")
        config = cls(
            log_level=LogLevel(log),
            cache=_flag(env, "WGTUNE_CACHE", True),
            cache_dir=env.get("WGTUNE_CACHE_DIR") or None,
            records=env.get("WGTUNE_RECORDS") or None,
            pins=parse_pins(env.get("WGTUNE_PIN", "")),
            checks=_flag(env, "WGTUNE_CHECKS", False),
            dry_run=_flag(env, "WGTUNE_DRY_RUN", False),
            warmups=_number(env, "WGTUNE_WARMUPS", DEFAULT_WARMUPS, int, 0),
            samples=_number(env, "WGTUNE_SAMPLES", DEFAULT_SAMPLES, int, 1),
            min_sample=_number(env, "WGTUNE_MIN_SAMPLE", DEFAULT_MIN_SAMPLE, float, 0.0),
        )
        return replace(config, **overrides) if overrides else config

    def pin_for(self, set_name: str, key: Key) -> str | None:
        """The candidate pinned for this key, if any (the last matching pin wins)."""
        found = None
        for pin in self.pins:
            if pin.matches(set_name, key):
                found = pin.candidate
        return found
