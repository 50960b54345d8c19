// wgtune in a page: loads Pyodide (served locally), installs the wgtune wheel, opens WebGPU,
// and returns the JS API. The tuner itself is the Python core (backends/page.py drives it).
//
//   import { loadWgtune } from "./vendor/wgtune/wgtune.js";   // wherever your site hosts it
//   const wgtune = await loadWgtune({ device: myGPUDevice });   // or let wgtune open one
//   wgtune.check("matmul", "128x128x128");   // {state: "Pending"} on a miss: the tune has started
//   await wgtune.execute("matmul", "128x128x128");   // runs the winner, or the fallback meanwhile

import { openDocuments } from "./idb.js";
import { openTabs } from "./tabs.js";
import { resolveBaseUrl, startPython } from "./python.js";
import { pythonError, py } from "./errors.js";
export {
  WgtuneError, ConfigError, KernelError, LaunchRefused, StoreError, TuneFailed, DeviceLost, NoValidKernelFound,
} from "./errors.js";
export { anchor } from "./anchor.js";
import { defineSet } from "./sets.js";
import { batch } from "./batch.js";
import { loadBundle } from "./bundle.js";
import { shareWinners } from "./collector.js";
import { disposer, timestampWarning } from "./lifecycle.js";

/** Why wgtune cannot run here, with what to do about it (shown by the page). */
export class WgtuneUnavailable extends Error {
  constructor(message, advice) {
    super(message);
    this.name = "WgtuneUnavailable";
    this.advice = advice;
  }
}

const WEBGPU_ADVICE =
  "Use a browser with WebGPU: Chrome or Edge 113+ (on Linux start Chromium with --enable-unsafe-webgpu), " +
  "Safari 26+, or Firefox 141+ on Windows. The page must come from http://127.0.0.1 or https.";

/** The finest step of performance.now() seen in a short busy loop, in seconds. */
function clockGrain() {
  let finest = Infinity;
  let last = performance.now();
  const until = last + 5;
  while (finest > 1e-6 && last < until) {
    const now = performance.now();
    if (now > last) {
      finest = Math.min(finest, now - last);
      last = now;
    }
  }
  return Number.isFinite(finest) ? finest / 1000 : 1e-4;
}

function requireWebGPU() {
  if (!("gpu" in navigator)) {
    throw new WgtuneUnavailable("This browser has no WebGPU (navigator.gpu is missing).", WEBGPU_ADVICE);
  }
}

async function openDevice() {
  requireWebGPU();
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) {
    throw new WgtuneUnavailable(
      "WebGPU is present but gave no adapter (the GPU or its driver may be blocklisted).",
      "Update the GPU driver, check chrome://gpu, or start the browser with --enable-unsafe-webgpu.",
    );
  }
  const wanted = ["timestamp-query", "shader-f16", "subgroups"].filter((f) => adapter.features.has(f));
  // Ask for the adapter's own compute limits: candidates are checked against what the device allows.
  const names = [
    "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX",
    "maxComputeWorkgroupSizeY", "maxComputeWorkgroupSizeZ", "maxStorageBufferBindingSize", "maxBufferSize",
  ];
  const requiredLimits = Object.fromEntries(names.map((name) => [name, adapter.limits[name]]));
  const device = await adapter.requestDevice({ requiredFeatures: wanted, requiredLimits });
  return { adapter, device };
}

function describeAdapter(adapter, device) {
  const info = device.adapterInfo ?? adapter?.info ?? {};
  return {
    vendor: info.vendor ?? "",
    architecture: info.architecture ?? "",
    device: info.device ?? "",
    description: info.description ?? "",
    isFallbackAdapter: Boolean(info.isFallbackAdapter ?? adapter?.isFallbackAdapter ?? false),
    timestampQuery: device.features.has("timestamp-query"),
    features: [...device.features].sort(),
  };
}


/**
 * Load wgtune. Options:
 *  - device: a GPUDevice to tune on (default: wgtune opens the high-performance adapter's);
 *  - onStatus(text): loading progress; onEvent(event): tune progress (pending, started, trial,
 *    finished, failed, record);
 *  - database: the IndexedDB database name (default "wgtune");
 *  - settings: how tunes sample, as the WGTUNE_* variables say it natively, by lower-case name:
 *    {policy: "fixed"}, {budget: 0.5, max_samples: 20}, ... (default: wgtune's defaults);
 *  - baseUrl: the directory wgtune's assets are served from (pyodide/, wgtune-config.json, the
 *    wheel, python-worker.js; see python.js), default the directory this module was loaded from
 *    (an app that bundles wgtune from npm passes where it serves the package's assets);
 *  - pyodideUrl: the directory of Pyodide's files (pyodide.mjs, ...), default pyodide/ under baseUrl;
 *  - demo: register the demo's sets and keys (default false: an app registers its own; the demo
 *    costs about 22 MB of buffers on the device);
 *  - stackSwitching: start Pyodide with WebAssembly stack switching (JSPI) where the browser has it,
 *    for Python of your own that blocks on promises (run_sync, asyncio.run in the page). Default
 *    false: Chromium's renderer can crash on Python's JSPI stacks (python.js withStackSwitching),
 *    and wgtune does not need them. The first Pyodide a page starts decides.
 * Rejects with WgtuneUnavailable where WebGPU is missing, with advice.
 */
