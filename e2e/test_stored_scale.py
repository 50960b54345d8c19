"""A page whose IndexedDB holds 100k stored winners (issue 13): the stored-winners panel shows a
page of them, moves between pages and filters by set, and a tune's longest main-thread task
stays under 200 ms while the panel follows it."""

from __future__ import annotations

import time

from harness import wait_ready

ENTRIES = 100_000
DASH = "\u2013"  # between the pager's first and last entry

# Python in the page, for the test's own set-up only: 100k entries of this device's namespace,
# written straight into IndexedDB through the store's helpers (one transaction).
SEED = r"""
import json
from js import window
from wgtune.backends.indexeddb import record_of
from wgtune.key import Key
from wgtune.store.format import StoredEntry, canonical_namespace

session = window.wgtune.session
namespace = canonical_namespace(session.namespace)
results = ({"name": "a", "index": 0, "median": 1e-3, "samples": [1e-3]},
           {"name": "b", "index": 1, "median": 2e-3, "samples": [2e-3]})
records = [record_of(namespace, StoredEntry("bulk" if n % 10 else "bulk_tenth", Key({"n": n}), "c0ffee", 0, "a",
                                            results))
           for n in range(COUNT)]
await session.idb.putEntries(json.dumps(records))
len(records)
"""

# Every task over 50 ms of the page from its navigation on, registered before its scripts run.
WATCH_LOAD = """
window.__loadTasks = [];
new PerformanceObserver((list) => window.__loadTasks.push(...list.getEntries().map((e) => e.duration)))
  .observe({ type: "longtask", buffered: true });
"""
# Loading 100k winners whole was one task of 3.7 s, all of the load's long-task time; read in
# slices and decoded as the tuner asks key by key, the longest was ~160 ms on an idle machine and
# 485-574 ms on a slower day of the same kind of machine (2026-12-01), out of some 55 tasks over
# 50 ms. Since issue 28 the records are kept as text until a key is asked for: what is asserted
# is that none of the 100k was decoded at load (a share of the load's long-task time, as before,
# fails now that the store adds almost none of it and a busy machine's restore is most of it).
UNDECODED = """() => window.wgtune.pyodide.runPython(
  "from js import window; window.wgtune.session.store.undecoded")"""

TUNE_WATCHING_TASKS = r"""
async () => {
  // The observer sees long tasks here: a 120 ms one of our own is reported (else the check below
  // could pass by seeing nothing).
  const seen = [];
  const probe = new PerformanceObserver((list) => seen.push(...list.getEntries().map((e) => e.duration)));
  probe.observe({ type: "longtask" });
  await new Promise((resolve) => setTimeout(() => {
    const until = performance.now() + 120;
    while (performance.now() < until);
    resolve();
  }, 0));
  await new Promise((resolve) => setTimeout(resolve, 300));
  probe.disconnect();
  if (!seen.some((duration) => duration >= 100)) throw new Error(`long tasks are not observed here: ${seen}`);

  const longest = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) longest.push(entry.duration);
  });
  observer.observe({ type: "longtask" });
  const device = window.wgtune.device;
  const n = 4096;
  const x = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(x, 0, new Float32Array(n).fill(1));
  const y = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const source = (wg) => `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(${wg}) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < arrayLength(&y)) { y[g.x] = 3.0 * x[g.x]; }
}`;
  const set = await window.wgtune.defineSet({
    name: `scale_with_big_cache_${Date.now()}`,
    candidates: [64, 128, 256].map((wg) => ({ name: `wg${wg}`, wgsl: source(wg), grid: [Math.ceil(n / wg)] })),
    key: () => ({ n }),
  });
  const started = performance.now();
  set.check({ buffers: { x, y } });
  const settled = await set.settle({ buffers: { x, y } });
  await window.wgtune.flush();
  await new Promise((resolve) => setTimeout(resolve, 1500)); // the panel follows the stored winner
  observer.disconnect();
  return { settled, tuneMs: performance.now() - started, longest: Math.max(0, ...longest), tasks: longest.length };
}
"""


def test_a_hundred_thousand_stored_winners_page_filter_and_cost_a_tune_no_long_task(browser, artifacts):
    page, log = browser.open()
    assert page.evaluate("(code) => window.wgtune.pyodide.runPythonAsync(code)",
                         SEED.replace("COUNT", str(ENTRIES))) == ENTRIES
    page.add_init_script(WATCH_LOAD)
    started = time.perf_counter()
    page.reload()
    wait_ready(page)
    load_tasks = page.evaluate("window.__loadTasks")
    print(f"\npage ready with {ENTRIES} stored winners in {time.perf_counter() - started:.1f} s; "
          f"longest task {max(load_tasks, default=0):.0f} ms, {sum(t > 200 for t in load_tasks)} over 200 ms, "
          f"{len(load_tasks)} over 50 ms")
    # Read in slices (indexeddb.LOAD_SLICE) and kept as text, each entry decoded only when its key
    # is asked for (issue 28): the 100k cost the load no decoding, and no long task of it.
    assert page.evaluate(UNDECODED) == ENTRIES

    page.locator("#cache-refresh").click()
    page.wait_for_function("document.querySelector('#cache-range')?.textContent.includes('100,')", timeout=60_000)
    assert page.locator("#cache-range").inner_text().startswith(f"1{DASH}50 of 100,0")  # the bulk, any tuned here
    assert page.locator("#cache tbody tr").count() == 50
    page.locator("#cache-next").click()
    page.wait_for_function(f"document.querySelector('#cache-range').textContent.startsWith('51{DASH}100')")
    page.locator("#cache-set").select_option("bulk_tenth")
    page.wait_for_function(f"document.querySelector('#cache-range').textContent === '1{DASH}50 of 10,000'")
    sets = {row.inner_text() for row in page.locator("#cache td.set").all()}
    assert sets == {"bulk_tenth"}
    page.screenshot(path=str(artifacts / "page-stored-100k.png"), full_page=True)

    answer = page.evaluate(TUNE_WATCHING_TASKS)
    print(f"tune with the panel following: {answer['tuneMs']:.0f} ms, longest task {answer['longest']:.0f} ms "
          f"({answer['tasks']} over 50 ms)")
    assert answer["settled"]["state"] == "Hit"
    assert answer["longest"] < 200, answer
    page.evaluate("window.wgtune.clearCache()")  # leave the shared profile as the other tests expect it
    assert log.errors == []
    page.close()
