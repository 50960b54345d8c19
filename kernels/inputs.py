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


def random_floats(count: int, seed: int | str) -> array:
    """``count`` f32 values in (-1, -0.5] and [0.5, 1), the same for the same ``seed`` everywhere.

    Built from random bits with whole-buffer integer operations (sign and mantissa random, the
    exponent fixed), not a loop per value: a million values take milliseconds, also in Pyodide,
    where a per-value Python loop would block the page's main thread for a second.
    """
    generator = random.Random(seed)  # int and str seeds are deterministic (unlike hash())
    values = array("f")
    for start in range(0, count, RANDOM_BLOCK):  # randbytes takes at most 2**28 bytes at a time
        block = min(RANDOM_BLOCK, count - start)
        bits = int.from_bytes(generator.randbytes(4 * block), "little")
        keep = int.from_bytes(b"\xff\xff\x7f\x80" * block, "little")  # mantissa and sign of each f32
        exponent = int.from_bytes(b"\x00\x00\x00\x3f" * block, "little")  # 2**-1: magnitudes in [0.5, 1)
        values.frombytes(((bits & keep) | exponent).to_bytes(4 * block, "little"))
    if sys.byteorder == "big":
        values.byteswap()
    return values
