"""Kernels compiled without WebGPU's runtime checks (``Kernel(runtime_checks=False)``): natively
through wgpu-native's trusted shader modules (``backends/unchecked.py``), on the adapter present
(lavapipe here); checked everywhere else."""

from __future__ import annotations

import numpy as np
import pytest

from wgtune import Args, Config, ConfigError, Kernel, KernelError, Measured, Space, TunableSet, Tuner, run_inline
from wgtune.backends import unchecked, wgpu_shim
from wgtune.backends.isolated_worker import OpenSpec, rebuilt
from wgtune.backends.native import NativeDevice
from wgtune.backends.remote_device import RemoteDevice, _spec
from wgtune.kernels.matmul import matmul_f16_set, matmul_set
from wgtune.kernels.matmul.tiles import CHECKED
from wgtune.kernels.reduction import reduction_set

N = 1000

# Each invocation sums a row of a workgroup tile through a loop: dynamic indices into workgroup
# and storage arrays and a loop, which are what the runtime checks guard.
SUM_ROWS = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
var<workgroup> tile: array<f32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    tile[l.x] = select(0.0, x[g.x], g.x < n.x);
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i <= l.x; i++) { total += tile[i]; }
    if (g.x < n.x) { y[g.x] = total; }
}"""


def blocks(args: Args) -> tuple[int, int, int]:
    return (-(-args.params[0] // 64), 1, 1)


def prefix_sums(x: np.ndarray) -> np.ndarray:
    """Each element's sum of its 64-block up to it: what SUM_ROWS writes."""
    return np.concatenate([np.cumsum(x[i:i + 64]) for i in range(0, len(x), 64)]).astype(np.float32)


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


@pytest.fixture
def trusted_calls(monkeypatch) -> list[str]:
    """The labels of the modules compiled without runtime checks, as they are made."""
    calls: list[str] = []
    real = wgpu_shim.create_unchecked_module

    def spy(device, code, label=""):
        calls.append(label)
        return real(device, code, label)

    monkeypatch.setattr(wgpu_shim, "create_unchecked_module", spy)
    return calls


def call(device: NativeDevice) -> tuple[Args, np.ndarray]:
    x = np.random.default_rng(7).random(N, dtype=np.float32)
    return Args((device.create_buffer(x.tobytes()), device.create_buffer(size=4 * N)), (N,)), x


def output(device: NativeDevice, args: Args) -> np.ndarray:
    return np.frombuffer(device.read_buffer_sync(args.buffers[1]), dtype=np.float32)


def test_the_pinned_wgpu_py_offers_modules_without_runtime_checks():
    assert unchecked.unchecked_modules_available()


@pytest.mark.parametrize("runtime_checks", [True, False], ids=["checked", "unchecked"])
def test_a_kernel_compiles_with_or_without_runtime_checks_as_it_says_and_computes_the_same(
        device, trusted_calls, runtime_checks):
    args, x = call(device)
    kernel = Kernel(f"sum_rows_{runtime_checks}", SUM_ROWS, grid=blocks, runtime_checks=runtime_checks)
    device.dispatch(run_inline(device.compile(kernel)), args, blocks(args))
    np.testing.assert_allclose(output(device, args), prefix_sums(x), rtol=1e-5)
    assert trusted_calls == ([] if runtime_checks else [kernel.name])


def test_each_stage_of_a_candidate_is_compiled_as_that_stage_says(device, trusted_calls):
    args, x = call(device)
    code = "// this test's own code: the device compiles each code once, and earlier tests compiled SUM_ROWS\n"
    second = Kernel("second", code + SUM_ROWS, grid=blocks, runtime_checks=False)
    kernel = Kernel("first", code + SUM_ROWS, grid=blocks, then=(second,))
    device.dispatch(run_inline(device.compile(kernel)), args, blocks(args))
    np.testing.assert_allclose(output(device, args), prefix_sums(x), rtol=1e-5)
    assert trusted_calls == ["second"]


def test_an_unchecked_kernel_that_does_not_compile_fails_that_candidate_with_the_compilers_message(device):
    broken = Kernel("broken", SUM_ROWS.replace("total += tile[i];", "total += tile[i]"), grid=blocks,
                    runtime_checks=False)
    with pytest.raises(KernelError, match="expected"):
        run_inline(device.compile(broken))
    good = Kernel("good", SUM_ROWS, grid=blocks, runtime_checks=False)
    tunables = TunableSet("unchecked_sums", [broken, good], key=lambda a: {"n": a.params[0]})
    tuner = Tuner(device, config=Config(log_level="disabled", cache=False, samples=3, warmups=1))
    args, x = call(device)
    assert tuner.execute(tunables, args).name == "good"
    assert isinstance(tuner.results(tunables, tunables.key(args))[1], Measured)
    np.testing.assert_allclose(output(device, args), prefix_sums(x), rtol=1e-5)


