"""wgpu-py's adapters as wgtune counts and describes them: which adapter an index names (one per
GPU of a node, less OpenGL's twins), whether a device is wgpu-native's, and a device's identity
and limits as the core reads them. :class:`~wgtune.backends.native.NativeDevice` opens devices
with these; a tuning farm's workers and a tuning process (``isolation.py``) name their adapter by
its index here.
"""

from __future__ import annotations

from typing import Any

import wgpu

from wgtune.errors import ConfigError
from wgtune.gpu.device import DeviceIdentity, DeviceLimits

__all__ = ["adapter_at", "device_identity", "device_limits", "indexed_adapters", "is_wgpu_native"]


def indexed_adapters(gpu: Any = None) -> list:
    """The adapters ``NativeDevice.open(adapter_index=)`` counts: wgpu-py's (or ``gpu``'s), less the
    OpenGL ones where another backend has any (see :func:`adapter_at`)."""
    every = (gpu or wgpu.gpu).enumerate_adapters_sync()
    native = [a for a in every if not str(a.info.get("backend_type", "")).startswith("OpenGL")]
    return native or every


def adapter_at(index: int, gpu: Any = None) -> Any:
    """The adapter at ``index`` of wgpu-py's list of adapters (in its order, which is stable for
    one machine and driver), less those of the OpenGL backend where another backend has any: each
    GPU shows up again through OpenGL (an H200's adapters were Vulkan, then the same GPU's
    OpenGL), so the indices count GPUs. A ConfigError naming the adapters when there is none."""
    adapters = indexed_adapters(gpu)
    if not 0 <= index < len(adapters):
        found = "; ".join(f"{i}: {a.info.get('device', '?')} ({a.info.get('backend_type', '?')})"
                          for i, a in enumerate(adapters)) or "none"
        raise ConfigError(f"no WebGPU adapter at index {index}; this machine has {len(adapters)}: {found}")
    return adapters[index]


def is_wgpu_native(device: Any) -> bool:
    """Whether ``device`` is wgpu-py's own (wgpu-native), not another implementation of its API."""
    return type(device).__module__.startswith("wgpu.backends.wgpu_native")


def device_identity(info: dict) -> DeviceIdentity:
    """The identity of a device on the adapter whose info (wgpu-py's ``adapter_info``) is ``info``."""
    vendor = info.get("vendor") or str(info.get("vendor_id", ""))
    device = info.get("device") or str(info.get("device_id", ""))
    return DeviceIdentity(
        vendor=str(vendor),
        device=str(device),
        driver=str(info.get("description", "")),
        backend=str(info.get("backend_type", "")),
    )


def device_limits(limits: dict) -> DeviceLimits:
    """The limits candidates are checked against, from a wgpu-py device's ``limits``."""
    return DeviceLimits(
        max_workgroup_storage=int(limits["max-compute-workgroup-storage-size"]),
        max_invocations=int(limits["max-compute-invocations-per-workgroup"]),
        max_workgroup_size=(
            int(limits["max-compute-workgroup-size-x"]),
            int(limits["max-compute-workgroup-size-y"]),
            int(limits["max-compute-workgroup-size-z"]),
        ),
        max_workgroups_per_dimension=int(limits["max-compute-workgroups-per-dimension"]),
        max_storage_binding=int(limits["max-storage-buffer-binding-size"]),
    )
