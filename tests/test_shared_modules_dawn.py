"""A wrong override constant of a second set names that set's candidate, on Dawn's Null backend
(Tint's checks, nothing run): two sets of two modules from one WGSL source, each with a candidate
whose override constant is wrong (``backends/shared_modules.py``; its core tests on a fake compiler
are ``test_shared_modules.py``)."""

from __future__ import annotations

from dawn_null import dawn_null_report

TWO_SETS = r"""
import json
import struct

from wgtune import Args, Config, Space, TunableSet, Tuner
from wgtune.backends.dawn import DawnDevice

SOURCE = '''
override WG: u32 = 64;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < n.x) { y[id.x] = 3.0 * x[id.x]; }
}'''


def set_of(name):
    space = Space(name, source=SOURCE, params={"WG": [64, 0]}, default={"WG": 64},
                  grid=lambda p, a: ((a.params[0] + 63) // 64, 1, 1))
    return TunableSet(name, space.candidates(), key=lambda a: {"n": a.params[0]}, outputs=(1,))


device = DawnDevice.open()
x = device.create_buffer(struct.pack("256f", *range(256)))
args = Args((x, device.create_buffer(size=4 * 256)), (256,))
tuner = Tuner(device, config=Config(log_level="disabled", cache=False, dry_run=True))
reasons = {}
for tunables in (set_of("alpha"), set_of("beta")):
    tuner.execute(tunables, args)
    for result in tuner.results(tunables, tuner.key(tunables, args)):
        reasons[result.name] = [type(result).__name__, getattr(result, "reason", None)]
print("REPORT " + json.dumps(reasons))
"""


def test_on_dawn_a_wrong_override_of_a_second_set_names_that_sets_candidate():
    reasons = dawn_null_report(TWO_SETS)
    assert reasons["alpha[WG=64]"][0] == reasons["beta[WG=64]"][0] == "Measured"
    kind, reason = reasons["beta[WG=0]"]
    assert kind == "Launch" and "workgroup_size" in reason, reason
    assert "beta[WG=0]" in reason and "alpha" not in reason, reason
    assert "alpha[WG=0]" in reasons["alpha[WG=0]"][1]
