"""The matmul sets' output checks allow for rounding that grows with K (kernels/matmul/tolerance.py)."""

from __future__ import annotations

import numpy as np
import pytest

from wgtune import Args
from wgtune.gpu.comparison import compare_bytes
from wgtune.kernels.matmul import matmul_f16_set, matmul_set
from wgtune.kernels.matmul.tolerance import ROUNDING_PER_K


def call(m: int, n: int, k: int) -> Args:
    return Args((), (m, n, k))


def test_an_h100s_two_slice_output_at_k_52036_is_right_though_a_fixed_atol_called_it_wrong():
    # bench/fresh_checks.py --seed 106273 on an H100: four two-slice tiles gave this for one of
    # 253x905 outputs of K 52036; every other output and candidate agreed with the exact sum.
    got, exact = np.float32(-0.152214), -0.151055
    assert abs(got - exact) > 1e-3 + 1e-3 * abs(exact)  # the old rule's verdict: wrong
    _code, atol, rtol = matmul_set().tolerances_for(call(253, 905, 52036))[0]
    assert compare_bytes(got.tobytes(), np.float32(exact).tobytes(), "f", atol, rtol).agree


@pytest.mark.parametrize("k", [4096, 52036])
def test_the_allowance_covers_reordered_sums_and_still_sees_a_product_left_out(k):
    # The tuner's inputs: magnitudes in [0.5, 1), random signs (kernels/inputs.py).
    rng = np.random.default_rng(k)
    rows = 8_000_000 // k
    a, b = (rng.uniform(0.5, 1.0, (rows, k)) * rng.choice([-1.0, 1.0], (rows, k)) for _ in range(2))
    products = (a.astype(np.float32) * b.astype(np.float32)).astype(np.float32)
    exact = (a.astype(np.float32).astype(np.float64) * b.astype(np.float32).astype(np.float64)).sum(axis=1)
    chain = np.cumsum(products, axis=1, dtype=np.float32)[:, -1]
    half = k // 2
    slices = (np.cumsum(products[:, :half], axis=1, dtype=np.float32)[:, -1]
              + np.cumsum(products[:, half:], axis=1, dtype=np.float32)[:, -1])
    dropped = chain - products[:, k // 3]  # one product left out
    _code, atol, rtol = matmul_set().tolerances_for(call(rows, 1, k))[0]

    def agree(got: np.ndarray, want: np.ndarray) -> bool:
        return compare_bytes(got.astype(np.float32).tobytes(), want.astype(np.float32).tobytes(), "f", atol,
                             rtol).agree

    assert agree(chain, exact) and agree(slices, exact) and agree(chain, slices)
    assert not agree(dropped, exact)
    worst = float(np.max(np.abs(chain.astype(np.float64) - slices)))
    assert worst < 0.5 * ROUNDING_PER_K * k  # the allowance's margin over what reordering does here


def test_each_sets_allowance_grows_with_k_from_its_old_fixed_value():
    sets = ((matmul_set(), 1e-3), (matmul_f16_set(), 1e-2), (matmul_set(precision="f16-products"), 5e-2))
    for tunables, small in sets:
        atols = [tunables.tolerances_for(call(64, 64, k))[0][1] for k in (1, 4096, 65536, 1 << 20)]
        assert atols == sorted(atols) and atols[0] == pytest.approx(small, rel=1e-3), tunables.name
        assert atols[-1] >= ROUNDING_PER_K * (1 << 20), tunables.name
