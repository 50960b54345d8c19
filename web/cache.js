// The Stored winners panel (#cache): the winners IndexedDB holds for every device, read through
// the API. It only reads and draws; its buttons (clear, export, import) are actions.js's, and a
// tune that stored a winner asks for `refreshCacheSoon` through events.js.

import { $, message } from "/dom.js";
import { describeConfidence, formatConfidence, keyText, plural } from "/format.js";
import { ui } from "/state.js";

export async function refreshCache() {
  try {
    renderCache(await ui.api.cache());
  } catch (error) {
    message("cache-message", `Could not read the stored winners: ${error.message}`, true);
  }
}

/** The winner just tuned is in the store soon: list it, once for a burst of tunes. */
let cacheTimer = 0;
export function refreshCacheSoon() {
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
  table.innerHTML = "<thead><tr><th>Set</th><th>Key</th><th>Winner</th><th>Confidence</th>" +
    '<th class="num">Results</th></tr></thead>';
  const body = document.createElement("tbody");
  for (const entry of namespace.entries) {
    const tr = document.createElement("tr");
    for (const [text, className] of [
      [entry.table, "set"], [keyText(entry.key), "key"], [entry.winner_name, "winner"],
      [formatConfidence(entry.confidence), "confidence"], [resultCount(entry), "num"],
    ]) {
      const td = document.createElement("td");
      td.className = className;
      td.textContent = text;
      if (className === "confidence") td.title = describeConfidence(entry.confidence);
      tr.append(td);
    }
    body.append(tr);
  }
  table.append(body);
  block.append(heading, about, table);
  return block;
}

/** How many candidates an entry has results for: a search's never-run ones are stored as null. */
function resultCount(entry) {
  if (!entry.results) return "";
  const run = entry.results.filter((result) => result !== null).length;
  return run === entry.results.length ? String(run) : `${run} of ${entry.results.length}`;
}
