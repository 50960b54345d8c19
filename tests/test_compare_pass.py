"""The output checks' comparison pass on the adapter present, held to the host's rule
(``comparison.compare_bytes``): the same verdict for every type it compares, NaN and infinities
included, on sizes that are not multiples of the workgroup or of the elements per invocation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wgtune import run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.comparison import compare_bytes


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def same(gpu, host) -> None:
    assert (gpu.count, gpu.mismatches, gpu.first) == (host.count, host.mismatches, host.first)
    for field in ("got", "want", "max_abs", "max_rel"):
        a, b = getattr(gpu, field), getattr(host, field)
        assert (a is None and b is None) or (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-6), field


@pytest.mark.parametrize("typecode, dtype", [("f", "<f4"), ("e", "<f2"), ("i", "<i4"), ("I", "<u4")])
@pytest.mark.parametrize("count", [1, 4099, 70_001])
def test_the_gpu_pass_gives_the_hosts_verdict(device, typecode, dtype, count):
    rng = np.random.default_rng(count)
    want = (rng.uniform(-50, 50, count)).astype(dtype)
    got = want.copy()
    wrong = rng.choice(count, min(count, 7), replace=False)
    if typecode in "fe":
        got[wrong] += np.array(0.5, dtype)
        if count > 10:
            got[1], want[2], got[2], got[3] = np.nan, np.nan, np.nan, np.inf  # NaN vs value, NaN vs NaN, inf
    else:
        got[wrong] += 1
    for atol, rtol in ((0.0, 0.0), (1e-3, 1e-3), (0.6, 0.0), (2.0, 0.0)):
        host = compare_bytes(got.tobytes(), want.tobytes(), typecode, atol, rtol)
        pair = device.create_buffer(got.tobytes()), device.create_buffer(want.tobytes())
        gpu = run_inline(device.compare_buffers(*pair, typecode, count, atol, rtol))
        same(gpu, host)


def test_outputs_that_agree_report_their_largest_error(device):
    want = np.linspace(1, 2, 1000, dtype=np.float32)
    got = want + np.float32(1e-5)
    gpu = run_inline(device.compare_buffers(device.create_buffer(got.tobytes()), device.create_buffer(want.tobytes()),
                                            "f", 1000, 1e-4, 1e-4))
    assert gpu.agree and gpu.first is None and gpu.max_abs == pytest.approx(1e-5, rel=0.2)
