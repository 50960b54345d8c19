"""The JavaScript API for a web app's own kernels (issue 13): a set defined from JavaScript, tuned
and run on the app's own GPUBuffers, with no Python written by the page."""

from __future__ import annotations

import numpy as np

# Everything below runs in the page as an app would write it: its own buffers, its own WGSL.
DEFINE_AND_TUNE = r"""
async ({ n, uniform }) => {
  const wgtune = window.wgtune;
  const device = wgtune.device;
  const params = uniform === "struct"
    ? "struct Params { n: u32, scale: f32 }\n@group(0) @binding(2) var<uniform> p: Params;"
    : "@group(0) @binding(2) var<uniform> p: vec4<f32>;";
  const size = uniform === "struct" ? "p.n" : "u32(p.y)";
  const scale = uniform === "struct" ? "p.scale" : "p.x";
  const source = `
${params}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < ${size}) { y[g.x] = ${scale} * x[g.x]; }
}`;
  const x = new Float32Array(n).map((_, i) => i);
  const xBuffer = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(xBuffer, 0, x);
  const yBuffer = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });

  const set = await wgtune.defineSet({
    name: `js_scale_${uniform}`,
    candidates: [64, 128, 256].map((wg) => ({
      name: `wg${wg}`, wgsl: source, constants: { WG: wg },
      grid: (call) => [Math.ceil(n / wg)],
    })),
    key: (call) => ({ n, bytes: call.buffers.x }),
  });
  // 2.0 reaches Python as the int 2: the WGSL's f32 must still get 2.0.
  const call = { buffers: { x: xBuffer, y: yBuffer }, params: uniform === "struct" ? { n, scale: 2.0 } : [2.0, n] };
  // The struct's key is checked first (its tune starts), the vector's only settled: settle tunes a miss too.
  const first = uniform === "struct" ? set.check(call) : null;
  const settled = await set.settle(call);
  const ran = await set.execute(call);

  const readback = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(yBuffer, 0, readback, 0, 4 * n);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const y = Array.from(new Float32Array(readback.getMappedRange().slice(0)));
  readback.unmap();
  return { first, settled, ran, y, candidates: set.candidates, results: set.results(call) };
}
"""


def test_a_set_defined_from_javascript_tunes_on_the_apps_buffers_with_an_f32_param_of_2(browser):
    page, log = browser.open()
    for uniform in ("struct", "vector"):
        answer = page.evaluate(DEFINE_AND_TUNE, {"n": 1000, "uniform": uniform})
        assert answer["candidates"] == ["wg64", "wg128", "wg256"]
        if uniform == "struct":
            assert answer["first"]["state"] in ("Pending", "Hit"), answer["first"]  # Hit: stored by an earlier run
        assert answer["settled"]["state"] == "Hit" and answer["settled"]["key"] == {"n": 1000, "bytes": 4000}
        assert answer["ran"]["ran"] == answer["settled"]["winner"]
        np.testing.assert_array_equal(np.array(answer["y"], dtype=np.float32),
                                      2.0 * np.arange(1000, dtype=np.float32))
        assert len(answer["results"]) == 3 and any("median" in result for result in answer["results"])
    assert log.errors == []
    page.close()


def test_a_set_or_call_described_wrong_is_an_error_that_says_what(browser):
    page, log = browser.open()
    problems = page.evaluate("""async () => {
      const attempt = async (action) => {
        try { await action(); return null; } catch (error) { return error.message; }
      };
      const good = { name: "js_errors", candidates: [{ name: "a", wgsl: "@compute @workgroup_size(1) fn main() {}",
                                                      grid: [1] }] };
      const set = await window.wgtune.defineSet(good);
      return {
        notObject: await attempt(() => window.wgtune.defineSet(42)),
        unknownField: await attempt(() => window.wgtune.defineSet({ ...good, colour: "red" })),
        badCandidate: await attempt(() => window.wgtune.defineSet({ name: "x", candidates: [{ name: "a" }] })),
        badCall: await attempt(() => set.check({ params: [1] })),
        badCallClass: await (async () => {
          const { ConfigError } = await import("/wgtune.js");
          try { set.check({ params: [1] }); return null; } catch (error) {
            return [error.name, error instanceof ConfigError, error.set, error.field];
          }
        })(),
        badBuffers: await attempt(() => set.check({ buffers: 3 })),
        nullLabels: await attempt(() => window.wgtune.check(null, null)),
        handleAsLabel: await attempt(() => window.wgtune.settle(set, "1000")),
        badTimeout: await attempt(() => window.wgtune.settle("fma", "100003", { timeout: "soon" })),
        nullTimeout: await attempt(() => set.settle({ buffers: {}, params: {} }, { timeout: null })),
      };
    }""")
    assert "takes an object" in problems["notObject"] and "number" in problems["notObject"]
    assert "unknown field(s) colour" in problems["unknownField"]
    assert "candidate 'a'" in problems["badCandidate"] and "grid" in problems["badCandidate"]
    assert problems["badCall"] == "set 'js_errors': a call is {buffers, params}, got an object with params"
    assert problems["badCallClass"] == ["ConfigError", True, "js_errors", "buffers"]  # not a TypeError: as documented
    assert "buffers must be an object by WGSL name or an array" in problems["badBuffers"]
    assert problems["nullLabels"] == "wgtune.check(set, key): the set must be a string label, got null"
    assert "for a set from defineSet, call its handle: set.check(call)" in problems["handleAsLabel"]
    assert problems["badTimeout"] == 'settle: timeout is seconds, a finite number >= 0; got "soon"'
    assert problems["nullTimeout"] == "settle: timeout is seconds, a finite number >= 0; got null"
    assert log.errors == []
    page.close()


