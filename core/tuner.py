"""The tuner: answers which candidate runs a key, tuning it on the first miss.

Usage::

    tuner = Tuner(device, store=store)
    kernel = tuner.execute(my_set, Args(buffers, params))   # tunes on a miss, then runs the winner

The tuner only orchestrates; each piece of state has one owner:

- :class:`~wgtune.cache.TuneCache` (``tuner.cache``): every key's state (Hit, Miss, Pending,
  Unchecked), its stored entry and its last failure, changed only by named transitions;
- :class:`~wgtune.tune.pipelines.PipelineCache` (``tuner.pipelines``): compiled candidates and each
  set's fallback;
- the store: winners between processes; the records sink: one record per tune;
- ``clock.py``: the grain of each device's clock, measured before its first tune.

What one tune does, from the call to its outcome, is ``tuning.py``'s.

:meth:`Tuner.fastest` is the hot path, a dict lookup. :meth:`Tuner.check_tune` claims a key in
the cache: a known answer comes back at once; otherwise the key is Pending and a tune starts.
The tune is a coroutine: natively it runs inline and answers Hit; in the browser it is a task on
the event loop and the answer is Pending. Whatever ends a tune, the key leaves Pending: a winner
makes it a Hit; any failure a Miss again, with the reason kept in :attr:`Tuner.failures`.
"""

from __future__ import annotations

