"""A candidate's scratch buffers (``Kernel(scratch=...)``) on the adapter present (lavapipe here):
made by the device, bound by name in every stage, never among the call's buffers or outputs."""

from __future__ import annotations

import numpy as np
import pytest

from wgtune import (
    Args,
    Config,
    ConfigError,
    Kernel,
    KernelError,
    Measured,
    TunableSet,
    Tuner,
    run_inline,
)
from wgtune.backends.isolated_worker import OpenSpec
from wgtune.backends.native import NativeDevice
from wgtune.backends.remote_device import RemoteDevice
from wgtune.sets.bindings import binding_plan

N = 1000

# Pass 1 writes 2x into the scratch ``tmp``, pass 2 adds 1 into ``y``: y = 2x + 1. ``tmp`` is a
# binding past the call's two buffers and the params: a call in order must not count it.
PASS_1 = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> tmp: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < n.x) { tmp[g.x] = 2.0 * x[g.x]; }
}"""
PASS_2 = """
@group(0) @binding(3) var<storage, read_write> tmp: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < n.x) { y[g.x] = tmp[g.x] + 1.0; }
}"""
ONE_PASS = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < n.x) { y[g.x] = 2.0 * x[g.x] + 1.0; }
}"""


def blocks(args: Args) -> tuple[int, int, int]:
    return (-(-args.params[0] // 64), 1, 1)


def two_pass(name: str = "two_pass", size=lambda args: 4 * args.params[0], **extra) -> Kernel:
    return Kernel(name, PASS_1, grid=blocks, then=(Kernel(f"{name}_add", PASS_2, grid=blocks),),
                  scratch={"tmp": size}, **extra)


def one_pass(name: str = "one_pass") -> Kernel:
    return Kernel(name, ONE_PASS, grid=blocks)


def quick() -> Config:
    return Config(log_level="disabled", cache=False, samples=3, warmups=1)


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def call(device: NativeDevice, by_name: bool = False) -> tuple[Args, np.ndarray]:
    x = np.arange(N, dtype=np.float32)
    buffers = (device.create_buffer(x.tobytes()), device.create_buffer(size=4 * N))
    if by_name:
        return Args({"x": buffers[0], "y": buffers[1]}, (N,)), x
    return Args(buffers, (N,)), x


def output(device: NativeDevice, args: Args) -> np.ndarray:
    return np.frombuffer(device.read_buffer_sync(args.buffers[1]), dtype=np.float32)


@pytest.mark.parametrize("by_name", [False, True], ids=["in_order", "by_name"])
def test_a_two_pass_candidate_gets_its_scratch_from_the_device_and_is_checked_on_the_calls_output(device, by_name):
    # The two-pass candidate comes first, so the outputs the checks compare are read from its
    # WGSL: y only, not its scratch (which the one-pass candidate does not even have).
    tunables = TunableSet("scratch_2x1", [two_pass(), one_pass()], key=lambda a: {"n": a.params[0]})
    assert tunables.outputs == ("y",)
    tuner = Tuner(device, config=quick())
    args, x = call(device, by_name)
    tuner.execute(tunables, args)
    results = tuner.results(tunables, tunables.key(args))
    assert all(isinstance(result, Measured) for result in results), results
    np.testing.assert_array_equal(output(device, args), 2 * x + 1)
    # Run alone, the two-pass candidate writes the same (its scratch is not the call's y).
    args, x = call(device, by_name)
    device.dispatch(run_inline(device.compile(two_pass())), args, blocks(args))
    np.testing.assert_array_equal(output(device, args), 2 * x + 1)


def test_scratch_is_kept_with_the_call_and_shared_by_name_and_size(device):
    args, _ = call(device)
    for name in ("first", "second"):
        device.dispatch(run_inline(device.compile(two_pass(name))), args, blocks(args))
    made = [key for key in args.cache if isinstance(key, tuple) and key[0] == "scratch"]
    assert made == [("scratch", "tmp", 4 * N)]


def test_a_call_that_names_a_scratch_buffer_fails_that_candidate_saying_so(device):
    tunables = TunableSet("scratch_named", [two_pass()], key=lambda a: {"n": a.params[0]})
    x = np.arange(N, dtype=np.float32)
    args = Args({"x": device.create_buffer(x.tobytes()), "y": device.create_buffer(size=4 * N),
                 "tmp": device.create_buffer(size=4 * N)}, (N,))
    # One candidate: nothing to tune, so the launch itself raises.
    with pytest.raises(KernelError, match="'tmp', which this candidate makes itself"):
        Tuner(device, config=quick()).execute(tunables, args)


@pytest.mark.parametrize(("kernel", "why"), [
    (Kernel("unbound", PASS_1, grid=blocks, scratch={"nowhere": lambda a: 4}), "'nowhere' is declared by no stage"),
    (Kernel("uniform", PASS_1, grid=blocks, scratch={"n": lambda a: 16}), "'n' is declared as a uniform"),
])
def test_scratch_that_cannot_be_bound_fails_the_candidate_when_it_compiles(device, kernel, why):
    with pytest.raises(KernelError, match=why):
        binding_plan(kernel)
    with pytest.raises(KernelError, match=why):
        run_inline(device.compile(kernel))


@pytest.mark.parametrize(("size", "why"), [
    (lambda args: 1 << 62, "exceeds a device limit: scratch 'tmp' of 4611686018427387904 bytes"),
    (lambda args: -4, "its size must be bytes >= 0, got -4"),
    (lambda args: 4.5, "its size must be bytes >= 0, got 4.5"),
    (lambda args: args.params[7], "its size function failed: IndexError"),
])
def test_a_scratch_size_the_device_cannot_make_is_that_candidates_failure(device, size, why):
    tunables = TunableSet("scratch_size", [one_pass(), two_pass("bad_size", size)], key=lambda a: {"n": a.params[0]})
    tuner = Tuner(device, config=quick())
    args, x = call(device)
    assert tuner.execute(tunables, args).name == "one_pass"
    assert why in tuner.results(tunables, tunables.key(args))[1].reason
    np.testing.assert_array_equal(output(device, args), 2 * x + 1)


def test_a_two_pass_candidate_gets_its_scratch_in_the_tuning_process_too(device):
    args, x = call(device)
    remote = RemoteDevice(device, OpenSpec(None, None))
    try:
        remote.begin_tune(None)
        there = remote.adopt(args)  # its functions (grids, sizes) run here, their values go there
        remote.dispatch(run_inline(remote.compile(two_pass())), there, blocks(args))
        out = np.frombuffer(run_inline(remote.read_buffer(there.buffers[1])), dtype=np.float32)
        np.testing.assert_array_equal(out, 2 * x + 1)
        broken = run_inline(remote.compile(two_pass("broken", size=lambda args: 1 // 0)))
        remote.dispatch(broken, there, blocks(args))
        with pytest.raises(KernelError, match=r"scratch 'tmp': its size function failed: ZeroDivisionError: "):
            run_inline(remote.sync())  # as in process, word for word, by the next call that waits
    finally:
        remote.close()


def test_scratch_is_checked_where_the_kernel_is_made_and_its_names_are_part_of_the_identity():
    with pytest.raises(ConfigError, match="scratch 'tmp' needs a function"):
        Kernel("k", PASS_1, grid=blocks, scratch={"tmp": 4096})
    with pytest.raises(ConfigError, match="not a WGSL identifier"):
        Kernel("k", PASS_1, grid=blocks, scratch={"2tmp": lambda a: 4})
    with pytest.raises(ConfigError, match="scratch must map"):
        Kernel("k", PASS_1, grid=blocks, scratch=["tmp"])
    with pytest.raises(ConfigError, match="stage 'late' declares scratch; declare it on the candidate"):
        Kernel("k", PASS_1, grid=blocks, then=(Kernel("late", PASS_2, grid=blocks, scratch={"tmp": lambda a: 4}),))
    with_scratch, without = two_pass(), Kernel("two_pass", PASS_1, grid=blocks, then=two_pass().then)
    assert with_scratch.fingerprint() != without.fingerprint()
    assert with_scratch.fingerprint() == two_pass(size=lambda args: 8 * args.params[0]).fingerprint()


def test_stages_may_bind_the_scratch_at_different_slots_even_where_another_stage_has_a_call_buffer(device):
    # Pass 2 numbers its bindings from 0: tmp at (0, 0), where pass 1 has the call's x.
    renumbered = PASS_2.replace("@binding(3) var<storage, read_write> tmp", "@binding(0) var<storage, read_write> tmp")
    kernel = Kernel("renumbered", PASS_1, grid=blocks, then=(Kernel("renumbered_add", renumbered, grid=blocks),),
                    scratch={"tmp": lambda args: 4 * args.params[0]})
    assert binding_plan(kernel)[0].candidate.positions == {(0, 0): 0, (0, 1): 1}
    for by_name in (False, True):
        args, x = call(device, by_name)
        device.dispatch(run_inline(device.compile(kernel)), args, blocks(args))
        np.testing.assert_array_equal(output(device, args), 2 * x + 1)


def test_a_call_in_order_to_a_candidate_with_scratch_and_two_uniforms_is_told_to_name_its_buffers(device):
    second_uniform = PASS_1.replace("@compute", "@group(0) @binding(4) var<uniform> extra: vec4<f32>;\n@compute")
    second_uniform = second_uniform.replace("2.0 * x[g.x]", "extra.x * x[g.x]")
    kernel = Kernel("two_uniforms", second_uniform, grid=blocks,
                    then=(Kernel("two_uniforms_add", PASS_2, grid=blocks),),
                    scratch={"tmp": lambda args: 4 * args.params[0]})
    args, _ = call(device)
    with pytest.raises(KernelError, match=r"several uniforms and scratch.*name them"):
        device.dispatch(run_inline(device.compile(kernel)), args, blocks(args))
