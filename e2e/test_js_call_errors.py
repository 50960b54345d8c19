"""What the JavaScript API says of a set or call it cannot take, found from outside: a name defined
twice with other candidates (one after the other, or both in flight at once), a batch WebGPU
refuses whole (a buffer destroyed after its launch was recorded), a call without the params its
WGSL reads or with a buffer that is no GPUBuffer, and a grid or key function of the app's that
throws or answers no number. Each is an error that names what is wrong; none is an internal one."""

from __future__ import annotations

# Helpers every page script below starts with: a scale kernel, buffers, a readback, and an
# attempt that answers what a promise gave, or the error's name, fields and message.
HELPERS = r"""
  const wgtune = window.wgtune;
  const device = wgtune.device;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const source = (expr) => `
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.n) { y[g.x] = ${expr}; } }`;
  const candidates = (label, expr) => [64, 128].map((wg) => ({
    name: `${label}_wg${wg}`, wgsl: source(expr), constants: { WG: wg },
    grid: (call) => [Math.ceil(call.params.n / wg)] }));
  const buffer = (n, fill) => {
    const made = device.createBuffer({ size: 4 * n, usage });
    device.queue.writeBuffer(made, 0, new Float32Array(n).fill(fill));
    return made;
  };
  const read = async (source) => {
    const readback = device.createBuffer({ size: source.size,
                                           usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(source, 0, readback, 0, source.size);
    device.queue.submit([encoder.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const first = new Float32Array(readback.getMappedRange().slice(0))[0];
    readback.unmap();
    return first;
  };
  const attempt = async (action) => {
    try {
      const value = await action();
      return { resolved: value?.name ?? value?.ran ?? value ?? null };
    } catch (error) {
      return { name: error?.name, field: error?.field ?? null, message: String(error?.message) };
    }
  };
"""

DEFINED_TWICE = r"""
async () => {
""" + HELPERS + r"""
  const n = 100;
  // One after the other, the first never used: the second's other candidates are refused.
  const doubled = await wgtune.defineSet({ name: "js_twice", candidates: candidates("double", "2.0 * x[g.x]") });
  const define = (name, label, expr) => wgtune.defineSet({ name, candidates: candidates(label, expr) });
  const second = await attempt(() => define("js_twice", "negate", "-x[g.x]"));
  const same = await attempt(() => define("js_twice", "double", "2.0 * x[g.x]"));
  // Both in flight at once: the first takes the name, the second is refused.
  const [first, other] = await Promise.allSettled([
    define("js_race", "double", "2.0 * x[g.x]"), define("js_race", "negate", "-x[g.x]")]);
  // A definition none of whose candidates compiles gives the name back: the app's next try takes it.
  const broken = await attempt(() => wgtune.defineSet({ name: "js_fixed", candidates: [
    { name: "a", wgsl: "fn main( {", grid: [1] }] }));
  const fixed = await attempt(() => define("js_fixed", "double", "2.0 * x[g.x]"));
  // The first set still runs its own kernel.
  const call = { buffers: { x: buffer(n, 3), y: buffer(n, NaN) }, params: { n } };
  doubled.check(call);
  await doubled.settle(call);
  await doubled.execute(call);
  return { second, same, first: first.status === "fulfilled" ? first.value.candidates : String(first.reason),
           other: other.status === "rejected" ? { name: other.reason.name, field: other.reason.field,
                                                   message: other.reason.message } : other.value.candidates,
           broken, fixed, y: await read(call.buffers.y) };
}
"""


def test_a_name_defined_again_with_other_candidates_is_refused_unused_or_in_flight_and_the_first_runs_its_own(
        browser):
    page, log = browser.open()
    answer = page.evaluate(DEFINED_TWICE)
    refused = "is defined already on this page, with other candidates"
    assert answer["second"]["name"] == "ConfigError" and answer["second"]["field"] == "name", answer["second"]
    assert f"set 'js_twice' {refused}" in answer["second"]["message"]
    assert answer["same"] == {"resolved": "js_twice"}  # the same candidates: the same set
    assert answer["first"] == ["double_wg64", "double_wg128"]
    assert answer["other"]["name"] == "ConfigError" and answer["other"]["field"] == "name", answer["other"]
    assert f"set 'js_race' {refused}" in answer["other"]["message"]
    assert answer["broken"]["name"] == "NoValidKernelFound", answer["broken"]
    assert answer["fixed"] == {"resolved": "js_fixed"}, answer["fixed"]
    assert answer["y"] == 6.0  # 2 * 3: the first set's kernel, not the refused one's
    assert log.errors == []
    page.close()


