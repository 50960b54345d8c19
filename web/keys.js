// The Sets and keys panel (#keys): one row per key, grouped by set, with its state, winner,
// failure and last run, and its Tune / Run buttons. It only draws: what a click on a row does
// is actions.js's (one listener on the table), and which key is selected is the shared state's,
// so this panel needs no other panel.

import { $, button } from "/dom.js";
import { failureMessage, labelText } from "/format.js";
import { ui, idOf } from "/state.js";

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
      // Rows are kept across renders: a re-read must not lose what a row shows of its last run.
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
  about.title = `The candidates: ${set.candidates.join(", ")}. The fallback serves calls until a key is tuned.`;
  th.append(name, about);
  if (set.dims?.length) {
    const dims = document.createElement("span");
    dims.className = "set-dims muted";
    dims.textContent = `; keys: ${labelText(set.dims)}`;
    dims.title = `A key's label gives its call's ${set.dims.join(", ")}, in that order`;
    th.append(dims);
  }
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
  cell("actions").append(
    button("Tune", "tune", `Tune ${set} ${key} now (a miss starts a tune)`),
    button("Run", "run", `Run ${set} ${key}: its winner, or the fallback while it is not tuned`),
  );
  return { tr, cells, set, key };
}

const STATE_HELP = {
  Miss: "No winner yet: Tune starts a tune; a run meanwhile uses the fallback.",
  Pending: "Being tuned: a run meanwhile uses the fallback.",
  Hit: "Tuned: runs use the winner.",
  Failed: "Every candidate failed for this key (see Failure): it is not tuned again in this page load.",
};

/** Show a key's state ({set, key, state, winner?, failure?, results?}) in its row, and keep it. */
export function showState(state) {
  const id = idOf(state.set, state.key);
  ui.states.set(id, state);
  const row = ui.rows.get(id);
  if (!row) return;
  row.cells.state.textContent = state.state;
  row.cells.state.dataset.state = state.state;
  row.cells.state.title = STATE_HELP[state.state] ?? "";
  row.cells.winner.textContent = state.winner ?? "";
  const failure = failureMessage(state.failure);
  row.cells.failure.textContent = failure;
  row.cells.failure.title = failure;
  row.tr.classList.toggle("has-failure", Boolean(state.failure));
}

/** Patch a row from an event without asking Python (a re-read of every key follows). */
export function patchState(set, key, changes) {
  const known = ui.states.get(idOf(set, key)) ?? { set, key };
  showState({ ...known, ...changes });
}

/** Say in the key's row which kernel its last run ran (an `execute` answer). */
export function showRan(set, key, answer) {
  const row = ui.rows.get(idOf(set, key));
  if (!row) return;
  row.cells.ran.textContent = answer.ran_fallback ? `${answer.ran} (fallback)` : answer.ran;
  row.cells.ran.dataset.ran = answer.ran;
  row.cells.ran.dataset.fallback = String(answer.ran_fallback);
}

/** Highlight the row of the key the chart shows (`ui.selected`). */
export function markSelected() {
  for (const [id, row] of ui.rows) row.tr.classList.toggle("selected", id === ui.selected);
}
