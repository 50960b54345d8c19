// Pure wording of what the page shows: times, confidences, plurals, key fields, a tune's phase,
// a failed candidate's reason. Nothing here touches the DOM or the page's state, so every panel
// and the chart word things alike without importing one another, and each helper can be read
// (or tried in a console) on its own.

const UNITS = [
  { name: "s", scale: 1, below: Infinity },
  { name: "ms", scale: 1e3, below: 1 },
  { name: "µs", scale: 1e6, below: 1e-3 },
  { name: "ns", scale: 1e9, below: 1e-6 },
];

/** The unit that shows `seconds` with a number of at least 1 (ns at the smallest). */
export function unitFor(seconds) {
  let chosen = UNITS[0];
  for (const unit of UNITS) if (seconds < unit.below) chosen = unit;
  return chosen;
}

/** `value` with `digits` significant digits, without toPrecision's exponent form (1.00e+3). */
export function formatNumber(value, digits) {
  const text = Number(value.toPrecision(digits));
  return Math.abs(value) >= 10 ** digits ? String(Math.round(value)) : String(text);
}

/** `seconds` as text in a readable unit: "12.3 µs", "1.50 ms", "4.20 s". */
export function formatSeconds(seconds, digits = 3) {
  if (seconds == null || !Number.isFinite(seconds)) return "–";
  if (seconds === 0) return "0 s";
  const unit = unitFor(Math.abs(seconds));
  return `${formatNumber(seconds * unit.scale, digits)} ${unit.name}`;
}

/**
 * An interval bound as people read it, as wgtune.confidence.shown_bound writes it: three decimals,
 * or "<0.001" / ">1000" (one round of samples gives bounds many orders of magnitude apart, which
 * say no more than "unbounded").
 */
export function formatBound(value) {
  const number = Number(value);
  if (number < 1e-3) return "<0.001";
  if (number > 1e3) return ">1000";
  return number.toFixed(3);
}

/**
 * An interval as people read it, as wgtune.confidence.shown_interval writes it: "[1.100, 1.310]",
 * or "[unbounded]" where both bounds are past what formatBound shows (too few rounds to bound it).
 */
export function formatInterval(low, high) {
  if (Number(low) < 1e-3 && Number(high) > 1e3) return "[unbounded]";
  return `[${formatBound(low)}, ${formatBound(high)}]`;
}

/**
 * A winner's confidence (wgtune.confidence.Confidence as JSON) for a table cell:
 * "1.23x [1.10, 1.31] p=0.99": the runner-up's time over the winner's (round by round), its
 * interval, and the probability that the winner is the faster. "–" when there is none.
 */
export function formatConfidence(confidence) {
  if (!confidence) return "–";
  const bounds = formatInterval(confidence.low, confidence.high);
  return `${Number(confidence.ratio).toFixed(3)}x ${bounds} p=${Number(confidence.p_faster).toFixed(2)}`;
}

/** The same, said in full (a tooltip). */
export function describeConfidence(confidence) {
  if (!confidence) return "Only one candidate was measured: there is no runner-up to compare with.";
  const [winnerSamples, runnerSamples] = confidence.samples ?? ["?", "?"];
  return `The runner-up ${confidence.runner_up} takes ${Number(confidence.ratio).toFixed(3)}x the winner's time, ` +
    `round by round (${intervalWords(confidence)}); the winner is the faster with probability ` +
    `${Math.round(confidence.p_faster * 100)}% (${winnerSamples} and ${runnerSamples} samples).`;
}

function intervalWords(confidence) {
  const level = `${Math.round(confidence.level * 100)}% interval`;
  if (formatInterval(confidence.low, confidence.high) === "[unbounded]") return `${level} unbounded: too few rounds`;
  return `${level} ${formatBound(confidence.low)}–${formatBound(confidence.high)}`;
}

