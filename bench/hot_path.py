"""The cost of wgtune on a cache hit: ``fastest(key)``, and ``execute()`` over calling the winner.

Prints, measured side by side in one run:

1. the median cost of ``tuner.fastest(set, key)`` on a hit (target <= 0.5 us);
2. the overhead of ``tuner.execute(set, args)`` on a hit over dispatching the winner directly,
   on a null device whose dispatch does nothing, so that only wgtune's own work is timed
   (target <= 3 us): with the same Args again (its key and grid are kept in ``args.cache``
   after the first call), and with a new Args each call (the key function and the grid run);
3. what a call's launch costs the WebGPU device over a bare dispatch on a hit
   (``WebGPUDevice.launch``, which checks a call's first launch and keeps WebGPU's refusals the
   call's, against ``WebGPUDevice.dispatch``), on a shim whose GPU calls do nothing
   (target <= 1 us);
4. for scale, the same pair as 2. on the real adapter (wgpu-py), where the dispatch itself dominates.

Each figure is the median of ``ROUNDS`` rounds of ``CALLS`` calls, the two sides of a pair
interleaved round by round (alternating which goes first) so that drift hits both alike.
Run: ``make bench`` or ``python bench/hot_path.py``.
"""

from __future__ import annotations

import statistics
import struct
import time

import wgtune
from wgtune import Args, Config, Device, DeviceIdentity, DeviceLimits, Kernel, TunableSet, Tuner, run_inline

ROUNDS = 31
CALLS = 20_000
REAL_CALLS = 500

WGSL = """
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<uniform> n: vec4<u32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) { if (id.x < n.x) { y[id.x] = y[id.x] + 1.0; } }
"""


class NullDevice(Device):
    """A device that does nothing, instantly: isolates wgtune's own cost."""

    identity = DeviceIdentity("null", "null", "null", "null")
    limits = DeviceLimits()
    timing = "wall-clock"

    async def compile(self, kernel):
        return kernel.name

    def dispatch(self, pipeline, args, grid, repeats=1):
        return None

    async def profile(self, pipeline, args, grid, repeats):
        return 1e-3 * repeats

    async def resolve(self, profile):
        return profile

    async def sync(self):
        return None

    def create_buffer(self, data=None, *, size=0):
        return "buffer"

    def clone_buffer(self, buffer):
        return buffer

    async def read_buffer(self, buffer):
        return b""


class _NullBuffer:
    def __init__(self, size: int, usage: int) -> None:
        self.size, self.usage = size, usage


class NullShim:
    """A GPU whose calls do nothing, under the real ``WebGPUDevice``: isolates the device
    algorithm's own Python per launch."""

    MAP_READ, COPY_SRC, COPY_DST, UNIFORM, STORAGE, QUERY_RESOLVE = 1, 4, 8, 64, 128, 512

    def create_buffer(self, size, usage):
        return _NullBuffer(size, usage)

    def write_buffer(self, buffer, offset, data):
        return None

    async def compile_module(self, kernel):
        return kernel.name, "layout"

    def create_bind_group(self, layout, entries):
        return ("group", layout)

    def bind_group_layout(self, pipeline, index):
        return "layout"

    def create_command_encoder(self):
        return []

    def begin_compute_pass(self, encoder, *, timestamp_writes=None):
        return encoder

    @staticmethod
    def set_pipeline(compute, pipeline):
        return None

    @staticmethod
    def set_bind_group(compute, index, group):
        return None

    @staticmethod
    def dispatch_workgroups(compute, x, y, z):
        return None

    @staticmethod
    def end(compute):
        return None

    def submit(self, encoder):
        return None

    def buffer_problem(self, buffer):
        return None

    def begin_call_scope(self):
        return None

    def end_call_scope(self):
        return None


def device_launch_overhead() -> tuple[float, float]:
    """``WebGPUDevice.dispatch`` and ``WebGPUDevice.launch`` of a compiled candidate on a hit
    (the call's bind groups made), per call, on :class:`NullShim`."""
    from wgtune.backends.webgpu import WebGPUDevice

    device = WebGPUDevice(NullShim(), timestamps=False)
    kernel = make_set().candidates[0]
    pipeline = run_inline(device.compile(kernel))
    args = Args((device.create_buffer(size=4 << 20),), (1 << 20,))
    grid = kernel.grid(args)
    device.launch(pipeline, args, grid)  # the call's first launch: checked, its bind groups made
    return paired(lambda: device.dispatch(pipeline, args, grid), lambda: device.launch(pipeline, args, grid), CALLS)


