// The Tune records panel (#records): one row per tune this page ran (or loaded at start), as the
// tuner recorded it.

import { describeConfidence, formatConfidence, formatSeconds } from "/chart.js";
import { $, keyText } from "/dom.js";
import { ui } from "/state.js";

export function addRecord(envelope) {
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
    formatConfidence(record.confidence),
    String(record.trials.length),
    formatSeconds(record.wall),
    envelope.effect,
    record.stored ? "yes" : "no",
  ];
  const classes = ["time", "set", "key", "winner", "confidence", "trials num", "wall num", "effect", "stored"];
  cells.forEach((text, i) => {
    const td = document.createElement("td");
    td.className = classes[i];
    td.textContent = text;
    tr.append(td);
  });
  tr.querySelector(".key").title = keyText(record.entry?.key ?? record.key);
  tr.querySelector(".confidence").title = describeConfidence(record.confidence);
  if (record.short_circuit) tr.querySelector(".winner").title = `${record.short_circuit} met the short-circuit limit`;
  body.append(tr);
  return tr;
}

/** The record came just before its tune's `finished` event, which names the key as the page does. */
export function labelRecord(event) {
  const pending = ui.unlabelledRecord;
  ui.unlabelledRecord = null;
  if (pending && pending.table === event.set) pending.tr.querySelector(".key").textContent = event.key;
}
