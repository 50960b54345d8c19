"""wgtune: an autotuner for WebGPU compute kernels.

For each problem (an autotune key) wgtune benchmarks a set of WGSL candidates on the device in
hand, picks the fastest that works, remembers it, and from then on runs it directly.

This package is the pure core: standard library only, the same in CPython and in Pyodide.
Devices and stores live in :mod:`wgtune.backends`; kernel families in :mod:`wgtune.kernels`.
"""

from .batch import Batch
from .config import Config, LogLevel, Pin
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
from .gpu.clock import clock_grain, grain_of, measure_clock_grain
from .gpu.device import Device, DeviceIdentity, DeviceLimits, Timing
from .key import Key, anchor
from .runner import run_inline, spawn_task
from .search.strategies import Search
from .sets.args import Args
from .sets.kernel import Group, Kernel
from .sets.space import Space
from .sets.tunable import PerKeySet, TunableSet
from .state import MISS, PENDING, Hit, Miss, Pending, TuneState, Unchecked
from .store.contract import Store
from .store.format import MemoryStore, StoredEntry
from .store.record import MemoryRecords, RecordEffect, Trial, TuneRecord
from .store.results import Measured, Stats
from .tune.events import TrialFinished, TuneFailedEvent, TuneFinished, TuneStarted
from .tune.outcome import TuneOutcome
from .tune.plan import Plan
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
    "PerKeySet",
    "Pin",
    "Plan",
    "RecordEffect",
    "Search",
    "Skip",
    "Space",
    "Stats",
    "Store",
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
