"""The other road to the tensor cores from Python (issue 31): Dawn's subgroup matrices.

PyPI's ``wgpudawn`` is wgpu-py's API over Dawn. Dawn has ``chromium-experimental-subgroup-matrix``
(WGSL ``enable chromium_experimental_subgroup_matrix;``, ``subgroup_matrix_left/right/result``,
``subgroupMatrixLoad``, ``subgroupMatrixMultiplyAccumulate``, ``subgroupMatrixStore``), backed on
Vulkan by ``VK_KHR_cooperative_matrix``, and lets a caller opt in with the ``allow_unsafe_apis``
toggle (and to f16 on NVIDIA's Vulkan driver with ``vulkan_enable_f16_on_nvidia``). This asks,
each in a child process (toggles are set once a process): the adapter's features and
subgroup-matrix configurations without and with the toggles, a device with the feature, and for
each configuration a product checked against float64 (one tile, and a chain of 64 along K), its
error said as exact, full f32, TF32-like/f16-like or worse.

Run from the repository root: ``python bench/coop_matrix_dawn.py`` (prints ``wgpudawn is not
installed`` where it is not). Standard library only besides wgpudawn.
"""

from __future__ import annotations

import json
import math
import random
import struct
import subprocess
import sys

FEATURE = "chromium-experimental-subgroup-matrix"
STEPS = (1, 64)
# subgroupMatrixLoad/Store took a column-major bool before Dawn moved the layout into the
# template list; both spellings are tried and the one that compiles is reported.
SPELLINGS = {
    "bool-layout": ("subgroupMatrixLoad<{ty}>(&{buf}, {off}, false, {stride})",
                    "subgroupMatrixStore(&{buf}, {off}, {val}, false, {stride})"),
    "template-layout": ("subgroupMatrixLoad<{ty}, row_major>(&{buf}, {off}, {stride})",
                        "subgroupMatrixStore<row_major>(&{buf}, {off}, {val}, {stride})"),
}
PACK = {"f32": "f", "f16": "e", "i32": "i", "u32": "I"}
# 8-bit components are stored four to a 32-bit word (array<i32> / array<u32>); offsets and strides
# are counted in 8-bit elements.
BYTES = {"i8": ("b", "i32", -8, 8), "u8": ("B", "u32", 0, 16)}
# Dawn's toggles for the tries: the unsafe APIs gate the experimental feature; Dawn turns f16
# off on NVIDIA's Vulkan driver unless asked.
MODES = {"plain": [], "unsafe": ["allow_unsafe_apis"],
         "unsafe+f16": ["allow_unsafe_apis", "vulkan_enable_f16_on_nvidia"]}


def kernel(cfg: dict, steps: int, spelling: str) -> str:
    """C (MxN) = A (M x K*steps) * B (K*steps x N), row-major, one subgroup."""
    t, r, m, n, k = cfg["component_type"], cfg["result_component_type"], cfg["m"], cfg["n"], cfg["k"]
    array = BYTES[t][1] if t in BYTES else t
    load, store = SPELLINGS[spelling]
    kt = k * steps
    left = load.format(ty=f"subgroup_matrix_left<{t}, {k}, {m}>", buf="a", off=f"s * {k}u", stride=f"{kt}u")
    right = load.format(ty=f"subgroup_matrix_right<{t}, {n}, {k}>", buf="b", off=f"s * {k * n}u", stride=f"{n}u")
    head = "enable f16;\n" if "f16" in (t, r) else ""
    return f"""{head}enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read_write> a: array<{array}>;
@group(0) @binding(1) var<storage, read_write> b: array<{array}>;
@group(0) @binding(2) var<storage, read_write> c: array<{r}>;
@compute @workgroup_size({cfg["max_subgroup_size"]})
fn main() {{
    var acc = subgroup_matrix_result<{r}, {n}, {m}>();
    for (var s = 0u; s < {steps}u; s += 1u) {{
        acc = subgroupMatrixMultiplyAccumulate({left}, {right}, acc);
    }}
    {store.format(buf="c", off="0u", val="acc", stride=f"{n}u")};
}}
"""


def _rounded(values, kind):
    return struct.unpack(f"{len(values)}{PACK[kind]}", struct.pack(f"{len(values)}{PACK[kind]}", *values))


def _inputs(kind: str, count: int, rng: random.Random) -> tuple[tuple, bytes]:
    """Values of the component type and their bytes as the kernel reads them."""
    if kind in BYTES:
        code, _array, low, high = BYTES[kind]
        values = tuple(rng.randrange(low, high) for _ in range(count))
        return values, struct.pack(f"{count}{code}", *values) + bytes(-count % 4)
    values = _rounded([rng.uniform(-1, 1) for _ in range(count)], kind)
    return values, struct.pack(f"{count}{PACK[kind]}", *values)


