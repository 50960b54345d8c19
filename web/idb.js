// IndexedDB requests as promises: the wgtune store's helpers (see backends/indexeddb.py).
// One object store, "documents": key = a namespace's canonical JSON, value = its document's text.

const STORE = "documents";

function done(request) {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

function finished(transaction) {
  return new Promise((resolve, reject) => {
    transaction.oncomplete = () => resolve();
    transaction.onerror = () => reject(transaction.error);
    transaction.onabort = () => reject(transaction.error ?? new Error("IndexedDB transaction aborted"));
  });
}

/** Open (creating if needed) the database `name`; resolves to the helpers the store uses. */
export async function openDocuments(name = "wgtune") {
  const opening = indexedDB.open(name, 1);
  opening.onupgradeneeded = () => opening.result.createObjectStore(STORE);
  const db = await done(opening);

  async function write(action) {
    const transaction = db.transaction(STORE, "readwrite");
    action(transaction.objectStore(STORE));
    await finished(transaction);
  }

  return {
    name,
    /** The text stored under `key`, or undefined. */
    get: (key) => done(db.transaction(STORE, "readonly").objectStore(STORE).get(key)),
    put: (key, text) => write((store) => store.put(text, key)),
    remove: (key) => write((store) => store.delete(key)),
    /** Every [key, text] pair. */
    entries: async () => {
      const store = db.transaction(STORE, "readonly").objectStore(STORE);
      const [keys, values] = await Promise.all([done(store.getAllKeys()), done(store.getAll())]);
      return keys.map((key, i) => [key, values[i]]);
    },
    close: () => db.close(),
  };
}