# A two-pass sum an app wrote, its partials in scratch the device makes: the app gives only its input
# and its output, and names the scratch's size as a function of the call.
TWO_PASS_WITH_SCRATCH = r"""
async ({ n }) => {
  const wgtune = window.wgtune;
  const device = wgtune.device;
  const partialsOf = (wg) => Math.ceil(n / wg);
  const asked = [];
  const chunks = (wg) => `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partials: array<f32>;
@group(0) @binding(2) var<uniform> n: u32;
var<workgroup> sums: array<f32, ${wg}>;
@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
  let i = w.x * ${wg}u + l.x;
  var value = 0.0;
  if (i < n) { value = x[i]; }  // no read past x (select would read it either way)
  sums[l.x] = value;
  workgroupBarrier();
  if (l.x == 0u) { var t = 0.0; for (var j = 0u; j < ${wg}u; j++) { t += sums[j]; } partials[w.x] = t; }
}`;
  const total = `
@group(0) @binding(0) var<storage, read_write> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> count: u32;
@compute @workgroup_size(1)
fn main() { var t = 0.0; for (var j = 0u; j < count; j++) { t += partials[j]; } out[0] = t; }`;
  const set = await wgtune.defineSet({
    name: "js_two_pass_scratch",
    candidates: [64, 128].map((wg) => ({
      name: `sum_wg${wg}`, wgsl: chunks(wg), grid: [partialsOf(wg)],
      scratch: { partials: (call) => 4 * Math.ceil(call.params[0] / wg) },
      then: [{ name: `total_wg${wg}`, wgsl: total, grid: [1], params: () => [partialsOf(wg)] }],
    })),
    key: () => ({ n }),
    outputs: ["out"],
    // A tolerance of the call, as rounding grows with a sum's length: asked with the call's view.
    atol: (call) => { asked.push(call.params[0]); return 1e-6 * call.params[0]; },
  });
  const xBuffer = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(xBuffer, 0, new Float32Array(n).fill(0.5));
  const out = device.createBuffer({ size: 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const call = { buffers: { x: xBuffer, out }, params: [n] };
  set.check(call);
  const settled = await set.settle(call);
  const ran = await set.execute(call);
  const readback = device.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(out, 0, readback, 0, 4);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const sum = new Float32Array(readback.getMappedRange().slice(0))[0];
  readback.unmap();
  return { settled, ran, sum, results: set.results(call), asked };
}
"""


def test_an_apps_two_pass_kernel_keeps_its_partials_in_scratch_and_gives_only_its_own_buffers(browser):
    page, log = browser.open()
    answer = page.evaluate(TWO_PASS_WITH_SCRATCH, {"n": 10000})
    assert answer["settled"]["state"] == "Hit", answer["settled"]
    results = answer["results"]
    assert len(results) == 2 and all("median" in result for result in results), results  # both ran
    assert answer["ran"]["ran"] == answer["settled"]["winner"]
    assert answer["sum"] == 5000.0
    assert answer["asked"] and set(answer["asked"]) == {10000}, "the atol function, asked in the tune's checks"
    assert log.errors == []
    page.close()


