"""numpy in and around a set: a reference returning arrays of any dtype, params given as numpy scalars."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from wgtune import ConfigError, TuneFailed
from wgtune.sets.output_types import OutputSpec
from wgtune.tune.expected import as_bytes


def spec(typecode: str) -> OutputSpec:
    return OutputSpec(1, "'out' (buffer 1)", typecode, 0.0, 0.0, poison=True)


def test_numpy_outputs_are_converted_to_the_outputs_type_little_endian():
    assert as_bytes(np.array([1.0, 2.5]), spec("f"), 8, "r") == struct.pack("<2f", 1.0, 2.5)  # float64 in, f32 out
    assert as_bytes(np.array([1.0, 0.5], dtype=np.float32), spec("e"), 4, "r") == struct.pack("<2e", 1.0, 0.5)
    assert as_bytes(np.arange(3, dtype=">i8"), spec("I"), 12, "r") == struct.pack("<3I", 0, 1, 2)  # big-endian in


def test_a_numpy_reference_of_the_wrong_kind_shape_or_range_is_an_error_naming_the_output():
    with pytest.raises(TuneFailed, match=r"output 'out' \(buffer 1\), of WGSL type u32, is given an array of float32"):
        as_bytes(np.array([2.0, 3.0], np.float32), spec("I"), 8, "the reference of s")
    with pytest.raises(TuneFailed, match=r"is given 3 values \(12 bytes\); the buffer holds 4 \(16 bytes\)"):
        as_bytes(np.zeros(3, np.float32), spec("f"), 16, "the reference of s")
    with pytest.raises(TuneFailed, match=r"is given values in \[-1, 2\], outside the type's range \[0, 4294967295\]"):
        as_bytes(np.array([-1, 2]), spec("I"), 8, "the reference of s")
    assert as_bytes(np.array([2, 3], np.uint32), spec("I"), 8, "r") == struct.pack("<2I", 2, 3)  # issue 25's case


def test_numpy_scalars_are_params_of_their_own_kind():
    from wgtune.sets.args import pack_params

    packed = pack_params((np.uint32(7), np.float32(2.5), np.int64(-3), np.float64(0.5)))
    assert packed == struct.pack("<Ifif", 7, 2.5, -3, 0.5)
    with pytest.raises(ConfigError, match="params must be ints or floats"):
        pack_params((np.bool_(True),))
