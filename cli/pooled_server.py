"""The HTTP server of ``wgtune serve`` and ``wgtune collect``, which slow clients cannot starve.

A thread per connection lets any client hold a thread for as long as it likes: one that sends a
byte every few seconds never trips a per-read timeout, and twenty of them took every worker of
the servers' pools. Here one asyncio loop does all the waiting on clients, and no thread waits on
one: it reads a whole request (headers, then a body up to ``max_body``) before anything else runs,
within a deadline for the whole of it (not per byte); a bounded pool of workers then answers it
from memory (the handler's ``rfile`` and ``wfile`` are buffers: ``http.server``'s handlers run
unchanged); and the loop writes the answer, within a deadline that grows with its size. What a
slow client holds is its own socket, counted against its address's share: ``Limits`` says how much.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http.server
import io
import socket
import sys
import threading
import traceback
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from wgtune.backends.collector_db import address_group

__all__ = ["Limits", "PooledHTTPServer"]

CHUNK = 64 * 1024  # bytes handed to the socket at a time: a slow reader's copy stays this small
MAX_HEADER_LINES = 100  # http.server's own limit on header lines


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one connection may take of the server (seconds, bytes, connections)."""

    idle_timeout: float = 30.0  # before a request's first byte (browsers open connections ahead)
    request_timeout: float = 10.0  # from the first byte to the whole request, headers and body
    send_timeout: float = 30.0  # a response's grace to be taken, on top of its size at min_send_rate
    min_send_rate: float = 64 * 1024  # bytes a second: a reader slower than this is closed
    linger: float = 2.0  # after a response, unread bytes are drained for this long so the client sees it
    max_per_address: int = 64  # connections open at once from one address (an IPv6 /64)
    max_connections: int = 1024  # open at once in all; past it the oldest still being read is closed
    max_header_bytes: int = 64 * 1024  # request line and headers; more gets a 431

    def __post_init__(self) -> None:
        for name in ("idle_timeout", "request_timeout", "send_timeout", "min_send_rate", "max_per_address",
                     "max_connections", "max_header_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be above 0, got {getattr(self, name)!r}")

    @classmethod
    def of_args(cls, args: object) -> Limits:
        """The defaults, with what a command's ``--request-timeout`` and ``--max-per-address`` give."""
        given = {name: getattr(args, name, None) for name in ("request_timeout", "max_per_address")}
        return dataclasses.replace(cls(), **{name: value for name, value in given.items() if value is not None})

    def send_deadline(self, size: int) -> float:
        """Seconds a response of ``size`` bytes may take to be sent whole."""
        return self.send_timeout + size / self.min_send_rate


