"""Bindings taken from the WGSL: buffers by name or by (group, binding), several bind groups, a
stage's own params, and the outputs the checks compare by default."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, f32, floats, make_tuner, quiet
from wgsl_samples import LAYER

from wgtune import Args, ConfigError, Kernel, KernelError, Measured, Mismatch, TunableSet
from wgtune.sets.bindings import PARAMS, binding_plan, output_indices, params_of, stage_entries
from wgtune.sets.buffer_names import written_by
from wgtune.tune.measure import clone_args

# Pure core: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def grid(args):
    return (1, 1, 1)


# A two-pass sum written as two modules, each numbering its bindings from 0, as multi-pass kernels
# of WebGPU libraries are: the partials are binding 1 of pass 1 and binding 0 of pass 2.
PARTIALS = """
struct Params { n: u32, per_group: u32 }
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> partials: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(64) fn main(@builtin(workgroup_id) wid: vec3<u32>) { partials[wid.x] = input[0]; }
"""

TOTAL = """
struct Params { count: u32 }
@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(64) fn main() { output[0] = partials[params.count - 1u]; }
"""



def two_pass() -> Kernel:
    return Kernel("two_pass", PARTIALS, grid, then=(Kernel("total", TOTAL, grid, params=lambda args: (4,)),))


def entries(kernel: Kernel, args: Args) -> list[list[tuple]]:
    return [stage_entries(plan, args, f"stage {i}") for i, plan in enumerate(binding_plan(kernel))]


# -- Args by name -------------------------------------------------------------------------------


def test_buffers_by_name_keep_their_order_and_their_names():
    args = Args({"x": "X", (1, 0): "W"}, (8,))
    assert args.buffers == ("X", "W") and args.names == ("x", (1, 0)) and args.params == (8,)
    assert (args.buffer("x"), args.buffer((1, 0)), args.buffer(1)) == ("X", "W", "W")
    with pytest.raises(KeyError, match="names no buffer 'out'"):
        args.buffer("out")
    assert Args(("X",)).names is None
    copied = args.with_buffers(["X2", "W2"])
    assert copied.names == args.names and copied.buffer("x") == "X2" and copied.params == (8,)
    assert args.with_buffers({"out": "O"}).names == ("out",)


@pytest.mark.parametrize(
    ("buffers", "problem"),
    [({"": 1}, "not ''"), ({(0, -1): 1}, r"not \(0, -1\)"), ({1.5: 1}, "not 1.5")],
)
def test_a_name_that_is_no_wgsl_name_or_slot_is_a_config_error(buffers, problem):
    with pytest.raises(ConfigError, match=problem):
        Args(buffers)


def test_names_must_be_one_per_buffer_and_distinct():
    with pytest.raises(ConfigError, match="1 names for 2 buffers"):
        Args(("a", "b"), names=("x",))
    with pytest.raises(ConfigError, match="repeat: 'x'"):
        Args(("a", "b"), names=("x", "x"))
    with pytest.raises(ConfigError, match="2 names for 3 buffers"):
        Args({"x": 1, "y": 2}).with_buffers([1, 2, 3])


def test_the_benchmarks_copies_keep_the_calls_names():
    device = FakeDevice()
    args = Args({"x": device.buffer([1.0]), "y": device.buffer([2.0])}, (1,))
    copy = clone_args(device, args)
    assert copy.names == ("x", "y") and floats(copy.buffer("y")) == [2.0] and copy.buffer("y") is not args.buffer("y")


# -- where each buffer binds ----------------------------------------------------------------------


def test_named_buffers_bind_in_each_stage_where_its_wgsl_declares_them():
    args = Args({"input": "IN", "partials": "P", "output": "OUT"}, (256, 64))
    assert entries(two_pass(), args) == [
        [(0, 0, "IN"), (0, 1, "P"), (0, 2, PARAMS)],
        [(0, 0, "P"), (0, 1, "OUT"), (0, 2, PARAMS)],
    ]


def test_a_stage_may_be_given_its_buffers_by_group_and_binding():
    args = Args({(0, 0): "IN", "partials": "P", (0, 1): "OUT"}, (256, 64))
    # (0, 0) and (0, 1) name pass 1's input and partials too: a slot binds in every stage declaring it.
    with pytest.raises(KernelError, match=r"gives partials \(@group\(0\) @binding\(1\)\) twice"):
        entries(two_pass(), args)
    single = Kernel("single", PARTIALS, grid)
    assert entries(single, Args({(0, 0): "IN", (0, 1): "P"}, (1, 1))) == [[(0, 0, "IN"), (0, 1, "P"), (0, 2, PARAMS)]]


def test_a_name_no_stage_declares_or_a_storage_binding_without_a_buffer_is_an_error_naming_it():
    with pytest.raises(KernelError, match="names 'out', which no stage of this candidate declares"):
        entries(two_pass(), Args({"input": 1, "partials": 2, "out": 3}))
    with pytest.raises(KernelError, match=r"stage 1 declares storage output \(@group\(0\) @binding\(1\)\), for "
                                          "which the call gives no buffer"):
        entries(two_pass(), Args({"input": 1, "partials": 2}))
    with pytest.raises(KernelError, match="cannot read this stage's bindings"):
        stage_entries(None, Args({"x": 1}), "opaque")


def test_several_groups_bind_in_order_by_group_then_binding_skipping_the_params_uniform():
    layer = Kernel("layer", LAYER, grid)
    positional = Args(("X", "Y", "W", "B"), (4, 0.5))
    named = Args({"bias": "B", "weight": "W", "y": "Y", "x": "X"}, (4, 0.5))
    expected = [[(0, 0, "X"), (0, 1, "Y"), (0, 2, PARAMS), (1, 0, "W"), (1, 1, "B")]]
    assert entries(layer, positional) == entries(layer, named) == expected
    with pytest.raises(KernelError, match=r"bias \(@group\(1\) @binding\(1\)\) as buffer 3, but the call gives 3"):
        entries(layer, Args(("X", "Y", "W"), (4, 0.5)))


def test_a_named_uniform_is_a_buffer_and_the_one_left_takes_the_params():
    two_uniforms = LAYER.replace("var<storage, read> bias: array<f32>", "var<uniform> bias: vec4<f32>")
    layer = Kernel("layer", two_uniforms, grid)
    named = Args({"x": "X", "y": "Y", "weight": "W", "bias": "B"}, (4, 0.5))
    assert entries(layer, named) == [[(0, 0, "X"), (0, 1, "Y"), (0, 2, PARAMS), (1, 0, "W"), (1, 1, "B")]]
    with pytest.raises(KernelError, match=r"declares the uniforms uniforms .*, bias .*: name the call's buffers"):
        entries(layer, Args({"x": "X", "y": "Y", "weight": "W"}, (4, 0.5)))


def test_a_stage_with_its_own_params_reads_them_from_the_call():
    first, second = two_pass().stages
    args = Args(("IN", "P", "OUT"), (256, 64))
    assert params_of(first, args) == (256, 64) and params_of(second, args) == (4,)


def test_a_stages_own_params_count_in_its_identity_but_not_what_they_compute():
    plain = Kernel("total", TOTAL, grid)
    own = Kernel("total", TOTAL, grid, params=lambda args: (4,))
    other = Kernel("total", TOTAL, grid, params=lambda args: (5,))
    assert plain.fingerprint() == "\x1f".join(["total", "main", "(64, 1, 1)", "0", TOTAL])  # as before params
    assert own.fingerprint() != plain.fingerprint() and own.fingerprint() == other.fingerprint()
    with pytest.raises(ConfigError, match="params must be a function"):
        Kernel("total", TOTAL, grid, params=(4,))


# -- the outputs the checks compare ----------------------------------------------------------------


def test_outputs_default_to_the_read_write_bindings_less_scratch_a_later_stage_reads():
    assert written_by([LAYER]) == ("y",)
    assert written_by([PARTIALS, TOTAL]) == ("output",)  # partials: pass 2 only reads them
    assert written_by(["// beyond the reflection"]) == ()
    assert TunableSet("s", [two_pass()], key=dict).outputs == ("output",)
    assert TunableSet("s", [two_pass()], key=dict, outputs=()).outputs == ()
    assert TunableSet("s", [two_pass()], key=dict, outputs=[2, "partials", [0, 1]]).outputs == (2, "partials", (0, 1))
    with pytest.raises(ConfigError, match="not -1"):
        TunableSet("s", [two_pass()], key=dict, outputs=(-1,))


def test_a_tolerance_per_output_is_counted_once_the_default_outputs_are_read():
    tunables = TunableSet("s", [Kernel("layer", LAYER, grid)], key=dict, atol=(1e-3, 1e-3))
    with pytest.raises(ConfigError, match="atol gives 2 values for 1 outputs"):
        tunables.tolerances  # noqa: B018


def test_outputs_name_the_calls_buffers_by_index_name_or_slot():
    layer = TunableSet("layer", [Kernel("layer", LAYER, grid)], key=dict)
    positional = Args(("X", "Y", "W", "B"), (4, 0.5))
    named = Args({"weight": "W", "bias": "B", (0, 1): "Y", "x": "X"}, (4, 0.5))
    assert output_indices(layer, positional) == (1,) and output_indices(layer, named) == (2,)
    several = TunableSet("layer", layer.candidates, key=dict, outputs=("bias", (0, 1), 0))
    assert output_indices(several, positional) == (3, 1, 0) and output_indices(several, named) == (1, 2, 0)
    with pytest.raises(ConfigError, match="output 'scale' is none of the call's buffers"):
        output_indices(TunableSet("layer", layer.candidates, key=dict, outputs=("scale",)), named)


def test_default_outputs_catch_a_wrong_candidate_with_buffers_given_by_name():
    device = FakeDevice()

    def scale(buffers, params):  # the fake device's stand-in for LAYER with weight 1 and bias 0
        buffers[1][:] = f32(params[1] * v for v in floats(buffers[0]))

    device.script("right", kernel=scale)
    device.script("wrong", kernel=scale, wrong=True)
    device.script("right too", kernel=scale)
    named = {"x": device.buffer([1.0, 2.0]), "y": device.buffer([0.0, 0.0]), "weight": device.buffer([1.0, 1.0]),
             "bias": device.buffer([0.0, 0.0])}
    # The fake device's wrong candidate corrupts the last buffer: bias here, untouched by the checks.
    # Each its own WGSL: the fake device scripts them by name, where one code would be twins (``twins.py``).
    kernels = [Kernel(name, f"// {name}\n{LAYER}", grid) for name in ("right", "wrong", "right too")]
    tunables = TunableSet("layer", kernels, key=lambda args: {"n": args.params[0]})
    tuner = make_tuner(device, config=quiet(checks=True))
    tuner.execute(tunables, Args(named, (2, 2.0)))
    assert all(isinstance(r, Measured) for r in tuner.results(tunables, tuner.key(tunables, Args(named, (2, 2.0)))))
    # With y last, the same corruption is caught: the checks compare y, found by its name.
    reordered = {name: named[name] for name in ("x", "weight", "bias", "y")}
    tuner.execute(tunables, Args(reordered, (3, 2.0)))
    results = tuner.results(tunables, tuner.key(tunables, Args(reordered, (3, 2.0))))
    assert isinstance(results[0], Measured) and isinstance(results[1], Mismatch), results
    assert "output 'y' (buffer 3): 1 of 2 values differ" in results[1].reason


def test_a_binding_the_source_never_mentions_past_its_declaration_is_marked_unused():
    """What WebGPU's "auto" layout leaves out: not ``x`` in ``g.x``, nor a name in a comment."""
    source = """
// y is the output; x is read below, once
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) { y[g.x] = 7.0; /* n */ }
"""
    (stage,) = binding_plan(Kernel("fill", source, grid))
    assert {slot.name: slot.used for slot in stage.slots} == {"x": False, "y": True, "n": False}
    assert [slot.used for slot in binding_plan(two_pass())[0].slots] == [True, True, False]
