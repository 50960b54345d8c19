// Launches in batches: many set.execute calls recorded into a command buffer and submitted together
// (Python's Tuner.batch, core/batch.py; one submission per 128 launches). Each execute on its own
// is one submission, which costs more than a small kernel; in a batch it is a few commands in one
// compute pass.
//
//   await wgtune.batch(() => {           // recorded, in order; submitted when the function returns
//     for (const layer of layers) layer.set.execute(layer.call);
//   });
//   const batch = wgtune.batch();        // or by hand
//   scale.execute(call); ...
//   await batch.submit();
//
// set.execute encodes its launch before it returns (its promise only carries the answer), so the
// launches of a function that does not await are all in the batch. A function that returns a
// promise keeps the batch open until it settles; a tune or a read meanwhile submits what was
// recorded so far first, so order is kept. An exception still submits what came before it.
//
// WebGPU refuses a submission whole (a launch on a buffer destroyed after it was recorded, and
// none of its launches runs) and says so only later: the promise that batch.submit() and
// wgtune.batch(fn) return rejects then, with a LaunchRefused naming the calls of the refused
// submission, each of which has its next execute checked as a first launch again
// (backends/js_batch.py). Nothing waits for it: the launches went to the GPU at the call, and a
// refusal nobody awaits is the page's unhandled rejection, as any lost work should be.

import { pythonError } from "./errors.js";

/** Open a batch on the loaded wgtune (`api`); with `body`, run it in the batch and submit after. */
export function batch(api, body) {
  if (body !== undefined && typeof body !== "function") {
    throw new TypeError(`wgtune.batch takes a function (or nothing, for batch.submit()), got ${typeof body}`);
  }
  let recording;
  try {
    recording = api.session.batch();
  } catch (error) {
    throw pythonError(error);
  }
  let open = true;
  let submitted = null; // the promise submit() returned
  const handle = {
    /** Whether launches are still being recorded into this batch. */
    get open() {
      return open;
    },
    /**
     * Submit what was recorded, once, and close the batch (a batch inside another leaves it to
     * the outer one, and resolves at once). The promise resolves once WebGPU took every
     * submission of the batch, and rejects with LaunchRefused naming the calls of one it refused.
     */
    submit() {
      if (!open) throw new Error("wgtune batch: submitted already; open a new one with wgtune.batch()");
      open = false;
      let verdict;
      try {
        verdict = recording.submit();
      } catch (error) {
        throw pythonError(error);
      } finally {
        recording.destroy();
      }
      submitted = (async () => {
        try {
          await verdict; // undefined: nothing to wait for
        } catch (error) {
          throw pythonError(error);
        }
      })();
      return submitted;
    },
  };
  if (body === undefined) return handle;
  let result;
  try {
    result = body(handle);
  } catch (error) {
    // The app's own error is what it gets; a refusal of what came before it is told by the
    // refused calls' next execute, which is checked again.
    if (open) handle.submit();
    submitted.catch(() => {});
    throw error;
  }
  if (result !== null && typeof result === "object" && typeof result.then === "function") {
    return Promise.resolve(result).then(
      async (value) => {
        if (open) handle.submit();
        await submitted;
        return value;
      },
      (error) => {
        if (open) handle.submit();
        submitted.catch(() => {}); // as for a function that throws: its own error is what it gets
        throw error;
      },
    );
  }
  if (open) handle.submit();
  return submitted.then(() => result);
}
