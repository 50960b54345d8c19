"""``wgtune serve``: what it serves, with which headers, and what it refuses."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import selectors
import socket
import threading
import time
import zipfile
from pathlib import Path

import pytest

from wgtune.cli.pooled_server import Limits
from wgtune.cli.serve import HostPolicy, build_wheel, checkout_root, exposure_warning, make_server, wheel_url

WHEEL_NAME = "wgtune-0.1.0-py3-none-any.whl"
WHEEL_URL = "/wheels/fcab7fcc2b4cffd9/wgtune-0.1.0-py3-none-any.whl"  # the digest of the bytes b"PK"


def make_site(root: Path) -> tuple[Path, Path]:
    """A web directory with Pyodide, files it must never serve, and a wheel: ``(web, wheel)``."""
    web = root / "web"
    pyodide = web / "node_modules" / "pyodide"
    for folder in (pyodide / ".cache", web / "sub" / ".hidden-dir", web / ".git"):
        folder.mkdir(parents=True, exist_ok=True)
    (web / "index.html").write_text("<!doctype html><title>wgtune</title>")
    (web / "app.js").write_text("export {};")
    (web / "sub" / "page.js").write_text("export {};")
    for secret in (web / ".secret", web / "sub" / ".env", web / "sub" / ".hidden-dir" / "x.js", web / ".git" / "config",
                   pyodide / ".cache" / "x.js", web / "node_modules" / "left-pad.js", root / "outside.txt"):
        secret.write_text("no")
    (pyodide / "pyodide.mjs").write_text("export {};")
    (pyodide / "pyodide.asm.wasm").write_bytes(b"\0asm")
    wheel = root / "wheels" / WHEEL_NAME
    wheel.parent.mkdir(exist_ok=True)
    wheel.write_bytes(b"PK")
    return web, wheel


@contextlib.contextmanager
def running(root: Path, host: str = "127.0.0.1", **options):
    """A server on a free port for the block (its port), shut down and closed after it."""
    server = make_server(host, 0, *make_site(root), **options)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def site(tmp_path: Path):
    with running(tmp_path) as port:
        yield port


def get(port: int, path: str, method: str = "GET", headers: dict | None = None) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, headers=headers or {})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/", "text/html; charset=utf-8"),
        ("/app.js", "text/javascript"),
        ("/sub/page.js", "text/javascript"),
        ("/pyodide/pyodide.mjs", "text/javascript"),
        ("/pyodide/pyodide.asm.wasm", "application/wasm"),
        (WHEEL_URL, "application/zip"),
        ("/wgtune-config.json", "application/json"),
    ],
)
def test_serves_its_files_with_their_types_and_cross_origin_isolation(site, path, content_type):
    status, headers, _ = get(site, path)
    assert status == 200
    assert headers["content-type"] == content_type
    assert headers["cross-origin-opener-policy"] == "same-origin"
    assert headers["cross-origin-embedder-policy"] == "require-corp"


def test_the_config_names_the_wheel_the_page_installs_relative_to_itself(site):
    _, _, body = get(site, "/wgtune-config.json")
    config = json.loads(body)
    assert config["wheel"] == WHEEL_URL[1:]  # relative: the library may live under any path
    assert get(site, "/" + config["wheel"])[2] == b"PK"


def test_the_wheels_url_carries_the_digest_of_its_bytes(tmp_path):
    wheel = tmp_path / WHEEL_NAME
    wheel.write_bytes(b"PK")
    first = wheel_url(wheel)
    assert f"/{first}" == WHEEL_URL
    wheel.write_bytes(b"PK\x03\x04")
    assert wheel_url(wheel) != first and wheel_url(wheel).endswith(f"/{WHEEL_NAME}")


@pytest.mark.parametrize(
    "path",
    [
        "/node_modules/left-pad.js",  # only Pyodide, under /pyodide/, comes from node_modules
        "/.secret",
        "/sub/.env",  # dotfiles and dot-directories at any depth, in either tree
        "/sub/.hidden-dir/x.js",
        "/.git/config",
        "/pyodide/.cache/x.js",
        "/sub/%2eenv",
        "/sub/./page.js",
        "/../outside.txt",
        "/%2e%2e/outside.txt",
        "/pyodide/../../outside.txt",
        "/pyodide/%2e%2e/%2e%2e/%2e%2e/outside.txt",
        "/wheels/other.whl",
        f"/wheels/{WHEEL_NAME}",  # only at its digest's URL
        "/wheels/0000000000000000/wgtune-0.1.0-py3-none-any.whl",
        "/missing.js",
    ],
)
def test_nothing_outside_its_own_files(site, path):
    status, _, body = get(site, path)
    assert status == 404
    assert body != b"no"


def test_head_answers_without_a_body_and_other_methods_are_refused(site):
    status, headers, body = get(site, "/app.js", "HEAD")
    assert status == 200 and body == b"" and headers["content-length"] == "10"
    assert get(site, "/app.js", "POST")[0] == 501


def test_a_web_dir_without_pyodide_is_a_clear_error(tmp_path):
    (tmp_path / "index.html").write_text("x")
    with pytest.raises(OSError, match="make setup"):
        make_server("127.0.0.1", 0, tmp_path, tmp_path / "w.whl")


def test_the_wheel_is_built_from_this_checkout_once_per_state_of_its_sources(tmp_path):
    wheel = build_wheel(checkout_root(), tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith("METADATA"))
    assert {"wgtune/__init__.py", "wgtune/backends/browser.py", "wgtune/kernels/demo.py"} <= names
    # In Pyodide nothing native is required: every dependency is marked off for emscripten.
    requirements = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requirements and all("sys_platform != \"emscripten\"" in line or "extra ==" in line
                                for line in requirements)
    assert build_wheel(checkout_root(), tmp_path) == wheel  # the same sources: not built again


def test_a_port_in_use_is_a_clear_error(site, tmp_path):
    web = tmp_path / "web"
    with pytest.raises(OSError, match=rf"port {site} .* in use: pass --port"):
        make_server("127.0.0.1", site, web, tmp_path / "wheels" / "wgtune-0.1.0-py3-none-any.whl")


def raw_exchange(port: int, request: bytes) -> bytes:
    """Send raw bytes and read the whole answer, up to the server's orderly close (no reset)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


