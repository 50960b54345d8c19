"""Output checks on the adapter present: each candidate is checked on buffers that start as they
should (its outputs poisoned), even where a check reuses the buffers of the run before it."""

from __future__ import annotations

import numpy as np
import pytest

from wgtune import Args, Config, Kernel, Measured, Mismatch, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

SCALE = """
struct P { n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { y[g.x] = 3.0 * x[g.x]; }
}
"""
N = 4096


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def candidate(name: str, share: int = 1) -> Kernel:
    """A right one, or with ``share`` 4 one whose grid covers a quarter of the output (and a comment
    to make its source its own)."""
    return Kernel(name, SCALE + f"// {name}\n", grid=lambda args: (-(-args.params[0] // 64) // share, 1, 1))


@pytest.mark.parametrize("reference", [True, False], ids=["reference", "agreement"])
def test_a_quarter_grid_candidate_run_after_a_right_one_on_the_same_buffers_is_still_caught(device, reference):
    x = np.random.default_rng(3).standard_normal(N).astype(np.float32)
    options = {"reference": lambda inputs, params: [3.0 * np.frombuffer(inputs[0], np.float32)]} if reference else {}
    tunables = TunableSet(f"reuse_{reference}", [candidate("right"), candidate("quarter", 4), candidate("right too")],
                          key=lambda args: {"n": args.params[0]}, **options)
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", samples=2, warmups=1))
    args = Args({"x": device.create_buffer(x.tobytes()), "y": device.create_buffer((3 * x).tobytes())}, (N,))
    assert tuner.execute(tunables, args).name != "quarter"
    right, quarter, right_too = tuner.results(tunables, tunables.key(args))
    assert isinstance(right, Measured) and isinstance(right_too, Measured)
    assert isinstance(quarter, Mismatch) and f"{N - N // 4} of {N} values differ" in quarter.reason, quarter


# One invocation sums the whole input: STEP elements an iteration, so the loop runs n / STEP times.
SUM_BY_ONE = """
struct P { n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> total: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(1) fn main() {
    var sum = 0.0;
    for (var i = 0u; i + STEP <= p.n; i += STEP) { SUMS }
    total[0] = sum;
}
"""
LAVAPIPE_LOOP_LIMIT = 65_535  # Mesa's LP_MAX_TGSI_LOOP_ITERATIONS: every loop of a shader, in all


def summing(name: str, step: int) -> Kernel:
    sums = " ".join(f"sum += x[i + {j}u];" for j in range(step))
    return Kernel(name, SUM_BY_ONE.replace("STEP", f"{step}u").replace("SUMS", sums), grid=lambda args: (1, 1, 1))


def test_a_driver_that_ends_long_loops_early_makes_their_candidates_mismatches_not_winners(device):
    """lavapipe ends a shader's loops after 65,535 iterations: a candidate looping 70,000 times
    returns a partial sum (and is faster for it) there, and the checks refuse it; one looping
    35,000 times is right and wins. On another adapter both are right."""
    n = 70_000
    x = np.ones(n, np.float32)
    tunables = TunableSet("sum_by_one", [summing("by_one", 1), summing("by_two", 2)],
                          key=lambda args: {"n": args.params[0]}, outputs=(1,),
                          reference=lambda inputs, params: [np.array([float(params[0])], np.float32)])
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", samples=2, warmups=1))
    args = Args({"x": device.create_buffer(x.tobytes()), "total": device.create_buffer(size=4)}, (n,))
    winner = tuner.execute(tunables, args)
    by_one, by_two = tuner.results(tunables, tunables.key(args))
    assert isinstance(by_two, Measured)
    if "llvmpipe" in device.adapter_info.get("device", ""):
        assert isinstance(by_one, Mismatch) and winner.name == "by_two", by_one
        assert f"{float(LAVAPIPE_LOOP_LIMIT)!r} vs {float(n)!r}" in by_one.reason, by_one.reason
    else:
        assert isinstance(by_one, Measured)
    assert np.frombuffer(device.read_buffer_sync(args.buffers[1]), np.float32)[0] == n


# Writes y at the elements its STRIDE says (every one, or the even ones), VALUE at each.
STRIDED = """
struct P { n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = STRIDE * g.x;
    if (i < p.n) { y[i] = VALUE; }
}
"""


def strided(name: str, stride: int, value: str = "3.0 * x[i]") -> Kernel:
    source = STRIDED.replace("STRIDE", f"{stride}u").replace("VALUE", value) + f"// {name}\n"
    return Kernel(name, source, grid=lambda args: (-(-args.params[0] // (64 * stride)), 1, 1))


@pytest.mark.parametrize(("whole", "winners"), [
    # Two that leave the odd elements unwritten agree there (both keep the poison), and outnumber
    # the one that writes them all: it still wins, since it agrees with them wherever they wrote.
    ("3.0 * x[i]", {"whole"}),
    # One that writes every element, but wrong ones: it does not complete the two, who win.
    ("5.0 * x[i]", {"even_a", "even_b"}),
], ids=["completed", "not-completed"])
def test_candidates_that_leave_the_same_elements_unwritten_do_not_outvote_one_that_writes_them(device, whole,
                                                                                                 winners):
    x = np.random.default_rng(5).standard_normal(N).astype(np.float32)
    candidates = [strided("whole", 1, whole), strided("even_a", 2), strided("even_b", 2)]
    tunables = TunableSet(f"unwritten_{whole[0]}", candidates, key=lambda args: {"n": args.params[0]})
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", samples=2, warmups=1))
    args = Args({"x": device.create_buffer(x.tobytes()), "y": device.create_buffer(size=4 * N)}, (N,))
    assert tuner.execute(tunables, args).name in winners
    results = dict(zip([kernel.name for kernel in candidates], tuner.results(tunables, tunables.key(args)),
                       strict=True))
    for name, result in results.items():
        assert isinstance(result, Measured if name in winners else Mismatch), (name, result)
    if winners == {"whole"}:
        assert f"it left {N // 2} values unwritten (output 'y'" in results["even_a"].reason, results["even_a"]


def test_candidates_that_all_leave_the_same_elements_unwritten_agree_as_before(device):
    """A scatter that leaves elements as they were by design: no candidate writes them all, so none
    is outranked for it (the poison agrees with the poison)."""
    x = np.random.default_rng(6).standard_normal(N).astype(np.float32)
    candidates = [strided("even_a", 2), strided("even_b", 2), strided("even_c", 2)]
    tunables = TunableSet("unwritten_by_design", candidates, key=lambda args: {"n": args.params[0]})
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", samples=2, warmups=1))
    args = Args({"x": device.create_buffer(x.tobytes()), "y": device.create_buffer(size=4 * N)}, (N,))
    tuner.execute(tunables, args)
    assert all(isinstance(result, Measured) for result in tuner.results(tunables, tunables.key(args)))
