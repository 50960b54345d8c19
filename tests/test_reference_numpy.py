"""A reference function may return numpy arrays of any dtype: they become the output's type."""

from __future__ import annotations

import struct

import numpy as np

from wgtune.checks import as_bytes


def test_numpy_outputs_are_converted_to_the_outputs_type_little_endian():
    assert as_bytes(np.array([1.0, 2.5]), "f") == struct.pack("<2f", 1.0, 2.5)  # float64 in, f32 out
    assert as_bytes(np.array([1.0, 0.5], dtype=np.float32), "e") == struct.pack("<2e", 1.0, 0.5)
    assert as_bytes(np.arange(3, dtype=">i8"), "I") == struct.pack("<3I", 0, 1, 2)  # big-endian in
