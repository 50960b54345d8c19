"""A parameter space tuned on the adapter present: one kernel written with a template engine for
its unrolled body and an ``override`` for its workgroup size, as WebGPU libraries write theirs."""

from __future__ import annotations

import string
import struct

import pytest

import wgtune
from wgtune import Args, Config, Space, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

# Each invocation handles PER_THREAD consecutive elements, written out by the template (no loop),
# and the workgroup size is a pipeline-overridable constant with a default.
AXPY = string.Template("""
override WG: u32 = 64u;

struct Params {
    n: u32,
    alpha: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let base = gid.x * ${PER_THREAD}u;
${BODY}}
""")


def render(params) -> str:
    step = "    if (base + {i}u < params.n) {{ y[base + {i}u] = params.alpha * x[base + {i}u] + y[base + {i}u]; }}\n"
    body = "".join(step.format(i=i) for i in range(params["PER_THREAD"]))
    return AXPY.substitute(PER_THREAD=params["PER_THREAD"], BODY=body)


N = 10_007


def test_a_templated_space_with_an_override_tunes_and_every_candidate_agrees():
    space = Space(
        "axpy",
        params={"WG": [32, 64, 128], "PER_THREAD": [1, 2, 4]},
        default={"WG": 64, "PER_THREAD": 1},
        render=render,
        constants=lambda p: {"WG": p["WG"]},
        restrict=lambda p: p["WG"] * p["PER_THREAD"] <= 256,
        workgroup_size=lambda p: (p["WG"],),
        grid=lambda p, args: (-(-args.params[0] // (p["WG"] * p["PER_THREAD"])), 1, 1),
    )
    candidates = space.candidates()
    assert len(candidates) == 8 and candidates[0].name == "axpy[WG=64,PER_THREAD=1]"
    tunables = TunableSet("axpy", candidates, key=lambda a: {"n": wgtune.anchor(a.params[0])}, outputs=(1,))
    device = NativeDevice.open()
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))
    x = device.create_buffer(struct.pack(f"{N}f", *range(N)))
    y = device.create_buffer(struct.pack(f"{N}f", *([1.0] * N)))
    kernel = tuner.execute(tunables, Args((x, y), (N, 2.0)))
    assert kernel in candidates
    results = tuner.cache.entry(tunables, tuner.key(tunables, Args((x, y), (N, 2.0)))).results
    assert all("median" in result for result in results), [r.get("reason") for r in results]
    got = struct.unpack(f"{N}f", device.read_buffer_sync(y))
    assert list(got) == pytest.approx([2.0 * i + 1.0 for i in range(N)])


def test_an_int_given_for_an_f32_field_of_the_params_struct_is_that_number():
    # alpha = 2 (an int, as a JavaScript 2.0 arrives in Python): the struct says f32, so 2.0.
    kernel = wgtune.Kernel("axpy", render({"PER_THREAD": 1}), workgroup_size=(64, 1, 1),
                           grid=lambda args: (-(-args.params[0] // 64), 1, 1))
    device = NativeDevice.open()
    x = device.create_buffer(struct.pack(f"{N}f", *range(N)))
    y = device.create_buffer(struct.pack(f"{N}f", *([1.0] * N)))
    pipeline = wgtune.run_inline(device.compile(kernel))
    args = Args((x, y), (N, 2))
    device.dispatch(pipeline, args, kernel.grid(args))
    assert list(struct.unpack(f"{N}f", device.read_buffer_sync(y))) == pytest.approx([2.0 * i + 1.0 for i in range(N)])
