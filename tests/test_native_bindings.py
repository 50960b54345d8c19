"""Bindings taken from the WGSL, on the adapter present (lavapipe without a GPU): buffers by name,
a kernel over two bind groups, a two-pass reduction whose passes have their own params, and the
output checks comparing the read_write bindings by default."""

from __future__ import annotations

import math
import struct

import pytest
from wgsl_samples import layer

from wgtune import Args, Config, Kernel, Launch, Measured, Mismatch, TunableSet, Tuner
from wgtune.backends.native import NativeDevice


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def checked_tuner(device: NativeDevice) -> Tuner:
    return Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))


def floats(device: NativeDevice, buffer, count: int) -> list[float]:
    return list(struct.unpack(f"{count}f", device.read_buffer_sync(buffer)[: 4 * count]))


def results(tuner: Tuner, tunables: TunableSet, args: Args) -> list:
    return tuner.results(tunables, tuner.key(tunables, args))


# -- buffers by name ----------------------------------------------------------------------------

AXPY = """
struct Params { n: u32, alpha: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < params.n) { y[gid.x] = params.alpha * x[gid.x] + y[gid.x]; }
}
"""

# The same computation from another hand: the uniform first, y before x.
AXPY_REORDERED = """
struct Params { n: u32, alpha: f32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@compute @workgroup_size(128)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < params.n) { y[gid.x] = params.alpha * x[gid.x] + y[gid.x]; }
}
"""

N = 3001