def test_without_the_trusted_entry_point_the_module_is_compiled_checked(device, monkeypatch):
    monkeypatch.setattr(unchecked, "_internals", lambda: None)
    assert not unchecked.unchecked_modules_available()
    made: list[str] = []
    real = device.gpu.create_shader_module

    class Recording:
        def create_shader_module(self, *, code, label=""):
            made.append(label)
            return real(code=code, label=label)

    module = unchecked.create_unchecked_module(Recording(), SUM_ROWS, "fallback")
    assert made == ["fallback"] and module is not None


def test_runtime_checks_is_a_bool_and_part_of_the_identity_only_when_off():
    with pytest.raises(ConfigError, match="runtime_checks must be True or False, got 'no'"):
        Kernel("k", SUM_ROWS, grid=blocks, runtime_checks="no")
    checked = Kernel("k", SUM_ROWS, grid=blocks)
    assert checked.fingerprint() == Kernel("k", SUM_ROWS, grid=blocks, runtime_checks=True).fingerprint()
    assert "runtime_checks" not in checked.fingerprint()  # stored winners of checked kernels stand
    assert checked.fingerprint() != Kernel("k", SUM_ROWS, grid=blocks, runtime_checks=False).fingerprint()


def test_the_tuning_process_compiles_each_stage_as_it_says(device):
    kernel = Kernel("isolated", SUM_ROWS, grid=blocks, runtime_checks=False,
                    then=(Kernel("checked", SUM_ROWS, grid=blocks),))
    assert [stage.runtime_checks for stage in rebuilt(1, _spec(kernel)).stages] == [False, True]
    args, x = call(device)
    remote = RemoteDevice(device, OpenSpec(None, None))
    try:
        remote.begin_tune(None)
        there = remote.adopt(args)
        unchecked_only = Kernel("isolated", SUM_ROWS, grid=blocks, runtime_checks=False)
        remote.dispatch(run_inline(remote.compile(unchecked_only)), there, blocks(args))
        out = np.frombuffer(run_inline(remote.read_buffer(there.buffers[1])), dtype=np.float32)
        np.testing.assert_allclose(out, prefix_sums(x), rtol=1e-5)
    finally:
        remote.close()


@pytest.mark.parametrize("tunables", [matmul_set(), matmul_f16_set()], ids=["f32", "f16"])
def test_matmul_candidates_are_unchecked_in_every_stage_but_the_tiles_measured_faster_checked(tunables):
    checked_names = {tile.name for tile in CHECKED}
    for kernel in tunables.candidates:
        wanted = kernel.name in checked_names
        assert [stage.runtime_checks for stage in kernel.stages] == [wanted] * len(kernel.stages), kernel.name
    if tunables.name == "matmul":
        assert {k.name for k in tunables.candidates if k.runtime_checks} == checked_names


@pytest.mark.parametrize("op", ["sum", "max"])
def test_every_reduction_candidate_is_unchecked_in_every_stage(op):
    tunables = reduction_set(op)
    assert all(not stage.runtime_checks for kernel in tunables.candidates for stage in kernel.stages)


def test_a_space_passes_runtime_checks_to_every_candidate_and_they_tune_unchecked(device, trusted_calls):
    # The workgroup tile's size is an override: each configuration compiles its own module.
    source = SUM_ROWS.replace("var<workgroup> tile: array<f32, 64>;", "override SPARE: u32 = 0u;\n"
                              "var<workgroup> tile: array<f32, 64>;").replace(
        "var total = 0.0;", "var total = f32(SPARE) * 0.0;")
    space = Space("sums", source=source, params={"SPARE": [0, 1, 2]}, default={"SPARE": 0},
                  grid=lambda p, args: blocks(args), runtime_checks=False)
    candidates = space.candidates()
    assert [kernel.runtime_checks for kernel in candidates] == [False] * 3
    tunables = TunableSet("unchecked_space", candidates, key=lambda a: {"n": a.params[0]})
    tuner = Tuner(device, config=Config(log_level="disabled", cache=False, samples=3, warmups=1))
    args, x = call(device)
    tuner.execute(tunables, args)
    np.testing.assert_allclose(output(device, args), prefix_sums(x), rtol=1e-5)
    assert sorted(trusted_calls) == sorted(kernel.name for kernel in candidates)
    assert Space("sums", source=source, params={"SPARE": [0]}, default={"SPARE": 0},
                 grid=lambda p, args: blocks(args)).candidates()[0].runtime_checks
