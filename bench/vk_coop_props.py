"""What the Vulkan driver itself says about cooperative matrices, asked through ctypes.

wgpu-native 29.0.1.1 (wgpu-py 0.32) has no entry point for the properties behind its
``cooperative-matrix`` feature, so this asks the loader (``libvulkan.so.1``) directly:
``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`` for each physical device that has
``VK_KHR_cooperative_matrix``. Used by ``bench/coop_matrix_probe.py``; standard library only.
"""

from __future__ import annotations

import ctypes

VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR = 1000506001
VK_API_VERSION_1_3 = (1 << 22) | (3 << 12)
EXTENSION = b"VK_KHR_cooperative_matrix"

COMPONENT_TYPES = {0: "f16", 1: "f32", 2: "f64", 3: "i8", 4: "i16", 5: "i32", 6: "i64", 7: "u8",
                   8: "u16", 9: "u32", 10: "u64", 1000141000: "bf16", 1000491000: "i8-packed",
                   1000491001: "u8-packed", 1000491002: "e4m3", 1000491003: "e5m2"}
SCOPES = {1: "device", 2: "workgroup", 3: "subgroup", 5: "queue-family"}


class _AppInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int32), ("pNext", ctypes.c_void_p), ("pApplicationName", ctypes.c_char_p),
                ("applicationVersion", ctypes.c_uint32), ("pEngineName", ctypes.c_char_p),
                ("engineVersion", ctypes.c_uint32), ("apiVersion", ctypes.c_uint32)]


class _InstanceInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pApplicationInfo", ctypes.POINTER(_AppInfo)), ("enabledLayerCount", ctypes.c_uint32),
                ("ppEnabledLayerNames", ctypes.c_void_p), ("enabledExtensionCount", ctypes.c_uint32),
                ("ppEnabledExtensionNames", ctypes.c_void_p)]


class _ExtensionProperties(ctypes.Structure):
    _fields_ = [("extensionName", ctypes.c_char * 256), ("specVersion", ctypes.c_uint32)]


class _CoopProps(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int32), ("pNext", ctypes.c_void_p), ("MSize", ctypes.c_uint32),
                ("NSize", ctypes.c_uint32), ("KSize", ctypes.c_uint32), ("AType", ctypes.c_int32),
                ("BType", ctypes.c_int32), ("CType", ctypes.c_int32), ("ResultType", ctypes.c_int32),
                ("saturatingAccumulation", ctypes.c_uint32), ("scope", ctypes.c_int32)]


def _name(table: dict[int, str], value: int) -> str:
    return table.get(value, str(value))


def cooperative_matrix_properties() -> list[dict]:
    """One dict per physical device: its name, whether it has the extension, and the
    configurations the driver lists (M, N, K, A/B/C/result types, scope). Raises OSError where
    there is no Vulkan loader and RuntimeError where a call fails, with the VkResult."""
    vk = ctypes.CDLL("libvulkan.so.1")
    vk.vkGetInstanceProcAddr.restype = ctypes.c_void_p
    vk.vkGetInstanceProcAddr.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    app = _AppInfo(VK_STRUCTURE_TYPE_APPLICATION_INFO, None, b"wgtune-coop-probe", 1, b"wgtune", 1,
                   VK_API_VERSION_1_3)
    create = _InstanceInfo(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, None, 0, ctypes.pointer(app), 0, None, 0, None)
    instance = ctypes.c_void_p()
    result = vk.vkCreateInstance(ctypes.byref(create), None, ctypes.byref(instance))
    if result != 0:
        raise RuntimeError(f"vkCreateInstance returned VkResult {result}")
    try:
        count = ctypes.c_uint32(0)
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        devices = (ctypes.c_void_p * count.value)()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), devices)
        address = vk.vkGetInstanceProcAddr(instance, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
        query = None
        if address:
            query = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32),
                                     ctypes.POINTER(_CoopProps))(address)
        return [_describe(vk, device, query) for device in devices]
    finally:
        vk.vkDestroyInstance(instance, None)


def _describe(vk, device, query) -> dict:
    # VkPhysicalDeviceProperties: apiVersion, driverVersion, vendorID, deviceID, deviceType, then
    # deviceName[256]; the buffer is larger than the struct (824 bytes) so the driver never overruns it.
    props = ctypes.create_string_buffer(4096)
    vk.vkGetPhysicalDeviceProperties(ctypes.c_void_p(device), props)
    words = ctypes.cast(props, ctypes.POINTER(ctypes.c_uint32))
    name = props.raw[20:276].split(b"\0", 1)[0].decode(errors="replace")
    count = ctypes.c_uint32(0)
    vk.vkEnumerateDeviceExtensionProperties(ctypes.c_void_p(device), None, ctypes.byref(count), None)
    extensions = (_ExtensionProperties * count.value)()
    vk.vkEnumerateDeviceExtensionProperties(ctypes.c_void_p(device), None, ctypes.byref(count), extensions)
    names = {bytes(e.extensionName).split(b"\0", 1)[0] for e in extensions}
    info = {"device": name, "driver_version": hex(words[1]), "api_version": hex(words[0]),
            "has_extension": EXTENSION in names,
            "cooperative_extensions": sorted(n.decode() for n in names if b"cooperative" in n), "configs": []}
    if not info["has_extension"] or query is None:
        return info
    n = ctypes.c_uint32(0)
    result = query(ctypes.c_void_p(device), ctypes.byref(n), None)
    if result != 0:
        raise RuntimeError(f"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR returned VkResult {result}")
    configs = (_CoopProps * n.value)()
    for entry in configs:
        entry.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
    result = query(ctypes.c_void_p(device), ctypes.byref(n), configs)
    if result != 0:
        raise RuntimeError(f"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR returned VkResult {result}")
    info["configs"] = [
        {"m": c.MSize, "n": c.NSize, "k": c.KSize, "a": _name(COMPONENT_TYPES, c.AType),
         "b": _name(COMPONENT_TYPES, c.BType), "c": _name(COMPONENT_TYPES, c.CType),
         "result": _name(COMPONENT_TYPES, c.ResultType), "saturating": bool(c.saturatingAccumulation),
         "scope": _name(SCOPES, c.scope)}
        for c in configs[: n.value]
    ]
    return info


if __name__ == "__main__":
    for entry in cooperative_matrix_properties():
        print(entry)
