"""What a tuning farm's worker runs: its GPU opened once, one catalogue job tuned at a time, its winner handed back.

A farm (:mod:`wgtune.backends.farm`) spreads the (set, key, device type) tunes of a catalogue
over Dask workers, one worker process per GPU adapter. The client registers :class:`FarmWorker`
(a Dask worker plugin) on every worker, those there and those that join later: it opens the
worker's adapter (:func:`worker_adapter`: :data:`ADAPTER_ENV` when set, else the number that ends
the worker's name, so ``dask worker --nworkers 2 --name gpu`` gives ``gpu-0`` adapter 0 and
``gpu-1`` adapter 1; else 0), and announces the device type as a Dask worker *resource*
(:func:`device_resource`: one per device namespace), one unit of it. The client submits each job
needing one unit of its device type's resource: only workers of that type run it, and each runs
one at a time, whatever its ``--nthreads`` (a process lock, :data:`_one_tune`, makes sure). A
worker whose adapter does not open announces nothing, and so is given no jobs; the client names
it and why (:func:`worker_state`).

A job tunes one key with nothing stored on the worker (no shared disk is assumed) and answers a
plain dict (:func:`tune_job`): the key's :class:`~wgtune.store.format.StoredEntry` as JSON text and the
namespace of the worker's device, for the client to merge into its own store. A failure of the
tune itself (no valid kernel, a call the set rejects) is an answer too, ``error`` naming it: the
client reports it for that job, and Dask does not try it again. A device lost mid-job retires its
worker (its resource taken back, the worker closed: its jobs go to the others of its type) and the
job raises, to run again elsewhere. Anything else raises, and Dask retries it (``farm.py``).

The sets a catalogue may name are the registry's (:data:`wgtune.kernels.families.FAMILIES`) and
the user's ``--sets module:function`` (:mod:`wgtune.backends.user_sets`, imported by the plugin on
each worker): a job's key is planned from its family's params for the size (no device), and its
call is built by the family's ``make_args``, on the worker's device.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from wgtune import __version__
from wgtune.config import Config
from wgtune.errors import ConfigError, DeviceLost, WgtuneError
from wgtune.kernels.families import family_named
from wgtune.kernels.family import Family, Size
from wgtune.key import Key, KeyMemo
from wgtune.sets.tunable import TunableSet
from wgtune.store.format import canonical_namespace, namespace_for
from wgtune.tuner import Tuner

__all__ = [
    "ADAPTER_ENV", "FarmJob", "FarmWorker", "IgnoreInterrupts", "WorkerRetired", "device_resource", "family_set",
    "tune_job", "worker_adapter", "worker_identity", "worker_state",
]

ADAPTER_ENV = "WGTUNE_FARM_ADAPTER"
"""The environment variable naming a worker's adapter: an index of ``native_adapters.indexed_adapters()``."""

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


# This process's device and tuner: made on the first use, kept for the next jobs. One tune at a
# time in a process (a worker of 2 threads would otherwise time two tunes against each other).
_device: Any = None
_tuner: Tuner | None = None
_one_tune = threading.Lock()
_state: dict[str, Any] = {}  # what FarmWorker found at setup (worker_state answers it)

RESOURCE_PREFIX = "wgtune-device-"
"""A device type's Dask worker resource: this, then a digest of its namespace (:func:`device_resource`)."""
_NAME_NUMBER = re.compile(r"(\d+)$")


def device_resource(namespace: dict | str) -> str:
    """The Dask resource naming a device type: the workers of that device announce one unit of
    it, and its jobs ask for one (the same text on every machine for the same namespace)."""
    text = namespace if isinstance(namespace, str) else canonical_namespace(namespace)
    return RESOURCE_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:16]


def worker_adapter(name: object = None) -> int:
    """This worker's adapter index: :data:`ADAPTER_ENV` when set, else the number that ends the
    worker's ``name`` (``gpu1``, ``gpu-1``: what ``dask worker --name gpu --nworkers N`` gives),
    else 0; a ConfigError when the variable is not an index."""
    text = os.environ.get(ADAPTER_ENV, "").strip()
    if not text:
        found = _NAME_NUMBER.search(name) if isinstance(name, str) and "://" not in name else None
        return int(found.group(1)) if found else 0
    try:
        index = int(text)
    except ValueError:
        index = -1
    if index < 0:
        raise ConfigError(f"{ADAPTER_ENV}={text!r} is not an adapter index (0, 1, ...)")
    return index


def _worker_device(adapter: int | None = None) -> Any:
    """This process's device, opened on the first call (at ``adapter``, or this worker's)."""
    global _device
    if _device is None:
        from .native import NativeDevice  # wgpu is loaded where a device is opened, not by the client

        _device = NativeDevice.open(adapter_index=worker_adapter(_dask_worker_name()) if adapter is None else adapter)
    return _device


def _worker_tuner(config: Config) -> Tuner:
    """The tuner of this process on its adapter, made once (again over the same device when a
    farm brings another config), storing nothing (the client keeps the winners)."""
    global _tuner
    _worker_device()
    if _tuner is None or _tuner.config != config:
        guard = None
        if config.isolate:
            from .isolation import WorkerGuard

            guard = WorkerGuard(_device, time_limit=config.time_limit)
        _tuner = Tuner(_device, store=None, config=config, guard=guard)
    return _tuner


def worker_identity(config: Config) -> dict:
    """This worker's adapter, device and namespace (its device opened now: a bad adapter index
    fails here, before any job), and its process id."""
    tuner = _worker_tuner(config)
    return {"adapter": worker_adapter(_dask_worker_name()), "device": _device_name(tuner.device),
            "namespace": namespace_for(tuner.device.identity), "pid": os.getpid()}


