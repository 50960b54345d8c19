// The life of one loaded wgtune past its load: the warning a device without timestamp queries
// deserves, and `dispose()`, which gives back what the load took (the tunes on the event loop,
// IndexedDB, the tabs' channel, wgtune's GPU buffers, the device if wgtune opened it). Most of
// it is Python's (backends/page_dispose.py); here, the API's side.

import * as errors from "./errors.js";

export const DISPOSED = "wgtune was disposed: load it again with loadWgtune() to tune";

// The API's methods that answer with a promise: after dispose they reject, the others throw.
const ASYNC = new Set(["execute", "settle", "storedPage", "cache", "exportCache", "importCache", "clearCache",
  "loadBundle", "shareWinners", "flush", "defineSet"]);

/**
 * What to say of a device without `timestamp-query` (null when it has it): wgtune then times
 * kernels by the wall clock around a full sync, whose grain is about a millisecond, not the GPU's
 * ~0.1 µs, so each sample must run far longer and close candidates are told apart less surely.
 */
export function timestampWarning(device, ownDevice) {
  if (device.features.has("timestamp-query")) return null;
  const timing = "kernels are timed by the wall clock (performance.now() around onSubmittedWorkDone, " +
    "about 1 ms grain instead of the GPU's timestamps), so tunes take longer and tell close candidates apart less surely";
  if (ownDevice) return `this GPU's adapter has no timestamp-query: ${timing}.`;
  return `the GPUDevice given to loadWgtune was requested without the "timestamp-query" feature: ${timing}. ` +
    'Request it where the adapter has it: adapter.requestDevice({requiredFeatures: adapter.features.has("timestamp-query") ' +
    '? ["timestamp-query"] : []}).';
}

/** The error every call of a disposed wgtune throws (or rejects with). */
function disposedError(method) {
  const Base = errors.WgtuneError ?? Error;
  const error = new Base(`wgtune.${method}(): ${DISPOSED}`);
  error.name = Base === Error ? "WgtuneError" : error.name;
  return error;
}

/** Make every method of `api` but dispose throw (or reject) the disposed error from now on. */
function refuseCalls(api) {
  for (const [name, value] of Object.entries(api)) {
    if (typeof value !== "function" || name === "dispose") continue;
    api[name] = ASYNC.has(name)
      ? () => Promise.reject(disposedError(name))
      : () => { throw disposedError(name); };
  }
}

/**
 * `api.dispose`: once called, every other method of `api` refuses; the session ends (Python's
 * session.dispose(): tunes cancelled, queued winners written, wgtune's buffers destroyed,
 * IndexedDB and the tabs' channel closed), the listeners go, the lost-device watch stops, and a
 * device wgtune opened is destroyed (an app's own device stays the app's). Calling it again
 * answers the same promise.
 */
export function disposer(api, { session, listeners, watch, ownDevice }) {
  let ending = null;
  return () => {
    ending ??= (async () => {
      refuseCalls(api);
      watch.api = null; // the lost-device watch holds nothing of this load any more
      try {
        await errors.py(() => session.dispose());
      } finally {
        listeners.clear();
        if (ownDevice) api.device.destroy();
      }
    })();
    return ending;
  };
}
