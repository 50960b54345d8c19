// Tabs of one browser that cooperate on one wgtune database (see backends/tabs.py, which decides
// everything): Web Locks, so that a key is tuned in one tab while the others wait for its winner,
// and a BroadcastChannel, on which a tab announces the winners it stored.

/**
 * The helpers backends/tabs.py uses, for the database `database`: locks and messages of other
 * databases are apart. Where the browser lacks Web Locks, hold() rejects (the tab then tunes on
 * its own); without BroadcastChannel, announcements go nowhere.
 */
export function openTabs(database = "wgtune") {
  const prefix = `wgtune:${database}:`;
  const channel = "BroadcastChannel" in globalThis ? new BroadcastChannel(`${prefix}winners`) : null;
  const listeners = new Set();
  if (channel) {
    channel.onmessage = (event) => {
      for (const listener of listeners) listener(event.data);
    };
  }
  return {
    /** Wait for the lock `name`; resolves to a function that releases it (held until called). */
    hold: (name) =>
      new Promise((granted, refused) => {
        navigator.locks.request(prefix + name, () => new Promise((release) => granted(release))).catch(refused);
      }),
    /** Send `text` to the other tabs of this database (not to this one). */
    announce: (text) => channel?.postMessage(text),
    /** Call `listener(text)` for every announcement of another tab; returns how to stop. */
    listen: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close: () => channel?.close(),
  };
}
