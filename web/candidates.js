// The Candidates panel (#chart): what the chart says about the selected key (`ui.selected`).
// chart.js draws; this builds the chart's model from the shared state (this page's tune of the
// key while it runs, else the key's stored results) and redraws at most once a frame.

import { renderChart } from "/chart.js";
import { $ } from "/dom.js";
import { phaseText } from "/format.js";
import { ui } from "/state.js";

/** With nothing selected yet: the first key that has stored results to show, or null. */
export function defaultKey() {
  const withResults = [...ui.states.entries()].find(([, state]) => state.results?.length);
  return withResults ? withResults[0] : null;
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
  // This page's tune found the set's default wrong: said over its results, live or stored.
  const warning = tune?.phase === "done" ? tune.warning : null;
  if (live) {
    return {
      title: id, subtitle: phaseText(tune), warning, winner: tune.winner, results: tune.results.filter(Boolean),
      empty: "Waiting for the first candidate's result…",
    };
  }
  if (state?.results?.length) {
    return {
      title: id, subtitle: `${state.state}: winner ${state.winner} (stored results)`, warning, winner: state.winner,
      results: state.results,
    };
  }
  const empty = state?.failure ? `The last tune failed: ${state.failure.message ?? state.failure}` : (EMPTY[state?.state] ?? "Not tuned yet.");
  return { title: id, subtitle: "", winner: null, results: [], empty };
}
