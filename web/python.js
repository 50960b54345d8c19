// Starting wgtune's Python: Pyodide and the wgtune wheel, every asset found relative to the
// library's base URL (by default the directory wgtune.js was loaded from), so a site can host
// the library under any path: /vendor/wgtune/pyodide/..., /vendor/wgtune/wgtune-config.json.
//
// Layout under the base URL (what `wgtune serve` serves at /, what `python -m
// wgtune.cli.library DIR` writes for a site to copy, and what the npm package's `wgtune-assets
// DIR` writes from node_modules):
//   pyodide/              Pyodide's runtime (pyodide.mjs, pyodide.asm.mjs, .wasm, stdlib, lock
//                         file), or wherever loadWgtune's `pyodideUrl` says
//   wgtune-config.json    {"version", "wheel"}: the wheel's URL, relative to the config
//   wheels/DIGEST/NAME    the wgtune wheel
//   python-worker.js      the worker that starts Python (with python.js and snapshots.js)
//
// Starting Python is one long task (instantiating Pyodide, initialising the interpreter, importing
// wgtune: 1-3 s), and Python cannot move to a worker for good: the tuner drives the page's
// GPUDevice, whose objects cannot leave the main thread. So Python starts in a worker
// (python-worker.js), which sends back a memory snapshot of itself with wgtune imported
// (Pyodide's makeMemorySnapshot); the main thread restores it (a copy, not a start-up) and keeps
// it in Cache Storage (snapshots.js), so a later load skips the worker too. Where a snapshot
// cannot be had (no Worker, no Cache Storage, a snapshot that does not restore: it is dropped),
// Python starts on the main thread as before, in one long task.

import { dropSnapshot, readSnapshot, saveSnapshot, snapshotKey } from "./snapshots.js";

/** The library's default base URL: the directory of this module (it sits beside wgtune.js). */
export const DEFAULT_BASE_URL = new URL(".", import.meta.url);

// Imported before a snapshot: every module the session needs at open (what a load would import).
export const SNAPSHOT_IMPORTS = "import wgtune.backends.page, wgtune.backends.js_sets";
// Python that says where the wheel sits in Pyodide's file system: in site-packages, as one file (see installWheel).
const WHEEL_PATH_CODE = "import sysconfig, os; os.path.join(sysconfig.get_path('purelib'), 'wgtune.whl')";
// After a restore: the snapshot's random state would repeat on every load.
const AFTER_RESTORE = "import random; random.seed()";

/** `baseUrl` as an absolute URL of a directory (a trailing slash added where it has none). */
export function resolveBaseUrl(baseUrl = DEFAULT_BASE_URL) {
  const url = new URL(String(baseUrl), globalThis.document?.baseURI ?? location.href);
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url;
}

/** `pyodideUrl` as an absolute URL of a directory; by default `pyodide/` under the base URL. */
export function resolvePyodideUrl(base, pyodideUrl = undefined) {
  return pyodideUrl === undefined ? new URL("pyodide/", base) : resolveBaseUrl(pyodideUrl);
}

/**
 * The worker's script. It is looked for under the base URL, not beside this module: a bundler
 * (esbuild, Vite) puts this module inside the app's bundle, where no python-worker.js sits beside
 * it, while the base URL holds the library's assets. A worker's script must come from the page's
 * origin, so a base on another origin (a CDN) takes the one beside this module (the copied folder).
 */
function workerUrl(base) {
  const sameOrigin = base.origin === new URL(globalThis.location?.href ?? base).origin;
  return sameOrigin ? new URL("python-worker.js", base) : new URL("./python-worker.js", import.meta.url);
}

const CHECK_BASE_URL =
  "Is wgtune hosted there? Pass loadWgtune({baseUrl}) the URL of the directory that holds " +
  "wgtune-config.json and pyodide/ (the copied library folder, or where your app serves the npm " +
  "package's assets: npx wgtune-assets DIR).";
const CHECK_PYODIDE_URL = "Is Pyodide hosted there? Pass loadWgtune({pyodideUrl}) the URL of its directory.";

/** An asset of the library that could not be loaded: says which, from where, and what to check. */
function missingAsset(what, url, cause, check = CHECK_BASE_URL) {
  const error = new Error(`wgtune could not load ${what} from ${url} (${cause}). ${check}`);
  error.url = String(url);
  return error;
}

