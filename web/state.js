// What the page knows, shared by its modules: the panels render from it, events.js and the
// actions write to it. Keeping it in one place is what lets the panels stay ignorant of each
// other: an event updates the state once, then asks each panel concerned to redraw its part.

export const ui = {
  api: null,
  /** set name -> { candidates: [name], fallback } from the catalogue. */
  sets: new Map(),
  /** "set/key" -> the key's state from the catalogue or an answer ({set, key, state, winner?, …}). */
  states: new Map(),
  /** "set/key" -> { tr, cells, set, key } of its row in #keys. */
  rows: new Map(),
  /** "set/key" -> the latest tune of that key on this page: { phase, total, results[], winner, reason, … }. */
  tunes: new Map(),
  /** The key the chart shows; `pinned` when a person chose it (else it follows the running tune). */
  selected: null,
  pinned: false,
  /** The key #progress describes. */
  progressKey: null,
};

/** The page's one name for a key, used by rows, tunes, the chart and tests' data-key. */
export const idOf = (set, key) => `${set}/${key}`;