import inspect
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .batch import Batch
from .cache import TuneCache
from .config import Config, LogLevel
from .coordinator import Coordinator, WinnerFromElsewhere
from .errors import ConfigError, KernelError, LaunchRefused, Timeout, WgtuneError, tune_failure
from .gpu.device import Device
from .key import Key, KeyMemo
from .runner import Spawner, default_spawner
from .sets.args import Args
from .sets.tunable import Kernel, TunableSet
from .state import MISS, Hit, TuneState, Unchecked
from .store.format import WRITE_PENDING, Store, StoredEntry
from .store.record import RecordSink
from .store.results import Result
from .tune.events import TuneFailedEvent, TuneFinished, TuneStarted
from .tune.log import TuneLog, logger, say_checks_are_off, show_log_on_stderr
from .tune.measure import LaunchGuard, clone_args
from .tune.outcome import TuneOutcome
from .tune.pipelines import PipelineCache
from .tune.tuning import measure_key
from .tune.verify import verify_winner

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
        self.store = store if self.config.cache else None
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
        self.reload()

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
        when one is given. Running tunes go on and settle their keys."""
        if store is not None and self.config.cache:
            self.store = store
        entries = []
        # A store that finds one key's entry (SQLite) is read key by key as calls miss; others whole.
        self.cache.lookup = getattr(self.store, "lookup", None)
        if self.store is not None and self.cache.lookup is None:
            try:
                entries = self.store.load()
            except OSError as error:  # an unreadable cache is a miss, not a failure
                logger.warning("could not read the stored winners: %s", error)
        self.cache.reload(entries)

    # -- the hot path -------------------------------------------------------------------------

    def fastest(self, tunables: TunableSet, key: Key) -> TuneState:
        """The key's state in this process: Hit, Miss, Pending or Unchecked. A dict lookup."""
        if tunables.specialize is not None:
            tunables = tunables.for_key(key)
        if self._sets.get(tunables.name) is not tunables:
            self._adopt(tunables)
        table = self._states.get(tunables.name)
        return MISS if table is None else table.get(key, MISS)

    def key(self, tunables: TunableSet, args: Args) -> Key:
        """The autotune key of a call: the key function runs once per Args object (kept in
        ``args.cache``: an Args is immutable), memoised on its raw answer across calls."""
        return self.keys.key(tunables, args)

    def execute(self, tunables: TunableSet, args: Args) -> Kernel:
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
        if tunables.specialize is not None:
            tunables = tunables.for_key(key)
        state = self.fastest(tunables, key)
        if state.__class__ is not Hit:
            if not self.config.dry_run:  # a call WebGPU refuses is the call's error, not a tune's
                try:
                    self.device.check_call(tunables.candidates[0], args)
                except LaunchRefused as error:
                    raise LaunchRefused(f"set {tunables.name!r} [{key}]: {error}") from None
            state = self.check_tune(tunables, key, args)
        index = state.index if state.__class__ is Hit else self.pipelines.fallback(tunables)
        pipeline = self._compiled.get((tunables.name, index))
        if pipeline is None:
            index, pipeline = self._pipeline_for_call(tunables, key, args, index)
        kernel = tunables.candidates[index]
        if not self.config.dry_run:
            # An Args is immutable, so its grid per grid function is worked out once (in its cache).
            grid = args.cache.get(kernel.grid)
            if grid is None:
                grid = args.cache[kernel.grid] = kernel.grid(args)
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

    def _pipeline_for_call(self, tunables: TunableSet, key: Key, args: Args, index: int) -> tuple[int, Any]:
        """Candidate ``index``'s pipeline for a call, when it is not compiled yet: a winner known
        without a tune (stored, pinned, the only candidate). One that no longer compiles (the
        driver changed under the same identity) makes its key a Miss: natively it is tuned again
        at once, the broken candidate reported with its reason; on the event loop the fallback
        serves until the next call tunes it. A pinned candidate is the user's word: its failure
        is raised, not tuned around."""
        replaceable = self.config.pin_for(tunables.name, key) is None and len(tunables) > 1
        winner, name = index, tunables.candidates[index].name

        def broken_on_the_loop(error: BaseException) -> None:
            reason = f"stored winner {name} no longer compiles: {error}"
            logger.warning("%s [%s]: %s; the next call tunes it again", tunables.name, key, reason)
            if replaceable:
                self.cache.demote(tunables.name, key, winner, KernelError(reason))
            self._emit(TuneFailedEvent(tunables.name, key, reason))

        try:
            pipeline = self.pipelines.compile_for_call(tunables, index, broken_on_the_loop)
        except KernelError as error:
            if not replaceable:
                raise
            logger.warning("winner %s of %s [%s] no longer compiles (%s): tuning again",
                           name, tunables.name, key, error)
            self.cache.demote(tunables.name, key, index, error)
            state = self.check_tune(tunables, key, args)
            index = state.index if state.__class__ is Hit else self.pipelines.fallback(tunables)
            pipeline = self.pipelines.get(tunables.name, index)
        if pipeline is None:  # the winner compiles on the event loop: the fallback serves meanwhile
            index = self.pipelines.fallback(tunables)
            pipeline = self.pipelines.get(tunables.name, index)
        return index, pipeline

    # -- deciding -----------------------------------------------------------------------------

    def check_tune(self, tunables: TunableSet, key: Key, args: Args) -> TuneState:
        """Answer Hit or Pending for ``key``, starting a tune if nothing is known yet.

        Natively the tune runs inline and this returns Hit (or raises NoValidKernelFound);
        with the browser's spawner it returns Pending at once.
        """
        tunables = tunables.for_key(key)
        state = self._claim(tunables, key)
        if state is not None:
            return state
        coro = self._tune(tunables, key, self._snapshot(tunables, args), time.perf_counter())
        try:
            return self._spawn(coro, self._tasks)
        except BaseException:
            if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:  # never ran: the key is still ours
                coro.close()
                self.cache.fail(tunables.name, key)
            raise

    async def tune_async(self, tunables: TunableSet, args: Args, key: Key | None = None) -> TuneState:
        """Like :meth:`check_tune`, awaiting the tune in the caller's event loop; answers Hit or Pending."""
        key = key if key is not None else self.key(tunables, args)
        tunables = tunables.for_key(key)
        state = self._claim(tunables, key)
        if state is not None:
            return state
        return await self._tune(tunables, key, self._snapshot(tunables, args), time.perf_counter())

    def _snapshot(self, tunables: TunableSet, args: Args) -> Args:
        """The call's buffers as they are at the miss, copied for the tune (the set's ``input_gen``
        makes its own). Copied now, not when the tune starts: in the page the fallback runs on the
        call's buffers before the tune's task does, and a copy made after it would hold the
        fallback's answer, which a candidate that leaves elements unwritten would then seem to give."""
        self.device.flush()  # a miss in a batch: the launches recorded before it come first
        return args if tunables.input_gen is not None else clone_args(self.device, args)

    def _claim(self, tunables: TunableSet, key: Key) -> TuneState | None:
        if self._sets.get(tunables.name) is not tunables:
            self._adopt(tunables)
        self.cache.look_up(tunables.name, key)  # a store read key by key: this key's entry, once
        stored = isinstance(self.cache.state(tunables.name, key), Unchecked)
        verify = self.config.checks and not self.config.dry_run
        unchecked = verify and stored and self.cache.unchecked(tunables.name, key)
        state = self.cache.claim(tunables, key, self.config.pinned_index(tunables, key), require_checked=verify,
                                 check_single=verify and tunables.reference is not None)
        if stored and state is None and self.config.log_level is not LogLevel.DISABLED:
            if unchecked:
                logger.info("stored winner for %s [%s] was not checked on this device: checking it", tunables.name,
                            key)
            else:
                logger.info("stored winner for %s [%s] is for other candidates or does not fit the key: tuning again",
                            tunables.name, key)
        return state

    def _adopt(self, tunables: TunableSet) -> None:
        if self.cache.adopt(tunables):
            self.pipelines.drop(tunables.name)
            if self.config.log_level is not LogLevel.DISABLED:
                logger.info("set %s has other candidates now: its stored winners are tuned again", tunables.name)

    # -- tuning -------------------------------------------------------------------------------

    async def _tune(self, tunables: TunableSet, key: Key, args: Args, missed_at: float) -> TuneState:
        """Decide ``key`` on ``args``, the call's :meth:`_snapshot`."""
        coordinated, stored = await self._wait_for_others(tunables, key)
        try:
            verify = self.config.checks and not self.config.dry_run
            if stored is not None and self.cache.take_stored(tunables, stored, require_checked=verify):
                self._emit(WinnerFromElsewhere(stored, announced=False))
                return Hit(stored.winner)
            unverified = self.cache.to_verify.pop((tunables.name, key), None)
            if unverified is not None and await self._verified(tunables, key, args, unverified):
                return Hit(unverified.winner)
            return await self._measure(tunables, key, args, missed_at)
        finally:
            if coordinated:
                await self._let_others_go(tunables, key)

    async def _verified(self, tunables: TunableSet, key: Key, args: Args, entry: StoredEntry) -> bool:
        """Check a winner not checked on this device (``verify.py``): when it passes, the key is a
        Hit and the store keeps it as checked (it is checked once); when not, the caller tunes."""
        name = tunables.candidates[entry.winner].name
        try:
            problem = await verify_winner(self.device, self.pipelines, tunables, key, args, entry.winner)
        except Exception as error:  # the tune that follows meets it again, and says so
            problem = f"{type(error).__name__}: {error}"
        if problem is not None:
            logger.warning("winner %s of %s [%s], not checked on this device, is not used: %s; tuning the key",
                           name, tunables.name, key, problem)
            return False
        checked = replace(entry, checked=True)
        self.cache.finish(checked)
        self._keep(checked)
        if self.config.log_level is not LogLevel.DISABLED:
            logger.info("winner %s of %s [%s] checked on this device: it serves", name, tunables.name, key)
        self._emit(WinnerFromElsewhere(checked, announced=False))
        return True

    async def _wait_for_others(self, tunables: TunableSet, key: Key) -> tuple[bool, StoredEntry | None]:
        """With a coordinator, wait until no other tuner tunes the key: whether this tune now holds
        it, and the entry stored for the key meanwhile. A coordinator that fails is logged and the
        tune goes on alone; a wait cancelled leaves the key a Miss."""
        if self.coordinator is None:
            return False, None
        try:
            return True, await self.coordinator.acquire(tunables.name, key)
        except Exception as error:
            logger.warning("could not wait for other tuners of %s [%s] (%s): tuning it here", tunables.name, key, error)
            return False, None
        except BaseException:
            self.cache.fail(tunables.name, key)
            raise

    async def _let_others_go(self, tunables: TunableSet, key: Key) -> None:
        try:
            await self.coordinator.release(tunables.name, key)
        except Exception as error:  # the winner is kept either way
            logger.warning("could not let other tuners go on %s [%s]: %s", tunables.name, key, error)

    async def _measure(self, tunables: TunableSet, key: Key, args: Args, missed_at: float) -> TuneState:
        log = TuneLog(self.config.log_level, tunables.name, key)
        try:
            self._emit(TuneStarted(tunables.name, key, len(tunables)))
            outcome = await measure_key(self.device, self.pipelines, self.config, tunables, key, args,
                                        self._emit, log.step, self.guard,
                                        self.cache.ruled_out.get((tunables.name, key)), snapshot=True)
        except BaseException as error:
            failure = tune_failure(tunables.name, key, error)
            # The failure is kept; the benchmark buffers its frames' locals hold need not be.
            traceback.clear_frames(error.__traceback__)
            self.cache.fail(tunables.name, key, failure)
            reason = str(failure) if isinstance(failure, WgtuneError) else f"{type(failure).__name__}: {failure}"
            log.failed(reason)
            self._emit(TuneFailedEvent(tunables.name, key, reason))
            if failure is error or isinstance(error, GeneratorExit):
                raise
            raise failure from error
        stored = self._keep(outcome.entry()) if not outcome.dry_run else False
        outcome = replace(outcome, wall=time.perf_counter() - missed_at, stored=stored)
        self.cache.finish(outcome.entry())
        self._write_record(outcome)
        log.finish(outcome)
        self._emit(TuneFinished(outcome))
        return Hit(outcome.winner)

    def _keep(self, entry: StoredEntry) -> bool | str:
        """Keep a key's winner in the store: True once written, ``"pending"`` while the store
        writes it in the background (IndexedDB), False when not kept (no store, or it failed)."""
        if self.store is None:
            return False
        try:
            answer = self.store.save(entry)
        except Exception as error:
            logger.warning("could not store the winner of %s [%s]: %s", entry.set_name, entry.key, error)
            return False
        return WRITE_PENDING if answer == WRITE_PENDING else True

    def _write_record(self, outcome: TuneOutcome) -> None:
        if self.records is None:
            return
        try:
            self.records.write(outcome.record())
        except Exception as error:  # a record lost must not lose the winner
            logger.warning("could not write the tune record of %s [%s]: %s", outcome.set_name, outcome.key, error)

    # -- the fallback, inspection -------------------------------------------------------------

    async def prepare(self, tunables: TunableSet, key: Key | None = None) -> int:
        """Compile the set's fallback ahead of time (the browser does this before any call); for
        a set whose candidates are made per key, the ``key``'s."""
        return await self.pipelines.prepare(self._for_key(tunables, key))

    def fallback(self, tunables: TunableSet, key: Key | None = None) -> int:
        """The first candidate, in the set's order, that fits the device and compiles (of the
        ``key``'s candidates, for a set that makes them per key)."""
        return self.pipelines.fallback(self._for_key(tunables, key))

    @staticmethod
    def _for_key(tunables: TunableSet, key: Key | None) -> TunableSet:
        if tunables.specialize is not None and key is None:
            raise ConfigError(f"tunable set {tunables.name!r} makes its candidates per key: name the key")
        return tunables if key is None else tunables.for_key(key)

    def states(self, tunables: TunableSet | str) -> dict[Key, TuneState]:
        """A copy of every known key's state for a set."""
        return self.cache.states(tunables if isinstance(tunables, str) else tunables.name)

    def results(self, tunables: TunableSet, key: Key) -> tuple[Result, ...] | None:
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

    def rule_out(self, tunables: TunableSet, key: Key, candidate: str, reason: str) -> None:
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

    def forget(self, tunables: TunableSet, key: Key) -> None:
        """Drop what this process knows of a key (the store keeps its entry)."""
        self.cache.forget(tunables.for_key(key).name, key)

    def _emit(self, event: object) -> None:
        if self.observer is not None:
            try:
                self.observer(event)
            except Exception as error:  # a broken progress bar must not break a tune
                logger.warning("tune observer failed: %s", error)

