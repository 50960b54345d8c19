"""An application's buffer made without COPY_SRC, tuned in the tuning process (``open_tuner``'s
default, ``isolation.py``). Since a native tune takes the call's own buffers (``Settler.snapshot``:
no copies at the miss), the tuning process's copy of the call (``RemoteDevice.adopt``) read them
itself, and a buffer nobody can copy failed the whole tune with wgpu's validation error; in process
the same call is tuned on a zero-filled stand-in (``WebGPUDevice.clone_buffer``), as before."""

from __future__ import annotations

import struct

import wgpu

from wgtune import Args, Config, Kernel, Measured, TunableSet
from wgtune.backends.local import open_tuner
from wgtune.backends.native import NativeDevice

SCALE = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) { if (id.x < n.x) { y[id.x] = 3.0 * x[id.x]; } }"""


def scale(wg: int) -> Kernel:
    return Kernel(f"wg{wg}", SCALE.replace("WG", str(wg)), grid=lambda args: ((args.params[0] + wg - 1) // wg, 1, 1))


def test_storage_only_buffers_are_tuned_on_in_the_tuning_process():
    device = NativeDevice.open()
    n = 300
    usage = wgpu.BufferUsage
    x = device.gpu.create_buffer_with_data(data=struct.pack(f"{n}f", *range(n)), usage=usage.STORAGE)
    y = device.gpu.create_buffer(size=4 * n, usage=usage.STORAGE | usage.COPY_DST)  # an output nobody reads back
    tunables = TunableSet("scale", [scale(64), scale(128)], key=lambda args: {"n": args.params[0]}, outputs=(1,))
    tuner = open_tuner(device, config=Config(log_level="disabled", cache=False, samples=3, warmups=1), isolate=True)
    try:
        tuner.execute(tunables, Args((x, y), (n,)))  # before: TuneFailed, "... do not contain ... COPY_SRC"
        assert tuner.guard.starts == 1  # tuned in the tuning process, not in this one
        assert all(isinstance(result, Measured) for result in tuner.results(tunables, tunables.key(Args((x, y), (n,)))))
    finally:
        tuner.guard.close()