/** The bytes at `url`, an asset of the library (`what` names it in the error). */
async function fetchBytes(what, url) {
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    throw missingAsset(what, url, error.message ?? error);
  }
  if (!response.ok) throw missingAsset(what, url, `HTTP ${response.status}`);
  return response.arrayBuffer();
}

async function fetchConfig(base) {
  const url = new URL("wgtune-config.json", base);
  const config = JSON.parse(new TextDecoder().decode(await fetchBytes("its config", url)));
  return { ...config, wheelUrl: new URL(config.wheel, url).href };
}

async function importPyodide(indexURL, check) {
  const url = new URL("pyodide.mjs", indexURL);
  try {
    return await import(url.href);
  } catch (error) {
    throw missingAsset("Pyodide", url, error.message ?? error, check);
  }
}

/**
 * Put the wheel on Python's path as it is: a pure-Python wheel is a zip that `zipimport` reads
 * (no package data is read through files). Not unpacked: unpacking the 450 KB wheel into Pyodide's
 * file system was one task of 180-310 ms on every load, while writing the zip is a copy. A
 * restored Python needs the file again (a snapshot holds memory, not Pyodide's file system), at
 * the same path: its `sys.path` and `zipimport`'s directory of the zip came with the snapshot.
 * Not through loadPackage either: that leaves Pyodide's record of loaded packages in a state a
 * snapshot refuses.
 */
export function installWheel(pyodide, bytes, url, { restored = false } = {}) {
  try {
    const path = pyodide.runPython(WHEEL_PATH_CODE);
    pyodide.FS.writeFile(path, new Uint8Array(bytes));
    if (!restored) pyodide.runPython(`import sys; sys.path.insert(0, ${JSON.stringify(path)})`);
  } catch (error) {
    throw new Error(`installing ${url} failed: ${error.message ?? error}`);
  }
}

// WebAssembly's stack switching (JSPI), as Pyodide looks for it when it starts.
const STACK_SWITCHING = ["Suspending", "promising", "Suspender"];

/**
 * Run `load` (a loadPyodide) with WebAssembly's stack switching hidden, so that Pyodide starts
 * without it and runs Python on the thread's own stack. Why: where Pyodide has JSPI it runs
 * Python's event-loop steps on stacks of their own, and Chromium's renderer crashes ("Target
 * crashed", SIGSEGV just past the end of such a stack) when something walks one of them
 * (GWP-ASan's sampling is one walker; docs/development.md). wgtune never blocks Python on a
 * promise (no run_sync), so it loses nothing; `stackSwitching: true` keeps JSPI for code that
 * does (asyncio.run in the page's Pyodide). Pyodide decides when it starts, so the names are
 * back on WebAssembly once it has.
 */
export async function withStackSwitching(enabled, load) {
  if (enabled) return load();
  const hidden = STACK_SWITCHING.filter((name) => name in WebAssembly)
    .map((name) => [name, Object.getOwnPropertyDescriptor(WebAssembly, name)]);
  for (const [name] of hidden) delete WebAssembly[name];
  try {
    return await load();
  } finally {
    for (const [name, descriptor] of hidden) Object.defineProperty(WebAssembly, name, descriptor);
  }
}

/** Resolves in a later task of the page (not a microtask): what runs after it is a task of its own. */
function nextTask() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** A snapshot of Python with wgtune imported, made in a worker; null where that failed (said on the console). */
function snapshotInWorker(base, indexURL, wheelUrl, stackSwitching) {
  return new Promise((resolve) => {
    let worker;
    try {
      worker = new Worker(workerUrl(base), { type: "module" });
    } catch {
      resolve(null);
      return;
    }
    const done = (snapshot, problem) => {
      worker.terminate();
      if (problem) console.warn(`wgtune: starting Python in a worker failed (${problem}); starting it here`);
      resolve(snapshot);
    };
    worker.onmessage = ({ data }) => done(data.snapshot ?? null, data.error);
    worker.onerror = (event) => done(null, event.message || "the worker did not start");
    worker.postMessage({ indexURL, wheelUrl, stackSwitching });
  });
}

/**
 * Pyodide's module factory (what loadPyodide would import itself), its steps each starting a task
 * of its own. A restore was one task of 260-300 ms on a CPU here: WebAssembly's instantiation,
 * Emscripten's start of the instance (running its constructors), then the snapshot restored into it
 * and Python's start finished. Now they are three tasks (about 90, 110 and 50 ms).
 */
