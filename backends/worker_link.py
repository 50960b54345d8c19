"""The tuning process and the pipe to it: started, asked, answered within a deadline, killed.

One child process (``isolated_worker.main``), requests pickled to its
standard input and answers pickled back on its standard output, read by a thread into a queue: a
wait with a deadline that works on every platform, pipes included, and that Ctrl-C interrupts
(the main thread only ever waits on the queue, never inside a GPU call). What the child prints
goes to a temporary file, whose end is quoted when the child dies.

A call's buffers (192 MB at matmul 4096^3) go through shared memory where the platform has it
(Linux): each is written to a memory file (``memfd_create``) whose descriptor is passed over a
socket beside the pipe, and the request carries a :class:`Shared` in its place, which the child
maps. Through the pipe they took nearly twice as long (``bench/input_copies.py``). A memory file
has no name, so nothing is left behind whatever dies: it is freed when the last descriptor
closes. Where it cannot be made (no ``memfd_create``, memory short), the pipe takes the bytes.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

__all__ = ["SOCKET_VARIABLE", "Filled", "Shared", "WorkerLink", "receive_shared"]

ENTRY = "import sys; from wgtune.backends.isolated_worker import main; sys.exit(main())"
"""What the child runs."""
DIED = "died"
"""The answer the reading thread queues when the child's standard output ends."""
WAKE_SECONDS = 0.1
"""The longest the main thread waits on the queue in one go (``WorkerLink.receive``)."""
SHARED_BYTES = 1 << 20
"""Data at least this large goes through shared memory where it can; smaller is not worth a file."""
SOCKET_VARIABLE = "WGTUNE_SHARED_SOCKET"
"""The environment variable that tells the child its end of the socket (a descriptor number)."""
CAN_SHARE = hasattr(os, "memfd_create") and hasattr(socket, "send_fds") and hasattr(socket, "AF_UNIX")


@dataclass(frozen=True)
class Shared:
    """Stands in a request for ``nbytes`` of data sent beside it: a memory file, its descriptor
    passed over the link's socket (one per :class:`Shared`, in the order of the requests)."""

    nbytes: int


class Filled:
    """A memory file written with ``nbytes`` of data, not yet sent to the child: its descriptor
    is closed once sent, or when this is dropped unsent (a read that failed after it was filled:
    nothing went over the socket, so the child's files stay in step with the requests)."""

    def __init__(self, descriptor: int, nbytes: int) -> None:
        self.descriptor, self.nbytes = descriptor, nbytes
        self.close = weakref.finalize(self, os.close, descriptor)


def _filled(view: memoryview) -> Filled | None:
    """``view`` written to a new memory file; None where none could be made or filled (memory short)."""
    try:
        descriptor = os.memfd_create("wgtune-buffer", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        written = 0
        while written < len(view):
            written += os.write(descriptor, view[written:])
    except BaseException as error:  # the file is freed with its descriptor
        os.close(descriptor)
        if isinstance(error, OSError):
            return None
        raise
    return Filled(descriptor, len(view))


def receive_shared(sock: socket.socket, shared: Shared) -> mmap.mmap:
    """In the child: the next memory file from ``sock``, mapped read-only (``shared.nbytes`` of it)."""
    _, descriptors, _, _ = socket.recv_fds(sock, 1, 1)
    if len(descriptors) != 1:
        raise OSError(f"the tuning process expected one memory file of {shared.nbytes} bytes and got none")
    try:
        return mmap.mmap(descriptors[0], shared.nbytes, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                         prot=mmap.PROT_READ)
    finally:
        os.close(descriptors[0])


class WorkerLink:
    """One child process and the pipe to it. ``answers`` are read by a thread as they come."""

    def __init__(self, python: str = sys.executable, argv: tuple[str, ...] = (), *, shared: bool = True) -> None:
        """``shared``: send large data through shared memory where the platform has it (else the pipe)."""
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close(), after the process)
        env = dict(os.environ)
        # The same wgtune as this process's, wherever it was imported from (a path added at run time too).
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p and os.path.isdir(p)] +
                                            [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.pop(SOCKET_VARIABLE, None)  # never another link's
        self._socket: socket.socket | None = None
        theirs = None
        if shared and CAN_SHARE:
            self._socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            env[SOCKET_VARIABLE] = str(theirs.fileno())
        try:
            self.process = subprocess.Popen(
                [python, "-c", ENTRY, *argv],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env,
                pass_fds=(theirs.fileno(),) if theirs is not None else (),
            )
        except BaseException:
            if self._socket is not None:
                self._socket.close()
            raise
        finally:
            if theirs is not None:
                theirs.close()  # the child's now
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True,
                         name="wgtune-tuning-process").start()
        self._printed = bytearray()  # the end of what it printed, kept when it is closed
        self._finalizer = weakref.finalize(self, _kill_process, self.process, self.stderr, self._printed,
                                           self._socket)

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

    @property
    def shares(self) -> bool:
        """Whether large data goes through shared memory (:meth:`fill`, :meth:`send_filled`)."""
        return self._socket is not None

    def fill(self, data: bytes | memoryview) -> bytes | Filled:
        """``data`` written to a memory file (a :class:`Filled`, for :meth:`send_filled`), or as
        bytes where it goes through the pipe (small, no shared memory here, or none to be had).
        ``data`` may be a view of memory that goes away after (a mapped staging buffer): nothing
        returned, nor left in a traceback, refers to it."""
        with memoryview(data) as given, given.cast("B") as view:
            if self._socket is not None and len(view) >= SHARED_BYTES:
                filled = _filled(view)
                if filled is not None:
                    return filled
            return data if isinstance(data, bytes) else bytes(view)

    def send_filled(self, filled: bytes | Filled) -> bytes | Shared:
        """What the next request carries (it must be the next one sent that carries a Shared):
        bytes as they are; a Filled's descriptor sent to the child, a :class:`Shared` in its place,
        or its bytes read back from the file where it could not be sent (the child gone: the pipe
        says so)."""
        if not isinstance(filled, Filled):
            return filled
        try:
            socket.send_fds(self._socket, [b"m"], [filled.descriptor], getattr(socket, "MSG_NOSIGNAL", 0))
            return Shared(filled.nbytes)
        except OSError:
            return os.pread(filled.descriptor, filled.nbytes, 0)
        finally:
            filled.close()

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


def _kill_process(process: subprocess.Popen, stderr: Any, printed: bytearray, sock: socket.socket | None) -> None:
    if sock is not None:
        sock.close()  # memory files still in it are freed with it
    if process.poll() is None:
        process.kill()
    process.wait()
    with contextlib.suppress(OSError, ValueError):
        stderr.seek(0)
        printed += stderr.read()[-4000:]
    for stream in (process.stdin, process.stdout, stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.close()
