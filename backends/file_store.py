"""The native store: one JSON document per namespace, in the user's cache directory.

A namespace (one device, one tuner name, one wgtune version; see :func:`namespace_for`) maps to
one file whose name is readable (the device slug, the tuner, the version) and unique (a short
sha256 of the namespace's canonical JSON), e.g. ``mesa-llvmpipe-vulkan--default--0.1.0--1a2b3c4d.json``.

Several processes may tune on one machine at once, so every write is made under a
:class:`filelock.FileLock` on a sibling ``.lock`` file and re-reads the document first (another
process may have added entries since this one loaded), then replaces it atomically (temp file in
the same directory, fsync, ``os.replace``): a reader never sees half a document.

Damaged data is never fatal: a document that cannot be decoded is moved aside to
``<name>.corrupt-<timestamp>`` (kept for a post-mortem) with a warning, and reads as empty. An
I/O failure (an unreadable directory, a full disk) raises :class:`OSError`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import platformdirs
from filelock import FileLock

from wgtune.device import DeviceIdentity
from wgtune.errors import StoreError
from wgtune.store import (
    StoredEntry,
    canonical_namespace,
    decode_document,
    decode_document_leniently,
    decode_export,
    encode_document,
    encode_export,
    namespace_for,
)

__all__ = [
    "FileStore",
    "clear_all",
    "default_cache_dir",
    "document_name",
    "export_all",
    "import_document",
    "list_documents",
    "namespace_for",
    "read_document",
]

logger = logging.getLogger("wgtune")

LOCK_TIMEOUT = 60.0
"""Seconds a write waits for another process's lock; ``filelock.Timeout`` is an OSError."""

_RESERVED = ("format", "entries")  # document fields: a namespace field of these names would clash


