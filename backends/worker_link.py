"""The tuning process and the pipe to it: started, asked, answered within a deadline, killed.

One child process (``isolated_worker.main``), requests pickled to its
standard input and answers pickled back on its standard output, read by a thread into a queue: a
wait with a deadline that works on every platform, pipes included, and that Ctrl-C interrupts
(the main thread only ever waits on the queue, never inside a GPU call). What the child prints
goes to a temporary file, whose end is quoted when the child dies.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Any

__all__ = ["WorkerLink"]

ENTRY = "import sys; from wgtune.backends.isolated_worker import main; sys.exit(main())"
"""What the child runs."""
DIED = "died"
"""The answer the reading thread queues when the child's standard output ends."""
WAKE_SECONDS = 0.1
"""The longest the main thread waits on the queue in one go (``WorkerLink.receive``)."""


class WorkerLink:
    """One child process and the pipe to it. ``answers`` are read by a thread as they come."""

    def __init__(self, python: str = sys.executable, argv: tuple[str, ...] = ()) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close(), after the process)
        env = dict(os.environ)
        # The same wgtune as this process's, wherever it was imported from (a path added at run time too).
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p and os.path.isdir(p)] +
                                            [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        self.process = subprocess.Popen(
            [python, "-c", ENTRY, *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env,
        )
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True,
                         name="wgtune-tuning-process").start()
        self._printed = bytearray()  # the end of what it printed, kept when it is closed
        self._finalizer = weakref.finalize(self, _kill_process, self.process, self.stderr, self._printed)

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self, stream: Any) -> None:
        try:
            while True:
                self.answers.put(pickle.load(stream))
        except Exception as error:  # EOF or a torn answer: the process is gone (or was killed)
            self.answers.put((DIED, type(error).__name__))

    def send(self, message: tuple) -> bool:
        """Write one request; False when the pipe is closed (the process is gone)."""
        try:
            pickle.dump(message, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def receive(self, seconds: float) -> tuple | None:
        """The next answer, or None when none came within ``seconds`` (``math.inf``: no limit).

        The wait is cut into slices of WAKE_SECONDS: a Ctrl-C that the kernel hands to another
        thread of the process (this link's reader, wgpu's poller) does not end the main thread's
        wait on a lock, it only marks the signal for the main thread to handle when it next runs
        Python; between slices it does, at once (a tune seen hanging at load for ever otherwise)."""
        deadline = time.monotonic() + max(0.0, seconds)
        while True:
            left = deadline - time.monotonic()
            try:
                return self.answers.get(timeout=max(0.0, min(left, WAKE_SECONDS)))
            except queue.Empty:
                if left <= WAKE_SECONDS:
                    return None

    def exit_status(self) -> str:
        """How the process ended, with the end of what it printed ('' while it runs)."""
        try:
            code = self.process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return ""
        tail = self._printed[-800:].decode("utf-8", "replace").strip()
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return f"{how}{': ' + tail if tail else ''}"

    def close(self) -> None:
        """Kill the process (if it still runs) and wait for it: nothing of it outlives this call."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive


def _kill_process(process: subprocess.Popen, stderr: Any, printed: bytearray) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
    with contextlib.suppress(OSError, ValueError):
        stderr.seek(0)
        printed += stderr.read()[-4000:]
    for stream in (process.stdin, process.stdout, stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.close()
