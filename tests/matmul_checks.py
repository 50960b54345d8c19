"""One matmul candidate's products against numpy (float64), on buffers that catch what a product
should not do: A and B followed by NaN (a read past either shows up in C), C filled with NaN (an
output left unwritten stays NaN) and followed by a sentinel (a store past C overwrites it). Shared
by the tests of the matmul kernels that serve odd sizes (flat tiles, tiles on padded copies)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

import wgtune
from wgtune import Args, run_inline
from wgtune.backends.native import NativeDevice

GUARD = 64  # floats after each buffer
SENTINEL = np.float32(-12345.0)


def guarded_args(device: NativeDevice, a: np.ndarray, b: np.ndarray, m: int, n: int, k: int) -> Args:
    def followed_by_nan(values: np.ndarray) -> bytes:
        return np.concatenate([values.ravel(), np.full(GUARD, np.nan, np.float32)]).tobytes()

    output = np.concatenate([np.full(m * n, np.nan, np.float32), np.full(GUARD, SENTINEL, np.float32)])
    return Args((device.create_buffer(followed_by_nan(a)), device.create_buffer(followed_by_nan(b)),
                 device.create_buffer(output.tobytes())), (m, n, k))


def check_products(device: NativeDevice, kernel: wgtune.Kernel, sizes: Iterable[tuple[int, int, int]],
                   tolerance: float) -> None:
    """``kernel``'s C for each ``(m, n, k)`` of random inputs equals numpy's within ``tolerance``
    (relative, and absolute times sqrt(k)), with nothing unwritten and nothing stored past C."""
    pipeline = run_inline(device.compile(kernel))
    for m, n, k in sizes:
        rng = np.random.default_rng(m * 10007 + n * 101 + k)
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        args = guarded_args(device, a, b, m, n, k)
        device.dispatch(pipeline, args, tuple(kernel.grid(args)))
        words = np.frombuffer(device.read_buffer_sync(args.buffers[2]), np.float32)
        assert np.all(words[m * n :] == SENTINEL), f"{kernel.name} wrote past the end of C at {m}x{n}x{k}"
        got = words[: m * n].reshape(m, n)
        assert not np.isnan(got).any(), f"{kernel.name} left outputs unwritten (or read NaN) at {m}x{n}x{k}"
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * math.sqrt(k),
                                   err_msg=f"{kernel.name} {m}x{n}x{k}")