def test_idle_connections_cost_no_thread_each_and_are_closed_after_the_idle_timeout(tmp_path):
    idle_timeout = 1.0
    # Counted from here: earlier tests in the process may leave threads of their own (a device's
    # compile pool), which are not the server's.
    before = threading.active_count()
    limits = Limits(idle_timeout=idle_timeout, max_per_address=1000)  # all from 127.0.0.1
    with running(tmp_path, limits=limits) as port, contextlib.ExitStack() as stack:
        opened_at = time.monotonic()
        silent = [stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10)) for _ in range(400)]
        assert get(port, "/app.js")[0] == 200  # served meanwhile
        assert threading.active_count() - before < 40  # 400 idle connections, far fewer threads
        watcher = selectors.DefaultSelector()
        for connection in silent:
            watcher.register(connection, selectors.EVENT_READ)
        closed_at = []
        while len(closed_at) < len(silent) and time.monotonic() - opened_at < 10:
            for key, _ in watcher.select(timeout=1):
                assert key.fileobj.recv(1) == b""  # closed by the server, with nothing said
                watcher.unregister(key.fileobj)
                closed_at.append(time.monotonic())
        watcher.close()
        assert len(closed_at) == len(silent)
        assert min(closed_at) - opened_at >= idle_timeout * 0.9


