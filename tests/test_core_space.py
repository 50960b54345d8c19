"""Parameter spaces: candidates from one source and lists of values, the default first."""

from __future__ import annotations

import string

import pytest
from fakes import FakeDevice, call, make_tuner, quiet

from wgtune import ConfigError, Space, TunableSet

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

OVERRIDES = """
// Tile sizes are pipeline-overridable so one module serves every configuration.
override TILE: u32 = 16u;
@id(7) override UNROLL: u32;
/* override COMMENTED_OUT: u32; */
@compute @workgroup_size(TILE, TILE)
fn main() {}
"""


def grid(params, args):
    return (max(1, args.params[0] // params["TILE"]), 1, 1)


def test_an_override_with_an_id_receives_its_parameter_under_that_id_as_webgpu_keys_it():
    space = Space("mm", params={"TILE": [8], "UNROLL": [2]}, default={"TILE": 8, "UNROLL": 2}, source=OVERRIDES,
                  grid=grid)
    assert space.candidates()[0].constants == {"TILE": 8, "7": 2}  # UNROLL is @id(7)


def test_an_override_only_in_a_comment_is_no_override():
    space = Space("mm", params={"COMMENTED_OUT": [1]}, default={"COMMENTED_OUT": 1}, source=OVERRIDES, grid=grid)
    with pytest.raises(ConfigError, match="declares no override COMMENTED_OUT"):
        space.candidates()


def test_the_default_is_candidate_zero_then_every_admitted_combination_in_order():
    space = Space("mm", params={"TILE": [8, 16, 32], "UNROLL": [1, 2]}, default={"TILE": 16, "UNROLL": 1},
                  source=OVERRIDES, grid=grid, restrict=lambda p: p["TILE"] * p["UNROLL"] <= 32,
                  workgroup_size=lambda p: (p["TILE"], p["TILE"]))
    names = [kernel.name for kernel in space.candidates()]
    assert names == ["mm[TILE=16,UNROLL=1]", "mm[TILE=8,UNROLL=1]", "mm[TILE=8,UNROLL=2]", "mm[TILE=16,UNROLL=2]",
                     "mm[TILE=32,UNROLL=1]"]
    first = space.candidates()[0]
    assert first.constants == {"TILE": 16, "7": 1}  # the overrides receive their parameters (UNROLL is @id(7))
    assert first.workgroup_size == (16, 16, 1) and first.wgsl == OVERRIDES
    assert first.grid(call(FakeDevice(), [1.0], n=64)) == (4, 1, 1)


def test_a_renderer_bakes_the_values_into_the_source_with_any_template_engine():
    template = string.Template("const TILE: u32 = ${TILE}u;\n@compute @workgroup_size(${WG}) fn main() {}\n")
    space = Space("t", params={"TILE": [4, 8], "WG": [32, 64]}, default={"TILE": 4, "WG": 32},
                  render=lambda p: template.substitute(p), grid=grid, workgroup_size=lambda p: (p["WG"],),
                  workgroup_storage=lambda p: 4 * p["TILE"] * p["WG"])
    kernels = space.candidates()
    assert len(kernels) == 4 and len({k.fingerprint() for k in kernels}) == 4
    assert "const TILE: u32 = 8u;" in kernels[-1].wgsl and kernels[-1].constants == {}
    assert kernels[-1].workgroup_storage == 4 * 8 * 64 and kernels[-1].workgroup_size == (64, 1, 1)


def test_a_space_tunes_like_any_set_and_its_checksum_follows_the_values():
    device = FakeDevice()
    space = Space("s", params={"TILE": [8, 16, 32]}, default={"TILE": 8}, source=OVERRIDES.replace(
        "@id(7) override UNROLL: u32;", ""), grid=grid)
    for kernel, seconds in zip(space.candidates(), (3e-3, 1e-3, 2e-3), strict=True):
        device.script(kernel.name, duration=seconds)
    tunables = TunableSet("s", space.candidates(), key=lambda args: {"n": args.params[0]})
    assert make_tuner(device, config=quiet()).execute(tunables, call(device, [1.0])).name == "s[TILE=16]"
    narrower = Space("s", params={"TILE": [8, 16]}, default={"TILE": 8}, source=space.source, grid=grid)
    assert TunableSet("s", narrower.candidates(), key=dict).checksum != tunables.checksum


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"source": None}, "either source= .* or render="),
        ({"render": lambda p: ""}, "either source= .* or render="),
        ({"params": {}}, "params must map"),
        ({"params": {"TILE": []}}, "needs a non-empty list"),
        ({"default": {}}, r"missing \['TILE'\]"),
        ({"default": {"TILE": 8, "X": 1}}, r"unknown \['X'\]"),
        ({"restrict": lambda p: p["TILE"] > 8}, "the default .* does not pass"),
        ({"restrict": lambda p: p["NOPE"]}, "a restriction raised KeyError"),
        ({"restrict": [1]}, "restrict must be a function"),
    ],
)
def test_a_badly_made_space_is_refused_with_a_reason(fields, problem):
    settings = {"name": "bad", "params": {"TILE": [8, 16]}, "default": {"TILE": 8}, "source": OVERRIDES,
                "grid": grid}
    settings.update(fields)
    with pytest.raises(ConfigError, match=problem):
        Space(**settings).candidates()


def test_a_parameter_that_is_no_override_of_the_source_is_named():
    space = Space("s", params={"TIEL": [8]}, default={"TIEL": 8}, source=OVERRIDES, grid=grid)
    with pytest.raises(ConfigError, match="declares no override TIEL"):
        space.candidates()


def test_a_renderer_that_fails_or_returns_no_text_is_named_with_its_configuration():
    with pytest.raises(ConfigError, match=r"t\[TILE=8\]: render raised KeyError"):
        Space("t", params={"TILE": [8]}, default={"TILE": 8}, grid=grid,
              render=lambda p: string.Template("${WG}").substitute(p)).candidates()
    with pytest.raises(ConfigError, match="render must return the WGSL as a str"):
        Space("t", params={"TILE": [8]}, default={"TILE": 8}, grid=grid, render=lambda p: None).candidates()


def test_a_space_too_large_to_measure_whole_says_so():
    space = Space("big", params={"A": list(range(20)), "B": list(range(20))}, default={"A": 0, "B": 0},
                  render=lambda p: "", grid=grid)
    assert len(space.candidates()) == 400
    with pytest.raises(ConfigError, match="more than 100 valid configurations"):
        space.candidates(limit=100)
