// The tuner page: loads wgtune (wgtune.js), then shows the device, every set's keys with their
// states, a tune's live progress, the candidates chart, this page's tune records and the stored
// winners. Tests drive it through `window.wgtune` and the element ids of index.html.

import { loadWgtune, WgtuneUnavailable } from "/wgtune.js";
import { formatSeconds, renderChart } from "/chart.js";

const $ = (id) => document.getElementById(id);

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
// What the page knows. Everything else is drawn from it.

const ui = {
  api: null,
  /** set name -> { candidates: [name], fallback } from the catalogue. */
  sets: new Map(),
  /** "set/key" -> the key's state from the catalogue or an answer ({set, key, state, winner?, …}). */
  states: new Map(),
  /** "set/key" -> { tr, cells } of its row in #keys. */
  rows: new Map(),
  /** "set/key" -> the latest tune of that key on this page: { phase, total, results[], winner, reason }. */
  tunes: new Map(),
  /** The key the chart shows; `pinned` when a person chose it (else it follows the running tune). */
  selected: null,
  pinned: false,
  /** The key #progress describes. */
  progressKey: null,
  /** A record whose key label is not known yet: its `finished` event comes right after it. */
  unlabelledRecord: null,
};

const idOf = (set, key) => `${set}/${key}`;
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

// ---------------------------------------------------------------------------------------------
// Loading.

async function boot({ device = null }) {
  try {
    const api = await loadWgtune({ device, onStatus: showStatus, onEvent: onEvent });
    ui.api = api;
    Object.assign(window.wgtune, api, tracked(api));
    showReady(api);
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
    else refreshSoon();
    return answer;
  };
  return { check: after(api.check), importCache: after(api.importCache), clearCache: after(api.clearCache) };
}

function showStatus(text) {
  $("status").textContent = text;
}

function showReady(api) {
  showStatus(`Ready (page ready in ${formatSeconds(api.readyMs / 1000)}, wgtune ${api.version})`);
  $("status").classList.add("ok");
  const catalogue = api.catalogue();
  renderAdapter(api.adapterInfo, catalogue);
  renderKeys(catalogue);
  for (const envelope of api.records()) addRecord(envelope);
  for (const id of ["tune-all", "cache-refresh", "cache-export", "cache-import", "cache-clear"]) {
    $(id).disabled = false;
  }
  document.querySelector("label[for=cache-import]").classList.remove("disabled");
  selectDefault();
  refreshCache();
}

function showLoadFailure(error) {
  const box = $("unavailable");
  const expected = error instanceof WgtuneUnavailable;
  box.querySelector(".unavailable-title").textContent =
    expected ? "wgtune cannot run in this browser" : "wgtune failed to load";
  box.querySelector(".unavailable-message").textContent = error?.message ?? String(error);
  box.querySelector(".unavailable-advice").textContent = expected
    ? error.advice
    : "Reload the page to try again; if it keeps failing, the details below say where it stopped.";
  const details = box.querySelector(".unavailable-details");
  const trace = error?.traceback ?? (expected ? "" : error?.stack ?? "");
  details.hidden = !trace;
  details.querySelector("pre").textContent = trace;
  box.hidden = false;
  document.body.classList.add("failed");
  showStatus(expected ? "WebGPU is not available" : "Loading failed");
  $("status").classList.add("bad");
}

// ---------------------------------------------------------------------------------------------
// The device panel.

function renderAdapter(info, catalogue) {
  const yesNo = (value) => (value ? "yes" : "no");
  const facts = [
    ["Vendor", info.vendor || "(not reported)"],
    ["Architecture", info.architecture || "(not reported)"],
    ["Description", info.description || info.device || "(not reported)"],
    ["Fallback adapter", yesNo(info.isFallbackAdapter)],
    ["timestamp-query", yesNo(info.timestampQuery)],
    ["Timing", catalogue.timing],
    ["Clock grain", formatSeconds(catalogue.clock_grain)],
    ["Features", info.features.length ? info.features.join(", ") : "(none)"],
  ];
  const nodes = [];
  for (const [term, value] of facts) {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    dd.dataset.fact = term.toLowerCase().replace(/[^a-z]+/g, "-");
    nodes.push(dt, dd);
  }
  $("adapter").replaceChildren(...nodes);
}