# Launches of two sets that do not commute (x += 1, x *= 2), in place: only the right order gives
# the right values. The same launches go one by one on one buffer and in a batch on another.
BATCH = r"""
async ({ n, launches }) => {
  const wgtune = window.wgtune;
  const device = wgtune.device;
  const source = (body) => `
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: vec4<u32>;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.x) { x[g.x] = ${body}; } }`;
  const define = (name, body) => wgtune.defineSet({
    name, key: (call) => ({ n }),
    candidates: [64, 128].map((wg) => ({ name: `wg${wg}`, wgsl: source(body), constants: { WG: wg },
                                         grid: [Math.ceil(n / wg)] })),
  });
  const [inc, dbl] = [await define("js_batch_inc", "x[g.x] + 1.0"), await define("js_batch_dbl", "2.0 * x[g.x]")];
  const buffer = () => {
    const made = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC
                                                           | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(made, 0, new Float32Array(n).map((_, i) => i % 7));
    return made;
  };
  const read = async (source) => {
    const readback = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(source, 0, readback, 0, 4 * n);
    device.queue.submit([encoder.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const values = Array.from(new Float32Array(readback.getMappedRange().slice(0)));
    readback.unmap();
    return values;
  };
  const warm = { buffers: [buffer()], params: [n] };
  for (const set of [inc, dbl]) { set.check(warm); await set.settle(warm); }

  const [separate, batched] = [{ buffers: [buffer()], params: [n] }, { buffers: [buffer()], params: [n] }];
  for (let i = 0; i < launches; i++) await (i % 2 ? dbl : inc).execute(separate);
  let submissions = 0;
  const submit = device.queue.submit;
  device.queue.submit = (buffers) => { submissions++; return submit.call(device.queue, buffers); };
  const submitted = wgtune.batch(() => {  // its promise: what the function returned, once WebGPU took the batch
    const ran = [];
    for (let i = 0; i < launches; i++) ran.push((i % 2 ? dbl : inc).execute(batched));
    return ran;
  });
  const batchSubmissions = submissions;  // submitted by the time batch() returned
  let thrown = null;
  try {
    wgtune.batch(() => { inc.execute(batched); throw new Error("the app's own failure"); });
  } catch (error) {
    thrown = error.message;
  }
  const afterThrow = submissions - batchSubmissions;
  delete device.queue.submit;
  return { separate: await read(separate.buffers[0]), batched: await read(batched.buffers[0]),
           ran: (await Promise.all(await submitted)).map((answer) => answer.state), batchSubmissions, thrown,
           afterThrow };
}
"""


def test_a_batch_of_javascript_launches_is_one_submission_and_gives_what_they_give_one_by_one(browser):
    page, log = browser.open()
    answer = page.evaluate(BATCH, {"n": 1000, "launches": 20})
    expected = np.arange(1000, dtype=np.float32) % 7
    for i in range(20):
        expected = expected + 1 if i % 2 == 0 else expected * 2
    np.testing.assert_array_equal(np.array(answer["separate"], dtype=np.float32), expected)
    np.testing.assert_array_equal(np.array(answer["batched"], dtype=np.float32), expected + 1)  # +1: after the throw
    assert answer["ran"] == ["Hit"] * 20
    assert answer["batchSubmissions"] == 1, answer
    assert answer["thrown"] == "the app's own failure" and answer["afterThrow"] == 1, answer
    assert log.errors == []
    page.close()