# A batch of two launches, one on a buffer destroyed after it was recorded: WebGPU refuses the
# whole submission, the valid launch too. The batch's promise says so, naming the calls; each
# call's next execute is a checked first launch: the valid one runs, the destroyed one is refused.
BATCH_REFUSED = r"""
async () => {
""" + HELPERS + r"""
  const n = 999;
  const inc = await wgtune.defineSet({ name: "js_batch_refused", candidates: candidates("inc", "x[g.x] + 1.0") });
  const call = (fill) => ({ buffers: { x: buffer(n, fill), y: buffer(n, 0) }, params: { n } });
  const good = call(1), doomed = call(1), later = call(1);
  inc.check(good);
  await inc.settle(good);
  for (const each of [good, doomed, later]) await inc.execute(each);  // past their first launches
  device.queue.writeBuffer(good.buffers.x, 0, new Float32Array(n).fill(41));

  const batch = wgtune.batch();
  const answers = [inc.execute(good), inc.execute(doomed)];
  doomed.buffers.y.destroy();
  const submitted = batch.submit();  // submitted at the call: its promise carries WebGPU's word
  const refused = await attempt(() => submitted);
  const executes = await Promise.all(answers.map((answer) => attempt(() => answer)));
  const goodRanInBatch = await read(good.buffers.y);  // 2: the batch's valid launch did not run either
  const goodNext = await attempt(() => inc.execute(good));
  const goodAfter = await read(good.buffers.y);
  const doomedNext = await attempt(() => inc.execute(doomed));

  // The function form: its promise rejects the same way; a batch WebGPU took resolves to what it returned.
  const inFunction = await attempt(() => wgtune.batch(() => {
    inc.execute(later);
    later.buffers.x.destroy();
  }));
  const took = await attempt(() => wgtune.batch(() => "returned"));
  return { refused, executes, goodRanInBatch, goodNext, goodAfter, doomedNext, inFunction, took };
}
"""


def test_a_batch_webgpu_refuses_whole_rejects_its_promise_naming_its_calls_and_each_is_checked_again(browser):
    page, log = browser.open()
    answer = page.evaluate(BATCH_REFUSED)
    refused = answer["refused"]
    assert refused["name"] == "LaunchRefused", refused
    assert refused["message"].startswith("WebGPU refused a batch's submission of 2 launches, so none of them ran: "
                                         "set 'js_batch_refused' [n=1024] (2 calls): "), refused
    assert "destroyed" in refused["message"]
    assert all("resolved" in each for each in answer["executes"]), answer["executes"]  # recorded, as asked
    assert answer["goodRanInBatch"] == 2.0  # the submission was refused whole
    assert "resolved" in answer["goodNext"] and answer["goodAfter"] == 42.0, answer
    assert answer["doomedNext"]["name"] == "LaunchRefused", answer["doomedNext"]
    assert "set 'js_batch_refused' [n=1024]: WebGPU refused candidate" in answer["doomedNext"]["message"]
    assert "destroyed" in answer["doomedNext"]["message"]
    assert answer["inFunction"]["name"] == "LaunchRefused", answer["inFunction"]
    assert "set 'js_batch_refused' [n=1024]" in answer["inFunction"]["message"]
    assert answer["took"] == {"resolved": "returned"}
    assert log.errors == []  # awaited: no unhandled rejection, no uncaptured WebGPU error
    page.close()


