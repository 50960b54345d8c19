"""Tunes whose launches run in a tuning process: the native :class:`~wgtune.tune.request.LaunchGuard`.

A launch cannot be stopped once submitted: wgpu-py and WebGPU have no call for it, and on some
drivers (Mesa's lavapipe) the submission itself blocks until the kernel is done, in C, where not
even Ctrl-C reaches Python. A kernel that never returns (generated code, a loop bounded by data)
would hang the tune and every later call on its device. So natively a tune's launches run in one
tuning process per tuner (``isolated_worker.py``), on a device of its own on the tuner's adapter,
behind :class:`~wgtune.backends.remote_device.RemoteDevice`: the core tunes on it unchanged, the
first launches, the output checks and every sample included, and each wait there is bounded
(``launch_ledger.py``). Past its deadline the process is killed, the candidate whose launches it
ran is a Timeout, and the key is tuned again without it in a fresh process; Ctrl-C kills the
process and reaches the caller at once. The winner then runs in the tuner's own process: it
returned on every launch the tune made. Its compile there is begun as the rounds begin, for the
fastest few finalists (``TuneRequest.finalists``), so that it overlaps the rounds rather than
following the tune. A winner from elsewhere (a bundle's, a collector's) is
checked there too before it serves (``verify.py``): one that runs away is not used.

The process starts at the first tune and serves every later one of the tuner (its compiled
candidates too): a start took 2 s on lavapipe here, 1.7 s on an H200's host
(``bench/isolation_cost.py``). Where every key will tune (nothing stored yet, or the cache off),
``open_tuner`` begins it at once (:func:`begin_tuning_process`), so that it starts while the
tuner's own device opens and the caller sets up, not in the first tune. It ends with the
tuner (or :meth:`WorkerGuard.close`, or at exit), and by itself when its parent is gone. Off with
``isolate=False`` (``WGTUNE_ISOLATE=0``), for kernels trusted to return; a dry run compiles in
process, and a process that cannot start (or opens another GPU than the tuner's) is said once and
the tunes run in process. The process's device is a second one on the GPU: the benchmark's
buffers are copied there, and hold its memory while a tune runs. Inductor and Helion isolate
autotuning in subprocesses for the same reason.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, replace
from typing import Any

from wgtune.errors import DeviceLost, Launch, Mismatch, Timeout, TuneFailed
from wgtune.key import Key
from wgtune.sets.args import Args
from wgtune.sets.kernel import Kernel
from wgtune.sets.tunable import TunableSet
from wgtune.tune.log import logger
from wgtune.tune.outcome import TuneOutcome
from wgtune.tune.pipelines import PipelineCache
from wgtune.tune.request import TuneRequest
from wgtune.tune.tuning import measure_key
from wgtune.tune.verify import verify_winner

from .isolated_worker import OpenSpec
from .remote_device import RemoteDevice, read_ahead
from .remote_handles import ProcessStopped
from .worker_link import WorkerLink

__all__ = ["EarlyStart", "ProcessStopped", "WorkerGuard", "begin_tuning_process", "spec_for"]

# How many of the fastest finalists after screening the tuner's own device compiles ahead (the
# likeliest winners; one past them compiles after the tune, as before): few, and no more than a
# quarter of its compile threads, so that the rounds' host work in the tuning process keeps its
# cores (none on a host of under four). Those that lose are let go when the tune is over.
FINALISTS_COMPILED_HERE = 4


def spec_for(device: Any | None) -> OpenSpec:
    """Which adapter a tuning process opens to tune for ``device``: the same one, opened alike;
    for None, the default adapter as ``NativeDevice.open()`` opens it."""
    if device is None:
        return OpenSpec(None, None)
    return OpenSpec(getattr(device, "adapter_index", None),
                    None if getattr(device, "power_preference", None) else device.identity.as_dict(),
                    getattr(device, "power_preference", None) or "high-performance",
                    getattr(device, "timestamps", True), getattr(device, "api", "wgpu"),
                    getattr(device, "runtime_checks", True))


@dataclass(frozen=True)
class EarlyStart:
    """A tuning process begun ahead of its tuner's first tune, already told to open ``spec``."""

    spec: OpenSpec
    link: WorkerLink


