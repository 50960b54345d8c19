"""The native backend on the adapter present (lavapipe on a machine without a GPU): real WGSL."""

from __future__ import annotations

import struct

import pytest
import wgpu
from wgsl_samples import scale

import wgtune
from wgtune import Args, Config, Hit, Kernel, Launch, Mismatch, NoValidKernelFound, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

N = 4099  # not a multiple of any workgroup size


def scale_kernel(name: str, wg: int = 64, factor: float = 3.0, **extra) -> Kernel:
    return Kernel(
        name,
        scale(factor, wg),
        grid=lambda args, wg=wg: ((args.params[0] + wg - 1) // wg, 1, 1),
        workgroup_size=(wg, 1, 1),
        **extra,
    )


def scale_set(*candidates: Kernel) -> TunableSet:
    return TunableSet("scale", candidates, key=lambda a: {"n": wgtune.anchor(a.params[0])}, outputs=(1,))


def quick(**overrides) -> Config:
    return Config(log_level="disabled", cache=False, samples=3, warmups=1, **overrides)


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def call(device: NativeDevice, n: int = N) -> tuple[Args, object]:
    x = device.create_buffer(struct.pack(f"{n}f", *range(n)))
    y = device.create_buffer(size=4 * n)
    return Args((x, y), (n,)), y


def values(device: NativeDevice, buffer, n: int = N) -> tuple[float, ...]:
    return struct.unpack(f"{n}f", device.read_buffer_sync(buffer))


def test_device_reports_identity_limits_and_timing(device):
    identity = device.identity
    assert identity.device and identity.backend
    assert device.limits.max_invocations >= 256
    assert device.limits.max_workgroup_storage >= 16384
    assert device.timing in (wgtune.Timing.GPU_TIMESTAMP, wgtune.Timing.WALL_CLOCK)


def test_invalid_wgsl_is_a_kernel_error_with_the_compilers_message(device):
    with pytest.raises(wgtune.KernelError, match="expected"):
        wgtune.run_inline(device.compile(Kernel("broken", "fn main( {", grid=lambda a: (1, 1, 1))))


def test_timed_samples_are_positive_in_both_timing_modes(device):
    wall = NativeDevice(device.gpu, use_timestamps=False)
    assert wall.timing == wgtune.Timing.WALL_CLOCK
    for dev in (device, wall):
        pipeline = wgtune.run_inline(dev.compile(scale_kernel("k")))
        args, _ = call(dev)
        seconds = wgtune.run_inline(dev.resolve(wgtune.run_inline(dev.profile(pipeline, args, (65, 1, 1), 4))))
        assert 0 < seconds < 5


def too_much_shared(storage: int) -> Kernel:
    """A correct kernel whose workgroup array (read from its WGSL) is ``storage`` bytes."""
    plain = scale_kernel("too_much_shared")
    wgsl = f"var<workgroup> scratch: array<f32, {storage // 4}>;\n{plain.wgsl}"
    return Kernel(plain.name, wgsl, plain.grid, plain.workgroup_size)


def test_tune_survives_invalid_wgsl_a_device_limit_and_wrong_output(device):
    over_limit = device.limits.max_workgroup_storage * 4
    tunables = scale_set(
        scale_kernel("wg64"),
        Kernel("bad_wgsl", "fn main( {", grid=lambda a: (1, 1, 1)),
        too_much_shared(over_limit),
        scale_kernel("wrong", factor=2.0),
        scale_kernel("wg128", wg=128),
    )
    tuner = Tuner(device, config=quick(checks=True))
    args, y = call(device)
    ran = tuner.execute(tunables, args)
    assert ran.name in ("wg64", "wg128")
    assert values(device, y)[:3] == (0.0, 3.0, 6.0)
    assert values(device, y)[-1] == 3.0 * (N - 1)
    results = {r.name: r for r in _results(tuner, tunables, args)}
    assert isinstance(results["bad_wgsl"], Launch) and "compile failed" in results["bad_wgsl"].reason
    assert isinstance(results["too_much_shared"], Launch)
    assert f"{over_limit} bytes of workgroup storage" in results["too_much_shared"].reason
    assert isinstance(results["wrong"], Mismatch)
    assert "disagrees with the 2 candidates that agree (wg64, wg128): output 'y' (buffer 1)" in results["wrong"].reason


def _results(tuner: Tuner, tunables: TunableSet, args: Args) -> list:
    """Tune the key again, from scratch, collecting every candidate's result through the observer."""
    seen = []
    tuner.observer = lambda event: seen.append(event.result) if isinstance(event, wgtune.TrialFinished) else None
    tuner.forget(tunables, tuner.key(tunables, args))
    tuner.check_tune(tunables, tuner.key(tunables, args), args)
    tuner.observer = None
    return seen


def test_all_candidates_failing_raises_and_leaves_the_key_a_miss(device):
    tunables = scale_set(
        Kernel("bad_a", "fn main( {", grid=lambda a: (1, 1, 1)),
        scale_kernel("too_wide", wg=device.limits.max_invocations * 2),
    )
    tuner = Tuner(device, config=quick())
    args, _ = call(device)
    with pytest.raises(NoValidKernelFound) as raised:
        tuner.execute(tunables, args)
    reasons = {error.name: error.reason for error in raised.value.errors}
    assert "compile failed" in reasons["bad_a"]
    assert "invocations" in reasons["too_wide"]
    assert tuner.fastest(tunables, tuner.key(tunables, args)) is wgtune.MISS


def test_benchmarks_do_not_write_the_callers_buffers(device):
    in_place = """
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<uniform> n: vec4<u32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) { if (id.x < n.x) { y[id.x] = y[id.x] + 1.0; } }"""
    candidates = [
        Kernel(f"inc{wg}", in_place.replace("WG", str(wg)), workgroup_size=(wg, 1, 1),
               grid=lambda a, wg=wg: ((a.params[0] + wg - 1) // wg, 1, 1))
        for wg in (32, 64)
    ]
    tunables = TunableSet("increment", candidates, key=lambda a: {"n": a.params[0]})
    buffer = device.create_buffer(struct.pack("64f", *([1.0] * 64)))
    tuner = Tuner(device, config=quick())
    tuner.check_tune(tunables, tuner.key(tunables, Args((buffer,), (64,))), Args((buffer,), (64,)))
    assert set(values(device, buffer, 64)) == {1.0}, "tuning wrote the caller's buffer"
    tuner.execute(tunables, Args((buffer,), (64,)))
    assert set(values(device, buffer, 64)) == {2.0}, "the winner ran exactly once on the caller's buffer"


def test_the_callers_own_gpu_device_is_used(device):
    adapter = wgpu.gpu.request_adapter_sync()
    own = adapter.request_device_sync()
    wrapped = NativeDevice(own)
    assert wrapped.gpu is own
    assert wrapped.timing == wgtune.Timing.WALL_CLOCK  # the caller did not ask for timestamp-query
    tuner = Tuner(wrapped, config=quick())
    args, y = call(wrapped, 100)
    tuner.execute(scale_set(scale_kernel("a"), scale_kernel("b", wg=32)), args)
    assert values(wrapped, y, 100)[99] == 297.0
    assert isinstance(tuner.fastest(scale_set(scale_kernel("a"), scale_kernel("b", wg=32)), wgtune.Key({"n": 128})),
                      Hit)


def test_an_applications_storage_only_buffers_are_tuned_on_and_run(device):
    n = 300
    x = device.gpu.create_buffer_with_data(data=struct.pack(f"{n}f", *range(n)), usage=wgpu.BufferUsage.STORAGE)
    y = device.gpu.create_buffer(size=4 * n, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    tuner = Tuner(device, config=quick(checks=True))
    tuner.execute(scale_set(scale_kernel("a"), scale_kernel("b", wg=128)), Args((x, y), (n,)))
    assert values(device, y, n)[299] == 897.0


ADD_ONE_IN_PLACE = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < n.x) { y[id.x] = y[id.x] + 1.0 + 0.0 * x[id.x]; }
}"""


def test_a_kernel_with_a_second_stage_runs_both_in_order_in_one_dispatch(device):
    second = Kernel("add_one", ADD_ONE_IN_PLACE, grid=lambda args: ((args.params[0] + 63) // 64, 1, 1))
    two_stage = scale_kernel("scale_then_add", then=(second,))
    tuner = Tuner(device, config=quick())
    args, y = call(device)
    kernel = tuner.execute(TunableSet("staged", [two_stage], key=lambda a: {"n": a.params[0]}), args)
    assert kernel.name == "scale_then_add"
    assert values(device, y)[:3] == (1.0, 4.0, 7.0)
    assert values(device, y)[-1] == 3.0 * (N - 1) + 1.0


def test_the_device_reports_its_webgpu_features_and_a_candidate_needing_a_missing_one_is_refused(device):
    assert "timestamp-query" in device.features
    events = []
    tuner = Tuner(device, config=quick(), observer=events.append)
    tunables = scale_set(scale_kernel("plain"), scale_kernel("needs_a_feature", features=("no-such-feature",)))
    args, _ = call(device)
    assert tuner.execute(tunables, args).name == "plain"
    (refused,) = [e.result for e in events if isinstance(e, wgtune.TrialFinished) and e.index == 1]
    assert isinstance(refused, Launch) and "needs the device feature no-such-feature" in refused.reason
