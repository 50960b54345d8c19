"""The store contract: what every store of winners promises, and what the tuner may ask of it.

Two levels, as every store has them: a :class:`Database` holds every namespace's winners (the
cache directory's SQLite database, the browser's IndexedDB), and a :class:`Store` is one
namespace of it, the one the tuner reads and writes (one device, one tuner name, one wgtune
version: ``format.namespace_for``). The implementations:

==========================  ===========================================  =======================================
world                       Database                                     Store
==========================  ===========================================  =======================================
native                      ``backends.sqlite_store.SqliteDatabase``     ``backends.sqlite_store.SqliteStore``
browser                     ``backends.indexeddb.IndexedDBDatabase``     ``backends.indexeddb.IndexedDBStore``
memory (tests, no cache)    none                                         ``format.MemoryStore``
old JSON documents          ``backends.file_store.LegacyDocuments``      ``documents.InlineStore`` (``FileStore``)
==========================  ===========================================  =======================================

The old JSON documents are a migration source only: the SQLite database merges them in when it
is first opened in their directory (``backends/sqlite_migrate.py``); nothing writes them any more
but their own tests. ``tests/test_store_contract.py`` runs the same suite over every row.

The contract (CubeCL's storage is the model: a failed read is a miss, never a crash):

**Reads never crash on damaged data.** ``load``, ``lookup`` and ``count`` answer a value. An entry
that does not decode (a damaged row, record or document entry; an entry whose text names another
set or key than the slot it is stored under) is skipped with a warning on the ``wgtune`` logger and
set aside where the store can keep it (SQLite: its ``damaged`` table; documents: a
``.corrupt-<time>`` copy; IndexedDB: left in place until a save of its key replaces it), so only
its key is tuned again; every other entry stays usable. A read raises only when the store as a
whole cannot be read: ``OSError`` (a locked, unreadable or vanished database) or ``StoreError`` (a
database of a newer wgtune, or not wgtune's). The tuner treats either as "nothing stored": every
key is a miss, and the tune goes on.

**Lookup answers one slot or nothing.** ``lookup(set_name, key)`` is the entry stored for exactly
that set and key, or None: never another set's or key's entry (a row whose entry names another
slot is damaged, as above), and never an entry of another namespace. Whether the entry is of the
set's *current* candidates (its checksum) is the caller's question, not the store's.

**A save replaces one slot and nothing else.** ``save(entry)`` replaces the entry of the same set
and key, and touches no other: entries another process or tab saved meanwhile (other keys, other
namespaces) are kept, whatever this handle loaded before (merged, never overwritten by a stale
whole). Of two concurrent saves of one slot the later commit wins. It answers None once the entry
is durable (committed: a process killed after the return keeps it), or :data:`WRITE_PENDING` when
the write goes on in the background (IndexedDB: written in order, in one transaction per batch;
``IndexedDBStore.flush`` waits for it, ``on_written`` hears it); the tune's record then says
"pending", not "stored". A save that cannot be written raises ``OSError`` (or what IndexedDB
raised, through ``flush``): the tuner logs it, and the winner still serves in this process.

**Clear forgets one namespace.** ``clear()`` removes every entry of the store's namespace and
nothing of any other; ``Database.clear`` removes every namespace.

**Old entries still decode.** A field added to ``StoredEntry`` gets a default, so entries stored
before it read back; a schema a store does not know (newer) is refused whole, never rewritten.

Optional behaviour is declared, not probed: a store that inherits :class:`Store` gets the default
of each member below (``read_by_key`` False, ``lookup`` through ``load``, ``count`` as
``len(load())``) and overrides what it does better. ``tests/test_store_contract.py`` checks that
every implementation has every member, so a verb added here fails the suite until each store has it.

The :class:`Database` verbs are coroutines, because IndexedDB's are; the SQLite database's never
suspend, so native callers (``wgtune cache``, ``wgtune bundle``, the farm) run them with
:func:`~wgtune.runner.run_inline`, with no event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO, Protocol, TextIO, runtime_checkable

from ..errors import ConfigError
from ..key import Key
from .format import WRITE_PENDING, MemoryStore, StoredEntry, canonical_namespace

__all__ = [
    "IMPORT_LIMIT",
    "WRITE_PENDING",
    "Cleared",
    "Database",
    "Listing",
    "MemoryStore",
    "NamespaceSummary",
    "Store",
    "checked_store",
    "protocol_members",
]

IMPORT_LIMIT = 512 * 1024 * 1024
"""The largest import read by default, in bytes (``wgtune cache import --max-bytes``): an import is
checked whole before anything is written, so what is read must be bounded."""


@runtime_checkable
class Store(Protocol):
    """One namespace's winners, as the tuner uses them (the contract is the module doc).

    Inherit it to get the documented defaults of the optional members.
    """

    namespace: dict
    """The namespace's fields (``format.check_namespace``'s copy): whose winners these are."""

    where: str
    """Where the winners are kept, for a person: a path, ``"IndexedDB"``, ``"memory"``."""

    read_by_key: bool = False
    """True: the tuner reads the store one key at a time through :meth:`lookup`, as a key is first
    claimed (a namespace of 100k entries costs nothing at open); False (the default): it reads
    the whole namespace once with :meth:`load` when it opens or reloads."""

    def load(self) -> list[StoredEntry]:
        """Every readable entry of the namespace, one per set and key. Damaged entries are skipped
        (and set aside); raises OSError or StoreError only when the store as a whole cannot be read."""
        ...

    def lookup(self, set_name: str, key: Key) -> StoredEntry | None:
        """The entry of exactly this set and key, or None (none stored, or it is damaged: set aside).
        Default: found in :meth:`load` (a whole read per call: a store that is read key by key
        overrides it with one indexed read)."""
        for entry in self.load():
            if entry.set_name == set_name and entry.key == key:
                return entry
        return None

    def save(self, entry: StoredEntry) -> str | None:
        """Replace the entry of ``entry``'s set and key, keeping every other: None once durable,
        :data:`WRITE_PENDING` while written in the background. Raises OSError when it cannot be written."""
        ...

    def clear(self) -> None:
        """Forget every entry of this namespace (no other namespace's)."""
        ...

    def count(self) -> int:
        """How many entries the namespace holds (``wgtune tune`` prints it). Default: ``len(load())``."""
        return len(self.load())


@dataclass(frozen=True)
class NamespaceSummary:
    """One namespace as a listing shows it: its fields, its entries, its damaged entries set aside."""

    namespace: dict
    entries: int
    damaged: int = 0


@dataclass(frozen=True)
class Cleared:
    """What :meth:`Database.clear` removed: namespaces that had winners, their entries, and the
    damaged entries kept aside (SQLite's ``damaged`` table; 0 where a store keeps none)."""

    namespaces: int
    entries: int
    damaged: int = 0

    def __iter__(self):  # unpacks as the (namespaces, entries, damaged) SQLite's clear_all answers
        return iter((self.namespaces, self.entries, self.damaged))


@dataclass(frozen=True)
class Listing:
    """Every readable entry of a database with its namespace, in export order (namespace, set,
    key), and why each unreadable one was left out (a listing moves nothing aside)."""

    entries: list[tuple[dict, StoredEntry]]
    problems: list[str]

    def by_namespace(self) -> list[tuple[dict, list[StoredEntry]]]:
        """The entries grouped per namespace, in order: what a bundle or an export takes."""
        grouped: dict[str, tuple[dict, list[StoredEntry]]] = {}
        for namespace, entry in self.entries:
            grouped.setdefault(canonical_namespace(namespace), (namespace, []))[1].append(entry)
        return list(grouped.values())


@runtime_checkable
class Database(Protocol):
    """Every namespace's winners in one place (the contract is the module doc). Every verb is a
    coroutine; natively they never suspend (run them with ``runner.run_inline``)."""

    where: str
    """Where the database is, for a person: its path, ``"IndexedDB wgtune"``."""

    async def namespaces(self) -> list[NamespaceSummary]:
        """Every namespace with entries (or damaged entries kept aside), sorted by its canonical text."""
        ...

    async def open(self, namespace: dict) -> Store:
        """The :class:`Store` of one namespace (made on its first save). Raises OSError or
        StoreError when the database cannot be used at all."""
        ...

    async def entries(self) -> Listing:
        """Every readable entry of every namespace; damaged ones are named in ``problems``, moved nowhere."""
        ...

    async def export_to(self, out: TextIO) -> tuple[int, int]:
        """Write every readable entry to ``out`` as one ``wgtune.export/1`` document (damaged
        entries left out, logged); (entries, namespaces) written."""
        ...

    async def import_from(self, source: str | os.PathLike | BinaryIO, *, max_bytes: int = IMPORT_LIMIT) -> int:
        """Merge the export (or one ``wgtune.cache/1`` document) in ``source``, a path or a binary
        file, into the database; the number of entries. All of it is read (at most ``max_bytes``)
        and checked before anything is written: a StoreError changes nothing. Each imported entry
        replaces the stored one of its namespace, set and key, as not checked on this device."""
        ...

    async def clear(self) -> Cleared:
        """Forget every namespace's entries (and the damaged entries kept aside)."""
        ...


def protocol_members(protocol: type) -> frozenset[str]:
    """The members a protocol declares (attributes and methods, not dunders): what
    ``tests/test_store_contract.py`` requires of every implementation."""
    names = set(getattr(protocol, "__annotations__", {}))
    names.update(name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_"))
    return frozenset(name for name in names if not name.startswith("_"))


def checked_store(store: object) -> Store:
    """``store`` when it has every member of :class:`Store`, else a ConfigError naming those it
    lacks (a store of one's own inherits :class:`Store` for the defaults of the optional ones)."""
    missing = sorted(name for name in protocol_members(Store) if not hasattr(store, name))
    if missing:
        raise ConfigError(f"{type(store).__name__} is not a wgtune store: it lacks {', '.join(missing)} "
                          "(see wgtune.store.contract.Store; inherit it for the optional members' defaults)")
    return store  # type: ignore[return-value]
