"""Slow clients against ``wgtune serve`` and ``wgtune collect``: how long an honest request waits.

For each server (started as its command, in a child process) the attack is kept up for the whole
run: ``--tricklers`` clients that send a request's start and then one byte every ``--interval``
seconds (headers that never end), and ``--half`` requests sent halfway that then say nothing
(``serve``: headers without their end; ``collect``: a POST whose body stops halfway). A client the
server closes comes back at once, as an attacker's would. Meanwhile an honest request (``GET
/app.js``; ``GET /v1/bundle``) is sent ``--tries`` times, each on a new connection, and its
latency printed: median and max, with how many attacking connections the server closed (and how
many of those it told 408 first).

Two placements of the attack: every attacking client on its own address (127.0.0.0/8 is all
loopback on Linux, so each binds its own 127.x.y.z), where only the deadlines and the server's
design help; and all of them on one address, where the per-address limit takes over.

Run: ``python bench/slow_clients.py [--tricklers 200] [--half 40] [--tries 20] [--interval 5]
[--server serve|collect]``. Linux only (the 127/8 source addresses).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import http.client
import re
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

LAUNCH = "import sys; from wgtune.cli import main; sys.exit(main(sys.argv[1:]))"


def make_site(root: Path) -> tuple[Path, Path]:
    """A page directory with a Pyodide stand-in and a wheel stand-in: what ``wgtune serve`` needs."""
    web = root / "web"
    (web / "node_modules" / "pyodide").mkdir(parents=True)
    (web / "index.html").write_text("<!doctype html><title>wgtune</title>")
    (web / "app.js").write_text("export {};\n" * 100)
    (web / "node_modules" / "pyodide" / "pyodide.mjs").write_text("export {};")
    wheel = root / "wgtune-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    return web, wheel


@contextlib.contextmanager
def server(kind: str, root: Path):
    """``wgtune serve`` or ``wgtune collect`` on a free port of 127.0.0.1: (port, honest path, attack)."""
    if kind == "serve":
        web, wheel = make_site(root)
        command = ["serve", "--port", "0", "--web-dir", str(web), "--wheel", str(wheel)]
        honest, start = "/app.js", b"GET /app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        half = start + b"User-Agent: half"
    else:
        command = ["collect", "--port", "0", "--db", str(root / "fleet.sqlite3")]
        honest, start = "/v1/bundle", b"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        half = start + b"Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n" + b"{" + b" " * 999
    process = subprocess.Popen([sys.executable, "-c", LAUNCH, *command], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not found:
            raise SystemExit(f"{kind} did not start: {line!r}")
        yield int(found.group(1)), honest, start + b"X-Trickle: ", half
    finally:
        process.terminate()
        process.wait(timeout=30)


@dataclass
class Attack:
    """Every attacking connection, driven by one thread: tricklers send a byte each ``interval``."""

    port: int
    trickle_start: bytes
    half: bytes
    tricklers: int
    halves: int
    interval: float
    one_address: bool
    closed: int = 0  # connections the server closed (then opened again)
    told_408: int = 0
    refused: int = 0  # connects the server's backlog or limits turned away
    _stop: threading.Event = field(default_factory=threading.Event)

    def source(self, index: int) -> str:
        return "127.0.0.2" if self.one_address else f"127.{1 + index // 250}.{index % 250 + 2}.{index % 7 + 1}"

    def _open(self, index: int, first: bytes) -> socket.socket | None:
        connection = socket.socket()
        try:
            connection.bind((self.source(index), 0))
            connection.settimeout(10)
            connection.connect(("127.0.0.1", self.port))
            connection.sendall(first)
            connection.setblocking(False)
            return connection
        except OSError:
            connection.close()
            self.refused += 1
            return None

    def run(self) -> None:
        watch = selectors.DefaultSelector()
        kinds = [(i, self.trickle_start, True) for i in range(self.tricklers)]
        kinds += [(self.tricklers + i, self.half, False) for i in range(self.halves)]
        live: dict[int, socket.socket] = {}
        next_byte = time.monotonic() + self.interval

        def reopen(index: int, first: bytes, trickles: bool) -> None:
            connection = self._open(index, first)
            if connection is not None:
                live[index] = connection
                watch.register(connection, selectors.EVENT_READ, (index, first, trickles))

        def closed_by_server(connection: socket.socket, data: tuple) -> None:
            watch.unregister(connection)
            del live[data[0]]
            connection.close()
            self.closed += 1
            reopen(*data)

        for index, first, trickles in kinds:
            reopen(index, first, trickles)
        self.ready.set()
        while not self._stop.is_set():
            for key, _ in watch.select(timeout=0.05):
                try:
                    answer = key.fileobj.recv(4096)
                except OSError:
                    answer = b""
                if answer.startswith(b"HTTP/1.") and b" 408 " in answer[:16]:
                    self.told_408 += 1
                closed_by_server(key.fileobj, key.data)
            if time.monotonic() >= next_byte:
                next_byte += self.interval
                for key in list(watch.get_map().values()):
                    if key.data[2]:
                        try:
                            key.fileobj.send(b"a")
                        except OSError as error:
                            if error.errno != errno.EAGAIN:
                                closed_by_server(key.fileobj, key.data)
            for index, first, trickles in kinds:  # those whose reconnect failed: try again
                if index not in live:
                    reopen(index, first, trickles)
        for connection in live.values():
            connection.close()
        watch.close()

    def __post_init__(self) -> None:
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self) -> Attack:
        self.thread.start()
        self.ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()


def honest_latency(port: int, path: str, timeout: float) -> tuple[float, int | str]:
    """Seconds until a whole answer to one request on a new connection, and its status (or the error)."""
    started = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=("127.0.0.1", 0))
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        connection.close()
        return time.perf_counter() - started, response.status
    except OSError as error:
        return time.perf_counter() - started, type(error).__name__


def measure(kind: str, args: argparse.Namespace, one_address: bool) -> str:
    with tempfile.TemporaryDirectory(prefix="wgtune-slow-") as root, server(kind, Path(root)) as (port, path, start,
                                                                                                   half):
        with Attack(port, start, half, args.tricklers, args.half, args.interval, one_address) as attack:
            time.sleep(args.settle)  # the attack in place: every connection open, its first bytes sent
            results = []
            for _ in range(args.tries):
                results.append(honest_latency(port, path, args.timeout))
                time.sleep(args.spacing)
        times = [seconds for seconds, _ in results]
        statuses = sorted({str(status) for _, status in results})
        where = "one address" if one_address else "each its own address"
        return (f"{kind:8} {where:21} honest {path}: median {statistics.median(times) * 1e3:8.1f} ms, "
                f"max {max(times) * 1e3:8.1f} ms over {len(times)} ({', '.join(statuses)}); "
                f"attackers closed by the server {attack.closed} (408 first: {attack.told_408}), "
                f"connects refused {attack.refused}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["serve", "collect"], action="append")
    parser.add_argument("--tricklers", type=int, default=200)
    parser.add_argument("--half", type=int, default=40)
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between a trickler's bytes")
    parser.add_argument("--spacing", type=float, default=0.75, help="seconds between honest requests")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds from the attack's start to the first try")
    parser.add_argument("--timeout", type=float, default=120.0, help="an honest request's limit")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    print(f"{args.tricklers} tricklers (a byte every {args.interval:g} s) and {args.half} half-sent requests; "
          f"{args.tries} honest requests {args.spacing:g} s apart", flush=True)
    for kind in args.server or ["serve", "collect"]:
        for one_address in (False, True):
            print(measure(kind, args, one_address), flush=True)


if __name__ == "__main__":
    main()