def make_set() -> TunableSet:
    candidates = [
        Kernel(f"add_wg{wg}", WGSL.replace("WG", str(wg)), workgroup_size=(wg, 1, 1),
               grid=lambda args, wg=wg: ((args.params[0] + wg - 1) // wg, 1, 1))
        for wg in (64, 128, 256)
    ]
    return TunableSet("add_one", candidates, key=lambda args: {"n": wgtune.anchor(args.params[0])})


def per_call(fn, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


def paired(first, second, calls: int, settle=lambda: None) -> tuple[float, float]:
    """Medians of both sides, alternating which goes first, settling (untimed) before each half.

    On a real device the work one half queues still runs while the next half is timed, so the
    queue is drained in between and the order alternates to cancel what is left of that bias.
    """
    a, b = [], []
    for round_ in range(ROUNDS):
        halves = [(first, a), (second, b)]
        for fn, out in halves if round_ % 2 == 0 else reversed(halves):
            settle()
            out.append(per_call(fn, calls))
    return statistics.median(a), statistics.median(b)


def measure(device: Device, args: Args, calls: int) -> dict:
    tunables = make_set()
    tuner = Tuner(device, config=Config(log_level="disabled", cache=False, samples=3, warmups=1))
    kernel = tuner.execute(tunables, args)  # tunes: from here on, every call is a hit
    key = tuner.key(tunables, args)
    state = tuner.fastest(tunables, key)
    assert isinstance(state, wgtune.Hit), state
    pipeline = run_inline(tuner.pipelines.compile(tunables, state.index))

    def direct() -> None:
        device.dispatch(pipeline, args, kernel.grid(args))

    def through_wgtune() -> None:
        tuner.execute(tunables, args)

    def baseline() -> None:
        return None

    def fastest() -> None:
        tuner.fastest(tunables, key)

    def settle() -> None:
        run_inline(device.sync())

    def direct_new_args() -> None:
        call = Args(args.buffers, args.params)
        device.dispatch(pipeline, call, kernel.grid(call))

    def through_wgtune_new_args() -> None:
        tuner.execute(tunables, Args(args.buffers, args.params))

    loop, lookup = paired(baseline, fastest, calls)
    plain, tuned = paired(direct, through_wgtune, calls, settle)
    plain_new, tuned_new = paired(direct_new_args, through_wgtune_new_args, calls, settle)
    return {"fastest": lookup - loop, "fastest_call": lookup, "direct": plain, "execute": tuned,
            "overhead": tuned - plain, "overhead_new_args": tuned_new - plain_new}


def main() -> None:
    print(f"wgtune {wgtune.__version__}: hot path on a hit, medians of {ROUNDS} rounds")
    null = measure(NullDevice(), Args(("buffer",), (1 << 20,)), CALLS)
    print(f"  fastest(key) on a hit:              {null['fastest'] * 1e6:7.3f} us   (target <= 0.5 us; "
          f"{null['fastest_call'] * 1e6:.3f} us before subtracting the cost of calling an empty function)")
    print(f"  dispatch the winner directly:       {null['direct'] * 1e6:7.3f} us   (null device)")
    print(f"  execute() on a hit:                 {null['execute'] * 1e6:7.3f} us   (null device)")
    print(f"  execute() overhead over direct:     {null['overhead'] * 1e6:7.3f} us   (target <= 3 us)")
    print(f"    the same, a new Args each call:   {null['overhead_new_args'] * 1e6:7.3f} us   (target <= 3 us; "
          "the key function and the grid run)")
    dispatch, launch = device_launch_overhead()
    print(f"  WebGPUDevice.dispatch on a hit:     {dispatch * 1e6:7.3f} us   (a shim that does nothing)")
    print(f"  WebGPUDevice.launch over dispatch:  {(launch - dispatch) * 1e6:7.3f} us   (target <= 1 us; what "
          "execute's launch adds to keep a refused launch the call's)")
    try:
        from wgtune.backends.native import NativeDevice

        device = NativeDevice.open()
    except Exception as error:  # no adapter: the null-device figures above still stand
        print(f"  (no native adapter for the real-device figures: {error})")
        return
    n = 1 << 16
    args = Args((device.create_buffer(struct.pack(f"{n}f", *([0.0] * n))),), (n,))
    real = measure(device, args, REAL_CALLS)
    name = device.identity.device
    print(f"  on {name}: dispatch directly {real['direct'] * 1e6:.1f} us, execute() {real['execute'] * 1e6:.1f} us, "
          f"difference {real['overhead'] * 1e6:+.1f} us (GPU submission dominates; noisy)")


if __name__ == "__main__":
    main()
