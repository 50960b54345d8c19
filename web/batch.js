// Launches in batches: many set.execute calls recorded into a command buffer and submitted together
// (Python's Tuner.batch, core/batch.py; one submission per 128 launches). Each execute on its own
// is one submission, which costs more than a small kernel; in a batch it is a few commands in one
// compute pass.
//
//   wgtune.batch(() => {                 // recorded, in order; submitted when the function returns
//     for (const layer of layers) layer.set.execute(layer.call);
//   });
//   const batch = wgtune.batch();        // or by hand
//   scale.execute(call); ...
//   batch.submit();
//
// set.execute encodes its launch before it returns (its promise only carries the answer), so the
// launches of a function that does not await are all in the batch. A function that returns a
// promise keeps the batch open until it settles; a tune or a read meanwhile submits what was
// recorded so far first, so order is kept. An exception still submits what came before it.

import { pythonError } from "./errors.js";

/** Open a batch on the loaded wgtune (`api`); with `body`, run it in the batch and submit after. */
export function batch(api, body) {
  if (body !== undefined && typeof body !== "function") {
    throw new TypeError(`wgtune.batch takes a function (or nothing, for batch.submit()), got ${typeof body}`);
  }
  let recording;
  const tuner = api.session.tuner;
  try {
    recording = tuner.batch();
  } catch (error) {
    throw pythonError(error);
  } finally {
    tuner.destroy();
  }
  let open = true;
  const handle = {
    /** Whether launches are still being recorded into this batch. */
    get open() {
      return open;
    },
    /** Submit what was recorded, once, and close the batch (a batch inside another leaves it to the outer one). */
    submit() {
      if (!open) throw new Error("wgtune batch: submitted already; open a new one with wgtune.batch()");
      open = false;
      try {
        recording.submit();
      } catch (error) {
        throw pythonError(error);
      } finally {
        recording.destroy();
      }
    },
  };
  if (body === undefined) return handle;
  let result;
  try {
    result = body(handle);
  } catch (error) {
    if (open) handle.submit();
    throw error;
  }
  if (result !== null && typeof result === "object" && typeof result.then === "function") {
    return Promise.resolve(result).finally(() => open && handle.submit());
  }
  if (open) handle.submit();
  return result;
}