// ---------------------------------------------------------------------------------------------
// The keys table: one row per key, grouped by set.

function renderKeys(catalogue) {
  ui.sets.clear();
  const body = $("keys").tBodies[0];
  const rows = [];
  const known = new Set();
  for (const set of catalogue.sets) {
    ui.sets.set(set.name, { candidates: set.candidates, fallback: set.fallback });
    rows.push(setHeading(set));
    for (const state of set.keys) {
      const id = idOf(state.set, state.key);
      known.add(id);
      if (!ui.rows.has(id)) ui.rows.set(id, keyRow(state.set, state.key));
      rows.push(ui.rows.get(id).tr);
      showState(state);
    }
  }
  for (const id of [...ui.rows.keys()]) if (!known.has(id)) ui.rows.delete(id);
  body.replaceChildren(...rows);
  markSelected();
}

function setHeading(set) {
  const tr = document.createElement("tr");
  tr.className = "set-heading";
  const th = document.createElement("th");
  th.colSpan = 6;
  th.scope = "rowgroup";
  const name = document.createElement("span");
  name.className = "set-name";
  name.textContent = set.name;
  const about = document.createElement("span");
  about.className = "muted";
  about.textContent = ` ${set.candidates.length} candidates; fallback ${set.fallback}`;
  about.title = set.candidates.join(", ");
  th.append(name, about);
  tr.append(th);
  return tr;
}

function keyRow(set, key) {
  const tr = document.createElement("tr");
  tr.dataset.key = idOf(set, key);
  const cell = (name) => {
    const td = document.createElement("td");
    td.className = name;
    tr.append(td);
    return td;
  };
  const cells = {
    key: cell("key"), state: cell("state"), winner: cell("winner"), failure: cell("failure"), ran: cell("ran"),
  };
  cells.key.textContent = key;
  const actions = cell("actions");
  const tune = button("Tune", "tune", `Tune ${set} ${key} now (a miss starts a tune)`);
  const run = button("Run", "run", `Run ${set} ${key}: its winner, or the fallback while it is not tuned`);
  tune.addEventListener("click", () => {
    const answer = tuneOne(set, key);
    if (answer?.state === "Hit") message("keys-message", `${set}/${key} is tuned: ${answer.winner}`);
  });
  run.addEventListener("click", () => runOne(set, key));
  actions.append(tune, run);
  // A click anywhere on the row (its buttons too) shows that key in the chart.
  tr.addEventListener("click", () => {
    select(idOf(set, key), true);
    refreshSoon(); // states can change without an event (a check from the console): show the latest
  });
  return { tr, cells };
}

function button(text, className, title) {
  const node = document.createElement("button");
  node.type = "button";
  node.className = className;
  node.textContent = text;
  node.title = title;
  return node;
}

const STATE_HELP = {
  Miss: "No winner yet: Tune starts a tune.",
  Pending: "Being tuned: a run meanwhile uses the fallback.",
  Hit: "Tuned: runs use the winner.",
  Unchecked: "A stored winner, not yet checked against this page's candidates: Tune checks it.",
};

/** Show a key's state ({set, key, state, winner?, failure?, results?}) in its row. */
function showState(state) {
  const id = idOf(state.set, state.key);
  ui.states.set(id, state);
  const row = ui.rows.get(id);
  if (!row) return;
  row.cells.state.textContent = state.state;
  row.cells.state.dataset.state = state.state;
  row.cells.state.title = STATE_HELP[state.state] ?? "";
  row.cells.winner.textContent = state.winner ?? "";
  row.cells.failure.textContent = state.failure ?? "";
  row.cells.failure.title = state.failure ?? "";
  row.tr.classList.toggle("has-failure", Boolean(state.failure));
}

/** Patch a row from an event without asking Python (the catalogue refresh follows). */
function patchState(set, key, changes) {
  const id = idOf(set, key);
  const known = ui.states.get(id) ?? { set, key };
  showState({ ...known, ...changes });
}

/** Read every key's state again, soon: once for a burst of events, outside the event call. */
let refreshTimer = 0;
function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = 0;
    refreshKeys();
  }, 0);
}

