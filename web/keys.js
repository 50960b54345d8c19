// The Sets and keys panel (#keys): one row per key, grouped by set, with its state, winner,
// failure and last run, and the Tune / Run / Tune all actions on keys.

import { $, button, message, plural } from "/dom.js";
import { ui, idOf } from "/state.js";
import { markSelected, scheduleChart, select } from "/candidates.js";

export function renderKeys(catalogue) {
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
export function patchState(set, key, changes) {
  const id = idOf(set, key);
  const known = ui.states.get(id) ?? { set, key };
  showState({ ...known, ...changes });
}

/** Read every key's state again, soon: once for a burst of events, outside the event call. */
let refreshTimer = 0;
export function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = 0;
    refreshKeys();
  }, 0);
}

export function refreshKeys() {
  if (!ui.api) return;
  try {
    renderKeys(ui.api.catalogue());
    scheduleChart();
  } catch (error) {
    message("keys-message", `Could not read the keys: ${error.message}`, true);
  }
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
export async function tuneAll() {
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