# Calls a set cannot take, and the app's own functions failing: typed errors that name the set and
# what is wrong, and the app's own exception back as it threw it; never an internal error.
BAD_CALLS = r"""
async () => {
""" + HELPERS + r"""
  class MyError extends Error { constructor(message) { super(message); this.name = "MyError"; this.mine = 42; } }
  const n = 100;
  const x = buffer(n, 1), y = buffer(n, 0);
  const fixedGrid = await wgtune.defineSet({ name: "js_bad_calls", candidates: candidates("copy", "x[g.x]").map(
    (candidate) => ({ ...candidate, grid: [2] })) });
  const missing = {
    none: await attempt(() => fixedGrid.execute({ buffers: { x, y } })),
    array: await attempt(() => fixedGrid.execute({ buffers: { x, y }, params: [] })),
    object: await attempt(() => fixedGrid.execute({ buffers: { x, y }, params: {} })),
    check: await attempt(async () => fixedGrid.check({ buffers: { x, y } })),
  };
  const notBuffers = {
    null: await attempt(() => fixedGrid.execute({ buffers: { x: null, y }, params: { n } })),
    number: await attempt(() => fixedGrid.execute({ buffers: [x, 5], params: { n } })),
  };
  const thrown = new MyError("my grid broke");
  const define = (name, grid, key) => wgtune.defineSet({ name, key, candidates: [64, 128].map((wg) => ({
    name: `wg${wg}`, wgsl: source("x[g.x]"), constants: { WG: wg }, grid })) });
  const gridThrows = await define("js_grid_throws", () => { throw thrown; });
  const keyThrows = await define("js_key_throws", (call) => [Math.ceil(call.params.n / 64)],
                                 () => { throw new MyError("my key broke"); });
  const gridNaN = await define("js_grid_nan", () => [NaN]);
  const gridInfinity = await define("js_grid_infinity", () => [Infinity]);
  const call = { buffers: { x, y }, params: { n } };
  const own = async (action) => {
    try { await action(); return "resolved"; } catch (error) {
      return { same: error === thrown, isMine: error instanceof MyError, mine: error.mine, message: error.message };
    }
  };
  return {
    missing, notBuffers,
    gridThrows: await own(() => gridThrows.execute(call)),
    keyThrows: [await own(() => keyThrows.execute(call)), await own(async () => keyThrows.check(call))],
    gridNaN: await attempt(() => gridNaN.execute(call)),
    gridInfinity: await attempt(() => gridInfinity.execute(call)),
  };
}
"""


def test_a_call_without_params_or_with_no_gpu_buffer_and_an_apps_failing_function_say_what_is_wrong(browser):
    page, log = browser.open()
    answer = page.evaluate(BAD_CALLS)
    for name, error in answer["missing"].items():
        assert error["name"] == "ConfigError" and error["field"] == "params", (name, error)
        assert error["message"].startswith("set 'js_bad_calls': ") and "params: missing field(s) n" in error["message"]
    null, number = answer["notBuffers"]["null"], answer["notBuffers"]["number"]
    assert null["name"] == number["name"] == "ConfigError" and null["field"] == number["field"] == "buffers"
    assert null["message"] == "set 'js_bad_calls': buffer 'x' must be a GPUBuffer, got null"
    assert number["message"] == "set 'js_bad_calls': buffer 1 must be a GPUBuffer, got 5"
    assert answer["gridThrows"] == {"same": True, "isMine": True, "mine": 42, "message": "my grid broke"}
    for thrown in answer["keyThrows"]:
        assert thrown["isMine"] and thrown["mine"] == 42 and thrown["message"] == "my key broke", thrown
    for name, shown in (("gridNaN", "[NaN]"), ("gridInfinity", "[Infinity]")):
        error = answer[name]
        set_name = "js_grid_nan" if name == "gridNaN" else "js_grid_infinity"
        assert error["name"] == "ConfigError", (name, error)
        assert f"set '{set_name}'" in error["message"] and f"grid gave {shown}" in error["message"], error
        assert "internal error" not in error["message"]
    assert log.errors == []
    page.close()


