// The tuner page: loads wgtune (wgtune.js), then shows the device, every set's keys with their
// states, a tune's live progress, the candidates chart, this page's tune records and the stored
// winners. Tests drive it through `window.wgtune` and the element ids of index.html.
//
// This file is the entry: the `window.wgtune` contract, loading, the status line and the
// unavailable box, the first drawing of the panels, and the wiring of the page's buttons. The
// rest, by layer (a module imports only from the layers above it, so there is no cycle):
//   state.js, dom.js, format.js        shared state, DOM helpers, pure wording
//   chart.js                           the SVG chart
//   device.js, keys.js, progress.js,   the panels: each draws its own elements from the state
//   candidates.js, records.js, cache.js
//   sync.js                            moves that span panels (select a key, re-read the keys)
//   events.js, actions.js              tune events, and what a person does

import { loadWgtune, WgtuneUnavailable } from "./wgtune.js";
import { $, message } from "./dom.js";
import { formatSeconds } from "./format.js";
import { ui } from "./state.js";
import { renderAdapter } from "./device.js";
import { renderKeys } from "./keys.js";
import { addRecord } from "./records.js";
import { refreshCache } from "./cache.js";
import { afterStoreChange, refreshKeys, refreshKeysSoon, selectDefaultKey } from "./sync.js";
import { onEvent } from "./events.js";
import { clearStore, exportStore, importStore, onKeysClick, resetAfterClear, tuneAll } from "./actions.js";
import { BUNDLE_SETTING, loadBundleFromAddress } from "./bundle.js";
import { COLLECTOR_SETTING, describeSharing, shareFromAddress } from "./collector.js";

// ---------------------------------------------------------------------------------------------
// window.wgtune: { ready, start(options) }, then the API's own properties once it is ready.

let resolveReady;
let rejectReady;
const ready = new Promise((resolve, reject) => {
  resolveReady = resolve;
  rejectReady = reject;
});
// The page shows a failure itself; without a handler a rejection would also be logged as an
// unhandled error (tests require a clean console). Callers awaiting `ready` still see it.
ready.catch(() => {});

let started = false;

/** Load wgtune once; `options.device` is a GPUDevice handed over by an embedding page. */
function start(options = {}) {
  if (!started) {
    started = true;
    boot(options ?? {}).then(resolveReady, rejectReady);
  }
  return ready;
}

window.wgtune = { ready, start };

// ---------------------------------------------------------------------------------------------
// Loading.

async function boot({ device = null }) {
  try {
    // Tuning settings from the URL (/?policy=fixed, /?budget=0.5&max_samples=20); the rest are the page's own.
    // ?stack-switching: Pyodide with JSPI (the core's tests run asyncio.run in the page's Python).
    const own = ["defer", "stack-switching", BUNDLE_SETTING, COLLECTOR_SETTING];
    const query = new URLSearchParams(location.search);
    const settings = Object.fromEntries([...query].filter(([name]) => !own.includes(name)));
    const stackSwitching = query.has("stack-switching");
    // The page is the demo: it asks for the demo's sets and keys (a library user's page does not).
    const api = await loadWgtune({ device, onStatus: showStatus, onEvent, settings, demo: true, stackSwitching });
    ui.api = api;
    Object.assign(window.wgtune, api, tracked(api));
    const bundled = await loadBundleFromAddress(api); // before the keys are drawn: a known GPU's show as Hits
    window.wgtune.sharing = await shareFromAddress(api, showSharing); // ?collector=URL: the fleet's winners, then ours
    showReady(api, bundled);
    return api;
  } catch (error) {
    showLoadFailure(error);
    throw error;
  }
}

/**
 * The calls that change keys' states without a tune event (a check that validates a stored
 * winner, an import, a clear), made through window.wgtune from a console or a test: the same
 * calls with the same answers, after which the page reads the states again.
 */
function tracked(api) {
  const after = (call) => (...args) => {
    const answer = call(...args);
    if (answer instanceof Promise) answer.then(afterStoreChange, () => {});
    else refreshKeysSoon();
    return answer;
  };
  // Sharing asked from a console or an embedding script is shown on the page's line too.
  const share = (url, options = {}) => api.shareWinners(url, {
    ...options, onChange: (state) => { showSharing(state); options.onChange?.(state); },
  });
  // A clear of this device's winners (no other device named) resets what the page said of its tunes.
  const clear = (options = {}) => {
    const answer = api.clearCache(options);
    if (!options?.device) answer.then(resetAfterClear, () => {});
    return answer;
  };
  return { check: after(api.check), importCache: after(api.importCache), clearCache: after(clear),
    loadBundle: after(api.loadBundle), shareWinners: after(share) };
}

/** The line under the status that says sharing is on, to where, and what went. */
function showSharing(state) {
  $("sharing").textContent = describeSharing(state);
  $("sharing").hidden = false;
}

function showStatus(text) {
  $("status").textContent = text;
}

function showReady(api, bundled = "") {
  const note = bundled ? `; ${bundled}` : "";
  showStatus(`Ready (page ready in ${formatSeconds(api.readyMs / 1000)}, wgtune ${api.version})${note}`);
  $("status").classList.add("ok");
  const catalogue = api.catalogue();
  renderAdapter(api.adapterInfo, catalogue);
  renderKeys(catalogue);
  for (const item of api.records()) addRecord(item);
  for (const id of ["tune-all", "cache-refresh", "cache-export", "cache-import", "cache-clear"]) {
    $(id).disabled = false;
  }
  document.querySelector("label[for=cache-import]").classList.remove("disabled");
  selectDefaultKey();
  refreshCache();
}

function showLoadFailure(error) {
  const box = $("unavailable");
  const expected = error instanceof WgtuneUnavailable;
  box.querySelector(".unavailable-title").textContent =
    expected ? "wgtune cannot run in this browser" : "wgtune failed to load";
  box.querySelector(".unavailable-message").textContent = error?.message ?? String(error);
  const advice = box.querySelector(".unavailable-advice");
  if (error?.name === "ConfigError") {
    // A setting in the address: reloading would repeat it. Say what to change, and offer the page without it.
    advice.textContent = "A tuning setting in this page's address is wrong (the message names it): fix or remove it. ";
    const plain = document.createElement("a");
    plain.href = location.pathname;
    plain.textContent = "Open the page with the default settings.";
    advice.append(plain);
  } else {
    advice.textContent = expected
      ? error.advice
      : "Reload the page to try again; if it keeps failing, the details below say where it stopped.";
  }
  const details = box.querySelector(".unavailable-details");
  const trace = expected ? "" : error?.stack ?? "";
  details.hidden = !trace;
  details.querySelector("pre").textContent = trace;
  box.hidden = false;
  document.body.classList.add("failed");
  showStatus(expected ? "WebGPU is not available" : "Loading failed");
  $("status").classList.add("bad");
}

// ---------------------------------------------------------------------------------------------
// Wiring.

$("keys").addEventListener("click", onKeysClick);
$("tune-all").addEventListener("click", () => tuneAll());
$("cache-refresh").addEventListener("click", async () => {
  message("cache-message", "");
  await refreshCache();
  refreshKeys();
});
$("cache-clear").addEventListener("click", () => clearStore());
$("cache-export").addEventListener("click", () => exportStore());
$("cache-import").addEventListener("change", (event) => importStore(event));

if (new URLSearchParams(location.search).has("defer")) {
  showStatus("Waiting: this page loads wgtune when window.wgtune.start() is called.");
} else {
  start({});
}
