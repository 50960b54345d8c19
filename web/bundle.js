// Bundles in the page: seed the tuner from a bundle of winners (`wgtune bundle`, see
// core/store/bundle.py), so that a GPU the bundle knows gets Hits at once and tunes nothing.
//
//   await wgtune.loadBundle("winners.bundle.json");   // a URL on this page's origin
//   await wgtune.loadBundle(bundleObject);             // or the bundle itself
//
// The Python side (PageSession.load_bundle) checks the whole bundle, takes the entries of this
// device's namespace and seeds the tuner's cache with them (in memory, as natively: a winner
// this page stored keeps priority; a stale one is tuned as usual). The demo page loads the one its
// address names: /?bundle=winners.bundle.json.

import { py } from "./errors.js";

/** The page setting that names a bundle to load: /?bundle=URL (relative, on the same origin). */
export const BUNDLE_SETTING = "bundle";

/**
 * `source` resolved against the page's address; a TypeError naming it when it is on another
 * origin: a bundle decides which kernels run, so it comes from the site that serves the page.
 */
export function bundleUrl(source, base = location.href) {
  let url;
  try {
    url = new URL(source, base);
  } catch {
    throw new TypeError(`wgtune.loadBundle: ${JSON.stringify(source)} is not a URL`);
  }
  const origin = new URL(base).origin;
  if (url.origin !== origin) {
    throw new TypeError(`wgtune.loadBundle: ${JSON.stringify(source)} is on ${url.origin}, not on this page's `
      + `origin ${origin}: serve the bundle from the page's own site`);
  }
  return url;
}

/** The bundle's JSON text, fetched from `source` (a same-origin URL) or written from an object. */
async function bundleText(source) {
  if (typeof source === "string" || source instanceof URL) {
    const url = bundleUrl(String(source));
    let response;
    try {
      response = await fetch(url, { credentials: "same-origin" });
    } catch (error) {
      throw new Error(`wgtune.loadBundle: could not fetch ${url.pathname}: ${error.message ?? error}`);
    }
    if (!response.ok) {
      throw new Error(`wgtune.loadBundle: ${url.pathname} answered ${response.status} ${response.statusText}`);
    }
    return response.text();
  }
  if (source !== null && typeof source === "object" && !Array.isArray(source)) return JSON.stringify(source);
  const got = source === null ? "null" : Array.isArray(source) ? "an array" : typeof source;
  throw new TypeError(`wgtune.loadBundle(urlOrBundle): give a same-origin URL or a bundle object, got ${got}`);
}

/**
 * Seed `api`'s tuner from the bundle at `source` (a URL or the bundle object). Resolves to
 * {seeded, entries, namespaces}: this device's winners taken, of how many in how many namespaces
 * (seeded 0: the bundle does not know this GPU, whose keys tune as usual). Rejects with an Error
 * naming what is wrong with the bundle (its format, a namespace, an entry), seeding nothing.
 */
export async function loadBundle(api, source) {
  const text = await bundleText(source);
  return py(() => JSON.parse(api.session.load_bundle(text)));
}

/**
 * The page's own use: load the bundle its address names (?bundle=URL), if any. Resolves to a line
 * for people saying what was seeded, or what was wrong (a bad bundle leaves the tuner working:
 * keys tune as they would without it); "" without the setting.
 */
export async function loadBundleFromAddress(api, search = location.search) {
  const source = new URLSearchParams(search).get(BUNDLE_SETTING);
  if (source === null) return "";
  try {
    const { seeded, entries, namespaces } = await api.loadBundle(source);
    return seeded
      ? `${seeded} winner(s) for this GPU from the bundle ${source}`
      : `the bundle ${source} has no winners for this GPU (${entries} for ${namespaces} other device(s)): tuning as usual`;
  } catch (error) {
    return `bundle ${source} not loaded: ${error.message ?? error}`;
  }
}