def blocks(size: int):
    return lambda args: (-(-args.params[0] // size), 1, 1)


def test_buffers_by_name_bind_wherever_each_candidate_declares_them(device):
    candidates = [
        Kernel("axpy", AXPY, blocks(64)),
        Kernel("axpy_reordered", AXPY_REORDERED, blocks(128)),
        Kernel("renamed", AXPY.replace(" x", " input").replace("x[", "input["), blocks(64)),
    ]
    tunables = TunableSet("axpy_named", candidates, key=lambda args: {"n": args.params[0]})
    x = device.create_buffer(struct.pack(f"{N}f", *range(N)))
    y = device.create_buffer(struct.pack(f"{N}f", *([1.0] * N)))
    args = Args({"x": x, "y": y}, (N, 2.0))
    tuner = checked_tuner(device)
    tuner.execute(tunables, args)
    first, reordered, renamed = results(tuner, tunables, args)
    assert isinstance(first, Measured) and isinstance(reordered, Measured), (first, reordered)  # and they agree
    assert isinstance(renamed, Launch) and "names 'x', which no stage of this candidate declares" in renamed.reason
    assert floats(device, y, N) == [2.0 * i + 1.0 for i in range(N)]  # y read back: in place, once


# -- two bind groups ----------------------------------------------------------------------------



@pytest.mark.parametrize("named", [False, True], ids=["in-order", "by-name"])
def test_a_kernel_over_two_bind_groups_tunes_and_computes(device, named):
    tunables = TunableSet("layer", [Kernel(f"wg{wg}", layer(wg), blocks(wg)) for wg in (64, 256)],
                          key=lambda args: {"n": args.params[0]})
    x, weight, bias = (device.create_buffer(struct.pack(f"{N}f", *(f(i) for i in range(N))))
                       for f in (float, lambda i: i % 3, lambda i: -i))
    y = device.create_buffer(size=4 * N)
    args = Args({"weight": weight, "bias": bias, "x": x, "y": y} if named else (x, y, weight, bias), (N, 0.5))
    tuner = checked_tuner(device)
    tuner.execute(tunables, args)
    assert all(isinstance(result, Measured) for result in results(tuner, tunables, args))
    tuner.execute(tunables, args)  # a hit: the winner again, on the bind groups made for this call
    assert floats(device, y, N) == [0.5 * (i % 3) * i - i for i in range(N)]


# -- a two-pass reduction whose passes have their own params -------------------------------------

# Pass 1: each workgroup sums a chunk of CHUNK values into one partial; pass 2 sums the partials,
# as many as it is told in its own uniform. Two modules, each numbering its bindings from 0.
PARTIALS = """
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> partials: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
const CHUNK: u32 = CHUNK_SIZEu;
var<workgroup> tile: array<f32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let end = min((wid.x + 1u) * CHUNK, params.n);
    var sum = 0.0;
    for (var i = wid.x * CHUNK + lid; i < end; i += 64u) { sum += input[i]; }
    tile[lid] = sum;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s / 2u) {
        if (lid < s) { tile[lid] = tile[lid] + tile[lid + s]; }
        workgroupBarrier();
    }
    if (lid == 0u) { partials[wid.x] = tile[0]; }
}
"""

TOTAL = """
struct Params { count: u32 }
@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
var<workgroup> tile: array<f32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    var sum = 0.0;
    for (var i = lid; i < params.count; i += 64u) { sum += partials[i]; }
    tile[lid] = sum;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s / 2u) {
        if (lid < s) { tile[lid] = tile[lid] + tile[lid + s]; }
        workgroupBarrier();
    }
    if (lid == 0u) { output[0] = tile[0]; }
}
"""


def two_pass(chunk: int) -> Kernel:
    def partials(args: Args) -> tuple[int]:
        return (math.ceil(args.params[0] / chunk),)

    total = Kernel(f"total_of_{chunk}", TOTAL, grid=lambda args: (1, 1, 1), params=partials)
    return Kernel(f"sum_chunks_of_{chunk}", PARTIALS.replace("CHUNK_SIZE", str(chunk)),
                  grid=lambda args: (partials(args)[0], 1, 1), then=(total,))


def test_a_two_pass_reduction_hands_pass_two_the_number_of_partials_in_its_own_uniform(device):
    n = 100_003
    tunables = TunableSet("sum", [two_pass(256), two_pass(4096)], key=lambda args: {"n": args.params[0]})
    assert tunables.outputs == ("output",)  # the partials are scratch: pass 2 only reads them
    values = [float(i % 7) for i in range(n)]  # small integers: every order of summing is exact
    partials, output = device.create_buffer(size=4 * math.ceil(n / 256)), device.create_buffer(size=4)
    args = Args({"input": device.create_buffer(struct.pack(f"{n}f", *values)), "partials": partials,
                 "output": output}, (n,))
    tuner = checked_tuner(device)
    tuner.execute(tunables, args)
    assert all(isinstance(result, Measured) for result in results(tuner, tunables, args))
    assert floats(device, output, 1) == [sum(values)]


# -- outputs by default ---------------------------------------------------------------------------


def test_with_no_outputs_given_the_checks_compare_the_read_write_buffers_and_catch_a_wrong_candidate(device):
    wrong = AXPY.replace("+ y[gid.x]", "+ y[gid.x] + 0.5")
    tunables = TunableSet("axpy", [Kernel("axpy", AXPY, blocks(64)), Kernel("off", wrong, blocks(64)),
                                   Kernel("axpy128", AXPY.replace("(64)", "(128)"), blocks(128))],
                          key=lambda args: {"n": args.params[0]})
    x = device.create_buffer(struct.pack(f"{N}f", *range(N)))
    args = Args((x, device.create_buffer(size=4 * N)), (N, 2.0))
    tuner = checked_tuner(device)
    assert tuner.execute(tunables, args).name != "off"
    right, off, right_too = results(tuner, tunables, args)
    assert isinstance(right, Measured) and isinstance(off, Mismatch) and isinstance(right_too, Measured), (right, off)
    assert "disagrees with the 2 candidates that agree (axpy, axpy128): output 'y' (buffer 1)" in off.reason


# -- bindings a candidate declares and never uses -------------------------------------------------

FILL_HEAD = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;  // x: the size (its .x, no use of the buffer x)
"""


@pytest.mark.parametrize("named", [False, True], ids=["in-order", "by-name"])
def test_bindings_a_candidate_declares_but_never_uses_are_left_out_of_its_bind_group(device, named):
    """WebGPU's "auto" layout holds only the bindings a kernel uses: a fill that declares its input,
    and a candidate that bakes the size its siblings read from the uniform, run on the same call."""
    size = 1001
    grid = lambda args: (-(-size // 64), 1, 1)  # noqa: E731
    candidates = [
        Kernel("reads_all", FILL_HEAD + "@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: "
               "vec3<u32>) { if (g.x < n.x) { y[g.x] = 0.0 * x[g.x] + 7.0; } }", grid=grid),
        Kernel("fill", FILL_HEAD + "@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: "
               "vec3<u32>) { if (g.x < n.x) { y[g.x] = 7.0; } }", grid=grid),
        Kernel("baked", FILL_HEAD + f"@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: "
               f"vec3<u32>) {{ if (g.x < {size}u) {{ y[g.x] = 7.0; }} }}", grid=grid),
    ]
    tunables = TunableSet(f"unused_bindings_{named}", candidates, key=lambda args: {"n": size})
    tuner = checked_tuner(device)
    x, y = device.create_buffer(struct.pack(f"{size}f", *range(size))), device.create_buffer(size=4 * size)
    args = Args({"x": x, "y": y} if named else (x, y), (size,))
    tuner.execute(tunables, args)
    assert all(isinstance(result, Measured) for result in results(tuner, tunables, args)), results(tuner, tunables,
                                                                                                     args)
    for kernel in candidates:  # each one on its own, as the winner would run
        y_alone = device.create_buffer(size=4 * size)
        solo = TunableSet(f"{kernel.name}_{named}_alone", [kernel], key=lambda args: {"n": size})
        checked_tuner(device).execute(solo, Args({"x": x, "y": y_alone} if named else (x, y_alone), (size,)))
        assert floats(device, y_alone, size) == [7.0] * size, kernel.name
