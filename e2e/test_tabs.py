"""Tabs that cooperate, end to end: two tabs of one Chromium profile (one IndexedDB) on the page.

A key tuned in one tab becomes a Hit in the other without a reload (BroadcastChannel); the same key
asked in both at once is tuned once (Web Locks); two tabs importing at once keep every entry (one
record per entry, one transaction per import).
"""

from __future__ import annotations

import json

from wgtune import Key, StoredEntry
from wgtune.store.format import canonical_namespace, document_text, encode_document, encode_export

# A tune of an fma key takes seconds on SwiftShader on idle cores; the limit only catches a hang
# on a machine busy with other test suites.
TUNE_MS = 420_000

LISTEN = "() => { window.events = []; window.wgtune.on((e) => window.events.push(e)); }"


def key_state(page, set_name: str, label: str) -> dict:
    """The key's state as the tab knows it, without asking for it (a check would start a tune)."""
    catalogue = page.evaluate("window.wgtune.catalogue()")
    [found] = [key for s in catalogue["sets"] if s["name"] == set_name for key in s["keys"] if key["key"] == label]
    return found


def wait_for_state(page, set_name: str, label: str, state: str) -> None:
    page.wait_for_function(
        """([s, k, state]) => window.wgtune.catalogue().sets.find((set) => set.name === s)
             .keys.find((key) => key.key === k).state === state""",
        arg=[set_name, label, state], timeout=TUNE_MS,
    )


def events_of(page, kind: str, label: str) -> list[dict]:
    return page.evaluate("([t, k]) => window.events.filter((e) => e.type === t && e.key === k)", [kind, label])


NAMESPACE = {"wgtune": "0.1.0", "device": {"vendor": "elsewhere", "device": "gpu", "driver": "1", "backend": "vulkan"},
             "tuner": "default"}


def entries_of(numbers: range) -> list[StoredEntry]:
    return [StoredEntry("many", Key({"n": n}), "sum", 0, "k0", ({"name": "k0", "median": 1e-3, "samples": [1e-3]},))
            for n in numbers]


# The database as version 1 of the page left it: one record per namespace, its whole document.
VERSION_1 = """([name, text]) => new Promise((resolve, reject) => {
    const opening = indexedDB.open("wgtune", 1);
    opening.onupgradeneeded = () => opening.result.createObjectStore("documents");
    opening.onerror = () => reject(opening.error);
    opening.onsuccess = () => {
        const db = opening.result;
        const transaction = db.transaction("documents", "readwrite");
        transaction.objectStore("documents").put(text, name);
        transaction.oncomplete = () => { db.close(); resolve(true); };
        transaction.onerror = () => reject(transaction.error);
    };
})"""

OLD_DOCUMENTS_LEFT = """() => new Promise((resolve, reject) => {
    const opening = indexedDB.open("wgtune");
    opening.onerror = () => reject(opening.error);
    opening.onsuccess = () => {
        const db = opening.result;
        const counting = db.transaction("documents").objectStore("documents").count();
        counting.onsuccess = () => { resolve([db.version, counting.result]); db.close(); };
    };
})"""


def test_the_winners_of_a_version_1_database_move_into_records_when_a_page_opens(browser):
    # First in this module: its profile's database does not exist yet.
    page, log = browser.open("?defer", wait=False)  # the page waits for start(): nothing opened yet
    page.wait_for_function("typeof window.wgtune?.start === 'function'")
    document = document_text(encode_document(NAMESPACE, entries_of(range(5))))
    assert page.evaluate(VERSION_1, [canonical_namespace(NAMESPACE), document]) is True
    page.evaluate("() => window.wgtune.start({})")
    cache = page.evaluate("window.wgtune.cache()")
    [moved] = [doc for doc in cache["namespaces"] if doc["device"]["vendor"] == "elsewhere"]
    assert moved == json.loads(document)  # every entry, as the document held it
    assert page.evaluate(OLD_DOCUMENTS_LEFT) == [2, 0]
    assert page.evaluate("window.wgtune.clearCache()") == 0  # this device's: none; the moved ones are another's
    assert page.evaluate("window.wgtune.clearCache({all: true})") == 5
    assert log.errors == []
    page.close()


