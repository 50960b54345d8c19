"""``migrateDocument`` (web/idb.js) in Chromium's IndexedDB, given the records the page's migration
of a version-1 document hands it where the document gives a set and key twice: it says it moved
each entry once, keeps the last copy, and leaves a winner stored before alone, as the fake IndexedDB
of the native tests does (``tests/test_noticed_migrate_counts.py``, whose scenario this replays).
It once said 2 of the one entry it stored. Only web/idb.js is loaded (no Python on the page):
seconds, not minutes."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the native test's scenario

from test_noticed_migrate_counts import MOVED, STORED, WINNERS, migrated, winners

# A database of its own, the records stored before put first; then the migration, twice.
MIGRATE = """async ([stored, [name, records, keep]]) => {
  const { openDocuments } = await import("./idb.js");
  const idb = await openDocuments("wgtune-noticed-migrate-counts");
  await idb.putEntries(stored);
  const moved = await idb.migrateDocument(name, records, keep);
  const again = await idb.migrateDocument(name, records, keep);
  const entries = JSON.parse(await idb.allEntries());
  idb.close();
  return { moved, again, entries };
}"""


def test_chromium_counts_a_key_given_twice_once_and_keeps_the_last_copy_as_the_fake_does(browser):
    with ThreadPoolExecutor(1) as thread:  # off Playwright's loop: the fake runs on a loop of its own
        fake, fake_moved, _again = thread.submit(migrated).result()
    [handed] = fake.handed
    page = browser.context.new_page()
    page.goto(browser.url + "idb.js")  # the page's origin, without starting the page
    stored = json.dumps([[*slot, text] for slot, text in STORED.items()])
    found = page.evaluate(MIGRATE, [stored, list(handed)])
    page.close()
    entries = {(ns, set_name, key): text for ns, set_name, key, text in found["entries"]}
    assert found["moved"] == MOVED == fake_moved and found["again"] == 0
    assert winners(entries) == WINNERS
    assert entries == fake.entries
