// Tunable sets defined from JavaScript: a web app's own kernels, tuned and run on its own buffers,
// with no Python of its own. The set is turned into Python's TunableSet by backends/js_sets.py,
// which documents every field; wgtune.d.ts types them.
//
//   const scale = await wgtune.defineSet({
//     name: "scale",
//     candidates: [64, 128, 256].map((wg) => ({
//       name: `wg${wg}`, wgsl: SOURCE, constants: { WG: wg },
//       grid: (call) => [Math.ceil(call.params.n / wg)],
//     })),
//     key: (call) => ({ n: call.params.n }),
//   });
//   const call = { buffers: { x: xBuffer, y: yBuffer }, params: { n: 1000, scale: 2.0 } };
//   scale.check(call);              // {state: "Pending"}: the tune started
//   await scale.execute(call);      // runs the fallback while Pending, then the winner
//   await scale.settle(call);       // {state: "Hit", winner: "wg128", key: {n: 1000}}

import { ConfigError, pythonError } from "./errors.js";

/**
 * What one of the app's own functions threw (a set's grid, key...), taken back from Python by its
 * token (backends/js_errors.py take_thrown), to be thrown to the app as it was; null where not kept.
 */
function thrownFrom(api) {
  return (token) => {
    const errors = api.pyodide?.pyimport("wgtune.backends.js_errors");
    if (!errors) return null; // disposed meanwhile: the message stands in for it
    try {
      return errors.take_thrown(token);
    } finally {
      errors.destroy();
    }
  };
}

function checkedCall(setName, call) {
  if (call === null || typeof call !== "object" || !("buffers" in call)) {
    // A ConfigError, as every other call that cannot run (backends/js_calls.py words it alike).
    throw new ConfigError(`set '${setName}': a call is {buffers, params}, got ${describe(call)}`,
                          { set: setName, field: "buffers" });
  }
  return call;
}

function describe(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? `an object with ${Object.keys(value).join(", ") || "no fields"}` : typeof value;
}

/** Define a set from `spec` on the loaded wgtune (`api`); resolves to the set's handle. */
export async function defineSet(api, spec) {
  if (spec === null || typeof spec !== "object") {
    throw new TypeError(`wgtune.defineSet takes an object {name, candidates | space, key, ...}, got ${describe(spec)}`);
  }
  const takeThrown = thrownFrom(api);
  const fail = (error) => pythonError(error, takeThrown);
  let handle;
  try {
    handle = api.session.define_set(spec);
    // Its fallback compiled now: a set none of whose candidates compiles here is an error at once
    // (NoValidKernelFound, each candidate's compiler message in `failures`), and the first
    // execute runs without waiting for a compile.
    await handle.prepare();
  } catch (error) {
    handle?.destroy?.();
    throw fail(error);
  }
  const name = handle.name;
  const sync = (method) => (call) => {
    try {
      return JSON.parse(handle[method](checkedCall(name, call)));
    } catch (error) {
      throw fail(error);
    }
  };
  const later = (method) => async (call, ...rest) => {
    try {
      return JSON.parse(await handle[method](checkedCall(name, call), ...rest));
    } catch (error) {
      throw fail(error);
    }
  };
  const settle = later("settle");
  // The launch is encoded before execute returns (a batch records it); its answer is JSON text, or
  // for a call's first launch on its buffers a Python awaitable of it, which rejects when WebGPU
  // refused the launch (its error scope: backends/js_sets.py).
  const execute = async (call) => {
    let answer;
    try {
      answer = handle.execute(checkedCall(name, call));
    } catch (error) {
      throw fail(error);
    }
    if (typeof answer !== "string") {
      try {
        answer = await answer;
      } catch (error) {
        throw fail(error);
      }
    }
    return JSON.parse(answer);
  };
  return {
    name,
    /** The candidates' names, in the set's order (candidate 0 is the fallback). */
    candidates: handle.candidate_names().toJs(),
    /** The call's state: {state: "Hit", winner} or {state: "Pending"} (a tune just started), or
     *  {state: "Failed", failure} when every candidate failed for its key (until `retune`). */
    check: sync("check"),
    /** Run the winner on the call's buffers (the fallback while Pending); {ran, state, ...}. The
     *  launch is encoded before this returns (inside wgtune.batch it is recorded into the batch),
     *  unless the set's fallback is still compiling: then it launches once it is.
     *  Rejects with LaunchRefused when WebGPU refuses the launch: a buffer without STORAGE usage,
     *  too small, destroyed, of another GPUDevice, or a grid over the device's limit; the message
     *  names the set, the binding or WebGPU's words. That error is this call's alone: nothing of
     *  it reaches a later call or tune. ConfigError (with `field`) for a call that cannot run
     *  (params missing or wrong, a buffer that is no GPUBuffer, a grid that gives no whole
     *  counts); NoValidKernelFound for a key whose candidates all failed. What the set's own
     *  grid or key function throws comes back as it was thrown. */
    execute,
    /** Wait until the call's key is no longer Pending ({timeout} s, default 600); its state. */
    settle: (call, { timeout = 600 } = {}) => settle(call, timeout),
    /** Every candidate's result for the call's key (median, samples, or failure and reason), or null. */
    results: sync("results"),
    /** Forget this page load's winner or failure for the call's key and tune it again; its state (Pending). */
    retune: async (call) => sync("retune")(call),
  };
}
