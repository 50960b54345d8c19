"""wgtune from npm (issue 28): the packed tarball installed offline into an app of its own, which
imports it by name, is bundled by esbuild, copies the assets with ``wgtune-assets``, and tunes a
set it defines in JavaScript in headless Chromium.

What a web developer does, step by step: ``npm install wgtune`` (here the tarball of
``wgtune.cli.npm_package``, from npm's cache alone: Pyodide comes as its dependency, put in the
cache by ``scripts/setup.sh --browser``), a build that runs ``wgtune-assets dist/wgtune`` and
esbuild, and a plain static server for ``dist/``.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import threading
from pathlib import Path

import numpy as np
from harness import READY_TIMEOUT_MS, ROOT, ConsoleLog, launch
from hosting_site import StaticHandler

import wgtune
from wgtune.cli.npm_package import build_package, pack
from wgtune.cli.serve import build_wheel

APP_PACKAGE = {
    "name": "an-app-that-tunes", "private": True, "type": "module",
    "scripts": {
        "build": "wgtune-assets dist/wgtune && esbuild src/main.js --bundle --format=esm --outfile=dist/app.js",
    },
}
APP_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>An app that tunes with wgtune from npm</title><link rel="icon" href="data:,"></head>
<body><h1>An app of its own</h1><p id="status">Loading…</p><script type="module" src="./app.js"></script></body>
</html>
"""
# The app's own code: wgtune by its package name, the assets where its build put them.
APP_MAIN = r"""
import { loadWgtune } from "wgtune";

const SOURCE = `
struct Params { n: u32, scale: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < p.n) { y[g.x] = p.scale * x[g.x]; }
}`;

async function run(status) {
  const wgtune = await loadWgtune({ baseUrl: "wgtune/", onStatus: (text) => { status.textContent = text; } });
  const { device } = wgtune;
  const n = 1000;
  const x = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(x, 0, new Float32Array(n).map((_, i) => i));
  const y = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const scale = await wgtune.defineSet({
    name: "app_scale",
    candidates: [64, 128, 256].map((wg) => ({
      name: `wg${wg}`, wgsl: SOURCE, constants: { WG: wg }, grid: (call) => [Math.ceil(call.params.n / wg)],
    })),
    key: (call) => ({ n: call.params.n }),
  });
  const call = { buffers: { x, y }, params: { n, scale: 3.0 } };
  status.textContent = "Tuning…";
  const first = scale.check(call);
  const settled = await scale.settle(call);
  const ran = await scale.execute(call);
  const readback = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(y, 0, readback, 0, 4 * n);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const out = Array.from(new Float32Array(readback.getMappedRange().slice(0)));
  readback.unmap();
  status.textContent = `wgtune ${wgtune.version}: ${settled.state}, winner ${settled.winner}; ` +
    `y[${n - 1}] = ${out[n - 1]}`;
  return { version: wgtune.version, python: wgtune.loadPhases.python, candidates: scale.candidates,
           first, settled, ran, y: out };
}

const status = document.getElementById("status");
window.appResult = run(status).catch((error) => {
  status.textContent = `failed: ${error.message}`;
  return { error: `${error.name}: ${error.message}` };
});
"""


def _run(command: list[str], cwd: Path, what: str, env: dict | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"{what} failed ({' '.join(command)}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _make_app(tmp_path: Path) -> tuple[Path, dict]:
    """The tarball packed, an app made that installs it offline and builds; ``(app, pack report)``."""
    package = tmp_path / "package"
    build_package(package, ROOT, build_wheel(ROOT, ROOT / "build" / "web"))
    tarball, report = pack(package, tmp_path / "packed")
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "package.json").write_text(json.dumps({**APP_PACKAGE, "dependencies": {"wgtune": f"file:{tarball}"}}))
    (app / "src" / "main.js").write_text(APP_MAIN)
    # No network: wgtune from its tarball, Pyodide from npm's cache (setup.sh --browser filled it).
    _run(["npm", "install", "--offline", "--no-audit", "--no-fund"], app,
         "npm install --offline (does npm's cache hold the page's Pyodide? scripts/setup.sh --browser puts it there)")
    env = {**os.environ, "PATH": f"{ROOT / 'web' / 'node_modules' / '.bin'}{os.pathsep}{os.environ['PATH']}"}
    _run(["npm", "run", "build"], app, "the app's build (wgtune-assets, then esbuild)", env)
    (app / "dist" / "index.html").write_text(APP_PAGE)
    return app, report


def test_an_app_installs_the_packed_tarball_offline_bundles_it_and_tunes_a_javascript_set(
        playwright, tmp_path, artifacts):
    app, report = _make_app(tmp_path)
    packed = {entry["path"] for entry in report["files"]}
    assert {"wgtune.js", "wgtune.d.ts", "wgtune-assets.js", "assets/wgtune-config.json",
            "assets/python-worker.js"} <= packed
    assert any(re.fullmatch(r"assets/wheels/[0-9a-f]{16}/wgtune-.+\.whl", path) for path in packed)
    assert not [path for path in packed if "pyodide" in path]  # a dependency, not a copy
    print(f"\nnpm tarball: {report['size'] / 1e6:.2f} MB, {len(packed)} files")

    installed = app / "node_modules"
    assert json.loads((installed / "wgtune" / "package.json").read_text())["version"] == wgtune.__version__
    pinned = json.loads((ROOT / "web" / "package.json").read_text())["dependencies"]["pyodide"]
    assert json.loads((installed / "pyodide" / "package.json").read_text())["version"] == pinned
    assert (installed / "wgtune" / "wgtune.d.ts").read_bytes() == (ROOT / "web" / "wgtune.d.ts").read_bytes()
    bundle = (app / "dist" / "app.js").read_text()
    # wgtune is inside the bundle, not an import left for the browser to resolve.
    assert "loadWgtune" in bundle and not re.search(r"""from\s*["']wgtune["']""", bundle)
    dist = app / "dist" / "wgtune"
    wasm = "pyodide/pyodide.asm.wasm"
    assert (dist / wasm).read_bytes() == (installed / wasm).read_bytes()
    assert (dist / json.loads((dist / "wgtune-config.json").read_text())["wheel"]).is_file()

    handler = functools.partial(StaticHandler, directory=str(app / "dist"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    context = launch(playwright, tmp_path / "chromium-profile")
    try:
        page = context.new_page()
        log = ConsoleLog(page)
        page.goto(f"{origin}/")
        page.wait_for_function("!!window.appResult", timeout=READY_TIMEOUT_MS)
        result = page.evaluate("window.appResult")
        page.screenshot(path=str(artifacts / "npm-app.png"))
    finally:
        context.close()
        server.shutdown()
        server.server_close()

    assert "error" not in result, result
    assert result["version"] == wgtune.__version__ and result["candidates"] == ["wg64", "wg128", "wg256"]
    assert result["first"]["state"] == "Pending"  # a fresh profile: nothing stored, the tune starts
    assert result["settled"]["state"] == "Hit" and result["settled"]["winner"] in result["candidates"]
    assert result["ran"]["ran"] == result["settled"]["winner"]
    np.testing.assert_array_equal(np.array(result["y"], dtype=np.float32), 3.0 * np.arange(1000, dtype=np.float32))
    # Python started in the worker: its script was found under baseUrl, not beside the bundle.
    assert result["python"] == "worker"
    assert f"{origin}/wgtune/python-worker.js" in log.requests
    assert f"{origin}/wgtune/pyodide/pyodide.asm.wasm" in log.requests
    assert [url for url in log.requests if not url.startswith((origin, "data:", "blob:"))] == []
    assert log.errors == []
