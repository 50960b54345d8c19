// The Progress panel (#progress): the running (or last) tune of this page, trial by trial. It
// draws the tune `ui.progressKey` names from `ui.tunes`; events.js keeps both up to date and
// calls `showProgress` as the tune's events arrive.

import { $ } from "/dom.js";
import { earlyText, failureText, formatSeconds, isMismatch, judgeText, phaseText, plural } from "/format.js";
import { ui } from "/state.js";

/** Redraw the panel if it describes the key `id` (a tune of another key leaves it as it is). */
export function showProgress(id) {
  if (id !== ui.progressKey) return;
  const tune = ui.tunes.get(id);
  if (!tune) return;
  const title = document.createElement("p");
  title.className = "progress-title";
  title.textContent = id;
  const phase = document.createElement("p");
  phase.className = `progress-phase ${tune.phase}`;
  phase.textContent = phaseText(tune);
  const notes = [];
  // Once the tune is done: who judged the outputs, and the set's default found wrong, if it was.
  const judge = tune.phase === "done" ? judgeText(tune.judge) : "";
  if (judge) notes.push(paragraph("progress-judge muted", judge));
  if (tune.warning) {
    // Its first clause ("candidate 0 (x), the set's default, is wrong here"): the panel is narrow,
    // and the chart beside it says the rest; the whole of it is the tooltip.
    const warning = paragraph("warning progress-warning", `⚠ ${tune.warning.split(": ")[0]}`);
    warning.title = tune.warning;
    notes.push(warning);
  }
  const list = document.createElement("ol");
  list.className = "progress-trials";
  list.dataset.key = id;
  for (const result of tune.results.filter(Boolean)) list.append(trialItem(result, tune.winner));
  const scrolled = scrollOf($("progress").querySelector(".progress-trials"), id);
  $("progress").replaceChildren(title, phase, ...notes, list);
  // The list is drawn anew on each event: it keeps following the newest trial at its end, unless
  // a person scrolled up to read an earlier one: then it stays where they left it.
  list.scrollTop = scrolled ?? list.scrollHeight;
}

/** Where a person left the list of key `id` scrolled, or null where it follows the newest trial. */
function scrollOf(list, id) {
  if (!list || list.dataset.key !== id) return null;
  const atEnd = list.scrollTop + list.clientHeight >= list.scrollHeight - 1;
  return atEnd ? null : list.scrollTop;
}

/** Forget the tune the panel describes and say `text` instead (after a clear: its winner is gone). */
export function resetProgress(text) {
  ui.progressKey = null;
  $("progress").replaceChildren(paragraph("muted", text));
}

function paragraph(className, text) {
  const p = document.createElement("p");
  p.className = className;
  p.textContent = text;
  return p;
}

function trialItem(result, winner) {
  const item = document.createElement("li");
  item.dataset.candidate = result.name;
  const name = document.createElement("span");
  name.className = "trial-name";
  name.textContent = result.name;
  const value = document.createElement("span");
  if (result.error) {
    value.className = isMismatch(result) ? "trial-failure mismatch" : "trial-failure";
    value.textContent = failureText(result);
  } else {
    value.className = "trial-time";
    const samples = result.samples ? ` (${plural(result.samples.length, "sample")})` : "";
    const early = earlyText(result);
    // A median from one or two samples of a hopeless candidate: marked as the chart marks it.
    const median = `${early ? "~" : ""}${formatSeconds(result.median)}`;
    value.textContent = Number.isFinite(result.median) ? `median ${median}${samples}` : "not timed";
    if (early) value.title = early;
  }
  item.classList.toggle("winner", result.name === winner);
  item.append(name, ": ", value);
  return item;
}
