"""Shader modules without WebGPU's runtime checks, through wgpu-native's trusted entry point.

WebGPU makes every shader safe against out-of-bounds indices and endless loops: naga clamps each
dynamic index into an array (workgroup tiles included) and gives each loop a bound. A kernel whose
author vouches for its indices and loops (``Kernel(runtime_checks=False)``) can do without them:
on an NVIDIA H200 most matmul tiles ran 0-10% faster, skinny ones up to 33%, the reductions'
best up to 45% (``bench/results/h200-shapes.txt``).
wgpu-native offers that as ``wgpuDeviceCreateShaderModuleTrusted``, which wgpu-py 0.32 does not
wrap; :func:`create_unchecked_module` calls it the way wgpu-py's own ``create_shader_module``
calls its untrusted twin. Browsers offer nothing like it: there a kernel is always checked.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_unchecked_module", "unchecked_modules_available"]

NO_RUNTIME_CHECKS = 0  # WGPUShaderRuntimeChecks_None: neither bounds checks nor loop bounding


def _internals() -> tuple[Any, Any, Any] | None:
    """wgpu-py's cffi ``ffi``, its library and its API module, or None where this wgpu-py lacks
    what the call needs (another version, another backend)."""
    try:
        from wgpu.backends.wgpu_native import _api
        from wgpu.backends.wgpu_native._ffi import ffi, lib
    except ImportError:
        return None
    needed = (hasattr(lib, "wgpuDeviceCreateShaderModuleTrusted"), hasattr(_api, "new_struct_p"),
              hasattr(_api, "to_c_string_view"), hasattr(_api, "GPUShaderModule"), hasattr(_api, "libf"))
    return (ffi, lib, _api) if all(needed) else None


def unchecked_modules_available() -> bool:
    """Whether this wgpu-py can compile a shader module without runtime checks."""
    return _internals() is not None


def create_unchecked_module(device: Any, code: str, label: str = "") -> Any:
    """A ``GPUShaderModule`` of WGSL ``code`` compiled with no runtime checks on a wgpu-py
    ``device``; where this wgpu-py cannot, the usual checked one. Errors surface as wgpu-py's own
    (a ``GPUValidationError`` with naga's message) through its error capture."""
    internals = _internals()
    if internals is None:
        return device.create_shader_module(code=code, label=label)
    ffi, lib, api = internals
    source = api.new_struct_p("WGPUShaderSourceWGSL *", code=api.to_c_string_view(code))
    source[0].chain.next = ffi.NULL
    source[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    descriptor = api.new_struct_p(
        "WGPUShaderModuleDescriptor *",
        nextInChain=ffi.cast("WGPUChainedStruct *", source),
        label=api.to_c_string_view(label),
    )
    handle = api.libf.wgpuDeviceCreateShaderModuleTrusted(device._internal, descriptor, NO_RUNTIME_CHECKS)
    if handle == ffi.NULL:
        raise RuntimeError(f"shader module {label!r}: wgpu-native made none")
    return api.GPUShaderModule(label, handle, device)
