"""The stored-winners panel's view of IndexedDB: one page of one device's entries at a time.

A browser may hold winners for many devices and many thousands of keys (100k entries are a
plausible cache for an app that tunes every shape of a model). The panel must not read them all
after every tune: with a whole-store listing, one 1 s tune froze the page for up to 18.5 s. So it
asks for a page: the devices that have winners (a key cursor that jumps from one namespace to the
next, and a count each: ``idb.namespaceCounts``), the sets of the device shown (``setCounts``), and
``limit`` entries from ``offset`` (``entryPage``), which is all that is read and decoded.

Each entry comes with ``label``: the key as the page shows it above (``128x128x128``) where the key
is one of the page's registered keys, else its fields (``n=1000``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from wgtune.errors import StoreError
from wgtune.key import Key
from wgtune.store.format import namespace_of, namespaces_matching

from .indexeddb import decode_record

__all__ = ["MAX_PAGE", "stored_page"]

logger = logging.getLogger("wgtune")

MAX_PAGE = 500
"""The most entries one page may ask for."""


def _pairs(text: object, what: str) -> list[tuple[str, int]]:
    rows = json.loads(str(text))
    if not isinstance(rows, list) or not all(
        isinstance(row, list) and len(row) == 2 and isinstance(row[0], str) and isinstance(row[1], int) for row in rows
    ):
        raise StoreError(f"IndexedDB answered {what} that are not [name, count] pairs")
    return [(name, count) for name, count in rows]


async def stored_page(
    idb: Any,
    current: str,
    label: Callable[[str, Key], str],
    *,
    namespace: str | None = None,
    set_name: str | None = None,
    offset: int = 0,
    limit: int = 50,
) -> dict:
    """One page of the stored winners (see the module doc).

    ``current`` is this device's namespace (canonical text): shown when ``namespace`` is None or
    holds nothing (else, when it has none, the newest namespace text that reads as it: written with
    full versions before the namespace rule; those are marked ``current`` too).
    ``set_name`` None: every set of it. ``label(set, key)`` names a key as the page
    does. Answers ``{namespaces: [{namespace, fields, entries, current}], namespace, sets: [{name,
    entries}], set, total, offset, limit, entries: [entry JSON + label], damaged}``.
    """
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise StoreError(f"offset must be a whole number >= 0, got {offset!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise StoreError(f"limit must be a whole number from 1 to {MAX_PAGE}, got {limit!r}")
    namespaces = _pairs(await idb.namespaceCounts(), "namespaces")
    known = {name for name, _count in namespaces}
    mine = namespaces_matching(namespace_of(current), known)  # this device's, older rules' texts too
    chosen = namespace if namespace in known else mine[0] if mine else (namespaces[0][0] if namespaces else None)
    answer: dict[str, Any] = {
        "namespaces": [{"namespace": name, "fields": namespace_of(name), "entries": count,
                        "current": name in mine} for name, count in namespaces],
        "namespace": chosen, "sets": [], "set": None, "total": 0, "offset": offset, "limit": limit,
        "entries": [], "damaged": 0,
    }
    if chosen is None:
        return answer
    sets = _pairs(await idb.setCounts(chosen), "sets")
    chosen_set = set_name if set_name in {name for name, _count in sets} else None
    page = json.loads(str(await idb.entryPage(chosen, chosen_set, offset, limit)))
    entries, damaged = [], 0
    for record in page.get("records", []):
        try:
            _namespace, table, key_text, text = record
            entry = decode_record(table, key_text, text)
        except (StoreError, ValueError) as error:
            damaged += 1
            logger.debug("a damaged stored winner in the panel's page: %s", error)
            continue
        entries.append({**entry.to_json(), "label": label(entry.set_name, entry.key)})
    answer.update(sets=[{"name": name, "entries": count} for name, count in sets], set=chosen_set,
                  total=int(page.get("total", 0)), entries=entries, damaged=damaged)
    return answer