function refreshKeys() {
  if (!ui.api) return;
  try {
    renderKeys(ui.api.catalogue());
    scheduleChart();
  } catch (error) {
    message("keys-message", `Could not read the keys: ${error.message}`, true);
  }
}

function message(id, text, bad = false) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle("bad", bad);
}

// ---------------------------------------------------------------------------------------------
// Actions on keys.

/** Ask for the key's winner: a miss starts its tune and answers Pending at once. */
function tuneOne(set, key) {
  try {
    const answer = ui.api.check(set, key);
    showState(answer);
    message("keys-message", "");
    return answer;
  } catch (error) {
    message("keys-message", `Tune ${set}/${key}: ${error.message}`, true);
    return null;
  }
}

/** Run the key once and say which kernel ran (the fallback while it is not tuned). */
async function runOne(set, key) {
  const row = ui.rows.get(idOf(set, key));
  try {
    const answer = await ui.api.execute(set, key);
    if (row) {
      row.cells.ran.textContent = answer.ran_fallback ? `${answer.ran} (fallback)` : answer.ran;
      row.cells.ran.dataset.ran = answer.ran;
      row.cells.ran.dataset.fallback = String(answer.ran_fallback);
    }
    message("keys-message", `Ran ${set}/${key}: ${answer.ran}${answer.ran_fallback ? " (the fallback)" : ""}`);
  } catch (error) {
    message("keys-message", `Run ${set}/${key}: ${error.message}`, true);
  }
  // A run on a miss starts a tune too: the answer's state is from before it, so ask again.
  refreshSoon();
}

/**
 * Tune every key that is not a Hit, one at a time: tunes running side by side on one GPU
 * would skew each other's timings.
 */
async function tuneAll() {
  const allButton = $("tune-all");
  allButton.disabled = true;
  ui.pinned = false; // let the chart follow the tunes
  const todo = [...ui.states.values()].filter((state) => state.state !== "Hit");
  const count = { tuned: 0, failed: 0, checked: 0 };
  try {
    for (const [done, { set, key }] of todo.entries()) {
      message("tune-all-status", `Key ${done + 1} of ${todo.length}: ${set}/${key}`);
      const answer = tuneOne(set, key);
      if (answer?.state === "Hit") count.checked += 1; // a stored winner that still fits: no tune
      if (answer?.state !== "Pending") continue;
      try {
        const settled = await ui.api.settle(set, key);
        showState(settled);
        count[settled.state === "Hit" ? "tuned" : "failed"] += 1;
      } catch (error) {
        count.failed += 1;
        message("keys-message", `Tune ${set}/${key}: ${error.message}`, true);
      }
    }
    message("tune-all-status", tuneAllSummary(count), count.failed > 0);
  } finally {
    allButton.disabled = false;
    refreshSoon();
  }
}

function tuneAllSummary({ tuned, failed, checked }) {
  const parts = [
    tuned && `tuned ${plural(tuned, "key")}`,
    failed && `${plural(failed, "key")} failed`,
    checked && `${plural(checked, "stored winner")} checked`,
  ].filter(Boolean);
  return parts.length ? `Done: ${parts.join(", ")}` : "Every key is tuned";
}

// ---------------------------------------------------------------------------------------------
// Tune events: rows, progress and chart follow the running tune.

/** The page's account of one tune: `results[i]` is candidate i's trial result, once it ran. */
function newTune(phase, total = null) {
  return { phase, total, results: [], winner: null, stored: false, reason: null };
}

