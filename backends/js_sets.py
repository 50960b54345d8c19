"""Tunable sets defined from JavaScript, tuned and run on the page's own buffers.

A web app describes its kernels as plain JavaScript (``wgtune.defineSet({...})`` in
``web/sets.js``; every field in ``js_set_spec.py``) and calls them with its own ``GPUBuffer``\\s
and params on every call; no Python of its own. :class:`JsSet` answers ``check``/``execute``/
``settle`` for one such set, each call's ``{buffers, params}`` made into :class:`~wgtune.Args`
and checked first: a call that cannot run is refused, naming what is wrong, before any tune.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from wgtune.errors import ConfigError, IllegalTransition, LaunchRefused, NoValidKernelFound, WgtuneError
from wgtune.key import Key
from wgtune.sets.args import Args
from wgtune.sets.tunable import TunableSet
from wgtune.state import Hit, Miss, Pending
from wgtune.store.results import result_to_json

from .call_launches import CALL_NAME
from .js_calls import RECENT_CALLS, RecentCalls
from .js_errors import concerning, failed_answer
from .js_set_spec import Calls, tunable_set
from .page_events import execute_saying_start
from .page_settings import settle_timeout

__all__ = ["RECENT_CALLS", "JsSet", "define_set"]


def define_set(session: Any, spec: Any, to_js: Callable[[Any], Any] = lambda value: value) -> JsSet:
    """The set ``spec`` describes (``js_set_spec.py``), on ``session`` (a ``PageSession``); a
    ConfigError that names the field when something is wrong, or when the page has a set of that
    name with other candidates (its winners would be another set's).

    The name is taken here, before the fallback compiles (``JsSet.prepare``), so that a second
    definition with other candidates is refused even while the first is still compiling, or was
    never used (``session.js_sets``); the same candidates again are the same set, a handle of its
    own. A definition whose fallback does not compile gives the name back."""
    tunables, calls = tunable_set(spec, to_js)
    known = session.js_sets.get(tunables.name) or session.tuner.cache.sets.get(tunables.name)
    if known is not None and known.checksum != tunables.checksum:
        raise ConfigError(f"set {tunables.name!r} is defined already on this page, with other candidates: "
                          "give this one another name (winners are kept under a set's name), or reload the page "
                          "to replace it", field="name")
    session.js_sets.setdefault(tunables.name, tunables)
    return JsSet(session, tunables, calls)


class JsSet:
    """One set defined from JavaScript, on a page session: its calls' states, runs and waits,
    answered as JSON text (what ``web/sets.js`` parses)."""

    javascript_facing = True  # what it answers to JavaScript is wrapped so (js_errors.Facing)

    def __init__(self, session: Any, tunables: TunableSet, calls: Calls) -> None:
        self.session = session
        self.tunables = tunables
        self._calls = calls
        self._recent = RecentCalls(tunables)

    @property
    def name(self) -> str:
        return self.tunables.name

    @property
    def javascript_set_name(self) -> str:
        """The set the handle's errors name to JavaScript (``set``) where they name none (js_errors.Facing)."""
        return self.tunables.name

    def candidate_names(self) -> list[str]:
        return [kernel.name for kernel in self.tunables.candidates]

    def args(self, call: Any) -> Args:
        """A JavaScript call ``{buffers, params}`` as Args; a ConfigError where it cannot run (``js_calls.py``)."""
        return self._recent.args(call)

    async def prepare(self) -> str:
        """Compile the set's fallback (``wgtune.defineSet`` awaits it): its name. NoValidKernelFound,
        with each candidate's compiler message, where none compiles on this device."""
        names, tuner = self.session.js_sets, self.session.tuner
        try:
            index = await tuner.prepare(self.tunables)
        except BaseException:
            if names.get(self.name) is self.tunables:  # never defined: the name is free again,
                del names[self.name]
                if self.name not in tuner.cache.sets:  # and its compiles (by name) not the next set's
                    tuner.pipelines.drop(self.name)
            raise
        names.setdefault(self.name, self.tunables)  # the same candidates defined meanwhile may have failed
        return self.tunables.candidates[index].name

    def _answer(self, key: Key) -> dict:
        tuner = self.session.tuner
        state = tuner.cache.answer(self.tunables, key)
        answer: dict[str, Any] = {"set": self.name, "key": dict(key), "state": type(state).__name__}
        if isinstance(state, Hit):
            answer["winner"] = self.tunables.candidates[state.index].name
        failure = tuner.failures.get((self.tunables.name, key))
        if failure is not None and not isinstance(state, (Hit, Pending)):
            answer.update(failed_answer(state, failure))
        return answer

    def check(self, call: Any) -> str:
        """The call's key's state; on a miss the tune starts (on the event loop) and this says
        Pending; a key whose candidates all failed says Failed (and why) without a tune. A call
        that cannot run is a ConfigError, one WebGPU would refuse (``Device.check_call``)
        LaunchRefused: neither is tuned."""
        args = self.args(call)
        tuner = self.session.tuner
        key = tuner.key(self.tunables, args)
        with concerning(key):
            if not isinstance(tuner.fastest(self.tunables, key), Hit):
                try:  # a call WebGPU would refuse is not tuned: its error is the caller's
                    tuner.device.check_call(self.tunables.for_key(key).candidates[0], args)
                except LaunchRefused as error:
                    raise LaunchRefused(f"set {self.name!r} [{key}]: {error}") from None
                try:
                    state = tuner.check_tune(self.tunables, key, args)
                except NoValidKernelFound:  # remembered from an earlier tune: the answer says Failed
                    return json.dumps(self._answer(key))
                if isinstance(state, Pending):
                    self.session.notify_pending(self.name, key)
            return json.dumps(self._answer(key))

    def execute(self, call: Any) -> str | Awaitable[str]:
        """Run the key's winner on the call (the fallback while it is Pending, starting a tune on
        a miss); which ran. The launch is encoded (or recorded into an open batch,
        ``web/batch.js``) before this returns, once the set's fallback is compiled; before that
        (the first calls of a page load) the answer is an awaitable that compiles it, then
        launches. JavaScript gets a promise of the answer either way.

        A launch WebGPU refuses is this call's LaunchRefused: raised here where the call's
        buffers or grid show it; for the call's first launch on its buffers, where only WebGPU
        can tell (a destroyed buffer, another device's), the answer is an awaitable instead,
        which raises WebGPU's refusal once its error scope closes (``set.execute`` awaits it).
        A key whose candidates all failed raises NoValidKernelFound: there is nothing to run.
        Each error raised once the call's key is known names it (``js_errors.concerning``)."""
        args = self.args(call)
        if not self.session.tuner.pipelines.ready(self.tunables):
            return self._when_ready(args)
        return self._run(args)

    def _run(self, args: Args) -> str | Awaitable[str]:
        tuner = self.session.tuner
        key = tuner.key(self.tunables, args)
        with concerning(key):
            kernel = execute_saying_start(tuner, self.tunables, key, args,
                                          lambda: self.session.notify_pending(self.name, key))
        if CALL_NAME not in args.cache:  # what a batch's refusal names the call by
            args.cache[CALL_NAME] = f"set {self.name!r} [{key}]"
        take = getattr(tuner.device, "take_launch_scope", None)
        scope = take(args) if take is not None else None
        if scope is None:
            return json.dumps({**self._answer(key), "ran": kernel.name})
        return self._after_scope(scope, key, kernel.name)

    async def _when_ready(self, args: Args) -> str:
        with concerning(self.session.tuner.key(self.tunables, args)):  # no fallback: nothing runs for the call
            await self.session.tuner.prepare(self.tunables)
        answer = self._run(args)
        return answer if isinstance(answer, str) else await answer

    async def _after_scope(self, scope: Awaitable[None], key: Key, ran: str) -> str:
        """The answer of a call's first launch, once WebGPU validated it; its refusal raised as
        LaunchRefused naming the set and key."""
        with concerning(key):
            try:
                await scope
            except LaunchRefused as error:
                raise LaunchRefused(f"set {self.name!r} [{key}]: {error}") from None
        return json.dumps({**self._answer(key), "ran": ran})

    async def settle(self, call: Any, timeout: float = 600.0) -> str:
        """The call's key's state once it is no longer Pending: a miss is tuned first (as
        :meth:`check` starts it), a tune under way is waited for. A WgtuneError past ``timeout`` s."""
        timeout = settle_timeout(timeout)
        args = self.args(call)
        tuner = self.session.tuner
        key = tuner.key(self.tunables, args)
        if isinstance(tuner.fastest(self.tunables, key), Miss):
            self.check(call)
        deadline = time.monotonic() + timeout
        with concerning(key):
            while isinstance(tuner.fastest(self.tunables, key), Pending):
                if time.monotonic() > deadline:
                    raise WgtuneError(f"{self.name} [{key}] still Pending after {timeout} s")
                await asyncio.sleep(0.02)
        return json.dumps(self._answer(key))

    def retune(self, call: Any) -> str:
        """Forget what this page load decided for the call's key (a winner, or a failure: the
        store keeps its entry) and tune it again: its state, Pending while the tune runs. A key
        being tuned is left to that tune."""
        args = self.args(call)
        tuner = self.session.tuner
        key = tuner.key(self.tunables, args)
        try:
            tuner.forget(self.tunables, key)
        except IllegalTransition:  # a tune of it runs now: that tune's answer stands
            return json.dumps(self._answer(key))
        return self.check(call)

    def results(self, call: Any) -> str:
        """Every candidate's result for the call's key, as stored (JSON), or null when undecided."""
        args = self.args(call)
        key = self.session.tuner.key(self.tunables, args)
        results = self.session.tuner.results(self.tunables, key)
        return json.dumps(None if results is None else [result_to_json(result) for result in results])