# The key an error names (`key`: the key's fields): a call's error once its key is known, whether
# the key was never tuned, failed every candidate, or is waited for; none where the error concerns
# no one key (a definition, a call refused before its key is known, a label that is no key).
ERROR_KEYS = r"""
async () => {
""" + HELPERS + r"""
  const caught = async (action) => {
    try { await action(); return "resolved"; } catch (error) {
      return { name: error.name, set: error.set ?? null, key: error.key === undefined ? "absent" : error.key };
    }
  };
  const n = 256;
  const x = buffer(n, 1), y = buffer(n, 0);
  const call = { buffers: { x, y }, params: { n } };
  // Both candidates write 3 x; the reference says 2 x: the key's tune finds no valid kernel.
  const wrong = await wgtune.defineSet({ name: "js_keys_wrong", candidates: candidates("triple", "3.0 * x[g.x]"),
    outputs: ["y"], reference: (_call, inputs) => [new Float32Array(inputs[0].slice().buffer).map((v) => 2 * v)] });
  wrong.check(call);
  const failure = (await wrong.settle(call)).failure;
  const noValid = await caught(() => wrong.execute(call));
  const copy = await wgtune.defineSet({ name: "js_keys_copy", candidates: candidates("copy", "x[g.x]") });
  const noStorage = { buffers: { x, y: device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.COPY_SRC }) },
                      params: { n: 100 } };
  const destroyed = buffer(n, 0);
  destroyed.destroy();
  return {
    failure: failure.key, noValid,
    refused: [await caught(() => copy.execute(noStorage)), await caught(async () => copy.check(noStorage))],
    refusedLater: await caught(() => copy.execute({ buffers: { x, y: destroyed }, params: { n: 8 } })),
    timeout: await caught(() => copy.settle({ buffers: { x, y }, params: { n: 3000 } }, { timeout: 0.001 })),
    badParam: await caught(() => copy.execute({ buffers: { x, y }, params: { n: 1.5 } })),
    definition: await caught(() => wgtune.defineSet({ name: "js_keys_broken",
                                                      candidates: [{ name: "a", wgsl: "fn main( {", grid: [1] }] })),
    label: await caught(() => wgtune.settle("fma", "100003", { timeout: 0.001 })),
    // A label that is no key of a registered set: its set named, no key; a set not on the page: none.
    unknownLabel: [await caught(() => wgtune.check("fma", "12345")), await caught(() => wgtune.execute("fma", "12345")),
                   await caught(() => wgtune.settle("fma", "12345"))],
    unknownSet: await caught(() => wgtune.check("js_keys_nowhere", "12345")),
  };
}
"""


def test_an_error_names_the_key_of_its_call_as_its_fields_and_none_where_it_concerns_no_one_key(browser):
    page, log = browser.open()
    answer = page.evaluate(ERROR_KEYS)
    assert answer["failure"] == {"n": 256}
    assert answer["noValid"] == {"name": "NoValidKernelFound", "set": "js_keys_wrong", "key": {"n": 256}}
    for refused in (*answer["refused"], answer["refusedLater"]):
        assert refused["name"] == "LaunchRefused" and refused["set"] == "js_keys_copy", refused
    assert [refused["key"] for refused in answer["refused"]] == [{"n": 128}, {"n": 128}]  # 100, anchored
    assert answer["refusedLater"]["key"] == {"n": 8}  # WebGPU's word, after the call's first launch
    assert answer["timeout"] == {"name": "WgtuneError", "set": "js_keys_copy", "key": {"n": 4096}}
    assert answer["badParam"] == {"name": "ConfigError", "set": "js_keys_copy", "key": "absent"}
    assert answer["definition"] == {"name": "NoValidKernelFound", "set": "js_keys_broken", "key": "absent"}
    assert answer["label"] == {"name": "WgtuneError", "set": "fma",  # a registered key: its fields, not its label
                               "key": {"n": 131072, "dtype": "f32", "vec": 1}}
    assert answer["unknownLabel"] == [{"name": "WgtuneError", "set": "fma", "key": "absent"}] * 3
    assert answer["unknownSet"] == {"name": "WgtuneError", "set": None, "key": "absent"}
    assert log.errors == []
    page.close()
