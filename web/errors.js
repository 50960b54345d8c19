// wgtune's errors in JavaScript: one Error subclass per kind, with the whole message and fields.
//
//   try { await set.execute(call); }
//   catch (error) {
//     if (error instanceof NoValidKernelFound) console.table(error.failures);   // {candidate, reason, message}
//     else if (error instanceof ConfigError) console.error(error.field, error.message);
//     else throw error;
//   }
//
// Python raises them as backends/js_errors.py describes (one line of JSON on a ForJavaScript
// exception); pythonError turns that into the class of the same name here.

/** Base of every error wgtune throws on purpose. `set` and `key` name the set and key where known. */
export class WgtuneError extends Error {
  static errorName = "WgtuneError";

  constructor(message, fields = {}) {
    super(message);
    this.name = new.target.errorName; // not the class's own name, which a minifier may change
    for (const [field, value] of Object.entries(fields)) {
      if (value !== undefined && field !== "name" && field !== "message") this[field] = value;
    }
  }
}

/** A setting, a set's description or a call is wrong; `field` names the field or param where one is to blame. */
export class ConfigError extends WgtuneError {
  static errorName = "ConfigError";
}

/** A candidate could not be compiled or launched. */
export class KernelError extends WgtuneError {
  static errorName = "KernelError";
}

/** WebGPU refuses to launch the call: a buffer without STORAGE usage, too small, destroyed, of another device, a grid over a limit. */
export class LaunchRefused extends KernelError {
  static errorName = "LaunchRefused";
}

/** A stored or imported document is not a wgtune document, or is damaged. */
export class StoreError extends WgtuneError {
  static errorName = "StoreError";
}

/** A tune stopped for a reason outside any one candidate. */
export class TuneFailed extends WgtuneError {
  static errorName = "TuneFailed";
}

/** The GPU device was lost. */
export class DeviceLost extends WgtuneError {
  static errorName = "DeviceLost";
}

/**
 * No candidate of the set works for the key: `failures` says why for each, as
 * `{candidate, reason, message}` (reason "Compile", "Launch", "Mismatch", "Timeout",
 * "InvalidSamples", "Unknown" or "Skip"). The key stays failed for this page load, until its set
 * changes or `set.retune(call)` is asked.
 */
export class NoValidKernelFound extends WgtuneError {
  static errorName = "NoValidKernelFound";
}

const CLASSES = { WgtuneError, ConfigError, KernelError, LaunchRefused, StoreError, TuneFailed, DeviceLost,
                  NoValidKernelFound };

/**
 * The error a description from Python (`{name, message, ...fields}`, backends/js_errors.py) is.
 * One that carries `thrown` stands for what one of the app's own functions (a set's grid, key)
 * threw: `takeThrown(token)` gives that back, to be thrown as it was.
 */
export function errorFrom(described, takeThrown = undefined) {
  if (described.thrown !== undefined && takeThrown) {
    const thrown = takeThrown(described.thrown);
    if (thrown !== undefined && thrown !== null) return thrown;
  }
  const { thrown: _token, ...fields } = described; // the token is not the error's to carry
  const Class = CLASSES[described.name] ?? WgtuneError;
  return new Class(described.message, fields);
}

const DESCRIBED = /(?:^|\n)(?:[\w.]+\.)?ForJavaScript: (\{.*\})\s*$/;

/**
 * A Python exception as a JS Error: wgtune's own as their class, an app's own function's as it
 * threw it (with `takeThrown`, see errorFrom), anything else as WgtuneError.
 */
export function pythonError(error, takeThrown = undefined) {
  if (!(error?.type && typeof error.message === "string")) return error;
  const described = error.message.match(DESCRIBED);
  if (described) {
    let parsed;
    try {
      parsed = JSON.parse(described[1]);
    } catch {
      parsed = null; // not our JSON after all: the exception's last line below
    }
    if (parsed !== null) return errorFrom(parsed, takeThrown);
  }
  // An exception wgtune did not mean to raise (a bug): its last line, without the module path.
  const lines = error.message.trim().split("\n");
  const prefix = new RegExp(`^(?:[\\w.]+\\.)?${error.type}: `);
  return new WgtuneError(`internal error: ${error.type}: ${lines[lines.length - 1].replace(prefix, "")}`);
}

/** Await `call()` (a call into Python); a Python exception comes out as wgtune's Error of its kind. */
export async function py(call) {
  try {
    return await call();
  } catch (error) {
    throw pythonError(error);
  }
}
