"""Sets defined as JavaScript defines them (``backends/js_sets.py``), natively on the fake device.

JavaScript values arrive in Python as Pyodide's ``to_py`` makes them (dicts, lists, callables), so
plain Python stands in for them here; the page test (e2e/test_js_api.py) runs the same in Chromium.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import struct

import pytest
from fakes import FakeDevice, f32, make_tuner, quiet

from wgtune import ConfigError, Hit, Measured, NoValidKernelFound
from wgtune.backends.js_errors import Facing, ForJavaScript, take_thrown
from wgtune.backends.js_set_spec import tunable_set
from wgtune.backends.js_sets import define_set

SCALE = """
struct Params { n: u32, scale: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
@compute @workgroup_size(WG) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { y[g.x] = p.scale * x[g.x]; }
}
"""


class Session:
    """What a JsSet needs of the page's session: its tuner, and where a Pending key is told."""

    def __init__(self, device: FakeDevice) -> None:
        self.tuner = make_tuner(device)
        self.pending: list[tuple[str, object]] = []
        self.js_sets: dict[str, object] = {}

    def notify_pending(self, set_name, key) -> None:
        self.pending.append((set_name, key))


def scale_kernel(buffers, params):
    """The fake device's stand-in for SCALE: y = scale * x, reading params as the uniform packs them."""
    x, y = buffers
    n, scale = params
    values = struct.unpack(f"<{len(x) // 4}f", x)
    struct.pack_into(f"<{n}f", y, 0, *(scale * v for v in values[:n]))


def spec(**overrides):
    seen = []
    candidates = []
    for wg in (32, 64):
        candidates.append({
            "name": f"wg{wg}", "wgsl": SCALE.replace("WG", str(wg)),
            # What JavaScript writes: Math.ceil(call.params.n / 64) (the view, as a dict here).
            "grid": lambda call, wg=wg: seen.append(call) or [math.ceil(call["params"]["n"] / wg)],
        })
    described = {"name": "scale", "candidates": candidates, "key": lambda call: {"n": call["params"]["n"]}}
    described.update(overrides)
    return described, seen


def test_a_set_defined_from_javascript_tunes_on_the_callers_buffers_with_params_by_name():
    device = FakeDevice()
    for name, seconds in (("wg32", 2e-3), ("wg64", 1e-3)):
        device.script(name, duration=seconds, kernel=scale_kernel)
    session = Session(device)
    described, seen = spec()
    js_set = define_set(session, described)
    x, y = device.buffer([1.0, 2.0, 3.0, 4.0]), device.buffer([0.0] * 4)
    call = {"buffers": {"x": x, "y": y}, "params": {"scale": 2, "n": 4}}  # 2: as a JavaScript 2.0 arrives

    args = js_set.args(call)
    assert args.params == (4, 2) and args.names == ("x", "y")
    answer = json.loads(js_set.check(call))  # natively the tune runs inline
    assert answer["state"] == "Hit" and answer["winner"] == "wg64" and answer["key"] == {"n": 4}
    ran = json.loads(js_set.execute(call))
    assert ran["ran"] == "wg64"
    assert f32([2.0, 4.0, 6.0, 8.0]) == y.data
    assert seen[0] == {"params": {"n": 4, "scale": 2}, "buffers": {"x": 16, "y": 16}}
    assert isinstance(session.tuner.fastest(js_set.tunables, session.tuner.key(js_set.tunables, args)), Hit)
    results = json.loads(js_set.results(call))
    assert [r["name"] for r in results] == ["wg32", "wg64"] and all("median" in r for r in results)
    assert isinstance(session.tuner.results(js_set.tunables, session.tuner.key(js_set.tunables, args))[1], Measured)


