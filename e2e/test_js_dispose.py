"""``wgtune.dispose()`` while tunes run: nothing may reach the console afterwards.

A dispose cancels the running tunes. A tune is most of its time waiting on WebGPU, often on the
error scopes it has closed (``BrowserShim.reported_error``), whose future is the one Pyodide's
``PyodideFuture.then`` answered: cancelling the tune cancelled that future, and when WebGPU's
answer came Pyodide set its result anyway, printing ``InvalidStateError: invalid state`` as an
"Unhandled exception in event loop" (about 1 dispose mid-tune in 6 on SwiftShader). Here the app's
device answers every ``popErrorScope`` late, so that the tunes are waiting on one when the dispose
comes, and the test waits for those answers before it reads the console.
"""

from __future__ import annotations

# An app's own device whose error scopes answer `lateMs` late; `sets` sets tuned at once; the
# dispose on the first trial (every tune running, each waiting on WebGPU), then `lateMs` and more
# for the late answers to land. Unhandled rejections are collected as well.
DISPOSE_MID_TUNE = r"""
async ({ sets, lateMs, database }) => {
  const rejections = [];
  window.addEventListener("unhandledrejection",
                          (event) => rejections.push(String(event.reason?.stack ?? event.reason)));
  const { loadWgtune } = await import("/wgtune.js");
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({
    requiredFeatures: adapter.features.has("timestamp-query") ? ["timestamp-query"] : [] });
  const popErrorScope = device.popErrorScope.bind(device);
  device.popErrorScope = () => popErrorScope().then(
    (error) => new Promise((resolve) => setTimeout(() => resolve(error), lateMs)));
  let api = null;
  let disposing = null;
  const events = [];
  const onEvent = (event) => {
    events.push(event.type);
    if (event.type === "trial" && api && !disposing) disposing = api.dispose();
  };
  api = await loadWgtune({ device, database, onEvent });
  const n = 4096;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  for (let s = 0; s < sets; s++) {
    const source = `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < ${n}u) { y[g.x] = ${s + 2}.0 * x[g.x]; } }`;
    const set = await api.defineSet({
      name: `disposed${s}`,
      candidates: [32, 64, 128, 256].map((wg) => ({ name: `wg${wg}`, wgsl: source, constants: { WG: wg },
                                                   grid: () => [Math.ceil(n / wg)] })),
      key: () => ({ n }),
    });
    const [x, y] = [0, 1].map(() => device.createBuffer({ size: 4 * n, usage }));
    set.check({ buffers: { x, y } });
  }
  const deadline = performance.now() + 300_000;
  while (!disposing && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  const disposed = disposing ? await disposing.then(() => "disposed", (error) => `rejected: ${error}`) : "no trial";
  await new Promise((resolve) => setTimeout(resolve, 4 * lateMs + 1000));  // the late scopes answer
  const lost = await Promise.race([device.lost.then(() => true),
                                   new Promise((resolve) => setTimeout(() => resolve(false), 50))]);
  return { disposed, rejections, lost, trials: events.filter((type) => type === "trial").length };
}
"""


def test_dispose_mid_tune_leaves_nothing_on_the_console_once_webgpu_answers(browser):
    for round_ in range(2):  # each round a load of its own, on a database of its own: its keys are tuned
        page, log = browser.open("?defer", wait=False)
        page.wait_for_function("typeof window.wgtune?.start === 'function'")
        answer = page.evaluate(DISPOSE_MID_TUNE, {"sets": 3, "lateMs": 300, "database": f"wgtune-dispose-{round_}"})
        assert answer["disposed"] == "disposed", answer
        assert answer["rejections"] == [], answer["rejections"]
        assert answer["lost"] is False  # the app's device stays the app's
        # Pyodide prints what goes wrong on its event loop to stderr, which is console.warn: none of it.
        # (A device without timestamp-query has its warning said: that one is expected.)
        said = [f"{kind}: {text}" for kind, text in log.messages
                if kind in ("warning", "error", "pageerror", "crash") and "timestamp-query" not in text]
        assert said == [], "\n".join(said)
        page.close()
