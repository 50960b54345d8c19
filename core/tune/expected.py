"""A reference's expected outputs as the bytes a kernel writes (:func:`as_bytes`), for the output
checks (``checks.py``) to compare with: bytes as they are, numpy arrays, typed values (what a
JavaScript typed array becomes) and sequences of numbers, each converted to the output's WGSL
element type, or a :class:`~wgtune.errors.TuneFailed` naming the output where they cannot be.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ..errors import TuneFailed
from ..gpu.comparison import ELEMENT_TYPES, FLOAT_TYPES, element_size
from ..sets.output_types import OutputSpec

__all__ = ["TypedValues", "as_bytes"]


@dataclass(frozen=True, slots=True)
class TypedValues:
    """Expected values whose element type is known apart from their bytes: what a JavaScript typed
    array becomes (``Float32Array`` -> ``"f"``), so a reference returning the wrong type is an
    error rather than bytes read as something else."""

    typecode: str
    data: bytes


# numpy's dtype kinds that may stand for each kind of output: a float output takes any number, an
# integer output only integers (floats would be truncated silently).
_KINDS_FOR_FLOAT, _KINDS_FOR_INT = "fiub", "iub"
_NUMPY_DTYPES = {"e": "<f2", "f": "<f4", "d": "<f8", "b": "i1", "B": "u1", "h": "<i2", "H": "<u2", "i": "<i4",
                 "I": "<u4"}


def as_bytes(value: Any, spec: OutputSpec, size: int, who: str) -> bytes:
    """An expected output as the bytes the kernel writes into a buffer of ``size`` bytes: bytes as
    they are; a numpy array (of numbers of the output's kind) or a :class:`TypedValues` converted
    to the output's type; a sequence of numbers packed. A TuneFailed naming the output when the
    values are of the wrong kind, out of the type's range, or do not fill the buffer."""
    typecode, where = spec.typecode, f"{who}: output {spec.label}, of WGSL type {ELEMENT_TYPES[spec.typecode]},"
    is_float = typecode in FLOAT_TYPES
    try:
        if isinstance(value, TypedValues):
            if value.typecode != typecode and (value.typecode in FLOAT_TYPES) != is_float:
                raise TuneFailed(f"{where} is given {ELEMENT_TYPES.get(value.typecode, value.typecode)} values; "
                                 f"give {ELEMENT_TYPES[typecode]} ones")
            value = list(struct.unpack(f"<{len(value.data) // element_size(value.typecode)}{value.typecode}",
                                       value.data)) if value.typecode != typecode else value.data
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
        elif hasattr(value, "astype") and hasattr(value, "dtype"):  # numpy, without importing it
            if value.dtype.kind not in (_KINDS_FOR_FLOAT if is_float else _KINDS_FOR_INT):
                raise TuneFailed(f"{where} is given an array of {value.dtype}; give {ELEMENT_TYPES[typecode]} values")
            if not is_float and value.size:
                low, high = _range(typecode)
                if int(value.min()) < low or int(value.max()) > high:
                    raise TuneFailed(f"{where} is given values in [{int(value.min())}, {int(value.max())}], outside "
                                     f"the type's range [{low}, {high}]")
            data = value.astype(_NUMPY_DTYPES[typecode]).tobytes()
        else:
            values = list(value)
            if not is_float and any(isinstance(v, float) and not v.is_integer() for v in values):
                raise TuneFailed(f"{where} is given fractional numbers; give {ELEMENT_TYPES[typecode]} values")
            data = struct.pack(f"<{len(values)}{typecode}", *values)
    except TuneFailed:
        raise
    except (TypeError, ValueError, OverflowError, struct.error) as error:
        raise TuneFailed(f"{where} is given something that is not {ELEMENT_TYPES[typecode]} values: {error}") from None
    # A buffer is whole 4-byte words: an output of an odd number of f16 values has 2 bytes more.
    if not size - 3 <= len(data) <= size:
        count = len(data) // element_size(typecode)
        raise TuneFailed(f"{where} is given {count} values ({len(data)} bytes); the buffer holds "
                         f"{size // element_size(typecode)} ({size} bytes)")
    return data


def _range(typecode: str) -> tuple[int, int]:
    bits = 8 * element_size(typecode)
    return (0, 2**bits - 1) if typecode.isupper() else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