def probe(name: object, sets: str | None = None) -> dict:
    """This process as a farm worker: its name, adapter, device, namespace, resource, wgtune
    version and pid, or ``error`` (why it cannot tune: no adapter, a ``--sets`` that does not
    import) with ``resource`` None. Opens the device (once per process)."""
    state: dict[str, Any] = {"name": str(name), "adapter": None, "device": None, "namespace": None,
                             "resource": None, "error": None, "wgtune": __version__, "pid": os.getpid()}
    try:
        if sets:
            from .user_sets import register_sets

            register_sets(sets)
        state["adapter"] = worker_adapter(name)
        device = _worker_device(state["adapter"])
        namespace = namespace_for(device.identity)
        state.update(device=_device_name(device), namespace=namespace, resource=device_resource(namespace))
    except Exception as error:  # anything that keeps this worker from tuning: said, not raised
        state["error"] = f"{type(error).__name__}: {error}"
    return state


class FarmWorker(WorkerPlugin):
    """Sets a Dask worker up for a farm: the user's sets imported (``sets``: ``module:function``),
    its GPU opened, its device type announced as one unit of :func:`device_resource` (nothing
    announced when its GPU does not open: it is given no jobs). Registered by the client on every
    worker, those that join later too."""

    name = "wgtune-farm"
    idempotent = False

    def __init__(self, sets: str | None = None) -> None:
        self.sets = sets

    async def setup(self, worker: Any) -> None:
        state = probe(worker.name, self.sets)
        state["nthreads"] = worker.state.nthreads
        _state.clear()
        _state.update(state)
        stale = {resource: 0 for resource in worker.state.total_resources
                 if resource.startswith(RESOURCE_PREFIX) and resource != state["resource"]}
        if state["resource"] is not None or stale:
            await worker.set_resources(**stale, **({state["resource"]: 1} if state["resource"] else {}))


def worker_state() -> dict:
    """What :class:`FarmWorker` found on this worker (empty before it ran)."""
    return dict(_state)


class WorkerRetired(RuntimeError):
    """A job's worker lost its device: the worker is retired, the job runs again on another."""


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


def _device_name(device: Any) -> str:
    """The device as a person tells it apart: its name and its backend (one GPU may be offered
    through Vulkan and OpenGL, two namespaces)."""
    identity = device.identity
    return f"{identity.device} ({identity.backend})"


def _dask_worker_name() -> str | None:
    """The Dask worker's name, or None outside a Dask worker (a test, a single process): only a
    worker's own name may choose its adapter."""
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return None


def _worker_label() -> str:
    """Who ran a job, for the report: the Dask worker's name, else this process."""
    name = _dask_worker_name()
    return name if name is not None else f"pid {os.getpid()}"


def tune_job(job: FarmJob, config: Config, resource: str | None = None) -> dict:
    """Tune ``job`` on this worker's adapter, afresh (a winner this process found before is
    forgotten first: the client decides what to tune), one tune at a time in this process.
    ``resource`` is the device type the client meant it for (:func:`device_resource`): a worker
    of another type raises (Dask runs it again elsewhere). Answers ``job`` (its label),
    ``worker``, ``adapter``, ``device``, ``namespace`` (canonical text), ``entry`` (the
    StoredEntry's JSON text, None on failure), ``error`` (None, or why the tune failed),
    ``seconds`` (the job's time on the worker) and ``began``/``ended`` (wall-clock times)."""
    _announce_start()
    with _one_tune:
        began = time.time()
        started = time.perf_counter()
        answer: dict[str, Any] = {"job": job.label, "worker": _worker_label(), "adapter": None, "device": None,
                                  "namespace": None, "entry": None, "error": None, "began": began}
        try:
            if _state.get("retired"):
                raise WorkerRetired(f"{answer['worker']} lost its device; retired")
            tuner = _worker_tuner(config)
            namespace = namespace_for(tuner.device.identity)
            if resource is not None and device_resource(namespace) != resource:
                raise RuntimeError(f"{job.label} was meant for another device than {_device_name(tuner.device)}")
            answer.update(adapter=worker_adapter(_dask_worker_name()), device=_device_name(tuner.device),
                          namespace=canonical_namespace(namespace))
            answer["entry"] = _tune(tuner, job)
        except WgtuneError as error:
            if isinstance(error, DeviceLost) or isinstance(error.__cause__, DeviceLost):
                _retire(f"{type(error).__name__}: {error}")
                raise WorkerRetired(f"{answer['worker']} lost its device ({error}); retired") from None
            answer["error"] = f"{type(error).__name__}: {error}"
        answer["seconds"] = time.perf_counter() - started
        answer["ended"] = time.time()
        return answer


START_TOPIC = "wgtune-farm-start"
"""The Dask event a worker logs as it starts a job (the task's key): a job logged twice ran twice."""


def _announce_start() -> None:
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not on a Dask worker
        return
    worker.log_event(START_TOPIC, {"key": worker.get_current_task()})


def _retire(reason: str) -> None:
    """This worker's device is gone: take back its resource (no more jobs of its type come here;
    done before the job raises, so that its retry goes elsewhere) and close the worker gracefully
    (the scheduler moves its other jobs to the others)."""
    global _device, _tuner
    _device = _tuner = None
    resource = _state.get("resource")
    _state.update(error=f"device lost: {reason}", resource=None, retired=True)
    try:
        from distributed import get_worker
        from distributed.utils import sync

        worker = get_worker()
    except (ImportError, ValueError):
        return
    if resource is not None:
        sync(worker.loop, worker.set_resources, **{resource: 0})
    worker.loop.add_callback(worker.close_gracefully, reason=f"wgtune farm: device lost: {reason}")


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
