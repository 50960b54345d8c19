"""Pipeline-overridable constants on the adapter present: a kernel written with ``override``
declarations is tuned as its authors wrote it, one set of constant values per candidate.

The kernel is written the way WebGPU libraries write theirs: its workgroup size is an override
with a default, its workgroup array is sized by that override, and a scale factor is an
override without a default, which a pipeline must be given.
"""

from __future__ import annotations

import struct

import pytest

import wgtune
from wgtune import Args, Config, Kernel, Launch, NoValidKernelFound, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

ROW_SCALE = """
override WORKGROUP_SIZE: u32 = 64u;
override scale: f32;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;

var<workgroup> tile: array<f32, WORKGROUP_SIZE>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var value = 0.0;
    if (gid.x < n.x) {
        value = x[gid.x];
    }
    tile[lid] = value;
    workgroupBarrier();
    if (gid.x < n.x) {
        y[gid.x] = scale * tile[lid];
    }
}
"""

N = 4099


def candidate(wg: int, **constants) -> Kernel:
    return Kernel(
        f"wg{wg}",
        ROW_SCALE,
        grid=lambda args, wg=wg: ((args.params[0] + wg - 1) // wg, 1, 1),
        workgroup_size=(wg, 1, 1),
        workgroup_storage=4 * wg,
        constants={"WORKGROUP_SIZE": wg, **constants},
    )


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def call(device: NativeDevice) -> Args:
    x = device.create_buffer(struct.pack(f"{N}f", *range(N)))
    y = device.create_buffer(size=4 * N)
    return Args((x, y), (N,))


def test_each_candidate_is_the_same_source_with_its_own_override_values(device):
    tunables = TunableSet("row_scale", [candidate(wg, scale=3.0) for wg in (32, 64, 128)],
                          key=lambda a: {"n": wgtune.anchor(a.params[0])}, outputs=(1,))
    assert len({kernel.fingerprint() for kernel in tunables.candidates}) == 3  # the values tell them apart
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))
    args = call(device)
    kernel = tuner.execute(tunables, args)
    got = struct.unpack(f"{N}f", device.read_buffer_sync(args.buffers[1]))
    assert kernel.name in {"wg32", "wg64", "wg128"}
    assert list(got) == [3.0 * i for i in range(N)]
    results = {r["name"]: r for r in tuner.cache.entry(tunables, tuner.key(tunables, args)).results}
    assert all("median" in result for result in results.values()), results  # every candidate ran and agreed


def test_an_override_without_a_value_fails_that_candidate_with_the_drivers_reason(device):
    given, missing = candidate(64, scale=3.0), candidate(128)
    tunables = TunableSet("row_scale_missing", [given, missing], key=lambda a: {"n": a.params[0]})
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", samples=3, warmups=1))
    args = call(device)
    assert tuner.execute(tunables, args).name == "wg64"
    results = {r["name"]: r for r in tuner.cache.entry(tunables, tuner.key(tunables, args)).results}
    assert results["wg128"]["error"] == "Launch"
    assert "scale" in results["wg128"]["reason"] and "compile failed" in results["wg128"]["reason"]


def test_a_set_whose_only_candidates_miss_a_constant_says_so(device):
    tunables = TunableSet("row_scale_none", [candidate(64), candidate(128)], key=lambda a: {"n": a.params[0]})
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", samples=3, warmups=1))
    with pytest.raises(NoValidKernelFound) as failed:
        tuner.execute(tunables, call(device))
    assert all(isinstance(error, Launch) and "scale" in error.reason for error in failed.value.errors)
