// The Stored winners panel (#cache): the winners IndexedDB holds, a page at a time. It shows one
// device's entries (this one's first), all sets or one, 50 to a page, and reads only that page
// (api.storedPage: backends/stored_view.py), so a cache of 100k entries costs a tune nothing when
// the panel follows it. It only reads and draws; its buttons (clear, export, import) are
// actions.js's, and a tune that stored a winner asks for `refreshCacheSoon` through events.js.

import { $, message } from "/dom.js";
import { describeConfidence, formatConfidence, keyText } from "/format.js";
import { ui } from "/state.js";

const PAGE = 50;
// What the panel shows: a device's namespace (null: this device's), a set (null: every one), where.
const view = { namespace: null, set: null, offset: 0 };

export async function refreshCache() {
  try {
    renderCache(await ui.api.storedPage({ ...view, limit: PAGE }));
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

/** "google · swiftshader · webgpu" and the rest of a namespace, for a person. */
function deviceName(namespace) {
  const device = namespace.fields.device ?? {};
  const names = [device.vendor, device.device, device.backend].filter(Boolean);
  return names.join(" · ") || "(unknown device)";
}

function select(id, label, options, chosen, onChange) {
  const wrap = document.createElement("label");
  wrap.className = "filter";
  wrap.textContent = `${label} `;
  const node = document.createElement("select");
  node.id = id;
  for (const [value, text] of options) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = text;
    option.selected = value === chosen;
    node.append(option);
  }
  node.addEventListener("change", () => onChange(node.value));
  wrap.append(node);
  return wrap;
}

function renderCache(page) {
  const box = $("cache");
  if (page.namespaces.length === 0) {
    const empty = document.createElement("p");
    empty.className = "muted";
    empty.textContent = "Nothing stored: tune a key, or import an export.";
    box.replaceChildren(empty);
    return;
  }
  Object.assign(view, { namespace: page.namespace, set: page.set, offset: page.offset });
  const controls = document.createElement("div");
  controls.className = "cache-controls";
  const devices = page.namespaces.map((namespace) => [
    namespace.namespace,
    `${deviceName(namespace)}${namespace.current ? " (this device)" : ""}: ` +
      `${namespace.entries.toLocaleString()} winner${namespace.entries === 1 ? "" : "s"}`,
  ]);
  const count = (n) => n.toLocaleString();
  const sets = [["", `every set (${count(page.sets.reduce((sum, set) => sum + set.entries, 0))})`],
    ...page.sets.map((set) => [set.name, `${set.name} (${count(set.entries)})`])];
  controls.append(
    select("cache-device", "Device", devices, page.namespace, (value) => go({ namespace: value, set: null, offset: 0 })),
    select("cache-set", "Set", sets, page.set ?? "", (value) => go({ set: value || null, offset: 0 })),
    pager(page),
  );
  const chosen = page.namespaces.find((namespace) => namespace.namespace === page.namespace);
  const about = document.createElement("p");
  about.className = "muted";
  const device = chosen?.fields.device ?? {};
  about.textContent = [
    device.driver && `driver ${device.driver}`,
    `tuner ${chosen?.fields.tuner ?? "?"}`,
    `wgtune ${chosen?.fields.wgtune ?? "?"}`,
    page.damaged ? `${page.damaged} damaged entr${page.damaged === 1 ? "y" : "ies"} on this page skipped` : null,
  ].filter(Boolean).join("; ");
  box.replaceChildren(controls, about, entriesTable(page.entries));
}

function pager(page) {
  const wrap = document.createElement("span");
  wrap.className = "pager";
  const shown = page.entries.length + page.damaged;
  const text = document.createElement("span");
  text.id = "cache-range";
  text.textContent = page.total === 0 ? "none" :
    `${(page.offset + 1).toLocaleString()}–${(page.offset + shown).toLocaleString()} of ${page.total.toLocaleString()}`;
  const previous = document.createElement("button");
  previous.type = "button";
  previous.id = "cache-previous";
  previous.textContent = "‹ Previous";
  previous.disabled = page.offset === 0;
  previous.addEventListener("click", () => go({ offset: Math.max(0, page.offset - PAGE) }));
  const next = document.createElement("button");
  next.type = "button";
  next.id = "cache-next";
  next.textContent = "Next ›";
  next.disabled = page.offset + shown >= page.total;
  next.addEventListener("click", () => go({ offset: page.offset + PAGE }));
  wrap.append(previous, text, next);
  return wrap;
}

function go(change) {
  Object.assign(view, change);
  refreshCache();
}

function entriesTable(entries) {
  const table = document.createElement("table");
  table.className = "grid entries";
  table.innerHTML = "<thead><tr><th>Set</th><th>Key</th><th>Winner</th><th>Confidence</th>" +
    '<th class="num">Results</th></tr></thead>';
  const body = document.createElement("tbody");
  for (const entry of entries) {
    const tr = document.createElement("tr");
    for (const [text, className] of [
      [entry.table, "set"], [entry.label, "key"], [entry.winner_name, "winner"],
      [formatConfidence(entry.confidence), "confidence"], [resultCount(entry), "num"],
    ]) {
      const td = document.createElement("td");
      td.className = className;
      td.textContent = text;
      if (className === "confidence") td.title = describeConfidence(entry.confidence);
      if (className === "key") td.title = keyText(entry.key); // the stored key's fields
      tr.append(td);
    }
    body.append(tr);
  }
  table.append(body);
  return table;
}

/** How many candidates an entry has results for: a search's never-run ones are stored as null. */
function resultCount(entry) {
  if (!entry.results) return "";
  const run = entry.results.filter((result) => result !== null).length;
  return run === entry.results.length ? String(run) : `${run} of ${entry.results.length}`;
}
