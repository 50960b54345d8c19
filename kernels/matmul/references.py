"""The matmul family's inputs and CPU references: seeded buffers for a call of the ``matmul`` and
``matmul_f16`` sets, and what their output checks compare against (pure Python, small sizes)."""

from __future__ import annotations

import struct
from typing import Any

from wgtune import Args

from ..common import F32_BYTES
from ..family import Size
from ..inputs import random_floats

__all__ = ["make_matmul_args", "make_matmul_f16_args", "matmul_f16_reference", "matmul_reference", "pack_f16"]


def matmul_reference(a: list[float], b: list[float], m: int, n: int, k: int) -> list[float]:
    """``A @ B`` in pure Python (row-major lists), in the kernels' summation order. Small sizes only."""
    out = [0.0] * (m * n)
    for row in range(m):
        a_row = a[row * k : row * k + k]
        for col in range(n):
            acc = 0.0
            for kk in range(k):
                acc += a_row[kk] * b[kk * n + col]
            out[row * n + col] = acc
    return out


def _to_f16(values: list[float]) -> list[float]:
    return list(struct.unpack(f"<{len(values)}e", struct.pack(f"<{len(values)}e", *values)))


def pack_f16(values: list[float]) -> bytes:
    """``values`` as little-endian f16, zero-padded to a multiple of 4 bytes (buffer sizes must be)."""
    data = struct.pack(f"<{len(values)}e", *values)
    return data + bytes(-len(data) % 4)


def matmul_f16_reference(a: list[float], b: list[float], m: int, n: int, k: int) -> list[float]:
    """What the f16 set computes: inputs rounded to f16, sums in double (the kernels' f32 sums
    are closer to this than to f16 sums), the result rounded to f16. Compare with
    ``F16_TOLERANCE`` relative to ``sum |a| |b|``, which bounds the f32 rounding along K."""
    return _to_f16(matmul_reference(_to_f16(list(a)), _to_f16(list(b)), m, n, k))


def make_matmul_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(A, B, C)`` for ``C[M, N] = A[M, K] @ B[K, N]`` with seeded inputs; params ``(M, N, K)``."""
    m, n, k = size
    a = random_floats(m * k, seed=f"matmul-a-{m}x{n}x{k}-{seed}")
    b = random_floats(k * n, seed=f"matmul-b-{m}x{n}x{k}-{seed}")
    output = device.create_buffer(size=F32_BYTES * m * n)
    buffers = (device.create_buffer(a.tobytes()), device.create_buffer(b.tobytes()), output)
    return Args(buffers, (m, n, k))


def make_matmul_f16_args(device: Any, size: Size, seed: int = 0) -> Args:
    """Buffers ``(A, B, C)`` of f16 (:func:`pack_f16`: each padded to whole words) with the seeded
    values of :func:`make_matmul_args` rounded to f16; params ``(M, N, K)``."""
    m, n, k = size
    a = random_floats(m * k, seed=f"matmul-a-{m}x{n}x{k}-{seed}")
    b = random_floats(k * n, seed=f"matmul-b-{m}x{n}x{k}-{seed}")
    c_bytes = 2 * m * n
    output = device.create_buffer(size=c_bytes + (-c_bytes % 4))
    buffers = (device.create_buffer(pack_f16(a.tolist())), device.create_buffer(pack_f16(b.tolist())), output)
    return Args(buffers, (m, n, k))
