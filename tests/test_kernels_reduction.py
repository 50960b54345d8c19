"""The reduction family on the real adapter (lavapipe here): every candidate of both sets, odd
shapes, the plan's regimes, and a tune of each set.

Each candidate is compiled and dispatched directly, without the tuner, on a call of just
``(x, out)``, so that a wrong candidate fails here by name. Sums are checked exactly: inputs are
multiples of 1/8 of magnitude at most 1, whose f32 sums are exact in any order at these sizes.
The output starts as NaN and carries a guard region past the end (a store out of bounds shows);
x is followed by NaNs (a load past the end that reaches an output shows). The two-pass
candidates' partials are in scratch the device makes: it must be exactly the size the candidate
declares, and hold every chunk's partial result after the dispatch.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from kernel_checks import tune_checked

import wgtune
from wgtune import Args, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.gpu.device import check_grid, check_limits
from wgtune.kernels import reduction
from wgtune.sets.bindings import binding_plan
from wgtune.tune.plan import Plan

GUARD = 64  # f32 words after the output, which no candidate may write
SENTINEL = np.float32(-12345.0)

SUM = reduction.reduction_set("sum")
MAX = reduction.reduction_set("max")
SETS = {"sum": SUM, "max": MAX}
SHAPES = [(1, 1), (1, 4099), (7, 33), (33, 7), (5, 1030), (1, 70001), (300, 129), (3, 0)]
CANDIDATES = [(op, name) for op, tunables in SETS.items() for name in tunables.index_of]


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


@pytest.fixture(scope="module")
def pipelines(device):
    cache: dict[int, object] = {}

    def get(kernel: wgtune.Kernel):
        if id(kernel) not in cache:
            cache[id(kernel)] = run_inline(device.compile(kernel))
        return cache[id(kernel)]

    return get


def _guarded(device, count: int):
    """``count`` NaNs followed by the guard region."""
    data = np.concatenate([np.full(count, np.nan, np.float32), np.full(GUARD, SENTINEL, np.float32)])
    return device.create_buffer(data.tobytes())


def _run(device, pipelines, kernel: wgtune.Kernel, x: np.ndarray) -> np.ndarray:
    """Dispatch ``kernel`` (every stage) once on ``x``, buffers ``(x, out)`` only; return ``out``
    after checking its guard and, for a two-pass candidate, its partials (:func:`_check_partials`)."""
    rows, cols = x.shape
    buffers = (
        device.create_buffer(np.concatenate([x.ravel(), np.full(GUARD, np.nan, np.float32)]).tobytes()),
        _guarded(device, rows),
    )
    args = Args(buffers, (rows, cols))
    grid = tuple(kernel.grid(args))
    for stage in kernel.stages:
        assert check_grid(tuple(stage.grid(args)), device.limits) is None
    device.dispatch(pipelines(kernel), args, grid)
    out = np.frombuffer(device.read_buffer_sync(buffers[1]), np.float32)
    assert np.all(out[rows:] == SENTINEL), f"{kernel.name} wrote past the end of out"
    _check_partials(device, kernel, args, x)
    return out[:rows]


def _scratch_made(args: Args) -> dict[tuple, object]:
    """The scratch buffers the device made for the call, by their ``args.cache`` key
    ``("scratch", name, bytes)``."""
    return {key: value for key, value in args.cache.items() if isinstance(key, tuple) and key[0] == "scratch"}


def _check_partials(device, kernel: wgtune.Kernel, args: Args, x: np.ndarray) -> None:
    """A two-pass candidate's scratch is exactly the size it declares, ``scratch_elements(rows,
    cols, chunk)`` f32, and after the dispatch holds each chunk's result (row after row); one-pass
    and pack candidates get no scratch at all."""
    variant, made = _variant(kernel), _scratch_made(args)
    if variant.layout != "split":
        assert made == {}, f"{kernel.name} declares no scratch, yet the device made {list(made)}"
        return
    rows, cols = x.shape
    size = 4 * reduction.scratch_elements(rows, cols, variant.chunk)
    assert list(made) == [("scratch", reduction.SCRATCH, size)], kernel.name
    buffer = made[("scratch", reduction.SCRATCH, size)]
    assert buffer.size == size, f"{kernel.name}: scratch of {buffer.size} bytes, {size} declared"
    want = _chunk_results(x, variant, "max" if kernel in MAX.candidates else "sum")
    got = np.frombuffer(device.read_buffer_sync(buffer), np.float32)[: want.size]
    np.testing.assert_array_equal(got, want, err_msg=f"{kernel.name}: the partials in its scratch")


def _chunk_results(x: np.ndarray, variant: reduction.ReductionVariant, op: str) -> np.ndarray:
    """What stage 1 of a split candidate writes: each row's chunks of ``variant.chunk`` elements
    reduced, row after row. A masked one leaves the tail of x (past its last whole vec4) to stage
    2: stage 1 reads it as the op's identity."""
    rows, cols = x.shape
    flat = x.astype(np.float64).ravel()
    if variant.masked:
        flat[rows * cols // 4 * 4:] = 0.0 if op == "sum" else -np.inf
    reduce = np.sum if op == "sum" else np.max
    chunks = -(-cols // variant.chunk)
    return np.array([reduce(flat[r * cols + c * variant.chunk: r * cols + min(cols, (c + 1) * variant.chunk)])
                     for r in range(rows) for c in range(chunks)], np.float32)


def _variant(kernel: wgtune.Kernel) -> reduction.ReductionVariant:
    return reduction.REDUCTION_VARIANTS[SUM.index_of[kernel.name]]


def _width(kernel: wgtune.Kernel) -> int:
    """The multiple of 4 that cols must be for ``kernel``: 4 for plain vec4 loads, 1 for f32 and
    masked vec4 loads (which serve any cols)."""
    variant = _variant(kernel)
    return 4 if variant.width == 4 and not variant.masked else 1


# lavapipe (Mesa 22.3's llvmpipe) stops an invocation's loops, silently, after 65535 iterations
# in total (its guard against endless loops), so there a candidate is right only while each
# invocation loops fewer times. Real GPUs have no such cap.
LLVMPIPE_LOOP_CAP = 65535


def _loop_iterations(op: str, name: str, rows: int, cols: int) -> int:
    """An upper bound on the loop iterations of one invocation of candidate ``name`` (all stages)."""
    variant = reduction.REDUCTION_VARIANTS[SETS[op].index_of[name]]
    count = cols // variant.width
    step = variant.unroll * (variant.g if variant.layout == "pack" else variant.workgroup)
    if variant.layout == "split":
        count = variant.chunk // variant.width
    iterations = count // step + variant.unroll + 2  # the unrolled loop, its tail, the subgroup step
    if variant.layout == "split":
        iterations += -(-cols // variant.chunk) // variant.workgroup + 3  # stage 2
    return iterations


def _capped(device, op: str, name: str, rows: int, cols: int) -> bool:
    """Whether lavapipe's loop cap would cut this run short."""
    return "llvmpipe" in device.identity.device and _loop_iterations(op, name, rows, cols) > LLVMPIPE_LOOP_CAP


def _eighths(rng, shape) -> np.ndarray:
    """Nonzero multiples of 1/8 in [-1, 1]: f32 sums of them are exact (partials stay far below 2**21)."""
    values = rng.integers(1, 9, shape) * rng.choice([-1, 1], shape) / 8
    return values.astype(np.float32)


@pytest.mark.parametrize(("op", "name"), CANDIDATES, ids=[f"{op}-{name}" for op, name in CANDIDATES])
def test_candidate_matches_numpy_on_odd_shapes(device, pipelines, op, name):
    """Plain vec4 candidates run on cols rounded up to a multiple of 4: the plan never gives them
    others. Masked ones run on the odd shapes themselves."""
    kernel = SETS[op].candidates[SETS[op].index_of[name]]
    width = _width(kernel)
    for rows, base_cols in SHAPES:
        cols = -(-base_cols // width) * width
        if _capped(device, op, name, rows, cols):  # only pack_f32(x4)_g1_* on 1 x 70001
            assert name.startswith(("pack_f32_g1_", "pack_f32x4_g1_")) and cols == 70001
            continue
        rng = np.random.default_rng(rows * 100_003 + cols)
        x = _eighths(rng, (rows, cols)) if op == "sum" else rng.uniform(-1, 1, (rows, cols)).astype(np.float32)
        got = _run(device, pipelines, kernel, x)
        want = x.astype(np.float64).sum(axis=1) if op == "sum" else x.max(axis=1) if cols else np.full(rows, -np.inf)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} on {rows}x{cols}")


@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_subgroup_a_row_deals_the_rows_out_in_rounds_where_the_grid_is_short(device, pipelines, op, monkeypatch):
    # The grid is sized for subgroups of SUBGROUP_GRID; where the device's are smaller (Intel's) or
    # larger (AMD's), the rows are dealt out over more rounds or some subgroups idle. Sized here for
    # subgroups of 1, the grid is far too short for the adapter's, and rounds must cover every row.
    monkeypatch.setattr(reduction, "SUBGROUP_GRID", 1)
    for variant in (reduction.ReductionVariant("subgroup", 128, width=4, unroll=4, combine="sg"),
                    reduction.ReductionVariant("subgroup", 256, unroll=4, combine="sg")):  # as in the set
        kernel = reduction.reduction_kernel(op, variant)
        rows, cols = 1000, 36
        assert kernel.grid(Args((), (rows, cols)))[0] * variant.workgroup < 4 * rows  # fewer invocations than rows x 4
        rng = np.random.default_rng(rows + cols)
        x = _eighths(rng, (rows, cols))
        got = _run(device, pipelines, kernel, x)
        want = x.astype(np.float64).sum(axis=1) if op == "sum" else x.max(axis=1)
        np.testing.assert_array_equal(got, want, err_msg=variant.name)


@pytest.mark.parametrize("name", list(MAX.index_of))
def test_max_candidate_handles_negative_rows_and_infinities(device, pipelines, name):
    kernel = MAX.candidates[MAX.index_of[name]]
    cols = 40 if _width(kernel) == 4 else 37
    rng = np.random.default_rng(cols)
    x = -rng.uniform(1, 1000, (5, cols)).astype(np.float32)  # all negative
    x[1, :] = -np.inf
    x[2, ::3] = -np.inf
    x[3, 17] = np.inf
    x[4, cols - 1] = -0.5  # the maximum is the last element
    got = _run(device, pipelines, kernel, x)
    np.testing.assert_array_equal(got, x.max(axis=1))


@pytest.mark.parametrize("op", ["sum", "max"])
def test_masked_candidates_read_the_tail_past_the_last_whole_vec4_of_an_exact_buffer(device, pipelines, op):
    """x exactly rows * cols f32 (no guard after it): where that is no multiple of 4 the vec4
    binding ends before the last elements, which the candidate's last stage reads as f32. The
    largest value of each row sits in its last column, so a candidate that drops the tail fails."""
    tunables = SETS[op]
    masked = [kernel for kernel in tunables.candidates if _variant(kernel).masked]
    assert masked
    for rows, cols in [(1, 7), (3, 5), (2, 4099), (5, 1), (4, 1)]:
        assert tunables.key(Args((), (rows, cols))).as_dict()["vec"] == 1
        x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 8
        want = x.astype(np.float64).sum(axis=1) if op == "sum" else x.max(axis=1)
        for kernel in masked:
            buffers = (device.create_buffer(x.tobytes()), _guarded(device, rows))
            args = Args(buffers, (rows, cols))
            device.dispatch(pipelines(kernel), args, tuple(kernel.grid(args)))
            out = np.frombuffer(device.read_buffer_sync(buffers[1]), np.float32)
            assert np.all(out[rows:] == SENTINEL), kernel.name
            np.testing.assert_array_equal(out[:rows], want, err_msg=f"{kernel.name} on {rows}x{cols}")
            _check_partials(device, kernel, args, x)


def test_two_pass_candidates_wrap_their_grid_and_stay_right(device, pipelines):
    """40000 rows need more workgroups than one grid dimension holds (one-pass, stage 1 and 2)."""
    rows, cols = 40_000, 12
    rng = np.random.default_rng(7)
    x = _eighths(rng, (rows, cols))
    for tunables in (SUM, MAX):
        for kernel in (tunables.candidates[0], tunables.candidates[tunables.index_of["split_f32_wg256_c4096_tree"]]):
            assert all(stage.grid(Args((), (rows, cols)))[1] > 1 for stage in kernel.stages)
            got = _run(device, pipelines, kernel, x)
            want = x.astype(np.float64).sum(axis=1) if tunables is SUM else x.max(axis=1)
            np.testing.assert_array_equal(got, want, err_msg=kernel.name)


def test_grids_fit_the_per_dimension_limit_for_huge_shapes():
    defaults = wgtune.DeviceLimits()
    for rows, cols in [(2**30, 1), (2**26, 16), (1, 2**30), (2**14, 2**16)]:
        for kernel in SUM.candidates:
            for stage in kernel.stages:
                assert check_grid(tuple(stage.grid(Args((), (rows, cols)))), defaults) is None, (stage.name, rows)


@pytest.mark.parametrize("kernel", [stage for k in SUM.candidates + MAX.candidates for stage in k.stages],
                         ids=lambda kernel: kernel.name)
def test_declared_workgroup_storage_and_size_match_the_wgsl(kernel):
    declared = re.findall(r"var<workgroup>\s+\w+\s*:\s*array<f32,\s*(\d+)>", kernel.wgsl)
    assert kernel.workgroup_storage == 4 * sum(int(count) for count in declared)
    size = re.search(r"@workgroup_size\((\d+),\s*(\d+),\s*(\d+)\)", kernel.wgsl)
    assert tuple(int(n) for n in size.groups()) == kernel.workgroup_size
    uses_subgroups = bool(re.search(r"\bsubgroup[A-Z]", kernel.wgsl))
    assert uses_subgroups == ("subgroups" in kernel.features)


def test_the_set_is_sized_distinct_and_candidate_0_is_the_plain_default():
    for tunables in (SUM, MAX):
        assert 20 <= len(tunables) <= 44  # 44 with four candidates of a subgroup a row
        assert len({"".join(stage.wgsl for stage in kernel.stages) for kernel in tunables.candidates}) == len(tunables)
        assert any(_variant(kernel).masked for kernel in tunables.candidates)
        first = tunables.candidates[0]
        assert first.name == "row_f32x4_wg256_tree" and first.group is None and not first.features
        assert check_limits(first, wgtune.DeviceLimits(), frozenset()) is None  # fits WebGPU's defaults
    assert (SUM.name, MAX.name) == ("row_sum", "row_max")
    assert (MAX.atol, MAX.rtol) == (0.0, 0.0)
    assert SUM.checksum != MAX.checksum


def test_exactly_the_subgroup_candidates_carry_the_directive():
    for kernel in SUM.candidates + MAX.candidates:
        for stage in kernel.stages:
            assert ("enable subgroups;" in stage.wgsl) == ("subgroups" in stage.features), stage.name


def test_key_buckets_sizes_and_records_what_vec4_loads_can_do():
    assert SUM.key(Args((), (300, 129))).as_dict() == {"rows": 512, "cols": 256, "op": "sum", "vec": 1,
                                                        "dtype": "f32"}
    assert MAX.key(Args((), (1, 1 << 22))).as_dict() == {"rows": 1, "cols": 1 << 22, "op": "max", "vec": 4,
                                                          "dtype": "f32"}
    assert SUM.key(Args((), (1, 3))).as_dict()["vec"] == 0  # no whole vec4 in x
    assert SUM.key(Args((), (2, 3))).as_dict()["vec"] == 1


@pytest.mark.parametrize("shape", [(16384, 1024), (300, 129), (1, 1 << 22), (64, 1 << 16), (1 << 14, 1 << 14),
                                   (5, 1030), (1, 4099), (1, 3), (1_000_000, 7)])
def test_plan_measures_one_regime_with_candidate_0_and_only_candidates_that_serve_the_cols(shape):
    """Plain vec4 candidates are skipped where rows do not start on a vec4, masked ones where
    they do (the same loads without the masks serve) and where x holds no whole vec4."""
    rows, cols = shape
    key = SUM.key(Args((), shape))
    plan = Plan(SUM.candidates, key)
    skipped = set(plan.skipped)
    for index, kernel in enumerate(SUM.candidates):
        variant = _variant(kernel)
        long_rows = variant.layout == "pack" and wgtune.anchor(cols) > reduction.MULTI_ROW_SKIP_COLS
        plain_misfit = variant.width == 4 and cols % 4 != 0
        cannot = (cols % 4 == 0 or rows * cols < 4) if variant.masked else plain_misfit
        assert (index in skipped) == (long_rows or cannot), kernel.name
    first = plan.next()
    assert first[0] == 0
    layouts = {SUM.candidates[index].name.split("_")[0] for index in first[1:]}
    if wgtune.anchor(cols) <= reduction.MULTI_ROW_MAX_COLS:
        assert layouts == {"pack"}
    elif wgtune.anchor(rows) <= reduction.TWO_PASS_MAX_ROWS and wgtune.anchor(cols) >= reduction.TWO_PASS_MIN_COLS:
        assert layouts == {"split"}
    else:
        assert layouts == {"row", "subgroup"}  # a workgroup or a subgroup a row: the one-pass group


def test_on_lavapipe_the_plan_measures_only_candidates_clear_of_its_loop_cap():
    """Every shape lavapipe can bind (x up to 2**25 f32): candidate 0 and the first batch stay
    under the cap, so a tune there never measures (nor picks) a candidate it cuts short."""
    for row_bits in range(26):
        for col_bits in range(26 - row_bits):
            rows, cols = 1 << row_bits, 1 << col_bits
            first = Plan(SUM.candidates, SUM.key(Args((), (rows, cols)))).next()
            for index in first:
                name = SUM.candidates[index].name
                assert _loop_iterations("sum", name, rows, cols) <= LLVMPIPE_LOOP_CAP, (name, rows, cols)


def test_variants_reject_what_the_generator_cannot_build():
    with pytest.raises(ValueError, match="chunk"):
        reduction.ReductionVariant("split", 256, width=4, chunk=2048)  # below MIN_CHUNK
    with pytest.raises(ValueError, match="chunk"):
        reduction.ReductionVariant("split", 256, width=4, chunk=4608)  # not a multiple of 256 * 4
    with pytest.raises(ValueError, match="combines"):
        reduction.ReductionVariant("pack", 256, g=8, combine="shuffle")
    with pytest.raises(ValueError, match="power of two"):
        reduction.ReductionVariant("row", 96)
    with pytest.raises(ValueError, match="'subgroup' combines with 'sg'"):
        reduction.ReductionVariant("subgroup", 256, width=4)
    with pytest.raises(ValueError, match="no masked loads"):
        reduction.ReductionVariant("subgroup", 256, width=4, combine="sg", masked=True)
    with pytest.raises(ValueError, match="unknown reduction"):
        reduction.reduction_set("mean")


def test_cpu_references_match_numpy():
    x = [0.5, -2.0, 3.0, -1.0, -4.0, -0.25]
    assert reduction.row_sum_reference(x, 2, 3) == [1.5, -5.25]
    assert reduction.row_max_reference(x, 2, 3) == [3.0, -0.25]
    assert reduction.row_sum_reference([], 2, 0) == [0.0, 0.0]
    assert reduction.row_max_reference([], 1, 0) == [-math.inf]
    assert math.isnan(reduction.row_max_reference([1.0, math.nan], 1, 2)[0])
    rng = np.random.default_rng(3)
    values = rng.uniform(-1, 1, (4, 50))
    np.testing.assert_allclose(reduction.row_sum_reference(list(values.ravel()), 4, 50), values.sum(axis=1))
    np.testing.assert_array_equal(reduction.row_max_reference(list(values.ravel()), 4, 50), values.max(axis=1))


def test_make_reduction_args_builds_seeded_buffers(device):
    args = reduction.make_reduction_args(device, (3, 5000), "sum", seed=1)
    assert args.params == (3, 5000)
    x, out = args.buffers  # no scratch: the two-pass candidates' own
    assert (x.size, out.size) == (4 * 15000, 4 * 3)
    again = reduction.make_reduction_args(device, (3, 5000), "sum", seed=1)
    assert device.read_buffer_sync(x) == device.read_buffer_sync(again.buffers[0])
    other = reduction.make_reduction_args(device, (3, 5000), "sum", seed=2)
    assert device.read_buffer_sync(x) != device.read_buffer_sync(other.buffers[0])
    assert reduction.scratch_elements(0, 0) == 1 and reduction.scratch_elements(2, 4097) == 4
    assert reduction.scratch_elements(2, 4097, chunk=8192) == 2 and reduction.scratch_elements(3, 0, 8192) == 1


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("shape", [(3, 20000), (200, 516)], ids=lambda s: "x".join(map(str, s)))
def test_tune_gives_right_output_and_a_hit(device, op, shape):
    """On (x, out) alone: 3x20000 is the two-pass regime, 200x516 the one-pass one."""
    tunables = SETS[op]
    args = reduction.make_reduction_args(device, shape, op)
    assert len(args.buffers) == 2
    _, trials = tune_checked(device, tunables, args, samples=2)
    key = tunables.key(args)
    assert len(trials) == len(Plan(tunables.candidates, key).order())
    rows, cols = shape
    x = np.frombuffer(device.read_buffer_sync(args.buffers[0]), np.float32).reshape(rows, cols)
    out = np.frombuffer(device.read_buffer_sync(args.buffers[1]), np.float32)
    if op == "sum":
        np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(out, x.max(axis=1))


# -- the call convention: (x, out); the partials are the two-pass candidates' scratch -------------

SPLIT = [name for name in SUM.index_of if name.startswith("split_")]


def test_only_the_two_pass_candidates_declare_scratch_and_out_is_the_one_output():
    for tunables in (SUM, MAX):
        assert tunables.outputs == (1,)
        for kernel in tunables.candidates:
            two_pass = _variant(kernel).layout == "split"
            assert set(kernel.scratch) == ({reduction.SCRATCH} if two_pass else set()), kernel.name
            for stage in kernel.stages:
                assert (reduction.SCRATCH in stage.wgsl) == two_pass, stage.name
            # What a call in order counts, in every candidate: x and out, nothing else.
            assert binding_plan(kernel)[0].candidate.positions == {(0, 0): 0, (0, 1): 1}, kernel.name
    assert len(SPLIT) == 11


@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_two_pass_candidate_needs_no_buffer_of_the_caller_in_order_or_by_name(device, pipelines, op):
    """Every split candidate on a call of (x, out) alone, in order and by name: right, with its
    scratch made by the device at the declared size."""
    tunables = SETS[op]
    rows, cols = 3, 20_003  # 5 chunks of 4096 a row, the last one short
    rng = np.random.default_rng(11)
    for name in SPLIT:
        kernel = tunables.candidates[tunables.index_of[name]]
        cols_here = cols if _width(kernel) == 1 else cols + 1  # plain vec4: cols % 4 == 0
        x_here = _eighths(rng, (rows, cols_here))
        want = x_here.astype(np.float64).sum(axis=1) if op == "sum" else x_here.max(axis=1)
        for by_name in (False, True):
            buffers = (device.create_buffer(x_here.tobytes()), device.create_buffer(size=4 * rows))
            args = Args({"x": buffers[0], "out": buffers[1]} if by_name else buffers, (rows, cols_here))
            device.dispatch(pipelines(kernel), args, tuple(kernel.grid(args)))
            got = np.frombuffer(device.read_buffer_sync(buffers[1]), np.float32)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, {'by name' if by_name else 'in order'}")
            _check_partials(device, kernel, args, x_here)


@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_call_in_order_that_still_gives_a_third_buffer_binds_as_before_and_leaves_it_alone(device, pipelines, op):
    """The old convention, (x, out, scratch): the extra buffer binds nowhere (no candidate
    declares a third buffer of the call), the results are right and its contents unchanged."""
    tunables = SETS[op]
    rows, cols = 5, 9_001
    x = _eighths(np.random.default_rng(5), (rows, cols))
    want = x.astype(np.float64).sum(axis=1) if op == "sum" else x.max(axis=1)
    names = ["row_f32x4_wg256_tree", "row_vec4m_wg128_tree", "split_f32_wg256_c4096_tree",
             "split_vec4m_wg256_c16384_tree", "pack_f32_g8_wg256_tree"]
    for name in names:
        kernel = tunables.candidates[tunables.index_of[name]]
        old_scratch = _guarded(device, reduction.scratch_elements(rows, cols))
        before = device.read_buffer_sync(old_scratch)
        buffers = (device.create_buffer(x.tobytes()), device.create_buffer(size=4 * rows), old_scratch)
        args = Args(buffers, (rows, cols))
        device.dispatch(pipelines(kernel), args, tuple(kernel.grid(args)))
        got = np.frombuffer(device.read_buffer_sync(buffers[1]), np.float32)
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert device.read_buffer_sync(old_scratch) == before, f"{name} wrote the caller's third buffer"
        _check_partials(device, kernel, args, x)
    # Through the tuner too: the output checks find out at index 1, the third buffer is copied along.
    args = Args((device.create_buffer(x.tobytes()), device.create_buffer(size=4 * rows),
                 device.create_buffer(size=4 * reduction.scratch_elements(rows, cols))), (rows, cols))
    tune_checked(device, tunables, args, samples=2)
    got = np.frombuffer(device.read_buffer_sync(args.buffers[1]), np.float32)
    np.testing.assert_array_equal(got, want)  # sums of eighths are exact in any order
