// The Device panel (#adapter): what the adapter reported and how this page can time kernels,
// so a person reading timings knows which GPU and clock they came from. Drawn once, when
// wgtune is ready (app.js calls it); nothing later changes it.

import { formatSeconds } from "/format.js";
import { $ } from "/dom.js";

export function renderAdapter(info, catalogue) {
  const yesNo = (value) => (value ? "yes" : "no");
  const facts = [
    ["Vendor", info.vendor || "(not reported)"],
    ["Architecture", info.architecture || "(not reported)"],
    ["Description", info.description || info.device || "(not reported)"],
    ["Fallback adapter", yesNo(info.isFallbackAdapter)],
    ["timestamp-query", yesNo(info.timestampQuery)],
    ["Timing", catalogue.timing],
    // Measured on this device before any tune (empty passes on the timing clock): what each
    // timed sample is made 50 times longer than.
    ["Clock grain (measured)", formatSeconds(catalogue.clock_grain)],
    ["Sampling policy", catalogue.policy],
    ["Features", info.features.length ? info.features.join(", ") : "(none)"],
  ];
  const nodes = [];
  for (const [term, value] of facts) {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    dd.dataset.fact = term.toLowerCase().replace(/[^a-z]+/g, "-").replace(/^-|-$/g, "");
    nodes.push(dt, dd);
  }
  if (catalogue.timing !== "gpu-timestamp") {
    // Without timestamp queries every sample is timed by the wall clock around a full sync: a
    // coarser clock, so samples must be longer and tunes take more time. Said, not left to guess.
    const warning = document.createElement("p");
    warning.className = "warning";
    warning.id = "timing-warning";
    warning.textContent = `No GPU timestamps on this device (${info.timestampQuery ? "turned off" : "no timestamp-query"}): ` +
      `kernels are timed by the wall clock, whose grain here is ${formatSeconds(catalogue.clock_grain)}, ` +
      "so each sample runs longer and tunes take more time. Open the device with the timestamp-query feature " +
      "for finer, faster tunes.";
    $("timing-warning")?.remove();
    $("adapter").after(warning);
  }
  $("adapter").replaceChildren(...nodes);
}
