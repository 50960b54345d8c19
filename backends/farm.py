"""A tuning farm on Dask distributed: a catalogue's (set, key) tunes over workers, one per GPU, for each device type.

A native user with many keys to tune (every shape of a model, every family) hands the farm a
*catalogue*: sizes of the registered families' sets (``kernels/families.py``, and the user's own,
``--sets module:function``: :mod:`~wgtune.backends.user_sets`; by default the demo suite's sizes),
planned into one job per (set, key) (:func:`plan_jobs`: sizes that share a key are one tune). The
jobs go to the workers of a Dask cluster: a local one of N worker processes, one per adapter index
(:func:`local_cluster`), or one the user runs (``dask scheduler``, ``dask worker`` on each node).
:func:`run_farm` first sets every worker up (:class:`~wgtune.backends.farm_worker.FarmWorker`:
its GPU opened, its device type announced as a Dask resource, nothing announced when it has no
usable GPU), then submits each job once per device type, each asking for one unit of its type's
resource: a worker of that type runs it, one at a time, so every device type gets every key. Each
winner is merged into the local cache database under the namespace of the device that tuned it,
as it arrives, so a farm stopped midway keeps what finished, and a farm run again tunes only what
is not stored for each device.

What can go wrong, and what the farm does:

- a worker without a usable GPU (no adapter, another wgtune version): named in the report
  (``unusable``) and given no jobs; its device type's jobs run on the others of that type;
- a worker dies (its process killed, its node gone): Dask runs its jobs again on the workers of
  its type left (a local cluster's nanny also starts the worker again). A job whose worker died
  ``distributed.scheduler.allowed-failures`` times (3) is reported failed (``KilledWorker``);
- a device lost mid-job: its worker is retired and the job runs again on another of its type;
  a device type no worker has any more for :data:`ORPHAN_GRACE` has its jobs left reported failed;
- a tune fails (no valid kernel, ...): reported for that job, not tried again;
- anything else a job raises is tried again once (:data:`RETRIES`), then reported; ``retried``
  counts the jobs that started more than once;
- the scheduler lost: :class:`SchedulerLost` (what arrived is kept);
- Ctrl-C (a KeyboardInterrupt in :func:`run_farm`): the jobs not finished are cancelled, those
  finished already are merged, and the report says it was cancelled.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from wgtune import __version__ as wgtune_version
from wgtune.config import Config
from wgtune.errors import ConfigError, StoreError, WgtuneError
from wgtune.runner import run_inline
from wgtune.store.bounded_json import parse_json
from wgtune.store.contract import Store
from wgtune.store.format import StoredEntry, canonical_namespace

from .cache_transfer import SqliteDatabase
from .farm_catalogue import default_catalogue, load_catalogue, parse_catalogue, plan_jobs
from .farm_worker import (
    ADAPTER_ENV,
    START_TOPIC,
    FarmJob,
    FarmWorker,
    IgnoreInterrupts,
    family_set,
    tune_job,
    worker_state,
)

__all__ = [
    "RETRIES",
    "FarmReport",
    "JobResult",
    "SchedulerLost",
    "WinnerMerger",
    "default_catalogue",
    "load_catalogue",
    "local_cluster",
    "parse_catalogue",
    "plan_jobs",
    "run_farm",
]

RETRIES = 1
"""Times Dask runs a job again after it raised (not a tune's own failure, which is an answer):
once, for a passing fault; a job that raises twice has a reason worth reading, not retrying."""
WORKER_WAIT = 60.0
"""Seconds to wait for a first worker to join a cluster the farm did not start."""
LOCAL_HOST = "127.0.0.1"
"""A local cluster listens on the loopback only: nothing outside this machine joins it."""


# -- the results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobResult:
    """What became of one job: its winner (kept in the store) or why it failed, and where it ran."""

    job: FarmJob
    worker: str | None = None
    adapter: int | None = None
    device: str | None = None
    entry: StoredEntry | None = None
    error: str | None = None
    seconds: float = 0.0
    began: float | None = None  # wall-clock time the worker started it (time.time())
    ended: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class FarmReport:
    """A farm's outcome: each job's result, how many ran again after their worker died, what was
    already stored (``skipped``), whether it was cancelled, and its wall time (from the first
    job submitted to the last result merged)."""

    jobs: int
    results: list[JobResult] = field(default_factory=list)
    skipped: list[FarmJob] = field(default_factory=list)
    retried: int = 0
    cancelled: bool = False
    wall: float = 0.0
    workers: dict[str, dict] = field(default_factory=dict)  # address -> worker_state() of those that tune
    unusable: dict[str, dict] = field(default_factory=dict)  # address -> worker_state() of those that cannot

    @property
    def done(self) -> list[JobResult]:
        return [result for result in self.results if result.ok]

    @property
    def failed(self) -> list[JobResult]:
        return [result for result in self.results if not result.ok]

    def per_worker(self) -> dict[str, dict]:
        """Per worker: its device, jobs done, jobs failed, and the seconds its jobs took."""
        rows: dict[str, dict] = {}
        for result in self.results:
            row = rows.setdefault(result.worker or "-", {"device": result.device, "adapter": result.adapter,
                                                         "done": 0, "failed": 0, "seconds": 0.0})
            row["done" if result.ok else "failed"] += 1
            row["seconds"] += result.seconds
        return rows


class WinnerMerger:
    """Keeps the winners workers send in the cache directory's database, each under its own
    device's namespace (one SQLite transaction per winner, so each is kept as soon as it arrives),
    through the store contract (``Database.open``, then ``Store.save`` and ``Store.lookup``)."""

    def __init__(self, cache_dir: str | os.PathLike | None) -> None:
        self.database = SqliteDatabase(cache_dir)
        self.path = self.database.path
        self._stores: dict[str, Store] = {}

    def store(self, namespace: dict | str) -> Store:
        text = namespace if isinstance(namespace, str) else canonical_namespace(namespace)
        store = self._stores.get(text)
        if store is None:
            store = self._stores[text] = run_inline(self.database.open(json.loads(text)))
        return store

    def save(self, namespace: str, entry_text: str) -> StoredEntry:
        """Keep the entry (its JSON text as a worker sent it) under ``namespace`` (canonical text);
        a StoreError when either is not what a worker sends."""
        entry = StoredEntry.from_json(parse_json(entry_text))
        self.store(namespace).save(entry)
        return entry

    def has(self, namespace: dict, job: FarmJob) -> bool:
        """Whether the job's winner is stored under ``namespace`` for the set's current candidates."""
        tunables = family_set(job.set_name).for_key(job.key)
        entry = self.store(namespace).lookup(tunables.name, job.key)
        return entry is not None and entry.checksum == tunables.checksum

    def close(self) -> None:
        self.database.close()


# -- the cluster and the run -----------------------------------------------------------------------


class SchedulerLost(WgtuneError):
    """The Dask scheduler went away mid-farm (its process stopped, its node gone): what arrived
    before is kept, the rest did not run."""


def local_cluster(workers: int, *, same_adapter: bool = False, quiet: bool = True, nthreads: int = 1,
                  worker_env: Sequence[Mapping[str, str]] = ()) -> Any:
    """A Dask cluster on this machine: ``workers`` worker processes (each under a nanny that
    starts it again if it dies), ``nthreads`` threads each (a farm tunes one job at a time on a
    worker whatever its threads), worker ``i`` on adapter ``i`` (all on adapter 0 with
    ``same_adapter``: a machine with one GPU, or lavapipe), ``worker_env[i]`` added to worker
    ``i``'s environment, each deaf to Ctrl-C (the client acts on it:
    :class:`~wgtune.backends.farm_worker.IgnoreInterrupts`). It listens on the loopback only and
    has no dashboard; Dask's own logs are silenced unless ``quiet`` is False."""
    import logging

    from distributed import Nanny, Scheduler, SpecCluster

    if workers < 1:
        raise ConfigError(f"--workers {workers}: give at least 1")
    level = logging.CRITICAL if quiet else logging.WARNING  # a job's errors come back with its result
    extra = list(worker_env) + [{}] * (workers - len(worker_env))
    spec = {
        f"adapter-{index}" if not same_adapter else f"worker-{index}": {
            "cls": Nanny,
            "options": {"nthreads": nthreads, "host": LOCAL_HOST,
                        "env": {ADAPTER_ENV: str(0 if same_adapter else index), **extra[index]},
                        "silence_logs": level, "plugins": (IgnoreInterrupts(),)},
        }
        for index in range(workers)
    }
    scheduler = {"cls": Scheduler,
                 "options": {"dashboard": False, "dashboard_address": f"{LOCAL_HOST}:0", "host": LOCAL_HOST}}
    return SpecCluster(workers=spec, scheduler=scheduler, silence_logs=level, name="wgtune-farm")


