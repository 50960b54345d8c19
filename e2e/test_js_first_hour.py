"""A web developer's first hour (issue 28): the library hosted under a sub-path of a plain static site,
a set defined in JavaScript only, the app's own device and buffers, and the README's order of calls
(`check`, then `execute`) made in the same task as `loadWgtune` resolves, cold and after a reload.
Errors arrive as typed Errors with their fields; a key whose candidates all fail is tuned once."""

from __future__ import annotations

import pytest
from harness import READY_TIMEOUT_MS, ConsoleLog, launch
from hosting_site import HostingSite

# The app's own page: loads wgtune from the site's copy and at once, in the task that sees it
# resolve, defines its set, checks a call and executes it, as the README writes it. Its output
# buffer starts as NaN, so an element the kernel did not write fails the comparison.
APP_PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>An app</title><link rel="icon" href="data:,"></head>
<body><p id="status">Loading…</p>
<script type="module">
import { loadWgtune } from "./vendor/wgtune/wgtune.js";

const SAXPY = `
struct Params { n: u32, alpha: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < p.n) { y[g.x] = p.alpha * x[g.x]; }
}`;

async function readBack(device, buffer, n) {
  const readback = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, readback, 0, 4 * n);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const values = Array.from(new Float32Array(readback.getMappedRange().slice(0)), (v) => (Number.isNaN(v) ? null : v));
  readback.unmap();
  return values;
}

