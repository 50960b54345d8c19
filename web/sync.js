// The moves that span panels, shared by events.js (tune events), actions.js (a person's clicks)
// and app.js (the window.wgtune calls): choose the key the chart shows, read every key's state
// again, follow a change of the store. The panels cannot do these themselves without importing
// one another; here each move updates the shared state, then asks each panel to redraw.

import { message } from "/dom.js";
import { ui } from "/state.js";
import { markSelected, renderKeys } from "/keys.js";
import { defaultKey, scheduleChart } from "/candidates.js";
import { refreshCache } from "/cache.js";

/** Show the key `id` in the chart; `byPerson` pins it there (tunes no longer move the chart). */
export function selectKey(id, byPerson) {
  if (byPerson) ui.pinned = true;
  if (ui.selected === id) return;
  ui.selected = id;
  markSelected();
  scheduleChart();
}

/** With nothing tuned on this page yet: show the first key that has stored results. */
export function selectDefaultKey() {
  if (ui.selected) return;
  const id = defaultKey();
  if (id) selectKey(id, false);
}

export function refreshKeys() {
  if (!ui.api) return;
  try {
    renderKeys(ui.api.catalogue());
    scheduleChart();
  } catch (error) {
    message("keys-message", `Could not read the keys: ${error.message}`, true);
  }
}

/** Read every key's state again, soon: once for a burst of events, outside the event call. */
let refreshTimer = 0;
export function refreshKeysSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = 0;
    refreshKeys();
  }, 0);
}

/** After an import or a clear: the keys' states changed under the page, and so did the store. */
export async function afterStoreChange() {
  refreshKeys();
  await refreshCache();
}