def run_farm(
    client: Any,
    jobs: list[FarmJob],
    merger: WinnerMerger,
    config: Config,
    *,
    retune: bool = False,
    sets: str | None = None,
    on_start: Callable[[FarmReport, int], None] | None = None,
    on_result: Callable[[JobResult], None] | None = None,
) -> FarmReport:
    """Tune ``jobs`` for every device type among the workers of ``client``'s cluster, each
    (job, device type) on a worker of that type only, and merge each winner into ``merger`` as
    it arrives (see the module doc). A (job, device type) whose winner is stored under that
    device is skipped unless ``retune``. ``sets`` (``module:function``) are the user's sets, which
    every worker imports. ``on_start(report, submitted)`` hears how many tunes go out,
    ``on_result`` each one's result (after its winner was merged). A KeyboardInterrupt (Ctrl-C)
    cancels the jobs not finished and returns the report so far, ``cancelled``; a lost scheduler
    is a :class:`SchedulerLost` (what was merged stays)."""
    config = replace(config, cache=False, records=None)  # workers keep nothing: the client stores
    report = FarmReport(jobs=0)
    states = _worker_states(client, sets)
    report.workers = {address: state for address, state in states.items() if state.get("resource")}
    report.unusable = {address: state for address, state in states.items() if not state.get("resource")}
    if not report.workers:
        raise ConfigError("no worker can tune: " + "; ".join(
            f"{state.get('name', address)}: {state.get('error')}" for address, state in sorted(states.items())))
    types: dict[str, dict] = {}
    for state in report.workers.values():
        types.setdefault(state["resource"], state)
    tunes = [(job, resource) for job in jobs for resource in types]
    report.jobs = len(tunes)
    if not retune:
        stored = [(job, resource) for job, resource in tunes if merger.has(types[resource]["namespace"], job)]
        report.skipped = [job for job, _ in stored]
        tunes = [tune for tune in tunes if tune not in set(stored)]
    if on_start is not None:
        on_start(report, len(tunes))
    if not tunes:
        return report
    from distributed import as_completed

    started = time.perf_counter()
    batch = uuid.uuid4().hex[:8]
    # The largest problems first (submitted first, and Dask runs higher priorities first): a farm
    # then ends on short jobs, rather than one worker finishing a long one while the others wait.
    tunes = sorted(tunes, key=lambda tune: -math.prod(tune[0].size))
    futures = {
        client.submit(tune_job, job, config, resource, key=f"wgtune-farm-{batch}-{index}", pure=False,
                      retries=RETRIES, priority=math.prod(job.size), resources={resource: 1}): (job, types[resource])
        for index, (job, resource) in enumerate(tunes)
    }
    handled: set = set()
    orphaned: dict[str, str] = {}  # key -> why: no worker of its device type is left
    watch = _OrphanWatch(client, futures, orphaned)

    def lost() -> SchedulerLost:
        return SchedulerLost(f"lost the Dask scheduler ({_scheduler_address(client)}) with "
                             f"{len(futures) - len(handled) + 1} job(s) not finished; "
                             f"{len(report.done)} winner(s) kept in {merger.path}")

    def take(future: Any) -> None:
        handled.add(future.key)
        job, target = futures[future]
        if future.status == "cancelled" and future.key not in orphaned:
            raise lost()
        try:
            result = _result_of(future, job, target, merger, orphaned.get(future.key))
        except OSError as error:  # its answer lost on the way (distributed's CommClosedError is one)
            raise lost() from error
        report.results.append(result)
        if on_result is not None:
            on_result(result)

    watch.start()
    try:
        for future in as_completed(futures):
            take(future)
    except KeyboardInterrupt:
        report.cancelled = True
        for future in futures:  # what finished meanwhile is kept; the rest is cancelled
            if future.key not in handled and future.status in ("finished", "error"):
                # Ctrl-C again (or from on_result) is let go: the winner was merged before it.
                with contextlib.suppress(KeyboardInterrupt):
                    take(future)
        client.cancel([future for future in futures if future.key not in handled])
    finally:
        watch.stop()
    report.wall = time.perf_counter() - started
    report.retried = _retried(client, [future.key for future in futures])
    return report


