"""Settings, from the API or from the environment.

Environment variables (each overrides the default; a bad value raises ConfigError naming it):

==================== ==================================================================
``WGTUNE_LOG``        ``disabled`` | ``minimal`` (winner and top-3 medians) | ``full``
``WGTUNE_CACHE``      ``on`` | ``off``: off keeps winners in this process only
``WGTUNE_CACHE_DIR``  where the file store keeps its documents (native)
``WGTUNE_RECORDS``    a JSON Lines file that receives a record of every tune (native)
``WGTUNE_BUNDLE``     a bundle file (``wgtune bundle``) whose winners seed the tuner (native)
``WGTUNE_PIN``        pins: ``SET=CANDIDATE`` or ``SET[field=value,...]=CANDIDATE``, ``;``-separated
``WGTUNE_CHECKS``     ``0`` to stop checking candidates' outputs (on by default: see checks.py)
``WGTUNE_DRY_RUN``    ``1``: launches compile but do not execute; nothing is stored
``WGTUNE_POLICY``     ``adaptive`` (default: round robin, early elimination, see adaptive.py) |
                      ``fixed`` (CubeCL's: ``WGTUNE_SAMPLES`` samples each, first plan batch)
``WGTUNE_BUDGET``     adaptive: seconds of re-sampling finalists before it settles (default 1)
``WGTUNE_SCREEN_BUDGET`` adaptive: seconds into a tune after which candidates outside the plan's
                      first batch are no longer screened (default 5), except each group's first
                      two (the first batch always is, but for a group pruned there)
``WGTUNE_MAX_SAMPLES`` adaptive: most samples one candidate gets (default 30)
``WGTUNE_CONFIDENCE`` the level of the winner's confidence interval (default 0.95)
``WGTUNE_TOLERANCE``  adaptive: candidates within this share of the leader count as equal
                      (default 0.01: sampling stops once a pick is sure to be within 1%)
``WGTUNE_WARMUPS``    untimed launches before sampling, the first launch one of them, fewer
                      once 25 ms are spent (default 2)
``WGTUNE_SAMPLES``    fixed: timed samples per candidate (default 10)
``WGTUNE_MIN_SAMPLE`` shortest timed sample in seconds (default 0.001): dispatches repeat in
                      one pass until a sample is at least this long
``WGTUNE_TIME_LIMIT`` seconds one launch of a candidate may take before it is a Timeout
                      (default: relative to the fastest candidate, see time_limit.py)
``WGTUNE_ISOLATE``    ``1``: natively, run each candidate's first launch in a child process
                      that is killed at the time limit (for kernels that may never return)
==================== ==================================================================
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from .errors import ConfigError
from .key import Key

__all__ = ["Config", "LogLevel", "Pin", "Policy"]


class _CandidateNames(Protocol):
    """What a pin is resolved against: a set's name and its candidates' indices by name (a
    TunableSet, declared structurally so the settings need not import the sets wing)."""

    name: str
    index_of: Mapping[str, int]


class Policy(StrEnum):
    """How a tune spends its time (see ``sampling.py``, ``adaptive.py`` and ``fixed.py``)."""

    ADAPTIVE = "adaptive"
    FIXED = "fixed"


class LogLevel(StrEnum):
    DISABLED = "disabled"
    MINIMAL = "minimal"
    FULL = "full"


@dataclass(frozen=True)
class Pin:
    """Run ``candidate`` for the keys of set ``set_name`` that match ``fields`` (all keys when empty)."""

    set_name: str
    candidate: str
    fields: tuple[tuple[str, str], ...] = ()

    def matches(self, set_name: str, key: Key) -> bool:
        if set_name != self.set_name:
            return False
        values = {name: str(value) for name, value in key}
        return all(values.get(name) == value for name, value in self.fields)


_PIN = re.compile(r"^\s*(?P<set>[^\[\]=]+?)\s*(?:\[(?P<fields>[^\]]*)\])?\s*=\s*(?P<candidate>\S+)\s*$")

DEFAULT_WARMUPS = 2
DEFAULT_SAMPLES = 10
# One timed sample should span many ticks of the coarsest clock we meet (wall clock around a
# full sync costs tens of microseconds; browsers quantize GPU timestamps to ~100 us).
DEFAULT_MIN_SAMPLE = 1e-3
DEFAULT_BUDGET = 1.0
DEFAULT_SCREEN_BUDGET = 5.0
# Seconds to bring an idle GPU's clock up before a tune samples: a cold H100 took 0.4-0.6 s of load
# (gpu/wake.py), a device's first wake about RAMP_SECONDS, a warm GPU's one pass (3 ms on the H100:
# bench/results/h100-wake-probe-session33.txt).
DEFAULT_WAKE = 1.0
DEFAULT_MAX_SAMPLES = 30
DEFAULT_CONFIDENCE = 0.95
DEFAULT_TOLERANCE = 0.01


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


def _time_limit(env: Mapping[str, str]) -> float | None:
    raw = (env.get("WGTUNE_TIME_LIMIT") or "").strip()
    if raw.lower() in ("", "auto"):
        return None
    seconds = _number(env, "WGTUNE_TIME_LIMIT", None, float, 0.0)
    if seconds <= 0:
        raise ConfigError(f"WGTUNE_TIME_LIMIT={raw!r}: must be seconds > 0, or auto")
    return seconds


@dataclass(frozen=True)
class Config:
    """How a tuner behaves. ``Config.from_env()`` reads the ``WGTUNE_*`` variables."""

    log_level: LogLevel = LogLevel.MINIMAL
    log_to_stderr: bool = False
    """Show the tune log on standard error when nobody configured logging (``log.py``): on when
    ``WGTUNE_LOG`` is set, so that asking for a log is enough to see it."""
    cache: bool = True
    cache_dir: str | None = None
    records: str | None = None
    bundle: str | None = None
    """A bundle file whose winners for this device seed the tuner (``open_tuner``, ``wgtune tune --bundle``)."""
    pins: tuple[Pin, ...] = ()
    checks: bool = True
    """Check every candidate's outputs before it may win (``checks.py``); off only by the user's
    choice (``checks=False``, ``WGTUNE_CHECKS=0``, the page's ``checks`` setting), said once in
    the log."""
    dry_run: bool = False
    warmups: int = DEFAULT_WARMUPS
    samples: int = DEFAULT_SAMPLES
    min_sample: float = DEFAULT_MIN_SAMPLE
    policy: Policy = Policy.ADAPTIVE
    budget: float = DEFAULT_BUDGET
    screen_budget: float = DEFAULT_SCREEN_BUDGET
    """Adaptive: seconds into a tune after which no candidate outside the plan's first batch is
    screened (compiled and launched) but each group's first two (its probes: every kind of
    candidate is still tried once); the first batch always is. What bounds a tune on a slow
    device (a CPU adapter in a browser compiles a large kernel in about a second)."""
    wake: float = DEFAULT_WAKE
    """Seconds a tune may spend bringing an idle GPU's clock up before it samples (``gpu/wake.py``);
    0 samples at whatever clock the GPU is at. A device's first wake also has up to half of this
    loaded on the GPU ahead of it, while the tune sets up (``wake.load``)."""
    max_samples: int = DEFAULT_MAX_SAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    tolerance: float = DEFAULT_TOLERANCE
    time_limit: float | None = None
    """Seconds one launch of a candidate may take; None: relative to the fastest (``time_limit.py``)."""
    isolate: bool = True
    """Natively, a tune's launches run in a tuning process, killed when a launch runs past the time
    limit (``backends/isolation.py``); off (``WGTUNE_ISOLATE=0``) for kernels trusted to return.
    The browser has no process to kill: its GPU watchdog stops a runaway there."""

    def __post_init__(self) -> None:
        for name, kind in (("log_level", LogLevel), ("policy", Policy)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                try:
                    object.__setattr__(self, name, kind(value))
                except ValueError:
                    raise ConfigError(
                        f"{name.replace('_', ' ')} {value!r}: use one of {', '.join(item.value for item in kind)}"
                    ) from None
        if self.samples < 1:
            raise ConfigError(f"samples must be >= 1, got {self.samples}")
        if self.warmups < 0:
            raise ConfigError(f"warmups must be >= 0, got {self.warmups}")
        if not (math.isfinite(self.min_sample) and self.min_sample >= 0):
            raise ConfigError(f"min_sample must be a finite number of seconds >= 0, got {self.min_sample}")
        if not (math.isfinite(self.budget) and self.budget >= 0):
            raise ConfigError(f"budget must be a finite number of seconds >= 0, got {self.budget}")
        if not (math.isfinite(self.screen_budget) and self.screen_budget >= 0):
            raise ConfigError(f"screen_budget must be a finite number of seconds >= 0, got {self.screen_budget}")
        if not (math.isfinite(self.wake) and self.wake >= 0):
            raise ConfigError(f"wake must be a finite number of seconds >= 0, got {self.wake}")
        if self.max_samples < 1:
            raise ConfigError(f"max_samples must be >= 1, got {self.max_samples}")
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be a level between 0 and 1 (0.95, say), got {self.confidence}")
        if self.time_limit is not None and not (
            isinstance(self.time_limit, (int, float)) and math.isfinite(self.time_limit) and self.time_limit > 0
        ):
            raise ConfigError(f"time_limit must be a finite number of seconds > 0 (or None), got {self.time_limit!r}")
        if not 0 <= self.tolerance < 1:
            raise ConfigError(f"tolerance must be a share in [0, 1) (0.01 for 1%), got {self.tolerance}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides) -> Config:
        env = os.environ if env is None else env
        log = (env.get("WGTUNE_LOG") or LogLevel.MINIMAL.value).strip().lower()
        if log not in {level.value for level in LogLevel}:
            raise ConfigError(f"WGTUNE_LOG={log!r}: use disabled, minimal or full")
        policy = (env.get("WGTUNE_POLICY") or Policy.ADAPTIVE.value).strip().lower()
        if policy not in {item.value for item in Policy}:
            raise ConfigError(f"WGTUNE_POLICY={policy!r}: use adaptive or fixed")
        config = cls(
            log_level=LogLevel(log),
            log_to_stderr=bool(env.get("WGTUNE_LOG")),
            policy=Policy(policy),
            budget=_number(env, "WGTUNE_BUDGET", DEFAULT_BUDGET, float, 0.0),
            screen_budget=_number(env, "WGTUNE_SCREEN_BUDGET", DEFAULT_SCREEN_BUDGET, float, 0.0),
            wake=_number(env, "WGTUNE_WAKE", DEFAULT_WAKE, float, 0.0),
            max_samples=_number(env, "WGTUNE_MAX_SAMPLES", DEFAULT_MAX_SAMPLES, int, 1),
            confidence=_number(env, "WGTUNE_CONFIDENCE", DEFAULT_CONFIDENCE, float, 0.5),
            tolerance=_number(env, "WGTUNE_TOLERANCE", DEFAULT_TOLERANCE, float, 0.0),
            cache=_flag(env, "WGTUNE_CACHE", True),
            cache_dir=env.get("WGTUNE_CACHE_DIR") or None,
            records=env.get("WGTUNE_RECORDS") or None,
            bundle=env.get("WGTUNE_BUNDLE") or None,
            pins=parse_pins(env.get("WGTUNE_PIN", "")),
            checks=_flag(env, "WGTUNE_CHECKS", True),
            dry_run=_flag(env, "WGTUNE_DRY_RUN", False),
            warmups=_number(env, "WGTUNE_WARMUPS", DEFAULT_WARMUPS, int, 0),
            samples=_number(env, "WGTUNE_SAMPLES", DEFAULT_SAMPLES, int, 1),
            min_sample=_number(env, "WGTUNE_MIN_SAMPLE", DEFAULT_MIN_SAMPLE, float, 0.0),
            time_limit=_time_limit(env),
            isolate=_flag(env, "WGTUNE_ISOLATE", True),
        )
        return replace(config, **overrides) if overrides else config

    def pinned_index(self, tunables: _CandidateNames, key: Key) -> int | None:
        """The index of the candidate pinned for this key of ``tunables``, if any; a ConfigError
        when the pin names no candidate of the set."""
        pinned = self.pin_for(tunables.name, key)
        if pinned is None:
            return None
        index = tunables.index_of.get(pinned)
        if index is None:
            raise ConfigError(
                f"pin for {tunables.name} [{key}] names {pinned!r}, which is not a candidate; "
                f"candidates: {', '.join(tunables.index_of)}"
            )
        return index

    def pin_for(self, set_name: str, key: Key) -> str | None:
        """The candidate pinned for this key, if any (the last matching pin wins)."""
        found = None
        for pin in self.pins:
            if pin.matches(set_name, key):
                found = pin.candidate
        return found
