// The Progress panel (#progress) and the tune events that drive the page: rows, progress, chart,
// records and stored winners follow the running tune as its events arrive.

import { formatConfidence, formatSeconds } from "/chart.js";
import { $ } from "/dom.js";
import { ui, idOf } from "/state.js";
import { patchState, refreshSoon } from "/keys.js";
import { scheduleChart, select } from "/candidates.js";
import { addRecord, labelRecord } from "/records.js";
import { refreshCacheSoon } from "/cache.js";

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
    if (tune) {
      Object.assign(tune, {
        phase: "done", winner: event.winner, stored: event.stored,
        confidence: event.confidence, shortCircuit: event.short_circuit,
      });
    }
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
export function onEvent(event) {
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

export function phaseText(tune) {
  const done = tune.results.filter(Boolean).length;
  switch (tune.phase) {
    case "pending":
      return "Pending: the tune starts…";
    case "running":
      return tune.total ? `Pending: candidate ${Math.min(done + 1, tune.total)} of ${tune.total}` : "Pending";
    case "done":
      return `Winner: ${tune.winner} (${done} of ${tune.total ?? done} candidates tried; ` +
        `${tune.stored ? "stored" : "not stored"})` +
        (tune.shortCircuit ? `; it met the short-circuit limit` : "") +
        (tune.confidence ? `; confidence vs ${tune.confidence.runner_up}: ${formatConfidence(tune.confidence)}` : "");
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
    const samples = result.samples ? ` (${result.samples.length} samples)` : "";
    value.textContent = Number.isFinite(result.median) ? `median ${formatSeconds(result.median)}${samples}` : "not timed";
  }
  item.classList.toggle("winner", result.name === winner);
  item.append(name, ": ", value);
  return item;
}
