"""``wgtune serve``: what it serves, with which headers, and what it refuses."""

from __future__ import annotations

import http.client
import json
import threading
import zipfile
from pathlib import Path

import pytest

from wgtune.cli.serve import build_wheel, checkout_root, make_server


@pytest.fixture
def site(tmp_path: Path):
    web = tmp_path / "web"
    (web / "node_modules" / "pyodide").mkdir(parents=True)
    (web / "index.html").write_text("<!doctype html><title>wgtune</title>")
    (web / "app.js").write_text("export {};")
    (web / ".secret").write_text("no")
    (web / "node_modules" / "left-pad.js").write_text("no")
    (web / "node_modules" / "pyodide" / "pyodide.mjs").write_text("export {};")
    (web / "node_modules" / "pyodide" / "pyodide.asm.wasm").write_bytes(b"\0asm")
    (tmp_path / "outside.txt").write_text("no")
    wheel = tmp_path / "wheels" / "wgtune-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    server = make_server("127.0.0.1", 0, web, wheel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def get(port: int, path: str, method: str = "GET") -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/", "text/html; charset=utf-8"),
        ("/app.js", "text/javascript"),
        ("/pyodide/pyodide.mjs", "text/javascript"),
        ("/pyodide/pyodide.asm.wasm", "application/wasm"),
        ("/wheels/wgtune-0.1.0-py3-none-any.whl", "application/zip"),
        ("/wgtune-config.json", "application/json"),
    ],
)
def test_serves_its_files_with_their_types_and_cross_origin_isolation(site, path, content_type):
    status, headers, _ = get(site, path)
    assert status == 200
    assert headers["content-type"] == content_type
    assert headers["cross-origin-opener-policy"] == "same-origin"
    assert headers["cross-origin-embedder-policy"] == "require-corp"


def test_the_config_names_the_wheel_the_page_installs(site):
    _, _, body = get(site, "/wgtune-config.json")
    config = json.loads(body)
    assert config["wheel"] == "/wheels/wgtune-0.1.0-py3-none-any.whl"
    assert get(site, config["wheel"])[2] == b"PK"


@pytest.mark.parametrize(
    "path",
    [
        "/node_modules/left-pad.js",  # only Pyodide, under /pyodide/, comes from node_modules
        "/.secret",
        "/../outside.txt",
        "/%2e%2e/outside.txt",
        "/pyodide/../../outside.txt",
        "/pyodide/%2e%2e/%2e%2e/%2e%2e/outside.txt",
        "/wheels/other.whl",
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