def check(device, cfg: dict, steps: int, spelling: str) -> dict:
    """Run one product and compare with float64 of the very inputs the GPU saw (already rounded
    to the component type), so the error is the multiply-accumulate's alone."""
    t, r, m, n, k = cfg["component_type"], cfg["result_component_type"], cfg["m"], cfg["n"], cfg["k"]
    kt = k * steps
    rng = random.Random(31)
    a, a_bytes = _inputs(t, m * kt, rng)
    b, b_bytes = _inputs(t, kt * n, rng)
    usage = "STORAGE|COPY_SRC"
    bufs = [device.create_buffer_with_data(data=data, usage=usage) for data in (a_bytes, b_bytes)]
    bufs.append(device.create_buffer(size=max(16, m * n * struct.calcsize(PACK[r])), usage=usage))
    module = device.create_shader_module(code=kernel(cfg, steps, spelling))
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
        {"binding": i, "resource": {"buffer": buf}} for i, buf in enumerate(bufs)])
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups(1)
    compute.end()
    device.queue.submit([encoder.finish()])
    got = struct.unpack(f"{m * n}{PACK[r]}", device.queue.read_buffer(bufs[2])[: m * n * struct.calcsize(PACK[r])])
    worst_abs = worst_rel = 0.0
    for i in range(m):
        for j in range(n):
            terms = [a[i * kt + s] * b[s * n + j] for s in range(kt)]
            ref = math.fsum(terms)
            err = abs(got[i * n + j] - ref)
            worst_abs = max(worst_abs, err)
            worst_rel = max(worst_rel, err / (math.fsum(abs(x) for x in terms) or 1.0))
    verdict = ("exact" if worst_abs == 0 else "full f32" if worst_rel < 1e-5
               else "TF32-like / f16-like (10-bit mantissa)" if worst_rel < 4e-3 else "bf16-like or worse")
    return {"shape": f"{m}x{n}x{kt}", "max_abs_error": worst_abs, "max_error_over_sum_abs": worst_rel,
            "verdict": verdict}


def attempt(mode: str) -> dict:
    import wgpudawn as wgpu
    from wgpudawn.backends.dawn import extras

    out: dict = {"toggles": MODES[mode]}
    try:
        known = extras.all_toggles()
        out["toggles_unknown_here"] = [t for t in MODES[mode] if t not in known]
        toggles = [t for t in MODES[mode] if t in known]
        if toggles:
            extras.set_instance_extras(enable_toggles=toggles)
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        out["adapter"] = {key: adapter.info.get(key) for key in ("device", "description", "backend_type")}
        out["has_feature"] = FEATURE in adapter.features
        out["matrix_features"] = sorted(f for f in adapter.features if "matrix" in f or "subgroup" in f or "f16" in f)
        configs = extras.get_adapter_properties(adapter).get("subgroup_matrix_configs", [])
        out["configs"] = configs
        # The feature is asked for even where the adapter hides it: the refusal is the finding.
        wanted = [FEATURE] + [f for f in ("subgroups", "shader-f16") if f in adapter.features]
        device = adapter.request_device_sync(required_features=wanted)
        out["opened"] = True
        out["products"] = []
        for cfg in configs:
            if cfg["component_type"] not in {*PACK, *BYTES} or cfg["result_component_type"] not in PACK:
                continue
            for steps in STEPS:
                errors = {}
                for spelling in SPELLINGS:
                    try:
                        out["products"].append(dict(check(device, cfg, steps, spelling), types=(
                            f"{cfg['component_type']}->{cfg['result_component_type']}"), spelling=spelling))
                        break
                    except Exception as error:  # the compiler's message says which spelling it wants
                        errors[spelling] = f"{type(error).__name__}: {error}"[:600]
                else:
                    out["products"].append({"shape": f"{cfg['m']}x{cfg['n']}x{cfg['k'] * steps}", "errors": errors})
    except Exception as error:  # the message is the finding
        out.setdefault("opened", False)
        out["error"] = f"{type(error).__name__}: {error}"[:1500]
    return out


def probe() -> list[dict] | str:
    try:
        import wgpudawn  # noqa: F401
    except ImportError:
        return "wgpudawn is not installed"
    results = []
    for mode in MODES:
        proc = subprocess.run([sys.executable, __file__, "--attempt", mode], capture_output=True, text=True,
                              timeout=300)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        failed = {"toggles": MODES[mode], "error": f"exit {proc.returncode}: {proc.stderr[-800:]}"}
        results.append(json.loads(lines[-1]) if lines else failed)
    return results


def print_report(results: list[dict] | str) -> None:
    print(f"Dawn (wgpudawn), feature {FEATURE}:")
    if isinstance(results, str):
        print(f"  {results}")
        return
    for r in results:
        print(f"  [toggles {r['toggles']}] adapter {r.get('adapter')}")
        print(f"    lists {FEATURE}: {r.get('has_feature')}; related features {r.get('matrix_features')}")
        for c in r.get("configs", []):
            print(f"    config {c['m']}x{c['n']}x{c['k']} {c['component_type']}->{c['result_component_type']}"
                  f" subgroup {c['min_subgroup_size']}..{c['max_subgroup_size']}")
        print(f"    device with it: {'OPENED' if r.get('opened') else 'refused'}")
        for line in (r.get("error") or "").splitlines():
            if line.strip():
                print(f"      {line.strip()}")
        for p in r.get("products", []):
            print(f"      product {p}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--attempt"]:
        print(json.dumps(attempt(sys.argv[2])))
    else:
        print_report(probe())
