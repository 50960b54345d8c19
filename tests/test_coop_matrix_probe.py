"""bench/coop_matrix_probe.py (issue 31): on lavapipe the adapter has no cooperative matrices, so
every request is refused for that reason, naga refuses the WGSL extension, and nothing is planned;
the report says so, and says otherwise where the adapter lists the feature."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))  # bench/ is no package
import coop_matrix_dawn  # noqa: E402 - after the path it lives on
import coop_matrix_probe  # noqa: E402
import vk_coop_props  # noqa: E402


def test_on_lavapipe_the_feature_is_absent_every_request_says_why_and_nothing_is_planned():
    proc = subprocess.run([sys.executable, str(BENCH / "coop_matrix_probe.py"), "--quick", "--json"],
                          capture_output=True, text=True, timeout=300, cwd=BENCH.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["adapter"]["has_feature"] is False
    assert "cooperative-matrix" not in report["adapter"]["features"]
    assert [a["attempt"] for a in report["attempts"]] == ["plain", "raw-cffi", "raw-cffi-extras"]
    for attempt in report["attempts"]:
        assert attempt["opened"] is False
        said = attempt.get("error") or attempt.get("message")
        assert "Unsupported features were requested: EXPERIMENTAL_COOPERATIVE_MATRIX" in said, attempt
    assert report["enabled"] is False
    assert report["planned_kernels"] == []
    for message in report["compile_without_feature"].values():
        assert "`wgpu_cooperative_matrix` extension is not supported" in message
    # What the library offers to turn experimental features on: nothing but a trace path.
    library = report["library"]
    assert library["WGPUDeviceExtras"] == ["chain", "tracePath"]
    assert "WGPU_VALIDATION" in library["env_vars_in_library"]
    assert library["refusal_message_in_library"].startswith("Some experimental features, ")
    assert report["vulkan_driver"][0]["has_extension"] is False


def test_the_driver_query_reports_no_configuration_where_the_extension_is_missing():
    devices = vk_coop_props.cooperative_matrix_properties()
    assert devices, "the Vulkan loader found no physical device"
    assert all(d["configs"] == [] for d in devices if not d["has_extension"])


def _report(has_feature: bool, opened: bool) -> dict:
    library = {key: [] for key in ("WGPUDeviceExtras", "WGPUInstanceExtras", "instance_flags", "native_stypes",
                                   "header_functions_mentioning_cooperative_or_experimental",
                                   "exported_symbols_mentioning_cooperative_or_experimental",
                                   "env_vars_in_library")}
    library.update(wgpu_py="0.32.0", wgpu_native="29.0.1.1", wgpu_native_commit="x", refusal_message_in_library="")
    refusal = "Some experimental features, EXPERIMENTAL_COOPERATIVE_MATRIX, were requested, but ..."
    return {"library": library,
            "adapter": {"adapter": {}, "has_feature": has_feature, "features": [], "limits": {}},
            "vulkan_driver": [], "compile_without_feature": {},
            "attempts": [{"attempt": "plain", "opened": opened, "adapter_has_feature": has_feature,
                          "error": None if opened else refusal}],
            "enabled": opened}


def test_the_verdict_tells_a_refused_feature_from_an_absent_one(capsys):
    coop_matrix_probe.print_report(_report(has_feature=True, opened=False))
    out = capsys.readouterr().out
    assert "[plain] refused" in out
    assert "EXPERIMENTAL_COOPERATIVE_MATRIX, were requested" in out
    assert "lists cooperative-matrix but no way found opens a device" in out
    coop_matrix_probe.print_report(_report(has_feature=False, opened=False))
    assert "does not list cooperative-matrix" in capsys.readouterr().out
    coop_matrix_probe.print_report(_report(has_feature=True, opened=True))
    assert "OPENED" in capsys.readouterr().out


def test_precision_verdicts_by_error_scale():
    assert coop_matrix_probe.precision_verdict(2e-7) == "full f32"
    assert coop_matrix_probe.precision_verdict(5e-4).startswith("TF32-like")
    assert coop_matrix_probe.precision_verdict(2e-2).startswith("bf16-like")


def test_the_dawn_kernel_follows_the_configuration_shapes():
    cfg = {"component_type": "f16", "result_component_type": "f32", "m": 16, "n": 8, "k": 16,
           "max_subgroup_size": 32}
    code = coop_matrix_dawn.kernel(cfg, steps=4, spelling="bool-layout")
    assert code.startswith("enable f16;\nenable chromium_experimental_subgroup_matrix;")
    assert "subgroup_matrix_left<f16, 16, 16>>(&a, s * 16u, false, 64u)" in code
    assert "subgroup_matrix_right<f16, 8, 16>>(&b, s * 128u, false, 8u)" in code
    assert "subgroup_matrix_result<f32, 8, 16>()" in code
    assert "@workgroup_size(32)" in code
    f32 = dict(cfg, component_type="f32")
    assert not coop_matrix_dawn.kernel(f32, 1, "template-layout").startswith("enable f16;")
    i8 = coop_matrix_dawn.kernel(dict(cfg, component_type="i8", result_component_type="i32", k=32), 1, "bool-layout")
    assert "var<storage, read_write> a: array<i32>;" in i8 and "subgroup_matrix_left<i8, 32, 16>" in i8
    values, data = coop_matrix_dawn._inputs("i8", 6, __import__("random").Random(1))
    assert len(data) == 8 and all(-8 <= v < 8 for v in values)  # four to a word, padded
