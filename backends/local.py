"""The native world assembled: a wgpu-py device, the SQLite store, the records file.

:func:`open_tuner` is what a native user (and the CLI) calls: it reads the ``WGTUNE_*``
environment through :class:`~wgtune.Config`, opens the default adapter unless handed a device,
and keeps winners under the device's own namespace so one GPU's winners never serve another.
"""

from __future__ import annotations

from collections.abc import Callable

from wgtune.config import Config
from wgtune.errors import StoreError
from wgtune.log import logger
from wgtune.store import namespace_for
from wgtune.tuner import Tuner

from .isolation import ChildLaunchGuard
from .native import NativeDevice
from .records import JsonlRecords
from .sqlite_store import SqliteStore

__all__ = ["open_store", "open_tuner"]


def open_tuner(
    device: NativeDevice | object | None = None,
    *,
    config: Config | None = None,
    name: str = "default",
    observer: Callable[[object], None] | None = None,
    isolate: bool | None = None,
) -> Tuner:
    """A tuner on ``device`` (a NativeDevice, a ``wgpu.GPUDevice``, or None for the default adapter).

    Winners go to the SQLite store (``wgtune.sqlite3``) under ``config.cache_dir`` (default: the user
    cache directory; old JSON documents there are migrated into it) unless the cache is off. A store
    that cannot be opened (the directory is a file, the database is unreadable or of a newer wgtune)
    is a warning on the ``wgtune`` logger, and the tuner keeps winners in this process only. Records
    of every tune go to ``config.records`` when set. ``isolate`` (default ``config.isolate``,
    ``WGTUNE_ISOLATE``) runs each candidate's first launch in a child process killed at the time
    limit (``isolation.py``).
    """
    config = config if config is not None else Config.from_env()
    if device is None:
        device = NativeDevice.open()
    elif not isinstance(device, NativeDevice):
        device = NativeDevice(device)
    store = None
    if config.cache:
        store = open_store(config.cache_dir, namespace_for(device.identity, name))
    records = JsonlRecords(config.records) if config.records else None
    isolate = config.isolate if isolate is None else isolate
    guard = ChildLaunchGuard(device) if isolate else None
    return Tuner(device, store=store, records=records, config=config, observer=observer, guard=guard)


def open_store(directory: str | None, namespace: dict) -> SqliteStore | None:
    """The namespace's store in ``directory``, opened now; None (with a warning) when it cannot be used."""
    store = SqliteStore(directory, namespace)
    try:
        return store.open()
    except (OSError, StoreError) as error:
        logger.warning("could not open the winners' store, keeping winners in this process only: %s", error)
        return None
