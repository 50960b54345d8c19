"""Compiling several pipelines at once through wgpu-py's worker threads, on the adapter present."""

from __future__ import annotations

import struct

import pytest
from test_native import quick, scale_kernel, scale_set

from wgtune import Args, KernelError, Tuner
from wgtune.backends import wgpu_shim
from wgtune.backends.native import NativeDevice
from wgtune.gpu.device import CompiledKernel
from wgtune.runner import run_inline
from wgtune.sets.kernel import Kernel


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def broken(name: str) -> Kernel:
    """A kernel that does not compile, its code its own (the device compiles each code once)."""
    return Kernel(name, f"// {name}\n@compute @workgroup_size(1) fn main() {{ let x: u32 = 1.5; }}",
                  grid=lambda args: (1, 1, 1))


def test_compile_many_answers_each_kernel_in_order_with_the_failures_as_values(device, monkeypatch):
    monkeypatch.setattr(wgpu_shim, "COMPILE_THREADS", 4)
    kernels = [scale_kernel(f"wg{wg}", wg) for wg in (32, 64)] + [broken("bad")] + [scale_kernel("wg128", 128)]
    compiled = run_inline(device.compile_many(kernels))
    assert [type(c) for c in compiled] == [CompiledKernel, CompiledKernel, KernelError, CompiledKernel]
    assert [c.kernel.name for c in compiled if isinstance(c, CompiledKernel)] == ["wg32", "wg64", "wg128"]
    assert str(compiled[2])  # the compiler's message


def test_a_tune_on_pipelines_compiled_by_threads_picks_a_right_winner(device, monkeypatch):
    monkeypatch.setattr(wgpu_shim, "COMPILE_THREADS", 4)
    n = 4099
    candidates = [scale_kernel(f"wg{wg}", wg) for wg in (32, 64, 128, 256)] + [scale_kernel("wrong", 64, "2.0")]
    tunables = scale_set(*candidates)
    x = device.create_buffer(struct.pack(f"{n}f", *range(n)))
    y = device.create_buffer(size=4 * n)
    tuner = Tuner(device, config=quick(checks=True))
    kernel = tuner.execute(tunables, Args((x, y), (n,)))
    assert kernel.name != "wrong"
    out = struct.unpack(f"{n}f", device.read_buffer_sync(y))
    assert out[n - 1] == 3.0 * (n - 1)
    compiled = {tunables.candidates[index].name for _set, index in tuner.pipelines.compiled}
    assert compiled == {c.name for c in candidates}  # all five, compiled together before sampling
    assert device.shim._compilers is not None  # through the worker threads


def test_compiles_begun_ahead_are_taken_by_the_later_compile_with_their_errors(device):
    kernels = [scale_kernel("ahead8", 8), broken("ahead_bad"), scale_kernel("ahead16", 16)]
    device.start_compiles(kernels)
    assert len(device.shim._started) == 3  # on worker threads; nothing waited for them
    assert run_inline(device.compile(kernels[0])).kernel.name == "ahead8"
    with pytest.raises(KernelError):
        run_inline(device.compile(kernels[1]))
    [taken] = run_inline(device.compile_many([kernels[2]]))
    assert isinstance(taken, CompiledKernel) and taken.kernel.name == "ahead16"
    assert device.shim._started == {}  # each taken once: a later compile of them compiles anew


def test_closing_a_device_stops_its_compile_threads_and_it_still_compiles_after(monkeypatch):
    monkeypatch.setattr(wgpu_shim, "COMPILE_THREADS", 3)
    with NativeDevice.open() as device:
        device.start_compiles([scale_kernel("closing32", 32), scale_kernel("closing64", 64)])
        # This device's own threads, not the process's: other tests' devices may be ending theirs meanwhile.
        own = set(device.shim._compilers._threads)
        assert own and all(thread.name.startswith("wgtune-compile") for thread in own)
        assert run_inline(device.compile(scale_kernel("closing128", 128))).kernel.name == "closing128"
    for thread in own:  # each finishes its current compile, then ends
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in own)
    assert device.shim._started == {} and device.shim._compilers is None
    compiled = run_inline(device.compile_many([scale_kernel("after32", 32), scale_kernel("after64", 64)]))
    assert [c.kernel.name for c in compiled] == ["after32", "after64"]  # threads again, on demand
    device.close()
    device.close()  # twice is harmless


