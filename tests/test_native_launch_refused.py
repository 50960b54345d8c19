"""A launch WebGPU refuses is the error of the call that caused it, on the adapter present
(lavapipe on a machine without a GPU): ``Tuner.execute`` raises LaunchRefused naming the set, the
key and the binding, on a hit and before any tune on a miss, and the next tune of another set
works as if nothing happened (issue 25: a refused launch used to fail the next, unrelated tune)."""

from __future__ import annotations

import re
import struct

import pytest
import wgpu

from wgtune import Args, Config, Hit, Kernel, KernelError, LaunchRefused, NoValidKernelFound, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

SCALE = """
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < n.x) { out[id.x] = 2.0 * x[id.x]; }
}"""

N = 256  # vec4s
BYTES = 16 * N


def scale_set(name: str) -> TunableSet:
    """Two candidates; every call is the same key, so a call after the first tune is a hit
    whatever its buffers and grid."""
    candidates = [Kernel(f"wg{wg}", SCALE.replace("WG", str(wg)), grid=lambda args, wg=wg: (-(-args.params[0] // wg),
                                                                                            1, 1))
                  for wg in (64, 128)]
    return TunableSet(name, candidates, key=lambda args: {"shape": "any"})


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


@pytest.fixture(scope="module")
def other_device() -> NativeDevice:
    return NativeDevice.open()


def quiet_tuner(device: NativeDevice) -> Tuner:
    return Tuner(device, config=Config(log_level="disabled", cache=False, samples=3, warmups=1, checks=False))


def good_call(device: NativeDevice, n: int = N) -> Args:
    return Args({"x": device.create_buffer(struct.pack(f"{4 * n}f", *range(4 * n))),
                 "out": device.create_buffer(size=16 * n)}, (n,))


def raw_buffer(device: NativeDevice, size: int, usage: int) -> object:
    return device.gpu.create_buffer(size=size, usage=usage)


COPYABLE = wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
STORAGE = wgpu.BufferUsage.STORAGE | COPYABLE


def refused_calls(device: NativeDevice, other_device: NativeDevice) -> dict[str, tuple[Args, str]]:
    """Each call WebGPU refuses, with what its LaunchRefused must say (``WG``: the candidate)."""
    x = device.create_buffer(size=BYTES)
    destroyed = device.create_buffer(size=BYTES)
    destroyed.destroy()
    return {
        "output without STORAGE usage": (Args({"x": x, "out": raw_buffer(device, BYTES, COPYABLE)}, (N,)),
                                         "binding 1 'out' (@group(0) @binding(1)) of candidate 'WG': the buffer "
                                         "lacks STORAGE usage (it has COPY_SRC|COPY_DST)"),
        "input smaller than one element": (Args({"x": raw_buffer(device, 8, STORAGE), "out": device.create_buffer(
            size=BYTES)}, (N,)), "binding 0 'x' (@group(0) @binding(0)) of candidate 'WG': the buffer has 8 bytes, "
                                 "the binding needs at least 16"),
        "input of 6 bytes": (Args({"x": raw_buffer(device, 6, STORAGE), "out": device.create_buffer(size=BYTES)},
                                  (N,)), "the buffer has 6 bytes, the binding needs at least 16"),
        "empty input": (Args({"x": raw_buffer(device, 0, STORAGE), "out": device.create_buffer(size=BYTES)}, (N,)),
                        "binding 0 'x' (@group(0) @binding(0)) of candidate 'WG': the buffer has 0 bytes"),
        "destroyed output": (Args({"x": x, "out": destroyed}, (N,)),
                             "binding 1 'out' (@group(0) @binding(1)) of candidate 'WG': the buffer was destroyed"),
        "output of another device": (Args({"x": x, "out": other_device.create_buffer(size=BYTES)}, (N,)),
                                     "binding 1 'out' (@group(0) @binding(1)) of candidate 'WG': the buffer "
                                     "belongs to another GPUDevice"),
    }


def said(expected: str, error: BaseException) -> bool:
    """Whether ``error`` says ``expected``, where ``WG`` stands for either candidate's name."""
    return re.search(re.escape(expected).replace("WG", r"wg\d+"), str(error)) is not None


CASES = ["output without STORAGE usage", "input smaller than one element", "input of 6 bytes", "empty input",
         "destroyed output", "output of another device"]


@pytest.mark.parametrize("case", CASES)
def test_a_refused_call_on_a_hit_raises_launch_refused_naming_set_key_and_binding(device, other_device, case):
    tuner = quiet_tuner(device)
    tunables = scale_set("scale_hit")
    tuner.execute(tunables, good_call(device))  # tuned: the key is a hit from here on
    (hit,) = tuner.states(tunables).values()
    assert isinstance(hit, Hit)
    args, says = refused_calls(device, other_device)[case]
    with pytest.raises(LaunchRefused) as refused:
        tuner.execute(tunables, args)
    assert str(refused.value).startswith("set 'scale_hit' [shape=any]: ")
    assert said(says, refused.value)
    assert isinstance(refused.value, KernelError)  # a launch failure: in a tune, a candidate's Launch value


@pytest.mark.parametrize("case", CASES)
def test_a_refused_call_on_a_miss_is_refused_before_any_tune_and_leaves_the_key_untuned(device, other_device, case):
    tuner = quiet_tuner(device)
    tunables = scale_set("scale_miss")
    args, says = refused_calls(device, other_device)[case]
    with pytest.raises(LaunchRefused, match="set 'scale_miss'") as refused:
        tuner.execute(tunables, args)
    assert said(says, refused.value)
    assert tuner.states(tunables) == {} and tuner.failures == {}  # no tune ran on the call, none failed
    tuner.execute(tunables, good_call(device))  # the same key on good buffers tunes as ever
    assert [type(state) for state in tuner.states(tunables).values()] == [Hit]


def test_a_grid_over_the_device_limit_is_refused_on_a_hit_and_no_candidate_on_a_miss(device):
    tuner = quiet_tuner(device)
    tunables = scale_set("scale_grid")
    too_many = 128 * (device.limits.max_workgroups_per_dimension + 1)  # over the limit for both candidates
    huge = Args({"x": device.create_buffer(size=16), "out": device.create_buffer(size=16)}, (too_many,))
    with pytest.raises(NoValidKernelFound, match="exceeds a device limit: dispatch of"):
        tuner.execute(tunables, huge)  # a miss: each candidate's grid is its own failure
    with pytest.raises(NoValidKernelFound):  # the key stays failed: the set's key says calls of it are alike
        tuner.execute(tunables, good_call(device))
    tuner.forget(tunables, tuner.key(tunables, huge))  # a retune
    tuner.execute(tunables, good_call(device))
    with pytest.raises(LaunchRefused, match=r"set 'scale_grid' \[shape=any\]: candidate 'wg\d+': exceeds a device "
                                            r"limit: dispatch of \(\d+, 1, 1\) workgroups"):
        tuner.execute(tunables, huge)  # a hit: the winner's launch is refused


def test_after_a_refused_call_the_same_call_is_refused_again_and_another_sets_tune_works(device, other_device):
    tuner = quiet_tuner(device)
    first, unrelated = scale_set("scale_first"), scale_set("scale_unrelated")
    tuner.execute(first, good_call(device))
    for case in CASES:
        args, _ = refused_calls(device, other_device)[case]
        for _ in range(2):  # a refused call stays refused: it was never bound
            with pytest.raises(LaunchRefused):
                tuner.execute(first, args)
    call = good_call(device)
    assert tuner.execute(unrelated, call).name in ("wg64", "wg128")
    assert [type(state) for state in tuner.states(unrelated).values()] == [Hit]
    x = struct.unpack(f"{4 * N}f", device.read_buffer_sync(call.buffers[0]))
    out = struct.unpack(f"{4 * N}f", device.read_buffer_sync(call.buffers[1]))
    assert out == tuple(2.0 * value for value in x)


def test_a_good_call_on_a_hit_adds_no_submission_and_no_check_after_its_first_launch(device):
    tuner = quiet_tuner(device)
    tunables = scale_set("scale_again")
    args = good_call(device)
    tuner.execute(tunables, args)
    (state,) = tuner.states(tunables).values()
    stages = [pipeline for pipeline in args.cache if getattr(pipeline, "kernel", None) is not None]
    assert [stage.kernel.name for stage in stages] == [tunables.candidates[state.index].name]
    tuner.execute(tunables, args)
    assert [key for key in args.cache if getattr(key, "kernel", None) is not None] == stages  # no new bind groups