window.outcome = (async () => {
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({
    requiredFeatures: adapter.features.has("timestamp-query") ? ["timestamp-query"] : [],
  });
  const n = 3001;
  const x = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(x, 0, new Float32Array(n).map((_, i) => i % 97));
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const y = device.createBuffer({ size: 4 * n, usage });
  device.queue.writeBuffer(y, 0, new Float32Array(n).fill(NaN));
  const wgtune = await loadWgtune({ device, database: "first-hour", settings: { checks: 1 } });
  window.appWgtune = wgtune;
  const started = [];
  wgtune.on((event) => { if (event.type === "started") started.push(event.set); });
  const saxpy = await wgtune.defineSet({
    name: "saxpy",
    candidates: [64, 128, 256].map((wg) => ({
      name: `wg${wg}`, wgsl: SAXPY, constants: { WG: wg }, grid: (call) => [Math.ceil(call.params.n / wg)],
    })),
  });
  const call = { buffers: { x, y }, params: { n, alpha: 2.0 } };
  const first = saxpy.check(call);     // the README's order: check, then execute, no settle between
  const ran = await saxpy.execute(call);
  const values = await readBack(device, y, n);
  const settled = await saxpy.settle(call);
  return { first, ran, settled, values, started };
})().catch((error) => ({ thrown: `${error.name}: ${error.message}` }));
window.outcome.then((outcome) => {
  document.getElementById("status").textContent = JSON.stringify(outcome).slice(0, 200);
});
</script></body></html>
"""


@pytest.fixture(scope="module")
def site():
    with HostingSite() as running:
        (running.root / "site" / "app.html").write_text(APP_PAGE)
        yield running


@pytest.fixture(scope="module")
def context(playwright, tmp_path_factory):
    browser = launch(playwright, tmp_path_factory.mktemp("chromium-first-hour"))
    yield browser
    browser.close()


def open_app(context, url: str):
    page = context.new_page()
    log = ConsoleLog(page)
    page.goto(url)
    page.wait_for_function("!!window.outcome", timeout=READY_TIMEOUT_MS)
    return page, log, page.evaluate("() => window.outcome", None)


def expected_saxpy(n: int) -> list[float]:
    return [2.0 * (i % 97) for i in range(n)]


def test_the_readme_order_in_the_task_load_resolves_never_throws_cold_or_after_a_reload(site, context):
    page, log, cold = open_app(context, f"{site.origin}/site/app.html")
    assert "thrown" not in cold, cold
    assert cold["first"]["state"] == "Pending" and cold["first"]["key"] == {"n": 4096}  # 3001 anchored
    assert cold["ran"]["ran"] in ("wg64", "wg128", "wg256")
    assert cold["values"] == expected_saxpy(3001)  # every element written: none left NaN
    assert cold["settled"]["state"] == "Hit" and cold["started"] == ["saxpy"]
    page.reload()
    page.wait_for_function("!!window.outcome", timeout=READY_TIMEOUT_MS)
    warm = page.evaluate("() => window.outcome")
    assert "thrown" not in warm, warm
    assert warm["first"]["state"] == "Hit" and warm["first"]["winner"] == cold["settled"]["winner"]
    assert warm["ran"]["ran"] in ("wg64", "wg128", "wg256")  # the winner, or the fallback while it compiles
    assert warm["values"] == expected_saxpy(3001) and warm["started"] == []  # no tune after a reload
    assert log.errors == []
    page.close()


# Run in the app's page once it settled, on the app's wgtune: the errors a developer meets, as they meet them.
APP_ERRORS = r"""
async () => {
  const { ConfigError, NoValidKernelFound, WgtuneError } = await import("./vendor/wgtune/wgtune.js");
  const wgtune = window.appWgtune;
  const device = wgtune.device;
  const started = [];
  wgtune.on((event) => { if (event.type === "started") started.push(event.set); });
  const attempt = async (action) => {
    try { await action(); return null; } catch (error) {
      return { name: error.name, message: error.message, field: error.field ?? null, failures: error.failures ?? null,
               wgtune: error instanceof WgtuneError, config: error instanceof ConfigError,
               noValid: error instanceof NoValidKernelFound };
    }
  };
  const source = (body) => `
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < p.n) { ${body} }
}`;
  const n = 256;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const x = device.createBuffer({ size: 4 * n, usage });
  device.queue.writeBuffer(x, 0, new Float32Array(n).fill(1));
  const y = device.createBuffer({ size: 4 * n, usage });
  const grid = (call) => [Math.ceil(call.params.n / 64)];

  const unparsable = await attempt(() => wgtune.defineSet({
    name: "unparsable",
    candidates: ["a", "b"].map((name) => ({ name, wgsl: source("y[g.x] = x[g.x] +;"), grid })),
  }));
  // Both candidates write 3 x; the reference says 2 x: every candidate fails its output check.
  const wrong = await wgtune.defineSet({
    name: "always_wrong",
    candidates: ["3x", "3x_again"].map((name) => ({ name, wgsl: source("y[g.x] = 3.0 * x[g.x];"), grid })),
    outputs: ["y"],
    reference: (call, inputs) => [new Float32Array(inputs[0].slice().buffer).map((v) => 2 * v)],
  });
  const call = { buffers: { x, y }, params: { n } };
  const fraction = await attempt(() => wrong.check({ buffers: { x, y }, params: { n: 1.5 } }));
  const nullParam = await attempt(() => wrong.check({ buffers: { x, y }, params: { n: null } }));
  const missing = await attempt(() => wrong.check({ buffers: { x }, params: { n } }));
  const startedBeforeTune = started.length;
  const first = wrong.check(call);
  const settled = await wrong.settle(call);
  const again = wrong.check(call);
  const executes = [];
  for (let i = 0; i < 5; i++) executes.push(await attempt(() => wrong.execute(call)));
  const startedAfterCalls = started.length;
  const redefined = await attempt(() => wgtune.defineSet({
    name: "always_wrong", candidates: [{ name: "other", wgsl: source("y[g.x] = x[g.x];"), grid }],
  }));
  const retuned = await wrong.retune(call);
  await wrong.settle(call);
  return { unparsable, fraction, nullParam, missing, startedBeforeTune, first, settled, again, executes,
           startedAfterCalls, redefined, retuned, startedAfterRetune: started.length };
}
"""

PYTHON_WORDS = ("jsnull", "None", "Traceback", "JsException", "await tuner.prepare", "pythonType")


def test_errors_are_typed_with_fields_and_a_key_whose_candidates_all_fail_is_tuned_once(site, context):
    page, log, outcome = open_app(context, f"{site.origin}/site/app.html")
    assert "thrown" not in outcome, outcome
    assert log.errors == []
    got = page.evaluate(APP_ERRORS)
    unparsable = got["unparsable"]
    assert unparsable["name"] == "NoValidKernelFound" and unparsable["noValid"] and unparsable["wgtune"]
    assert [(f["candidate"], f["reason"]) for f in unparsable["failures"]] == [("a", "Compile"), ("b", "Compile")]
    assert all("unable to parse" in f["message"] for f in unparsable["failures"]), unparsable  # the compiler's words

    assert got["fraction"]["config"] and got["fraction"]["field"] == "n"
    assert "param n is a u32 in the WGSL: 1.5 is not a whole number" in got["fraction"]["message"]
    assert got["nullParam"]["field"] == "n" and "got null" in got["nullParam"]["message"]
    assert got["missing"]["config"] and "gives no buffer" in got["missing"]["message"]
    assert got["startedBeforeTune"] == 0  # none of those calls started a tune

    assert got["first"]["state"] == "Pending"
    assert got["settled"]["state"] == "Failed" and got["again"]["state"] == "Failed"
    failure = got["settled"]["failure"]
    assert failure["name"] == "NoValidKernelFound"
    assert [f["reason"] for f in failure["failures"]] == ["Mismatch", "Mismatch"]
    assert all(e is not None and e["noValid"] for e in got["executes"]), got["executes"]
    assert got["startedAfterCalls"] == 1  # one check, one settle, one check and five executes: one tune
    assert got["redefined"]["config"] and got["redefined"]["field"] == "name"
    assert got["retuned"]["state"] == "Pending" and got["startedAfterRetune"] == 2

    messages = [e["message"] for e in (unparsable, got["fraction"], got["nullParam"], got["missing"],
                                        got["redefined"], *got["executes"])]
    messages += [f["message"] for f in unparsable["failures"]]
    for message in messages:
        assert not any(word in message for word in PYTHON_WORDS), message
    page.close()
