"""What the page's migration of a version-1 document says it moved, where the document gives one set
and key twice: the entries it stored, each once, the last copy given kept (as an import counts,
``test_noticed_import_counts.py``), and a winner stored before stays. ``web/idb.js``'s
``migrateDocument`` once queued every count before any put, so Chromium said 2 of the one entry it
stored, while the fake said 1 and kept the first copy (found from outside, in Chromium:
``e2e/test_noticed_migrate_counts.py`` replays these records there)."""

from __future__ import annotations

import asyncio
import json

from fake_idb import FakeIdb

from wgtune import Key, StoredEntry
from wgtune.backends.indexeddb import IndexedDBEntries
from wgtune.store.format import canonical_namespace

NAMESPACE = {"wgtune": "0.1.0", "device": {"vendor": "v", "device": "d", "driver": "", "backend": "webgpu"},
             "tuner": "default"}
NS = canonical_namespace(NAMESPACE)


def entry(n: int, winner: int = 0) -> StoredEntry:
    return StoredEntry("matmul", Key({"n": n}), "sum", winner, f"k{winner}",
                       tuple({"name": f"k{i}", "median": 1.0, "samples": [1.0]} for i in range(winner + 1)))


# A version-1 document giving n=1 twice (winner 0, then 1), n=2 once, and n=3, which a newer winner
# already stored in the entries (winner 2) keeps.
DOCUMENT = {"format": "wgtune.cache/1", **NAMESPACE,
            "entries": [entry(1).to_json(), entry(2).to_json(), entry(1, winner=1).to_json(), entry(3).to_json()]}
STORED = {(NS, "matmul", '{"n":3}'): json.dumps(entry(3, winner=2).to_json())}
# n=1 (the last copy) and n=2: two entries moved.
MOVED = 2
WINNERS = {1: 1, 2: 0, 3: 2}


class Recording(FakeIdb):
    """The fake, keeping what ``migrate`` hands ``migrateDocument`` (the e2e test replays it)."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[tuple[str, str, bool]] = []

    async def migrateDocument(self, name, records, keep):
        self.handed.append((name, records, keep))
        return await super().migrateDocument(name, records, keep)


def migrated() -> tuple[Recording, int, int]:
    """The fake after ``migrate`` (twice) of DOCUMENT over STORED; what each call said it moved."""
    idb = Recording()
    idb.documents[NS] = json.dumps(DOCUMENT)
    idb.entries.update(STORED)

    async def scenario():
        database = IndexedDBEntries(idb)
        return await database.migrate(), await database.migrate()

    moved, again = asyncio.run(scenario())
    return idb, moved, again


def winners(entries: dict) -> dict[int, int]:
    return {json.loads(key)["n"]: json.loads(text)["winner"] for (_ns, _set, key), text in entries.items()}


def test_a_migration_counts_a_key_given_twice_once_and_keeps_the_last_copy():
    idb, moved, again = migrated()
    assert moved == MOVED and again == 0
    assert len(idb.entries) == len(WINNERS) and winners(idb.entries) == WINNERS
    assert idb.documents == {}
    # The key given twice reaches migrateDocument twice: the dedup is the helper's (web/idb.js's) to do.
    [(_name, records, keep)] = idb.handed
    assert [key for _ns, _set, key, _text in json.loads(records)].count('{"n":1}') == 2 and keep is False
