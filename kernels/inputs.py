"""Deterministic pseudo-random inputs for the kernel families' calls, the same in CPython and Pyodide.

Pure Python (standard library): the demo, the reduction family and the tests build their inputs
with it, so a size always gets the same values on every machine.
"""

from __future__ import annotations

import random
import sys
from array import array

__all__ = ["RANDOM_BLOCK", "random_floats"]

RANDOM_BLOCK = 1 << 22  # values made from one call for random bits


# Each f32's top two bytes (little-endian) from a random byte: sign kept, exponent made 2**-1.
_TOP_BYTE = bytes((value & 0x80) | 0x3F for value in range(256))  # sign, then the exponent's high 7 bits
_THIRD_BYTE = bytes(value & 0x7F for value in range(256))  # the exponent's low bit 0, then mantissa bits


def random_floats(count: int, seed: int | str) -> array:
    """``count`` f32 values in (-1, -0.5] and [0.5, 1), the same for the same ``seed`` everywhere.

    Built from random bytes with whole-buffer operations (each value's sign and mantissa random,
    its exponent set by translating every fourth byte), not a loop per value: a million values
    take milliseconds, also in Pyodide, where the page's main thread waits for them.
    """
    generator = random.Random(seed)  # int and str seeds are deterministic (unlike hash())
    values = array("f")
    for start in range(0, count, RANDOM_BLOCK):  # randbytes takes at most 2**28 bytes at a time
        block = bytearray(generator.randbytes(4 * min(RANDOM_BLOCK, count - start)))
        block[3::4] = block[3::4].translate(_TOP_BYTE)
        block[2::4] = block[2::4].translate(_THIRD_BYTE)
        values.frombytes(block)
    if sys.byteorder == "big":
        values.byteswap()
    return values
