"""Matmul candidates on subgroup matrices (kernels/matmul/subgroup_matrix.py): refused, sized, compiled.

No adapter here has subgroup matrices to run them on, so three things are checked apart:

- lavapipe (wgpu-native) lacks the feature: every such candidate is refused by name, uncompiled, and
  a real tune of the f32 set of f16 products reports them as Launch results and still finds a
  correct winner among the others;
- their grids and scratch buffers cover the padded sizes of odd shapes (pure Python);
- Dawn's Null backend (a subprocess: Dawn reads ``WGPU_BACKEND_TYPE`` when its instance starts)
  offers the feature and compiles every stage as Dawn validates WGSL, though it runs nothing; a
  broken variant is refused there, so the compiles are a real check. Null's subgroups are up to
  128 wide and Dawn wants a subgroup-matrix kernel's workgroup to be a multiple of that: the tiles
  are built with ``subgroup=128`` there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from dawn_null import dawn_null_report

import wgtune
from wgtune import Args, Hit, TrialFinished
from wgtune.backends.isolation import WorkerGuard
from wgtune.backends.native import NativeDevice
from wgtune.errors import Launch
from wgtune.gpu.device import DeviceLimits, check_grid, check_limits
from wgtune.kernels import matmul
from wgtune.kernels.matmul.keys import PLAN_GROUPS
from wgtune.kernels.matmul.padded import COPY_WORKGROUP
from wgtune.kernels.matmul.subgroup_matrix import (
    FRAGMENT,
    SUBGROUP_MATRIX,
    SubgroupMatrixTile,
    subgroup_matrix_kernel,
)
from wgtune.kernels.matmul.tiles import MEDIUM, SUBGROUP_MATRIX_TILES

ROOT = Path(__file__).resolve().parents[1]
SGM_NAMES = [tile.name for tile in SUBGROUP_MATRIX_TILES]
FEATURES = {"shader-f16", "subgroups", SUBGROUP_MATRIX}
# WebGPU's default compute limits: what every tile but a too-wide one fits.
WEBGPU_LIMITS = DeviceLimits(max_workgroup_storage=16384, max_invocations=256, max_workgroup_size=(256, 256, 64),
                             max_workgroups_per_dimension=65535, max_storage_binding=128 << 20)


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def _sgm_candidates(tunables: wgtune.TunableSet) -> list[wgtune.Kernel]:
    return [kernel for kernel in tunables.candidates if kernel.name.startswith("sgm")]


# -- lavapipe: refused by the feature, uncompiled ---------------------------------------------------


@pytest.mark.parametrize("tunables", [matmul.matmul_set(precision="f16-products"), matmul.matmul_f16_set()],
                         ids=["f16_products", "f16"])
def test_lavapipe_refuses_every_sgm_candidate_for_the_missing_feature(device, tunables):
    assert SUBGROUP_MATRIX not in device.features
    sgm = _sgm_candidates(tunables)
    assert [kernel.name for kernel in sgm] == SGM_NAMES
    for kernel in sgm:
        problem = check_limits(kernel, device.limits, device.features)
        assert problem is not None and SUBGROUP_MATRIX in problem and "lacks" in problem, (kernel.name, problem)
        # Nothing but the feature stands in the way: the same device with it takes every stage, or
        # (lavapipe's 32 KiB against the H200's 48) all but one staged tile's workgroup storage.
        problem = check_limits(kernel, device.limits, device.features | {SUBGROUP_MATRIX})
        storage = max(stage.workgroup_storage or 0 for stage in kernel.stages)
        if storage <= device.limits.max_workgroup_storage:
            assert problem is None, (kernel.name, problem)
        else:
            assert problem is not None and "workgroup storage" in problem, (kernel.name, problem)
    # First in the medium group, the one every medium and large key plans.
    medium = [kernel.name for kernel in tunables.candidates if kernel.group == PLAN_GROUPS[MEDIUM]]
    assert medium[:len(SGM_NAMES)] == SGM_NAMES


def test_the_f32_set_has_no_sgm_candidate_and_the_sets_are_named_apart():
    f32, products = matmul.matmul_set(), matmul.matmul_set(precision="f16-products")
    assert f32.name == "matmul" and products.name == "matmul_f16_products"
    assert _sgm_candidates(f32) == []
    # The set of f16 products is the f32 set's candidates plus the sgm ones.
    assert {k.name for k in products.candidates} == {k.name for k in f32.candidates} | set(SGM_NAMES)
    with pytest.raises(ValueError, match="f32, f16-products") as raised:
        matmul.matmul_set(precision="bad")
    assert "'bad'" in str(raised.value)


def test_a_tune_on_lavapipe_reports_sgm_candidates_as_launch_and_picks_a_correct_other(device):
    tunables = matmul.matmul_set(precision="f16-products")
    m, n, k = 300, 260, 100  # a medium key: the sgm tiles are planned first
    rng = np.random.default_rng(31)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = device.create_buffer(np.full(m * n, np.nan, np.float32).tobytes())
    args = Args((device.create_buffer(a.tobytes()), device.create_buffer(b.tobytes()), c), (m, n, k))
    trials: list[TrialFinished] = []
    tuner = wgtune.Tuner(device, config=wgtune.Config(cache=False, log_level="disabled", isolate=False),
                         observer=lambda event: trials.append(event) if isinstance(event, TrialFinished) else None)
    winner = tuner.execute(tunables, args)

    last = {event.index: event.result for event in trials}
    for name in SGM_NAMES:
        result = last[tunables.index_of[name]]
        assert isinstance(result, Launch) and SUBGROUP_MATRIX in result.reason, (name, result)
    assert not winner.name.startswith("sgm")
    assert tuner.states(tunables)[tunables.key(args)] == Hit(tunables.index_of[winner.name])
    out = np.frombuffer(device.read_buffer_sync(c), np.float32).reshape(m, n)
    _typecode, atol, rtol = tunables.tolerances_for(args)[0]
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), atol=atol, rtol=rtol)
    assert WorkerGuard(device).spec.api == "wgpu"  # (no process started)


# -- pure Python: the stages cover the padded sizes -------------------------------------------------

SHAPES = [(1, 1, 1), (17, 33, 9), (130, 70, 65), (1000, 37, 300), (65, 129, 17)]
TILES = [*SUBGROUP_MATRIX_TILES, SubgroupMatrixTile(2, 2, 1, 3), SubgroupMatrixTile(2, 1, 3, 1, subgroup=128)]


def _padding(wgsl: str, name: str, dim: str) -> int | None:
    """The multiple a stage rounds ``p.<dim>`` up to in ``let <name> = ...``, or None without it."""
    found = re.search(rf"let {name} = \(p\.{dim} \+ (\d+)u\) / (\d+)u \* (\d+)u;", wgsl)
    if found is None:
        return None
    minus_one, divisor, multiple = map(int, found.groups())
    assert minus_one + 1 == divisor == multiple, found.group(0)
    return divisor


@pytest.mark.parametrize("tile", TILES, ids=lambda tile: tile.name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: "x".join(map(str, shape)))
def test_the_stages_cover_the_padded_sizes(shape, tile):
    m, n, k = shape
    for dtype in ("f32", "f16"):
        kernel = subgroup_matrix_kernel(tile, dtype)
        copy_in, mma, copy_out = kernel.stages
        assert [stage.name for stage in kernel.stages] == [tile.name, f"{tile.name}_mma", f"{tile.name}_out"]
        args = Args((None, None, None), (m, n, k))
        mp, np_, kp = tile.padded(m, n, k)
        bm, bn = tile.block
        assert (bm, bn) == (tile.wm * tile.fm * FRAGMENT, tile.wn * tile.fn * FRAGMENT)
        assert mp >= m and np_ >= n and mp % bm == 0 and np_ % bn == 0 and mp - m < bm and np_ - n < bn
        assert kp >= k and kp % tile.k_step == 0 and kp - k < tile.k_step and tile.k_step % FRAGMENT == 0

        gx, gy, gz = mma.grid(args)
        assert gz == 1 and (gy * bm, gx * bn) == (mp, np_)
        quads = (mp * kp + kp * np_) // 4
        assert (mp * kp + kp * np_) % 4 == 0
        cx, cy, cz = copy_in.grid(args)
        assert cx * cy * cz * COPY_WORKGROUP >= quads
        if cy == cz == 1:  # not wrapped: no idle workgroup
            assert (cx - 1) * COPY_WORKGROUP < quads
        ox, oy, oz = copy_out.grid(args)
        assert ox * oy * oz * COPY_WORKGROUP >= m * n
        for stage in kernel.stages:
            assert check_grid(tuple(stage.grid(args)), WEBGPU_LIMITS) is None, stage.name

        assert {name: size(args) for name, size in kernel.scratch.items()} == {
            "a_h": 2 * mp * kp, "b_h": 2 * kp * np_, "c_f": 4 * mp * np_}
        for stage in kernel.stages:
            assert set(stage.features) >= FEATURES, stage.name
        # The WGSL pads as tile.padded does (the GPU's sizes are the buffers' sizes).
        for stage in (copy_in, mma):
            assert (_padding(stage.wgsl, "mp", "m"), _padding(stage.wgsl, "np", "n"),
                    _padding(stage.wgsl, "kp", "k")) == (bm, bn, tile.k_step), stage.name
        assert _padding(copy_out.wgsl, "np", "n") == bn
        assert mma.workgroup_size == (tile.threads, 1, 1)
        assert f"@workgroup_size({tile.threads}, 1, 1)" in mma.wgsl
        problem = check_limits(kernel, WEBGPU_LIMITS, frozenset(FEATURES))
        if tile.threads > WEBGPU_LIMITS.max_invocations:
            assert problem is not None and "invocations" in problem
        elif tile.workgroup_storage > WEBGPU_LIMITS.max_workgroup_storage:  # staged: for devices past the default
            assert problem is not None and f"{tile.workgroup_storage} bytes of workgroup storage" in problem
        else:
            assert problem is None, problem
        assert mma.workgroup_storage == tile.workgroup_storage
        assert check_limits(kernel, WEBGPU_LIMITS, frozenset(FEATURES - {SUBGROUP_MATRIX})) is not None


# -- Dawn's Null backend: the feature, and every stage compiled as Dawn validates it -----------------

DAWN_SCRIPT = r"""
import json
from dataclasses import replace

