// IndexedDB requests as promises: the wgtune store's helpers (see backends/indexeddb.py, which
// decides everything; these only move text in and out, each call one transaction).
//
// Version 2 of the database: object store "entries", one record per stored winner, its key
// [namespace, set, key] (the namespace's canonical JSON, the set's name, the key's canonical
// JSON), its value the entry's JSON text (StoredEntry.to_json(), as a wgtune.cache/1 document
// holds it). Version 1 kept one record per namespace, a whole document, in "documents": the
// upgrade keeps that store so that Python moves its entries over (migrateDocument) and nothing is
// lost; "documents" is empty from then on.
//
// Lists cross to Python as JSON text: no proxies to release on either side.

const VERSION = 2;
const ENTRIES = "entries";
const DOCUMENTS = "documents";

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

/** Every record of `namespace` (arrays sort after strings: [ns, []] is past [ns, set, key]). */
function ofNamespace(namespace) {
  return IDBKeyRange.bound([namespace], [namespace, []]);
}

/** Every record of one set of `namespace`. */
function ofSet(namespace, set) {
  return IDBKeyRange.bound([namespace, set], [namespace, set, []]);
}

// How long one task of a large import's writes issues puts for before it lets the page run.
const PUT_SLICE_MS = 20;

/**
 * Put the rows of `chunks` (JSON texts of [[doc, set, key, text], ...]; the namespace of each doc
 * in `namespaces`: rows of a doc with none are not imported) into `store`, a slice of puts per
 * task: the next slice is issued from the success of the last put of this one, so the transaction
 * stays active between them and it all commits or aborts as one. Each chunk is parsed only when
 * its rows are put: staged as texts, 100k rows are a hundred strings to the garbage collector,
 * not half a million objects. Resolves to how many were put, once the last put succeeded.
 */
function putInSlices(store, chunks, namespaces) {
  return new Promise((resolve) => {
    let rows = [];
    let next = 0;
    let written = 0;
    const more = () => {
      const until = performance.now() + PUT_SLICE_MS;
      let last = null;
      while (last === null || performance.now() < until) {
        if (next === rows.length) {
          if (chunks.length === 0) break;
          rows = JSON.parse(chunks.shift());
          next = 0;
          continue;
        }
        const [doc, set, key, text] = rows[next++];
        const namespace = namespaces[doc];
        if (namespace === undefined) continue;
        last = store.put(text, [namespace, set, key]);
        written += 1;
      }
      if (next < rows.length || chunks.length > 0) last.onsuccess = more;
      else resolve(written);
    };
    more();
  });
}