def test_a_request_that_stalls_halfway_is_given_up_after_the_request_timeout(tmp_path):
    with running(tmp_path, limits=Limits(request_timeout=0.3)) as port:
        answer = raw_exchange(port, b"GET /app.js HTTP/1.1\r\n")  # no end of headers ever comes
        assert answer.startswith(b"HTTP/1.0 408 ")
        assert get(port, "/app.js")[0] == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}",
                                  "localhost.evil.example", "192.168.1.7:{port}", "[::2]:{port}", "localhost:x",
                                  "", "[::1"])
def test_a_foreign_host_is_refused(site, host):
    status, _, body = get(site, "/", headers={"Host": host.format(port=site)})
    assert status in (400, 403)
    assert b"wgtune" not in body


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LocalHost:{port}", "[::1]:{port}",
                                  "localhost"])
def test_loopback_names_are_served(site, host):
    assert get(site, "/", headers={"Host": host.format(port=site)})[0] == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://localhost:{port}", "http://127.0.0.1:1",
                                    "https://127.0.0.1:{port}"])
def test_a_request_from_another_origin_is_refused(site, origin):
    status, _, body = get(site, "/app.js", headers={"Origin": origin.format(port=site)})
    assert status == 403 and body != b"export {};"


def test_a_request_from_the_page_itself_is_served(site):
    headers = {"Host": f"localhost:{site}", "Origin": f"http://localhost:{site}"}
    assert get(site, "/app.js", headers=headers)[0] == 200


def test_host_policy_admits_the_name_given_to_host_and_any_address_on_a_wildcard_bind():
    named = HostPolicy.for_bind("tuner.lan")
    assert named.allows("tuner.lan:8000") and named.allows("localhost:8000")
    assert not named.allows("evil.example:8000") and not named.allows("192.168.1.7:8000")
    assert HostPolicy.for_bind("::1").allows("[::1]:8000")
    wildcard = HostPolicy.for_bind("0.0.0.0")
    assert wildcard.allows("192.168.1.7:8000") and wildcard.allows("[fe80::1]:8000")
    assert wildcard.allows(f"{socket.gethostname()}:8000")
    assert not wildcard.allows("evil.example:8000") and not wildcard.allows("fe80::1")


@pytest.mark.parametrize(
    ("target", "status"),
    [
        (b"/a\0b", 400),
        (b"/a%00b", 400),
        (b"/a%0ab", 400),
        (b"/a%zzb", 400),
        (b"/a%ff", 400),
        (b"/" + b"a" * 5000, 414),
        (b"/" + b"a/" * 1000, 404),  # under the limit, but no such file
        (b"/" + b"a" * 300 + b".js", 404),  # a name too long for the file system
        (b"http://[bad/", 400),
        (b"*", 400),
    ],
)
def test_a_malformed_path_gets_an_answer_not_a_traceback(site, capfd, target, status):
    answer = raw_exchange(site, b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answer.startswith(f"HTTP/1.0 {status} ".encode())
    assert get(site, "/app.js")[0] == 200  # and the server goes on
    assert capfd.readouterr().err == ""  # quiet, and no traceback


def test_verbose_logs_each_request(tmp_path, capfd):
    with running(tmp_path, quiet=False) as port:
        get(port, "/app.js")
    assert '"GET /app.js HTTP/1.1" 200' in capfd.readouterr().err


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "192.168.1.7", "tuner.lan"])
def test_binding_beyond_loopback_warns(host):
    assert "exposes the server to the network" in exposure_warning(host)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_binding_to_loopback_does_not_warn(host):
    assert exposure_warning(host) is None


def test_making_a_server_on_every_interface_prints_the_warning(tmp_path, capsys):
    server = make_server("0.0.0.0", 0, *make_site(tmp_path))
    server.server_close()
    assert "--host 0.0.0.0 exposes the server to the network" in capsys.readouterr().err
    server = make_server("127.0.0.1", 0, *make_site(tmp_path))
    server.server_close()
    assert capsys.readouterr().err == ""