import wgpudawn

from wgtune import Config, run_inline
from wgtune.backends.dawn import DawnDevice
from wgtune.backends.isolated_worker import open_device
from wgtune.backends.isolation import WorkerGuard
from wgtune.backends.local import open_tuner
from wgtune.errors import KernelError
from wgtune.gpu.device import check_limits
from wgtune.kernels.matmul.subgroup_matrix import SubgroupMatrixTile, subgroup_matrix_kernel
from wgtune.kernels.matmul.tiles import SUBGROUP_MATRIX_TILES

device = DawnDevice.open()
report = {"backend": device.identity.backend, "api": device.api, "features": sorted(device.features),
          "max_invocations": device.limits.max_invocations, "compiled": {}, "refused_uncompiled": {},
          "too_wide": [], "broken": {}}
tiles = [replace(t, subgroup=128) for t in SUBGROUP_MATRIX_TILES] + [
    SubgroupMatrixTile(2, 1, 2, 2, subgroup=128), SubgroupMatrixTile(1, 2, 1, 3, subgroup=128),
    # Staged ones narrow enough for Null (the set's take 4 or 8 subgroups: 512 or 1024 invocations here).
    SubgroupMatrixTile(1, 1, 4, 4, bk=32, subgroup=128), SubgroupMatrixTile(1, 1, 4, 4, bk=16, buffers=2, subgroup=128),
    SubgroupMatrixTile(2, 1, 2, 2, bk=64, subgroup=128)]
