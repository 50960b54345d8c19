"""Tabs of one browser that share one IndexedDB and cooperate: a key is tuned in one tab only,
and every tab runs its winner without a reload.

- **Web Locks**: :class:`TabCoordinator` is the tuner's coordinator (``wgtune.coordinator``). A
  tab about to tune a key first takes the lock of ``[namespace, set, key]``; a tab asking for the
  same key meanwhile waits on it (its key stays Pending, its fallback runs), then reads the key's
  record: the first tab's winner, which it takes as a Hit without tuning. The lock is released
  only once the winner's write has committed, so the next holder finds it.
- **BroadcastChannel**: when a tab's winners are written it announces them (their slots, not their
  text: IndexedDB stays the one source); the other tabs of the namespace read those records and
  switch their keys to them (``Tuner.take_announced``). An import or a clear is announced as
  "replaced": the other tabs read their namespace again.

The JS half is ``web/tabs.js``: ``hold(name)`` resolves, once the lock is granted, to a function
that releases it; ``announce(text)``; ``listen(callback)``. Anything with those methods works, so
this is tested natively on fakes (``tests/test_indexeddb_tabs.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from wgtune.errors import StoreError
from wgtune.key import Key
from wgtune.store.format import StoredEntry
from wgtune.text import shown

from .indexeddb import IndexedDBStore

__all__ = ["TabCoordinator"]

logger = logging.getLogger("wgtune")

STORED = "stored"
"""An announcement: these slots of this namespace were written (``{kind, namespace, slots}``)."""
REPLACED = "replaced"
"""An announcement: an import or a clear rewrote the store (``{kind}``): read it again."""


def _callable_from_js(function: Callable) -> Any:
    """``function`` as JS may keep and call later (a proxy in Pyodide; itself natively)."""
    try:
        from pyodide.ffi import create_proxy
    except ImportError:
        return function
    return create_proxy(function)


def _release_once_granted(granted: asyncio.Future) -> None:
    """A lock granted after its waiter was cancelled: let it go at once, or no tab gets it again."""
    if not granted.cancelled() and granted.exception() is None:
        granted.result()()


class TabCoordinator:
    """Tunes each key in one tab and tells the others (see the module doc).

    ``store`` is the tab's store of the namespace; the page sets it again when it reads the
    store anew (after an import, say).
    """

    def __init__(self, tabs: Any, store: IndexedDBStore | None = None) -> None:
        self.tabs = tabs
        self.store = store
        self._held: dict[tuple[str, Key], Any] = {}
        self._hearing: set[asyncio.Task] = set()
        self._listener: Any = None

    def __repr__(self) -> str:
        return f"TabCoordinator({self.store!r})"

    def lock_name(self, set_name: str, key: Key) -> str:
        """The Web Lock of one key: its record's key, as JSON."""
        return json.dumps([self.store.record_key, set_name, key.to_json()], ensure_ascii=False)

    # -- the coordinator ----------------------------------------------------------------------

    async def acquire(self, set_name: str, key: Key) -> StoredEntry | None:
        """Wait for the key's lock; then the entry IndexedDB holds for it (another tab's winner),
        None when there is none or it cannot be read (this tab then tunes, holding the lock)."""
        granted = asyncio.ensure_future(self.tabs.hold(self.lock_name(set_name, key)))
        try:
            release = await asyncio.shield(granted)
        except asyncio.CancelledError:
            granted.add_done_callback(_release_once_granted)
            raise
        self._held[(set_name, key)] = (release, self.store)
        try:
            return await self.store.read(set_name, key)
        except Exception as error:  # IndexedDB unreadable: a miss, as at load
            logger.warning("could not read the stored winner of %s [%s]: %s", set_name, key, error)
            return None

    async def release(self, set_name: str, key: Key) -> None:
        """Let the next tab have the key, once this tab's writes so far have committed: the store's
        it held the key with and, where another tab's import or clear made this tab read its store
        anew meanwhile, the new one's (the winner may be written through either)."""
        held = self._held.pop((set_name, key), None)
        if held is None:
            return
        release, store = held
        try:
            await store.settled()
            if self.store is not store:
                await self.store.settled()
        finally:
            release()

    # -- announcements ------------------------------------------------------------------------

    def announce_stored(self, entries: Iterable[StoredEntry]) -> None:
        """Tell the other tabs these winners are written (call once their write committed)."""
        slots = [[entry.set_name, entry.key.to_json()] for entry in entries]
        if slots:
            self.tabs.announce(json.dumps({"kind": STORED, "namespace": self.store.record_key, "slots": slots},
                                          ensure_ascii=False))

    def announce_replaced(self) -> None:
        """Tell the other tabs an import or a clear rewrote the store."""
        self.tabs.announce(json.dumps({"kind": REPLACED}))

    def listen(self, take: Callable[[StoredEntry], object], reread: Callable[[], Awaitable[None]]) -> None:
        """Hear the other tabs: ``take(entry)`` each announced winner of this namespace, as
        IndexedDB holds it; ``await reread()`` after another tab's import or clear."""

        def heard(text: str) -> None:
            task = asyncio.ensure_future(self.heard(str(text), take, reread))
            self._hearing.add(task)
            task.add_done_callback(self._hearing.discard)

        self._listener = _callable_from_js(heard)  # kept: JS calls it for as long as the page lives
        self.tabs.listen(self._listener)

    async def heard(self, text: str, take: Callable[[StoredEntry], object],
                    reread: Callable[[], Awaitable[None]]) -> None:
        """Act on one announcement (see :meth:`listen`); a malformed one is logged and ignored."""
        try:
            message = json.loads(text)
            kind = message["kind"]
            if kind == REPLACED:
                await reread()
            elif kind == STORED and message["namespace"] == self.store.record_key:
                for set_name, key_text in message["slots"]:
                    entry = await self.store.read(str(set_name), Key.from_json(key_text))
                    if entry is not None:
                        take(entry)
        except (ValueError, TypeError, KeyError, StoreError) as error:
            logger.warning("ignoring another tab's announcement %s: %s", shown(text, 200), error)
        except Exception as error:  # IndexedDB unreadable: this tab tunes on its own when asked
            logger.warning("could not take another tab's winners: %s", error)