export async function loadWgtune({
  device = null, onStatus = () => {}, onEvent = () => {}, database = "wgtune", settings = {},
  baseUrl = undefined, pyodideUrl = undefined, demo = false, stackSwitching = false,
} = {}) {
  const started = performance.now();
  const phases = {}; // milliseconds of each step of this load, as api.loadPhases
  let adapter = null;
  const ownDevice = !device;
  if (ownDevice) requireWebGPU();
  // Python starts while the device opens: the two do not depend on each other.
  const python = startPython(resolveBaseUrl(baseUrl), { onStatus, phases, pyodideUrl, stackSwitching });
  python.catch(() => {}); // awaited below, after the device (whose failure may come first)
  if (ownDevice) {
    onStatus("Opening WebGPU…");
    ({ adapter, device } = await openDevice());
    phases.device = performance.now() - started;
  }
  const adapterInfo = describeAdapter(adapter, device);
  const grain = clockGrain();
  const { pyodide, config } = await python;

  onStatus("Reading stored winners…");
  const sessionStarted = performance.now();
  const documents = await openDocuments(database);
  const listeners = new Set([onEvent]);
  // Events come from inside Python (a check, a tune's step): listeners run after it, as a
  // microtask, so a page's rendering never adds to the time a check takes to answer.
  const notify = (text) => {
    queueMicrotask(() => {
      const event = JSON.parse(text);
      for (const listener of listeners) listener(event);
    });
  };
  const { PageSession } = pyodide.pyimport("wgtune.backends.page");
  // Facing: what JavaScript calls raises wgtune's errors as errors.js reads them (backends/js_errors.py).
  const { Facing } = pyodide.pyimport("wgtune.backends.js_errors");
  const session = await py(() =>
    Facing(PageSession).open.callKwargs(device, pyodide.toPy(adapterInfo), documents, notify, {
      clock_grain: grain, settings: pyodide.toPy(settings), demo, tabs: openTabs(database),
    }),
  );
  phases.session = performance.now() - sessionStarted;
  performance.measure("wgtune: session opened", { start: sessionStarted });

  const api = {
    version: config.version,
    pyodide,
    /** The Python PageSession: an embedding page registers its own sets with `await session.add_case(case)`. */
    session,
    device,
    adapterInfo,
    readyMs: performance.now() - started,
    /** Milliseconds of each step of the load: device, pyodide, wheel, session (what a load spends where). */
    loadPhases: phases,
    /** The device and every tunable set with its keys and their states. */
    catalogue: () => JSON.parse(session.catalogue()),
    /** The key's state: {state: "Hit", winner} or {state: "Pending"} (a tune just started or running). */
    check: (set, key) => {
      labels("check", set, key);
      try {
        return JSON.parse(session.check(set, key));
      } catch (error) {
        throw pythonError(error);
      }
    },
    /** Run the key's winner, or the fallback while Pending. {output: true} adds the output (base64). */
    execute: (set, key, { output = false } = {}) =>
      py(async () => JSON.parse(await session.execute(...labels("execute", set, key), output))),
    /**
     * Wait until the key is no longer Pending; its state. `timeout` (seconds, default 600) only
     * guards against a tune that never ends: a matmul tune takes a minute on a CPU adapter.
     */
    settle: (set, key, { timeout = 600 } = {}) =>
      py(async () => JSON.parse(await session.settle(...labels("settle", set, key), timeout))),
    /** The tune records of this page load. */
    records: () => JSON.parse(session.records_json()),
    /**
     * One page of the stored winners: this device's (or `namespace`'s), every set's (or `set`'s),
     * `limit` of them from `offset`; with every device's and set's counts. Reads only that page.
     */
    storedPage: ({ namespace = null, set = null, offset = 0, limit = 50 } = {}) =>
      py(async () => JSON.parse(await session.stored_page(namespace, set, offset, limit))),
    /**
     * Every stored winner of every device, as an export document (what `wgtune cache export`
     * writes); exportCache: as its text. Both are read a slice at a time: 100k winners are many
     * short tasks of the page, not one of seconds (backends/idb_transfer.py).
     */
    cache: () => py(() => session.export_document()),
    exportCache: () => py(async () => (await session.export_pieces()).join("")),
    /**
     * Merge an export (native or browser) into IndexedDB; how many entries. Read a slice at a time,
     * written at once. Its text, or the document `cache()` gives (an object is taken as its JSON).
     */
    importCache: (text) => py(() => session.import_cache(inPieces(
      text !== null && typeof text === "object" ? JSON.stringify(text) : String(text)))),
    /**
     * Forget stored winners: this device's (default), `device`'s (a namespace as storedPage lists
     * them), or with `all` every device's; how many winners went. Their keys are tuned again.
     */
    clearCache: ({ device, all = false } = {}) => py(() => session.clear_cache(device ?? undefined, Boolean(all))),
    /** Seed the tuner from a bundle of winners (a same-origin URL or the object; see bundle.js). */
    loadBundle: (source) => loadBundle(api, source),
    /** Send this page's winners to a fleet collector and start from its verified ones (collector.js). */
    shareWinners: (url, options) => shareWinners(api, url, options),
    /** Wait until winners tuned so far are written to IndexedDB. */
    flush: () => py(() => session.flush()),
    /** Define a tunable set from JavaScript and tune it on your own buffers (see sets.js, wgtune.d.ts). */
    defineSet: (spec) => defineSet(api, spec),
    /** Record set.execute launches and submit them together: batch(() => {...}) or batch() ... .submit() (batch.js). */
    batch: (body) => batch(api, body),
    on: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  const watch = { api, ownDevice, emit: (event) => notify(JSON.stringify(event)) };
  watchForLoss(watch, device);
  /** End this wgtune: tunes cancelled, winners written, IndexedDB closed; every later call refuses (lifecycle.js). */
  api.dispose = disposer(api, { session, listeners, watch, ownDevice });
  const warning = timestampWarning(device, ownDevice);
  if (warning) {
    console.warn(`wgtune: ${warning}`);
    notify(JSON.stringify({ type: "warning", message: warning }));
  }
  return api;
}

/** Text Python takes a piece at a time (`slice`): 26 MB copied into Python at once is one long task. */
function inPieces(text) {
  return { length: text.length, slice: (start, end) => text.slice(start, end) };
}

/**
 * The (set, key) labels of a registered key, checked: a set name and a key label as the catalogue
 * gives them ("matmul", "128x128x128"). A set defined with defineSet is called through its handle.
 */
function labels(method, set, key) {
  for (const [what, value] of [["set", set], ["key", key]]) {
    if (typeof value !== "string") {
      const got = value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
      const hint = typeof set === "object" && set !== null
        ? "; for a set from defineSet, call its handle: set.check(call)" : "";
      throw new TypeError(`wgtune.${method}(set, key): the ${what} must be a string label, got ${got}${hint}`);
    }
  }
  return [set, key];
}

// A device lost more often than this in a row is given up on: something keeps losing it.
const MAX_REOPENS = 3;

/**
 * When the GPU device is lost (a driver reset, the browser's GPU watchdog stopping a kernel that
 * ran too long), say so with a "device-lost" event; on a device wgtune opened itself, open a new
 * one and go on there (session.reopen: the interrupted tunes start again without the candidate
 * that was running), then say "device-reopened". An embedding page's own device is its own to
 * replace. `watch`: {api, ownDevice, emit}; dispose empties its api, which ends the watch.
 */
function watchForLoss(watch, device, reopens = 0) {
  device.lost.then(async (info) => {
    const { api, ownDevice, emit } = watch;
    if (!api) return;
    emit({ type: "device-lost", reason: info.reason ?? "unknown", message: info.message ?? "" });
    if (!ownDevice) return;
    if (reopens >= MAX_REOPENS) {
      emit({ type: "device-gone", reason: `the GPU device was lost ${reopens + 1} times; reload the page` });
      return;
    }
    try {
      const { adapter, device: fresh } = await openDevice();
      api.adapterInfo = describeAdapter(adapter, fresh);
      const again = await py(() => api.session.reopen(fresh, api.pyodide.toPy(api.adapterInfo)));
      api.device = fresh;
      emit({ type: "device-reopened", retuning: again.toJs() });
      watchForLoss(watch, fresh, reopens + 1);
    } catch (error) {
      emit({ type: "device-gone", reason: `no new GPU device: ${error.message ?? error}` });
    }
  });
}
