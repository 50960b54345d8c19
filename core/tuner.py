"""The tuner: answers which candidate runs a key, tuning it on the first miss.

Usage::

    tuner = Tuner(device, store=store)
    kernel = tuner.execute(my_set, Args(buffers, params))   # tunes on a miss, then runs the winner

The flow follows the seed (``tuner.rs``). :meth:`Tuner.fastest` is the hot path, a dict lookup.
:meth:`Tuner.check_tune`, under the lock, checks a stored winner against the set's checksum,
answers Hit or Pending, or marks the key Pending and starts a tune outside the lock. The tune is
a coroutine: natively it runs inline and answers Hit; in the browser it is a task on the event
loop and the answer is Pending. Whatever ends a tune, the key leaves Pending: a winner makes it
a Hit; any failure makes it a Miss again, with the reason kept in :attr:`Tuner.failures`.
"""

from __future__ import annotations

import inspect
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .benchmark import Bench, OutputCheck, clone_args
from .clock import measure_clock_grain
from .confidence import Confidence
from .config import Config, LogLevel
from .device import Device, check_limits
from .errors import ConfigError, KernelError, Launch, NoValidKernelFound, TuneFailed, Unknown, WgtuneError
from .events import TrialFinished, TuneFailedEvent, TuneFinished, TuneStarted
from .key import Key
from .log import TuneLog, logger
from .plan import Plan
from .record import RecordSink, TuneRecord
from .results import Result, result_to_json
from .runner import Spawner, default_spawner, run_inline
from .sampling import decide, sample, short_circuit_limit
from .state import MISS, PENDING, Hit, Pending, TuneState, Unchecked
from .store import Store, StoredEntry
from .tunable import Args, Kernel, TunableSet

__all__ = ["Tuner"]

# How many distinct raw keys a set remembers the Key of; past it the memo starts over.
KEY_MEMO_SIZE = 4096


