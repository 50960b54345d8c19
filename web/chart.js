// The candidates chart, and only the chart: one SVG row per candidate, drawn by hand (the page
// loads nothing from outside). A bar is the candidate's median time, a whisker its min..max
// spread; a candidate eliminated early (after a sample or two) has a pale dashed bar and a "~"
// median, since so few samples only say it lost; a failed candidate is a marked row with its
// error type and reason, and one the output checks found wrong (a Mismatch: it ran, fast perhaps,
// and computed a wrong answer) a row of its own, marked "≠", so it is not read as a crash. A
// tune's warning (the set's default was wrong) is said above the rows. What to draw comes
// in as a model (candidates.js builds it), so this file knows nothing of keys, tunes or state;
// the wording of times and failures is format.js's, shared with the panels.

import { earlyText, failureText, formatNumber, formatSeconds, isMismatch, plural, unitFor } from "/format.js";

const SVG = "http://www.w3.org/2000/svg";

// Geometry in SVG user units; the SVG scales to its container's width through its viewBox.
const WIDTH = 760;
const LABEL_WIDTH = 200; // candidate names, right-aligned against the plot
const VALUE_WIDTH = 110; // the median's text, right of the plot
const ROW_HEIGHT = 28;
const TOP = 8;
const AXIS_HEIGHT = 46;
const PLOT_LEFT = LABEL_WIDTH + 8;
const PLOT_RIGHT = WIDTH - VALUE_WIDTH - 8;
const CHAR_WIDTH = 6.6; // about one character of the 12 px system font: where to cut long reasons

/** Ticks 0, step, 2 step… covering `max`, with step 1, 2 or 5 times a power of ten. */
export function niceTicks(max, wanted = 5) {
  if (!(max > 0)) return [0, 1];
  const rough = max / wanted;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const ticks = [];
  for (let value = 0; value < max + step * 0.999; value += step) ticks.push(value);
  return ticks;
}

function el(name, attributes = {}, text = null) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text != null) node.textContent = text;
  return node;
}

function clip(text, width) {
  const room = Math.max(8, Math.floor(width / CHAR_WIDTH));
  return text.length > room ? `${text.slice(0, room - 1)}…` : text;
}

/** What a row of `result` is: "mismatch" for a wrong output, "failed" for another error, "winner" or "ok". */
export function statusOf(result, winner) {
  if (isMismatch(result)) return "mismatch";
  if (result.error) return "failed";
  return result.name === winner ? "winner" : "ok";
}

function isTimed(result) {
  return !result.error && Number.isFinite(result.median);
}

/**
 * Draw `model` into `container` (replacing what it held):
 *   { title, subtitle, warning, winner, results: [result…], empty }
 * where each result is a trial result (a timing or a failure, as the `trial` events and the
 * stored entries carry them). With no results, the `empty` text is shown instead.
 */
export function renderChart(container, model) {
  const nodes = [];
  if (model?.title) {
    const title = document.createElement("h3");
    title.className = "chart-title";
    title.textContent = model.title;
    nodes.push(title);
  }
  if (model?.subtitle) {
    const subtitle = document.createElement("p");
    subtitle.className = "chart-subtitle muted";
    subtitle.textContent = model.subtitle;
    nodes.push(subtitle);
  }
  if (model?.warning) {
    const warning = document.createElement("p");
    warning.className = "warning chart-warning";
    warning.textContent = `⚠ ${model.warning}`;
    nodes.push(warning);
  }
  // Candidates the plan never ran (a Skip) are listed under the chart, not drawn: with 50 candidates
  // and a plan that stops after its first batch, they would be most of the rows.
  const all = model?.results ?? [];
  const results = all.filter((result) => result.error !== "Skip");
  if (results.length === 0) {
    const empty = document.createElement("p");
    empty.className = "muted";
    empty.textContent = model?.empty ?? "Select a key to see its candidates' timings.";
    nodes.push(empty);
  } else {
    nodes.push(drawSvg(results, model.winner, model.title ?? "candidates"));
  }
  const skipped = all.filter((result) => result.error === "Skip");
  if (skipped.length) nodes.push(skippedList(skipped));
  container.replaceChildren(...nodes);
}

/** The candidates not run, folded: how many, and each one's name and the plan's reason. */
function skippedList(skipped) {
  const details = document.createElement("details");
  details.className = "chart-skipped muted";
  details.dataset.count = String(skipped.length);
  const summary = document.createElement("summary");
  const reasons = new Set(skipped.map((result) => result.reason));
  const why = reasons.size === 1 ? `: ${[...reasons][0].replace(/^not run: /, "")}` : "";
  summary.textContent = `${skipped.length} more candidate${skipped.length === 1 ? "" : "s"} not run${why}`;
  const list = document.createElement("ul");
  for (const result of skipped) {
    const item = document.createElement("li");
    item.dataset.candidate = result.name;
    item.textContent = reasons.size === 1 ? result.name : `${result.name}: ${result.reason}`;
    list.append(item);
  }
  details.append(summary, list);
  return details;
}

