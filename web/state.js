// What the page knows, shared by its panels: each panel draws from this and patches only its own
// elements, so an event can update several panels without them calling into each other's DOM.

export const ui = {
  api: null,
  /** set name -> { candidates: [name], fallback } from the catalogue. */
  sets: new Map(),
  /** "set/key" -> the key's state from the catalogue or an answer ({set, key, state, winner?, …}). */
  states: new Map(),
  /** "set/key" -> { tr, cells } of its row in #keys. */
  rows: new Map(),
  /** "set/key" -> the latest tune of that key on this page: { phase, total, results[], winner, reason }. */
  tunes: new Map(),
  /** The key the chart shows; `pinned` when a person chose it (else it follows the running tune). */
  selected: null,
  pinned: false,
  /** The key #progress describes. */
  progressKey: null,
  /** A record whose key label is not known yet: its `finished` event comes right after it. */
  unlabelledRecord: null,
};

/** The page's one name for a key, used by rows, tunes, the chart and tests' data-key. */
export const idOf = (set, key) => `${set}/${key}`;