kernels = []
for tile in tiles:
    if tile.threads > device.limits.max_invocations:
        report["too_wide"].append(tile.name)
        continue
    for dtype in ("f32", "f16"):
        kernel = subgroup_matrix_kernel(tile, dtype)
        report["refused_uncompiled"][f"{tile.name}/{dtype}"] = check_limits(kernel, device.limits, device.features)
        kernels.append((f"{tile.name}/{dtype}", kernel))
for (name, kernel), compiled in zip(kernels, run_inline(device.compile_many([k for _, k in kernels]))):
    stages = 0 if isinstance(compiled, Exception) else 1 + len(compiled.then)
    report["compiled"][name] = str(compiled) if isinstance(compiled, Exception) else stages

kernel = subgroup_matrix_kernel(SubgroupMatrixTile(1, 1, 2, 2, subgroup=128), "f32")
copy_in, mma, copy_out = kernel.stages
mac = "subgroupMatrixMultiplyAccumulate"
variants = {
    "misspelt": mma.wgsl.replace(mac, "subgroupMatrixMultiplyAcumulate"),
    "left_right_swapped": mma.wgsl.replace(f"{mac}(l0, r0,", f"{mac}(r0, l0,"),
    "no_enable": mma.wgsl.replace("enable chromium_experimental_subgroup_matrix;", ""),
}
for name, wgsl in variants.items():
    assert wgsl != mma.wgsl, name
    broken = replace(kernel, then=(replace(mma, wgsl=wgsl), copy_out))
    try:
        run_inline(device.compile(broken))
        report["broken"][name] = None
    except KernelError as error:
        report["broken"][name] = str(error)
