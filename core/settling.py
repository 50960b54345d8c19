"""Settling a claimed key: the coroutine of a tune, from the miss to the cache's answer.

A key a tuner claimed (``TuneCache.claim``: it is Pending and this tuner's) is settled here, in
this order: wait until no other tuner sharing the store tunes it (``coordinator.py``); take the
winner stored meanwhile; check a winner from elsewhere that this device never checked
(``tune/verify.py``); else measure the key (``tune/tuning.py``). A winner becomes a Hit, is kept
in the store and recorded; any failure leaves the key a Miss with its reason. What a tune
measures is the tune wing's; this is the tuner's side of it (the cache, the store, the records,
the events).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from .cache import TuneCache
from .config import Config, LogLevel
from .coordinator import Coordinator, WinnerFromElsewhere
from .errors import ConfigError, KernelError, WgtuneError, tune_failure
from .gpu.device import Device
from .key import Key
from .sets.args import Args
from .sets.tunable import TunableSet
from .state import Hit, TuneState, Unchecked
from .store.contract import WRITE_PENDING, Store
from .store.format import StoredEntry
from .store.record import RecordSink
from .tune.events import TuneFailedEvent, TuneFinished, TuneStarted
from .tune.log import TuneLog, logger
from .tune.measure import clone_args
from .tune.outcome import TuneOutcome
from .tune.pipelines import PipelineCache
from .tune.request import LaunchGuard, TuneRequest
from .tune.tuning import measure_key
from .tune.verify import misfit, verify_winner

__all__ = ["Settler", "TunerParts"]


class TunerParts(Protocol):
    """What settling a key reads of its tuner: each part has one owner, the tuner."""

    device: Device
    config: Config
    cache: TuneCache
    pipelines: PipelineCache
    store: Store | None
    records: RecordSink | None
    guard: LaunchGuard | None
    coordinator: Coordinator | None

    def _emit(self, event: object) -> None: ...


class Settler:
    """Claims keys for a tuner and settles them (see the module doc)."""

    def __init__(self, tuner: TunerParts) -> None:
        self.tuner = tuner

    @property
    def verify(self) -> bool:
        """Whether winners must be checked on this device (output checks on, not a dry run)."""
        config = self.tuner.config
        return config.checks and not config.dry_run

    def claim(self, tunables: TunableSet, key: Key) -> TuneState | None:
        """The key's answer when one is known, or None when the key is now Pending and this
        tuner's to settle (``TuneCache.claim``)."""
        cache, config = self.tuner.cache, self.tuner.config
        cache.look_up(tunables.name, key)  # a store read key by key: this key's entry, once
        stored = isinstance(cache.state(tunables.name, key), Unchecked)
        unchecked = self.verify and stored and cache.unchecked(tunables.name, key)
        state = cache.claim(tunables, key, self._pinned(tunables, key), require_checked=self.verify,
                            check_single=self.verify and tunables.reference is not None)
        if stored and state is None and config.log_level is not LogLevel.DISABLED:
            if unchecked:
                logger.info("stored winner for %s [%s] was not checked on this device: checking it", tunables.name,
                            key)
            else:
                logger.info("stored winner for %s [%s] is for other candidates or does not fit the key: tuning again",
                            tunables.name, key)
        return state

    def _pinned(self, tunables: TunableSet, key: Key) -> int | None:
        """The candidate pinned for ``key``, if any; a ConfigError where it does not fit the key as
        a tune's plan would admit it (``verify.misfit``: its priority here is negative, say a vec4
        kernel where 4 does not divide the size): it would run, and leave outputs unwritten."""
        pinned = self.tuner.config.pinned_index(tunables, key)
        if pinned is not None:
            why = misfit(tunables, key, pinned, self.tuner.device)
            if why is not None:
                raise ConfigError(f"pin for {tunables.name} [{key}] names {tunables.candidates[pinned].name}, which "
                                  f"does not fit this key: {why}; pin a candidate that does, or narrow the pin to "
                                  "the keys it fits (SET[field=value]=CANDIDATE)", field="WGTUNE_PIN")
        return pinned

    def snapshot(self, tunables: TunableSet, args: Args) -> Args:
        """The call's buffers as they are at the miss, copied for the tune (the set's ``input_gen``
        makes its own; a tune run inline takes the call as it is and copies only what a candidate
        may write, ``measure.clone_written``: nothing else runs before it ends). Copied now, not
        when the tune starts: in the page the fallback runs on the call's buffers before the tune's
        task does, and a copy made after it would hold the fallback's answer, which a candidate that
        leaves elements unwritten would then seem to give."""
        self.tuner.device.flush()  # a miss in a batch: the launches recorded before it come first
        if tunables.input_gen is not None or self.tuner.tunes_inline:
            return args
        return clone_args(self.tuner.device, args)

    async def settle(self, tunables: TunableSet, key: Key, args: Args, missed_at: float) -> TuneState:
        """Decide the claimed ``key`` on ``args``: the tune's own copy of the call, or the call
        itself where the tune runs inline (``snapshot``)."""
        coordinated, stored = await self._wait_for_others(tunables, key)
        try:
            if stored is not None and self.tuner.cache.take_stored(tunables, stored, require_checked=self.verify):
                self.tuner._emit(WinnerFromElsewhere(stored, announced=False))
                return Hit(stored.winner)
            unverified = self.tuner.cache.to_verify.pop((tunables.name, key), None)
            if unverified is not None and await self._verified(tunables, key, args, unverified):
                return Hit(unverified.winner)
            return await self._measure(tunables, key, args, missed_at)
        finally:
            if coordinated:
                await self._let_others_go(tunables, key)

    async def _verified(self, tunables: TunableSet, key: Key, args: Args, entry: StoredEntry) -> bool:
        """Check a winner not checked on this device (``verify.py``): when it passes, the key is a
        Hit and the store keeps it as checked (it is checked once), unless it is a bundle's seed:
        that stays in memory, checked for this process (``TuneCache.seed``: a newer bundle replaces
        it); when not, the caller tunes."""
        tuner = self.tuner
        name = tunables.candidates[entry.winner].name
        try:
            verify = tuner.guard.verify if tuner.guard is not None else verify_winner
            problem = await verify(tuner.device, tuner.pipelines, tunables, key, args, entry.winner)
        except Exception as error:  # the tune that follows meets it again, and says so
            problem = f"{type(error).__name__}: {error}"
        if problem is not None:
            logger.warning("winner %s of %s [%s], not checked on this device, is not used: %s; tuning the key",
                           name, tunables.name, key, problem)
            return False
        checked = replace(entry, checked=True)
        tuner.cache.finish(checked)
        if not tuner.cache.keep_seed_checked(checked):
            self.keep(checked)
        if tuner.config.log_level is not LogLevel.DISABLED:
            logger.info("winner %s of %s [%s] checked on this device: it serves", name, tunables.name, key)
        tuner._emit(WinnerFromElsewhere(checked, announced=False))
        return True

    async def _wait_for_others(self, tunables: TunableSet, key: Key) -> tuple[bool, StoredEntry | None]:
        """With a coordinator, wait until no other tuner tunes the key: whether this tune now holds
        it, and the entry stored for the key meanwhile. A coordinator that fails is logged and the
        tune goes on alone; a wait cancelled leaves the key a Miss."""
        coordinator = self.tuner.coordinator
        if coordinator is None:
            return False, None
        try:
            return True, await coordinator.acquire(tunables.name, key)
        except Exception as error:
            logger.warning("could not wait for other tuners of %s [%s] (%s): tuning it here", tunables.name, key, error)
            return False, None
        except BaseException:
            self.tuner.cache.fail(tunables.name, key)
            raise

    async def _let_others_go(self, tunables: TunableSet, key: Key) -> None:
        try:
            await self.tuner.coordinator.release(tunables.name, key)
        except Exception as error:  # the winner is kept either way
            logger.warning("could not let other tuners go on %s [%s]: %s", tunables.name, key, error)

    async def _measure(self, tunables: TunableSet, key: Key, args: Args, missed_at: float) -> TuneState:
        tuner = self.tuner
        log = TuneLog(tuner.config.log_level, tunables.name, key)
        request = TuneRequest(tuner.device, tuner.pipelines, tuner.config, tunables, key, args, tuner._emit,
                              log.step, tuner.cache.ruled_out.get((tunables.name, key)) or {},
                              snapshot=not tuner.tunes_inline)
        measure = tuner.guard.measure if tuner.guard is not None else measure_key
        try:
            tuner._emit(TuneStarted(tunables.name, key, len(tunables)))
            outcome = await measure(request)
        except BaseException as error:
            failure = tune_failure(tunables.name, key, error)
            # The failure is kept; the benchmark buffers its frames' locals hold need not be.
            traceback.clear_frames(error.__traceback__)
            tuner.cache.fail(tunables.name, key, failure)
            reason = str(failure) if isinstance(failure, WgtuneError) else f"{type(failure).__name__}: {failure}"
            log.failed(reason)
            tuner._emit(TuneFailedEvent(tunables.name, key, reason))
            if failure is error or isinstance(error, GeneratorExit):
                raise
            raise failure from error
        stored = self.keep(outcome.entry()) if not outcome.dry_run else False
        outcome = replace(outcome, wall=time.perf_counter() - missed_at, stored=stored)
        tuner.cache.finish(outcome.entry())
        self._write_record(outcome)
        log.finish(outcome)
        tuner._emit(TuneFinished(outcome))
        return Hit(outcome.winner)

    def pipeline_for_call(self, tunables: TunableSet, key: Key, args: Args, index: int,
                          retune: Callable[[TunableSet, Key, Args], TuneState]) -> tuple[int, Any]:
        """Candidate ``index``'s pipeline for a call, when it is not compiled yet: a winner known
        without a tune (stored, pinned, the only candidate). One that no longer compiles (the
        driver changed under the same identity) makes its key a Miss: natively it is tuned again
        at once, the broken candidate reported with its reason; on the event loop the fallback
        serves until the next call tunes it. A pinned candidate is the user's word: its failure
        is raised, not tuned around. ``retune`` claims and tunes the key again (``Tuner.check_tune``)."""
        tuner = self.tuner
        replaceable = tuner.config.pin_for(tunables.name, key) is None and len(tunables) > 1
        winner, name = index, tunables.candidates[index].name

        def broken_on_the_loop(error: BaseException) -> None:
            reason = f"stored winner {name} no longer compiles: {error}"
            logger.warning("%s [%s]: %s; the next call tunes it again", tunables.name, key, reason)
            if replaceable:
                tuner.cache.demote(tunables.name, key, winner, KernelError(reason))
            tuner._emit(TuneFailedEvent(tunables.name, key, reason))

        try:
            pipeline = tuner.pipelines.compile_for_call(tunables, index, broken_on_the_loop)
        except KernelError as error:
            if not replaceable:
                raise
            logger.warning("winner %s of %s [%s] no longer compiles (%s): tuning again",
                           name, tunables.name, key, error)
            tuner.cache.demote(tunables.name, key, index, error)
            state = retune(tunables, key, args)
            index = state.index if state.__class__ is Hit else tuner.pipelines.fallback(tunables)
            pipeline = tuner.pipelines.get(tunables.name, index)
        if pipeline is None:  # the winner compiles on the event loop: the fallback serves meanwhile
            index = tuner.pipelines.fallback(tunables)
            pipeline = tuner.pipelines.get(tunables.name, index)
        return index, pipeline

    def keep(self, entry: StoredEntry) -> bool | str:
        """Keep a key's winner in the store: True once written, ``"pending"`` while the store
        writes it in the background (IndexedDB), False when not kept (no store, or it failed)."""
        store = self.tuner.store
        if store is None:
            return False
        try:
            answer = store.save(entry)
        except Exception as error:
            if not getattr(error, "explained", False):  # a store that said why once is not repeated per winner
                logger.warning("could not store the winner of %s [%s]: %s", entry.set_name, entry.key, error)
            return False
        return WRITE_PENDING if answer == WRITE_PENDING else True

    def _write_record(self, outcome: TuneOutcome) -> None:
        records = self.tuner.records
        if records is None:
            return
        try:
            records.write(outcome.record())
        except Exception as error:  # a record lost must not lose the winner
            logger.warning("could not write the tune record of %s [%s]: %s", outcome.set_name, outcome.key, error)


