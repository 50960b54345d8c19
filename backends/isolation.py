"""First launches in a child process, killed at the time limit: the native :class:`LaunchGuard`.

A launch cannot be stopped once submitted: wgpu-py and WebGPU have no call for it, and on some
drivers (Mesa's lavapipe) the submission itself blocks until the kernel is done. A kernel that
never returns would hang the tune and every later call on its device. So with ``isolate`` on
(``WGTUNE_ISOLATE=1``, or ``open_tuner(isolate=True)``) each candidate's first launch runs first in
a child process on a device of its own, on a copy of the benchmark's buffers: past the time
limit the process is killed (ending its GPU work with it), the candidate is a Timeout, and the
tune's own device never runs it. A candidate that finished there within the limit then runs in
process as usual. Inductor and Helion isolate autotuning in subprocesses for the same reason.

It costs a process start per tune (and per kill), a readback of the benchmark's buffers, and a
second compile of each candidate, so it is off by default: turn it on for kernels that may not
return (generated code, loops bounded by data).

The child opens the default adapter (``NativeDevice.open``): on a machine with several GPUs it
may not be the tune's. The protocol is ``isolated_worker.py``'s.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
import weakref
from typing import Any

from wgtune.errors import KernelError
from wgtune.gpu.device import Device
from wgtune.sets.args import Args, Grid
from wgtune.sets.kernel import Kernel
from wgtune.tune.log import logger

from .isolated_worker import LaunchSpec, StageSpec

__all__ = ["ChildLaunchGuard"]

# Seconds the child may take to start (import wgpu, open its device) and to compile a candidate:
# neither is the candidate's launch, and neither counts against its limit.
START_SECONDS = 60.0
COMPILE_SECONDS = 120.0
# What passing an answer between the processes may add to a launch that finished in time.
SLACK_SECONDS = 0.5


class ChildLaunchGuard:
    """Runs first launches in a child process (see the module doc). ``device`` is the tune's,
    whose benchmark buffers are read back and sent to the child once per tune."""

    def __init__(self, device: Device, *, python: str = sys.executable) -> None:
        self.device = device
        self.python = python
        self._worker: _Worker | None = None
        self._args: weakref.ref | None = None  # the benchmark Args whose contents the child holds
        self._contents: list[bytes] = []
        self.kills = 0

    async def first_launch(self, kernel: Kernel, grids: list[Grid], args: Args, limit: float) -> float | None:
        if self._args is None or self._args() is not args:
            self._contents = [await self.device.read_buffer(buffer) for buffer in args.buffers]
            self._args = weakref.ref(args)
            if self._worker is not None:
                self._worker.send(("buffers", self._contents))
        worker = self._started()
        stages = tuple(
            StageSpec(stage.name, stage.wgsl, stage.entry_point, dict(stage.constants), stage.features, grid,
                      None if stage.params is None else tuple(stage.params(args)), stage.runtime_checks)
            for stage, grid in zip(kernel.stages, grids, strict=True)
        )
        scratch = {name: int(size(args)) for name, size in kernel.scratch.items()}
        worker.send(("launch", LaunchSpec(stages, args.names, args.params, scratch)))
        answer = worker.receive(COMPILE_SECONDS)
        if answer is not None and answer[0] == "compiled":
            answer = worker.receive(limit + SLACK_SECONDS)
            if answer is None:
                self._kill(f"{kernel.name} ran past {limit:.3g} s")
                return None
        if answer is None:
            self._kill(f"{kernel.name} did not compile within {COMPILE_SECONDS:.0f} s")
            raise KernelError(f"its isolated launch did not compile within {COMPILE_SECONDS:.0f} s")
        if answer[0] == "error":
            raise KernelError(f"isolated launch failed: {answer[1]}")
        if answer[0] == "died":
            self._worker = None
            raise KernelError(f"the isolated process died while launching it: {answer[1]}")
        return float(answer[1])

    def close(self) -> None:
        """Stop the child process, if one is running."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    def _started(self) -> _Worker:
        if self._worker is None:
            self._worker = _Worker(self.python)
            self._worker.send(("buffers", self._contents))
        return self._worker

    def _kill(self, why: str) -> None:
        logger.info("isolated launch stopped: %s", why)
        self.kills += 1
        self.close()


class _Worker:
    """One child process, its answers read by a thread into a queue (a wait with a deadline that
    works on every platform, pipes included)."""

    def __init__(self, python: str) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop(), after the process)
        self.process = subprocess.Popen(
            [python, "-m", "wgtune.backends.isolated_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
        )
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        self._finalizer = weakref.finalize(self, _kill_process, self.process)
        ready = self.receive(START_SECONDS)
        if ready is None or ready[0] != "ready":
            self.stop()
            raise KernelError(f"the isolated process did not start: {self._stderr_tail() or ready}")

    def _read(self, stream: Any) -> None:
        try:
            while True:
                self.answers.put(pickle.load(stream))
        except Exception as error:  # EOF or a torn answer: the process is gone (or was stopped)
            self.answers.put(("died", f"{type(error).__name__}; {self._stderr_tail()}"))

    def _stderr_tail(self) -> str:
        """The end of what the child printed, once it has exited ('' when it was stopped)."""
        try:
            self.process.wait(timeout=1.0)
            self.stderr.seek(0)
            return self.stderr.read()[-800:].decode("utf-8", "replace").strip()
        except (subprocess.TimeoutExpired, ValueError, OSError):  # still running, or its file closed
            return ""

    def send(self, message: tuple) -> None:
        try:
            pickle.dump(message, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.flush()
        except OSError:
            pass  # it died: the next receive says so

    def receive(self, seconds: float) -> tuple | None:
        """The next answer, or None when none came within ``seconds``."""
        try:
            return self.answers.get(timeout=seconds)
        except queue.Empty:
            return None

    def stop(self) -> None:
        self._finalizer()
        self.stderr.close()


def _kill_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            stream.close()