ORPHAN_GRACE = 20.0
"""Seconds a device type may have no worker before its jobs left are reported failed: long enough
for a nanny to start a worker again (a few seconds), short enough not to leave a farm waiting."""


class _OrphanWatch:
    """Cancels the jobs of a device type no worker has any more (its only worker lost its device,
    or left) once :data:`ORPHAN_GRACE` has passed, so that the farm ends, naming why."""

    def __init__(self, client: Any, futures: Mapping[Any, tuple[FarmJob, dict]], orphaned: dict[str, str]) -> None:
        self.client, self.futures, self.orphaned = client, futures, orphaned
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wgtune-farm-orphans", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        missing_since: dict[str, float] = {}
        while not self._stop.wait(1.0):
            try:
                present = self.client.run_on_scheduler(_resources_present)
            except Exception:  # the scheduler gone: the main loop hears it from the futures
                return
            now = time.monotonic()
            pending = [(future, target) for future, (_, target) in self.futures.items() if not future.done()]
            for resource in {target["resource"] for _, target in pending}:
                if resource in present:
                    missing_since.pop(resource, None)
                elif now - missing_since.setdefault(resource, now) > ORPHAN_GRACE:
                    lost = [future for future, target in pending if target["resource"] == resource]
                    device = next(target["device"] for _, target in pending if target["resource"] == resource)
                    for future in lost:
                        self.orphaned[future.key] = f"no worker of {device} is left to run it"
                    self.client.cancel(lost)


