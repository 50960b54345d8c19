"""Kernels with further stages and required features, on the fake device."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, kernel, make_set, make_tuner, stored_results

from wgtune import ConfigError, Kernel, TunableSet

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def test_a_stage_changes_the_candidates_fingerprint_and_so_the_sets_checksum():
    plain = kernel("a")
    staged = Kernel("a", plain.wgsl, plain.grid, then=(kernel("b"),))
    assert plain.fingerprint() != staged.fingerprint()
    assert staged.stages == (staged, *staged.then)
    assert TunableSet("s", [plain], key=dict).checksum != TunableSet("s", [staged], key=dict).checksum


def test_a_stage_must_be_a_kernel():
    with pytest.raises(ConfigError, match="each stage in then must be a Kernel"):
        Kernel("a", "", lambda args: (1, 1, 1), then=("not a kernel",))


def test_a_stage_whose_grid_is_too_large_makes_the_candidate_a_launch_failure():
    device = FakeDevice()
    too_wide = Kernel("wide", "", lambda args: (1 << 20, 1, 1))
    staged = kernel("b")
    staged = Kernel("b", staged.wgsl, staged.grid, then=(too_wide,))
    tunables = make_set("a")
    tunables = TunableSet(tunables.name, [tunables.candidates[0], staged], key=tunables.key_function)
    tuner = make_tuner(device)
    tuner.execute(tunables, call(device, [1.0]))
    result = stored_results(tuner, tunables)["b"]
    assert result["error"] == "Launch" and result["reason"].startswith("stage wide: exceeds a device limit")


def test_a_candidate_needing_a_feature_the_device_lacks_is_refused_before_compiling():
    device = FakeDevice()
    needy = kernel("b")
    needy = Kernel("b", needy.wgsl, needy.grid, features=("shader-f16",))
    base = make_set("a")
    tunables = TunableSet(base.name, [base.candidates[0], needy], key=base.key_function)
    tuner = make_tuner(device)
    assert tuner.execute(tunables, call(device, [1.0])).name == "a"
    assert "needs the device feature shader-f16" in stored_results(tuner, tunables)["b"]["reason"]
    assert device.compiles["b"] == 0
