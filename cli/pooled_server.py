"""An ``http.server`` whose silent connections cost no thread: for ``wgtune serve``.

``socketserver.ThreadingMixIn`` starts a thread per connection and lets it wait for the request
as long as the client likes: 400 connections that send nothing are 400 threads, for ever. Here
one watcher thread (``IdleConnections``) holds every connection until its first byte arrives,
closing it after ``idle_timeout`` seconds of silence, and a bounded pool of workers answers the
requests (with the handler's ``timeout`` on each socket operation once a request started).
"""

from __future__ import annotations

import contextlib
import http.server
import queue
import selectors
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["IdleConnections", "PooledHTTPServer"]

MAX_IDLE_CONNECTIONS = 512  # beyond this many silent connections, the oldest is closed


class IdleConnections:
    """Connections that have not sent a byte yet, all watched by one thread instead of one each.

    A connection leaves when its request starts to arrive (``on_readable``, which hands it to a
    worker), or ``on_close`` closes it: after ``idle_timeout`` seconds of silence, or as the oldest
    when more than ``limit`` wait (so silent sockets cannot use up the process's file descriptors).
    """

    def __init__(self, idle_timeout: float, limit: int, on_readable: Callable[[socket.socket, object], None],
                 on_close: Callable[[socket.socket], None]) -> None:
        self.idle_timeout = idle_timeout
        self._limit = limit
        self._on_readable, self._on_close = on_readable, on_close
        self._selector = selectors.DefaultSelector()
        self._wakeup_reader, self._wakeup_writer = socket.socketpair()
        for end in (self._wakeup_reader, self._wakeup_writer):
            end.setblocking(False)
        self._selector.register(self._wakeup_reader, selectors.EVENT_READ)
        self._arrivals: queue.SimpleQueue[tuple[socket.socket, object]] = queue.SimpleQueue()
        self._waiting: dict[socket.socket, tuple[float, object]] = {}  # deadline, address; oldest first
        self._closing = False
        self._thread = threading.Thread(target=self._watch, name="wgtune-idle-connections", daemon=True)
        self._thread.start()

    def add(self, connection: socket.socket, address: object) -> None:
        """Watch a new connection (from any thread)."""
        self._arrivals.put((connection, address))
        self._wake()

    def close(self) -> None:
        """Stop watching and close every connection still waiting."""
        self._closing = True
        self._wake()
        self._thread.join(timeout=5)
        while self._waiting:
            self._drop(next(iter(self._waiting)))
        while not self._arrivals.empty():
            self._safely(self._on_close, self._arrivals.get_nowait()[0])
        self._selector.close()
        self._wakeup_reader.close()
        self._wakeup_writer.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a full wake-up buffer already wakes it
            self._wakeup_writer.send(b"\0")

    @staticmethod
    def _safely(callback: Callable, *args: object) -> None:
        with contextlib.suppress(Exception):  # one bad socket must not stop the watcher
            callback(*args)

    def _drop(self, connection: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(connection)
        self._waiting.pop(connection, None)
        self._safely(self._on_close, connection)

    def _watch(self) -> None:
        while not self._closing:
            timeout = None
            if self._waiting:
                timeout = max(0.0, next(iter(self._waiting.values()))[0] - time.monotonic())
            for key, _ in self._selector.select(timeout):
                if key.fileobj is self._wakeup_reader:
                    with contextlib.suppress(OSError):
                        while self._wakeup_reader.recv(4096):
                            pass
                    continue
                connection = key.fileobj
                self._selector.unregister(connection)
                _, address = self._waiting.pop(connection)
                self._safely(self._on_readable, connection, address)
            self._take_arrivals()
            now = time.monotonic()
            while self._waiting and next(iter(self._waiting.values()))[0] <= now:
                self._drop(next(iter(self._waiting)))

    def _take_arrivals(self) -> None:
        while not self._arrivals.empty():
            connection, address = self._arrivals.get_nowait()
            try:
                self._selector.register(connection, selectors.EVENT_READ)
            except (OSError, ValueError):
                self._safely(self._on_close, connection)
                continue
            self._waiting[connection] = (time.monotonic() + self.idle_timeout, address)
            if len(self._waiting) > self._limit:
                self._drop(next(iter(self._waiting)))


class PooledHTTPServer(http.server.HTTPServer):
    """An HTTP server whose silent connections cost no thread, answered by a bounded pool of workers.

    ``quiet``: no traceback for a request that failed (mostly a client that went away); IPv6 when
    the address has a colon.
    """

    request_queue_size = 1024  # a burst of connections waits in the kernel, not in SYN retries (capped by somaxconn)

    def __init__(self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler], *,
                 idle_timeout: float, workers: int, quiet: bool = True, max_idle: int = MAX_IDLE_CONNECTIONS) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.quiet = quiet
        self._workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="wgtune-serve")
        self._answering: set[socket.socket] = set()
        self._answering_lock = threading.Lock()
        self._idle = IdleConnections(idle_timeout, max_idle, self._hand_to_worker, self.shutdown_request)
        super().__init__(address, handler)  # binds; closes the above if that fails

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # not HTTPServer's: its getfqdn can wait on DNS
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    def process_request(self, request: socket.socket, client_address: object) -> None:
        self._idle.add(request, client_address)

    def _hand_to_worker(self, request: socket.socket, client_address: object) -> None:
        try:
            self._workers.submit(self._answer, request, client_address)
        except RuntimeError:  # the server is closing
            self.shutdown_request(request)

    def _answer(self, request: socket.socket, client_address: object) -> None:
        with self._answering_lock:
            self._answering.add(request)
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            with self._answering_lock:
                self._answering.discard(request)
            self.shutdown_request(request)

    def handle_error(self, request: socket.socket, client_address: object) -> None:
        """A traceback with ``--verbose``; otherwise nothing (mostly a client that went away)."""
        if not self.quiet:
            super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        self._idle.close()
        with self._answering_lock:
            for request in self._answering:  # wake workers blocked on a slow client
                with contextlib.suppress(OSError):
                    request.shutdown(socket.SHUT_RDWR)
        self._workers.shutdown(wait=True, cancel_futures=True)