# Launches WebGPU refuses (issue 25): each execute rejects with what was wrong, naming the binding
# or giving WebGPU's words, and nothing of it reaches another call or set.
REFUSED = r"""
async () => {
  const wgtune = window.wgtune;
  const device = wgtune.device;
  const source = `
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: vec4<u32>;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.x) { out[g.x] = 2.0 * x[g.x]; } }`;
  const define = (name, key = () => ({ shape: "any" })) => wgtune.defineSet({
    name, key,  // by default every call one key: after the first tune, each is a hit
    candidates: [64, 128].map((wg) => ({ name: `wg${wg}`, wgsl: source, constants: { WG: wg },
                                         grid: (call) => [Math.ceil(call.params[0] / wg)] })),
  });
  const n = 256;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const buffer = (size, on = device, bits = usage) => on.createBuffer({ size, usage: bits });
  const attempt = async (action) => {
    try {
      return { resolved: await action() };
    } catch (error) {
      return { message: error.message, type: error.name ?? null };
    }
  };
  const set = await define("js_refused");
  const good = { buffers: { x: buffer(16 * n), out: buffer(16 * n) }, params: [n] };
  set.check(good);
  const tuned = await set.settle(good);

  const other = await (await navigator.gpu.requestAdapter()).requestDevice();
  const destroyed = buffer(16 * n);
  destroyed.destroy();
  const tooMany = 128 * (device.limits.maxComputeWorkgroupsPerDimension + 1);
  const calls = {
    noStorage: { x: buffer(16 * n), out: buffer(16 * n, device, GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST) },
    sixBytes: { x: buffer(6), out: buffer(16 * n) },
    destroyed: { x: buffer(16 * n), out: destroyed },
    otherDevice: { x: buffer(16 * n), out: buffer(16 * n, other) },
  };
  const refused = {};
  for (const [name, buffers] of Object.entries(calls)) {
    const call = { buffers, params: [n] };
    refused[name] = [await attempt(() => set.execute(call)), await attempt(() => set.execute(call))];
  }
  refused.grid = [await attempt(() => set.execute({ buffers: good.buffers, params: [tooMany] }))];
  const goodAgain = await attempt(() => set.execute(good));

  // A destroyed buffer on a key never tuned (its set's fallback compiled by a first tune): the
  // call is refused; the key's tune, started meanwhile on wgtune's own copies, ends either way.
  const fresh = await define("js_refused_miss", (call) => ({ n: call.params[0] }));
  const first = { buffers: { x: buffer(16 * n), out: buffer(16 * n) }, params: [n] };
  fresh.check(first);
  await fresh.settle(first);
  const missCall = { buffers: { x: buffer(16 * n), out: destroyed }, params: [n / 2] };
  const miss = await attempt(() => fresh.execute(missCall));
  const missSettled = await fresh.settle(missCall);
  const missAgain = await attempt(() => fresh.execute(missCall));
  const checkRefused = await attempt(() => fresh.check({ buffers: calls.noStorage, params: [n / 4] }));

  // A buffer destroyed after its call's first launch: WebGPU says so once that execute resolved, so
  // the call's next execute is refused for it (and no tune hears of it).
  const later = { buffers: { x: buffer(16 * n), out: buffer(16 * n) }, params: [n] };
  const beforeDestroy = await attempt(() => set.execute(later));
  later.buffers.out.destroy();
  const afterDestroy = await attempt(() => set.execute(later));
  await device.queue.onSubmittedWorkDone();
  await new Promise((resolve) => setTimeout(resolve, 50));  // the submission's error scope has closed
  const nextAfterDestroy = await attempt(() => set.execute(later));

  // Another set, tuned after all that: untouched by any of it.
  const unrelated = await define("js_refused_unrelated");
  const call = { buffers: { x: buffer(16 * n), out: buffer(16 * n) }, params: [n] };
  unrelated.check(call);
  const unrelatedSettled = await unrelated.settle(call);
  const unrelatedRan = await attempt(() => unrelated.execute(call));
  other.destroy();
  return { tuned, refused, goodAgain, beforeDestroy, afterDestroy, nextAfterDestroy, miss, missSettled, missAgain,
           checkRefused, unrelatedSettled, unrelatedRan };
}
"""


def test_a_launch_webgpu_refuses_rejects_that_execute_and_no_later_tune(browser):
    page, log = browser.open()
    answer = page.evaluate(REFUSED)
    assert answer["tuned"]["state"] == "Hit", answer["tuned"]
    refused = answer["refused"]
    for name, attempts in refused.items():
        for attempt in attempts:
            assert attempt.get("type") == "LaunchRefused", (name, attempt)
            assert attempt["message"].startswith("set 'js_refused' [shape=any]: "), (name, attempt)
    no_storage, six_bytes, destroyed, other_device = (refused[name][0]["message"] for name in
                                                      ("noStorage", "sixBytes", "destroyed", "otherDevice"))
    assert "binding 1 'out' (@group(0) @binding(1))" in no_storage and "lacks STORAGE usage" in no_storage
    assert "binding 0 'x' (@group(0) @binding(0))" in six_bytes and "has 6 bytes, the binding needs at least 16" \
        in six_bytes
    for message in (destroyed, other_device):  # WebGPU's own words, with the launch's bindings
        assert "WebGPU refused candidate 'wg" in message and "'out' at @group(0) @binding(1)" in message, message
    assert "destroyed" in destroyed.lower(), destroyed
    assert "exceeds a device limit: dispatch of" in refused["grid"][0]["message"]
    assert answer["goodAgain"]["resolved"]["ran"] == answer["tuned"]["winner"]
    assert answer["beforeDestroy"]["resolved"]["ran"] == answer["tuned"]["winner"]
    assert "resolved" in answer["afterDestroy"]  # WebGPU tells only later, and then for the call's next launch
    assert answer["nextAfterDestroy"].get("type") == "LaunchRefused", answer["nextAfterDestroy"]
    assert "destroyed" in answer["nextAfterDestroy"]["message"]
    assert answer["miss"].get("type") == "LaunchRefused" and "destroyed" in answer["miss"]["message"].lower()
    assert answer["missSettled"]["state"] in ("Hit", "Miss"), answer["missSettled"]  # settled, however
    assert answer["missAgain"].get("type") == "LaunchRefused" and "destroyed" in answer["missAgain"]["message"]
    assert answer["checkRefused"].get("type") == "LaunchRefused", answer["checkRefused"]  # refused, not tuned
    assert "lacks STORAGE usage" in answer["checkRefused"]["message"]
    assert answer["unrelatedSettled"]["state"] == "Hit", answer["unrelatedSettled"]
    assert "failure" not in answer["unrelatedSettled"]
    assert answer["unrelatedRan"]["resolved"]["ran"] == answer["unrelatedSettled"]["winner"]
    assert log.errors == []
    page.close()


