"""wgtune: an autotuner for WebGPU compute kernels.

For each problem (an autotune key) wgtune benchmarks a set of WGSL candidates on the device in
hand, picks the fastest that works, remembers it, and from then on runs it directly.

This package is the pure core: standard library only, the same in CPython and in Pyodide.
Devices and stores live in :mod:`wgtune.backends`; kernel families in :mod:`wgtune.kernels`.
"""

from .args import Args
from .batch import Batch
from .clock import clock_grain, grain_of, measure_clock_grain
from .config import Config, LogLevel, Pin
from .device import Device, DeviceIdentity, DeviceLimits, Timing
from .errors import (
    CandidateError,
    ConfigError,
    DeviceLost,
    IllegalTransition,
    InvalidSamples,
    KernelError,
    Launch,
    LaunchRefused,
    Mismatch,
    NoValidKernelFound,
    Skip,
    StoreError,
    Timeout,
    TuneFailed,
    Unknown,
    WgtuneError,
)
from .events import TrialFinished, TuneFailedEvent, TuneFinished, TuneStarted
from .key import Key, anchor
from .outcome import TuneOutcome
from .plan import Plan
from .record import MemoryRecords, RecordEffect, Trial, TuneRecord
from .results import Measured, Stats
from .runner import run_inline, spawn_task
from .search import Search
from .space import Space
from .state import MISS, PENDING, Hit, Miss, Pending, TuneState, Unchecked
from .store import MemoryStore, StoredEntry
from .tunable import Group, Kernel, TunableSet
from .tuner import Tuner
from .version import __version__

__all__ = [
    "MISS",
    "PENDING",
    "Args",
    "Batch",
    "CandidateError",
    "Config",
    "ConfigError",
    "Device",
    "DeviceIdentity",
    "DeviceLimits",
    "DeviceLost",
    "Group",
    "Hit",
    "IllegalTransition",
    "InvalidSamples",
    "Kernel",
    "KernelError",
    "Key",
    "Launch",
    "LaunchRefused",
    "LogLevel",
    "Measured",
    "MemoryRecords",
    "MemoryStore",
    "Mismatch",
    "Miss",
    "NoValidKernelFound",
    "Pending",
    "Pin",
    "Plan",
    "RecordEffect",
    "Search",
    "Skip",
    "Space",
    "Stats",
    "StoreError",
    "StoredEntry",
    "Timeout",
    "Timing",
    "Trial",
    "TrialFinished",
    "TunableSet",
    "TuneFailed",
    "TuneFailedEvent",
    "TuneFinished",
    "TuneOutcome",
    "TuneRecord",
    "TuneStarted",
    "TuneState",
    "Tuner",
    "Unchecked",
    "Unknown",
    "WgtuneError",
    "__version__",
    "anchor",
    "clock_grain",
    "grain_of",
    "measure_clock_grain",
    "run_inline",
    "spawn_task",
]
