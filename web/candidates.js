// The Candidates panel (#chart): which key it shows and what it says about that key. chart.js
// draws; this decides the key (the person's choice, else the running tune) and the data.

import { renderChart } from "/chart.js";
import { $ } from "/dom.js";
import { ui } from "/state.js";
import { phaseText } from "/progress.js";

export function select(id, byPerson) {
  if (byPerson) ui.pinned = true;
  if (ui.selected === id) return;
  ui.selected = id;
  markSelected();
  scheduleChart();
}

/** With nothing tuned on this page yet: the first key that has stored results to show. */
export function selectDefault() {
  if (ui.selected) return;
  const withResults = [...ui.states.entries()].find(([, state]) => state.results?.length);
  if (withResults) select(withResults[0], false);
}

export function markSelected() {
  for (const [id, row] of ui.rows) row.tr.classList.toggle("selected", id === ui.selected);
}

// Drawn at most once a frame, however many events came: the page stays responsive mid-tune.
// The timer covers a page in the background, where animation frames do not come.
let chartScheduled = false;
export function scheduleChart() {
  if (chartScheduled) return;
  chartScheduled = true;
  const draw = () => {
    if (!chartScheduled) return;
    chartScheduled = false;
    drawChart();
  };
  requestAnimationFrame(draw);
  setTimeout(draw, 250);
}

function drawChart() {
  const id = ui.selected;
  if (!id) return;
  renderChart($("chart"), chartModel(id));
}

/** What the chart says for a key it has no results of, by the key's state. */
const EMPTY = {
  Miss: "Miss: not tuned yet. Tune it to see its candidates.",
  Unchecked: "Unchecked: a stored winner waits to be checked against this page's candidates. " +
    "Tune checks it (no new tune while it still fits) and shows its stored results.",
  Pending: "Pending: waiting for the first candidate's result…",
};

/**
 * The chart's data: a tune of this page while it runs (or when it failed), else the key's
 * stored results (all candidates, also after a reload), else what this page's tune saw.
 */
function chartModel(id) {
  const tune = ui.tunes.get(id);
  const state = ui.states.get(id);
  const live = tune && (tune.phase !== "done" || !state?.results?.length);
  if (live) {
    return {
      title: id, subtitle: phaseText(tune), winner: tune.winner, results: tune.results.filter(Boolean),
      empty: "Waiting for the first candidate's result…",
    };
  }
  if (state?.results?.length) {
    return {
      title: id, subtitle: `${state.state}: winner ${state.winner} (stored results)`, winner: state.winner,
      results: state.results,
    };
  }
  const empty = state?.failure ? `The last tune failed: ${state.failure}` : (EMPTY[state?.state] ?? "Not tuned yet.");
  return { title: id, subtitle: "", winner: null, results: [], empty };
}
