// Sharing winners with a fleet collector (`wgtune collect`, backends/collector.py): opt-in.
//
//   const sharing = await wgtune.shareWinners("https://collector.example");   // or /?collector=URL
//
// What it does, once asked:
//  - receive: the collector's bundle for this GPU (GET URL/v1/bundle?namespace=...) seeds this
//    page's tuner through loadBundle, with the *verified* winners only (as many agreeing
//    reporters as the collector's X-Wgtune-Verified-Reporters says; 3 by default). A winner
//    fewer reported is left out: this page tunes that key as usual when it needs it, and its own
//    report then confirms the winner or contests it. That is the re-verification: one tab cannot
//    decide what every later visitor with the GPU runs, and no tab trusts a single report.
//  - send: after each tune this page runs (not a winner heard from another tab, not a dry run,
//    not a key this page reported already),
//    POST URL/v1/reports with this device's namespace (wgtune version, GPU identity, tuner) and
//    the set, key, checksum, winner index and name, and confidence, and this browser's install id
//    (a random id kept in localStorage: the collector counts one vote per install id and key, so a
//    later report replaces this browser's vote). Nothing else: no page address, no timings,
//    nothing about the person. Sets the page defines itself (defineSet)
//    are not sent: a collector knows only the library's sets.

/** The page setting that turns sharing on: /?collector=URL (the collector's base URL). */
export const COLLECTOR_SETTING = "collector";
export const REPORTS_FORMAT = "wgtune.reports/1";
/** Agreeing reporters a winner needs before a page takes it from the collector without tuning,
 * when the collector does not say (its bundle's X-Wgtune-Verified-Reporters header does). */
export const VERIFIED_REPORTS = 3;
const VERIFIED_HEADER = "X-Wgtune-Verified-Reporters";
const INSTALL_ID = "wgtune.collector.install"; // localStorage: this browser's reporter id
const FETCH_TIMEOUT_MS = 10_000; // a collector that does not answer must not hold the page up
const MAX_RETRIES = 3; // a report the collector could not take (busy, unreachable) is tried again this often