async function pyodideModuleInSteps(indexURL) {
  const { default: create } = await import(new URL("pyodide.asm.mjs", indexURL).href);
  return async (settings) => {
    const instantiate = settings.instantiateWasm; // Pyodide's own (streaming compilation)
    if (instantiate) {
      settings.instantiateWasm = (imports, receive) =>
        instantiate(imports, (instance, module) => nextTask().then(() => receive(instance, module)));
    }
    const module = await create(settings);
    await nextTask();
    return module;
  };
}

/** Python restored from `snapshot`, or null where it does not restore (the stored one is then dropped). */
async function restore(loadPyodide, indexURL, snapshot, key, stackSwitching) {
  const began = performance.now();
  try {
    const createPyodideModule = await pyodideModuleInSteps(indexURL);
    const pyodide = await withStackSwitching(stackSwitching,
      () => loadPyodide({ indexURL, _loadSnapshot: snapshot, createPyodideModule }));
    pyodide.runPython(AFTER_RESTORE);
    // Named in DevTools' timeline (and read by bench/large_import.py): its long tasks are Pyodide's.
    performance.measure("wgtune: Python restored from a snapshot", { start: began });
    return pyodide;
  } catch (error) {
    console.warn(`wgtune: a Python snapshot did not restore (${error.message ?? error}); starting afresh`);
    await dropSnapshot(key);
    return null;
  }
}

/**
 * Start Python with wgtune installed; `{pyodide, config}`. The config, Pyodide's module and the
 * wheel are fetched at once. `phases` receives each step's milliseconds and where Python came
 * from (`python`: "stored snapshot", "worker", or "main thread"). `pyodideUrl`: Pyodide's
 * directory, when it is not `pyodide/` under the base. `stackSwitching`: start Pyodide with JSPI where
 * the browser has it (see withStackSwitching; off by default).
 */
export async function startPython(base, {
  onStatus = () => {}, phases = {}, useSnapshot = true, pyodideUrl, stackSwitching = false,
} = {}) {
  const indexURL = resolvePyodideUrl(base, pyodideUrl).href;
  const configLoading = fetchConfig(base);
  const wheelLoading = configLoading.then((config) => fetchBytes("the wgtune wheel", config.wheelUrl));
  wheelLoading.catch(() => {}); // awaited below, where a failure surfaces
  let began = performance.now();
  const check = pyodideUrl === undefined ? CHECK_BASE_URL : CHECK_PYODIDE_URL;
  const { loadPyodide, version } = await importPyodide(indexURL, check);
  const config = await configLoading;
  const key = snapshotKey(base, config.wheelUrl, version, stackSwitching);
  onStatus("Loading Python (Pyodide)…");
  let pyodide = null;
  if (useSnapshot) {
    let snapshot = await readSnapshot(key);
    phases.python = "stored snapshot";
    if (!snapshot) {
      snapshot = await snapshotInWorker(base, indexURL, config.wheelUrl, stackSwitching);
      phases.python = "worker";
      if (snapshot) saveSnapshot(key, snapshot).catch((error) => console.warn(`wgtune: no snapshot kept: ${error}`));
    }
    if (snapshot) pyodide = await restore(loadPyodide, indexURL, snapshot, key, stackSwitching);
  }
  const restored = pyodide !== null;
  if (!restored) {
    phases.python = "main thread";
    pyodide = await withStackSwitching(stackSwitching, () => loadPyodide({ indexURL, _makeSnapshot: useSnapshot }));
  }
  phases.pyodide = performance.now() - began;
  await nextTask(); // the restore is one long task: the wheel's unpacking is not added to it

  onStatus("Installing wgtune…");
  began = performance.now();
  installWheel(pyodide, await wheelLoading, config.wheelUrl, { restored });
  performance.measure("wgtune: wheel installed", { start: began });
  phases.wheel = performance.now() - began;
  if (useSnapshot && !restored) {
    // Before the session holds any JS object (a snapshot keeps only what globalThis reaches).
    began = performance.now();
    pyodide.runPython(SNAPSHOT_IMPORTS);
    saveSnapshot(key, pyodide.makeMemorySnapshot()).catch((error) => console.warn(`wgtune: no snapshot kept: ${error}`));
    phases.snapshot = performance.now() - began;
  }
  return { pyodide, config };
}