# An app's own wgtune, loaded on the page's side (the demo page waits, ?defer): a set tuned, winners
# cleared per device, a dispose while a tune runs, then a second load on the same database.
LIFECYCLE = r"""
async () => {
  const { loadWgtune } = await import("/wgtune.js");
  const adapter = await navigator.gpu.requestAdapter();
  const timed = await adapter.requestDevice({ requiredFeatures: ["timestamp-query"] });
  const database = "wgtune-lifecycle";
  const source = `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: vec4<u32>;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.x) { y[g.x] = 2.0 * x[g.x]; } }`;
  const spec = {
    name: "lifecycle",
    candidates: [64, 128].map((wg) => ({ name: `wg${wg}`, wgsl: source, constants: { WG: wg },
                                         grid: (call) => [Math.ceil(call.params[0] / wg)] })),
    key: (call) => ({ n: call.params[0] }),
  };
  const callOn = (device, n) => ({ params: [n], buffers: [4 * n, 4 * n].map((size) => device.createBuffer({
    size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST })) });
  const attempt = async (action) => {
    try { await action(); return null; } catch (error) { return { name: error.name, message: error.message }; }
  };
  const namespaces = async (api) => (await api.storedPage()).namespaces.map((n) => [n.current, n.entries]);

  const firstEvents = [];
  const first = await loadWgtune({ device: timed, database, onEvent: (event) => firstEvents.push(event) });
  const set = await first.defineSet(spec);
  const [a, b] = [callOn(timed, 1000), callOn(timed, 3000)];
  set.check(a);
  const tunedA = await set.settle(a);
  await first.flush();
  // The same winner under another device's namespace: two devices in IndexedDB.
  const exported = JSON.parse(await first.exportCache());
  const elsewhere = exported.namespaces.map((doc) => ({ ...doc, device: { ...doc.device, device: "elsewhere" } }));
  await first.importCache({ ...exported, namespaces: elsewhere });  // a document as cache() gives it, not its text
  const both = await namespaces(first);
  const clearedMine = await first.clearCache();
  const afterMine = await namespaces(first);
  const other = (await first.storedPage()).namespaces[0].namespace;
  const badDevice = await attempt(() => first.clearCache({ device: "not a namespace" }));
  const clearedOther = await first.clearCache({ device: other });
  const afterOther = await namespaces(first);

  set.check(b);
  const tunedB = await set.settle(b);
  const againA = set.check(a).state;  // its winner was cleared: tuned again, and disposed mid-tune
  const disposing = first.dispose();
  const sameDispose = first.dispose() === disposing;
  await disposing;
  const refused = {
    check: await attempt(() => first.check("lifecycle", "1000")),
    settle: await attempt(() => first.settle("lifecycle", "1000")),
    clearCache: await attempt(() => first.clearCache()),
    handle: await attempt(() => set.check(b)),
  };
  const timedLost = await Promise.race([timed.lost.then(() => true),
                                        new Promise((resolve) => setTimeout(() => resolve(false), 200))]);

  const plain = await (await navigator.gpu.requestAdapter()).requestDevice();  // no timestamp-query: a warning
  const secondEvents = [];
  const second = await loadWgtune({ device: plain, database, onEvent: (event) => secondEvents.push(event) });
  const again = await second.defineSet(spec);
  const [bOnPlain, aOnPlain] = [again.check(callOn(plain, 3000)), again.check(callOn(plain, 1000))];
  await second.dispose();
  const deleted = await new Promise((resolve) => {
    const request = indexedDB.deleteDatabase(database);
    request.onblocked = () => resolve("blocked");  // a connection left open
    request.onsuccess = () => resolve("deleted");
    request.onerror = () => resolve(String(request.error));
  });
  const warnings = (events) => events.filter((event) => event.type === "warning").map((event) => event.message);
  return { tunedA, tunedB, both, clearedMine, afterMine, badDevice, clearedOther, afterOther, againA, sameDispose,
           refused, timedLost, bOnPlain, aOnPlain, deleted, firstWarnings: warnings(firstEvents),
           secondWarnings: warnings(secondEvents), secondTiming: second.adapterInfo.timestampQuery };
}
"""