def test_a_key_tuned_in_one_tab_is_a_hit_in_the_other_without_a_reload(browser):
    first, first_log = browser.open()
    second, second_log = browser.open()
    second.evaluate(LISTEN)
    assert key_state(second, "fma", "262144")["state"] == "Miss"

    assert first.evaluate("window.wgtune.check('fma', '262144')")["state"] == "Pending"
    winner = first.evaluate("window.wgtune.settle('fma', '262144')")["winner"]
    wait_for_state(second, "fma", "262144", "Hit")  # announced: the second tab never asked for it

    assert key_state(second, "fma", "262144")["winner"] == winner
    assert events_of(second, "started", "262144") == []  # nothing tuned there
    [heard] = events_of(second, "finished", "262144")
    assert heard["elsewhere"] is True and heard["announced"] is True and heard["winner"] == winner
    ran = second.evaluate("window.wgtune.execute('fma', '262144')")
    assert ran["state"] == "Hit" and second.evaluate("window.wgtune.records()") == []
    assert first_log.errors == [] and second_log.errors == []
    first.close()
    second.close()


def test_the_same_key_asked_in_two_tabs_at_once_is_tuned_once(browser):
    first, first_log = browser.open()
    second, second_log = browser.open()
    for page in (first, second):
        page.evaluate(LISTEN)
    assert first.evaluate("window.wgtune.check('fma', '100003')")["state"] == "Pending"
    assert second.evaluate("window.wgtune.check('fma', '100003')")["state"] == "Pending"

    settled = [page.evaluate("window.wgtune.settle('fma', '100003')") for page in (first, second)]
    assert [s["state"] for s in settled] == ["Hit", "Hit"]
    assert settled[0]["winner"] == settled[1]["winner"]  # one tune, one winner
    started = [len(events_of(page, "started", "100003")) for page in (first, second)]
    records = [page.evaluate("window.wgtune.records()") for page in (first, second)]
    assert sorted(started) == [0, 1] and sorted(len(r) for r in records) == [0, 1]
    waited = second if started[1] == 0 else first
    [finished] = events_of(waited, "finished", "100003")
    assert finished["elsewhere"] is True and finished["announced"] is False  # waited, then took it
    assert first_log.errors == [] and second_log.errors == []
    first.close()
    second.close()


def export_of(numbers: range) -> str:
    return json.dumps(encode_export([encode_document(NAMESPACE, entries_of(numbers))]))


def test_two_tabs_importing_30_entries_each_into_a_namespace_of_2000_keep_all_60(browser):
    first, first_log = browser.open()
    second, second_log = browser.open()
    assert first.evaluate("(text) => window.wgtune.importCache(text)", export_of(range(2000))) == 2000
    for page, numbers in ((first, range(2000, 2030)), (second, range(2030, 2060))):
        page.evaluate("(text) => { window.importing = window.wgtune.importCache(text); }", export_of(numbers))
    assert [page.evaluate("window.importing") for page in (first, second)] == [30, 30]

    for page in (first, second):
        cache = page.evaluate("window.wgtune.cache()")
        [document] = [doc for doc in cache["namespaces"] if doc["device"]["vendor"] == "elsewhere"]
        assert sorted(entry["key"]["n"] for entry in document["entries"]) == list(range(2060))
    assert first_log.errors == [] and second_log.errors == []
    first.close()
    second.close()


def test_a_clear_in_one_tab_leaves_no_record_of_the_other_saying_its_winner_is_stored(browser):
    first, first_log = browser.open()
    second, second_log = browser.open()
    first.evaluate("window.wgtune.clearCache()")  # a key a test before this one stored would be a hit
    first.evaluate(LISTEN)
    assert first.evaluate("window.wgtune.check('fma', '100003')")["state"] == "Pending"
    first.evaluate("window.wgtune.settle('fma', '100003')")
    stored = first.locator("#records tbody tr[data-table] .stored")
    first.wait_for_function("() => document.querySelector('#records tbody tr[data-table] .stored')?.textContent"
                            " === 'yes'", timeout=TUNE_MS)  # the IndexedDB write committed
    assert second.evaluate("window.wgtune.clearCache()") == 1  # the other tab takes the winner away
    # The first tab hears it and reads the store again: its record no longer says the winner is stored.
    first.wait_for_function("() => window.wgtune.records()[0].record.stored === 'cleared'", timeout=TUNE_MS)
    assert stored.all_inner_texts() == ["cleared"]
    first.wait_for_function("() => document.querySelector('#progress').textContent.includes('cleared in another tab')")
    [heard] = events_of(first, "cleared", "100003")
    assert heard["set"] == "fma" and heard["table"] == "fma" and heard["elsewhere"] is True
    assert first.evaluate("window.wgtune.check('fma', '100003')")["state"] == "Pending"  # tuned again here
    first.evaluate("window.wgtune.settle('fma', '100003')")
    first.evaluate("window.wgtune.clearCache()")  # the tests after this one start from nothing stored
    assert first_log.errors == [] and second_log.errors == []
    first.close()
    second.close()
