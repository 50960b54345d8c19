// What a person does on the page: Tune / Run a key, Tune all, click a row, and clear / export /
// import the stored winners. Each action calls the API, says how it went in its panel's message
// line, and leaves the redrawing to the panels (through sync.js for what spans several). app.js
// wires these to the page's buttons.

import { $, message } from "/dom.js";
import { deviceText, plural } from "/format.js";
import { ui, idOf } from "/state.js";
import { showRan, showState } from "/keys.js";
import { resetProgress } from "/progress.js";
import { afterStoreChange, refreshKeysSoon, selectKey } from "/sync.js";

// ---------------------------------------------------------------------------------------------
// Keys.

/**
 * A click in the keys table (one listener for every row, rows come and go with re-reads): its
 * Tune or Run button acts, and a click anywhere on a row shows that key in the chart.
 */
export function onKeysClick(event) {
  const row = ui.rows.get(event.target.closest("tr[data-key]")?.dataset.key);
  if (!row) return;
  const { set, key } = row;
  const clicked = event.target.closest("button");
  if (clicked?.classList.contains("tune")) {
    const answer = tuneOne(set, key);
    if (answer?.state === "Hit") message("keys-message", `${set}/${key} is tuned: ${answer.winner}`);
  } else if (clicked?.classList.contains("run")) {
    runOne(set, key);
  }
  selectKey(idOf(set, key), true);
  refreshKeysSoon(); // states can change without an event (a check from the console): show the latest
}

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
  try {
    const answer = await ui.api.execute(set, key);
    showRan(set, key, answer);
    message("keys-message", `Ran ${set}/${key}: ${answer.ran}${answer.ran_fallback ? " (the fallback)" : ""}`);
  } catch (error) {
    message("keys-message", `Run ${set}/${key}: ${error.message}`, true);
  }
  // A run on a miss starts a tune too: the answer's state is from before it, so ask again.
  refreshKeysSoon();
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
  const count = { tuned: 0, failed: 0 };
  try {
    for (const [done, { set, key }] of todo.entries()) {
      message("tune-all-status", `Key ${done + 1} of ${todo.length}: ${set}/${key}`);
      // Anything but Pending needs no wait: a Hit was tuned meanwhile (by a click, say), and an
      // error is already in the keys' message line.
      if (tuneOne(set, key)?.state !== "Pending") continue;
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
    refreshKeysSoon();
  }
}

function tuneAllSummary({ tuned, failed }) {
  const parts = [tuned && `tuned ${plural(tuned, "key")}`, failed && `${plural(failed, "key")} failed`].filter(Boolean);
  return parts.length ? `Done: ${parts.join(", ")}` : "Every key is tuned";
}

// ---------------------------------------------------------------------------------------------
// Stored winners.

/**
 * Clear one device's stored winners: the device the Stored winners panel shows (this one's unless
 * a person chose another under Device). Asked first, saying whose winners go and what stays.
 */
export async function clearStore() {
  let stored;
  try {
    stored = (await ui.api.storedPage({ limit: 1 })).namespaces; // the counts: no entry is read
  } catch (error) {
    message("cache-message", `Clear failed: could not read the stored winners: ${error.message}`, true);
    return;
  }
  const shown = stored.find((namespace) => namespace.namespace === $("cache-device")?.value);
  const target = shown ?? stored.find((namespace) => namespace.current);
  if (!target) {
    message("cache-message", "Nothing stored to clear.");
    return;
  }
  // This device's winners may sit under several namespace texts (older versions'): one clear takes them all.
  const mine = target.current;
  const going = mine ? stored.filter((namespace) => namespace.current) : [target];
  const winners = going.reduce((sum, namespace) => sum + namespace.entries, 0);
  const others = new Set(stored.filter((namespace) => !going.includes(namespace)).map((n) => deviceText(n.fields)));
  const whose = mine ? `this device (${deviceText(target.fields)})` : deviceText(target.fields);
  const stays = mine
    ? (others.size ? ` The winners of ${plural(others.size, "other device")} stay (choose one under Device to clear it).` : "")
    : " This device's winners stay.";
  const question = `Forget the ${plural(winners, "stored winner")} of ${whose}? ` +
    `${mine ? "Its keys are tuned again when next asked." : ""}${stays} Export first to keep a copy.`;
  if (!window.confirm(question)) {
    message("cache-message", "Nothing cleared.");
    return;
  }
  try {
    const count = await ui.api.clearCache(mine ? {} : { device: target.namespace });
    if (mine) resetAfterClear();
    message("cache-message", `Cleared ${plural(count, "stored winner")} of ${whose}`);
  } catch (error) {
    message("cache-message", `Clear failed: ${error.message}`, true);
  }
  await afterStoreChange();
}

/**
 * This device's winners are gone: what the page said of its tunes no longer holds (the chart
 * follows the store, Tune all's "Done" and the progress panel start over). The records stay: they
 * are this page's history, not the store's; only their Stored column says the winners went.
 */
export function resetAfterClear() {
  for (const [id, tune] of ui.tunes) if (tune.phase === "done") ui.tunes.delete(id);
  message("tune-all-status", "");
  if (!ui.tunes.has(ui.progressKey)) resetProgress("The stored winners were cleared: no tune has run since.");
}

export async function exportStore() {
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

/** Import the file chosen in #cache-import (its `change` event). */
export async function importStore(event) {
  const input = event.target;
  const file = input.files?.[0];
  if (!file) return;
  try {
    const count = await ui.api.importCache(await file.text());
    // "imported N winners": tests and people look for these words.
    message("cache-message", `imported ${plural(count, "winner")} from ${file.name}`);
    // What the progress panel said of a clear no longer holds: the store has winners again.
    if (!ui.progressKey) resetProgress(`Imported ${plural(count, "winner")} from ${file.name}: no tune has run since.`);
  } catch (error) {
    message("cache-message", `Import of ${file.name} failed: ${error.message}`, true);
  }
  input.value = ""; // choosing the same file again fires another change
  await afterStoreChange();
}