def test_many_requests_at_once_are_all_answered_by_a_bounded_pool(tmp_path):
    with running(tmp_path, workers=4) as port:
        answers: list[int] = []
        clients = [threading.Thread(target=lambda: answers.append(get(port, "/app.js")[0])) for _ in range(48)]
        for client in clients:
            client.start()
        for client in clients:
            client.join(timeout=20)
        assert answers == [200] * 48


# -- HTTP caching ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "cache_control"),
    [
        ("/", "no-cache"),  # the page's own files: kept, but revalidated on every use
        ("/app.js", "no-cache"),
        ("/wgtune-config.json", "no-cache"),  # names the wheel of the moment
        ("/pyodide/pyodide.asm.wasm", "no-cache"),  # its URL carries no version: a new pin must be seen
        (WHEEL_URL, "public, max-age=31536000, immutable"),  # another wheel, another URL
    ],
)
def test_each_kind_of_file_has_its_cache_control_and_validators(site, path, cache_control):
    status, headers, _ = get(site, path)
    assert status == 200
    assert headers["cache-control"] == cache_control
    assert headers["etag"].startswith('"') and headers["etag"].endswith('"')
    if path != "/wgtune-config.json":  # a file: its modification time too
        assert headers["last-modified"].endswith(" GMT")


@pytest.mark.parametrize("path", ["/app.js", "/pyodide/pyodide.asm.wasm", WHEEL_URL, "/wgtune-config.json"])
def test_a_conditional_request_for_an_unchanged_file_gets_a_304_with_no_body(site, path):
    _, first, body = get(site, path)
    assert body
    status, headers, body = get(site, path, headers={"If-None-Match": first["etag"]})
    assert status == 304 and body == b""
    assert headers["etag"] == first["etag"] and headers["cache-control"] == first["cache-control"]
    assert headers["cross-origin-embedder-policy"] == "require-corp"  # a 304 keeps the isolation headers
    # A list of tags, or a weak form of ours, matches too (If-None-Match compares weakly).
    assert get(site, path, headers={"If-None-Match": f'"other", W/{first["etag"]}'})[0] == 304
    assert get(site, path, "HEAD", headers={"If-None-Match": first["etag"]})[0] == 304


def test_a_changed_file_is_sent_again_with_a_new_etag(tmp_path):
    with running(tmp_path) as port:
        _, first, _ = get(port, "/app.js")
        app = tmp_path / "web" / "app.js"
        app.write_text("export const changed = true;")
        os.utime(app, ns=(time.time_ns(), time.time_ns() + 2_000_000_000))  # a later time, whatever the clock's grain
        status, headers, body = get(port, "/app.js", headers={"If-None-Match": first["etag"],
                                                              "If-Modified-Since": first["last-modified"]})
        assert status == 200 and body == b"export const changed = true;"
        assert headers["etag"] != first["etag"]


def test_if_modified_since_is_honoured_and_if_none_match_takes_precedence(site):
    _, first, _ = get(site, "/app.js")
    assert get(site, "/app.js", headers={"If-Modified-Since": first["last-modified"]})[0] == 304
    assert get(site, "/app.js", headers={"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"})[0] == 200
    assert get(site, "/app.js", headers={"If-Modified-Since": "not a date"})[0] == 200
    # RFC 9110: with If-None-Match present, If-Modified-Since is ignored.
    both = {"If-None-Match": '"stale"', "If-Modified-Since": first["last-modified"]}
    assert get(site, "/app.js", headers=both)[0] == 200


def test_refusals_and_misses_are_never_cached_nor_answered_with_a_304(site):
    status, headers, _ = get(site, "/missing.js", headers={"If-None-Match": "*"})
    assert status == 404 and headers["cache-control"] == "no-store" and "etag" not in headers
    _, first, _ = get(site, "/app.js")
    status, headers, _ = get(site, "/app.js", headers={"Host": "evil.example", "If-None-Match": first["etag"]})
    assert status == 403 and headers["cache-control"] == "no-store"
