// Python memory snapshots in Cache Storage: what lets a later load restore Python with wgtune
// imported instead of starting the interpreter (see python.js). One snapshot per base URL,
// keyed by the wheel's URL (which carries its digest) and Pyodide's version; Pyodide itself
// refuses a snapshot of another build.

const CACHE = "wgtune-python-snapshots";

// What a snapshot expects of the loader besides its wheel and Pyodide: bumped when that changes
// (2: the wheel is a zip on sys.path, python.js installWheel), so an older one is not restored.
const LAYOUT = "2";

/** The key of the snapshot of this wheel and Pyodide (started with JSPI or not), under the library's base URL. */
export function snapshotKey(base, wheelUrl, pyodideVersion, stackSwitching = false) {
  const key = new URL("python.snapshot", base);
  const fields = { wheel: wheelUrl, pyodide: pyodideVersion, layout: LAYOUT };
  if (stackSwitching) fields.jspi = "1";
  key.search = new URLSearchParams(fields).toString();
  return key.href;
}

/** The stored snapshot under `key`, or null (none, or no Cache Storage: an insecure origin, say). */
export async function readSnapshot(key) {
  try {
    const response = await (await caches.open(CACHE)).match(key);
    return response ? new Uint8Array(await response.arrayBuffer()) : null;
  } catch {
    return null;
  }
}

/** Keep `bytes` under `key` (copied at once), dropping the snapshots of other wheels or Pyodides of the base. */
export async function saveSnapshot(key, bytes) {
  const body = new Response(bytes, { headers: { "Content-Type": "application/octet-stream" } });
  const cache = await caches.open(CACHE);
  const base = key.slice(0, key.indexOf("?"));
  for (const request of await cache.keys()) {
    if (request.url.startsWith(`${base}?`) && request.url !== key) await cache.delete(request);
  }
  await cache.put(key, body);
}

/** Forget the snapshot under `key` (one that did not restore). */
export async function dropSnapshot(key) {
  try {
    await (await caches.open(CACHE)).delete(key);
  } catch {
    // nothing to drop
  }
}
