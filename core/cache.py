"""The tune cache: what this process knows of every key of every set, and the one place it changes.

A key is in one of four states (see ``state.py``): Unchecked (loaded from the store, not yet
compared with the set's current candidates), Miss, Pending (a tune is running) and Hit. The
states change only through the named transitions below, each of which checks the state it
leaves; a transition asked of the wrong state is a bug in wgtune and raises
:class:`~wgtune.errors.IllegalTransition`::

    load/reload      (store)      -> Unchecked     (a Pending key keeps its running tune)
    look_up          (store)      -> Unchecked     (with a ``lookup``: one key's entry, read before
                                                   the key is first claimed, not all at load)
    seed             (bundle)     -> Unchecked     (a key the store has no winner for: see ``seed``;
                                                   on its claim a seed naming another candidate than
                                                   its index's is a Miss: ``bundle.misnamed``)
    claim            Unchecked    -> Hit | Miss    (checksum, index and plan checked; with checks on,
                                                   a winner not checked here is a Miss whose tune
                                                   verifies it first: ``to_verify``, ``verify.py``)
                     Miss         -> Pending       (the caller now runs the tune)
                     any but Pending -> Hit        (a pin, or a set of one candidate without a
                                                   reference to check it against)
    finish           Pending      -> Hit           (the tune's winner)
    take_stored      Pending      -> Hit           (the winner another tuner stored while this
                                                   one waited to tune the key: see
                                                   ``coordinator.py``; other candidates': no change)
    take_announced   any but Pending -> Hit        (a winner another tuner stored and announced, of
                                                   the set's current candidates; a set not adopted
                                                   here yet: Unchecked; else no change)
    fail             Pending      -> Miss          (the tune failed; the reason is kept)
    demote           Hit(i)       -> Miss          (winner i no longer compiles; a no-op if the
                                                   key has moved on meanwhile)
    adopt            Hit          -> Unchecked     (the set's candidates changed under its name)
    forget           any but Pending -> gone

Beside each decided key the cache keeps its :class:`~wgtune.store.format.StoredEntry` (from the store,
or from the tune that decided it here): every candidate's result and the confidence, which the
CLI and the page show without reading the store again.

The hot path takes no lock and makes no call: :attr:`TuneCache.states_by_set` and
:attr:`TuneCache.sets` are the cache's own dicts, which the tuner reads directly (two dict
lookups per call); only the transitions write them, each under the cache's lock, so threads
that miss the same key start one tune.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace

from .errors import CandidateError, IllegalTransition, NoValidKernelFound, StoreError
from .key import Key
from .sets.tunable import TunableSet
from .state import MISS, PENDING, Hit, Pending, TuneState, Unchecked
from .store.bundle import misnamed
from .store.format import StoredEntry
from .tune.log import logger
from .tune.verify import misfit

__all__ = ["TuneCache"]


class TuneCache:
    """Every key's state and stored entry, per set name, in this process (see the module doc)."""

    def __init__(self, entries: Iterable[StoredEntry] = ()) -> None:
        self._lock = threading.Lock()
        self.states_by_set: dict[str, dict[Key, TuneState]] = {}
        """``set name -> key -> state``: read it (the hot path does), never write it."""
        self.sets: dict[str, TunableSet] = {}
        """The set each name last meant in this process: read it, never write it."""
        self._entries: dict[tuple[str, Key], StoredEntry] = {}
        self.lookup: Callable[[str, Key], StoredEntry | None] | None = None
        """The store's ``lookup`` when the store is read key by key (``Store.read_by_key``, see
        ``store/contract.py``): stored winners are then read one key at a time, on the key's first
        claim, not all at load. None: the store is read whole (or there is none)."""
        self.failures: dict[tuple[str, Key], BaseException] = {}
        """Why the last tune of a key failed, until a tune of it succeeds."""
        self.ruled_out: dict[tuple[str, Key], dict[int, CandidateError]] = {}
        """Candidates a key's tunes do not launch again, each with the failure they get instead
        (the one whose first launch lost the device, say): ``(set name, key) -> index -> failure``."""
        self._seeds: dict[tuple[str, Key], StoredEntry] = {}
        self.to_verify: dict[tuple[str, Key], StoredEntry] = {}
        """Winners of the set's current candidates that were not checked on this device (a bundle's,
        an import's, one stored by a tune without checks), taken by :meth:`claim` with
        ``require_checked``: the tune of their key verifies them once (``verify.py``) before
        measuring anything."""
        self.load(entries)

    # -- the hot path -------------------------------------------------------------------------

    def state(self, set_name: str, key: Key) -> TuneState:
        """The key's state: a dict lookup, no lock."""
        table = self.states_by_set.get(set_name)
        return MISS if table is None else table.get(key, MISS)

    # -- loading ------------------------------------------------------------------------------

    def load(self, entries: Iterable[StoredEntry]) -> None:
        """Take stored winners as Unchecked. A key being tuned keeps its tune: it is settled by
        the tune's end, which stores its own answer."""
        with self._lock:
            for entry in entries:
                set_name, key = entry.slot
                table = self.states_by_set.setdefault(set_name, {})
                if table.get(key) is PENDING:
                    continue
                table[key] = Unchecked(entry.winner, entry.checksum)
                self._entries[entry.slot] = entry

    def reload(self, entries: Iterable[StoredEntry]) -> None:
        """Forget every key that is not being tuned, then :meth:`load` ``entries``: what the store
        says after an import or a clear. Running tunes go on and settle their keys; seeds stay
        (under what the store says)."""
        with self._lock:
            for set_name, table in self.states_by_set.items():
                for key in [key for key, state in table.items() if state is not PENDING]:
                    del table[key]
                    self._entries.pop((set_name, key), None)
        self.load(entries)
        self._plant()

    def seed(self, entries: Iterable[StoredEntry]) -> int:
        """Take winners tuned elsewhere (a bundle's, ``bundle.py``) for keys the store has none for.

        Each is Unchecked like a stored winner, so its first claim compares its checksum with the
        set's: a Hit, or a Miss (tuned as usual) when it was stored for other candidates. A winner
        stored here always wins: a key with a state keeps it, and with a :attr:`lookup` a seed
        waits behind the store until the key's first claim (:meth:`look_up`). Seeds are kept in
        memory only, never written to the store: the store holds what this device decided, and
        a newer bundle replaces an older one's winners without leftovers. Of two seeds for one
        key the later counts. Answers how many seeds are kept.
        """
        with self._lock:  # not checked on this device, whatever the device that tuned them said
            self._seeds.update((entry.slot, replace(entry, checked=False)) for entry in entries)
        self._plant()
        return len(self._seeds)

    def keep_seed_checked(self, entry: StoredEntry) -> bool:
        """Whether ``entry`` (a winner just checked on this device) stands for its key's seed:
        then the seed is kept checked, in memory, so this process checks it no more, and nothing
        is written to the store (see :meth:`seed`); else the caller stores it."""
        with self._lock:
            seed = self._seeds.get(entry.slot)
            if seed is None or (seed.winner, seed.checksum) != (entry.winner, entry.checksum):
                return False
            self._seeds[entry.slot] = replace(seed, checked=True)
            return True

    def _plant(self) -> None:
        """Seeds for keys without a state -> Unchecked, unless the store is read key by key (then
        :meth:`look_up` asks it first)."""
        if self.lookup is not None:
            return
        with self._lock:
            for slot, entry in self._seeds.items():
                table = self.states_by_set.setdefault(slot[0], {})
                if slot[1] not in table:
                    table[slot[1]] = Unchecked(entry.winner, entry.checksum)
                    self._entries[slot] = entry

    # -- transitions --------------------------------------------------------------------------

    def adopt(self, tunables: TunableSet) -> bool:
        """Make ``tunables`` what its name means from now on; True if that voids what was decided.

        Another set object with the same candidates changes nothing. Other candidates under a
        known name (a source edited in a notebook, say) void the old ones' Hits: they go back to
        Unchecked under the old checksum, so they are tuned again unless the old candidates come
        back. The caller drops the old candidates' pipelines.
        """
        with self._lock:
            known = self.sets.get(tunables.name)
            self.sets[tunables.name] = tunables
            if known is None or known is tunables or known.checksum == tunables.checksum:
                return False
            for slot in [slot for slot in self.failures if slot[0] == tunables.name]:
                del self.failures[slot]  # other candidates may work where these all failed
            table = self.states_by_set.get(tunables.name, {})
            for key, state in table.items():
                if isinstance(state, Hit):
                    table[key] = Unchecked(state.index, known.checksum)
            return True

    def claim(
        self, tunables: TunableSet, key: Key, pinned: int | None = None, require_checked: bool = False,
        check_single: bool = False,
    ) -> TuneState | None:
        """The key's answer, or None when the caller is to tune it (the key is Pending from now).

        An Unchecked key is checked against the set's checksum first: Hit when it matches, else a
        Miss; with ``require_checked`` (the caller runs output checks) also a Miss when its winner
        was stored by a tune without them, so that a tune with them verifies it, once. A Pending
        key answers Pending (another caller's tune runs). Otherwise ``pinned`` (a candidate's
        index the configuration pins) is a Hit; so is candidate 0 of a set of one, unless
        ``check_single`` (checks on and a reference to hold it to): then it is tuned, i.e. checked.
        A key whose last tune found no valid kernel raises that NoValidKernelFound again instead
        of tuning: the same candidates fail the same way, until the set changes (:meth:`adopt`)
        or the key is forgotten (:meth:`forget`, a retune).
        """
        with self._lock:
            table = self.states_by_set.setdefault(tunables.name, {})
            state = table.get(key, MISS)
            if isinstance(state, Unchecked):
                state = table[key] = self._checked(tunables, key, require_checked)
            if isinstance(state, Pending):
                return state
            if pinned is not None:
                table[key] = state = Hit(pinned)
                return state
            if isinstance(state, Hit):
                return state
            if len(tunables) == 1 and not check_single:
                table[key] = state = Hit(0)  # nothing to compare: not benchmarked, not stored
                return state
            failed = self.failures.get((tunables.name, key))
            if isinstance(failed, NoValidKernelFound):  # every candidate failed: tuning again gives the same
                raise NoValidKernelFound(failed.set_name, failed.key, failed.errors)
            table[key] = PENDING
            return None

    def look_up(self, set_name: str, key: Key) -> None:
        """Read an unknown key's stored entry through :attr:`lookup` (Unchecked from now on), before
        it is claimed, or else its seed (:meth:`seed`); nothing for a known key or without a
        lookup. A store that cannot be read is a miss (a tune), as at load, unless seeded."""
        if self.lookup is None or key in self.states_by_set.get(set_name, {}):
            return
        try:
            entry = self.lookup(set_name, key)
        except (OSError, StoreError) as error:
            logger.warning("could not read the stored winner of %s [%s]: %s", set_name, key, error)
            entry = None
        if entry is None:
            entry = self._seeds.get((set_name, key))
        if entry is None:
            return
        with self._lock:  # another thread may have claimed the key meanwhile: its state stands
            table = self.states_by_set.setdefault(set_name, {})
            if key not in table:
                table[key] = Unchecked(entry.winner, entry.checksum)
                self._entries[entry.slot] = entry

    def _checked(self, tunables: TunableSet, key: Key, require_checked: bool) -> TuneState:
        answer = self.answer(tunables, key, require_checked)
        if answer is MISS:
            problem = self._misnamed_seed(tunables, key)
            if problem is not None:
                logger.warning("%s", problem)
            entry = self._entries.pop((tunables.name, key), None)  # its results are of other candidates
            if entry is not None and require_checked and problem is None:
                if self.answer_for(tunables, key, entry) is not MISS:
                    self.to_verify[(tunables.name, key)] = entry  # only unchecked: verified before it serves
                elif entry.checksum == tunables.checksum:  # for these candidates, and still no fit: say why
                    why = (f"its index {entry.winner} is none of the set's {len(tunables)} candidates"
                           if not 0 <= entry.winner < len(tunables) else misfit(tunables, key, entry.winner))
                    logger.warning("the winner %s of %s [%s] from elsewhere is not used: %s; tuning the key",
                                   entry.winner_name, tunables.name, key, why)
        return answer

    def _misnamed_seed(self, tunables: TunableSet, key: Key) -> str | None:
        """Why the key's seed (a bundle's winner, not a stored one) of ``tunables``' current
        candidates names another candidate than its index points to (``bundle.misnamed``), or None."""
        slot = (tunables.name, key)
        entry = self._entries.get(slot)
        if entry is None or entry is not self._seeds.get(slot) or entry.checksum != tunables.checksum:
            return None
        return misnamed(entry, tunables)

    def finish(self, entry: StoredEntry) -> None:
        """Pending -> Hit: the tune of ``entry``'s key chose ``entry.winner``."""
        set_name, key = entry.slot
        with self._lock:
            self._leave_pending(set_name, key, Hit(entry.winner))
            self._entries[entry.slot] = entry
            self.failures.pop(entry.slot, None)

    def take_stored(self, tunables: TunableSet, entry: StoredEntry, require_checked: bool = False) -> bool:
        """Pending -> Hit: while this process waited to tune ``entry``'s key, another tuner stored
        ``entry`` for it; the key takes it when it fits ``tunables``' current candidates (see
        :meth:`fits`) and answers True. Otherwise nothing changes (False): the caller tunes."""
        set_name, key = entry.slot
        if set_name != tunables.name or not self.fits(tunables, entry, require_checked):
            return False
        with self._lock:
            self._leave_pending(set_name, key, Hit(entry.winner))
            self._entries[entry.slot] = entry
            self.failures.pop(entry.slot, None)
        return True

    def take_announced(self, entry: StoredEntry, require_checked: bool = False) -> bool:
        """Another tuner stored ``entry`` and said so: its key runs that winner from now on.

        Any state but Pending -> Hit(``entry.winner``) when the entry fits the candidates the
        set's name means here (see :meth:`fits`); for a set this process has not adopted yet,
        -> Unchecked, checked on the key's first claim as a loaded winner is. A Pending key is
        left to its tune, and an entry of other candidates changes nothing. True when the key
        changed.
        """
        set_name, key = entry.slot
        with self._lock:
            table = self.states_by_set.setdefault(set_name, {})
            state = table.get(key, MISS)
            if state is PENDING:
                return False
            tunables = self.sets.get(set_name)
            if tunables is None:
                table[key] = Unchecked(entry.winner, entry.checksum)
            elif self.fits(tunables, entry, require_checked):
                table[key] = Hit(entry.winner)
            else:
                return False
            self._entries[entry.slot] = entry
            self.failures.pop(entry.slot, None)
            return table[key] != state

    @staticmethod
    def fits(tunables: TunableSet, entry: StoredEntry, require_checked: bool = False) -> bool:
        """Whether ``entry``'s winner can serve ``tunables``: stored for its current candidates
        (checksum), naming one of them; with ``require_checked``, by a tune with output checks."""
        return (TuneCache.answer_for(tunables, entry.key, entry) is not MISS
                and (entry.checked or not require_checked))

    def fail(self, set_name: str, key: Key, failure: BaseException | None = None) -> None:
        """Pending -> Miss: the tune failed (``failure`` is kept), or never started."""
        with self._lock:
            self._leave_pending(set_name, key, MISS)
            if failure is not None:
                self.failures[(set_name, key)] = failure

    def _leave_pending(self, set_name: str, key: Key, to: TuneState) -> None:
        table = self.states_by_set.setdefault(set_name, {})
        state = table.get(key, MISS)
        if state is not PENDING:
            raise IllegalTransition(f"{set_name} [{key}] is {state!r}, not Pending: only its tune settles it")
        table[key] = to

    def demote(self, set_name: str, key: Key, index: int, failure: BaseException) -> bool:
        """Hit(index) -> Miss: winner ``index`` no longer compiles; the next call tunes the key.

        The compile that found it may have run while the key moved on (tuned again, pinned): then
        nothing changes and this answers False. ``failure`` is kept either way.
        """
        with self._lock:
            self.failures[(set_name, key)] = failure
            table = self.states_by_set.setdefault(set_name, {})
            if table.get(key) != Hit(index):
                return False
            table[key] = MISS
            return True

    def rule_out(self, set_name: str, key: Key, index: int, failure: CandidateError) -> None:
        """From now on, tunes of ``key`` give candidate ``index`` ``failure`` instead of launching it."""
        with self._lock:
            self.ruled_out.setdefault((set_name, key), {})[index] = failure

    def forget(self, set_name: str, key: Key) -> None:
        """Drop what this process knows of a key (the store keeps its entry). A key being tuned
        cannot be forgotten: its tune is what settles it."""
        with self._lock:
            table = self.states_by_set.get(set_name, {})
            if table.get(key) is PENDING:
                raise IllegalTransition(f"{set_name} [{key}] is being tuned: it cannot be forgotten now")
            table.pop(key, None)
            self._entries.pop((set_name, key), None)
            self.failures.pop((set_name, key), None)

    # -- inspection ---------------------------------------------------------------------------

    def answer(self, tunables: TunableSet, key: Key, require_checked: bool = False) -> TuneState:
        """The key's state, an Unchecked one as the Hit or Miss that :meth:`claim` would make of
        it: what a caller would be told. Changes nothing."""
        state = self.state(tunables.name, key)
        if isinstance(state, Unchecked):
            valid = self.answer_for(tunables, key, state) is not MISS and self._misnamed_seed(tunables, key) is None
            if valid and require_checked:
                valid = not self.unchecked(tunables.name, key)
            return Hit(state.winner) if valid else MISS
        return state

    @staticmethod
    def answer_for(tunables: TunableSet, key: Key, stored: Unchecked | StoredEntry) -> TuneState:
        """Hit when a winner stored as ``stored`` can serve ``key`` of ``tunables``: stored for its
        current candidates (checksum), naming one of them that the plan admits for the key (see
        ``verify.misfit``); else MISS."""
        if stored.checksum != tunables.checksum or not 0 <= stored.winner < len(tunables):
            return MISS
        return Hit(stored.winner) if misfit(tunables, key, stored.winner) is None else MISS

    def unchecked(self, set_name: str, key: Key) -> bool:
        """Whether the key's stored winner was stored by a tune without output checks."""
        entry = self._entries.get((set_name, key))
        return entry is not None and not entry.checked

    def states(self, set_name: str) -> dict[Key, TuneState]:
        """A copy of every known key's state of a set."""
        with self._lock:
            return dict(self.states_by_set.get(set_name, {}))

    def entry(self, tunables: TunableSet, key: Key) -> StoredEntry | None:
        """The key's stored entry (every candidate's result, the confidence), when it was tuned
        with ``tunables``' current candidates."""
        entry = self._entries.get((tunables.name, key))
        if entry is None and self.lookup is not None:  # never claimed here: ask the store
            try:
                entry = self.lookup(tunables.name, key)
            except (OSError, StoreError):
                entry = None
        return entry if entry is not None and entry.checksum == tunables.checksum else None