# 32-wide subgroups' workgroup (the H200's): Dawn wants a multiple of Null's 128.
try:
    run_inline(device.compile(subgroup_matrix_kernel(SubgroupMatrixTile(1, 1, 2, 2), "f32")))
    report["broken"]["subgroup_32"] = None
except KernelError as error:
    report["broken"]["subgroup_32"] = str(error)

raw = wgpudawn.gpu.request_adapter_sync().request_device_sync()
tuner = open_tuner(raw, config=Config(cache=False, isolate=False))
report["tuner"] = {"type": type(tuner.device).__name__, "is_dawn": isinstance(tuner.device, DawnDevice),
                   "same_gpu_device": tuner.device.gpu is raw, "backend": tuner.device.identity.backend,
                   "guard": tuner.guard is not None}
spec = WorkerGuard(device).spec
reopened = open_device(spec)
report["guard"] = {"api": spec.api, "reopened": type(reopened).__name__,
                   "same_identity": reopened.identity == device.identity}
from wgpudawn.backends.dawn import extras
unchecked = DawnDevice.open(runtime_checks=False)
unchecked_spec = WorkerGuard(unchecked).spec
report["robustness"] = {
    "checked": "disable_robustness" in extras.get_toggles(device.gpu),
    "unchecked": "disable_robustness" in extras.get_toggles(unchecked.gpu),
    "flags": [device.runtime_checks, unchecked.runtime_checks, unchecked_spec.runtime_checks],
    "reopened": "disable_robustness" in extras.get_toggles(open_device(unchecked_spec).gpu),
    "quantized": "timestamp_quantization" in extras.get_toggles(device.gpu)}
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def dawn_report() -> dict:
    return dawn_null_report(DAWN_SCRIPT)


def test_dawn_null_offers_subgroup_matrices(dawn_report):
    assert dawn_report["backend"] == "Dawn Null"
    assert dawn_report["api"] == "dawn"
    assert {SUBGROUP_MATRIX, "shader-f16", "subgroups"} <= set(dawn_report["features"])
    assert dawn_report["max_invocations"] == 256


def test_dawn_null_compiles_every_stage_of_every_sgm_tile(dawn_report):
    tiles = [replace(t, subgroup=128) for t in SUBGROUP_MATRIX_TILES]
    tiles += [SubgroupMatrixTile(2, 1, 2, 2, subgroup=128), SubgroupMatrixTile(1, 2, 1, 3, subgroup=128),
              SubgroupMatrixTile(1, 1, 4, 4, bk=32, subgroup=128),
              SubgroupMatrixTile(1, 1, 4, 4, bk=16, buffers=2, subgroup=128),
              SubgroupMatrixTile(2, 1, 2, 2, bk=64, subgroup=128)]
    fits = [tile.name for tile in tiles if tile.threads <= dawn_report["max_invocations"]]
    assert dawn_report["too_wide"] == [tile.name for tile in tiles if tile.name not in fits]
    assert len(fits) >= 9  # the 1x1 tiles, the two of two subgroups, three staged ones
    assert sum("_k" in name for name in fits) == 3
    expected = {f"{name}/{dtype}" for name in fits for dtype in ("f32", "f16")}
    assert dawn_report["compiled"] == dict.fromkeys(expected, 3)  # three stages each, none refused
    # The device has the feature: nothing is refused before the compile.
    assert dawn_report["refused_uncompiled"] == dict.fromkeys(expected)


