// The Tune records panel (#records): one row per tune this page ran (or had run before it was
// ready), as the tuner recorded it. Each record item carries its key's label (the size the keys
// panel shows, "128x128x128"), so a row is complete the moment it is added. A tune that found the
// set's default (candidate 0) wrong has its warning on a line of its own under its row.

import { $ } from "/dom.js";
import { describeConfidence, formatConfidence, formatSeconds, keyText } from "/format.js";
import { ui } from "/state.js";

/** Add a row for one record item ({record, at, effect, label}, as `records()` lists them). */
export function addRecord(item) {
  const record = item.record;
  const body = $("records").tBodies[0];
  body.querySelector("tr.empty")?.remove();
  const candidates = ui.sets.get(record.table)?.candidates;
  // `winner` is a candidate index (the trials are in the order they ran).
  const winner = candidates?.[record.winner] ?? record.trials[record.winner]?.name ?? `#${record.winner}`;
  const fields = keyText(record.entry?.key ?? record.key);
  const tr = document.createElement("tr");
  tr.dataset.table = record.table;
  tr.dataset.label = item.label;
  const cells = [
    new Date(item.at * 1000).toLocaleTimeString(),
    record.table,
    item.label,
    winner,
    formatConfidence(record.confidence),
    String(record.trials.length),
    formatSeconds(record.wall),
    item.effect,
    storedText(record.stored),
  ];
  const classes = ["time", "set", "key", "winner", "confidence", "trials num", "wall num", "effect", "stored"];
  cells.forEach((text, i) => {
    const td = document.createElement("td");
    td.className = classes[i];
    td.textContent = text;
    tr.append(td);
  });
  tr.querySelector(".key").title = fields; // the key as the tuner sees it: its bucketed fields
  tr.querySelector(".confidence").title = describeConfidence(record.confidence);
  if (record.short_circuit) tr.querySelector(".winner").title = `${record.short_circuit} met the short-circuit limit`;
  tr.querySelector(".stored").title = storedTitle(record.stored);
  body.append(tr);
  if (record.warning) body.append(warningRow(record.warning, cells.length));
}

/** The line under a record's row that says what its checks found wrong (no data-table: not a record row). */
function warningRow(warning, columns) {
  const tr = document.createElement("tr");
  tr.className = "record-warning";
  const td = document.createElement("td");
  td.colSpan = columns;
  const text = document.createElement("p");
  text.className = "warning";
  text.textContent = `⚠ ${warning}`;
  td.append(text);
  tr.append(td);
  return tr;
}

function storedText(stored) {
  if (stored === "pending") return "pending…";
  if (stored === "cleared") return "cleared";
  return stored ? "yes" : "no";
}

function storedTitle(stored) {
  if (stored === "pending") return "IndexedDB is still writing it";
  if (stored === "cleared") return "stored, then cleared: the key is tuned again when next asked";
  return "";
}

/**
 * The stored winner of one key ({table, key}, from the `cleared` event: backends/page_stored.py,
 * mark_cleared) is gone, cleared here or in another tab: its rows that said "yes" say "cleared", as
 * their records in `records()` do. The rows stay, as this page's history. A row still "pending…" is
 * a winner saved since: its own write's end says whether it is stored.
 */
export function markGone(event) {
  for (const tr of $("records").tBodies[0].rows) {
    if (tr.dataset.table === event.table && tr.dataset.label === event.key) sayCleared(tr.querySelector(".stored"));
  }
}

function sayCleared(cell) {
  if (cell?.textContent !== storedText(true)) return;
  cell.textContent = storedText("cleared");
  cell.title = storedTitle("cleared");
}

/**
 * A background IndexedDB write ended ({table, key, ok, reason}, from backends/page.py): the
 * newest row of that key still pending says whether the winner is stored.
 */
export function markStored(event) {
  const rows = [...$("records").tBodies[0].rows].filter(
    (tr) => tr.dataset.table === event.table && tr.dataset.label === event.key,
  );
  const cell = rows.reverse().find((tr) => tr.querySelector(".stored")?.textContent === "pending…")
    ?.querySelector(".stored");
  if (!cell) return;
  cell.textContent = event.ok ? "yes" : "failed";
  cell.title = event.ok ? "" : `not stored: ${event.reason}`;
}
