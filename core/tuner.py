"""The tuner: answers which candidate runs a key, tuning it on the first miss.

Usage: ``kernel = Tuner(device, store=store).execute(my_set, Args(buffers, params))``.

The tuner only orchestrates; each piece of state has one owner:

- :class:`~wgtune.cache.TuneCache` (``tuner.cache``): every key's state (Hit, Miss, Pending,
  Unchecked), its stored entry and its last failure, changed only by named transitions;
- :class:`~wgtune.tune.pipelines.PipelineCache` (``tuner.pipelines``): compiled candidates and each
  set's fallback;
- the store: winners between processes; the records sink: one record per tune.

A :class:`~wgtune.sets.tunable.PerKeySet` is resolved to the key's own set at the door of each
public method. Settling a claimed key (other tuners, a winner from elsewhere, measuring, keeping
it) is ``settling.py``'s; what one tune measures is ``tune/tuning.py``'s.

:meth:`Tuner.fastest` is the hot path, a dict lookup. :meth:`Tuner.check_tune` claims a key in
the cache: a known answer comes back at once; otherwise the key is Pending and a tune starts.
The tune is a coroutine: natively it runs inline and answers Hit; in the browser it is a task on
the event loop and the answer is Pending. Whatever ends a tune, the key leaves Pending: a winner
makes it a Hit; any failure a Miss again, with the reason kept in :attr:`Tuner.failures`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import replace

from .batch import Batch
from .cache import TuneCache
from .config import Config, LogLevel
from .coordinator import Coordinator, WinnerFromElsewhere
from .errors import ConfigError, LaunchRefused, StoreError, Timeout, WgtuneError
from .gpu.device import Device
from .key import Key, KeyMemo
from .runner import Spawner, default_spawner, run_inline
from .sets.args import Args
from .sets.kernel import Kernel
from .sets.tunable import AnySet, PerKeySet, TunableSet
from .sets.uniforms import refuse_params
from .settling import Settler
from .state import MISS, Hit, TuneState
from .store.contract import Store, checked_store
from .store.format import StoredEntry
from .store.record import RecordSink
from .store.results import Result
from .tune.log import logger, say_checks_are_off, show_log_on_stderr
from .tune.pipelines import PipelineCache
from .tune.request import LaunchGuard

__all__ = ["Tuner"]


class Tuner:
    """Tunes and remembers the winners of any number of tunable sets on one device."""

    def __init__(
        self,
        device: Device,
        *,
        store: Store | None = None,
        records: RecordSink | None = None,
        config: Config | None = None,
        spawn: Spawner | None = None,
        observer: Callable[[object], None] | None = None,
        guard: LaunchGuard | None = None,
        coordinator: Coordinator | None = None,
    ) -> None:
        self.device = device
        self.guard = guard
        self.coordinator = coordinator
        """Tunes a key once among tuners sharing the store (the page's tabs): see ``coordinator.py``."""
        self.config = config if config is not None else Config.from_env()
        if self.config.log_to_stderr:  # WGTUNE_LOG set: its lines show without a logging setup
            show_log_on_stderr(self.config.log_level)
        self.store = checked_store(store) if store is not None and self.config.cache else None
        if not self.config.checks and not self.config.dry_run:
            say_checks_are_off()
        self.records = records
        self.observer = observer
        self._spawn = spawn if spawn is not None else default_spawner()
        self.cache = TuneCache()
        # The hot path reads the caches' own dicts (no call); only their owners write them.
        self._sets, self._states = self.cache.sets, self.cache.states_by_set
        self.pipelines = PipelineCache(device, self._spawn)
        self._compiled = self.pipelines.compiled
        self.keys = KeyMemo()
        self._tasks: set = set()  # tunes running on the event loop (strong references)
        self._settler = Settler(self)
        self.reload()

    @property
    def tunes_inline(self) -> bool:
        """Whether a tune runs to its end before the call that missed returns (natively): then
        nothing else can write or free the call's buffers meanwhile, and the tune benchmarks on
        the call's own inputs, copying only the buffers a candidate may write."""
        return self._spawn is run_inline

    @property
    def running(self) -> int:
        """How many tunes are running on the event loop now."""
        return len(self._tasks)

    @property
    def failures(self) -> dict[tuple[str, Key], BaseException]:
        """Why the last tune of a key failed, until one succeeds: ``(set name, key) -> error``."""
        return self.cache.failures

    def reload(self, store: Store | None = None) -> None:
        """Read the store's winners again (after an import or a clear), from ``store`` from now on
        when one is given. Running tunes go on and settle their keys. A store read key by key
        (``Store.read_by_key``: SQLite) is read as calls miss, others whole."""
        if store is not None and self.config.cache:
            self.store = checked_store(store)
        entries = []
        read_by_key = self.store is not None and self.store.read_by_key
        self.cache.lookup = self.store.lookup if read_by_key else None
        if self.store is not None and not read_by_key:
            try:
                entries = self.store.load()
            except (OSError, StoreError) as error:  # an unreadable cache is a miss, not a failure
                logger.warning("could not read the stored winners: %s", error)
        self.cache.reload(entries)

    # -- the hot path -------------------------------------------------------------------------

    def fastest(self, tunables: AnySet, key: Key) -> TuneState:
        """The key's state in this process: Hit, Miss, Pending or Unchecked. A dict lookup."""
        if tunables.__class__ is PerKeySet:
            tunables = tunables.for_key(key)
        if self._sets.get(tunables.name) is not tunables:
            self._adopt(tunables)
        table = self._states.get(tunables.name)
        return MISS if table is None else table.get(key, MISS)

    def key(self, tunables: AnySet, args: Args) -> Key:
        """The autotune key of a call: the key function runs once per Args object (kept in
        ``args.cache``: an Args is immutable), memoised on its raw answer across calls."""
        return self.keys.key(tunables, args)

    def execute(self, tunables: AnySet, args: Args) -> Kernel:
        """Run the key's winner on ``args``; tune first on a miss. Returns the kernel that ran.

        While the key is Pending (a tune in the event loop, or in another thread), the set's
        fallback runs instead.

        A launch WebGPU refuses (a buffer without STORAGE usage, too small, destroyed, of another
        device; a grid over the device's limit) raises LaunchRefused, naming the set, the key
        and the binding: before any tune, where the call's buffers already show it
        (``Device.check_call``), else at the launch (``Device.launch``). Nothing of it is left
        for a later call or tune.
        """
        key = self.keys.key(tunables, args)
        if tunables.__class__ is PerKeySet:
            tunables = tunables.for_key(key)
        state = self.fastest(tunables, key)
        if state.__class__ is not Hit:
            refuse_params(tunables, key, args)
            if not self.config.dry_run:  # a call WebGPU refuses is the call's error, not a tune's
                try:
                    self.device.check_call(tunables.candidates[0], args)
                except LaunchRefused as error:
                    raise LaunchRefused(f"set {tunables.name!r} [{key}]: {error}") from None
            state = self._check_tune(tunables, key, args)
        index = state.index if state.__class__ is Hit else self.pipelines.fallback(tunables)
        pipeline = self._compiled.get((tunables.name, index))
        if pipeline is None:
            index, pipeline = self._settler.pipeline_for_call(tunables, key, args, index, self._check_tune)
        kernel = tunables.candidates[index]
        if not self.config.dry_run:
            # An Args is immutable, so its grid per grid function is worked out once (in its cache).
            grid = args.cache.get(kernel.grid)
            if grid is None:
                try:
                    grid = args.cache[kernel.grid] = kernel.grid(args)
                except WgtuneError:  # typed already (a page's grid that answered NaN)
                    raise
                except Exception as error:  # the caller's function: its failure is the call's, typed
                    raise ConfigError(f"set {tunables.name!r} [{key}]: the grid function of {kernel.name!r} failed: "
                                      f"{type(error).__name__}: {error}") from error
            try:
                self.device.launch(pipeline, args, grid)
            except LaunchRefused as error:
                raise LaunchRefused(f"set {tunables.name!r} [{key}]: {error}") from None
        return kernel

    def batch(self) -> Batch:
        """Record the launches of :meth:`execute` from now on and submit them together (a long
        batch part by part), by ``batch.submit()`` or the end of ``with tuner.batch():`` (see
        ``batch.py``)."""
        return Batch(self.device)

    # -- deciding -----------------------------------------------------------------------------

    def check_tune(self, tunables: AnySet, key: Key, args: Args) -> TuneState:
        """Answer Hit or Pending for ``key``, starting a tune if nothing is known yet.

        Natively the tune runs inline and this returns Hit (or raises NoValidKernelFound);
        with the browser's spawner it returns Pending at once.
        """
        return self._check_tune(tunables.for_key(key), key, args)

    def _check_tune(self, tunables: TunableSet, key: Key, args: Args) -> TuneState:
        state = self._claim(tunables, key)
        if state is not None:
            return state
        coro = self._settler.settle(tunables, key, self._settler.snapshot(tunables, args), time.perf_counter())
        try:
            return self._spawn(coro, self._tasks)
        except BaseException:
            if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:  # never ran: the key is still ours
                coro.close()
                self.cache.fail(tunables.name, key)
            raise

    async def tune_async(self, tunables: AnySet, args: Args, key: Key | None = None) -> TuneState:
        """Like :meth:`check_tune`, awaiting the tune in the caller's event loop; answers Hit or Pending."""
        key = key if key is not None else self.key(tunables, args)
        tunables = tunables.for_key(key)
        state = self._claim(tunables, key)
        if state is not None:
            return state
        return await self._settler.settle(tunables, key, self._settler.snapshot(tunables, args), time.perf_counter())

    def _claim(self, tunables: TunableSet, key: Key) -> TuneState | None:
        if self._sets.get(tunables.name) is not tunables:
            self._adopt(tunables)
        return self._settler.claim(tunables, key)

    def _adopt(self, tunables: TunableSet) -> None:
        if self.cache.adopt(tunables):
            self.pipelines.drop(tunables.name)
            if self.config.log_level is not LogLevel.DISABLED:
                logger.info("set %s has other candidates now: its stored winners are tuned again", tunables.name)

    # -- the fallback, inspection -------------------------------------------------------------

    async def prepare(self, tunables: AnySet, key: Key | None = None) -> int:
        """Compile the set's fallback ahead of time (the browser does this before any call); for
        a set whose candidates are made per key, the ``key``'s."""
        return await self.pipelines.prepare(self._for_key(tunables, key))

    def fallback(self, tunables: AnySet, key: Key | None = None) -> int:
        """The first candidate, in the set's order, that fits the device and compiles (of the
        ``key``'s candidates, for a set that makes them per key)."""
        return self.pipelines.fallback(self._for_key(tunables, key))

    @staticmethod
    def _for_key(tunables: AnySet, key: Key | None) -> TunableSet:
        if key is not None:
            return tunables.for_key(key)
        if isinstance(tunables, PerKeySet):
            raise ConfigError(f"tunable set {tunables.name!r} makes its candidates per key: name the key")
        return tunables

    def states(self, tunables: AnySet | str) -> dict[Key, TuneState]:
        """A copy of every known key's state for a set."""
        return self.cache.states(tunables if isinstance(tunables, str) else tunables.name)

    def results(self, tunables: AnySet, key: Key) -> tuple[Result, ...] | None:
        """Every candidate's result for a decided key, in the set's order: ``Measured`` (its
        ``stats``: samples, median, min, max, mean; ``eliminated_early`` when the adaptive
        policy dropped it after too few samples for its median to mean much) or a failure with
        its ``reason`` (``Launch``, ``Mismatch``, ``Skip``...).

        None when no tune with the set's current candidates decided the key (in this process or
        in the store): never tuned, pinned, or tuned with other candidates. Empty for a winner
        seeded from a bundle (``TuneCache.seed``: bundles carry no results). Raises StoreError
        when the stored results cannot be read.
        """
        tunables = tunables.for_key(key)
        entry = self.cache.entry(tunables, key)
        if entry is None:
            return None
        return tuple(result if result.name else replace(result, name=tunables.candidates[index].name)
                     for index, result in enumerate(entry.decoded_results()))

    def rule_out(self, tunables: AnySet, key: Key, candidate: str, reason: str) -> None:
        """Never launch ``candidate`` in a tune of ``key`` again in this process: it gets a
        Timeout result with ``reason`` instead (the candidate whose first launch lost the device,
        say, which would lose the next one too). A ConfigError when the set has no such candidate."""
        tunables = tunables.for_key(key)
        index = tunables.index_of.get(candidate)
        if index is None:
            raise ConfigError(f"{tunables.name} has no candidate {candidate!r} to rule out")
        self.cache.rule_out(tunables.name, key, index, Timeout(candidate, reason))

    def take_announced(self, entry: StoredEntry) -> bool:
        """Another tuner (a browser tab) stored ``entry`` and said so: its key runs that winner
        from now on, with no tune and no reload (:meth:`TuneCache.take_announced`: not while the
        key is being tuned here, nor for other candidates); a key pinned here keeps its pin. True
        when the key changed: the observer then hears ``WinnerFromElsewhere``."""
        if self.config.pin_for(entry.set_name, entry.key) is not None:
            return False
        verify = self.config.checks and not self.config.dry_run
        if not self.cache.take_announced(entry, require_checked=verify):
            return False
        self._emit(WinnerFromElsewhere(entry, announced=True))
        return True

    def forget(self, tunables: AnySet, key: Key) -> None:
        """Drop what this process knows of a key (the store keeps its entry)."""
        self.cache.forget(tunables.for_key(key).name, key)

    def _emit(self, event: object) -> None:
        if self.observer is not None:
            try:
                self.observer(event)
            except Exception as error:  # a broken progress bar must not break a tune
                logger.warning("tune observer failed: %s", error)

