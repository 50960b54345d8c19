"""Output checks in the page (issue 25, "nothing wrong trusted"): a set defined from JavaScript
whose fastest candidate is wrong never wins and never serves a call.

Every set here computes ``y = 2 x + 1`` over ``n`` floats with three right candidates (workgroups
of 64, 128 and 256) and one fast wrong one, ``quarter``: its grid covers a quarter of ``y``, so it
does a quarter of the work and leaves the rest unwritten. It is judged by a JavaScript
``reference`` or, without one, outvoted by the candidates that agree. One page load serves the
whole file (``page``); each case defines its own set, so no stored winner crosses cases.
"""

from __future__ import annotations

import numpy as np
import pytest

# A tune of these sets takes about a second on SwiftShader; the limit only catches a hang.
SETTLE_S = 300

# Installed once in the page: the sets' WGSL and candidates, the app's buffers, a read-back, and
# every tune event heard since (window.checksKit.events).
KIT = r"""
({ settleSeconds }) => {
  const wgtune = window.wgtune;
  const device = wgtune.device;
  const source = (outputType, value) => `
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<${outputType}>;
@group(0) @binding(2) var<uniform> p: Params;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < p.n) { y[g.x] = ${value}; }
}`;
  const candidate = (name, wg, covers, outputType = "f32") => ({
    name, wgsl: source(outputType, outputType === "f32" ? "2.0 * x[g.x] + 1.0" : "u32(2.0 * x[g.x] + 1.0)"),
    constants: { WG: wg }, grid: (call) => [Math.ceil(call.params.n * covers / wg)],
  });
  const right = (outputType) => [64, 128, 256].map((wg) => candidate(`wg${wg}`, wg, 1, outputType));
  const quarter = (outputType) => candidate("quarter", 64, 0.25, outputType);
  const buffer = (bytes, usage) => device.createBuffer({ size: bytes, usage: usage | GPUBufferUsage.STORAGE });
  const kit = {
    events: [],
    /** The call's state once its tune ended. */
    settle: (set, call) => set.settle(call, { timeout: settleSeconds }),
    /** Candidates in the order `order` names them: "right" (the three right ones) and "quarter". */
    candidates: (order, outputType = "f32") => order.flatMap((part) =>
      part === "quarter" ? [quarter(outputType)] : right(outputType)),
    /** 2 x + 1 of the check's inputs (x first), as the reference's Float32Array. */
    twiceXPlusOne: (call, inputs) => [new Float32Array(inputs[0].slice().buffer).map((v) => 2 * v + 1)],
    /** The call on fresh buffers: x = (i mod 97) / 2, y all NaN (what a kernel leaves unwritten shows). */
    call: (n) => {
      const x = buffer(4 * n, GPUBufferUsage.COPY_DST);
      device.queue.writeBuffer(x, 0, new Float32Array(n).map((_, i) => (i % 97) / 2));
      const y = buffer(4 * n, GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC);
      device.queue.writeBuffer(y, 0, new Float32Array(n).fill(NaN));
      return { buffers: { x, y }, params: { n } };
    },
    read: async (source) => {
      const usage = GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST;
      const readback = device.createBuffer({ size: source.size, usage });
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(source, 0, readback, 0, source.size);
      device.queue.submit([encoder.finish()]);
      await readback.mapAsync(GPUMapMode.READ);
      const values = Array.from(new Float32Array(readback.getMappedRange().slice(0)));
      readback.unmap();
      return values.map((v) => (Number.isNaN(v) ? "NaN" : v));
    },
  };
  wgtune.on((event) => kit.events.push(event));
  window.checksKit = kit;
}
"""

# Define the set (candidates in `order`, with the reference if asked), tune the call, run it once
# tuned; what each step answered, the output read back, and the tune's events and record.
TUNE_AND_RUN = r"""
async ({ name, order, n, reference }) => {
  const kit = window.checksKit;
  const set = await window.wgtune.defineSet({
    name, candidates: kit.candidates(order), ...(reference ? { reference: kit.twiceXPlusOne } : {}),
  });
  const call = kit.call(n);
  set.check(call);
  const settled = await kit.settle(set, call);
  const ran = await set.execute(call);
  return {
    candidates: set.candidates, settled, ran, y: await kit.read(call.buffers.y), results: set.results(call),
    finished: kit.events.filter((event) => event.type === "finished" && event.set === name),
    records: window.wgtune.records().filter((item) => item.record.table === name),
  };
}
"""


def tune_and_run(page, name: str, order: list[str], *, reference: bool, n: int = 1000) -> dict:
    answer = page.evaluate(TUNE_AND_RUN, {"name": name, "order": order, "n": n,
                                                                     "reference": reference})
    assert answer["settled"]["state"] == "Hit", answer["settled"]
    return answer


def right_output(n: int) -> np.ndarray:
    return 2 * (np.arange(n) % 97 / 2).astype(np.float32) + 1


def result_of(answer: dict, name: str) -> dict:
    [result] = [result for result in answer["results"] if result["name"] == name]
    return result


@pytest.fixture(scope="module")
def page(browser):
    tab, log = browser.open()
    tab.evaluate(KIT, {"settleSeconds": SETTLE_S})
    yield tab
    assert log.errors == []
    tab.close()