/** Open (creating or upgrading if needed) the database `name`; resolves to the store's helpers. */
export async function openDocuments(name = "wgtune") {
  const opening = indexedDB.open(name, VERSION);
  opening.onupgradeneeded = () => {
    const db = opening.result;
    if (!db.objectStoreNames.contains(DOCUMENTS)) db.createObjectStore(DOCUMENTS);
    if (!db.objectStoreNames.contains(ENTRIES)) db.createObjectStore(ENTRIES);
  };
  const db = await done(opening);
  // A tab with a newer wgtune upgrading the database must not wait for this one to close.
  db.onversionchange = () => db.close();

  /**
   * Run `action(stores)` in one transaction over `names`; resolves, once committed, to what it
   * returned (awaited). Writes are made only in request callbacks, never after an await.
   */
  async function transact(names, mode, action) {
    const transaction = db.transaction(names, mode);
    const stores = Object.fromEntries(names.map((store) => [store, transaction.objectStore(store)]));
    const [, result] = await Promise.all([finished(transaction), Promise.resolve(action(stores))]);
    return result;
  }

  return {
    name,
    version: VERSION,
    /** The text of one entry, or undefined. */
    entry: (namespace, set, key) => transact([ENTRIES], "readonly", (s) => done(s.entries.get([namespace, set, key]))),
    /**
     * JSON text: [[set, key, text], ...], at most `limit` records of one namespace in key order,
     * those after [set, key] = [afterSet, afterKey] (from the first when afterSet is null): how a
     * large namespace is read in slices, each a short task.
     */
    namespaceSlice: (namespace, afterSet, afterKey, limit) =>
      transact([ENTRIES], "readonly", async (s) => {
        const range = afterSet == null ? ofNamespace(namespace)
          : IDBKeyRange.bound([namespace, afterSet, afterKey], [namespace, []], true, false);
        const [keys, values] = await Promise.all([
          done(s.entries.getAllKeys(range, limit)), done(s.entries.getAll(range, limit)),
        ]);
        return JSON.stringify(keys.map((key, i) => [key[1], key[2], values[i]]));
      }),
    /**
     * JSON text: [[namespace, count], ...], every namespace with entries: a key cursor that jumps
     * from one namespace to the next, and a count of each, so 100k entries are never read.
     */
    namespaceCounts: () =>
      transact([ENTRIES], "readonly", (s) => new Promise((resolve, reject) => {
        const found = [];
        const cursor = s.entries.openKeyCursor();
        cursor.onerror = () => reject(cursor.error);
        cursor.onsuccess = () => {
          const at = cursor.result;
          if (!at) {
            Promise.all(found.map((namespace) => done(s.entries.count(ofNamespace(namespace)))))
              .then((counts) => resolve(JSON.stringify(found.map((namespace, i) => [namespace, counts[i]]))), reject);
            return;
          }
          found.push(at.key[0]);
          at.continue([at.key[0], []]); // past every key of this namespace
        };
      })),
    /** JSON text: [[set, count], ...] of one namespace, found as namespaceCounts finds namespaces. */
    setCounts: (namespace) =>
      transact([ENTRIES], "readonly", (s) => new Promise((resolve, reject) => {
        const found = [];
        const cursor = s.entries.openKeyCursor(ofNamespace(namespace));
        cursor.onerror = () => reject(cursor.error);
        cursor.onsuccess = () => {
          const at = cursor.result;
          if (!at) {
            Promise.all(found.map((set) => done(s.entries.count(ofSet(namespace, set)))))
              .then((counts) => resolve(JSON.stringify(found.map((set, i) => [set, counts[i]]))), reject);
            return;
          }
          found.push(at.key[1]);
          at.continue([namespace, at.key[1], []]);
        };
      })),
    /**
     * JSON text: {total, records: [[namespace, set, key, text], ...]}: `limit` entries of one
     * namespace (and set, unless null) from the `offset`-th, in key order; only those are read.
     */
    entryPage: (namespace, set, offset, limit) =>
      transact([ENTRIES], "readonly", async (s) => {
        const range = set == null ? ofNamespace(namespace) : ofSet(namespace, set);
        const total = await done(s.entries.count(range));
        const records = await new Promise((resolve, reject) => {
          const page = [];
          const cursor = s.entries.openCursor(range);
          let skipped = offset <= 0;
          cursor.onerror = () => reject(cursor.error);
          cursor.onsuccess = () => {
            const at = cursor.result;
            if (!at || page.length >= limit) return resolve(page);
            if (!skipped) {
              skipped = true;
              at.advance(offset);
              return;
            }
            page.push([...at.key, at.value]);
            at.continue();
          };
        });
        return JSON.stringify({ total, records });
      }),
    /**
     * JSON text: [[namespace, set, key, text], ...], at most `limit` records of every namespace in
     * key order, those after the key [afterNamespace, afterSet, afterKey] (from the first when
     * afterNamespace is null): how an export of 100k entries is read, a short task each.
     */
    entriesAfter: (afterNamespace, afterSet, afterKey, limit) =>
      transact([ENTRIES], "readonly", async (s) => {
        const range = afterNamespace == null ? null
          : IDBKeyRange.lowerBound([afterNamespace, afterSet, afterKey], true);
        const [keys, values] = await Promise.all([
          done(s.entries.getAllKeys(range, limit)), done(s.entries.getAll(range, limit)),
        ]);
        return JSON.stringify(keys.map((key, i) => [...key, values[i]]));
      }),
    /**
     * A large import, staged here and then written in one transaction (backends/idb_transfer.py):
     * add(rows) takes JSON text [[doc, set, key, text], ...] as Python checks the import, a slice
     * at a time; write(namespaces), JSON text {doc: namespace}, writes every staged row of a doc
     * with a namespace, a slice of puts per task, and resolves to how many once committed: all
     * or none, so a tab reading meanwhile sees the store before the import or after it.
     */
    importer: () => {
      const chunks = [];
      return {
        add: (text) => {
          chunks.push(text);
        },
        write: (namespaces) =>
          transact([ENTRIES], "readwrite", (s) => putInSlices(s.entries, chunks, JSON.parse(namespaces))),
      };
    },
    /** JSON text: [[namespace, set, key, text], ...] of every namespace. */
    allEntries: () =>
      transact([ENTRIES], "readonly", async (s) => {
        const [keys, values] = await Promise.all([done(s.entries.getAllKeys()), done(s.entries.getAll())]);
        return JSON.stringify(keys.map((key, i) => [...key, values[i]]));
      }),
    /** Write [[namespace, set, key, text], ...] (JSON text) in one transaction: all or none. */
    putEntries: (records) =>
      transact([ENTRIES], "readwrite", (s) => {
        for (const [namespace, set, key, text] of JSON.parse(records)) s.entries.put(text, [namespace, set, key]);
      }),
    /** Forget one namespace's entries (and its old document, if one is left), in one transaction. */
    clearNamespace: (namespace) =>
      transact([ENTRIES, DOCUMENTS], "readwrite", (s) => {
        s.entries.delete(ofNamespace(namespace));
        s.documents.delete(namespace);
      }),
    /** Forget everything; resolves to how many namespaces had entries or an old document. */
    clearAll: () =>
      transact([ENTRIES, DOCUMENTS], "readwrite", (s) => {
        const namespaces = new Set();
        const keys = s.entries.getAllKeys();
        keys.onsuccess = () => {
          for (const key of keys.result) namespaces.add(key[0]);
          s.entries.clear();
        };
        const names = s.documents.getAllKeys();
        names.onsuccess = () => {
          for (const name of names.result) namespaces.add(name);
          s.documents.clear();
        };
        return namespaces; // filled by the time the transaction commits
      }).then((namespaces) => namespaces.size),
    /** JSON text: [[name, text], ...] of the version-1 documents not migrated yet. */
    oldDocuments: () =>
      transact([DOCUMENTS], "readonly", async (s) => {
        const [keys, values] = await Promise.all([done(s.documents.getAllKeys()), done(s.documents.getAll())]);
        return JSON.stringify(keys.map((key, i) => [key, values[i]]));
      }),
    /**
     * Move a version-1 document's entries ([[namespace, set, key, text], ...], JSON text, read
     * from it by Python) into "entries", each only where no entry is stored (another tab's newer
     * winner stays), then delete the document unless `keep` (it had damage: kept for a
     * post-mortem): one transaction. Resolves to how many entries were added: a namespace, set
     * and key the document gives twice is one entry, the last copy given. (Every count is
     * queued before any put, so each sees the store as it was before this call: without the
     * Map, a key given twice was counted and put twice, 2 added of the 1 stored.)
     */
    migrateDocument: (name, records, keep) =>
      transact([ENTRIES, DOCUMENTS], "readwrite", (s) => {
        const distinct = new Map(); // a key given again keeps its place and takes the later copy
        for (const record of JSON.parse(records)) distinct.set(JSON.stringify(record.slice(0, 3)), record);
        let added = 0;
        for (const [namespace, set, key, text] of distinct.values()) {
          const request = s.entries.count([namespace, set, key]);
          request.onsuccess = () => {
            if (request.result === 0) {
              s.entries.put(text, [namespace, set, key]);
              added += 1;
            }
          };
        }
        if (!keep) s.documents.delete(name);
        return () => added; // read once the transaction committed
      }).then((count) => count()),
    close: () => db.close(),
  };
}
