"""Every built-in candidate's WGSL as a browser compiles it: Tint, through Dawn's Null backend.

Natively wgtune compiles with naga (wgpu-native); in a page the browser compiles with Tint, which
checks what naga does not (the uniformity of barriers and derivatives above all). A candidate
whose WGSL only naga accepts would pass every native test and drop out of every browser tune as a
compile error, where the page pays for its compile. So each distinct stage of every registered
family's set is made a shader module on Dawn (``wgpudawn``; its Null backend validates WGSL and
runs nothing, in a subprocess because Dawn reads ``WGPU_BACKEND_TYPE`` when its instance starts),
and must come without an error. Candidates that need a feature Dawn does not offer (f32 atomics,
which WebGPU lacks) cannot be compiled there; they must be exactly those that declare one. A
module with a barrier in non-uniform control flow, which naga accepts, must be refused: the check
is real.
"""

from __future__ import annotations

import pytest
from dawn_null import dawn_null_report

from wgtune.kernels.families import FAMILIES

TINT_SCRIPT = r"""
import json

from wgtune.backends.dawn import DawnDevice
from wgtune.kernels.families import FAMILIES

device = DawnDevice.open()
report = {"backend": device.identity.backend, "features": sorted(device.features), "families": {}}


def module_error(code):
    try:
        module = device.gpu.create_shader_module(code=code)
    except Exception as error:  # Dawn raises on a WGSL error
        return str(error)
    errors = [message.message for message in module.get_compilation_info_sync().messages if message.type == "error"]
    return "; ".join(errors) or None


for family in FAMILIES:
    found = {"accepted": [], "rejected": {}, "needs_other_features": []}
    seen = set()
    for kernel in family.build().candidates:
        if not set(kernel.features) <= device.features:
            found["needs_other_features"].append(kernel.name)
            continue
        for stage in kernel.stages:
            if stage.wgsl in seen:
                continue
            seen.add(stage.wgsl)
            error = module_error(stage.wgsl)
            if error:
                found["rejected"][stage.name] = error[:600]
            else:
                found["accepted"].append(stage.name)
    report["families"][family.name] = found

report["control"] = module_error(
    "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
    "@compute @workgroup_size(64) fn main(@builtin(local_invocation_id) l: vec3<u32>) {\n"
    "    if (x[l.x] > 0.0) { workgroupBarrier(); }\n"
    "}\n")
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def tint_report() -> dict:
    return dawn_null_report(TINT_SCRIPT)


def test_tint_refuses_a_barrier_in_non_uniform_control_flow(tint_report):
    assert tint_report["backend"] == "Dawn Null"
    assert tint_report["control"] and "uniform control flow" in tint_report["control"]


@pytest.mark.parametrize("family", [family.name for family in FAMILIES])
def test_tint_accepts_every_stage_of_every_built_in_candidate(tint_report, family):
    found = tint_report["families"][family]
    assert found["rejected"] == {}
    tunables = next(f for f in FAMILIES if f.name == family).build()
    features = set(tint_report["features"])
    # What Dawn could not compile is exactly what needs a feature it lacks (none of WebGPU's).
    assert found["needs_other_features"] == [k.name for k in tunables.candidates if not set(k.features) <= features]
    codes = {stage.wgsl for k in tunables.candidates if set(k.features) <= features for stage in k.stages}
    assert len(found["accepted"]) == len(codes) > 0
