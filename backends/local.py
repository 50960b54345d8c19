"""The native world assembled: a wgpu-py device, the SQLite store, the records file.

:func:`open_tuner` is what a native user (and the CLI) calls: it reads the ``WGTUNE_*``
environment through :class:`~wgtune.Config`, opens the default adapter unless handed a device,
and keeps winners under the device's own namespace so one GPU's winners never serve another.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from wgtune.config import Config
from wgtune.errors import StoreError
from wgtune.runner import run_inline
from wgtune.store.bundle import BUNDLE_LIMIT, check_bundle_size, entries_for, parse_bundle, read_bundle
from wgtune.store.contract import Store
from wgtune.store.format import StoredEntry, namespace_for
from wgtune.tune.log import logger, show_log_on_stderr
from wgtune.tuner import Tuner

from .cache_transfer import SqliteDatabase
from .isolation import WorkerGuard, begin_tuning_process, spec_for
from .native import NativeDevice
from .native_adapters import is_wgpu_native
from .records import JsonlRecords

__all__ = ["dry_run_leaves_unmade", "load_bundle", "open_store", "open_tuner"]


def open_tuner(
    device: NativeDevice | object | None = None,
    *,
    config: Config | None = None,
    name: str = "default",
    observer: Callable[[object], None] | None = None,
    isolate: bool | None = None,
    bundle: str | os.PathLike | dict | None = None,
) -> Tuner:
    """A tuner on ``device`` (a NativeDevice or DawnDevice, a ``wgpu.GPUDevice`` or wgpudawn's, or None
    for the default adapter).

    Winners go to the SQLite store (``wgtune.sqlite3``) under ``config.cache_dir`` (default: the user
    cache directory; old JSON documents there are migrated into it) unless the cache is off. A dry
    run (``config.dry_run``) stores nothing: it reads the winners stored there, and where nothing
    is stored yet (:func:`dry_run_leaves_unmade`) the store is not opened, so no database is made. A store
    that cannot be opened (the directory is a file, the database is unreadable or of a newer wgtune)
    is a warning on the ``wgtune`` logger, and the tuner keeps winners in this process only. Records
    of every tune go to ``config.records`` when set. ``isolate`` (default ``config.isolate``, on;
    ``WGTUNE_ISOLATE=0`` turns it off) runs every tune's launches in a tuning process of the
    tuner's, where a launch past the time limit is killed and its candidate is a Timeout
    (``isolation.py``); ``tuner.guard.close()`` stops that process. It starts at the first tune,
    or here, beside the device's opening, when every key will tune: the cache off, or nothing
    stored in it yet, and no bundle.

    ``bundle`` (a bundle file's path, or the bundle itself: ``wgtune bundle``) seeds the tuner's
    cache with the bundle's winners for this device and tuner name: a known GPU gets Hits at
    once and tunes nothing; a winner of other candidates (stale) is tuned as usual, and a winner
    stored here always wins (``TuneCache.seed``: seeds are kept in memory, never stored). A
    bundle that cannot be read raises StoreError (or OSError) before any device work. Not given,
    it is ``config.bundle`` (``WGTUNE_BUNDLE``, ``wgtune tune --bundle``), if any.
    """
    config = config if config is not None else Config.from_env()
    if config.log_to_stderr:  # WGTUNE_LOG set: what opening the store says shows too, not only the tunes
        show_log_on_stderr(config.log_level)
    bundle = bundle if bundle is not None else config.bundle
    documents = load_bundle(bundle) if bundle is not None else None
    isolate = config.isolate if isolate is None else isolate
    nothing_stored = _nothing_stored(config)
    unmade = _unmade(config, nothing_stored)
    # Where every key will tune, the tuning process starts now: beside this device's opening.
    begin_early = isolate and documents is None and nothing_stored
    early = None
    if device is None:
        early = begin_tuning_process(spec_for(None)) if begin_early else None
        try:
            device = NativeDevice.open()
        except BaseException:
            if early is not None:
                early.link.close()
            raise
    elif not isinstance(device, NativeDevice):
        device = NativeDevice(device) if is_wgpu_native(device) else _other_device(device)
    if begin_early and early is None:
        early = begin_tuning_process(spec_for(device))
    store = None
    if config.cache and unmade is None:
        store = open_store(config.cache_dir, namespace_for(device.identity, name))
    records = JsonlRecords(config.records) if config.records else None
    guard = WorkerGuard(device, time_limit=config.time_limit, early=early) if isolate else None
    tuner = Tuner(device, store=store, records=records, config=config, observer=observer, guard=guard)
    if documents is not None:
        seeds = entries_for(documents, namespace_for(device.identity, name))
        tuner.cache.seed(seeds)
        logger.info("seeded %d winner(s) for this device from the bundle", len(seeds))
    return tuner


def dry_run_leaves_unmade(config: Config) -> str | None:
    """For a dry run with the cache on and nothing stored in it yet (no database, no old document),
    the database's path: the run has nothing to read there and stores nothing, so :func:`open_tuner`
    does not open the store, which would make the database. None otherwise (the store is opened:
    a dry run reads the winners stored)."""
    return _unmade(config, _nothing_stored(config))


def _unmade(config: Config, nothing_stored: bool) -> str | None:
    """:func:`dry_run_leaves_unmade`, with :func:`_nothing_stored` already read."""
    if not (config.dry_run and config.cache and nothing_stored):
        return None
    return SqliteDatabase(config.cache_dir).where


def _nothing_stored(config: Config) -> bool:
    """Whether every key will tune: the cache is off, or nothing is stored in its directory."""
    if not config.cache:
        return True
    try:
        with SqliteDatabase(config.cache_dir) as database:
            return database.is_empty_cache()
    except (OSError, StoreError):
        return False  # opening the store says what is wrong


def _other_device(device: object) -> NativeDevice:
    """A device of another implementation of wgpu-py's API: Dawn's (``wgpudawn``), else wgpu-py's
    own shim over it as it is."""
    if type(device).__module__.startswith("wgpudawn."):
        from .dawn import DawnDevice

        return DawnDevice(device)
    return NativeDevice(device)


def load_bundle(bundle: str | os.PathLike | dict, *,
                max_bytes: int = BUNDLE_LIMIT) -> list[tuple[dict, list[StoredEntry]]]:
    """A bundle's namespaces and entries (``bundle.read_bundle``) from its file or its object.
    Raises StoreError naming what is wrong (the file's path included), a file over ``max_bytes``
    before it is read; OSError when unreadable."""
    if isinstance(bundle, dict):
        return read_bundle(bundle)
    try:
        with open(bundle, "rb") as file:
            check_bundle_size(os.fstat(file.fileno()).st_size, max_bytes)
            # at most max_bytes + 1: bounded even if it grew, or stat cannot tell (a pipe)
            return parse_bundle(file.read(max_bytes + 1), max_bytes=max_bytes)
    except StoreError as bad:
        raise StoreError(f"{os.fspath(bundle)}: {bad}") from None


def open_store(directory: str | None, namespace: dict) -> Store | None:
    """The namespace's store in ``directory``'s database (``SqliteDatabase.open``), opened now; None
    (with a warning) when it cannot be used."""
    try:
        return run_inline(SqliteDatabase(directory).open(namespace))
    except (OSError, StoreError) as error:
        logger.warning("could not open the winners' store, keeping winners in this process only: %s", error)
        return None