def begin_tuning_process(spec: OpenSpec, python: str = sys.executable) -> EarlyStart | None:
    """Start a tuning process now and have it open ``spec``'s adapter while the caller goes on
    (a start is Python, wgpu and a device: 1.7 s on an H200's host); None when it cannot be
    started (the first tune then tries, and says why)."""
    try:
        link = WorkerLink(python)
    except Exception:
        return None
    if not link.send(("open", spec)):
        link.close()
        return None
    return EarlyStart(spec, link)


class _CompiledHere:
    """What a tune's finalists are handed to: the leaders begin compiling on the tuner's own
    device, where the winner will serve, while the rounds in the process decide among them (else
    the winner's compile here follows the tune, in the caller's wait). Those that lose are let go
    when it is over (:meth:`settle`): a set whose kernels differ by key would keep them for good.
    A winner begun here is kept until a call takes it, though a later tune's finalists it loses
    among (``winners``: such winners by ``(set name, index)``, shared by a tuner's tunes)."""

    def __init__(self, request: TuneRequest, winners: dict[tuple[str, int], Kernel]) -> None:
        self.request = request
        self.winners = winners
        device = request.pipelines.device
        # 0 on a CPU adapter, or with too few cores to spare.
        self.count = min(FINALISTS_COMPILED_HERE, device.compile_width // 4) if device.background_compiles else 0
        self.begun: list[int] = []

    def __call__(self, indices: list[int]) -> None:
        request = self.request
        if self.count > 0:
            leaders = indices[:self.count]
            request.pipelines.start_compiles(request.tunables, leaders)
            self.begun += [index for index in leaders if index not in self.begun]
        request.finalists(indices)

    def settle(self, winner: int | None) -> None:
        """The tune is over, won by ``winner`` (None: it failed): the finalists' begun compiles
        are let go, but what the winners whose compiles no call took yet have of them."""
        request = self.request
        tunables, compiled = request.tunables, request.pipelines.compiled
        if winner is not None and winner in self.begun:
            self.winners[(tunables.name, winner)] = tunables.candidates[winner]
        for slot in [slot for slot in self.winners if slot in compiled]:  # taken: nothing to keep
            del self.winners[slot]
        if self.begun:
            request.pipelines.drop_started(tunables, self.begun, keep=list(self.winners.values()))
            self.begun = []


class WorkerGuard:
    """Runs each tune of a tuner on ``device`` in its tuning process (see the module doc).
    ``starts`` counts the processes started, ``kills`` those stopped at a deadline or found dead."""

    def __init__(self, device: Any, *, time_limit: float | None = None, python: str = sys.executable,
                 early: EarlyStart | None = None) -> None:
        """``early``: a process begun ahead (:func:`begin_tuning_process`), which the first tune
        takes if it opens what this guard's would (``spec``); else it is stopped and another
        started."""
        self.device = device
        self.time_limit = time_limit
        """The limit of a check of a winner from elsewhere (``Config.time_limit``; a tune takes its own config's)."""
        self.python = python
        self.unavailable: str | None = None
        """Why the tuning process could not start, once it could not: tunes then run in process."""
        self.spec = spec_for(device)
        self._early = early
        self.starts = 0
        self.kills = 0
        self._remote: RemoteDevice | None = None
        self._pipelines: PipelineCache | None = None
        self._checksums: dict[str, str] = {}
        self._winners_begun: dict[tuple[str, int], Kernel] = {}  # see _CompiledHere
        self._lock = threading.RLock()  # one tune at a time in the process: they would time each other

    @property
    def pid(self) -> int | None:
        """The tuning process's id, while one runs (begun early, or started by a tune)."""
        if self._remote is not None:
            return self._remote.pid
        return self._early.link.pid if self._early is not None else None

    async def measure(self, request: TuneRequest) -> TuneOutcome:
        """``measure_key(request)`` with its launches in the tuning process; a candidate whose
        launches ran past their deadline (or killed the process) is ruled out, and the key tuned
        again without it in a fresh process."""
        if request.config.dry_run:
            return await measure_key(request)
        here = _CompiledHere(request, self._winners_begun)
        with self._lock:  # the losers let go before another tune begins its finalists
            try:
                outcome = await self._measure(request, dict(request.ruled_out), here)
            except BaseException:
                here.settle(None)
                raise
            here.settle(outcome.winner)
        return outcome

    async def _measure(self, request: TuneRequest, ruled_out: dict, here: _CompiledHere) -> TuneOutcome:
        """The tune, in the tuning process; the caller holds the lock."""
        read = self._read_ahead(request.args) if len(ruled_out) < len(request.tunables) else {}
        while True:
            if len(ruled_out) >= len(request.tunables):  # nothing left to launch: no process needed
                return await measure_key(replace(request, ruled_out=ruled_out))
            started = self._started()
            ahead, read = read, {}  # for the process begun early only: one started again reads them itself
            if started is None:  # no process to tune in: in process, as with isolate=False
                ahead.clear()  # what was read for it is let go now (192 MB at 4096^3), not after the tune
                return await measure_key(replace(request, ruled_out=ruled_out))
            remote, pipelines = started
            self._forget_changed(request.tunables, pipelines)
            try:
                remote.begin_tune(request.config.time_limit)
            except ProcessStopped as stopped:  # an earlier tune's launches: a fresh process, nothing lost
                self._lost(stopped.reason)
                continue
            try:
                outcome = await measure_key(replace(request, device=remote, pipelines=pipelines,
                                                    args=remote.adopt(request.args, ahead), ruled_out=ruled_out,
                                                    finalists=here))
            except ProcessStopped as stopped:
                self._lost(stopped.reason)
                self._rule_out(request, ruled_out, stopped)
                continue
            except DeviceLost as lost:  # the process's device, lost while a candidate ran alone: the likely cause
                self._lost(str(lost))
                if lost.candidate not in request.tunables.index_of or \
                        request.tunables.index_of[lost.candidate] in ruled_out:
                    raise
                ruled_out[request.tunables.index_of[lost.candidate]] = Timeout(lost.candidate, str(lost))
                continue
            except BaseException as error:
                if not isinstance(error, Exception) or remote.broken is not None:  # Ctrl-C: it goes at once
                    self._lost(f"the tune ended with {type(error).__name__}")
                raise
            break
        try:
            remote.end_tune()
        except ProcessStopped as stopped:  # the winner is decided: the next tune starts another process
            self._lost(stopped.reason)
        wrong = [index for index, result in enumerate(outcome.results) if isinstance(result, Mismatch)]
        if wrong:  # the tuner's own fallback must not be a candidate the checks found wrong
            await request.pipelines.distrust(request.tunables, wrong)
        return outcome

    async def verify(self, device: Any, pipelines: PipelineCache, tunables: TunableSet, key: Key, args: Args,
                     winner: int) -> str | None:
        """``verify_winner`` of a winner from elsewhere, its launches in the tuning process: one
        that runs away (or kills the process) is not used, and the tune that follows rules it out."""
        with self._lock:
            read = self._read_ahead(args)
            started = self._started()
            if started is None:
                read.clear()  # let go now, not after the check
                return await verify_winner(device, pipelines, tunables, key, args, winner)
            remote, there = started
            self._forget_changed(tunables, there)
            try:
                remote.begin_tune(self.time_limit)
            except ProcessStopped as stopped:
                self._lost(stopped.reason)
                return await self.verify(device, pipelines, tunables, key, args, winner)
            try:
                problem = await verify_winner(remote, there, tunables, key, remote.adopt(args, read), winner)
            except ProcessStopped as stopped:  # the winner, or a candidate run beside it: the tune sorts it out
                self._lost(stopped.reason)
                name = tunables.candidates[winner].name
                culprits = [culprit for culprit in stopped.candidates if culprit != name]
                return f"{stopped.reason}{' (' + ', '.join(culprits) + ', run beside it)' if culprits else ''}"
            except BaseException as error:
                if not isinstance(error, Exception) or remote.broken is not None:
                    self._lost(f"the check ended with {type(error).__name__}")
                raise
            try:
                remote.end_tune()
            except ProcessStopped as stopped:
                self._lost(stopped.reason)
            return problem

    def close(self) -> None:
        """Stop the tuning process, if one runs; the next tune starts another."""
        if self._remote is not None:
            self._remote.close()
        if self._early is not None:
            self._early.link.close()
        self._remote = self._pipelines = self._early = None
        self._checksums.clear()

    def _read_ahead(self, args: Args) -> dict:
        """Where the first tune's process was begun early and may still be opening its device, the
        buffers of ``args`` it will copy, read from the tuner's device now, meanwhile
        (``remote_device.read_ahead``); else nothing (the tune reads them as it copies them)."""
        early = self._early
        if self._remote is not None or early is None or early.spec != self.spec or self.unavailable is not None:
            return {}
        return read_ahead(self.device, early.link, args)

    def _started(self) -> tuple[RemoteDevice, PipelineCache] | None:
        """The tuning process, started if none runs; None (said once) when it cannot start."""
        if self.unavailable is not None:
            return None
        if self._remote is None or self._remote.broken is not None:
            early, self._early = self._early, None
            if early is not None and early.spec != self.spec:  # begun for another adapter than the tuner's
                early.link.close()
                early = None
            try:
                link = early.link if early is not None else WorkerLink(self.python)
                self._remote = RemoteDevice(self.device, self.spec, link, opened=early is not None)
            except (ProcessStopped, Exception) as error:
                self.unavailable = str(error)
                logger.warning("the tuning process did not start (%s): tuning in this process, where a kernel "
                               "that never returns cannot be stopped", error)
                return None
            self._pipelines = PipelineCache(self._remote)
            self._checksums.clear()
            self.starts += 1
            found = self._remote.worker_identity
            if found != self.device.identity.as_dict():  # timings of another GPU must not be this one's
                self.close()
                self.unavailable = f"it opened {found.get('device')} ({found.get('backend')})"
                logger.warning("the tuning process opened another device (%s, %s) than the tuner's (%s): tuning in "
                               "this process, where a kernel that never returns cannot be stopped",
                               found.get("device"), found.get("backend"), self.device.identity.device)
                return None
        return self._remote, self._pipelines

    def _forget_changed(self, tunables: TunableSet, pipelines: PipelineCache) -> None:
        """A set whose name now means other candidates: its pipelines in the process are dropped."""
        if self._checksums.get(tunables.name, tunables.checksum) != tunables.checksum:
            pipelines.drop(tunables.name)
        self._checksums[tunables.name] = tunables.checksum

    def _lost(self, why: str) -> None:
        logger.info("tuning process stopped: %s", why)
        self.kills += 1
        self.close()

    @staticmethod
    def _rule_out(request: TuneRequest, ruled_out: dict, stopped: ProcessStopped) -> None:
        """Rule out the candidates the process was running when it stopped; a TuneFailed where
        that names none of the set's (nor any not ruled out yet), or several for a process that
        died (which of them killed it cannot be told)."""
        index_of = request.tunables.index_of
        named = [name for name in stopped.candidates if name in index_of and index_of[name] not in ruled_out]
        if not named or len(named) != len(stopped.candidates) or (len(named) > 1 and not stopped.timed_out):
            raise TuneFailed(f"tune of {request.tunables.name} [{request.key}] failed: {stopped.reason}") from None
        for name in named:
            failure = Timeout(name, stopped.reason) if stopped.timed_out else Launch(name, stopped.reason)
            ruled_out[index_of[name]] = failure
            request.step(f"{name}: {stopped.reason}; tuning the key again without it")