def _resources_present(dask_scheduler: Any) -> set[str]:
    return {name for worker in dask_scheduler.workers.values() for name, amount in worker.resources.items()
            if amount > 0}


def _scheduler_address(client: Any) -> str:
    with contextlib.suppress(Exception):
        return str(client.scheduler.address)
    return "its address unknown"


def _worker_states(client: Any, sets: str | None) -> dict[str, dict]:
    """Every worker set up for the farm (:class:`~wgtune.backends.farm_worker.FarmWorker`: the
    user's sets imported, its GPU opened, its device type announced), by address: what each
    found, ``error`` saying why one cannot tune. A ConfigError when no worker joins within
    :data:`WORKER_WAIT`. A worker of another wgtune version is one that cannot tune."""
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT)
    except TimeoutError:
        raise ConfigError(f"no Dask worker joined the scheduler within {WORKER_WAIT:.0f} s") from None
    client.register_plugin(FarmWorker(sets))
    states = client.run(worker_state)
    for address, state in states.items():
        if not state:
            state.update(name=address, error="the farm's worker plugin did not run here", resource=None)
        elif state.get("wgtune") != wgtune_version:
            state.update(error=f"wgtune {state.get('wgtune')} there, {wgtune_version} here: install the same",
                         resource=None)
    return states


def _result_of(future: Any, job: FarmJob, target: dict, merger: WinnerMerger, orphaned: str | None) -> JobResult:
    """The job's result from its finished future, its winner merged into the store."""
    if orphaned is not None:
        return JobResult(job, device=target["device"], error=orphaned)
    if future.status != "finished":
        error = future.exception()
        return JobResult(job, device=target["device"], error=f"{type(error).__name__}: {error}")
    answer: Mapping[str, Any] = future.result()
    result = JobResult(job, answer["worker"], answer["adapter"], answer["device"], None, answer["error"],
                       answer["seconds"], answer.get("began"), answer.get("ended"))
    if result.ok:
        try:
            result = replace(result, entry=merger.save(answer["namespace"], answer["entry"]))
        except (StoreError, OSError) as error:
            result = replace(result, error=f"its winner could not be stored: {error}")
    return result


def _retried(client: Any, keys: list[str]) -> int:
    """How many of the jobs ran again after they ran once: their worker died while they ran, or
    they raised and were retried (each start is a Dask event, :data:`START_TOPIC`). A job moved
    before it started (its worker gone while it waited) ran once, and is not counted."""
    try:
        events = client.get_events(START_TOPIC)
    except Exception:  # a count for the summary: never worth failing the farm over
        return 0
    wanted = set(keys)
    starts = Counter(event.get("key") for _, event in events if isinstance(event, dict) and event.get("key") in wanted)
    return sum(1 for count in starts.values() if count > 1)
