"""Ending a page's session (``wgtune.dispose()`` in ``web/wgtune.js``): what it leaves behind.

An app that loads wgtune for a while (a tuning screen, a test) and then drops it must get its
resources back: the event loop's tunes, the IndexedDB writes still queued, the GPU buffers wgtune
made on the app's device. :func:`dispose_session` ends them in that order:

1. the running tunes are cancelled and awaited (a tune's cleanup still lets the other tabs have
   its key's Web Lock, and leaves the key a Miss);
2. the store's queued writes are flushed: a winner tuned before the dispose is kept;
3. the buffers of the keys the page registered (their calls, made by wgtune with ``make_args``,
   and what each call's cache holds: uniforms, scratch) are destroyed; the app's own buffers,
   those of sets defined from JavaScript, are the app's and stay;
4. IndexedDB's connection and the tabs' channel close (``web/idb.js``'s and ``web/tabs.js``'s
   ``close``): another load of wgtune on the same database opens its own;
5. the session's tuner, store and database become :class:`Disposed`: any later use, through a set
   handle the app kept, say, raises a WgtuneError saying the session was disposed, instead of an
   error from deep inside.

Refusing the API's calls and destroying a device wgtune opened are the JS half's
(``web/lifecycle.js``). Pure Python over the session's attributes, so it is tested natively
(``tests/test_page_clear_dispose.py``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from wgtune.errors import WgtuneError

__all__ = ["DISPOSED_MESSAGE", "Disposed", "dispose_session", "is_disposed"]

logger = logging.getLogger("wgtune")

DISPOSED_MESSAGE = "wgtune was disposed: load it again with loadWgtune() to tune"

# Long enough for a cancelled tune's cleanup (a lock released once its write committed); a tune
# whose GPU work never answers is left to the loop rather than hold the dispose forever.
CANCEL_WAIT = 10.0


class Disposed:
    """What a disposed session holds instead of its tuner, store and database: every attribute
    asked of it raises a WgtuneError with :data:`DISPOSED_MESSAGE`."""

    def __getattr__(self, name: str) -> Any:
        raise WgtuneError(DISPOSED_MESSAGE)

    def __repr__(self) -> str:
        return "Disposed()"


DISPOSED = Disposed()


def is_disposed(session: Any) -> bool:
    return isinstance(getattr(session, "tuner", None), Disposed)


async def dispose_session(session: Any, *, wait: float = CANCEL_WAIT) -> int:
    """End ``session`` (a ``PageSession``; see the module doc); how many running tunes were
    cancelled. A second call does nothing and answers 0."""
    if is_disposed(session):
        return 0
    tuner, store, idb = session.tuner, session.store, session.idb
    session.tuner = session.store = session.idb = DISPOSED  # no new work from here on
    # The tuner keeps its tasks for itself (Tuner has no public cancel yet): the set is only read.
    running = [task for task in getattr(tuner, "_tasks", ()) if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=wait)
    if store is not None:
        try:
            await store.flush()
        except Exception as error:  # already reported as its "stored" event; the dispose goes on
            logger.warning("wgtune dispose: a winner could not be written to IndexedDB: %s", error)
    for problem in session.problems.values():
        release_call(problem.args)
    session.problems.clear()
    session.cases = []
    session.seeds = []
    coordinator = getattr(session, "coordinator", None)
    for helpers in (idb, getattr(coordinator, "tabs", None)):
        close = getattr(helpers, "close", None)
        if callable(close):
            close()
    return len(running)


def release_call(args: Any) -> None:
    """Destroy the GPU buffers of a call wgtune made: its buffers and its cache's (uniforms,
    scratch); bind groups have nothing to destroy and are dropped with the call."""
    for value in (*args.buffers, *args.cache.values()):
        destroy = getattr(value, "destroy", None)
        if callable(destroy):
            try:
                destroy()
            except Exception as error:  # a buffer destroyed twice, a lost device: nothing to give back
                logger.debug("wgtune dispose: could not destroy %r: %s", value, error)
    args.cache.clear()
