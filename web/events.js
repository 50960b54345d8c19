// The tune events (pending, started, trial, finished, failed, record, stored, cleared: what
// backends/page.py sends through `notify`) and the one place that reacts to them: each event
// updates the shared state (this page's account of the tune, in `ui.tunes`), then asks the panels
// it concerns to redraw. Keeping every reaction here means a new panel is wired in one file, and no panel has
// to know which others an event touches.

import { $ } from "/dom.js";
import { ui, idOf } from "/state.js";
import { patchState } from "/keys.js";
import { resetProgress, showProgress } from "/progress.js";
import { scheduleChart } from "/candidates.js";
import { addRecord, markGone, markStored } from "/records.js";
import { refreshCacheSoon } from "/cache.js";
import { refreshKeysSoon, selectKey } from "/sync.js";

/**
 * The page's account of one tune: `results[i]` is candidate i's trial result, once it ran;
 * `finished` adds `winner`, `stored`, `confidence`, `shortCircuit`, `judge` (who said which outputs
 * are right) and `warning` (the set's default was found wrong), `failed` the `reason`.
 */
function newTune(phase, total = null) {
  return { phase, total, results: [], winner: null, stored: false, reason: null, judge: "", warning: null };
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
        judge: event.judge ?? "", warning: event.warning ?? null,
      });
    }
    patchState(event.set, event.key, { state: "Hit", winner: event.winner, failure: undefined });
    showProgress(id);
    scheduleChart();
    refreshKeysSoon();
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
    refreshKeysSoon();
  },
  record(event) {
    addRecord(event.record);
  },
  stored(event) {
    markStored(event);
    const id = idOf(event.set, event.key);
    const tune = ui.tunes.get(id);
    if (tune?.stored === "pending") {
      tune.stored = event.ok;
      showProgress(id);
      if (ui.selected === id) scheduleChart(); // its subtitle says "storing…" until now
    }
    if (event.ok) refreshCacheSoon();
  },
  // This key's stored winner was cleared, here or in another tab (`elsewhere`): its records say so,
  // what this page said of its tune no longer holds (as after a clear of every winner here:
  // web/actions.js, resetAfterClear), and the panels follow.
  cleared(event) {
    markGone(event);
    const id = idOf(event.set, event.key);
    if (ui.tunes.get(id)?.phase === "done") ui.tunes.delete(id);
    if (ui.progressKey === id && !ui.tunes.has(id)) {
      const where = event.elsewhere ? " in another tab" : "";
      resetProgress(`The stored winner of ${event.set}/${event.key} was cleared${where}: no tune has run since.`);
    }
    scheduleChart();
    refreshKeysSoon();
    refreshCacheSoon();
  },
  // The GPU device was lost (wgtune.js reopens one it opened itself): said in the page's status line.
  "device-lost"(event) {
    deviceStatus(`GPU device lost (${event.reason}${event.message ? `: ${event.message}` : ""}); reopening…`, "bad");
  },
  "device-reopened"(event) {
    const again = event.retuning.length ? `; tuning again: ${event.retuning.join(", ")}` : "";
    deviceStatus(`GPU device lost and reopened${again}`, "ok");
    refreshKeysSoon();
  },
  "device-gone"(event) {
    deviceStatus(`GPU device lost: ${event.reason}`, "bad");
  },
};

function deviceStatus(text, tone) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("ok", tone === "ok");
  status.classList.toggle("bad", tone === "bad");
}

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
  if (!ui.pinned) selectKey(id, false);
}