def default_cache_dir() -> Path:
    """``$WGTUNE_CACHE_DIR`` when set, else the platform's user cache directory for wgtune."""
    override = os.environ.get("WGTUNE_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("wgtune"))


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


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    logger.warning("%s", message)


def _parse(data: bytes) -> object:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise StoreError(f"not JSON: {error}") from None


def _decode(data: bytes) -> tuple[dict, list[StoredEntry]]:
    """A document's namespace and entries from its bytes; StoreError if any of it is damaged."""
    return decode_document(_parse(data))


def read_document(path: str | os.PathLike) -> tuple[dict, list[StoredEntry]]:
    """Read one document file; StoreError when it is damaged, OSError when it cannot be read."""
    path = Path(path)
    try:
        return _decode(path.read_bytes())
    except StoreError as error:
        raise StoreError(f"{path}: {error}") from None


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` all at once: temp file beside it, fsync, rename over."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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


class FileStore:
    """Keeps one namespace's winners in one JSON file under ``directory`` (see the module doc).

    ``directory`` None means :func:`default_cache_dir`. It is created at the first save.
    """

    def __init__(self, directory: str | os.PathLike | None, namespace: dict) -> None:
        clash = [name for name in _RESERVED if name in namespace]
        if clash:
            raise ValueError(f"namespace fields {clash} clash with the document's own fields")
        # A JSON round trip: a copy the caller cannot mutate, and the form it will have on disk.
        self.namespace: dict = json.loads(canonical_namespace(namespace))
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / document_name(self.namespace)
        self._lock = FileLock(str(self.path) + ".lock", timeout=LOCK_TIMEOUT)

    def __repr__(self) -> str:
        return f"FileStore({str(self.path)!r})"

    # -- reading ------------------------------------------------------------------------------

    def _read(self) -> tuple[list[StoredEntry], list[str], bytes] | None:
        """The document's good entries, what was wrong with the others, and its bytes; None when
        there is no document. Raises StoreError when the document as a whole is damaged."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        namespace, entries, problems = decode_document_leniently(_parse(data))
        if canonical_namespace(namespace) != canonical_namespace(self.namespace):
            raise StoreError(f"the document is for namespace {canonical_namespace(namespace)}, not this one")
        return entries, problems, data

    def _set_aside(self, data: bytes | None, why: str) -> None:
        """Keep a damaged document's bytes beside it for a post-mortem, and say so."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        if data is None:
            os.replace(self.path, aside)  # every writer holds the lock: nobody rewrote it meanwhile
        else:
            aside.write_bytes(data)
        _warn(f"wgtune: the cache document {self.path} is damaged ({why}); kept a copy as {aside.name}")

    def _read_or_set_aside(self) -> list[StoredEntry]:
        """The good entries of the current document. Call under the lock, before rewriting it:
        a damaged document is moved aside; damaged entries are kept in a copy beside it, and
        the rewrite that follows drops them."""
        try:
            found = self._read()
        except StoreError as error:
            self._set_aside(None, str(error))
            return []
        if found is None:
            return []
        entries, problems, data = found
        if problems:
            self._set_aside(data, f"{len(problems)} unreadable entr{'y' if len(problems) == 1 else 'ies'}: "
                                  f"{problems[0]}")
        return entries

    def load(self) -> list[StoredEntry]:
        """Every readable entry of the namespace; [] when there is none or the document was damaged.

        Damaged entries are skipped with a warning; the other winners stay usable.
        """
        try:
            found = self._read()  # no lock: writes are atomic, a read sees a whole document
        except StoreError as error:
            try:
                with self._lock:  # re-read under the lock: it may have been rewritten meanwhile
                    return self._read_or_set_aside()
            except OSError as failure:  # a read-only cache, say: damaged data still never raises
                _warn(
                    f"wgtune: the cache document {self.path} is damaged ({error}) and could not be "
                    f"moved aside ({failure}); ignoring it"
                )
                return []
        if found is None:
            return []
        entries, problems, _data = found
        if problems:
            _warn(f"wgtune: skipped {len(problems)} damaged entr{'y' if len(problems) == 1 else 'ies'} of "
                  f"{self.path}: {problems[0]}")
        return entries

    # -- writing ------------------------------------------------------------------------------

    def save(self, entry: StoredEntry) -> None:
        """Keep ``entry``, replacing the one with the same table and key. Raises OSError."""
        self.save_many([entry])

    def save_many(self, entries: Iterable[StoredEntry]) -> None:
        """Merge ``entries`` (later ones win a slot) into the document in one locked write."""
        entries = list(entries)
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._lock:
            merged = {entry.slot: entry for entry in self._read_or_set_aside()}
            merged.update((entry.slot, entry) for entry in entries)
            document = encode_document(self.namespace, merged.values())
            _write_atomic(self.path, _dump(document))

    def clear(self) -> None:
        """Forget every entry of the namespace (removes its document; the lock file stays)."""
        if not self.directory.is_dir():
            return
        with self._lock:
            self.path.unlink(missing_ok=True)


def _dump(document: dict) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# -- the whole directory, for the CLI -------------------------------------------------------------


def list_documents(directory: str | os.PathLike) -> list[Path]:
    """The document files in ``directory``, sorted; [] if it does not exist. Raises OSError."""
    directory = Path(directory)
    if not directory.exists():
        return []
    return sorted(path for path in directory.iterdir() if path.suffix == ".json" and path.is_file())


def export_all(directory: str | os.PathLike) -> dict:
    """Every readable document of ``directory`` as one export document; damaged ones are warned of."""
    documents = []
    for path in list_documents(directory):
        try:
            namespace, entries = read_document(path)
        except StoreError as error:
            _warn(f"wgtune: not exporting {error}")
            continue
        documents.append(encode_document(namespace, entries))
    return encode_export(documents)


def import_document(directory: str | os.PathLike, obj: object) -> int:
    """Merge an export (or one namespace document) into ``directory``; the number of entries.

    The whole of ``obj`` is decoded before anything is written, so a bad one (StoreError)
    changes nothing. Imported entries replace stored ones of the same table and key.
    """
    decoded = decode_export(obj)
    for namespace, _entries in decoded:
        if any(name in namespace for name in _RESERVED):  # decode_document strips these; be sure
            raise StoreError(f"namespace {namespace!r} has reserved fields")
    count = 0
    for namespace, entries in decoded:
        FileStore(directory, namespace).save_many(entries)
        count += len(entries)
    return count


def clear_all(directory: str | os.PathLike) -> int:
    """Remove every document of ``directory`` (each under its lock); how many were removed."""
    removed = 0
    for path in list_documents(directory):
        with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT):
            try:
                path.unlink()
            except FileNotFoundError:
                continue
        removed += 1
    return removed