/** The collector's base URL from `url` (absolute http(s)); a TypeError naming what is wrong. */
export function collectorBase(url) {
  let parsed;
  try {
    parsed = new URL(String(url));
  } catch {
    throw new TypeError(`wgtune.shareWinners: ${JSON.stringify(String(url))} is not an absolute URL`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new TypeError(`wgtune.shareWinners: ${parsed.href} is not an http(s) URL`);
  }
  return parsed.href.replace(/\/+$/, "");
}

/** A value's JSON with sorted keys: how namespaces are compared (core/store/format.py's canonical_namespace). */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.keys(value).sort().map((name) => `${JSON.stringify(name)}:${canonical(value[name])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** This page's namespace, as its Python session names it (wgtune version, device identity, tuner). */
function pageNamespace(api) {
  const proxy = api.session.namespace;
  try {
    return proxy.toJs({ dict_converter: Object.fromEntries });
  } finally {
    proxy.destroy?.();
  }
}

/** This browser's install id (32 hex digits), made once and kept; a fresh one per call where
 * storage is off (then each page load is a reporter of its own, still one vote per key). */
export function installId(storage = globalThis.localStorage) {
  try {
    const kept = storage?.getItem(INSTALL_ID);
    if (kept && /^[0-9a-f]{32}$/.test(kept)) return kept;
  } catch {
    // storage refused (privacy settings): a fresh id below
  }
  const made = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  try {
    storage?.setItem(INSTALL_ID, made);
  } catch {
    // not kept: this load reports as a new install
  }
  return made;
}

/** The report of one tune record (the page's `record` event), or null when it is not to be sent. */
export function reportOf(item, candidates) {
  const record = item?.record;
  if (!record || record.dry_run) return null;
  const name = candidates.get(record.table)?.[record.winner];
  if (name === undefined) return null; // not one of the library's sets: the collector would refuse it
  return {
    set: record.table, key: record.entry.key, checksum: record.entry.checksum, winner: record.winner,
    winner_name: name, confidence: record.confidence ?? null,
  };
}

async function fetchWithTimeout(url, init) {
  return fetch(url, { ...init, mode: "cors", credentials: "omit", signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
}

/**
 * Seed `api` from the collector's verified winners; {seeded, unverified}: this GPU's winners
 * taken, and this GPU's winners left for this page to re-verify by tuning.
 */
async function receive(api, base, namespace) {
  // Only this GPU's winners: a fleet's whole bundle would be mostly other devices'.
  const only = encodeURIComponent(JSON.stringify(namespace));
  const response = await fetchWithTimeout(`${base}/v1/bundle?namespace=${only}`,
    { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`${base}/v1/bundle answered ${response.status}`);
  const said = Number(response.headers.get(VERIFIED_HEADER));
  const needed = Number.isInteger(said) && said >= 1 ? said : VERIFIED_REPORTS;
  const bundle = await response.json();
  const mine = canonical(namespace);
  let unverified = 0;
  const namespaces = (Array.isArray(bundle?.namespaces) ? bundle.namespaces : []).map((document) => {
    const entries = Array.isArray(document.entries) ? document.entries : [];
    const verified = entries.filter((entry) => (entry?.reports ?? 0) >= needed);
    const { entries: _, ...fields } = document;
    if (canonical(fields) === mine) unverified += entries.length - verified.length;
    return { ...document, entries: verified };
  });
  const { seeded } = await api.loadBundle({ ...bundle, namespaces });
  return { seeded, unverified };
}

/**
 * Share this page's winners with the collector at `url`, and (unless `receive` is false) start
 * from the fleet's verified winners for this GPU. Resolves once the bundle was taken (or could
 * not be: `error` says why, and sharing goes on) to the sharing's state, which `onChange` also
 * gets after every report: {collector, seeded, unverified, sent, refused, error, stop()}.
 */
export async function shareWinners(api, url, { receive: wanted = true, onChange = () => {} } = {}) {
  const base = collectorBase(url);
  const namespace = pageNamespace(api);
  const reporter = installId();
  const state = { collector: base, seeded: 0, unverified: 0, sent: 0, refused: 0, error: null, stop: () => {} };
  const changed = () => {
    try {
      onChange(state);
    } catch (error) {
      console.warn("wgtune.shareWinners: onChange failed:", error);
    }
  };
  if (wanted) {
    try {
      Object.assign(state, await receive(api, base, namespace));
    } catch (error) {
      state.error = `the collector's winners were not loaded: ${error.message ?? error}`;
    }
  }
  let candidates = new Map();
  const names = () => new Map(api.catalogue().sets.map((set) => [set.name, set.candidates]));
  const queue = [];
  let sending = false;
  const send = async () => {
    if (sending) return;
    sending = true;
    while (queue.length) {
      const { report, tries } = queue[0];
      const delay = await post(base, namespace, reporter, report, state);
      queue.shift();
      if (delay !== null && tries < MAX_RETRIES) {
        queue.push({ report, tries: tries + 1 });
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
      changed();
    }
    sending = false;
  };
  // One report per key and candidate list from this page: tuning a key again here (the Tune
  // button) must not make this page's winner look like two tabs agreeing.
  const reported = new Set();
  state.stop = api.on((event) => {
    if (event.type !== "record") return;
    if (!candidates.has(event.record?.record?.table)) candidates = names(); // sets added since
    const report = reportOf(event.record, candidates);
    if (report === null) return;
    const slot = canonical([report.set, report.key, report.checksum]);
    if (reported.has(slot)) return;
    reported.add(slot);
    queue.push({ report, tries: 0 });
    send();
  });
  changed();
  return state;
}

/** POST one report; null when done (sent or refused for good), else milliseconds to wait before a retry. */
async function post(base, namespace, reporter, report, state) {
  let response;
  try {
    response = await fetchWithTimeout(`${base}/v1/reports`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ format: REPORTS_FORMAT, namespace, reporter, reports: [report] }),
    });
  } catch (error) {
    state.error = `could not reach the collector: ${error.message ?? error}`;
    return 5000;
  }
  if (response.ok) {
    state.sent += 1;
    state.error = null;
    return null;
  }
  const reason = await response.json().then((body) => body.error, () => response.statusText);
  if (response.status === 429 || response.status >= 500) {
    state.error = `the collector is busy (${response.status}): ${reason}`;
    return 1000 * Math.max(1, Number(response.headers.get("Retry-After")) || 5);
  }
  state.refused += 1;
  state.error = `the collector refused a report (${response.status}): ${reason}`;
  return null;
}

/** The page's line about sharing: on, to where, what came and went. */
export function describeSharing(state) {
  const parts = [`Sharing winners with ${state.collector}`];
  if (state.seeded || state.unverified) {
    parts.push(`${state.seeded} verified winner(s) for this GPU taken from it`
      + (state.unverified ? `, ${state.unverified} unverified left to tune here` : ""));
  }
  parts.push(`${state.sent} winner(s) of this page sent${state.refused ? `, ${state.refused} refused` : ""}`);
  if (state.error) parts.push(state.error);
  return `${parts.join("; ")}.`;
}

/** The page's own use: share with the collector its address names (?collector=URL); null without it. */
export async function shareFromAddress(api, onChange, search = location.search) {
  const url = new URLSearchParams(search).get(COLLECTOR_SETTING);
  if (url === null) return null;
  try {
    return await shareWinners(api, url, { onChange });
  } catch (error) {
    const state = { collector: url, seeded: 0, unverified: 0, sent: 0, refused: 0, stop: () => {},
      error: `sharing is off: ${error.message ?? error}` };
    onChange(state);
    return state;
  }
}
