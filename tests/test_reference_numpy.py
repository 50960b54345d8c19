"""numpy in and around a set: a reference returning arrays of any dtype, params given as numpy scalars."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from wgtune import ConfigError
from wgtune.checks import as_bytes


def test_numpy_outputs_are_converted_to_the_outputs_type_little_endian():
    assert as_bytes(np.array([1.0, 2.5]), "f") == struct.pack("<2f", 1.0, 2.5)  # float64 in, f32 out
    assert as_bytes(np.array([1.0, 0.5], dtype=np.float32), "e") == struct.pack("<2e", 1.0, 0.5)
    assert as_bytes(np.arange(3, dtype=">i8"), "I") == struct.pack("<3I", 0, 1, 2)  # big-endian in


def test_numpy_scalars_are_params_of_their_own_kind():
    from wgtune.args import pack_params

    packed = pack_params((np.uint32(7), np.float32(2.5), np.int64(-3), np.float64(0.5)))
    assert packed == struct.pack("<Ifif", 7, 2.5, -3, 0.5)
    with pytest.raises(ConfigError, match="params must be ints or floats"):
        pack_params((np.bool_(True),))
