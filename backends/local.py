"""The native world assembled: a wgpu-py device, the file store, the records file.

:func:`open_tuner` is what a native user (and the CLI) calls: it reads the ``WGTUNE_*``
environment through :class:`~wgtune.Config`, opens the default adapter unless handed a device,
and keeps winners under the device's own namespace so one GPU's winners never serve another.
"""

from __future__ import annotations

from collections.abc import Callable

from wgtune.config import Config
from wgtune.tuner import Tuner

from .file_store import FileStore, namespace_for
from .native import NativeDevice
from .records import JsonlRecords

__all__ = ["open_tuner"]


def open_tuner(
    device: NativeDevice | object | None = None,
    *,
    config: Config | None = None,
    name: str = "default",
    observer: Callable[[object], None] | None = None,
) -> Tuner:
    """A tuner on ``device`` (a NativeDevice, a ``wgpu.GPUDevice``, or None for the default adapter).

    Winners go to the file store under ``config.cache_dir`` (default: the user cache directory)
    unless the cache is off; records of every tune go to ``config.records`` when set.
    """
    config = config if config is not None else Config.from_env()
    if device is None:
        device = NativeDevice.open()
    elif not isinstance(device, NativeDevice):
        device = NativeDevice(device)
    store = None
    if config.cache:
        store = FileStore(config.cache_dir, namespace_for(device.identity, name))
    records = JsonlRecords(config.records) if config.records else None
    return Tuner(device, store=store, records=records, config=config, observer=observer)
