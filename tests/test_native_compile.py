"""Compiling several pipelines at once through wgpu-py's worker threads, on the adapter present."""

from __future__ import annotations

import struct
import threading

import pytest
from test_native import quick, scale_kernel, scale_set

from wgtune import Args, KernelError, Tuner
from wgtune.backends import native
from wgtune.backends.native import NativeDevice
from wgtune.gpu.device import CompiledKernel
from wgtune.runner import run_inline
from wgtune.sets.kernel import Kernel


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def broken(name: str) -> Kernel:
    return Kernel(name, "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }", grid=lambda args: (1, 1, 1))


def test_compile_many_answers_each_kernel_in_order_with_the_failures_as_values(device, monkeypatch):
    monkeypatch.setattr(native, "COMPILE_THREADS", 4)
    kernels = [scale_kernel(f"wg{wg}", wg) for wg in (32, 64)] + [broken("bad")] + [scale_kernel("wg128", 128)]
    compiled = run_inline(device.compile_many(kernels))
    assert [type(c) for c in compiled] == [CompiledKernel, CompiledKernel, KernelError, CompiledKernel]
    assert [c.kernel.name for c in compiled if isinstance(c, CompiledKernel)] == ["wg32", "wg64", "wg128"]
    assert str(compiled[2])  # the compiler's message


def test_a_tune_on_pipelines_compiled_by_threads_picks_a_right_winner(device, monkeypatch):
    monkeypatch.setattr(native, "COMPILE_THREADS", 4)
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
    kernels = [scale_kernel("ahead32", 32), broken("ahead_bad"), scale_kernel("ahead64", 64)]
    device.start_compiles(kernels)
    assert len(device.shim._started) == 3  # on worker threads; nothing waited for them
    assert run_inline(device.compile(kernels[0])).kernel.name == "ahead32"
    with pytest.raises(KernelError):
        run_inline(device.compile(kernels[1]))
    [taken] = run_inline(device.compile_many([kernels[2]]))
    assert isinstance(taken, CompiledKernel) and taken.kernel.name == "ahead64"
    assert device.shim._started == {}  # each taken once: a later compile of them compiles anew


def compile_threads() -> int:
    return sum(thread.name.startswith("wgtune-compile") for thread in threading.enumerate())


def test_closing_a_device_stops_its_compile_threads_and_it_still_compiles_after(monkeypatch):
    monkeypatch.setattr(native, "COMPILE_THREADS", 3)
    before = compile_threads()
    with NativeDevice.open() as device:
        device.start_compiles([scale_kernel("closing32", 32), scale_kernel("closing64", 64)])
        assert compile_threads() > before
        # This device's own threads: other tests' devices may still be ending theirs meanwhile.
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