const handlers = {
  pending(event) {
    const id = idOf(event.set, event.key);
    ui.tunes.set(id, newTune("pending"));
    patchState(event.set, event.key, { state: "Pending", failure: undefined });
    follow(id);
  },
  started(event) {
    const id = idOf(event.set, event.key);
    const tune = ui.tunes.get(id);
    // A run on a miss starts a tune without a `pending` event: start the account here then.
    if (!tune || tune.phase !== "pending") {
      ui.tunes.set(id, newTune("running", event.candidates));
    } else {
      Object.assign(tune, { phase: "running", total: event.candidates });
    }
    patchState(event.set, event.key, { state: "Pending", failure: undefined });
    follow(id);
  },
  trial(event) {
    const id = idOf(event.set, event.key);
    const tune = ui.tunes.get(id) ?? newTune("running");
    tune.results[event.index] = { ...event.result, wall: event.wall };
    ui.tunes.set(id, tune);
    showProgress(id);
    if (ui.selected === id) scheduleChart();
  },
  finished(event) {
    const id = idOf(event.set, event.key);
    const tune = ui.tunes.get(id);
    if (tune) Object.assign(tune, { phase: "done", winner: event.winner, stored: event.stored });
    labelRecord(event);
    patchState(event.set, event.key, { state: "Hit", winner: event.winner, failure: undefined });
    showProgress(id);
    scheduleChart();
    refreshSoon();
    refreshCacheSoon();
  },
  failed(event) {
    const id = idOf(event.set, event.key);
    const tune = ui.tunes.get(id) ?? newTune("failed");
    Object.assign(tune, { phase: "failed", reason: event.reason });
    ui.tunes.set(id, tune);
    patchState(event.set, event.key, { state: "Miss", failure: event.reason });
    showProgress(id);
    scheduleChart();
    refreshSoon();
  },
  record(event) {
    ui.unlabelledRecord = { tr: addRecord(event.record), table: event.record.record.table };
  },
};

/**
 * Events come from inside Python's tune: a throw here would land in the tune, so none escapes.
 * Each handler only patches a few elements; anything heavier is scheduled.
 */
function onEvent(event) {
  try {
    handlers[event.type]?.(event);
  } catch (error) {
    console.warn(`wgtune page: the ${event?.type} event was not shown:`, error);
  }
}

/** A tune began: progress shows it, and so does the chart unless a person chose a key. */
function follow(id) {
  ui.progressKey = id;
  showProgress(id);
  if (!ui.pinned) select(id, false);
}

// ---------------------------------------------------------------------------------------------
// #progress: the running (or last) tune, trial by trial.

function showProgress(id) {
  if (id !== ui.progressKey) return;
  const tune = ui.tunes.get(id);
  if (!tune) return;
  const box = $("progress");
  const title = document.createElement("p");
  title.className = "progress-title";
  title.textContent = id;
  const phase = document.createElement("p");
  phase.className = `progress-phase ${tune.phase}`;
  phase.textContent = phaseText(tune);
  const list = document.createElement("ol");
  list.className = "progress-trials";
  for (const result of tune.results.filter(Boolean)) list.append(trialItem(result, tune.winner));
  box.replaceChildren(title, phase, list);
}

function phaseText(tune) {
  const done = tune.results.filter(Boolean).length;
  switch (tune.phase) {
    case "pending":
      return "Pending: the tune starts…";
    case "running":
      return tune.total ? `Pending: candidate ${Math.min(done + 1, tune.total)} of ${tune.total}` : "Pending";
    case "done":
      return `Winner: ${tune.winner} (${done} of ${tune.total ?? done} candidates tried; ` +
        `${tune.stored ? "stored" : "not stored"})`;
    case "failed":
      return `Failed: ${tune.reason}`;
    default:
      return tune.phase;
  }
}

function trialItem(result, winner) {
  const item = document.createElement("li");
  item.dataset.candidate = result.name;
  const name = document.createElement("span");
  name.className = "trial-name";
  name.textContent = result.name;
  const value = document.createElement("span");
  if (result.error) {
    value.className = "trial-failure";
    value.textContent = result.reason ? `${result.error}: ${result.reason}` : result.error;
  } else {
    value.className = "trial-time";
    value.textContent = Number.isFinite(result.median) ? `median ${formatSeconds(result.median)}` : "not timed";
  }
  item.classList.toggle("winner", result.name === winner);
  item.append(name, ": ", value);
  return item;
}

// ---------------------------------------------------------------------------------------------
// #chart: the selected key's candidates.

function select(id, byPerson) {
  if (byPerson) ui.pinned = true;
  if (ui.selected === id) return;
  ui.selected = id;
  markSelected();
  scheduleChart();
}

/** With nothing tuned on this page yet: the first key that has stored results to show. */
function selectDefault() {
  if (ui.selected) return;
  const withResults = [...ui.states.entries()].find(([, state]) => state.results?.length);
  if (withResults) select(withResults[0], false);
}