def counting(device: NativeDevice, monkeypatch) -> list[str]:
    """The names of the stages the driver is asked to compile from now on (from any thread)."""
    sent: list[str] = []
    create = device.shim._create_pipeline

    async def create_pipeline(kernel):
        sent.append(kernel.name)
        return await create(kernel)

    monkeypatch.setattr(device.shim, "_create_pipeline", create_pipeline)
    return sent


def test_stages_of_the_same_code_share_one_compiled_pipeline_and_each_runs_right(monkeypatch):
    with NativeDevice.open() as device:
        sent = counting(device, monkeypatch)
        # "twice" runs the same code as "once" as its second stage; "unchecked" differs only in its checks.
        once, again = scale_kernel("once", 32), scale_kernel("again", 32)
        twice = scale_kernel("twice", 64, "2.0", then=(scale_kernel("twice_second", 32),))
        unchecked = scale_kernel("unchecked", 32, runtime_checks=False)
        compiled = run_inline(device.compile_many([once, again, twice, unchecked]))
        assert sorted(sent) == ["once", "twice", "unchecked"]
        assert compiled[0].pipeline is compiled[1].pipeline is compiled[2].then[0].pipeline
        assert compiled[3].pipeline is not compiled[0].pipeline
        assert [c.kernel.name for c in compiled] == ["once", "again", "twice", "unchecked"]
        assert run_inline(device.compile(scale_kernel("later", 32))).pipeline is compiled[0].pipeline
        assert len(sent) == 3  # nothing new compiled
        # Each stage binds its own call's buffers: "again" alone, and "twice", whose second stage
        # (the shared code, times 3) overwrites what its first (times 2) wrote.
        for candidate in (compiled[1], compiled[2]):
            x = device.create_buffer(struct.pack("5f", *range(5)))
            y = device.create_buffer(struct.pack("5f", *[float("nan")] * 5))
            args = Args((x, y), (5,))
            device.dispatch(candidate, args, candidate.kernel.grid(args))
            assert struct.unpack("5f", device.read_buffer_sync(y)) == (0.0, 3.0, 6.0, 9.0, 12.0)


def test_stages_of_one_code_that_fails_all_get_its_error_and_a_later_compile_asks_again(monkeypatch):
    with NativeDevice.open() as device:
        sent = counting(device, monkeypatch)
        bad = broken("shared_bad")
        same = Kernel("same_bad", bad.wgsl, grid=bad.grid)
        compiled = run_inline(device.compile_many([bad, scale_kernel("fine", 32), same]))
        assert sorted(sent) == ["fine", "shared_bad"]
        assert isinstance(compiled[0], KernelError) and compiled[2] is compiled[0]
        assert isinstance(compiled[1], CompiledKernel)
        with pytest.raises(KernelError) as again:
            run_inline(device.compile(same))
        # Failures are not kept: the driver is asked again, for the stage that asks (its message names it).
        assert sent[2:] == ["same_bad"]
        assert "same_bad" in str(again.value) and "shared_bad" not in str(again.value)


def test_compiles_begun_ahead_start_each_code_once_and_the_later_compile_takes_them(monkeypatch):
    with NativeDevice.open() as device:
        first, second = scale_kernel("begun", 128), scale_kernel("begun_too", 128)
        device.start_compiles([first, second])
        [(kernel, future)] = device.shim._started.values()
        assert kernel.name == "begun"
        future.result(timeout=120)  # compiled before counting starts: a busy machine may start the thread late
        sent = counting(device, monkeypatch)
        compiled = run_inline(device.compile_many([second]))
        assert sent == [] and device.shim._started == {}  # the begun compile, taken
        assert compiled[0].kernel.name == "begun_too"
