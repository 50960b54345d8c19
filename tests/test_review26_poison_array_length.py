"""A stage that only takes an output's length (``arrayLength(&out)``, a bound) touches none of its
elements: it does not decide whether the candidate reads the output before writing it
(``output_types.candidate_reads_first``). Before, such a first stage counted as the candidate's
first use, a plain store, so a later stage adding into the output read the checks' poison: every
candidate of a set that accumulates into the caller's output came out NaN, and against a
reference of the caller's contents the tune found no valid kernel."""

from __future__ import annotations

import struct

import pytest
from fakes import FakeDevice, call, kernel, make_set

from wgtune import Args, Config, Kernel, TunableSet, Tuner
from wgtune.sets.output_types import candidate_reads_first, output_specs, uses

HEAD = """@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
"""
BOUND_ONLY = HEAD + "    if (id.x < arrayLength(&out) && id.x == 999999u) { }\n}\n"
ACCUMULATE = HEAD + "    if (id.x < n.x) { out[id.x] = out[id.x] + x[id.x]; }\n}\n"
STORE = HEAD + "    if (id.x < arrayLength( & out)) { out[id.x] = 2.0 * x[id.x]; }\n}\n"


def staged(name: str, *sources: str, make=kernel, **fields) -> Kernel:
    first, *rest = sources
    return make(name, wgsl=first, then=tuple(make(f"{name}_{i}", wgsl=source, **fields)
                                              for i, source in enumerate(rest, 1)), **fields)


@pytest.mark.core
def test_a_stage_that_only_takes_the_outputs_length_does_not_use_it():
    assert not uses(BOUND_ONLY, "out")
    assert uses(STORE, "out")  # its arrayLength aside, it stores into it
    assert candidate_reads_first(staged("bound_then_add", BOUND_ONLY, ACCUMULATE), "out")
    assert not candidate_reads_first(staged("bound_then_store", BOUND_ONLY, STORE), "out")


@pytest.mark.core
def test_an_output_accumulated_into_after_a_bound_only_stage_is_not_poisoned():
    tunables = make_set(staged("a", BOUND_ONLY, ACCUMULATE), staged("b", BOUND_ONLY, ACCUMULATE), outputs=("out",))
    [spec] = output_specs(tunables, call(FakeDevice(), [1.0], [0.0]))
    assert not spec.poison


N = 256


def native(name: str, *sources: str) -> Kernel:
    def grid(args):
        return ((args.params[0] + 63) // 64, 1, 1)
    first, *rest = sources
    then = tuple(Kernel(f"{name}_{i}", source, grid=grid) for i, source in enumerate(rest, 1))
    return Kernel(name, first, grid=grid, then=then)


def test_a_set_accumulating_into_the_callers_output_is_checked_on_its_contents():
    from wgtune.backends.native import NativeDevice

    device = NativeDevice.open()

    def reference(inputs, params):  # the output starts as the caller made it: zeros
        return [list(struct.unpack(f"{N}f", inputs[0]))]

    tunables = TunableSet("accumulate", [native("a", BOUND_ONLY, ACCUMULATE), native("b", BOUND_ONLY, ACCUMULATE)],
                          key=lambda args: {"n": args.params[0]}, outputs=(1,), reference=reference)
    x = device.create_buffer(struct.pack(f"{N}f", *[float(i % 5) for i in range(N)]))
    out = device.create_buffer(size=4 * N)
    tuner = Tuner(device, config=Config(log_level="disabled", cache=False, samples=3, warmups=1))
    tuner.execute(tunables, Args((x, out), (N,)))  # before: NoValidKernelFound, "nan vs 0.0"
    assert struct.unpack(f"{N}f", device.read_buffer_sync(out))[:6] == (0.0, 1.0, 2.0, 3.0, 4.0, 0.0)


PARTIAL = HEAD + "    if (id.x < n.x / 2u) { out[id.x] = 2.0 * x[id.x]; }\n}\n"
ADD_REST = HEAD + "    if (id.x >= n.x / 2u && id.x < n.x) { out[id.x] = out[id.x] + x[id.x]; }\n}\n"


def test_a_mismatch_on_the_checks_poison_says_the_output_started_as_nan():
    """A first stage that stores half of the output, a second that adds into the rest: the
    candidate counts as writing the output first (by design), so the check starts it as NaN and
    the second half reads NaN. A reference of the caller's zeros then refuses every candidate:
    the message says where the NaN came from, not only ``nan vs 3.0``."""
    from wgtune import NoValidKernelFound
    from wgtune.backends.native import NativeDevice

    device = NativeDevice.open()

    def reference(inputs, params):
        xs = struct.unpack(f"{N}f", inputs[0])
        return [[2.0 * v for v in xs[:N // 2]] + list(xs[N // 2:])]

    tunables = TunableSet("partial", [native("a", PARTIAL, ADD_REST), native("b", PARTIAL, ADD_REST)],
                          key=lambda args: {"n": args.params[0]}, outputs=(1,), reference=reference)
    x = device.create_buffer(struct.pack(f"{N}f", *[float(i % 5) for i in range(N)]))
    tuner = Tuner(device, config=Config(log_level="disabled", cache=False, samples=3, warmups=1))
    with pytest.raises(NoValidKernelFound, match="starts output 'out' \\(buffer 1\\) as NaN bits"):
        tuner.execute(tunables, Args((x, device.create_buffer(size=4 * N)), (N,)))
