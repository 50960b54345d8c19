"""The native device: wgpu-py (Vulkan, Metal, DX12; Mesa's lavapipe on a machine without a GPU).

Works on the caller's own ``wgpu.GPUDevice`` and buffers, so a wgpu-py application tunes the
kernels it already has, or opens an adapter and a device itself (asking for ``timestamp-query``
when the adapter offers it). What the device does (binding, encoding, timing, reading back) is
:class:`~wgtune.backends.webgpu.WebGPUDevice`'s, through the thin
:class:`~wgtune.backends.wgpu_shim.WgpuShim` over wgpu-py; this module is :class:`NativeDevice`,
which opens one.
"""

from __future__ import annotations

from typing import Any

import wgpu

from wgtune.gpu.device import DeviceIdentity

from .native_adapters import adapter_at, device_identity, device_limits, indexed_adapters
from .webgpu import WebGPUDevice
from .wgpu_shim import WgpuShim

__all__ = ["NativeDevice"]

FEATURE_NAMES = {"subgroup": "subgroups"}
# Features a kernel family may use, asked for wherever the adapter has them.
WANTED_FEATURES = ("timestamp-query", "shader-f16", "subgroup", "subgroups", "shader-float32-atomic")


class NativeDevice(WebGPUDevice):
    """A wgpu-py ``GPUDevice`` behind wgtune's device interface.

    ``gpu`` is the ``GPUDevice``; ``adapter_info`` its adapter's info as a dict. Timed with GPU
    timestamps when ``use_timestamps`` and the device has ``timestamp-query``, else with the wall
    clock (``time.perf_counter``) around a full sync.
    """

    adapter_index: int | None = None
    """The adapter's index in :func:`indexed_adapters` when :meth:`open` was given one: where a
    tuning process (``isolation.py``) opens its own device, so that it tunes on the same GPU."""
    power_preference: str | None = None
    """The power preference :meth:`open` asked the default adapter with, when it did."""
    api = "wgpu"
    """The implementation of wgpu-py's API this device is on: ``"wgpu"`` (wgpu-native, the ``wgpu``
    package) or ``"dawn"`` (:class:`~wgtune.backends.dawn.DawnDevice`); a tuning process opens the same."""
    wanted_features: tuple[str, ...] = WANTED_FEATURES
    """Features asked for wherever the adapter has them."""
    shim_type: type[WgpuShim] = WgpuShim
    """The shim over this implementation of wgpu-py's API."""

    def __init__(self, device: wgpu.GPUDevice, *, use_timestamps: bool = True) -> None:
        self.gpu = device
        self.queue = device.queue
        info = dict(device.adapter_info) if getattr(device, "adapter_info", None) else {}
        self.identity = self.identity_of(info)
        self.adapter_info = info
        self.limits = device_limits(dict(device.limits))
        shim = self.shim_type(device)
        self.compile_width = shim.compile_width
        # A GPU leaves the host's cores free while it measures: the coming candidates compile meanwhile
        # (where the shim overlaps compiles at all).
        overlapped = info.get("adapter_type") != "CPU" and shim.compile_width > 1
        self.background_compiles = 4 * shim.compile_width if overlapped else 0
        self.idle_clocks = info.get("adapter_type") != "CPU"
        # WebGPU's names: wgpu-native says "subgroup" where the spec (and browsers) say "subgroups".
        self.features = frozenset(FEATURE_NAMES.get(f, f) for f in device.features)
        super().__init__(shim, timestamps=use_timestamps and "timestamp-query" in device.features)

    @classmethod
    def open(
        cls, power_preference: str = "high-performance", *, use_timestamps: bool = True,
        adapter_index: int | None = None, **options: Any,
    ) -> NativeDevice:
        """Open the default adapter's device, with ``timestamp-query`` when the adapter has it.

        ``adapter_index`` opens the adapter at that index of :func:`indexed_adapters` instead
        (one per GPU of a node: wgpu's list less the OpenGL duplicates; a tuning farm's worker
        opens its own); an index past the list is a ConfigError naming the adapters there are.
        ``options`` go to :meth:`open_adapter` (a subclass's own: none here)."""
        gpu = cls.navigator_gpu()
        if adapter_index is not None:
            adapter = adapter_at(adapter_index, gpu)
        else:
            adapter = gpu.request_adapter_sync(power_preference=power_preference)
        if adapter is None:
            raise RuntimeError(
                "no WebGPU adapter: install a Vulkan driver (on Debian without a GPU: "
                "apt-get install mesa-vulkan-drivers)"
            )
        device = cls.open_adapter(adapter, use_timestamps=use_timestamps, **options)
        device.adapter_index = adapter_index
        device.power_preference = power_preference if adapter_index is None else None
        return device

    @classmethod
    def open_adapter(cls, adapter: Any, *, use_timestamps: bool = True) -> NativeDevice:
        """A device on wgpu-py's ``adapter``, with the features a kernel family may use and the
        adapter's own compute limits (``timestamp-query`` only where ``use_timestamps``)."""
        features, limits = cls.device_request(adapter, use_timestamps)
        return cls(adapter.request_device_sync(required_features=features, required_limits=limits),
                   use_timestamps=use_timestamps)

    @classmethod
    def device_request(cls, adapter: Any, use_timestamps: bool) -> tuple[list[str], dict[str, int]]:
        """The features (``wanted_features`` the adapter has; ``timestamp-query`` only where
        ``use_timestamps``) and limits (the adapter's own compute ones, not WebGPU's defaults:
        candidates are checked against them) a device on ``adapter`` asks for."""
        features = [f for f in cls.wanted_features if f in adapter.features]
        if not use_timestamps and "timestamp-query" in features:
            features.remove("timestamp-query")
        limit_names = [name for name in adapter.limits if "compute" in name or "storage-buffer" in name
                       or name == "max-buffer-size"]
        return features, {name: adapter.limits[name] for name in limit_names}

    @staticmethod
    def navigator_gpu() -> Any:
        """The ``GPU`` object (WebGPU's ``navigator.gpu``) whose adapters this class opens: wgpu-py's
        (wgpu-native)."""
        return wgpu.gpu

    @classmethod
    def indexed_adapters(cls) -> list:
        """The adapters ``open(adapter_index=)`` counts (see :func:`indexed_adapters`)."""
        return indexed_adapters(cls.navigator_gpu())

    @staticmethod
    def identity_of(adapter_info: dict) -> DeviceIdentity:
        """The identity of a device on the adapter whose info is ``adapter_info``."""
        return device_identity(adapter_info)

    def close(self) -> None:
        """Release what wgtune holds for this device: its compile threads (up to 16, otherwise
        kept until the device is garbage-collected). The wgpu device stays open, as it may be the
        caller's; this device still works, and starts its threads again when it next compiles
        several kernels. ``with NativeDevice.open() as device:`` closes it at the end."""
        self.shim.close()

    def __enter__(self) -> NativeDevice:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def read_buffer_sync(self, buffer: Any) -> bytes:
        """The buffer's contents after all submitted work (an open batch's launches submitted
        first), without a coroutine (native only)."""
        self.flush()
        return bytes(self.queue.read_buffer(buffer))
