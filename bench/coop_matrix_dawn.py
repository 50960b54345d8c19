"""The other road to the tensor cores from Python (issue 31): Dawn's subgroup matrices.

PyPI's ``wgpudawn`` is wgpu-py's API over Dawn. Dawn has ``chromium-experimental-subgroup-matrix``
(WGSL ``enable chromium_experimental_subgroup_matrix;``, ``subgroup_matrix_left/right/result``,
``subgroupMatrixLoad``, ``subgroupMatrixMultiplyAccumulate``, ``subgroupMatrixStore``), backed on
Vulkan by ``VK_KHR_cooperative_matrix``, and lets a caller opt in with the ``allow_unsafe_apis``
toggle. This asks, each in a child process (toggles are set once a process): the adapter's
features and subgroup-matrix configurations without and with the toggle, a device with the
feature, and for each float configuration a product checked against float64 (one tile, and a
chain of 64 along K), its error said as full f32, TF32-like/f16-like or worse.

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
PACK = {"f32": "f", "f16": "e"}


def kernel(cfg: dict, steps: int, spelling: str) -> str:
    """C (MxN) = A (M x K*steps) * B (K*steps x N), row-major, one subgroup."""
    t, r, m, n, k = cfg["component_type"], cfg["result_component_type"], cfg["m"], cfg["n"], cfg["k"]
    load, store = SPELLINGS[spelling]
    kt = k * steps
    left = load.format(ty=f"subgroup_matrix_left<{t}, {k}, {m}>", buf="a", off=f"s * {k}u", stride=f"{kt}u")
    right = load.format(ty=f"subgroup_matrix_right<{t}, {n}, {k}>", buf="b", off=f"s * {k * n}u", stride=f"{n}u")
    head = "enable f16;\n" if "f16" in (t, r) else ""
    return f"""{head}enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read_write> a: array<{t}>;
@group(0) @binding(1) var<storage, read_write> b: array<{t}>;
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


def check(device, cfg: dict, steps: int, spelling: str) -> dict:
    """Run one product and compare with float64 of the very inputs the GPU saw (already rounded
    to the component type), so the error is the multiply-accumulate's alone."""
    t, r, m, n, k = cfg["component_type"], cfg["result_component_type"], cfg["m"], cfg["n"], cfg["k"]
    kt = k * steps
    rng = random.Random(31)
    a = _rounded([rng.uniform(-1, 1) for _ in range(m * kt)], t)
    b = _rounded([rng.uniform(-1, 1) for _ in range(kt * n)], t)
    usage = "STORAGE|COPY_SRC"
    bufs = [device.create_buffer_with_data(data=struct.pack(f"{len(v)}{PACK[t]}", *v), usage=usage) for v in (a, b)]
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
            worst_rel = max(worst_rel, err / math.fsum(abs(x) for x in terms))
    verdict = ("full f32" if worst_rel < 1e-5 else "TF32-like / f16-like (10-bit mantissa)" if worst_rel < 4e-3
               else "bf16-like or worse")
    return {"shape": f"{m}x{n}x{kt}", "max_abs_error": worst_abs, "max_error_over_sum_abs": worst_rel,
            "verdict": verdict}


def attempt(unsafe: bool) -> dict:
    import wgpudawn as wgpu
    from wgpudawn.backends.dawn import extras

    out: dict = {"allow_unsafe_apis": unsafe}
    try:
        if unsafe:
            extras.set_instance_extras(enable_toggles=["allow_unsafe_apis"])
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        out["adapter"] = {key: adapter.info.get(key) for key in ("device", "description", "backend_type")}
        out["has_feature"] = FEATURE in adapter.features
        out["matrix_features"] = sorted(f for f in adapter.features if "matrix" in f or "subgroup" in f or "f16" in f)
        configs = extras.get_adapter_properties(adapter).get("subgroup_matrix_configs", [])
        out["configs"] = configs
        wanted = [f for f in (FEATURE, "subgroups", "shader-f16") if f in adapter.features] or [FEATURE]
        device = adapter.request_device_sync(required_features=wanted)
        out["opened"] = True
        out["products"] = []
        for cfg in configs:
            if cfg["component_type"] not in PACK or cfg["result_component_type"] not in PACK:
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
    for flag in ("plain", "unsafe"):
        proc = subprocess.run([sys.executable, __file__, "--attempt", flag], capture_output=True, text=True,
                              timeout=300)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        failed = {"allow_unsafe_apis": flag == "unsafe", "error": f"exit {proc.returncode}: {proc.stderr[-800:]}"}
        results.append(json.loads(lines[-1]) if lines else failed)
    return results


def print_report(results: list[dict] | str) -> None:
    print(f"Dawn (wgpudawn), feature {FEATURE}:")
    if isinstance(results, str):
        print(f"  {results}")
        return
    for r in results:
        print(f"  [allow_unsafe_apis={r['allow_unsafe_apis']}] adapter {r.get('adapter')}")
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
        print(json.dumps(attempt(sys.argv[2] == "unsafe")))
    else:
        print_report(probe())
