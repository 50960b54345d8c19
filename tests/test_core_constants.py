"""A candidate's pipeline constants (WGSL ``override`` values): checked when the kernel is made,
part of its identity, and handed to the device as they are."""

from __future__ import annotations

import math

import pytest
from fakes import kernel

from wgtune import ConfigError, TunableSet

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


def test_constants_are_part_of_a_candidates_identity_and_absent_ones_change_nothing():
    plain = kernel("k")
    assert kernel("k", constants={}).fingerprint() == plain.fingerprint()  # stored winners stay valid
    a, b = kernel("k", constants={"WG": 64}), kernel("k", constants={"WG": 128})
    assert len({plain.fingerprint(), a.fingerprint(), b.fingerprint()}) == 3
    # The order they are given in does not matter.
    assert (kernel("k", constants={"x": 1, "y": 2.5}).fingerprint()
            == kernel("k", constants={"y": 2.5, "x": 1}).fingerprint())
    assert TunableSet("s", [a], key=dict).checksum != TunableSet("s", [b], key=dict).checksum


@pytest.mark.parametrize(
    ("constants", "problem"),
    [
        ([("WG", 64)], "must be a mapping"),
        ({"": 1}, "non-empty strings"),
        ({3: 1}, "non-empty strings"),
        ({"WG": "64"}, "constant WG = '64'"),
        ({"scale": math.inf}, "finite number"),
        ({"scale": math.nan}, "finite number"),
    ],
)
def test_a_bad_constant_is_refused_when_the_kernel_is_made_and_named(constants, problem):
    with pytest.raises(ConfigError, match=problem):
        kernel("k", constants=constants)


def test_numbers_keep_their_kind_and_bools_stay_bools():
    made = kernel("k", constants={"WG": 64, "scale": 1.5, "fast": True})
    assert made.constants == {"WG": 64, "scale": 1.5, "fast": True}
    assert type(made.constants["WG"]) is int and type(made.constants["fast"]) is bool
