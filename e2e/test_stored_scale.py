"""A page whose IndexedDB holds 100k stored winners (issue 13): it loads (the snapshot restore and
the session's opening included, issue 28) with no main-thread task working 200 ms; the
stored-winners panel shows a page of them, moves between pages and filters by set; and a tune
works no task 200 ms while the panel follows it.

A task's length is the machine's as much as the page's (on two shared cores a task is mostly the
main thread waiting for a CPU), so each long task is held to the time the renderer's main thread
was on a CPU within it (``long_tasks.MainThreadClock``, Linux's schedstat; elsewhere the task's
length), as in ``e2e/test_large_import.py``.
"""

from __future__ import annotations

import time

import pytest
from harness import wait_ready
from long_tasks import MainThreadClock, on_cpu

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

TARGET_MS = 200

# Every task over 50 ms of the page from its navigation on, registered before its scripts run:
# [start in ms since the epoch, duration].
WATCH_LOAD = """
window.__loadTasks = [];
new PerformanceObserver((list) => window.__loadTasks.push(
  ...list.getEntries().map((e) => [performance.timeOrigin + e.startTime, e.duration])))
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
  const probe = new PerformanceObserver((list) => seen.push(
    ...list.getEntries().map((e) => [performance.timeOrigin + e.startTime, e.duration])));
  probe.observe({ type: "longtask" });
  await new Promise((resolve) => setTimeout(() => {
    const until = performance.now() + 120;
    while (performance.now() < until);
    resolve();
  }, 0));
  await new Promise((resolve) => setTimeout(resolve, 300));
  probe.disconnect();
  const probed = seen.find(([, duration]) => duration >= 100);
  if (!probed) throw new Error(`long tasks are not observed here: ${seen}`);

  const tasks = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) tasks.push([performance.timeOrigin + entry.startTime, entry.duration]);
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
  return { settled, tuneMs: performance.now() - started, tasks, probed };
}
"""


@pytest.mark.slow  # a minute on SwiftShader: 100k winners stored, a reload and a tune timed task by task
def test_a_hundred_thousand_stored_winners_page_filter_and_cost_a_tune_no_long_task(browser, artifacts):
    page, log = browser.open()
    assert page.evaluate("(code) => window.wgtune.pyodide.runPythonAsync(code)",
                         SEED.replace("COUNT", str(ENTRIES))) == ENTRIES
    page.add_init_script(WATCH_LOAD)
    clock = MainThreadClock(browser.profile)
    started = time.perf_counter()
    with clock:
        page.reload()
        wait_ready(page)
    load_tasks = worked(clock, page.evaluate("window.__loadTasks"))
    print(f"\npage ready with {ENTRIES} stored winners in {time.perf_counter() - started:.1f} s; "
          f"tasks over 50 ms (ms long, on a CPU, waiting): {shown(load_tasks)}")
    # The snapshot restore in steps, the session's opening and the 100k read in slices: no task of
    # the load worked 200 ms (the restore was one of 260-300 ms, the demo's fma inputs one of 230).
    held_to_the_target(clock, "the load", load_tasks)
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

    with clock:
        answer = page.evaluate(TUNE_WATCHING_TASKS)
    if clock.available:  # the clock reads the page's thread: the probe's busy task shows on it
        ran, waited = on_cpu(clock, *answer["probed"])
        assert ran + waited >= answer["probed"][1] / 2, (answer["probed"], ran, waited)
    tune_tasks = worked(clock, answer["tasks"])
    print(f"tune with the panel following: {answer['tuneMs']:.0f} ms; tasks over 50 ms: {shown(tune_tasks)}")
    assert answer["settled"]["state"] == "Hit"
    held_to_the_target(clock, "the tune", tune_tasks)
    page.evaluate("window.wgtune.clearCache()")  # leave the shared profile as the other tests expect it
    assert log.errors == []
    page.close()


def worked(clock: MainThreadClock, tasks: list) -> list[tuple[float, float, float]]:
    """Each long task ``[start (ms since the epoch), duration]`` as (duration, ms on a CPU, ms waiting)."""
    return [(duration, *on_cpu(clock, start, duration)) for start, duration in tasks]


def shown(tasks: list[tuple[float, float, float]]) -> list[tuple[int, int, int]]:
    return sorted((round(t), round(r), round(w)) for t, r, w in tasks)[::-1][:6]


def held_to_the_target(clock: MainThreadClock, what: str, tasks: list[tuple[float, float, float]]) -> None:
    """No task worked TARGET_MS on the main thread (without a clock: none was that long)."""
    spent = [ran if clock.available else duration for duration, ran, _waited in tasks]
    assert all(ms < TARGET_MS for ms in spent), (what, shown(tasks))