function drawSvg(results, winner, label) {
  const timed = results.filter(isTimed);
  const top = Math.max(0, ...timed.map((r) => (Number.isFinite(r.max) ? r.max : r.median)));
  const unit = unitFor(top || 1e-6);
  const ticks = niceTicks(top * unit.scale);
  const axisMax = ticks[ticks.length - 1] / unit.scale;
  const x = (seconds) => PLOT_LEFT + (PLOT_RIGHT - PLOT_LEFT) * (axisMax > 0 ? seconds / axisMax : 0);

  const height = TOP + results.length * ROW_HEIGHT + AXIS_HEIGHT;
  const svg = el("svg", {
    viewBox: `0 0 ${WIDTH} ${height}`, width: "100%", role: "img", class: "chart-svg",
    "aria-label": `Median time and spread of each candidate of ${label}`,
  });
  svg.append(drawGrid(ticks, unit, x, height));
  results.forEach((result, row) => svg.append(drawRow(result, winner, x, TOP + row * ROW_HEIGHT)));
  const anyEarly = timed.some((result) => result.eliminated_early);
  svg.append(drawAxis(ticks, unit, x, TOP + results.length * ROW_HEIGHT, anyEarly));
  return svg;
}

function drawGrid(ticks, unit, x, height) {
  const grid = el("g", { class: "grid-lines" });
  for (const tick of ticks) {
    const at = x(tick / unit.scale);
    grid.append(el("line", { x1: at, x2: at, y1: TOP, y2: height - AXIS_HEIGHT }));
  }
  return grid;
}

function drawAxis(ticks, unit, x, y, anyEarly) {
  const axis = el("g", { class: "axis" });
  axis.append(el("line", { x1: PLOT_LEFT, x2: PLOT_RIGHT, y1: y, y2: y }));
  for (const tick of ticks) {
    const at = x(tick / unit.scale);
    axis.append(el("line", { x1: at, x2: at, y1: y, y2: y + 5 }));
    axis.append(el("text", { x: at, y: y + 18, "text-anchor": "middle" }, `${formatNumber(tick, 3)}`));
  }
  axis.append(el("text", { x: (PLOT_LEFT + PLOT_RIGHT) / 2, y: y + 38, "text-anchor": "middle", class: "axis-title" },
    `time per run (${unit.name}): bar = median, whisker = min … max` +
    (anyEarly ? "; dashed bar, ~ = eliminated early: median unreliable" : "")));
  return axis;
}

function drawRow(result, winner, x, y) {
  const status = statusOf(result, winner);
  const row = el("g", {
    class: `candidate ${status}`, "data-candidate": result.name, "data-status": status,
    transform: `translate(0 ${y})`,
  });
  if (result.error) row.setAttribute("data-error", result.error);
  const middle = ROW_HEIGHT / 2;
  row.append(el("rect", { class: "row-back", x: 0, y: 1, width: WIDTH, height: ROW_HEIGHT - 2, rx: 3 }));
  const name = status === "winner" ? `★ ${result.name}` : result.name;
  row.append(el("text", { class: "name", x: LABEL_WIDTH, y: middle + 4, "text-anchor": "end" },
    clip(name, LABEL_WIDTH - 8)));
  if (status === "failed" || status === "mismatch") {
    drawFailure(row, result, middle, status === "mismatch");
  } else if (isTimed(result)) {
    drawTiming(row, result, x, middle);
  } else {
    row.append(el("text", { class: "note", x: PLOT_LEFT, y: middle + 4 }, "dry run: not timed"));
  }
  return row;
}

function drawTiming(row, result, x, middle) {
  const start = x(0);
  const early = earlyText(result);
  if (early) row.classList.add("early");
  row.append(el("rect", {
    class: early ? "bar early" : "bar", x: start, y: middle - 7, width: Math.max(1, x(result.median) - start),
    height: 14, rx: 2,
  }));
  if (Number.isFinite(result.min) && Number.isFinite(result.max)) {
    const [low, high] = [x(result.min), x(result.max)];
    const whisker = el("g", { class: "whisker" });
    whisker.append(el("line", { x1: low, x2: high, y1: middle, y2: middle }));
    whisker.append(el("line", { x1: low, x2: low, y1: middle - 5, y2: middle + 5 }));
    whisker.append(el("line", { x1: high, x2: high, y1: middle - 5, y2: middle + 5 }));
    row.append(whisker);
  }
  const median = formatSeconds(result.median);
  row.append(el("text", { class: "value", x: PLOT_RIGHT + 8, y: middle + 4 }, early ? `~${median}` : median));
  const samples = result.samples?.length ? `, ${plural(result.samples.length, "sample")}` : "";
  row.append(el("title", {}, `${result.name}: median ${median}, ` +
    `min ${formatSeconds(result.min)}, max ${formatSeconds(result.max)}${samples} (${result.timing ?? "?"} timing)` +
    (early ? `; ${early}` : "")));
}

function drawFailure(row, result, middle, wrong) {
  const text = failureText(result);
  const [cx, r] = [PLOT_LEFT + 6, 4.5];
  if (wrong) {
    row.append(el("text", { class: "unequal", x: cx, y: middle + 5, "text-anchor": "middle" }, "≠"));
  } else {
    const cross = el("g", { class: "cross" });
    cross.append(el("line", { x1: cx - r, x2: cx + r, y1: middle - r, y2: middle + r }));
    cross.append(el("line", { x1: cx - r, x2: cx + r, y1: middle + r, y2: middle - r }));
    row.append(cross);
  }
  row.append(el("text", { class: "reason", x: PLOT_LEFT + 18, y: middle + 4 },
    clip(text, WIDTH - PLOT_LEFT - 24)));
  // The whole reason, however long: a tooltip, and in the row's text for tests and readers.
  row.append(el("title", {}, `${result.name} ${wrong ? "gave a wrong output" : "failed"}: ${text}`));
}