def test_dawn_null_refuses_broken_sgm_wgsl(dawn_report):
    broken = dawn_report["broken"]
    assert set(broken) == {"misspelt", "left_right_swapped", "no_enable", "subgroup_32"}
    assert all(message for message in broken.values()), broken  # None: it compiled
    assert "subgroupMatrixMultiplyAcumulate" in broken["misspelt"]
    assert "no matching call to 'subgroupMatrixMultiplyAccumulate" in broken["left_right_swapped"]
    assert "chromium_experimental_subgroup_matrix" in broken["no_enable"]
    assert "workgroup_size (32)" in broken["subgroup_32"] and "128" in broken["subgroup_32"]


def test_open_tuner_wraps_a_raw_dawn_device_and_the_guard_reopens_dawn(dawn_report):
    assert dawn_report["tuner"] == {"type": "DawnDevice", "is_dawn": True, "same_gpu_device": True,
                                    "backend": "Dawn Null", "guard": False}
    assert dawn_report["guard"] == {"api": "dawn", "reopened": "DawnDevice", "same_identity": True}



CLI = "import sys; from wgtune.cli import main; sys.exit(main())"
COMPILE_ALL = """
import json
from wgtune import run_inline
from wgtune.gpu.device import check_limits
from wgtune.backends.dawn import DawnDevice
from wgtune.kernels.matmul import matmul_f16_set, matmul_set
device = DawnDevice.open()
failed, count = {}, 0
for tunables in (matmul_set(precision="f16-products"), matmul_f16_set()):
    # The sgm tiles' 32-wide form aside (Null wants 128), and those past the device's features
    # (float atomics) or limits (Null's: 256 invocations, 16 KiB), which a tune refuses uncompiled.
    stages = [stage for kernel in tunables.candidates for stage in kernel.stages
              if not kernel.name.startswith("sgm") and check_limits(kernel, device.limits, device.features) is None]
    count += len(stages)
    for stage, made in zip(stages, run_inline(device.shim.compile_modules(stages))):
        if isinstance(made, Exception):
            failed[stage.name] = str(made)[:300]
print("REPORT " + json.dumps({"stages": count, "failed": failed}))
"""


def test_the_cli_tunes_on_dawn(tmp_path):
    """``wgtune tune --dawn``: the device is Dawn's (here its Null backend, a dry run)."""
    env = dict(os.environ, WGPU_BACKEND_TYPE="Null")
    proc = subprocess.run([sys.executable, "-c", CLI, "tune", "--dawn", "--dry-run", "--no-cache", "--only", "matmul",
                           "--json"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["device"]["backend"] == "Dawn Null", report["device"]
    assert [key["status"] for key in report["keys"]] == ["tuned", "tuned"], report["keys"]


def test_every_other_candidate_of_the_sets_that_hold_sgm_tiles_compiles_on_dawn():
    """On a Dawn device the f16-products and f16 sets run their f32 tiles too: Dawn's WGSL front
    end (Tint) takes every one of them, as naga does."""
    env = dict(os.environ, WGPU_BACKEND_TYPE="Null")
    proc = subprocess.run([sys.executable, "-c", COMPILE_ALL], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("REPORT "))[7:])
    assert report["stages"] > 60 and report["failed"] == {}, report


def test_a_dawn_device_without_runtime_checks_turns_robustness_off_and_its_tuning_process_too(dawn_report):
    assert dawn_report["robustness"] == {"checked": False, "unchecked": True, "flags": [True, False, False],
                                         "reopened": True, "quantized": False}
