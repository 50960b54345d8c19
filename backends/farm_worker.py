"""What a tuning farm's worker runs: one adapter opened once, one catalogue job tuned, its winner handed back.

A farm (:mod:`wgtune.backends.farm`) spreads the (set, key) tunes of a catalogue over Dask
workers, one worker process per GPU adapter. A worker opens the adapter at the index in its
environment (:data:`ADAPTER_ENV`: the local cluster sets it per worker; a worker started by hand
on another node is given it the same way; 0 when unset) on its first job, and keeps that device
and its tuner for the life of the process, so that later jobs reuse the compiled candidates.

A job tunes one key with nothing stored on the worker (no shared disk is assumed) and answers a
plain dict (:func:`tune_job`): the key's :class:`~wgtune.store.format.StoredEntry` as JSON text and the
namespace of the worker's device, for the client to merge into its own store. A failure of the
tune itself (no valid kernel, a call the set rejects) is an answer too, ``error`` naming it: the
client reports it for that job, and Dask does not try it again. Anything else raises, and Dask
retries it (``farm.py``).

The sets a catalogue may name are the registry's (:data:`wgtune.kernels.families.FAMILIES`): a
job's key is planned from its family's params for the size (no device), and its call is built by
the family's ``make_args``, on the worker's device. A worker resolves a job's set by name in its
own registry, so a family registered only in the client's process is unknown to the workers.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from wgtune.config import Config
from wgtune.errors import ConfigError, WgtuneError
from wgtune.kernels.families import family_named
from wgtune.kernels.family import Family, Size
from wgtune.key import Key, KeyMemo
from wgtune.sets.tunable import TunableSet
from wgtune.store.format import canonical_namespace, namespace_for
from wgtune.tuner import Tuner

__all__ = [
    "ADAPTER_ENV", "FarmJob", "IgnoreInterrupts", "family_set", "tune_job", "worker_adapter", "worker_identity",
]

ADAPTER_ENV = "WGTUNE_FARM_ADAPTER"
"""The environment variable naming a worker's adapter: an index of ``native.indexed_adapters()``."""

# The sets of this process, by family, each built once (a worker's tuner keeps compiling into them).
_sets: dict[Family, TunableSet] = {}


def family_set(name: str) -> TunableSet:
    """The set of the registered family ``name``, built on first use and kept for the process; a
    ConfigError naming the known sets for a name the registry does not have."""
    family = family_named(name)
    tunables = _sets.get(family)
    if tunables is None:
        tunables = _sets[family] = family.build()
    return tunables


@dataclass(frozen=True)
class FarmJob:
    """One tune of a farm: set ``set_name`` on a call of ``size``, whose key the client planned as ``key``."""

    set_name: str
    size: Size
    key: Key

    @classmethod
    def plan(cls, set_name: str, size: Size) -> FarmJob:
        """The job of ``size`` in ``set_name``, its key worked out from the call's params alone."""
        family = family_named(set_name)
        size = tuple(size)
        return cls(set_name, size, KeyMemo().key(family_set(set_name), family.key_args(size)))

    @property
    def label(self) -> str:
        return f"{self.set_name} {'x'.join(map(str, self.size))}"


# This process's device and tuner: made on the first job, kept for the next ones (a Dask worker
# runs one job at a time: threads_per_worker=1).
_device: Any = None
_tuner: Tuner | None = None


def worker_adapter() -> int:
    """This worker's adapter index, from :data:`ADAPTER_ENV` (0 when unset); a ConfigError when it is not an index."""
    text = os.environ.get(ADAPTER_ENV, "0").strip() or "0"
    try:
        index = int(text)
    except ValueError:
        index = -1
    if index < 0:
        raise ConfigError(f"{ADAPTER_ENV}={text!r} is not an adapter index (0, 1, ...)")
    return index


def _worker_tuner(config: Config) -> Tuner:
    """The tuner of this process on its adapter, made once (again over the same device when a
    farm brings another config), storing nothing (the client keeps the winners)."""
    global _device, _tuner
    if _device is None:
        from .native import NativeDevice  # wgpu is loaded where a device is opened, not by the client

        _device = NativeDevice.open(adapter_index=worker_adapter())
    if _tuner is None or _tuner.config != config:
        guard = None
        if config.isolate:
            from .isolation import ChildLaunchGuard

            guard = ChildLaunchGuard(_device)
        _tuner = Tuner(_device, store=None, config=config, guard=guard)
    return _tuner


def worker_identity(config: Config) -> dict:
    """This worker's adapter, device and namespace (its device opened now: a bad adapter index
    fails here, before any job), and its process id."""
    tuner = _worker_tuner(config)
    return {"adapter": worker_adapter(), "device": _device_name(tuner),
            "namespace": namespace_for(tuner.device.identity), "pid": os.getpid()}


class IgnoreInterrupts(WorkerPlugin):
    """Makes a worker process deaf to SIGINT. Ctrl-C in a terminal reaches every process of its
    group, a local cluster's workers too; the client is the one to act on it (cancel the jobs,
    close the cluster, which stops the workers), and a worker that died of it meanwhile would
    only print its traceback and have its job run again."""

    name = "wgtune-ignore-interrupts"

    def setup(self, worker: Any) -> None:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():  # where Python handles signals
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _device_name(tuner: Tuner) -> str:
    """The device as a person tells it apart: its name and its backend (one GPU may be offered
    through Vulkan and OpenGL, two namespaces)."""
    identity = tuner.device.identity
    return f"{identity.device} ({identity.backend})"


def _worker_name() -> str:
    try:
        from distributed import get_worker

        worker = get_worker()
        return str(worker.name)
    except (ImportError, ValueError):  # called outside a Dask worker (a test, a single process)
        return f"pid {os.getpid()}"


def tune_job(job: FarmJob, config: Config) -> dict:
    """Tune ``job`` on this worker's adapter, afresh (a winner this process found before is
    forgotten first: the client decides what to tune). Answers ``job`` (its label), ``worker``,
    ``adapter``, ``device``, ``namespace`` (canonical text), ``entry`` (the StoredEntry's JSON
    text, None on failure), ``error`` (None, or why the tune failed) and ``seconds`` (the job's
    time on the worker, the device's opening included on its first job)."""
    started = time.perf_counter()
    answer: dict[str, Any] = {"job": job.label, "worker": _worker_name(), "adapter": None, "device": None,
                              "namespace": None, "entry": None, "error": None}
    try:
        tuner = _worker_tuner(config)
        answer.update(adapter=worker_adapter(), device=_device_name(tuner),
                      namespace=canonical_namespace(namespace_for(tuner.device.identity)))
        answer["entry"] = _tune(tuner, job)
    except WgtuneError as error:
        answer["error"] = f"{type(error).__name__}: {error}"
    answer["seconds"] = time.perf_counter() - started
    return answer


def _tune(tuner: Tuner, job: FarmJob) -> str:
    tunables = family_set(job.set_name)
    call = family_named(job.set_name).make_args(tuner.device, job.size)
    key = tuner.key(tunables, call)
    if key != job.key:
        raise ConfigError(f"{job.label}: the call's key is [{key}], the catalogue planned [{job.key}] "
                          f"(the family's params and its calls disagree)")
    tuner.forget(tunables, key)
    tuner.check_tune(tunables, key, call)  # natively the tune runs here; a failure raises
    entry = tuner.cache.entry(tunables.for_key(key), key)
    if entry is None:  # not expected after a tune that returned: said rather than lost
        raise ConfigError(f"{job.label}: the tune finished without an entry for [{key}]")
    return json.dumps(entry.to_json())
