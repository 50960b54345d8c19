"""The native store: one JSON document per namespace, as files of the user's cache directory.

A namespace (one device, one tuner name, one wgtune version; see :func:`namespace_for`) maps to
one file whose name is readable (the device slug, the tuner, the version) and unique (a short
sha256 of the namespace's canonical JSON), e.g. ``mesa-llvmpipe-vulkan--default--0.1.0--1a2b3c4d.json``.

What happens to documents (merging, damaged data, export, import) is the core's
(:mod:`wgtune.store.documents`); this module is its key-value store over a directory,
:class:`CacheDirectory`:

- several processes may tune on one machine at once, so every "read, merge, write" is made under
  a :class:`filelock.FileLock` on a sibling ``.lock`` file;
- a write replaces the file atomically (temp file in the same directory, fsync, ``os.replace``):
  a reader never sees half a document;
- a damaged document is set aside as ``<name>.corrupt-<timestamp>`` (kept for a post-mortem);
  only the newest :data:`KEEP_CORRUPT` copies of each document are kept, so they cannot pile up;
- a writer killed mid-save leaves its temp file: opening the directory removes temp files whose
  writer is gone (its process, on this machine) or that are older than :data:`STALE_SECONDS`;
- the directory may hold other programs' files (a cache directory shared with other tools, a
  ``package.json``): only files named as wgtune names its own (:func:`is_wgtune_file`) are read,
  moved or removed.

An I/O failure (an unreadable directory, a full disk) raises :class:`OSError`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, TextIO

import platformdirs

from wgtune.errors import StoreError
from wgtune.gpu.device import DeviceIdentity
from wgtune.store.contract import IMPORT_LIMIT, Cleared, Listing, NamespaceSummary
from wgtune.store.documents import DocumentStore, InlineStore
from wgtune.store.format import canonical_namespace, namespace_for

# Where a directory's own files are told apart from others', locked, tidied and set aside; the
# names stay importable from here, where they were first (_TEMP, _host_tag: a temp file's name).
from .cache_files import (  # noqa: F401
    _TEMP,
    DATABASE_NAME,
    KEEP_CORRUPT,
    LOCK_TIMEOUT,
    STALE_SECONDS,
    _host_tag,
    file_lock,
    is_document_name,
    is_wgtune_file,
    remove_leftovers,
    set_aside_if_not_sqlite,
)

__all__ = [
    "DATABASE_NAME",
    "CacheDirectory",
    "FileStore",
    "LegacyDocuments",
    "default_cache_dir",
    "document_name",
    "document_store",
    "file_lock",
    "is_document_name",
    "is_wgtune_file",
    "namespace_for",
    "remove_leftovers",
]


def default_cache_dir() -> Path:
    """The platform's user cache directory for wgtune: where winners go when no directory is given.

    ``WGTUNE_CACHE_DIR`` is read by :class:`~wgtune.Config` (``Config.cache_dir``), not here.
    """
    return Path(platformdirs.user_cache_dir("wgtune"))


def _slug(text: str, fallback: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-.").lower()[:60] or fallback


def _device_slug(device: object) -> str:
    if isinstance(device, dict):
        try:
            return DeviceIdentity(**{k: str(v) for k, v in device.items()}).slug()
        except TypeError:  # not exactly an identity's fields: slug what is there
            return _slug("-".join(str(v) for v in device.values()), "device")
    return "device"


def document_name(namespace: dict) -> str:
    """The file name of ``namespace``'s document: readable slug, then a hash of the whole namespace."""
    digest = hashlib.sha256(canonical_namespace(namespace).encode("utf-8")).hexdigest()[:8]
    parts = (
        _device_slug(namespace.get("device")),
        _slug(str(namespace.get("tuner", "default")), "default"),
        _slug(str(namespace.get("wgtune", "")), "unversioned"),
        digest,
    )
    return "--".join(parts) + ".json"


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` all at once: temp file beside it, fsync, rename over."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.{_host_tag()}-{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable; not possible everywhere (Windows), so best effort
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


class CacheDirectory:
    """The core's key-value store (:class:`~wgtune.store.documents.KeyValueStore`) over a directory:
    one ``.json`` file per document, named by :func:`document_name`. Its coroutines never suspend.

    ``directory`` None means :func:`default_cache_dir`. It is created at the first write.
    Opening it removes dead writers' temp files and surplus set-aside copies
    (:func:`remove_leftovers`).
    """

    def __init__(self, directory: str | os.PathLike | None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        remove_leftovers(self.directory)

    def __repr__(self) -> str:
        return f"CacheDirectory({str(self.directory)!r})"

    def name_for(self, namespace: dict) -> str:
        return document_name(namespace)

    def path_of(self, name: str) -> Path:
        return self.directory / name

    def describe(self, name: str) -> str:
        return str(self.path_of(name))

    async def get(self, name: str) -> str | None:
        try:
            data = self.path_of(name).read_bytes()
        except FileNotFoundError:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise StoreError(f"not UTF-8 text: {error}") from None

    async def put(self, name: str, text: str) -> None:
        """Write under :meth:`locked` (which creates the directory)."""
        _write_atomic(self.path_of(name), text.encode("utf-8"))

    async def remove(self, name: str) -> bool:
        """Remove the document's file (its lock file stays)."""
        try:
            self.path_of(name).unlink()
        except FileNotFoundError:
            return False
        return True

    async def names(self) -> list[str]:
        """The document files, sorted; [] if the directory does not exist. Set-aside copies
        (``.corrupt-*``), lock and temp files are not documents, nor another program's ``.json``
        (:func:`is_document_name`)."""
        if not self.directory.exists():
            return []
        return sorted(path.name for path in self.directory.iterdir() if is_document_name(path.name) and path.is_file())

    @asynccontextmanager
    async def locked(self, name: str) -> AsyncIterator[None]:
        """The document's file lock (``<name>.lock``), shared with every process on this machine."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with file_lock(str(self.path_of(name)) + ".lock"):
            yield

    async def set_aside(self, name: str, *, keep_original: bool) -> str:
        """Keep the document's bytes as ``<name>.corrupt-<timestamp>`` beside it; the copy's name."""
        path = self.path_of(name)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = path.with_name(f"{path.name}.corrupt-{stamp}")
        if keep_original:
            aside.write_bytes(path.read_bytes())  # under the lock: the bytes just read
        else:
            os.replace(path, aside)  # every writer holds the lock: nobody rewrote it meanwhile
        remove_leftovers(self.directory)  # the copies of damage that keeps coming back stay few
        return aside.name


def document_store(directory: str | os.PathLike | None) -> DocumentStore:
    """Every namespace's documents in ``directory`` (None: :func:`default_cache_dir`): for the CLI."""
    return DocumentStore(CacheDirectory(directory))


class FileStore(InlineStore):
    """Keeps one namespace's winners in one JSON file under ``directory`` (see the module doc):
    the tuner's store protocol, ``load``/``save``/``clear``, run inline.

    ``directory`` None means :func:`default_cache_dir`. It is created at the first save.
    """

    def __init__(self, directory: str | os.PathLike | None, namespace: dict) -> None:
        cache = CacheDirectory(directory)
        super().__init__(cache, namespace)
        self.directory = cache.directory
        self.path = cache.path_of(cache.name_for(self.namespace))

    def __repr__(self) -> str:
        return f"FileStore({str(self.path)!r})"

    def clear(self) -> None:
        """Forget every entry of the namespace (removes its document; the lock file stays)."""
        if self.directory.is_dir():  # nothing stored: no directory to create for the lock
            super().clear()


class LegacyDocuments:
    """The old documents of a directory as the store contract's :class:`~wgtune.store.contract.Database`.

    A migration source only: the SQLite database takes them in when it is opened in their
    directory (``sqlite_migrate.py``), and nothing else opens them. It keeps the contract, so
    that what a migration reads is what the old store promised (``tests/test_store_contract.py``).
    """

    def __init__(self, directory: str | os.PathLike | None) -> None:
        self.key_values = CacheDirectory(directory)
        self.documents = DocumentStore(self.key_values)
        self.where = str(self.key_values.directory)

    def __repr__(self) -> str:
        return f"LegacyDocuments({self.where!r})"

    async def namespaces(self) -> list[NamespaceSummary]:
        found = [NamespaceSummary(document.namespace, len(document.entries), len(document.problems))
                 for document in await self.documents.documents() if document.damage is None]
        return sorted(found, key=lambda summary: canonical_namespace(summary.namespace))

    async def open(self, namespace: dict) -> InlineStore:
        return InlineStore(self.key_values, namespace)

    async def entries(self) -> Listing:
        found, problems = [], []
        for document in await self.documents.documents():
            if document.damage is not None:
                problems.append(f"{document.where}: {document.damage}")
                continue
            found.extend((document.namespace, entry) for entry in
                         sorted(document.entries, key=lambda e: (e.set_name, e.key.to_json())))
            problems.extend(f"{document.where}: {problem}" for problem in document.problems)
        return Listing(found, problems)

    async def export_to(self, out: TextIO) -> tuple[int, int]:
        document = await self.documents.export()
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        namespaces = document["namespaces"]
        return sum(len(namespace["entries"]) for namespace in namespaces), len(namespaces)

    async def import_from(self, source: str | os.PathLike | BinaryIO, *, max_bytes: int = IMPORT_LIMIT) -> int:
        if hasattr(source, "read"):
            data = source.read(max_bytes + 1)  # type: ignore[union-attr]
        else:
            with Path(source).open("rb") as handle:
                data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise StoreError(f"the import is larger than the limit of {max_bytes} bytes")
        return await self.documents.import_document(DocumentStore.check_import(data))

    async def clear(self) -> Cleared:
        entries = sum(len(document.entries) for document in await self.documents.documents())
        return Cleared(await self.documents.clear_all(), entries)