def _descriptor_share() -> int:
    """Connections the process's file descriptors allow: half of them (the rest for files, the
    database, the workers), so that accepting never fails for want of one."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 1 << 30
    return 1 << 30 if soft == resource.RLIM_INFINITY else max(16, soft // 2)


def _plain(status: int, reason: str, text: str) -> bytes:
    body = f"{text}\n".encode()
    return (f"HTTP/1.0 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n").encode() + body


TIMED_OUT = _plain(408, "Request Timeout", "the request did not arrive in time")
HEADERS_TOO_LARGE = _plain(431, "Request Header Fields Too Large", "request headers too large")
URI_TOO_LONG = _plain(414, "URI Too Long", "request line too long")
BUSY = _plain(503, "Service Unavailable", "too many connections from this address")


class _Exchange:
    """The socket a handler sees: its request from a buffer, its answer into a list (bytes are kept,
    not copied: a served file's bytes can be shared by every response that sends them)."""

    def __init__(self, request: bytes) -> None:
        self._request = request
        self.answer: list[bytes] = []

    def makefile(self, mode: str, *_: object) -> io.BytesIO:
        return io.BytesIO(self._request)

    def sendall(self, data: bytes) -> None:
        self.answer.append(data if type(data) is bytes else bytes(data))

    def settimeout(self, *_: object) -> None:
        pass

    def setsockopt(self, *_: object) -> None:
        pass


class _TooLarge(Exception):
    """A request line or headers past the limit: answered with ``answer``, never handed on."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes,
                        max_header_bytes: int, max_body: int) -> bytes:
    """The rest of a request whose first byte was ``first``: its line, headers and a body of up to
    ``max_body`` bytes (a longer one is left unread, for the handler to refuse from its headers).
    An HTTP/1.1 request that sent ``Expect: 100-continue`` is told to go on (:data:`CONTINUE`, on
    ``writer``) before its body is read: curl and others wait a second for that otherwise."""
    try:
        line = first if first == b"\n" else first + await reader.readline()
    except ValueError:  # a line past the reader's limit
        raise _TooLarge(URI_TOO_LONG) from None
    request = bytearray(line)
    if len(line.split()) < 3 or not line.endswith(b"\n"):  # HTTP/0.9, garbage or EOF: the handler says
        return bytes(request)
    length, expects = 0, False
    for _ in range(MAX_HEADER_LINES + 1):
        try:
            line = await reader.readline()
        except ValueError:
            raise _TooLarge(HEADERS_TOO_LARGE) from None
        request += line
        if len(request) > max_header_bytes:
            raise _TooLarge(HEADERS_TOO_LARGE)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.partition(b":")
        field = name.strip().lower()
        if field == b"content-length" and value.strip().isdigit():
            length = int(value)
        elif field == b"expect" and value.strip().lower() == b"100-continue":
            expects = True
    else:
        return bytes(request)  # too many header lines: http.server answers 431
    if 0 < length <= max_body:
        if expects and request.split(b"\n", 1)[0].rstrip().endswith(b"HTTP/1.1"):
            writer.write(CONTINUE)
            await writer.drain()
        try:
            request += await reader.readexactly(length)
        except asyncio.IncompleteReadError as short:  # the client ended its side: the handler sees what came
            request += short.partial
    return bytes(request)


class _Told:
    """Log lines said once (a kind of event), or once per address until it has no connection left."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def once(self, what: str, line: str) -> None:
        if what not in self._said:
            self._said.add(what)
            print(f"wgtune: {line}", file=sys.stderr, flush=True)

    def forget(self, what: str) -> None:
        self._said.discard(what)


class PooledHTTPServer:
    """``http.server``'s handlers served by one asyncio loop (all waiting on clients) and a pool of
    ``workers`` threads (all answering), within ``limits``; a body of up to ``max_body`` bytes is
    read before the handler runs, a longer one is left to the handler to refuse from its headers.

    The interface of ``socketserver``'s servers, as the commands and tests use them:
    ``serve_forever`` (in any thread), ``shutdown`` (from another), ``server_close``,
    ``server_address``. ``quiet``: no traceback for a request that failed; IPv6 when the address
    has a colon.
    """

    request_queue_size = 1024  # a burst of connections waits in the kernel, not in SYN retries

    def __init__(self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler], *,
                 workers: int, limits: Limits | None = None, max_body: int = 0, quiet: bool = True) -> None:
        self.RequestHandlerClass, self.max_body, self.quiet = handler, max_body, quiet
        self.limits = limits or Limits()
        self._max_connections = min(self.limits.max_connections, _descriptor_share())
        self.socket = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(self.request_queue_size)
        except OSError:
            self.socket.close()
            raise
        self.server_address = self.socket.getsockname()[:2]
        self._workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="wgtune-serve")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._open: dict[str, int] = {}  # connections open per address group
        self._reading: OrderedDict[asyncio.Task, None] = OrderedDict()  # oldest first: evicted at the cap
        self._tasks: set[asyncio.Task] = set()
        self._told = _Told()

    # -- the socketserver interface -----------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until ``shutdown`` (or Ctrl-C in the main thread, which propagates); ``poll_interval``
        is socketserver's and unused: the loop wakes on events, not on a timer."""
        self._stopped.clear()
        try:
            if not self._stopping.is_set():
                asyncio.run(self._serve())
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` and wait for it to return (from another thread)."""
        self._stopping.set()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop ended already
                loop.call_soon_threadsafe(stop.set)
        self._stopped.wait()

    def server_close(self) -> None:
        """Close the listening socket and the workers (a handler running finishes first)."""
        self._stopping.set()
        self.socket.close()
        self._workers.shutdown(wait=True, cancel_futures=True)

    def handle_error(self, client_address: object) -> None:
        """A traceback with ``--verbose``; otherwise nothing (mostly a client that went away)."""
        if not self.quiet:
            print(f"wgtune: a request from {client_address} failed:", file=sys.stderr)
            traceback.print_exc()

    def connections_from(self, address: str) -> int:
        """Connections open now from ``address``'s group (read without a lock: a figure for tests)."""
        return self._open.get(address_group(address), 0)

    # -- the loop ------------------------------------------------------------------------------------

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        if self._stopping.is_set():
            return
        server = await asyncio.start_server(self._connection, sock=self.socket, backlog=self.request_queue_size,
                                            limit=self.limits.max_header_bytes)
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _admit(self, group: str, address: str) -> bool:
        """Count a new connection in, or say why not (once) and leave it out."""
        if self._open.get(group, 0) >= self.limits.max_per_address:
            self._told.once(group, f"{address} has {self.limits.max_per_address} connections open, the most one "
                                   f"address may have: its newer ones are refused (503) until some close "
                                   f"(--max-per-address to change)")
            return False
        if len(self._tasks) >= self._max_connections:
            if not self._reading:
                self._told.once("full", f"{self._max_connections} connections open, all being answered: "
                                        "new ones are refused (503) until some close")
                return False
            self._told.once("evicted", f"{self._max_connections} connections open: the oldest still sending "
                                       "its request is closed for each new one")
            self._reading.popitem(last=False)[0].cancel()
        self._open[group] = self._open.get(group, 0) + 1
        return True

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        group = address_group(str(peer[0]))
        if not self._admit(group, str(peer[0])):
            writer.write(BUSY)
            writer.close()
            return
        task = asyncio.current_task()
        self._tasks.add(task)
        self._reading[task] = None
        done = False
        try:
            done = await self._exchange(reader, writer, peer)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._reading.pop(task, None)
            self._tasks.discard(task)
            self._open[group] -= 1
            if not self._open[group]:
                del self._open[group]
                self._told.forget(group)
            if done:
                writer.close()
            else:
                writer.transport.abort()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: tuple) -> bool:
        """One request and its answer; whether the connection ended cleanly (else it is aborted)."""
        limits, loop = self.limits, asyncio.get_running_loop()
        first = b""
        try:
            async with asyncio.timeout(limits.idle_timeout) as deadline:
                first = await reader.read(1)
                if not first:
                    return True
                deadline.reschedule(loop.time() + limits.request_timeout)
                request = await _read_request(reader, writer, first, limits.max_header_bytes, self.max_body)
        except TimeoutError:
            if not first:
                return True  # silent since it opened: closed with nothing said
            self._log(peer, f"no whole request within {limits.request_timeout:g} s: 408")
            self._told.once("408", f"a request from {peer[0]} did not arrive whole within {limits.request_timeout:g} "
                                   "s and was answered 408 (said once; --request-timeout to change)")
            return await self._send(reader, writer, [TIMED_OUT], peer)
        except _TooLarge as refused:
            return await self._send(reader, writer, [refused.answer], peer)
        self._reading.pop(asyncio.current_task(), None)
        try:
            answer = await loop.run_in_executor(self._workers, self._answer, request, peer)
        except RuntimeError:  # the workers are closed: the server is stopping
            return False
        return await self._send(reader, writer, answer, peer)

    def _answer(self, request: bytes, peer: tuple) -> list[bytes]:
        """Run the handler on a whole request (in a worker): the bytes of its answer."""
        exchange = _Exchange(request)
        try:
            self.RequestHandlerClass(exchange, peer, self)
        except Exception:
            self.handle_error(peer)
        return exchange.answer

    async def _send(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: list[bytes],
                    peer: tuple) -> bool:
        """Write ``answer`` within its deadline, then end our side and drain what the client still
        sends for ``linger`` seconds, so that it reads the answer rather than a reset."""
        size = sum(len(part) for part in answer)
        try:
            async with asyncio.timeout(self.limits.send_deadline(size)):
                for part in answer:
                    view = memoryview(part)
                    for start in range(0, len(view), CHUNK):
                        writer.write(view[start:start + CHUNK])
                        await writer.drain()
                writer.transport.set_write_buffer_limits(high=0)
                await writer.drain()  # all of it handed to the kernel
        except TimeoutError:
            self._log(peer, f"the answer ({size} bytes) was not taken within {self.limits.send_deadline(size):.0f} s")
            self._told.once("slow reader", f"{peer[0]} did not take an answer of {size} bytes within "
                                           f"{self.limits.send_deadline(size):.0f} s: closed (said once)")
            return False
        if writer.can_write_eof():
            writer.write_eof()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.limits.linger):
                while await reader.read(CHUNK):
                    pass
        return True

    def _log(self, peer: tuple, what: str) -> None:
        if not self.quiet:
            print(f"{peer[0]} - - {what}", file=sys.stderr, flush=True)
