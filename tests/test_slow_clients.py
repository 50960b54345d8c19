"""Slow clients against ``wgtune serve`` and ``wgtune collect``: an honest request is answered.

Tricklers (a request's start, then a byte at a time) and half-sent requests (headers without
their end; a POST whose body stops halfway) are opened against each server with two workers,
and an honest request is sent meanwhile. No assertion is a time: where deadlines are long the
honest answer must come while every attacker is still connected and unanswered (a server that
gave each a thread would answer only after they ended); where they are short the attackers must
be told 408 and closed, a trickler still sending. Attacking clients bind their own 127.x.y.z
(all loopback on Linux), so that the per-address limit is not what saves the honest request.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_serve import make_site

from wgtune.backends.collector import Collector, RateLimiter
from wgtune.backends.collector_db import VoteDatabase
from wgtune.cli import build_parser
from wgtune.cli.collect import make_collector_server
from wgtune.cli.file_bytes import FileBytes
from wgtune.cli.pooled_server import Limits, PooledHTTPServer
from wgtune.cli.serve import make_server

LONG = Limits(idle_timeout=600, request_timeout=600, send_timeout=600)  # nothing times out during a test
TRICKLERS, HALF_SENT = 20, 10  # 30 attackers against 2 workers


@dataclass(frozen=True)
class Site:
    """A server under test: its port, what an attack sends first, and the honest request's path."""

    port: int
    trickle: bytes  # a request's start whose headers never end
    half: bytes  # a request sent halfway
    honest: str


@contextlib.contextmanager
def running(kind: str, tmp_path: Path, limits: Limits) -> Iterator[tuple[Site, PooledHTTPServer]]:
    """``wgtune serve`` or ``wgtune collect`` with two workers on a free port, for a block."""
    if kind == "serve":
        server = make_server("127.0.0.1", 0, *make_site(tmp_path), limits=limits, workers=2)
        start = b"GET /app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        site = Site(server.server_address[1], start + b"X-Trickle: ", start + b"User-Agent: hal", "/app.js")
        database = None
    else:
        database = VoteDatabase(tmp_path / "fleet.sqlite3")
        collector = Collector(database, limiter=RateLimiter(rate=1000.0, burst=1000))
        server = make_collector_server(collector, "127.0.0.1", 0, limits=limits, workers=2)
        start = b"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        site = Site(server.server_address[1], start + b"X-Trickle: ",
                    start + b"Content-Length: 2000\r\n\r\n{" + b" " * 999, "/v1/health")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site, server
    finally:
        server.shutdown()
        server.server_close()
        if database is not None:
            database.close()


def attacker(port: int, number: int, first: bytes, receive_buffer: int | None = None) -> socket.socket:
    """A connection from its own loopback address that has sent ``first``."""
    connection = socket.socket()
    if receive_buffer is not None:  # a small window: what the server can push ahead of a reader stays small
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    connection.bind((f"127.0.{number // 200 + 1}.{number % 200 + 2}", 0))
    connection.settimeout(30)  # a guard against a hang, never reached when the server works
    connection.connect(("127.0.0.1", port))
    connection.sendall(first)
    return connection


def unanswered(connection: socket.socket) -> bool:
    """Whether the connection is open with nothing from the server to read."""
    connection.setblocking(False)
    try:
        connection.recv(1)
    except BlockingIOError:
        return True
    finally:
        connection.settimeout(30)
    return False