def test_a_fast_wrong_candidate_is_a_mismatch_against_the_javascript_reference_and_never_runs(page):
    answer = tune_and_run(page, "checks_reference", ["right", "quarter"], reference=True)
    assert answer["candidates"] == ["wg64", "wg128", "wg256", "quarter"]
    quarter = result_of(answer, "quarter")
    assert quarter["error"] == "Mismatch", quarter
    assert "output 'y' (buffer 1) disagrees with the reference" in quarter["reason"], quarter
    assert answer["settled"]["winner"] in ("wg64", "wg128", "wg256")
    assert answer["ran"]["ran"] == answer["settled"]["winner"]
    np.testing.assert_array_equal(np.array(answer["y"], dtype=np.float32), right_output(1000))  # no NaN left
    [finished] = answer["finished"]
    assert finished["judge"] == "reference" and finished.get("warning") is None, finished


def test_without_a_reference_the_candidates_that_agree_outvote_the_wrong_one(page):
    answer = tune_and_run(page, "checks_agreement", ["right", "quarter"], reference=False)
    quarter = result_of(answer, "quarter")
    assert quarter["error"] == "Mismatch", quarter
    assert quarter["reason"].startswith("disagrees with the 3 candidates that agree (wg64, wg128, wg256)"), quarter
    assert answer["settled"]["winner"] in ("wg64", "wg128", "wg256")
    assert all("median" in result_of(answer, name) for name in ("wg64", "wg128", "wg256"))
    np.testing.assert_array_equal(np.array(answer["y"], dtype=np.float32), right_output(1000))
    [finished] = answer["finished"]
    assert finished["judge"] == "agreement" and finished.get("warning") is None, finished


# After the tune of one key, a call of another key: while it is Pending the fallback serves it.
FALLBACK_ON_A_NEW_KEY = r"""
async ({ name, n }) => {
  const kit = window.checksKit;
  const set = await window.wgtune.defineSet({ name, candidates: kit.candidates(["quarter", "right"]) });
  const call = kit.call(n);
  const ran = await set.execute(call);
  await kit.settle(set, call);
  return { ran, y: await kit.read(call.buffers.y) };
}
"""


def test_a_wrong_candidate_0_is_said_in_the_tune_and_is_the_fallback_no_more(page):
    answer = tune_and_run(page, "checks_default_wrong", ["quarter", "right"], reference=False)
    assert result_of(answer, "quarter")["error"] == "Mismatch"
    assert answer["settled"]["winner"] in ("wg64", "wg128", "wg256")
    [finished] = answer["finished"]
    assert finished["judge"] == "agreement"
    assert finished["warning"].startswith("candidate 0 (quarter), the set's default, is wrong here: disagrees with "
                                          "the 3 candidates that agree"), finished
    [item] = answer["records"]
    assert item["record"]["warning"] == finished["warning"]
    # The page says it to a person: the wrong candidate's row in the chart, the warning over it and
    # under the tune's record (the chart follows the latest tune and is drawn on the next frame).
    page.wait_for_function("""() => document.querySelector('#chart .chart-title')?.textContent
        === 'checks_default_wrong/n=1024' && !!document.querySelector('#chart g[data-status="mismatch"]')""")
    row = page.locator('#chart g[data-candidate="quarter"]')
    assert row.get_attribute("data-status") == "mismatch"
    assert "Wrong output (Mismatch): disagrees with the 3 candidates that agree" in row.text_content()
    assert page.locator("#chart .chart-warning").text_content() == f"⚠ {finished['warning']}"
    assert page.locator("#records tr.record-warning").filter(has_text="candidate 0 (quarter)").count() == 1
    # The same set (its name, its candidates) on a key not tuned yet (the default key rounds n up to a
    # power of two: 1000 was 1024, 3000 is 4096): the fallback runs, and it is not quarter.
    later = page.evaluate(FALLBACK_ON_A_NEW_KEY, {"name": "checks_default_wrong", "n": 3000})
    assert later["ran"]["state"] == "Pending" and later["ran"]["ran"] == "wg64", later["ran"]
    np.testing.assert_array_equal(np.array(later["y"], dtype=np.float32), right_output(3000))


# A reference that returns floats for a u32 output: the tune fails, naming the buffer.
WRONG_TYPE = r"""
async () => {
  const kit = window.checksKit;
  const set = await window.wgtune.defineSet({
    name: "checks_wrong_type", candidates: kit.candidates(["right"], "u32"), reference: kit.twiceXPlusOne,
  });
  const call = kit.call(256);
  set.check(call);
  return { settled: await kit.settle(set, call),
           failed: kit.events.filter((event) => event.type === "failed" && event.set === "checks_wrong_type") };
}
"""


def test_a_reference_returning_floats_for_a_u32_output_fails_the_tune_naming_the_buffer(page):
    answer = page.evaluate(WRONG_TYPE)
    settled = answer["settled"]
    assert settled["state"] == "Miss", settled
    said = ("the reference of checks_wrong_type: output 'y' (buffer 1), of WGSL type u32, is given f32 values; "
            "give u32 ones")
    assert said in settled["failure"]["message"], settled
    [failed] = answer["failed"]
    assert said in failed["reason"], failed


def test_the_checks_setting_turns_them_off_as_loadWgtune_reads_it(page):
    # What loadWgtune({settings: {checks: 0}}) hands the page's Python (PageSession.open reads it so).
    checks = page.evaluate("""() => {
      const { pyodide } = window.wgtune;
      const pageConfig = pyodide.pyimport("wgtune.backends.page_settings").page_config;
      const of = (settings) => pageConfig(pyodide.toPy(settings)).checks;
      return { off: of({ checks: 0 }), on: of({}), text: of({ checks: "0" }), no: of({ checks: false }) };
    }""")
    assert checks == {"off": False, "on": True, "text": False, "no": False}
