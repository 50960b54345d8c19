"""Dawn devices: wgpu-py's API over Google's Dawn (PyPI's ``wgpudawn``), for what wgpu-native lacks.

wgtune's native device runs on wgpu-py over wgpu-native. Dawn, the WebGPU of Chromium, offers what a
browser will: on an NVIDIA H200 (Vulkan) ``chromium-experimental-subgroup-matrix``, the tensor cores
from WGSL (f16 products summed in f32), which wgpu-native 29 refuses to turn on (``docs/cooperative-
matrix.md``). ``wgpudawn`` implements wgpu-py's API, so a :class:`DawnDevice` is a
:class:`~wgtune.backends.native.NativeDevice` on another ``GPU`` object: the same shim but for its
calls, all on the calling thread with Dawn's own workers compiling the pipelines (``dawn_shim.py``),
Dawn's WGSL as the spec writes it (``enable subgroups;`` kept), every shader compiled with WebGPU's
runtime checks (Dawn has no per-module way out, as browsers have none; a whole device can go without
them: :meth:`DawnDevice.open_adapter`), and a pass's commands through wgpu-py's methods.

Dawn hides its experimental features behind toggles, set when its instance starts:
``allow_unsafe_apis`` (the subgroup matrices) and ``vulkan_enable_f16_on_nvidia`` (Dawn turns f16
off on NVIDIA's Vulkan driver otherwise, and the f16 configurations with it). Its devices quantize
timestamps unless told not to (``timestamp_quantization`` off). The identity's backend is
``"Dawn Vulkan"`` (say): winners tuned here, where candidates on subgroup matrices may win, are
kept apart from wgpu-native's on the same GPU.

Install with ``pip install 'wgtune[dawn]'``; without it :meth:`DawnDevice.open` raises ConfigError.
"""

from __future__ import annotations

import contextlib
from typing import Any

from wgtune.errors import ConfigError
from wgtune.gpu.device import DeviceIdentity
from wgtune.kernels.matmul.subgroup_matrix import SUBGROUP_MATRIX

from .dawn_shim import DawnShim
from .native import WANTED_FEATURES, NativeDevice
from .native_adapters import device_identity

__all__ = ["INSTANCE_TOGGLES", "SUBGROUP_MATRIX", "DawnDevice"]

INSTANCE_TOGGLES = ("allow_unsafe_apis", "vulkan_enable_f16_on_nvidia")
DEVICE_TOGGLES_OFF = ("timestamp_quantization",)
UNCHECKED_TOGGLES = ("disable_robustness",)  # DawnDevice.open(runtime_checks=False)
BACKEND_PREFIX = "Dawn "


def _wgpudawn() -> Any:
    try:
        import wgpudawn
    except ImportError:
        raise ConfigError("Dawn devices need the wgpudawn package: pip install 'wgtune[dawn]'") from None
    return wgpudawn


_toggles_set = False


def _gpu_with_toggles() -> Any:
    """wgpudawn's ``GPU``, its instance started with :data:`INSTANCE_TOGGLES` where this is the
    first use of it in the process (an instance already started keeps its own)."""
    global _toggles_set
    wgpudawn = _wgpudawn()
    if not _toggles_set:
        from wgpudawn.backends.dawn import extras

        known = extras.all_toggles()
        with contextlib.suppress(RuntimeError):  # the instance exists already: its toggles stand
            extras.set_instance_extras(enable_toggles=[name for name in INSTANCE_TOGGLES if name in known])
        _toggles_set = True
    return wgpudawn.gpu


class DawnDevice(NativeDevice):
    """A ``wgpudawn`` ``GPUDevice`` behind wgtune's device interface (see the module doc).

    ``subgroup_matrix_configs`` are the adapter's subgroup-matrix configurations as Dawn lists them
    (dicts with ``m``, ``n``, ``k``, ``component_type``, ``result_component_type``): empty where it
    has none. Kernels on them declare the feature; a device without it refuses them uncompiled."""

    api = "dawn"
    wanted_features = (*WANTED_FEATURES, SUBGROUP_MATRIX)
    shim_type = DawnShim
    runtime_checks = True
    """False where the device was opened without Dawn's robustness (:meth:`open_adapter`)."""

    def __init__(self, device: Any, *, use_timestamps: bool = True) -> None:
        super().__init__(device, use_timestamps=use_timestamps)
        self.subgroup_matrix_configs: list[dict] = []
        if SUBGROUP_MATRIX in self.features:
            from wgpudawn.backends.dawn import extras

            try:
                properties = extras.get_adapter_properties(device.adapter)
                self.subgroup_matrix_configs = list(properties.get("subgroup_matrix_configs", []))
            except Exception:  # what the adapter says is a hint; the kernels' compiles decide
                self.subgroup_matrix_configs = []

    @staticmethod
    def navigator_gpu() -> Any:
        """wgpudawn's ``GPU``, with the toggles (see the module doc)."""
        return _gpu_with_toggles()

    @classmethod
    def open(
        cls, power_preference: str = "high-performance", *, use_timestamps: bool = True,
        adapter_index: int | None = None, runtime_checks: bool = True,
    ) -> DawnDevice:
        """Open Dawn's default adapter's device (or the one at ``adapter_index``), as
        :meth:`NativeDevice.open` does; a ConfigError where wgpudawn is missing or Dawn finds no
        adapter (Dawn's Vulkan backend wants ``shaderUniform*ArrayDynamicIndexing``, which older
        Mesa drivers lack). ``runtime_checks``: see :meth:`open_adapter`."""
        try:
            return super().open(power_preference, use_timestamps=use_timestamps, adapter_index=adapter_index,
                                runtime_checks=runtime_checks)
        except RuntimeError as error:
            raise ConfigError(f"Dawn found no WebGPU adapter ({error})") from None

    @classmethod
    def open_adapter(cls, adapter: Any, *, use_timestamps: bool = True, runtime_checks: bool = True) -> DawnDevice:
        """A device on wgpudawn's ``adapter``: as :meth:`NativeDevice.open_adapter`, with the
        subgroup matrices where the adapter has them and unquantized timestamps.

        ``runtime_checks=False`` turns off Dawn's robustness (``disable_robustness``) for the whole
        device: every kernel on it runs without WebGPU's runtime checks, whatever its own
        ``Kernel.runtime_checks`` says (Dawn has no per-shader way, as wgpu-native has). Only for
        kernels whose indices you trust: a wrong one is undefined behaviour, not a clamped read.
        On an H200 the staged subgroup-matrix kernels ran about 1.2-1.4x faster without them."""
        from wgpudawn.backends.dawn import extras

        features, limits = cls.device_request(adapter, use_timestamps)
        known = extras.all_toggles()
        device = extras.request_device_sync(
            adapter, required_features=features, required_limits=limits,
            enable_toggles=[] if runtime_checks else [name for name in UNCHECKED_TOGGLES if name in known],
            disable_toggles=[name for name in DEVICE_TOGGLES_OFF if name in known],
        )
        opened = cls(device, use_timestamps=use_timestamps)
        opened.runtime_checks = runtime_checks
        return opened

    @staticmethod
    def identity_of(adapter_info: dict) -> DeviceIdentity:
        """The identity of a Dawn device on the adapter whose info is ``adapter_info``: its backend
        ``"Dawn <backend>"``."""
        identity = device_identity(adapter_info)
        return DeviceIdentity(vendor=identity.vendor, device=identity.device, driver=identity.driver,
                              backend=BACKEND_PREFIX + identity.backend)