def wait_until(condition: Callable[[], bool]) -> None:
    """Wait for what the server does on its own (a guard of a minute against a hang, not a bound)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "the server never got there"
        time.sleep(0.01)


def honest_get(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def answer_of(connection: socket.socket) -> bytes:
    """Everything the server sends up to its close."""
    answer = bytearray()
    with contextlib.suppress(ConnectionResetError):
        while chunk := connection.recv(1 << 20):
            answer += chunk
    return bytes(answer)


@pytest.mark.parametrize("kind", ["serve", "collect"])
def test_tricklers_and_half_sent_requests_hold_no_worker(kind, tmp_path):
    with running(kind, tmp_path, LONG) as (site, _server), contextlib.ExitStack() as stack:
        attackers = [stack.enter_context(attacker(site.port, n, site.trickle)) for n in range(TRICKLERS)]
        attackers += [stack.enter_context(attacker(site.port, TRICKLERS + n, site.half)) for n in range(HALF_SENT)]
        for connection in attackers[:TRICKLERS]:
            connection.sendall(b"x")  # a byte more: each has started sending, past any wait for a first byte
        assert honest_get(site.port, site.honest) == 200
        assert all(unanswered(connection) for connection in attackers)  # answered while every attacker waits
        # They were live requests all along: one finished now is answered.
        finished = attackers[0]
        finished.sendall(b"1\r\n\r\n" if kind == "serve" else b"1\r\nContent-Length: 2\r\n\r\n{}")
        assert answer_of(finished).startswith(b"HTTP/1.0 200 " if kind == "serve" else b"HTTP/1.0 400 ")


@pytest.mark.parametrize("kind", ["serve", "collect"])
def test_a_request_not_whole_by_its_deadline_gets_408_though_it_still_trickles(kind, tmp_path):
    limits = Limits(idle_timeout=600, request_timeout=0.3)
    with running(kind, tmp_path, limits) as (site, _server):
        half = attacker(site.port, 0, site.half)
        trickler = attacker(site.port, 1, site.trickle)
        sent, stop = [0], threading.Event()

        def trickle() -> None:  # a byte at a time, far more often than the deadline: no gap is ever 0.3 s
            with contextlib.suppress(OSError):
                while not stop.wait(0.02):
                    trickler.sendall(b"a")
                    sent[0] += 1

        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        try:
            told = answer_of(trickler)
        finally:
            stop.set()
            sender.join()
        assert told.startswith(b"HTTP/1.0 408 ") and sent[0] > 1
        assert answer_of(half).startswith(b"HTTP/1.0 408 ")
        assert honest_get(site.port, site.honest) == 200
        half.close()
        trickler.close()


def test_past_its_share_an_address_is_refused_and_said_once_and_others_are_answered(tmp_path, capfd):
    limits = Limits(idle_timeout=600, request_timeout=600, max_per_address=3)
    with running("serve", tmp_path, limits) as (site, server), contextlib.ExitStack() as stack:
        held = [stack.enter_context(attacker(site.port, 0, site.trickle)) for _ in range(3)]
        extra = [stack.enter_context(attacker(site.port, 0, site.trickle)) for _ in range(4)]
        assert all(answer_of(connection).startswith(b"HTTP/1.0 503 ") for connection in extra)
        assert all(unanswered(connection) for connection in held)
        assert honest_get(site.port, site.honest) == 200  # another address: answered
        for connection in held:  # the three finish their requests: the address has a share again
            connection.sendall(b"1\r\n\r\n")
            assert answer_of(connection).startswith(b"HTTP/1.0 200 ")
            connection.close()
        wait_until(lambda: server.connections_from("127.0.1.2") == 0)
        again = stack.enter_context(attacker(site.port, 0, b"GET /app.js HTTP/1.0\r\n\r\n"))
        assert answer_of(again).startswith(b"HTTP/1.0 200 ")
    said = capfd.readouterr().err
    assert said.count("connections open, the most one address may have") == 1, said
    assert "127.0.1.2 has 3 connections open" in said


def test_a_client_that_never_reads_holds_no_worker_and_is_closed_past_its_deadline(tmp_path):
    big = 32 << 20  # far more than the kernel's socket buffers take
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "big.bin").write_bytes(b"\0" * big)
    request = b"GET /big.bin HTTP/1.0\r\n\r\n"
    with running("serve", tmp_path, LONG) as (site, _server), contextlib.ExitStack() as stack:
        readers = [stack.enter_context(attacker(site.port, n, request)) for n in range(4)]
        for reader in readers:  # each has its answer started, and then does not read on
            assert reader.recv(15).startswith(b"HTTP/1.0 200 ")
        assert honest_get(site.port, site.honest) == 200  # 4 stuck readers, 2 workers
        # Each was still being sent its answer when the honest one was answered: a worker blocked
        # on one would have given up by now, and it would be cut short.
        assert all(len(answer_of(reader)) > big for reader in readers)
    short = Limits(send_timeout=0.3, min_send_rate=1 << 30)
    with running("serve", tmp_path, short) as (site, server), contextlib.ExitStack() as stack:
        readers = [stack.enter_context(attacker(site.port, n, request, receive_buffer=1 << 16)) for n in range(4)]
        for reader in readers:  # its answer started (then the server's count of it is what says it ended)
            assert reader.recv(15).startswith(b"HTTP/1.0 200 ")
        wait_until(lambda: all(server.connections_from(f"127.0.1.{n + 2}") == 0 for n in range(4)))
        assert all(len(answer_of(reader)) < big for reader in readers)  # cut short: the server gave up
        assert honest_get(site.port, site.honest) == 200


def test_past_the_connection_cap_the_oldest_still_sending_its_request_is_closed(tmp_path):
    limits = Limits(idle_timeout=600, request_timeout=600, max_connections=4)
    with running("serve", tmp_path, limits) as (site, _server), contextlib.ExitStack() as stack:
        first = [stack.enter_context(attacker(site.port, n, site.trickle)) for n in range(4)]
        later = stack.enter_context(attacker(site.port, 4, site.trickle))
        assert answer_of(first[0]) == b""  # the oldest, closed with nothing said
        assert all(unanswered(connection) for connection in [*first[1:], later])
        assert honest_get(site.port, site.honest) == 200


def test_headers_past_the_limit_are_refused_before_any_worker_sees_them(tmp_path):
    with running("serve", tmp_path, LONG) as (site, _server):
        too_long = attacker(site.port, 0, b"GET /app.js HTTP/1.1\r\n" + b"X-Pad: " + b"a" * (70 << 10) + b"\r\n\r\n")
        assert answer_of(too_long).startswith(b"HTTP/1.0 431 ")
        many = b"".join(b"X-%d: 1\r\n" % n for n in range(2000))  # under the bytes, over the lines: http.server's 431
        assert answer_of(attacker(site.port, 1, b"GET /app.js HTTP/1.1\r\n" + many + b"\r\n")).startswith(
            b"HTTP/1.0 431 ")
        assert honest_get(site.port, site.honest) == 200


def test_slow_readers_of_one_file_share_its_bytes_and_a_changed_file_is_read_again(tmp_path):
    files = FileBytes()
    path = tmp_path / "pyodide.asm.wasm"
    path.write_bytes(b"\0asm" * 1000)
    first = files.read(path, path.stat())
    assert files.read(path, path.stat()) is first  # one copy, whoever sends it
    path.write_bytes(b"\0asm" * 2000)
    assert files.read(path, path.stat()) == b"\0asm" * 2000
    small = FileBytes(budget=5000, largest=6000)
    assert small.read(path, path.stat()) is not small.read(path, path.stat())  # 8000 bytes: too big to keep


@pytest.mark.parametrize("command", ["serve", "collect"])
def test_the_limits_options_reach_the_server_and_bad_values_are_usage_errors(command, capsys):
    extra = ["--db", "x.sqlite3"] if command == "collect" else []
    args = build_parser().parse_args([command, *extra, "--request-timeout", "2.5", "--max-per-address", "7"])
    assert Limits.of_args(args) == Limits(request_timeout=2.5, max_per_address=7)
    assert Limits.of_args(build_parser().parse_args([command, *extra])) == Limits()
    for option, value, problem in (("--request-timeout", "0", "seconds above 0"),
                                   ("--max-per-address", "0", "at least 1 connection")):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, *extra, option, value])
        assert problem in capsys.readouterr().err
    # The help states Limits' defaults.
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"(default: {Limits().request_timeout:g})" in help_text
    assert f"(default: {Limits().max_per_address})" in help_text


def test_a_client_that_expects_100_continue_is_told_to_go_on_before_it_sends_its_body(tmp_path):
    """curl sends ``Expect: 100-continue`` with a body over 1 KiB and waits (a second) for the go-ahead:
    the server says it once the headers are in, and answers the body when it comes."""
    with running("collect", tmp_path, LONG) as (site, _server):
        body = b"{" + b" " * 2000 + b"}"
        client = attacker(site.port, 0, b"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                          b"application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        told = bytearray()
        while not told.endswith(b"\r\n\r\n"):  # nothing more is sent until the server speaks
            chunk = client.recv(1)
            assert chunk, f"closed before the go-ahead: {bytes(told)!r}"
            told += chunk
        assert bytes(told) == b"HTTP/1.1 100 Continue\r\n\r\n"
        client.sendall(body)
        answer = answer_of(client)
        assert answer.startswith(b"HTTP/1.") and b" 100 " not in answer.split(b"\r\n", 1)[0], answer[:200]
        # Without the header, no go-ahead: the answer comes first.
        plain = attacker(site.port, 1, b"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
        assert not answer_of(plain).startswith(b"HTTP/1.1 100")
