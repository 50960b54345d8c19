// Keys of sizes: the same rounding as Python's wgtune.anchor (core/key.py), for an app's key function.
//
//   key: (call) => ({ n: anchor(call.params.n), m: anchor(call.params.m, { max: 4096 }) })
//
// Sizes that round to the same power share a winner: a call of 3000 elements and one of 4000 are
// one key (4096), tuned once. A set's default key already does this for its integer params.

/**
 * `x` rounded up to the next power of `base` (default 2), then clamped to [`min`, `max`].
 * anchor(0) and anchor(1) are 1. A TypeError for anything but a whole number >= 0.
 */
export function anchor(x, { max, min, base = 2 } = {}) {
  if (typeof x !== "number" || !Number.isSafeInteger(x) || x < 0) {
    throw new TypeError(`anchor() takes a whole number >= 0, got ${x === null ? "null" : typeof x === "number" ? x : typeof x}`);
  }
  if (!Number.isSafeInteger(base) || base < 2) throw new TypeError(`anchor() needs a whole base >= 2, got ${base}`);
  let power = 1;
  while (power < x) power *= base;
  if (max !== undefined && power > max) power = max;
  if (min !== undefined && power < min) power = min;
  return power;
}