function markSelected() {
  for (const [id, row] of ui.rows) row.tr.classList.toggle("selected", id === ui.selected);
}

// Drawn at most once a frame, however many events came: the page stays responsive mid-tune.
// The timer covers a page in the background, where animation frames do not come.
let chartScheduled = false;
function scheduleChart() {
  if (chartScheduled) return;
  chartScheduled = true;
  const draw = () => {
    if (!chartScheduled) return;
    chartScheduled = false;
    drawChart();
  };
  requestAnimationFrame(draw);
  setTimeout(draw, 250);
}

function drawChart() {
  const id = ui.selected;
  if (!id) return;
  renderChart($("chart"), chartModel(id));
}

/** What the chart says for a key it has no results of, by the key's state. */
const EMPTY = {
  Miss: "Miss: not tuned yet. Tune it to see its candidates.",
  Unchecked: "Unchecked: a stored winner waits to be checked against this page's candidates. " +
    "Tune checks it (no new tune while it still fits) and shows its stored results.",
  Pending: "Pending: waiting for the first candidate's result…",
};

/**
 * The chart's data: a tune of this page while it runs (or when it failed), else the key's
 * stored results (all candidates, also after a reload), else what this page's tune saw.
 */
function chartModel(id) {
  const tune = ui.tunes.get(id);
  const state = ui.states.get(id);
  const live = tune && (tune.phase !== "done" || !state?.results?.length);
  if (live) {
    return {
      title: id, subtitle: phaseText(tune), winner: tune.winner, results: tune.results.filter(Boolean),
      empty: "Waiting for the first candidate's result…",
    };
  }
  if (state?.results?.length) {
    return {
      title: id, subtitle: `${state.state}: winner ${state.winner} (stored results)`, winner: state.winner,
      results: state.results,
    };
  }
  const empty = state?.failure ? `The last tune failed: ${state.failure}` : (EMPTY[state?.state] ?? "Not tuned yet.");
  return { title: id, subtitle: "", winner: null, results: [], empty };
}

// ---------------------------------------------------------------------------------------------
// #records: this page's tune records.

function addRecord(envelope) {
  const record = envelope.record;
  const body = $("records").tBodies[0];
  body.querySelector("tr.empty")?.remove();
  const candidates = ui.sets.get(record.table)?.candidates;
  // `winner` is a candidate index (the trials are in the order they ran).
  const winner = candidates?.[record.winner] ?? record.trials[record.winner]?.name ?? `#${record.winner}`;
  const tr = document.createElement("tr");
  tr.dataset.table = record.table;
  const cells = [
    new Date(envelope.at * 1000).toLocaleTimeString(),
    record.table,
    keyText(record.entry?.key ?? record.key),
    winner,
    String(record.trials.length),
    formatSeconds(record.wall),
    envelope.effect,
    record.stored ? "yes" : "no",
  ];
  const classes = ["time", "set", "key", "winner", "trials num", "wall num", "effect", "stored"];
  cells.forEach((text, i) => {
    const td = document.createElement("td");
    td.className = classes[i];
    td.textContent = text;
    tr.append(td);
  });
  tr.querySelector(".key").title = keyText(record.entry?.key ?? record.key);
  body.append(tr);
  return tr;
}

/** The record came just before its tune's `finished` event, which names the key as the page does. */
function labelRecord(event) {
  const pending = ui.unlabelledRecord;
  ui.unlabelledRecord = null;
  if (pending && pending.table === event.set) pending.tr.querySelector(".key").textContent = event.key;
}

/** A key object ({m: 128, …}) as "m=128, n=128"; text stays as it is. */
function keyText(key) {
  if (key == null) return "";
  if (typeof key !== "object") return String(key);
  return Object.entries(key).map(([field, value]) => `${field}=${value}`).join(", ");
}

// ---------------------------------------------------------------------------------------------
// #cache: the stored winners of every device, export, import, clear.

async function refreshCache() {
  try {
    renderCache(await ui.api.cache());
  } catch (error) {
    message("cache-message", `Could not read the stored winners: ${error.message}`, true);
  }
}

