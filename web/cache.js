// The Stored winners panel (#cache): the winners IndexedDB holds for every device, and the
// refresh / clear / export / import actions on them.

import { describeConfidence, formatConfidence } from "/chart.js";
import { $, keyText, message, plural } from "/dom.js";
import { ui } from "/state.js";
import { refreshKeys } from "/keys.js";

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
      [formatConfidence(entry.confidence), "confidence"], [String(entry.results?.length ?? ""), "num"],
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

/** After an import or a clear: the keys' states changed under the page. */
export async function afterStoreChange() {
  refreshKeys();
  await refreshCache();
}

export async function clearCache() {
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

export async function exportCache() {
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

export async function importCache(event) {
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
