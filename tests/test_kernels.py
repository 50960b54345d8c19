"""The kernel families on the real adapter (lavapipe here): every candidate, odd sizes, and a tune.

Each candidate is compiled and dispatched directly, without the tuner, so that a wrong
candidate fails here by name rather than being quietly outvoted in a tune. Outputs are compared
with numpy. Output buffers start as NaN (so an element never written shows) and carry a guard
region past the end (so a store out of bounds shows); input buffers are followed by NaNs (so a
load past the end of a matrix or array that reaches an output shows).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from kernel_checks import tune_checked

import wgtune
from wgtune import Args, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.device import check_grid
from wgtune.kernels import bandwidth, demo, matmul
from wgtune.sets.shaders import workgroup_shape
from wgtune.tune.plan import Plan

GUARD = 64  # f32 words after each output, which no candidate may write
SENTINEL = np.float32(-12345.0)

FMA = bandwidth.fma_set()
FMA_SIZES = [1, 1001, 4099]


@pytest.fixture(scope="session")
def device() -> NativeDevice:
    return NativeDevice.open()


@pytest.fixture(scope="session")
def pipelines(device):
    """Compiled pipelines by kernel name, shared by the tests (compiling dominates their time)."""
    cache: dict[str, object] = {}

    def get(kernel: wgtune.Kernel):
        if kernel.name not in cache:
            cache[kernel.name] = run_inline(device.compile(kernel))
        return cache[kernel.name]

    return get


def _output_buffer(device, count: int):
    """``count`` NaNs followed by the guard region."""
    data = np.concatenate([np.full(count, np.nan, np.float32), np.full(GUARD, SENTINEL, np.float32)])
    return device.create_buffer(data.tobytes())


def _input_buffer(device, values: np.ndarray):
    """``values`` followed by NaNs: a read past the end that reaches an output turns it into NaN."""
    return device.create_buffer(np.concatenate([values.ravel(), np.full(GUARD, np.nan, np.float32)]).tobytes())


def _run(device, pipelines, kernel: wgtune.Kernel, args: Args, output: int, count: int) -> np.ndarray:
    """Dispatch ``kernel`` once; return its first ``count`` outputs after checking the guard."""
    grid = tuple(kernel.grid(args))
    assert check_grid(grid, device.limits) is None
    device.dispatch(pipelines(kernel), args, grid)
    words = np.frombuffer(device.read_buffer_sync(args.buffers[output]), np.float32)
    assert np.all(words[count:] == SENTINEL), f"{kernel.name} wrote past the end of its output"
    return words[:count]


# (matmul: see test_kernels_matmul.py)


# -- fma (bandwidth) --------------------------------------------------------------------------


def _fma_width(kernel: wgtune.Kernel) -> int:
    return 1 if kernel.name.startswith("f32") else int(kernel.name[3])


def _fma_tail(kernel: wgtune.Kernel) -> bool:
    return kernel.name.endswith("_tail")


def _fma_planned(kernel: wgtune.Kernel, n: int) -> bool:
    """Plain candidates where their width divides N; tail ones where it does not, on long N."""
    if _fma_tail(kernel):
        return n % _fma_width(kernel) != 0 and wgtune.anchor(n) >= bandwidth.TAIL_MIN_N
    return n % _fma_width(kernel) == 0


@pytest.mark.parametrize("kernel", FMA.candidates, ids=lambda kernel: kernel.name)
def test_declared_workgroup_storage_and_size_match_the_wgsl(kernel):
    declared = re.findall(r"var<workgroup>\s+\w+\s*:\s*array<f32,\s*(\d+)>", kernel.wgsl)
    size, storage = workgroup_shape(kernel)  # what the limits are checked against
    assert storage == 4 * sum(int(count) for count in declared)
    found = re.search(r"@workgroup_size\((\d+),\s*(\d+),\s*(\d+)\)", kernel.wgsl)
    assert tuple(int(n) for n in found.groups()) == size


@pytest.mark.parametrize("base_n", FMA_SIZES)
@pytest.mark.parametrize("name", list(FMA.index_of))
def test_fma_candidate_matches_numpy(device, pipelines, name, base_n):
    """Vector candidates run on N rounded up to their width: the plan never gives them other N.
    Tail candidates run on N that their width does not divide (at least one vec4: 16 bytes bound)."""
    kernel = FMA.candidates[FMA.index_of[name]]
    width = _fma_width(kernel)
    n = -(-base_n // width) * width
    if _fma_tail(kernel):
        n = base_n + width + (0 if base_n % width else 1)
        assert n % width != 0
    rng = np.random.default_rng(n)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    b = rng.uniform(-1, 1, n).astype(np.float32)
    alpha = 0.75
    args = Args((_input_buffer(device, x), _input_buffer(device, b), _output_buffer(device, n)), (n, alpha))
    got = _run(device, pipelines, kernel, args, output=2, count=n)
    np.testing.assert_allclose(got, np.float32(alpha) * x + b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 6, 1001, 1002, 4099, 4100])
def test_fma_plan_skips_vectors_that_do_not_divide_n(n):
    key = FMA.key(Args((), (n, 1.0)))
    skipped = set(Plan(FMA.candidates, key).skipped)
    for index, kernel in enumerate(FMA.candidates):
        assert (index in skipped) == (not _fma_planned(kernel, n)), (kernel.name, n)
    assert any(_fma_tail(FMA.candidates[index]) for index in set(range(len(FMA))) - skipped) == (n == 4099)


def test_fma_grid_wraps_past_the_per_dimension_limit(device, pipelines):
    """Candidate 0 needs more than 65535 workgroups here: the grid must wrap onto y and stay right."""
    kernel = FMA.candidates[0]
    n = 64 * 65_535 + 77
    assert kernel.grid(Args((), (n, 1.0)))[1] > 1
    x = np.arange(n, dtype=np.float32) % 1000
    b = np.ones(n, np.float32)
    args = Args(
        (device.create_buffer(x.tobytes()), device.create_buffer(b.tobytes()), _output_buffer(device, n)), (n, 2.0)
    )
    got = _run(device, pipelines, kernel, args, output=2, count=n)
    np.testing.assert_array_equal(got, 2 * x + 1)
    for candidate in FMA.candidates:
        assert check_grid(tuple(candidate.grid(Args((), (2**32 - 4, 1.0)))), wgtune.DeviceLimits()) is None


# -- references and the demo suite --------------------------------------------------------------


def test_cpu_references_match_numpy():
    m, n, k = 5, 7, 3
    a = demo.random_floats(m * k, seed=1)
    b = demo.random_floats(k * n, seed=2)
    want = np.array(a, np.float64).reshape(m, k) @ np.array(b, np.float64).reshape(k, n)
    np.testing.assert_allclose(np.array(matmul.matmul_reference(list(a), list(b), m, n, k)).reshape(m, n), want)
    np.testing.assert_allclose(bandwidth.fma_reference([1.0, 2.0], [0.5, -1.0], 3.0), [3.5, 5.0])


def test_demo_inputs_are_deterministic_and_in_range():
    assert demo.random_floats(100, seed="s") == demo.random_floats(100, seed="s")
    assert demo.random_floats(100, seed="s") != demo.random_floats(100, seed="t")
    assert all(-1.0 <= value < 1.0 for value in demo.random_floats(1000, seed=3))


def test_random_floats_take_sign_and_mantissa_from_the_seeds_random_bytes_with_the_exponent_of_one_half():
    # Their definition, value by value: the values are the same on every machine and every version,
    # so a stored demo key tuned elsewhere was tuned on the same data.
    import random
    import struct

    raw = random.Random("definition").randbytes(4 * 1000)
    want = []
    for (word,) in struct.iter_unpack("<I", raw):
        sign, mantissa = word >> 31, word & 0x7FFFFF
        want.append((-1.0) ** sign * (1 + mantissa / 2**23) / 2)
    assert list(demo.random_floats(1000, seed="definition")) == want


def test_demo_suite_builds_args_for_every_size(device):
    cases = demo.demo_suite()
    assert {case.tunables.name for case in cases} == {"matmul", "fma", "row_sum", "row_max"}
    for case in cases:
        assert case.sizes
        for size in case.sizes:
            args = case.make_args(device, size)
            assert args.params[: len(size)] == tuple(size)
            case.tunables.key(args)  # the key function accepts the demo's calls


# -- tuning ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [4100, 4099])
def test_tune_fma_gives_right_output_and_a_hit(device, n):
    args = demo.make_fma_args(device, (n,))
    _, trials = tune_checked(device, FMA, args)
    assert len(trials) == sum(_fma_planned(kernel, n) for kernel in FMA.candidates)
    assert any(_fma_tail(FMA.candidates[t.index]) for t in trials) == (n % 4 != 0)
    x, b, out = (np.frombuffer(device.read_buffer_sync(buffer), np.float32) for buffer in args.buffers)
    np.testing.assert_allclose(out, np.float32(demo.FMA_ALPHA) * x + b, rtol=1e-6, atol=1e-6)


def test_random_floats_are_made_in_blocks_past_what_one_call_for_random_bits_gives():
    from wgtune.kernels.demo import RANDOM_BLOCK, random_floats

    values = random_floats(RANDOM_BLOCK + 5, seed="blocks")
    assert len(values) == RANDOM_BLOCK + 5
    assert list(values[:RANDOM_BLOCK]) == list(random_floats(RANDOM_BLOCK, seed="blocks"))
    assert all(0.5 <= abs(v) < 1.0 for v in values[RANDOM_BLOCK:])
