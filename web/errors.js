// Python's exceptions as JavaScript errors: what every call into wgtune's Python throws.

/** A Python exception as a JS Error whose message is the exception's own last line. */
export function pythonError(error) {
  if (error?.type && typeof error.message === "string") {
    const lines = error.message.trim().split("\n");
    // "wgtune.errors.ConfigError: what is wrong": the message, without the exception's path.
    const last = lines[lines.length - 1];
    const prefix = new RegExp(`^(?:[\\w.]+\\.)?${error.type}: `);
    const clean = new Error(last.replace(prefix, ""));
    clean.pythonType = error.type;
    clean.traceback = error.message;
    return clean;
  }
  return error;
}

/** Await `call()` (a call into Python); a Python exception comes out as a clean Error. */
export async function py(call) {
  try {
    return await call();
  } catch (error) {
    throw pythonError(error);
  }
}