@dataclass(frozen=True)
class _Request:
    """A tune about to run: everything it needs, and when the key missed."""

    tunables: TunableSet
    key: Key
    args: Args
    missed_at: float


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
    ) -> None:
        self.device = device
        self.config = config if config is not None else Config.from_env()
        self.store = store if self.config.cache else None
        self.records = records
        self.observer = observer
        self.failures: dict[tuple[str, Key], BaseException] = {}
        self._spawn = spawn if spawn is not None else default_spawner()
        self._lock = threading.Lock()
        self._tables: dict[str, dict[Key, TuneState]] = {}
        self._pipelines: dict[tuple[str, int], Any] = {}
        self._fallbacks: dict[str, int] = {}
        self._sets: dict[str, TunableSet] = {}  # the set each name last meant in this process
        self._key_memo: dict[str, dict[tuple, Key]] = {}
        self._tasks: set = set()
        self._compiling: set[tuple[str, int]] = set()
        if self.store is not None:
            try:
                loaded = self.store.load()
            except OSError as error:  # an unreadable cache is a miss, not a failure
                logger.warning("could not read the stored winners: %s", error)
                loaded = []
            for entry in loaded:
                self._tables.setdefault(entry.table, {})[entry.key] = Unchecked(entry.winner, entry.checksum)

    # -- the hot path -------------------------------------------------------------------------

    def fastest(self, tunables: TunableSet, key: Key) -> TuneState:
        """The key's state in this process: Hit, Miss, Pending or Unchecked. A dict lookup."""
        if self._sets.get(tunables.name) is not tunables:
            self._adopt(tunables)
        table = self._tables.get(tunables.name)
        return MISS if table is None else table.get(key, MISS)

    def key(self, tunables: TunableSet, args: Args) -> Key:
        """The autotune key of a call, memoised on the key function's raw answer."""
        raw = tuple(tunables.key_function(args).items())
        memo = self._key_memo.get(tunables.name)
        if memo is None:
            memo = self._key_memo[tunables.name] = {}
        try:
            key = memo.get(raw)
        except TypeError:  # an unhashable value: let Key say which field is wrong
            return Key(raw)
        if key is None:
            if len(memo) >= KEY_MEMO_SIZE:
                memo.clear()
            key = memo[raw] = Key(raw)
        return key

    def execute(self, tunables: TunableSet, args: Args) -> Kernel:
        """Run the key's winner on ``args``; tune first on a miss. Returns the kernel that ran.

        While the key is Pending (a tune in the event loop, or in another thread), the first
        candidate that works runs instead: the seed's fallback.
        """
        key = self.key(tunables, args)
        state = self.fastest(tunables, key)
        if state.__class__ is not Hit:
            state = self.check_tune(tunables, key, args)
        index = state.index if state.__class__ is Hit else self.fallback(tunables)
        pipeline = self._pipelines.get((tunables.name, index))
        if pipeline is None:
            try:
                pipeline = self._compile_for_call(tunables, index, key)
            except KernelError as error:
                index = self._replace_broken_winner(tunables, key, args, index, error)
                pipeline = self._pipelines.get((tunables.name, index))
            if pipeline is None:  # the winner compiles in the event loop: run the fallback meanwhile
                index = self.fallback(tunables)
                pipeline = self._pipelines[(tunables.name, index)]
        kernel = tunables.candidates[index]
        if not self.config.dry_run:
            self.device.dispatch(pipeline, args, kernel.grid(args))
        return kernel

    # -- deciding -----------------------------------------------------------------------------

    def check_tune(self, tunables: TunableSet, key: Key, args: Args) -> TuneState:
        """Answer Hit or Pending for ``key``, starting a tune if nothing is known yet.

        Natively the tune runs inline and this returns Hit (or raises NoValidKernelFound);
        with the browser's spawner it returns Pending at once.
        """
        decided = self._begin(tunables, key, args)
        if not isinstance(decided, _Request):
            return decided
        coro = self._tune(decided)
        try:
            return self._spawn(coro, self._tasks)
        except BaseException:
            if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:  # never ran: it reset nothing
                coro.close()
                with self._lock:
                    table = self._tables.setdefault(tunables.name, {})
                    if table.get(key) is PENDING:
                        table[key] = MISS
            raise

    async def tune_async(self, tunables: TunableSet, args: Args, key: Key | None = None) -> TuneState:
        """Like :meth:`check_tune`, awaiting the tune in the caller's event loop; answers Hit or Pending."""
        key = key if key is not None else self.key(tunables, args)
        decided = self._begin(tunables, key, args)
        if not isinstance(decided, _Request):
            return decided
        return await self._tune(decided)

    def _adopt(self, tunables: TunableSet) -> None:
        """Make ``tunables`` what its name means from now on in this process.

        Another set object with the same candidates changes nothing. Other candidates under a
        known name (a source edited in a notebook, say) void what was decided for the old ones:
        their Hits go back to Unchecked under the old checksum, so they are tuned again unless
        the old candidates come back, and their pipelines and fallback are dropped.
        """
        with self._lock:
            known = self._sets.get(tunables.name)
            self._sets[tunables.name] = tunables
            if known is None or known is tunables or known.checksum == tunables.checksum:
                return
            table = self._tables.get(tunables.name, {})
            for key, state in table.items():
                if isinstance(state, Hit):
                    table[key] = Unchecked(state.index, known.checksum)
            for slot in [slot for slot in self._pipelines if slot[0] == tunables.name]:
                del self._pipelines[slot]
            self._fallbacks.pop(tunables.name, None)

    def _begin(self, tunables: TunableSet, key: Key, args: Args) -> TuneState | _Request:
        if self._sets.get(tunables.name) is not tunables:
            self._adopt(tunables)
        with self._lock:
            table = self._tables.setdefault(tunables.name, {})
            state = table.get(key, MISS)
            if isinstance(state, Unchecked):
                state = self._validate(tunables, key, state)
                table[key] = state
            if isinstance(state, Pending):
                return state
            pinned = self.config.pin_for(tunables.name, key)
            if pinned is not None:
                index = tunables.index_of.get(pinned)
                if index is None:
                    raise ConfigError(
                        f"pin for {tunables.name} [{key}] names {pinned!r}, which is not a candidate; "
                        f"candidates: {', '.join(tunables.index_of)}"
                    )
                table[key] = state = Hit(index)
                return state
            if isinstance(state, Hit):
                return state
            if len(tunables) == 1:
                table[key] = state = Hit(0)  # nothing to compare: not benchmarked, not stored
                return state
            table[key] = PENDING
        return _Request(tunables, key, args, time.perf_counter())

    def _validate(self, tunables: TunableSet, key: Key, state: Unchecked) -> TuneState:
        if state.checksum == tunables.checksum and state.winner < len(tunables):
            return Hit(state.winner)
        if self.config.log_level is not LogLevel.DISABLED:
            logger.info("stored winner for %s [%s] is for other candidates: tuning again", tunables.name, key)
        return MISS

    # -- tuning -------------------------------------------------------------------------------

    async def _tune(self, request: _Request) -> TuneState:
        tunables, key = request.tunables, request.key
        log = TuneLog(self.config.log_level, tunables.name, key)
        try:
            return await self._benchmark_and_commit(request, log)
        except BaseException as error:
            failure = self._failure_of(tunables, key, error)
            # The failure is kept; the benchmark buffers its frames' locals hold need not be.
            traceback.clear_frames(error.__traceback__)
            with self._lock:
                table = self._tables.setdefault(tunables.name, {})
                if table.get(key) is PENDING:
                    table[key] = MISS
                self.failures[(tunables.name, key)] = failure
            reason = str(failure) if isinstance(failure, WgtuneError) else f"{type(failure).__name__}: {failure}"
            log.failed(reason)
            self._emit(TuneFailedEvent(tunables.name, key, reason))
            if failure is error or isinstance(error, GeneratorExit):
                raise
            raise failure from error

    @staticmethod
    def _failure_of(tunables: TunableSet, key: Key, error: BaseException) -> BaseException:
        """What a failed tune reports: wgtune's own errors as they are, anything else as TuneFailed.

        A KernelError here did not come from one candidate (those are values) but from the device
        as a whole, before the tune (work submitted earlier) or around it.
        """
        if isinstance(error, GeneratorExit):  # closed mid-tune: run_inline met a device that suspends
            return RuntimeError("the tune was stopped before it finished: its coroutine was closed")
        if not isinstance(error, Exception) or (isinstance(error, WgtuneError) and not isinstance(error, KernelError)):
            return error
        return TuneFailed(f"tune of {tunables.name} [{key}] failed: {type(error).__name__}: {error}")

    async def _benchmark_and_commit(self, request: _Request, log: TuneLog) -> TuneState:
        tunables, key, device, config = request.tunables, request.key, self.device, self.config
        self._emit(TuneStarted(tunables.name, key, len(tunables)))
        # Errors of work submitted before the tune must not be blamed on its candidates.
        await device.sync()
        await measure_clock_grain(device)  # once per device: the samples are sized to it
        if tunables.input_gen is not None:
            bench_args = tunables.input_gen(device, key, request.args)
        else:
            bench_args = clone_args(device, request.args)
        plan = Plan(tunables.candidates, key)
        check = None
        if config.checks and tunables.outputs and not config.dry_run:
            check = OutputCheck(
                device, tunables, bench_args, lambda i: self._pipeline(tunables, i), skipped=plan.skipped
            )

        def on_trial(index: int, result: Result, wall: float) -> None:
            self._emit(TrialFinished(tunables.name, key, index, result, wall))

        bench = Bench(device, tunables, bench_args, config, lambda i: self._pipeline(tunables, i), check, log.step)
        sampled = await sample(bench, plan, on_trial, short_circuit_limit(tunables, key))
        decision = decide(tunables, plan, sampled, config)
        if decision is None:
            raise NoValidKernelFound(tunables.name, key, tuple(sampled.all_results(tunables, plan)))
        results, order, winner = decision.results, decision.order, decision.winner
        short_circuit, confidence, trials = decision.short_circuit, decision.confidence, decision.trials
        with self._lock:
            self._tables.setdefault(tunables.name, {})[key] = Hit(winner)
            self.failures.pop((tunables.name, key), None)
        stored = self._store_winner(tunables, key, winner, results, confidence)
        record = TuneRecord(
            table=tunables.name,
            key=key,
            checksum=tunables.checksum,
            winner=winner,
            trials=tuple(trials),
            short_circuit=short_circuit,
            wall=time.perf_counter() - request.missed_at,
            dry_run=config.dry_run,
            stored=stored,
            confidence=confidence,
            policy=config.policy.value,
        )
        if self.records is not None:
            try:
                self.records.write(record)
            except Exception as error:  # a record lost must not lose the winner
                logger.warning("could not write the tune record of %s [%s]: %s", tunables.name, key, error)
        log.finish(results, order, confidence)
        self._emit(
            TuneFinished(
                tunables.name, key, winner, tunables.candidates[winner].name, stored, confidence, short_circuit
            )
        )
        return Hit(winner)

    def _store_winner(
        self, tunables: TunableSet, key: Key, winner: int, results: list[Result], confidence: Confidence | None
    ) -> bool:
        """Keep the winner in the store; a dry run measured nothing and keeps nothing."""
        if self.store is None or self.config.dry_run:
            return False
        entry = StoredEntry(
            table=tunables.name,
            key=key,
            checksum=tunables.checksum,
            winner=winner,
            winner_name=tunables.candidates[winner].name,
            results=tuple(result_to_json(result) for result in results),
            confidence=confidence,
            policy=self.config.policy.value,
        )
        try:
            self.store.save(entry)
        except Exception as error:
            logger.warning("could not store the winner of %s [%s]: %s", tunables.name, key, error)
            return False
        return True

    # -- pipelines and the fallback -----------------------------------------------------------

    async def _pipeline(self, tunables: TunableSet, index: int) -> Any:
        slot = (tunables.name, index)
        pipeline = self._pipelines.get(slot)
        if pipeline is None:
            pipeline = await self.device.compile(tunables.candidates[index])
            self._pipelines[slot] = pipeline
        return pipeline

    def _compile_for_call(self, tunables: TunableSet, index: int, key: Key) -> Any | None:
        """Compile a winner known without a tune (stored, pinned, single): inline natively;
        in the event loop as a task, answering None until it is ready (compiling suspends there).

        A winner that fails to compile in the event loop makes its key a Miss again, the reason
        kept in :attr:`failures`: the next call tunes it afresh (the broken candidate then shows
        as failed) instead of trying the same compile on every call.
        """
        if self._spawn is run_inline:
            return run_inline(self._pipeline(tunables, index))
        slot = (tunables.name, index)
        if slot not in self._compiling:
            self._compiling.add(slot)

            async def compile_winner() -> None:
                try:
                    await self._pipeline(tunables, index)
                except KernelError as error:
                    self._winner_broke(tunables, key, index, error)
                finally:
                    self._compiling.discard(slot)

            self._spawn(compile_winner(), self._tasks)
        return None

    def _winner_broke(self, tunables: TunableSet, key: Key, index: int, error: KernelError) -> None:
        name = tunables.candidates[index].name
        reason = f"stored winner {name} no longer compiles: {error}"
        logger.warning("%s [%s]: %s; the next call tunes it again", tunables.name, key, reason)
        with self._lock:
            table = self._tables.setdefault(tunables.name, {})
            if table.get(key) == Hit(index) and self.config.pin_for(tunables.name, key) is None:
                table[key] = MISS
            self.failures[(tunables.name, key)] = KernelError(reason)
        self._emit(TuneFailedEvent(tunables.name, key, reason))

    def _replace_broken_winner(
        self, tunables: TunableSet, key: Key, args: Args, index: int, error: KernelError
    ) -> int:
        """A winner known without a tune (stored) that no longer compiles: tune the key again.

        The driver may have changed under the same identity. The new tune reports the broken
        candidate with its reason and picks another. A pinned candidate is the user's word: its
        failure is raised, not tuned around.
        """
        name = tunables.candidates[index].name
        if self.config.pin_for(tunables.name, key) is not None or len(tunables) == 1:
            raise error
        logger.warning("winner %s of %s [%s] no longer compiles (%s): tuning again", name, tunables.name, key, error)
        with self._lock:
            table = self._tables.setdefault(tunables.name, {})
            if table.get(key) == Hit(index):
                table[key] = MISS
        state = self.check_tune(tunables, key, args)
        return state.index if state.__class__ is Hit else self.fallback(tunables)

    async def prepare(self, tunables: TunableSet) -> int:
        """Compile the set's fallback ahead of time (the browser does this before any call)."""
        index = self._fallbacks.get(tunables.name)
        if index is not None:
            return index
        errors: list = []
        for index, kernel in enumerate(tunables.candidates):
            problem = check_limits(kernel, self.device.limits, self.device.features)
            if problem:
                errors.append(Launch(kernel.name, problem))
                continue
            try:
                await self._pipeline(tunables, index)
            except KernelError as error:
                errors.append(Launch(kernel.name, f"compile failed: {error}"))
                continue
            except WgtuneError:
                raise
            except Exception as error:
                errors.append(Unknown(kernel.name, f"compile raised {type(error).__name__}: {error}"))
                continue
            self._fallbacks[tunables.name] = index
            return index
        raise NoValidKernelFound(tunables.name, "fallback", tuple(errors))

    def fallback(self, tunables: TunableSet) -> int:
        """The first candidate, in the set's order, that fits the device and compiles."""
        index = self._fallbacks.get(tunables.name)
        return index if index is not None else run_inline(self.prepare(tunables))

    # -- inspection ---------------------------------------------------------------------------

    def states(self, tunables: TunableSet | str) -> dict[Key, TuneState]:
        """A copy of every known key's state for a set."""
        name = tunables if isinstance(tunables, str) else tunables.name
        with self._lock:
            return dict(self._tables.get(name, {}))

    def forget(self, tunables: TunableSet, key: Key) -> None:
        """Drop what this process knows of a key (the store keeps its entry)."""
        with self._lock:
            self._tables.get(tunables.name, {}).pop(key, None)

    def _emit(self, event: object) -> None:
        if self.observer is not None:
            try:
                self.observer(event)
            except Exception as error:  # a broken progress bar must not break a tune
                logger.warning("tune observer failed: %s", error)
