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
returned on every launch the tune made.

The process starts at the first tune and serves every later one of the tuner (its compiled
candidates too): a start costs about a second on lavapipe. It ends with the tuner (or
:meth:`WorkerGuard.close`, or at exit). Off with ``isolate=False`` (``WGTUNE_ISOLATE=0``), for
kernels trusted to return; a dry run compiles in process. Inductor and Helion isolate autotuning
in subprocesses for the same reason.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from wgtune.errors import DeviceLost, Launch, Mismatch, Timeout, TuneFailed
from wgtune.tune.log import logger
from wgtune.tune.outcome import TuneOutcome
from wgtune.tune.pipelines import PipelineCache
from wgtune.tune.request import TuneRequest
from wgtune.tune.tuning import measure_key

from .isolated_worker import OpenSpec
from .remote_device import ProcessStopped, RemoteDevice
from .worker_link import WorkerLink

__all__ = ["ProcessStopped", "WorkerGuard"]


class WorkerGuard:
    """Runs each tune of a tuner on ``device`` in its tuning process (see the module doc).
    ``starts`` counts the processes started, ``kills`` those stopped at a deadline or found dead."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.spec = OpenSpec(getattr(device, "adapter_index", None),
                             None if getattr(device, "power_preference", None) else device.identity.as_dict(),
                             getattr(device, "power_preference", None) or "high-performance",
                             getattr(device, "timestamps", True))
        self.starts = 0
        self.kills = 0
        self._remote: RemoteDevice | None = None
        self._pipelines: PipelineCache | None = None
        self._checksums: dict[str, str] = {}
        self._lock = threading.Lock()  # one tune at a time in the process: they would time each other

    @property
    def pid(self) -> int | None:
        """The tuning process's id, while one runs."""
        return self._remote.pid if self._remote is not None else None

    async def measure(self, request: TuneRequest) -> TuneOutcome:
        """``measure_key(request)`` with its launches in the tuning process; a candidate whose
        launches ran past their deadline (or killed the process) is ruled out, and the key tuned
        again without it in a fresh process."""
        if request.config.dry_run:
            return await measure_key(request)
        ruled_out = dict(request.ruled_out)
        with self._lock:
            while True:
                if len(ruled_out) >= len(request.tunables):  # nothing left to launch: no process needed
                    return await measure_key(replace(request, ruled_out=ruled_out))
                remote, pipelines = self._started()
                self._forget_changed(request, pipelines)
                try:
                    remote.begin_tune(request.config.time_limit)
                    outcome = await measure_key(replace(request, device=remote, pipelines=pipelines,
                                                        args=remote.adopt(request.args), ruled_out=ruled_out))
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
        wrong = [index for index, result in enumerate(outcome.results) if isinstance(result, Mismatch)]
        if wrong:  # the tuner's own fallback must not be a candidate the checks found wrong
            await request.pipelines.distrust(request.tunables, wrong)
        return outcome

    def close(self) -> None:
        """Stop the tuning process, if one runs; the next tune starts another."""
        if self._remote is not None:
            self._remote.close()
        self._remote = self._pipelines = None
        self._checksums.clear()

    def _started(self) -> tuple[RemoteDevice, PipelineCache]:
        if self._remote is None or self._remote.broken is not None:
            self._remote = RemoteDevice(self.device, self.spec, WorkerLink())
            self._pipelines = PipelineCache(self._remote)
            self._checksums.clear()
            self.starts += 1
            if self._remote.worker_identity != self.device.identity.as_dict():
                found = self._remote.worker_identity
                self.close()
                raise TuneFailed(f"the tuning process opened another device ({found.get('device')}, "
                                 f"{found.get('backend')}) than the tuner's ({self.device.identity.device}): "
                                 "open the tuner with isolate=False (WGTUNE_ISOLATE=0) to tune in process")
        return self._remote, self._pipelines

    def _forget_changed(self, request: TuneRequest, pipelines: PipelineCache) -> None:
        """A set whose name now means other candidates: its pipelines in the process are dropped."""
        tunables = request.tunables
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