def test_clear_per_device_dispose_mid_tune_and_a_second_load_on_a_device_without_timestamps(browser):
    page, log = browser.open("?defer", wait=False)
    page.wait_for_function("typeof window.wgtune?.start === 'function'")
    answer = page.evaluate(LIFECYCLE)
    assert answer["tunedA"]["state"] == "Hit" and answer["tunedB"]["state"] == "Hit", answer
    # Two devices' winners; the default clears this device's only, `device` names the other.
    assert sorted(answer["both"]) == [[False, 1], [True, 1]], answer["both"]
    assert answer["clearedMine"] == 1 and answer["afterMine"] == [[False, 1]], answer
    assert answer["badDevice"]["name"] == "ConfigError" and "storedPage" in answer["badDevice"]["message"]
    assert answer["clearedOther"] == 1 and answer["afterOther"] == [], answer
    # Disposed mid-tune: every call refuses, saying why; the app's device is left alone.
    assert answer["againA"] == "Pending" and answer["sameDispose"] is True
    for name, refused in answer["refused"].items():
        assert refused is not None and "wgtune was disposed" in refused["message"], (name, refused)
        assert refused["name"] == "WgtuneError", (name, refused)
    assert answer["timedLost"] is False
    # A second load on the same database: the winner stored before the dispose is a Hit, the key
    # whose tune the dispose cancelled stored nothing; IndexedDB closed behind both.
    assert answer["bOnPlain"]["state"] == "Hit" and answer["bOnPlain"]["winner"] == answer["tunedB"]["winner"]
    assert answer["aOnPlain"]["state"] == "Pending", answer["aOnPlain"]
    assert answer["deleted"] == "deleted"
    # timestamp-query: none said of the device that has it, one warning for the one without.
    assert answer["firstWarnings"] == [] and answer["secondTiming"] is False
    [warning] = answer["secondWarnings"]
    assert "without the \"timestamp-query\" feature" in warning and "wall clock" in warning
    assert 'requiredFeatures: adapter.features.has("timestamp-query")' in warning
    assert log.errors == []
    page.close()


EXECUTE_FIRST = r"""
async () => {
  const wgtune = window.wgtune, device = wgtune.device, n = 256;
  const wgsl = `@group(0) @binding(0) var<storage, read_write> y: array<f32>;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < 256u) { y[g.x] = 3.0; } }`;
  const y = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const set = await wgtune.defineSet({ name: "js_execute_first", candidates: [64, 128].map((wg) => ({
    name: `wg${wg}`, wgsl, constants: { WG: wg }, grid: [Math.ceil(n / wg)] })) });
  const events = [];
  const off = wgtune.on((event) => { if (event.set === "js_execute_first") events.push(event.type); });
  const call = { buffers: { y }, params: {} };
  const first = await set.execute(call);
  const second = await set.execute(call);
  const settled = await set.settle(call);
  off();
  return { first: first.state, second: second.state, settled: settled.state, events };
}
"""


def test_an_execute_that_starts_a_tune_says_pending_once_as_a_check_would(browser):
    # A progress UI built on `on()` learns of the tune whichever call started it (an execute sent no
    # `pending` before 2026-12-06, found from outside).
    page, log = browser.open()
    answer = page.evaluate(EXECUTE_FIRST)
    assert answer["first"] == "Pending" and answer["settled"] == "Hit", answer
    events = answer["events"]
    assert events.count("pending") == 1 and events.index("pending") < events.index("finished"), events
    assert log.errors == []
    page.close()
