"""Can wgpu-py 0.32's wgpu-native open a device with ``cooperative-matrix`` (issue 31)?

Tries every way the bundled wgpu-native offers to turn the experimental feature on, and prints
what each call answered, word for word:

- what the library is (versions, the header's extension structs and flags, the environment
  variables and the refusal message compiled into the shared library);
- what the adapter and the Vulkan driver say (feature list; the driver's own
  ``VK_KHR_cooperative_matrix`` configurations through ``bench/vk_coop_props.py``);
- device requests with the feature: through wgpu-py, through wgpu-native's C entry point by cffi
  (with and without ``WGPUDeviceExtras``), under each ``WGPUInstanceFlag`` and with every
  ``WGPU_*`` variable the library reads. Instance extras can be set once a process, so each
  request runs in a child process of this script (``--attempt NAME``) that prints one JSON line;
- a WGSL kernel with ``enable wgpu_cooperative_matrix;`` compiled on a device without the feature;
- where a device with the feature does open: an 8x8x8 product by ``coopMultiplyAdd`` (and a
  K=512 chain of them) checked against a float64 product, and the error said as full f32,
  TF32-like or f16-like.

``bench/coop_matrix_dawn.py`` asks the same of Dawn (PyPI ``wgpudawn``) where it is installed
(not with ``--quick``).
Run from the repository root: ``python bench/coop_matrix_probe.py`` (``--quick``: without the
requests under each flag; ``--json``: the report as one JSON object). Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FEATURE = "cooperative-matrix"
FEATURE_ID = 0x0003003B  # WGPUNativeFeature_CooperativeMatrix in wgpu.h
# wgpu-core's refusal, kept in the binary as the two literal halves around the feature names.
REFUSAL = (b"Some experimental features, ", b", were requested, but experimental features are not enabled")
# Rust keeps string literals back to back, so a name ends where the next WGPU_ begins.
ENV_NAME = re.compile(rb"WGPU_[A-Z0-9_]+?(?=WGPU_|[^A-Z0-9_]|$)")

# The product the kernel computes: C (8x8) = A (8xK) * B (Kx8), K a multiple of 8, row-major.
COOP_KERNEL = """enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
const K: u32 = KDIMu;
@compute @workgroup_size(32)
fn main() {
    var acc = coopLoad<coop_mat8x8<f32, C>>(&c[0], 8u);
    for (var k = 0u; k < K; k += 8u) {
        let x = coopLoad<coop_mat8x8<f32, A>>(&a[k], K);
        let y = coopLoad<coop_mat8x8<f32, B>>(&b[k * 8u], 8u);
        acc = coopMultiplyAdd(x, y, acc);
    }
    coopStore(acc, &c[0], 8u);
}
"""


def _wgpu():
    import wgpu
    from wgpu.backends.wgpu_native import _api, extras
    from wgpu.backends.wgpu_native._ffi import ffi, lib, lib_path

    return wgpu, _api, extras, ffi, lib, lib_path


def library_facts() -> dict:
    """What the installed wgpu-py and its wgpu-native are, and what they offer to turn
    experimental features on: every field of the extension structs, every instance flag, every
    WGPU_* string in the shared library and the refusal message it carries."""
    wgpu, _api, _extras, ffi, lib, lib_path = _wgpu()
    from wgpu.backends import wgpu_native

    version = lib.wgpuGetVersion()
    header = (Path(lib_path).parent / "wgpu.h").read_text()
    binary = Path(lib_path).read_bytes()
    return {
        "wgpu_py": wgpu.__version__,
        "wgpu_native": ".".join(str((version >> s) & 0xFF) for s in (24, 16, 8, 0)),
        "wgpu_native_commit": getattr(wgpu_native, "__commit_sha__", "?"),
        "library": str(lib_path),
        "WGPUDeviceExtras": [name for name, _ in ffi.typeof("WGPUDeviceExtras").fields],
        "WGPUInstanceExtras": [name for name, _ in ffi.typeof("WGPUInstanceExtras").fields],
        "instance_flags": re.findall(r"WGPUInstanceFlag_(\w+) =", header),
        "native_stypes": re.findall(r"WGPUSType_(\w+) = 0x0003", header),
        "header_functions_mentioning_cooperative_or_experimental": [
            line.strip() for line in header.splitlines()
            if "(" in line and re.search(r"(?i)cooperative|experimental", line) and "wgpu" in line
        ],
        "exported_symbols_mentioning_cooperative_or_experimental": sorted(
            name for name in dir(lib) if re.search(r"(?i)cooperative|experimental", name)
            and not name.startswith("WGPUNativeFeature_")
        ),
        "env_vars_in_library": sorted({m.decode() for m in ENV_NAME.findall(binary)}),
        "refusal_message_in_library": all(part in binary for part in REFUSAL)
        and (REFUSAL[0] + b"{features}" + REFUSAL[1]).decode(),
    }


def adapter_facts() -> dict:
    wgpu, *_ = _wgpu()
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    info = dict(adapter.info)
    limits = {k: v for k, v in adapter.limits.items() if "subgroup" in k or "invocations" in k}
    return {"adapter": {k: info.get(k) for k in ("device", "description", "backend_type", "adapter_type")},
            "has_feature": FEATURE in adapter.features, "features": sorted(adapter.features), "limits": limits}


def _raw_request(adapter, with_extras: bool) -> dict:
    """wgpuAdapterRequestDevice by cffi, the way backends/unchecked.py reaches wgpu-native: only the
    feature, no limits, and optionally the one native device extension struct (its only field is
    tracePath)."""
    _wgpu_mod, api, _extras, ffi, lib, _path = _wgpu()
    answer: dict = {}

    @ffi.callback("void(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *)")
    def done(status, device, message, _u1, _u2):
        answer["status"] = int(status)
        answer["device"] = device != ffi.NULL
        answer["message"] = api.from_c_string_view(message)

    keep = []
    features = ffi.new("WGPUFeatureName[]", [FEATURE_ID])
    descriptor = ffi.new("WGPUDeviceDescriptor *")
    descriptor.requiredFeatureCount = 1
    descriptor.requiredFeatures = features
    if with_extras:
        trace = tempfile.mkdtemp(prefix="coop-trace-")
        device_extras = api.new_struct_p("WGPUDeviceExtras *", tracePath=api.to_c_string_view(trace))
        device_extras.chain.sType = lib.WGPUSType_DeviceExtras
        keep.append(device_extras)
        descriptor.nextInChain = ffi.cast("WGPUChainedStruct *", device_extras)
    callback = ffi.new("WGPURequestDeviceCallbackInfo *")
    callback.mode = lib.WGPUCallbackMode_AllowSpontaneous
    callback.callback = done
    lib.wgpuAdapterRequestDevice(adapter._internal, descriptor, callback[0])
    for _ in range(100):  # wgpu-native answers inside the call; the loop is for a later version
        if answer:
            break
        lib.wgpuInstanceProcessEvents(api.get_wgpu_instance())
    answer["status_name"] = {1: "Success", 2: "CallbackCancelled", 3: "Error"}.get(answer.get("status"), "?")
    return answer


def attempt(name: str) -> dict:
    """One way of asking for the feature, in this (fresh) process. Never raises: what happened is
    the answer."""
    wgpu, _api, extras, _ffi, _lib, _path = _wgpu()
    result: dict = {"attempt": name}
    try:
        if name.startswith("flag:"):
            flags = name[5:].split("+")
            extras.set_instance_extras(flags=flags)
            result["instance_flags"] = flags
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        result["adapter_has_feature"] = FEATURE in adapter.features
        if name.startswith("raw-cffi"):
            result.update(_raw_request(adapter, with_extras=name.endswith("extras")))
            result["opened"] = bool(result.get("device"))
            return result
        device = adapter.request_device_sync(required_features=[FEATURE])
        result["opened"] = True
        result["device_features_has_it"] = FEATURE in device.features
        if name == "plain":
            result["kernel"] = run_kernel(device)
    except Exception as error:  # the message is the finding
        result["opened"] = result.get("opened", False)
        result["error"] = f"{type(error).__name__}: {error}"
    return result


def compile_without_feature() -> dict:
    """The WGSL kernel on a device opened without the feature, through the checked and the
    trusted (no runtime checks) module paths: what naga says."""
    wgpu, *_ = _wgpu()
    sys.path.insert(0, str(HERE.parent))
    from backends.unchecked import create_unchecked_module

    device = wgpu.gpu.request_adapter_sync(power_preference="high-performance").request_device_sync()
    code = COOP_KERNEL.replace("KDIM", "8")
    out = {}
    for label, make in (("checked", lambda: device.create_shader_module(code=code)),
                        ("trusted", lambda: create_unchecked_module(device, code))):
        try:
            make()
            out[label] = "compiled"
        except Exception as error:
            out[label] = f"{type(error).__name__}: {error}"
    return out


def _reference(a, b, m, k, n):
    import math

    return [math.fsum(float(a[i * k + t]) * float(b[t * n + j]) for t in range(k))
            for i in range(m) for j in range(n)]


def precision_verdict(rel: float) -> str:
    """The error scaled by sum|a||b| per element: full f32 accumulates to ~1e-7, TF32 and f16
    inputs (10-bit mantissas) to ~1e-4..1e-3, bf16 to ~1e-2."""
    if rel < 1e-5:
        return "full f32"
    if rel < 4e-3:
        return "TF32-like / f16-like (10-bit mantissa inputs)"
    return "bf16-like or worse"


def run_kernel(device) -> dict:
    """8x8x8 and 8x8x512 products through coopMultiplyAdd against float64; only reached where a
    device with the feature opened."""
    import random
    import struct

    rng = random.Random(31)
    out = {}
    for kdim in (8, 512):
        a = [rng.uniform(-1, 1) for _ in range(8 * kdim)]
        b = [rng.uniform(-1, 1) for _ in range(kdim * 8)]
        a32 = struct.unpack(f"{len(a)}f", struct.pack(f"{len(a)}f", *a))
        b32 = struct.unpack(f"{len(b)}f", struct.pack(f"{len(b)}f", *b))
        buffers = [device.create_buffer_with_data(data=struct.pack(f"{len(v)}f", *v), usage="STORAGE|COPY_SRC")
                   for v in (a32, b32, [0.0] * 64)]
        module = device.create_shader_module(code=COOP_KERNEL.replace("KDIM", str(kdim)))
        pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
        group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": buf}} for i, buf in enumerate(buffers)])
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(1)
        compute.end()
        device.queue.submit([encoder.finish()])
        got = struct.unpack("64f", device.queue.read_buffer(buffers[2]))
        ref = _reference(a32, b32, 8, kdim, 8)
        scale = [sum(abs(a32[i * kdim + t] * b32[t * 8 + j]) for t in range(kdim)) for i in range(8) for j in range(8)]
        err = max(abs(g - r) for g, r in zip(got, ref, strict=True))
        rel = max(abs(g - r) / s for g, r, s in zip(got, ref, scale, strict=True))
        out[f"8x8x{kdim}"] = {"max_abs_error": err, "max_error_over_sum_abs": rel, "verdict": precision_verdict(rel)}
    return out


ATTEMPTS = ["plain", "raw-cffi", "raw-cffi-extras"]


def _child(name: str, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--attempt", name], capture_output=True, text=True,
                          env=env, timeout=120)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"attempt": name, "opened": False, "error": f"child exited {proc.returncode}: {proc.stderr[-800:]}"}


def probe(every_flag: bool = True) -> dict:
    """Everything the note needs, as one dict; ``planned_kernels`` lists the coop kernels this
    device could run (none unless a device with the feature opened). ``every_flag=False`` leaves
    out the requests under each instance flag and variable (a child process each)."""
    facts = library_facts()
    report = {"library": facts, "adapter": adapter_facts()}
    try:
        sys.path.insert(0, str(HERE))
        from vk_coop_props import cooperative_matrix_properties

        report["vulkan_driver"] = cooperative_matrix_properties()
    except Exception as error:
        report["vulkan_driver"] = f"{type(error).__name__}: {error}"
    flags = [f"flag:{f}" for f in facts["instance_flags"] if f not in ("Empty", "Force32")] if every_flag else []
    attempts = [_child(name) for name in ATTEMPTS + flags]
    if every_flag:
        # WGPU_ADAPTER_NAME picks an adapter by name ("1" would match none); WGPU_DEBUG=1 also makes
        # wgpu-py look for a debug build of the library, so the path is given.
        with_env = dict(os.environ, WGPU_LIB_PATH=facts["library"],
                        **{v: "1" for v in facts["env_vars_in_library"] if v != "WGPU_ADAPTER_NAME"})
        attempts.append(dict(_child("flag:WithEnv", with_env), attempt="flag:WithEnv + every WGPU_* variable = 1"))
    report["attempts"] = attempts
    report["compile_without_feature"] = compile_without_feature()
    opened = [a for a in attempts if a.get("opened")]
    report["enabled"] = bool(opened)
    report["planned_kernels"] = ["coop_mat8x8<f32> product"] if opened and report["adapter"]["has_feature"] else []
    return report


def print_report(report: dict) -> None:
    lib = report["library"]
    print(f"wgpu-py {lib['wgpu_py']}, wgpu-native {lib['wgpu_native']} ({lib['wgpu_native_commit']})")
    for key in ("WGPUDeviceExtras", "WGPUInstanceExtras", "instance_flags", "native_stypes",
                "header_functions_mentioning_cooperative_or_experimental",
                "exported_symbols_mentioning_cooperative_or_experimental", "env_vars_in_library",
                "refusal_message_in_library"):
        print(f"  {key}: {lib[key]}")
    adapter = report["adapter"]
    print(f"adapter: {adapter['adapter']}")
    print(f"  lists {FEATURE}: {adapter['has_feature']}; limits {adapter['limits']}")
    print(f"  features: {' '.join(adapter['features'])}")
    print("Vulkan driver (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR):")
    driver = report["vulkan_driver"]
    for entry in driver if isinstance(driver, list) else [driver]:
        if isinstance(entry, str):
            print(f"  {entry}")
            continue
        print(f"  {entry['device']} (driver {entry['driver_version']}): VK_KHR_cooperative_matrix "
              f"{entry['has_extension']}; cooperative extensions {entry['cooperative_extensions']}")
        for c in entry["configs"]:
            print(f"    {c['m']}x{c['n']}x{c['k']} A {c['a']} B {c['b']} C {c['c']} -> {c['result']}"
                  f" scope {c['scope']}{' saturating' if c['saturating'] else ''}")
    print(f"device requests with required feature {FEATURE}:")
    for a in report["attempts"]:
        outcome = "OPENED" if a.get("opened") else "refused"
        message = a.get("error") or a.get("message") or ""
        print(f"  [{a['attempt']}] {outcome}; adapter lists it: {a.get('adapter_has_feature')}")
        for line in message.splitlines():
            if line.strip():
                print(f"      {line.strip()}")
        if a.get("kernel"):
            print(f"      kernel: {a['kernel']}")
    print("WGSL `enable wgpu_cooperative_matrix;` kernel on a device without the feature:")
    for label, message in report["compile_without_feature"].items():
        print(f"  [{label}] " + " | ".join(s.strip() for s in message.splitlines() if s.strip()))
    if not adapter["has_feature"]:
        print(f"RESULT: this adapter does not list {FEATURE}: nothing to enable here, no kernel planned.")
    elif report["enabled"]:
        print("RESULT: a device with cooperative-matrix OPENED; see the kernel check above.")
    else:
        print(f"RESULT: the adapter lists {FEATURE} but no way found opens a device with it;"
              " no kernel planned.")


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--attempt":
        print(json.dumps(attempt(argv[1])))
        return 0
    quick = "--quick" in argv
    report = probe(every_flag=not quick)
    if not quick:
        sys.path.insert(0, str(HERE))
        import coop_matrix_dawn

        report["dawn"] = coop_matrix_dawn.probe()
    if "--json" in argv:
        print(json.dumps(report))
        return 0
    print_report(report)
    if "dawn" in report:
        coop_matrix_dawn.print_report(report["dawn"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