/** The winner just tuned is in the store soon: list it, once for a burst of tunes. */
let cacheTimer = 0;
function refreshCacheSoon() {
  clearTimeout(cacheTimer);
  cacheTimer = setTimeout(() => refreshCache(), 300);
}

function renderCache(document_) {
  const box = $("cache");
  const namespaces = document_.namespaces ?? [];
  if (namespaces.length === 0) {
    const empty = document.createElement("p");
    empty.className = "muted";
    empty.textContent = "Nothing stored: tune a key, or import an export.";
    box.replaceChildren(empty);
    return;
  }
  box.replaceChildren(...namespaces.map(namespaceBlock));
}

function namespaceBlock(namespace) {
  const block = document.createElement("div");
  block.className = "namespace";
  const device = namespace.device ?? {};
  const heading = document.createElement("h3");
  const names = [device.vendor, device.device, device.backend].filter(Boolean);
  heading.textContent = names.join(" · ") || "(unknown device)";
  const about = document.createElement("p");
  about.className = "muted";
  about.textContent = [
    device.driver && `driver ${device.driver}`,
    `tuner ${namespace.tuner ?? "?"}`,
    `wgtune ${namespace.wgtune ?? "?"}`,
    plural(namespace.entries.length, "winner"),
  ].filter(Boolean).join("; ");
  const table = document.createElement("table");
  table.className = "grid entries";
  table.innerHTML = '<thead><tr><th>Set</th><th>Key</th><th>Winner</th><th class="num">Results</th></tr></thead>';
  const body = document.createElement("tbody");
  for (const entry of namespace.entries) {
    const tr = document.createElement("tr");
    for (const [text, className] of [
      [entry.table, "set"], [keyText(entry.key), "key"], [entry.winner_name, "winner"],
      [String(entry.results?.length ?? ""), "num"],
    ]) {
      const td = document.createElement("td");
      td.className = className;
      td.textContent = text;
      tr.append(td);
    }
    body.append(tr);
  }
  table.append(body);
  block.append(heading, about, table);
  return block;
}

/** After an import or a clear: the keys' states changed under the page. */
async function afterStoreChange() {
  refreshKeys();
  await refreshCache();
}

async function clearCache() {
  try {
    const count = await ui.api.clearCache();
    // This page's finished tunes described winners that are gone now: the chart follows the store.
    for (const [id, tune] of ui.tunes) if (tune.phase === "done") ui.tunes.delete(id);
    message("cache-message", `Cleared the stored winners (${plural(count, "device namespace")})`);
  } catch (error) {
    message("cache-message", `Clear failed: ${error.message}`, true);
  }
  await afterStoreChange();
}

async function exportCache() {
  try {
    const text = await ui.api.exportCache();
    const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
    const link = document.createElement("a");
    link.href = url;
    link.download = "wgtune-cache.json";
    document.body.append(link);
    link.click();
    link.remove();
    // Revoked later, not at once: the download reads the URL after click() returns.
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    message("cache-message", "Exported the stored winners as wgtune-cache.json");
  } catch (error) {
    message("cache-message", `Export failed: ${error.message}`, true);
  }
}

async function importCache(event) {
  const input = event.target;
  const file = input.files?.[0];
  if (!file) return;
  try {
    const count = await ui.api.importCache(await file.text());
    // Worded as the brief's contract has it ("imported N winners"): tests look for it.
    message("cache-message", `imported ${plural(count, "winner")} from ${file.name}`);
  } catch (error) {
    message("cache-message", `Import of ${file.name} failed: ${error.message}`, true);
  }
  input.value = ""; // choosing the same file again fires another change
  await afterStoreChange();
}

// ---------------------------------------------------------------------------------------------
// Wiring.

$("tune-all").addEventListener("click", () => tuneAll());
$("cache-refresh").addEventListener("click", async () => {
  message("cache-message", "");
  await refreshCache();
  refreshKeys();
});
$("cache-clear").addEventListener("click", () => clearCache());
$("cache-export").addEventListener("click", () => exportCache());
$("cache-import").addEventListener("change", (event) => importCache(event));

if (new URLSearchParams(location.search).has("defer")) {
  showStatus("Waiting: this page loads wgtune when window.wgtune.start() is called.");
} else {
  start({});
}
