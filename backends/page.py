"""The page's Python half: a tuner on the browser device, the keys a page registers (the demo
suite's when asked), sets defined from JavaScript (``js_sets.py``), and a JSON API for JS.

``web/wgtune.js`` loads Pyodide and this wheel, opens a ``GPUDevice`` (or takes the embedding
page's), then calls :meth:`PageSession.open`. Every answer crosses to JS as JSON text, so the JS
side never holds Python objects it would have to release. What it hears of tunes is
``page_events.py``'s; its calls on stored winners (export, import, clearing, bundles) are
``page_stored.py``'s, and the stored-winners panel's pages ``stored_view.py``'s; the other tabs
are ``tabs.py``'s; a lost device is reopened by :meth:`PageSession.reopen` (``page_reopen.py``).

Registered keys are named by their problem size as text (``"128x128x128"``, ``"262144"``): the
label a person reads on the page and a test passes to ``check``. Each key's call (its buffers) is
built once when it is registered, so :meth:`PageSession.check` only asks the tuner: a miss returns
Pending at once with the tune spawned on the WebLoop.

Importable only in Pyodide (it uses the browser device).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wgtune import Config
from wgtune.errors import LaunchRefused, NoValidKernelFound, WgtuneError
from wgtune.gpu.clock import clock_grain as measure_grain
from wgtune.kernels.demo import DemoCase, demo_suite
from wgtune.kernels.families import FAMILIES
from wgtune.key import Key
from wgtune.sets.args import Args
from wgtune.sets.bindings import output_indices
from wgtune.sets.tunable import TunableSet
from wgtune.state import Hit, Miss, Pending
from wgtune.store.format import StoredEntry, namespace_for
from wgtune.tune.log import logger
from wgtune.tuner import Tuner

from . import indexeddb
from .browser import BrowserDevice, js_object
from .js_errors import concerning, failed_answer
from .page_dispose import dispose_session
from .page_events import PageRecords, event_message, execute_saying_start
from .page_reopen import reopen_session
from .page_settings import page_config, settle_timeout
from .page_stored import StoredWinnersCalls
from .tabs import TabCoordinator

__all__ = ["PageSession", "label_of"]


def label_of(size: tuple[int, ...]) -> str:
    return "x".join(str(n) for n in size)


def _dims_of(set_name: str) -> list[str] | None:
    """What the numbers of a key's label are (``["M", "N", "K"]``), for a registered family's set."""
    return next((list(family.dims) for family in FAMILIES if family.name == set_name), None)


@dataclass
class _Problem:
    """One key of the page: its set as the page names it, the set that tunes the key (the same,
    or the key's own for a set that makes its candidates per key), its size, the call it is
    tuned and run on."""

    set_name: str
    tunables: TunableSet
    label: str
    args: Args
    key: Key


class PageSession(StoredWinnersCalls):
    """What the page drives: see the module doc. Build with :meth:`open`."""

    javascript_facing = True  # what it answers to JavaScript is wrapped so (js_errors.Facing)

    def __init__(self, device: BrowserDevice, idb: Any, notify: Callable[[str], None], config: Config) -> None:
        self.device = device
        self.idb = idb
        self._notify_js = notify
        self.config = config
        self.records = PageRecords(self._notify, self._label)
        self.problems: dict[tuple[str, str], _Problem] = {}
        self.cases: list[DemoCase] = []
        self.store: indexeddb.IndexedDBStore | None = None
        self.tuner: Tuner | None = None
        self.coordinator: TabCoordinator | None = None  # with the page's tabs: see open's ``tabs``
        self.namespace = namespace_for(device.identity, "default")
        self.clock_grain = device.clock_grain
        self.use_timestamps = True
        self.seeds: list[StoredEntry] = []
        """Winners for this device from bundles (:meth:`load_bundle`): every new tuner is seeded with them."""
        self.js_sets: dict[str, TunableSet] = {}
        """The sets defined from JavaScript, by name (``js_sets.define_set``): a name is one set's for the load."""

    @classmethod
    async def open(
        cls,
        gpu_device: Any,
        adapter_info: Any,
        idb: Any,
        notify: Callable[[str], None],
        *,
        clock_grain: float = 100e-6,
        use_timestamps: bool = True,
        cases: list[DemoCase] | None = None,
        settings: Any = None,
        demo: bool = False,
        tabs: Any = None,
    ) -> PageSession:
        """Open the session: the device, its clock's grain, the stored winners, and the calls and
        fallbacks of ``cases`` (default: none, or the demo suite's if ``demo``: its 8 keys hold
        about 22 MB of buffers on the device, which an app that tunes its own kernels should not pay).

        ``clock_grain`` (the step of ``performance.now()`` the page saw) is only the fallback: the
        grain is measured here, before any tune, so that the device panel shows the one tunes use.
        ``settings`` are the page's tuning settings (see :func:`page_config`). ``tabs``: the page's
        helpers for the other tabs of the database (``web/tabs.js``), so that they cooperate.
        """
        config = page_config(settings.to_py() if hasattr(settings, "to_py") else dict(settings or {}))
        info = adapter_info.to_py() if hasattr(adapter_info, "to_py") else dict(adapter_info)
        device = BrowserDevice(gpu_device, info, use_timestamps=use_timestamps, clock_grain=clock_grain)
        session = cls(device, idb, notify, config)
        await session._open_store(tabs)
        session.use_timestamps = use_timestamps
        session.clock_grain = await measure_grain(device)  # the grain every tune on it will use
        await session.reload()
        for case in cases if cases is not None else demo_suite() if demo else []:
            await session.add_case(case)
        return session

    async def reopen(self, gpu_device: Any, adapter_info: Any, *, wait: float = 120.0) -> list[str]:
        """Go on after the device was lost, on ``gpu_device`` (a new one from the same adapter).

        The tunes the loss interrupted end first (up to ``wait`` seconds). Then a new tuner over
        the same store and records, on the new device, with every key's call made again on it;
        each interrupted tune starts again without the candidate whose first launch was running
        when the device was lost (ruled out: it would lose this device too). The keys tuned again,
        as ``"set key"``.
        """
        return await reopen_session(self, gpu_device, adapter_info, wait)

    async def _open_store(self, tabs: Any) -> None:
        """Before the store is first read: move version 1's documents into records (nothing is
        lost; a failure is logged, and tried again next time), and with ``tabs`` cooperate with
        the other tabs (``tabs.py``: a key tuned in one of them, winners announced)."""
        try:
            await indexeddb.IndexedDBEntries(self.idb).migrate()
        except Exception as error:
            logger.warning("could not move the old stored winners into IndexedDB's records: %s", error)
        if tabs is not None:
            self.coordinator = TabCoordinator(tabs)
            self.coordinator.listen(lambda entry: self.tuner.take_announced(entry), self._reread)

    async def _reread(self) -> None:
        """Another tab imported or cleared winners: read the store again, after this tab's writes.
        This page's records whose winner the store no longer holds say "cleared", as after a clear
        here (``page_stored.mark_cleared``), and the page hears which."""
        await self.store.settled()
        await self.reload()
        self.mark_cleared(elsewhere=True)

    async def reload(self) -> None:
        """Read the stored winners (at open, and after an import or a clear): the tuner's cache
        takes them; a tune that is running goes on."""
        self.store = await indexeddb.IndexedDBStore.open(self.idb, self.namespace)
        self.store.on_written = self._written
        if self.coordinator is not None:
            self.coordinator.store = self.store
        if self.tuner is None:
            self.tuner = Tuner(self.device, store=self.store, records=self.records, config=self.config,
                               observer=self._observe, coordinator=self.coordinator)
            self.tuner.cache.seed(self.seeds)  # a reopened device's tuner starts from them too
        else:
            self.tuner.reload(self.store)

    async def add_case(self, case: DemoCase) -> None:
        """Offer ``case``'s keys on the page (an embedding page's own sets come in this way).

        The set's fallback is compiled now (each key's, for a set that makes its candidates per
        key): a call on a Pending key runs it without waiting.
        """
        self.cases = [known for known in self.cases if known.tunables.name != case.tunables.name] + [case]
        for size in case.sizes:
            args = case.make_args(self.device, size)
            label = label_of(size)
            key = self.tuner.key(case.tunables, args)
            problem = _Problem(case.tunables.name, case.tunables.for_key(key), label, args, key)
            self.problems[(case.tunables.name, label)] = problem
            await self.tuner.prepare(problem.tunables)  # once per set: the pipeline cache keeps it
            await asyncio.sleep(0)  # building inputs is work: let the page breathe between keys

    # -- the JSON API -------------------------------------------------------------------------

    def _problem(self, set_name: str, label: str) -> _Problem:
        """The registered key ``label`` of ``set_name``. A label that is none of the set's is a
        WgtuneError naming the set (JavaScript's ``set``, as a call's errors name theirs: see
        ``js_errors.describe_error``) and no key; a set that is not on the page names none."""
        problem = self.problems.get((str(set_name), str(label)))
        if problem is None:
            known = ", ".join(f"{s} {k}" for s, k in self.problems)
            error = WgtuneError(f"no key {label!r} of set {set_name!r} on this page; keys: {known}")
            if any(name == str(set_name) for name, _label in self.problems):
                error.set_name = str(set_name)
            raise error
        return problem

    def _state(self, problem: _Problem) -> dict:
        self.tuner.cache.look_up(problem.tunables.name, problem.key)  # the store is read key by key
        state = self.tuner.cache.answer(problem.tunables, problem.key)
        answer = {"set": problem.set_name, "key": problem.label, "state": type(state).__name__}
        if isinstance(state, Hit):
            answer["winner"] = problem.tunables.candidates[state.index].name
            entry = self.tuner.cache.entry(problem.tunables, problem.key)
            if entry is not None:
                # What the chart shows after a reload: the candidates a search never ran are not drawn.
                answer["results"] = [result for result in entry.results if result is not None]
                answer["policy"] = entry.policy
                answer["confidence"] = entry.confidence.to_json() if entry.confidence is not None else None
        failure = self.tuner.failures.get((problem.tunables.name, problem.key))
        if failure is not None:
            answer.update(failed_answer(state, failure))
        return answer

    def catalogue(self) -> str:
        """The device, and every set with its candidates and keys (with their states)."""
        device = self.device
        sets = []
        for case in self.cases:
            problems = [self.problems[(case.tunables.name, label_of(size))] for size in case.sizes]
            tunables = problems[0].tunables  # per key, the candidates of its first key
            sets.append({
                "name": case.tunables.name,
                "dims": _dims_of(case.tunables.name),
                "candidates": [kernel.name for kernel in tunables.candidates],
                "fallback": tunables.candidates[self.tuner.fallback(tunables)].name,
                "keys": [self._state(problem) for problem in problems],
            })
        return json.dumps({
            "identity": device.identity.as_dict(),
            "adapter": device.adapter_info,
            "timing": device.timing,
            "clock_grain": self.clock_grain,
            "policy": self.tuner.config.policy.value,
            "limits": {
                "max_workgroup_storage": device.limits.max_workgroup_storage,
                "max_invocations": device.limits.max_invocations,
            },
            "sets": sets,
        })

    def define_set(self, spec: Any) -> Any:
        """A set a page defines from JavaScript (``wgtune.defineSet``): see ``js_sets.py``."""
        from .js_sets import define_set

        return define_set(self, spec, to_js=js_object)

    def batch(self) -> Any:
        """A batch opened from JavaScript (``wgtune.batch``): see ``js_batch.py``."""
        from .js_batch import JsBatch

        return JsBatch(self.tuner)

    def notify_pending(self, set_name: str, key: Key) -> None:
        """Tell the page a tune of ``key`` started (a set defined from JavaScript, say)."""
        self._notify({"type": "pending", "set": set_name, "key": str(key)})

    def check(self, set_name: str, label: str) -> str:
        """The key's state; on a miss, the tune starts on the event loop and this says Pending."""
        problem = self._problem(set_name, label)
        state = self.tuner.fastest(problem.tunables, problem.key)
        if not isinstance(state, Hit):
            try:
                with concerning(problem.key, problem.set_name):
                    state = self.tuner.check_tune(problem.tunables, problem.key, problem.args)
            except NoValidKernelFound:  # every candidate failed before: the answer says Failed, and why
                return json.dumps(self._state(problem))
            if isinstance(state, Pending):
                self._notify({"type": "pending", "set": problem.set_name, "key": problem.label})
        return json.dumps(self._state(problem))

    async def execute(self, set_name: str, label: str, with_output: bool = False) -> str:
        """Run the key's winner (or, while it is Pending, the fallback); say which ran.

        With ``with_output`` the answer carries the output buffer's bytes (base64), read back
        after the run: what a test compares with a reference.
        """
        problem = self._problem(set_name, label)
        with concerning(problem.key, problem.set_name):
            await self.tuner.prepare(problem.tunables)  # the fallback, compiled: at once once it is
            before = self._state(problem)
            kernel = execute_saying_start(self.tuner, problem.tunables, problem.key, problem.args,
                                          lambda: self._notify({"type": "pending", "set": problem.set_name,
                                                                "key": problem.label}))
            take = getattr(self.device, "take_launch_scope", None)  # the call's first launch, in its own scope
            scope = take(problem.args) if take is not None else None
            if scope is not None:
                try:
                    await scope  # a refusal is this call's, not the next tune's
                except LaunchRefused as error:
                    raise LaunchRefused(f"set {set_name!r} [{problem.key}]: {error}") from None
        fallback = problem.tunables.candidates[self.tuner.fallback(problem.tunables)].name
        answer = {**before, "ran": kernel.name, "ran_fallback": before.get("winner") != kernel.name,
                  "fallback": fallback}
        if with_output:
            await self.device.sync()
            outputs = output_indices(problem.tunables, problem.args) or (len(problem.args.buffers) - 1,)
            data = await self.device.read_buffer(problem.args.buffers[outputs[0]])
            answer["output"] = base64.b64encode(data).decode("ascii")
        return json.dumps(answer)

    async def settle(self, set_name: str, label: str, timeout: float = 600.0) -> str:
        """The key's state once it is no longer Pending: a miss is tuned first (as :meth:`check`
        starts it). A WgtuneError after ``timeout`` seconds: the limit catches a tune that never
        ends, not a slow one (a matmul tune takes a minute on a CPU adapter, more on a busy one)."""
        timeout = settle_timeout(timeout)
        problem = self._problem(set_name, label)
        if isinstance(self.tuner.fastest(problem.tunables, problem.key), Miss):
            self.check(set_name, label)
        deadline = time.monotonic() + timeout
        with concerning(problem.key, problem.set_name):
            while isinstance(self.tuner.fastest(problem.tunables, problem.key), Pending):
                if time.monotonic() > deadline:
                    raise WgtuneError(f"{set_name} {label} still Pending after {timeout} s")
                await asyncio.sleep(0.02)
        return json.dumps(self._state(problem))

    def records_json(self) -> str:
        return json.dumps(self.records.items)

    async def dispose(self) -> int:
        """End the session (``wgtune.dispose()``; see ``page_dispose.py``); tunes cancelled."""
        return await dispose_session(self)

    async def flush(self) -> None:
        await self.store.flush()

    # -- progress -----------------------------------------------------------------------------

    def _page_key(self, set_name: str, key: Key) -> tuple[str, str]:
        """The set's name on the page and the key's label for a tuned set's name and key (a set
        that makes its candidates per key tunes each key as its own set, ``name[key]``)."""
        for problem in self.problems.values():
            if problem.tunables.name == set_name and problem.key == key:
                return problem.set_name, problem.label
        return set_name, str(key)

    def _label(self, set_name: str, key: Key) -> str:
        return self._page_key(set_name, key)[1]

    def _written(self, entries: list[StoredEntry], error: BaseException | None) -> None:
        """A background write to IndexedDB ended: the records of its entries that said "pending"
        say stored (or not, with the reason), and the page hears it."""
        for entry in entries:
            name, label = self._page_key(entry.set_name, entry.key)
            for item in reversed(self.records.items):
                record = item["record"]
                if record["table"] == entry.set_name and item["label"] == label and record["stored"] == "pending":
                    record["stored"] = error is None
                    if error is not None:
                        item["effect"] = "observed"
                    break
            self._notify({"type": "stored", "set": name, "table": entry.set_name, "key": label,
                          "ok": error is None, "reason": None if error is None else str(error)})
        if error is None and self.coordinator is not None:
            self.coordinator.announce_stored(entries)  # committed: the other tabs can read them

    def _observe(self, event: object) -> None:
        message = event_message(event, self._page_key)
        if message is not None:
            self._notify(message)

    def _notify(self, message: dict) -> None:
        self._notify_js(json.dumps(message))