def test_a_space_from_javascript_makes_its_candidates_from_a_render_function():
    device = FakeDevice()
    session = Session(device)
    js_set = define_set(session, {
        "name": "spaced",
        "space": {"render": lambda point: SCALE.replace("WG", str(point["WG"])), "params": {"WG": [32, 64, 128]},
                  "default": {"WG": 64}, "grid": lambda point, call: [call["params"]["n"] // point["WG"] + 1]},
    })
    assert [kernel.name for kernel in js_set.tunables.candidates] == ["spaced[WG=64]", "spaced[WG=32]",
                                                                       "spaced[WG=128]"]
    call = {"buffers": [device.buffer([1.0] * 4), device.buffer([0.0] * 4)], "params": [4, 2.0]}
    assert json.loads(js_set.check(call))["state"] == "Hit"


@pytest.mark.parametrize("bad, problem", [
    ({"candidates": []}, "candidates must be a non-empty array"),
    ({"candidates": [{"name": "a", "wgsl": SCALE, "grid": [1], "colour": "red"}]}, "candidate 'a': unknown field"),
    ({"space": {}, "candidates": [{"name": "a", "wgsl": SCALE, "grid": [1]}]}, "give candidates .* or space"),
    ({"shape": 1}, "unknown field\\(s\\) shape"),
    ({"key": "n"}, "key must be a function"),
    ({"search": {"budget": 3}}, "search: .*budget"),
    ({"candidates": [{"name": "a", "wgsl": SCALE, "grid": [1], "scratch": 64}]}, "'a': scratch must be an object"),
    ({"candidates": [{"name": "a", "wgsl": SCALE, "grid": [1], "scratch": {"t": -4}}]},
     "scratch 't' must be a whole number of bytes >= 0, got -4"),
    ({"candidates": [{"name": "a", "wgsl": SCALE, "grid": [1], "scratch": {"t": 2.5}}]}, "got 2.5"),
    ({"candidates": [{"name": "a", "wgsl": SCALE, "grid": [1],
                      "then": [{"name": "b", "wgsl": SCALE, "grid": [1], "scratch": {"t": 4}}]}]},
     "declare it on the candidate"),
    ({"candidates": [{"name": "a", "wgsl": SCALE, "grid": [1], "layout": "explicit"}]},
     "kernel 'a': layout must be one of 'auto', 'declared', got 'explicit'"),
])
def test_a_set_described_wrong_is_a_config_error_naming_the_field(bad, problem):
    described, _ = spec(**bad)
    with pytest.raises(ConfigError, match=problem):
        define_set(Session(FakeDevice()), described)


def test_a_call_described_wrong_is_a_config_error_naming_what_is_wrong():
    device = FakeDevice()
    js_set = define_set(Session(device), spec()[0])
    x, y = device.buffer([1.0]), device.buffer([0.0])
    for call, problem in (
        ({"params": {"n": 1, "scale": 1}}, "a call is \\{buffers, params\\}"),
        ({"buffers": {"x": x, "y": y}, "params": {"n": 1}}, "params: missing field\\(s\\) scale"),
        ({"buffers": {"x": x, "y": y}, "params": {"n": 1, "scale": float("nan")}},
         "param scale must be a finite number, got NaN"),
        ({"buffers": {"x": x, "y": y}, "params": "n=1"}, "params must be an object by field name or an array"),
        ({"buffers": x, "params": [1, 1.0]}, "buffers must be an object by WGSL name or an array"),
    ):
        with pytest.raises(ConfigError, match=problem):
            js_set.check(call)


def test_a_grid_function_that_answers_nonsense_fails_that_candidate_with_the_reason():
    device = FakeDevice()
    session = Session(device)
    described, _ = spec()
    described["candidates"][0]["grid"] = lambda call: ["many"]
    js_set = define_set(session, described)
    call = {"buffers": {"x": device.buffer([1.0]), "y": device.buffer([0.0])}, "params": {"n": 1, "scale": 1}}
    assert json.loads(js_set.check(call))["winner"] == "wg64"
    failed = session.tuner.results(js_set.tunables, session.tuner.key(js_set.tunables, js_set.args(call)))[0]
    assert "workgroup counts are whole numbers" in failed.reason


def test_the_same_buffers_and_params_again_are_the_same_args_so_no_new_bind_groups():
    device = FakeDevice()
    js_set = define_set(Session(device), spec()[0])
    x, y = device.buffer([1.0]), device.buffer([0.0])
    first = js_set.args({"buffers": {"x": x, "y": y}, "params": {"n": 1, "scale": 2}})
    assert js_set.args({"buffers": {"x": x, "y": y}, "params": {"scale": 2, "n": 1}}) is first
    assert js_set.args({"buffers": {"x": x, "y": y}, "params": {"n": 1, "scale": 3}}) is not first
    assert js_set.args({"buffers": {"x": y, "y": x}, "params": {"n": 1, "scale": 2}}) is not first


def test_a_javascript_reference_checks_the_candidates_outputs():
    device = FakeDevice()
    device.script("wg32", duration=1e-3, kernel=scale_kernel, wrong=True)  # fast, and wrong
    device.script("wg64", duration=2e-3, kernel=scale_kernel)
    session = Session(device)
    session.tuner = make_tuner(device, config=quiet(checks=True))
    seen = []

    def reference(call, inputs):  # what JavaScript gets: the view, and each buffer's bytes
        seen.append((call, [len(data) for data in inputs]))
        x = struct.unpack(f"<{len(inputs[0]) // 4}f", bytes(inputs[0]))
        return [f32([call["params"]["scale"] * value for value in x])]

    described, _ = spec(outputs=["y"], reference=reference)
    js_set = define_set(session, described)
    call = {"buffers": {"x": device.buffer([1.0, 2.0]), "y": device.buffer([0.0, 0.0])}, "params": {"n": 2, "scale": 3}}
    assert json.loads(js_set.check(call))["winner"] == "wg64"
    wrong, right = session.tuner.results(js_set.tunables, session.tuner.key(js_set.tunables, js_set.args(call)))
    assert type(wrong).__name__ == "Mismatch" and isinstance(right, Measured)
    assert seen[0] == ({"params": {"n": 2, "scale": 3}, "buffers": [8, 8]}, [8, 8])


def test_a_javascript_tolerance_may_be_a_function_of_the_call():
    device = FakeDevice()
    device.script("wg32", duration=1e-3, kernel=scale_kernel, wrong=True)  # one value off by 1000
    device.script("wg64", duration=2e-3, kernel=scale_kernel)
    session = Session(device)
    session.tuner = make_tuner(device, config=quiet(checks=True))
    described, _ = spec(outputs=["y"], reference=lambda call, inputs: [f32([0.0] * call["params"]["n"])],
                        atol=lambda call: 5000 if call["params"]["n"] > 2 else 1e-4)
    js_set = define_set(session, described)

    def call(n):
        buffers = {"x": device.buffer([0.0] * n), "y": device.buffer([0.0] * n)}
        return {"buffers": buffers, "params": {"n": n, "scale": 1}}

    assert json.loads(js_set.check(call(2)))["winner"] == "wg64"  # 1000 off is wrong within 1e-4
    assert json.loads(js_set.check(call(4)))["winner"] == "wg32"  # and right within 5000
    described, _ = spec(outputs=["y"], atol=lambda call: "tight")
    with pytest.raises(ConfigError, match="atol functions' answers must be numbers >= 0"):
        define_set(Session(device), {**described, "name": "bad_atol"}).tunables.tolerances_for(js_set.args(call(2)))


def test_the_default_key_rounds_integer_params_up_to_powers_of_two_and_leaves_float_params_out():
    device = FakeDevice()
    described, _ = spec()
    del described["key"]
    js_set = define_set(Session(device), described)
    tuner = js_set.session.tuner
    x, y = device.buffer([1.0] * 8), device.buffer([0.0] * 8)
    keys = {tuner.key(js_set.tunables, js_set.args({"buffers": {"x": x, "y": y}, "params": {"n": n, "scale": scale}}))
            for n, scale in ((5, 2), (7, 2.5), (8, 3))}  # scale is an f32: 2 (a JavaScript 2.0) or 2.5 alike
    assert [dict(key) for key in keys] == [{"n": 8}]


def test_a_name_defined_again_with_other_candidates_is_an_error_and_the_same_candidates_are_not():
    device = FakeDevice()
    session = Session(device)
    first = define_set(session, spec()[0])
    call = {"buffers": {"x": device.buffer([1.0]), "y": device.buffer([0.0])}, "params": {"n": 1, "scale": 1}}
    first.check(call)  # the set is in use on the page now
    assert define_set(session, spec()[0]).name == "scale"  # the same candidates: the same set
    described, _ = spec()
    described["candidates"] = described["candidates"][:1]
    with pytest.raises(ConfigError, match="'scale' is defined already on this page, with other candidates") as error:
        define_set(session, described)
    assert error.value.field == "name"


def test_a_name_is_taken_at_its_definition_so_other_candidates_are_refused_before_the_first_is_used_or_compiled():
    device = FakeDevice()
    session = Session(device)
    define_set(session, spec()[0])  # defineSet awaits prepare() after this: a second may come meanwhile
    other, _ = spec()
    other["candidates"] = other["candidates"][:1]
    with pytest.raises(ConfigError, match="'scale' is defined already on this page, with other candidates") as error:
        define_set(session, other)
    assert error.value.field == "name"
    assert session.tuner.states("scale") == {}  # nothing was run to find out


def test_a_definition_whose_fallback_does_not_compile_gives_its_name_back():
    device = FakeDevice()
    for name in ("wg32", "wg64"):
        device.script(name, compile_error="unable to parse")
    session = Session(device)
    broken = define_set(session, spec()[0])
    with pytest.raises(NoValidKernelFound):
        asyncio.run(broken.prepare())
    other, _ = spec()
    other["candidates"] = other["candidates"][:1]
    device.script("wg32", compile_error=None)  # the app fixed its WGSL
    fixed = define_set(session, other)  # its next try, with other candidates: not the first's compiles
    assert asyncio.run(fixed.prepare()) == "wg32"
    assert session.js_sets == {"scale": fixed.tunables}


@pytest.mark.parametrize("params", [None, [], {}])
def test_a_call_without_the_params_its_wgsl_reads_is_refused_naming_the_missing_fields(params):
    device = FakeDevice()
    js_set = define_set(Session(device), spec()[0])
    call = {"buffers": {"x": device.buffer([1.0]), "y": device.buffer([0.0])}}
    if params is not None:
        call["params"] = params
    for method in (js_set.check, js_set.execute):
        with pytest.raises(ConfigError, match=r"set 'scale': .*params: missing field\(s\) n, scale") as error:
            method(call)
        assert error.value.field == "params"
    assert device.dispatch_count + device.profile_count == 0


def test_a_call_without_params_for_a_uniform_that_is_not_a_struct_says_where_the_wgsl_reads_them():
    device = FakeDevice()
    wgsl = SCALE.replace("var<uniform> p: Params", "var<uniform> p: vec4<u32>").replace("p.n", "p.x")
    wgsl = wgsl.replace("p.scale", "f32(p.y)")
    described, _ = spec(candidates=[{"name": "a", "wgsl": wgsl.replace("WG", "64"), "grid": [1]}])
    js_set = define_set(Session(device), described)
    with pytest.raises(ConfigError, match=r"the call gives no params, and candidate 'a' reads its uniform at "
                                          r"@group\(0\) @binding\(2\) from them") as error:
        js_set.execute({"buffers": [device.buffer([1.0]), device.buffer([0.0])]})
    assert error.value.field == "params"


@pytest.mark.parametrize("buffer, named", [(None, "null"), (5, "5"), ({"size": 4}, '{"size": 4}')])
def test_a_buffer_that_is_not_a_gpu_buffer_is_refused_naming_it(buffer, named):
    device = FakeDevice()
    js_set = define_set(Session(device), spec()[0])
    for buffers, which in (({"x": buffer, "y": device.buffer([0.0])}, "buffer 'x'"),
                           ([device.buffer([1.0]), buffer], "buffer 1")):
        with pytest.raises(ConfigError, match=f"set 'scale': {which} must be a GPUBuffer, got {re.escape(named)}") \
                as error:
            js_set.execute({"buffers": buffers, "params": {"n": 1, "scale": 1}})
        assert error.value.field == "buffers"


@pytest.mark.parametrize("count", [math.nan, math.inf])
def test_a_grid_that_answers_no_finite_count_is_an_error_naming_the_set_and_the_candidate(count):
    device = FakeDevice()
    described, _ = spec()
    described["candidates"][0]["grid"] = lambda call: [count]
    js_set = define_set(Session(device), described)
    buffers = {"x": device.buffer([1.0]), "y": device.buffer([0.0])}
    args = js_set.args({"buffers": buffers, "params": {"n": 1, "scale": 1}})
    with pytest.raises(ConfigError, match=r"set 'scale': candidate 'wg32': grid gave \[(NaN|Infinity)\]: workgroup "
                                          r"counts are whole numbers >= 0"):
        js_set.tunables.candidates[0].grid(args)


class AppsOwn(Exception):
    """What an app's own function throws (a JavaScript error, in the page)."""


def test_an_exception_of_the_apps_own_key_or_grid_goes_back_to_javascript_as_it_was_raised():
    device = FakeDevice()
    thrown = AppsOwn("my key broke")

    def key(call):
        raise thrown

    described, _ = spec(key=key)
    js_set = Facing(define_set(Session(device), described))
    call = {"buffers": {"x": device.buffer([1.0]), "y": device.buffer([0.0])}, "params": {"n": 1, "scale": 1}}
    for method in (js_set.check, js_set.execute):
        with pytest.raises(ForJavaScript) as raised:
            method(call)
        described_error = json.loads(str(raised.value))
        assert "my key broke" in described_error["message"]
        assert take_thrown(described_error["thrown"]) is thrown  # what web/sets.js throws to the app
        assert take_thrown(described_error["thrown"]) is None  # taken once


@pytest.mark.parametrize("params, buffers, problem, field", [
    ({"n": 1.5, "scale": 1}, ("x", "y"), "param n is a u32 in the WGSL: 1.5 is not a whole number", "n"),
    ({"n": -1, "scale": 1}, ("x", "y"), "param n is a u32 in the WGSL: -1 is out of its range", "n"),
    ({"n": None, "scale": 1}, ("x", "y"), "param n must be a finite number, got null", "n"),
    ({"n": 1, "scale": 1}, ("x",), "the call cannot run: .*declares storage .*y.*, for which the call gives no buffer",
     "buffers"),
    ({"n": 1, "scale": 1}, ("x", "y", "z"), "the call cannot run: the call names 'z', which no stage", "buffers"),
])
def test_a_call_that_cannot_run_is_refused_naming_the_field_before_any_tune(params, buffers, problem, field):
    device = FakeDevice()
    js_set = define_set(Session(device), spec()[0])
    call = {"buffers": {name: device.buffer([1.0]) for name in buffers}, "params": params}
    for method in (js_set.check, js_set.execute):
        with pytest.raises(ConfigError, match=problem) as error:
            method(call)
        assert error.value.field == field
    assert js_set.session.tuner.states(js_set.tunables) == {}  # nothing was tuned, nothing is Pending
    assert device.dispatch_count + device.profile_count == 0
    # As JavaScript gets it: the error names its set in `set`, not only in its message.
    with pytest.raises(ForJavaScript) as raised:
        Facing(js_set).check(call)
    described = json.loads(str(raised.value))
    assert described["name"] == "ConfigError" and described["set"] == "scale" and described["field"] == field


def test_a_key_whose_candidates_all_fail_is_tuned_once_says_failed_and_is_tuned_again_on_retune():
    device = FakeDevice()
    for name in ("wg32", "wg64"):
        device.script(name, launch_error="out of resources")
    js_set = define_set(Session(device), spec()[0])
    call = {"buffers": {"x": device.buffer([1.0]), "y": device.buffer([0.0])}, "params": {"n": 1, "scale": 1}}
    assert json.loads(js_set.check(call))["state"] == "Failed"  # natively the tune runs inline
    launched = device.dispatch_count + device.profile_count
    assert launched > 0
    answer = json.loads(js_set.check(call))
    assert answer["state"] == "Failed"
    assert answer["failure"]["name"] == "NoValidKernelFound"
    assert [(f["candidate"], f["reason"]) for f in answer["failure"]["failures"]] == [("wg32", "Launch"),
                                                                                     ("wg64", "Launch")]
    for _ in range(3):
        with pytest.raises(NoValidKernelFound):
            js_set.execute(call)
    assert device.dispatch_count + device.profile_count == launched  # remembered: no tune again
    device.script("wg64", launch_error=None, kernel=scale_kernel)
    assert json.loads(js_set.retune(call))["winner"] == "wg64"


def test_a_candidates_stages_may_declare_their_layout_to_share_one_bind_group():
    """``layout: "declared"`` (``Kernel.layout``) on a candidate and its stages, "auto" where left out."""
    stage = {"name": "b", "wgsl": SCALE.replace("WG", "64"), "grid": [1], "layout": "declared"}
    described, _ = spec(candidates=[{"name": "a", "wgsl": SCALE.replace("WG", "64"), "grid": [1],
                                     "layout": "declared", "then": [stage]},
                                    {"name": "c", "wgsl": SCALE.replace("WG", "32"), "grid": [1]}])
    tunables, _ = tunable_set(described)
    declared, plain = tunables.candidates
    assert [stage.layout for stage in declared.stages] == ["declared", "declared"] and plain.layout == "auto"