/** A key label's numbers named, as a set's `dims` give them: ["M", "N", "K"] is "M x N x K". */
export const labelText = (dims) => dims.join(" x ");

/**
 * A key's failure as text: the message of a failure described as an object ({name, message, ...},
 * what a failed key's answer carries), or the text itself; "" when there is none.
 */
export function failureMessage(failure) {
  if (failure == null) return "";
  if (typeof failure !== "object") return String(failure);
  return failure.name && failure.name !== "WgtuneError" ? `${failure.name}: ${failure.message}` : String(failure.message);
}

/** A device's namespace fields ({device: {vendor, device, backend}, ...}) for a person: "google · swiftshader · webgpu". */
export function deviceText(fields) {
  const device = fields?.device ?? {};
  return [device.vendor, device.device, device.backend].filter(Boolean).join(" · ") || "(unknown device)";
}

/** "1 winner", "3 winners". */
export const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** A key object ({m: 128, …}) as "m=128, n=128"; text stays as it is. */
export function keyText(key) {
  if (key == null) return "";
  if (typeof key !== "object") return String(key);
  return Object.entries(key).map(([field, value]) => `${field}=${value}`).join(", ");
}

/**
 * Why a timed candidate's median is not to be quoted, or null when it may be: the adaptive policy
 * dropped it as hopeless after a sample or two (`eliminated_early` in its result), so it lost
 * clearly, but by how much its median does not say.
 */
export function earlyText(result) {
  if (!result?.eliminated_early) return null;
  return `eliminated early after ${plural(result.samples?.length ?? 0, "sample")}: its median is unreliable`;
}

/**
 * "Launch: compile failed: …": a failed candidate's error type and reason. A Mismatch ran and was
 * timed like the others but computed a wrong answer (the output checks): said as such, since a
 * reader takes "failed" for a crash, not for a kernel that is fast and wrong.
 */
export function failureText(result) {
  const kind = isMismatch(result) ? "Wrong output (Mismatch)" : String(result.error);
  return result.reason ? `${kind}: ${result.reason}` : kind;
}

/** Whether `result` is a candidate the output checks found wrong. */
export function isMismatch(result) {
  return result?.error === "Mismatch";
}

/** Who said which outputs are right in a tune (its `judge`), for a reader; "" when nobody did. */
export function judgeText(judge) {
  if (judge === "reference") return "Outputs checked against the set's reference.";
  if (judge === "agreement") return "Outputs checked by agreement: the largest group of candidates that agree is right.";
  return "";
}

/**
 * Where the page's account of a tune stands (see events.js for its fields), in one line:
 * shown by the progress panel and as the chart's subtitle while the tune runs.
 */
export function phaseText(tune) {
  const done = tune.results.filter(Boolean).length;
  // Candidates the plan or the search did not run come as Skip results: not "tried".
  const tried = tune.results.filter((result) => result && result.error !== "Skip").length;
  switch (tune.phase) {
    case "pending":
      return "Pending: the tune starts…";
    case "running":
      return tune.total ? `Pending: candidate ${Math.min(done + 1, tune.total)} of ${tune.total}` : "Pending";
    case "done":
      return `Winner: ${tune.winner} (${tried} of ${tune.total ?? done} candidates tried${wrongText(tune)}; ` +
        `${tune.stored === "pending" ? "storing…" : tune.stored === true ? "stored" : "not stored"})` +
        (tune.shortCircuit ? `; it met the short-circuit limit` : "") +
        (tune.confidence ? `; confidence vs ${tune.confidence.runner_up}: ${formatConfidence(tune.confidence)}` : "");
    case "failed":
      return `Failed: ${tune.reason}`;
    default:
      return tune.phase;
  }
}

/** ", 1 wrong output": how many of a tune's candidates the output checks found wrong, if any. */
function wrongText(tune) {
  const wrong = tune.results.filter(isMismatch).length;
  return wrong ? `, ${plural(wrong, "wrong output")}` : "";
}
