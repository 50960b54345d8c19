"""bench/shapes.py, the shape suite: its lists meet issue 14's counts and classes, and one tiny
shape runs end to end with the oracle rejecting a candidate that is wrong (and fast) on it."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from wgtune import Config, TunableSet
from wgtune.backends.native import NativeDevice
from wgtune.kernels.matmul import MatmulTile, matmul_key, naive_matmul_kernel, tiled_matmul_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import checked_oracle as checked_oracle_module
import held_out
import shape_report
import shapes
from checked_oracle import DUEL_ROUNDS, allowance, checked_oracle, disagreement, duel

GIB = 1 << 30


def test_the_h200_suite_has_the_issues_counts_and_every_class():
    matmul_tags = [tag for *_, tag in shapes.MATMUL_FULL]
    reduction_tags = [tag for *_, tag in shapes.REDUCTION_FULL]
    assert len(shapes.MATMUL_FULL) >= 30 and len(shapes.REDUCTION_FULL) >= 20
    assert {"odd", "small", "skinny", "K-heavy", "rect", "pow2"} <= set(matmul_tags) <= set(shapes.MATMUL_CLASSES)
    assert {"odd", "few-long", "many-short"} <= set(reduction_tags) <= set(shapes.REDUCTION_CLASSES)
    assert len(set(shapes.MATMUL_FULL)) == len(shapes.MATMUL_FULL), "a shape listed twice"
    assert len(set(shapes.REDUCTION_FULL)) == len(shapes.REDUCTION_FULL), "a shape listed twice"
    assert (4096, 4096, 4096, "pow2") in shapes.MATMUL_FULL, "the headline shape of the matmul target"
    assert max(4 * rows * cols for rows, cols, _ in shapes.REDUCTION_FULL) <= GIB, "reduction inputs past 1 GiB"
    # Odd: off every tile (some dimension no multiple of 16, the smallest block); odd row lengths.
    assert all(m % 16 or n % 16 or k % 16 for m, n, k, tag in shapes.MATMUL_FULL if tag == "odd")
    assert all(cols % 2 for _, cols, tag in shapes.REDUCTION_FULL if tag == "odd")


def test_the_default_suite_is_small_and_selects_by_family_and_slice():
    assert len(shapes.MATMUL_SMALL) <= 8 and len(shapes.REDUCTION_SMALL) <= 6
    picked = shapes.suite(False, ("row_max",), shapes.shape_slice("1:3"))
    assert [w.label for w, _ in picked] == [f"{r}x{c}" for r, c, _ in shapes.REDUCTION_SMALL[1:3]]
    assert {w.family for w, _ in picked} == {"row_max"}
    assert len(shapes.suite(False, shapes.FAMILIES, shapes.shape_slice("2"))) == 6
    for bad in ("0", "x", "1:y"):
        with pytest.raises(Exception, match="--shapes"):
            shapes.shape_slice(bad)


def test_disagreement_follows_the_tolerance_and_nan_rules():
    want = np.array([1.0, 100.0, np.inf, np.nan])
    allowed = allowance(want, 1e-3, 1e-3)
    assert disagreement(np.array([1.0005, 100.09, np.inf, np.nan], np.float32), want, allowed) is None
    problem = disagreement(np.array([1.0, 100.2, np.inf, np.nan], np.float32), want, allowed)
    assert problem is not None and problem.startswith("1 of 4 values off; first [1]")
    assert disagreement(np.array([1.0, 100.0, 1e30, np.nan], np.float32), want, allowed) is not None
    assert disagreement(np.array([1.0, 100.0, np.inf, 0.0], np.float32), want, allowed) is not None
    assert disagreement(np.array([np.nan, 100.0, np.inf, np.nan], np.float32), want, allowed) is not None


def fast_when_k_is_odd():
    """The naive kernel that returns at once when K is odd: wrong on such shapes, and the
    fastest candidate there (it does nothing), right on the others."""
    naive = naive_matmul_kernel(16, 16)
    source = naive.wgsl.replace("  let col = gid.x;", "  if ((p.k & 1u) == 1u) { return; }\n  let col = gid.x;", 1)
    assert source != naive.wgsl
    return replace(naive, name="skips_odd_k", wgsl=source, group=None, priority=0)


def small_set() -> TunableSet:
    candidates = [naive_matmul_kernel(16, 16), tiled_matmul_kernel(MatmulTile(16, 16, 16, 1, 1), priority=0),
                  fast_when_k_is_odd()]
    return TunableSet("matmul_wrong_on_odd_k", candidates, key=matmul_key, outputs=(2,), atol=1e-3, rtol=1e-3)


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def test_the_oracle_excludes_a_candidate_wrong_on_the_shape_and_only_there(device):
    compiled: dict = {}
    for k, wrong in ((13, True), (14, False)):
        workload = replace(shapes.matmul_workload(9, 12, k), tunables=small_set())
        args, inputs = workload.make(device)
        found = checked_oracle(device, workload, args, workload.expected(inputs), 2, compiled)
        assert found.fitting == 3
        if wrong:  # it wrote nothing: the NaN the oracle filled the output with is still there
            assert set(found.wrong) == {2} and "108 of 108 values off" in found.wrong[2]
            assert found.best != 2 and math.isinf(found.regret(2))
        else:
            assert found.wrong == {} and set(found.samples) == {0, 1, 2}
    assert len(compiled) == 3, "each candidate compiled once for both shapes"


def test_one_tiny_shape_runs_end_to_end(device):
    workload = replace(shapes.matmul_workload(9, 12, 13), tunables=small_set())
    config = Config(cache=False, log_level="disabled", samples=3, warmups=1)
    row = shapes.measure(device, workload, "odd", config, rounds=2, compiled={})
    assert (row.correct, row.fitting) == (2, 3) and list(row.wrong) == ["skips_odd_k"]
    assert row.oracle_winner in [kernel.name for kernel in workload.tunables.candidates[:2]]
    # wgtune's tune checks its candidates (the default): it never picks the wrong one, whose regret the
    # oracle's check would make infinite.
    assert row.winner != "skips_odd_k" and math.isfinite(row.regret)
    assert row.rate > 0 and row.torch_rate is None and row.tune_s > 0
    # The winner's time counts the host's recording of its launches, measured again alone: a share of it.
    assert row.host_share is not None and 0 < row.host_share < 1
    # The winner in a program's batch loop, by the wall clock: a rate of its own (no torch here: no ratio).
    assert row.batch_rate is not None and row.batch_rate > 0 and row.versus_batch is None
    assert row.batch_host is not None and row.batch_host > 0
    line = shape_report.row_line(row)
    assert line.startswith("matmul  9x12x13") and line.split()[-4] == "2/3"
    assert line.split()[-2:] == [shape_report.scaled(row.batch_rate, row.unit), "-"]
    # A regret over the limit (on a busy machine a two-round oracle may see one) is dueled, and shown.
    assert (row.duel is not None) == (row.regret > shape_report.REGRET_LIMIT)
    assert line.split()[-3] == shape_report.percent(row.duel, sign=True)
    summary = "\n".join(shape_report.summary([row]))
    assert "matmul: vs torch - (torch has no CUDA GPU here)" in summary
    assert "1 wrong candidates on 1 shapes" in summary
    assert "the host's recording of a launch: a median" in summary


def test_a_pick_over_the_limit_is_dueled_against_the_oracles_winner_and_the_summary_counts_both(device):
    workload = replace(shapes.matmul_workload(9, 12, 14), tunables=small_set())
    args, inputs = workload.make(device)
    found = checked_oracle(device, workload, args, workload.expected(inputs), 2, {})
    assert set(found.pipelines) == {0, 1, 2} and found.best is not None
    loser = next(index for index in (0, 1, 2) if index != found.best)
    measured = duel(device, found, loser, args, rounds=3)
    assert measured is not None and measured > -1 and math.isfinite(measured)
    assert duel(device, found, found.best, args) is None  # the winner has no one to duel

    def row(shape: str, regret: float, dueled: float | None) -> shape_report.Row:
        return shape_report.Row("matmul", shape, "held:general", "GFLOP/s", "w", 1.0, 90.0, 100.0, 50.0, "v",
                                regret, 0.01, 3, 3, {}, dueled)

    rows = [row("1x2x3", 0.0, None), row("4x5x6", 0.05, 0.01), row("7x8x9", 0.04, 0.03)]
    assert shape_report.row_line(rows[1]).split()[-3] == "+1.0%"
    summary = "\n".join(shape_report.summary(rows))
    assert "run: regret <= 2% on 1/3 shapes (33%; target >= 95%: MISSED)" in summary
    assert "run: after the duels <= 2% on 2/3 shapes (67%; target >= 95%: MISSED)" in summary
    assert f"after the duels (2 picks over the limit, each against the oracle's winner over {DUEL_ROUNDS} rounds): " \
           "regret <= 2% on 2/3 shapes (67%); the duels' regrets +1.0%, +3.0%" in summary


def test_a_spread_duel_times_the_pair_on_the_calls_buffers_and_copies_and_the_summary_counts_it(device):
    workload = replace(shapes.matmul_workload(9, 12, 14), tunables=small_set())
    args, inputs = workload.make(device)
    found = checked_oracle(device, workload, args, workload.expected(inputs), 2, {})
    loser = next(index for index in (0, 1, 2) if index != found.best)
    timed: list[tuple] = []
    real = checked_oracle_module.oracle

    def counting(device, pipelines, args, rounds):
        timed.append(tuple(args.buffers))
        return real(device, pipelines, args, rounds)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checked_oracle_module, "oracle", counting)
        measured = duel(device, found, loser, args, rounds=3, copies=2)
    assert measured is not None and math.isfinite(measured)
    assert len(timed) == 3 and timed[0] == tuple(args.buffers)  # the call's own buffers, then two sets of copies
    assert len({buffer for buffers in timed for buffer in buffers}) == 3 * len(args.buffers)

    def row(shape: str, regret: float, dueled: float | None, spread: float | None) -> shape_report.Row:
        return shape_report.Row("matmul", shape, "held:general", "GFLOP/s", "w", 1.0, 90.0, 100.0, 50.0, "v",
                                regret, 0.01, 3, 3, {}, dueled, spread)

    rows = [row("1x2x3", 0.0, None, None), row("4x5x6", 0.05, 0.04, 0.01), row("7x8x9", 0.04, 0.03, 0.05)]
    summary = "\n".join(shape_report.summary(rows))
    assert "run: after the duels <= 2% on 1/3 shapes (33%; target >= 95%: MISSED)" in summary
    assert "run: after the duels on several sets of buffers <= 2% on 2/3 shapes (67%; target >= 95%: MISSED)" \
        in summary
    assert "2 sets of copies" in summary and "their regrets +1.0%, +5.0%" in summary


def test_a_held_out_draw_is_added_to_the_fixed_shapes_seeded_and_in_every_class():
    picked = shapes.suite(False, ("matmul",), slice(None), draw=6, seed=41)
    fixed, held = picked[:len(shapes.MATMUL_SMALL)], picked[len(shapes.MATMUL_SMALL):]
    assert [tag for _, tag in fixed] == [tag for *_, tag in shapes.MATMUL_SMALL]
    assert sorted(tag for _, tag in held) == ["held:flat", "held:flat", "held:general", "held:general",
                                             "held:thin", "held:thin"]
    again = shapes.suite(False, ("matmul",), slice(None), draw=6, seed=41)
    assert [w.label for w, _ in again] == [w.label for w, _ in picked], "a seed draws the same shapes"
    other = shapes.suite(False, ("matmul",), slice(None), draw=6, seed=42)
    assert [w.label for w, _ in other][len(fixed):] != [w.label for w, _ in held]
    for workload, tag in held:  # each shape is of the class its tag names
        m, n, k = (int(side) for side in workload.label.split("x"))
        assert tag == "held:" + held_out.matmul_class(m, n, k, small=True)
    reductions = shapes.suite(False, ("row_sum",), slice(0), draw=3, seed=41)
    assert len(reductions) == 3 and all(tag in ("held:narrow", "held:wide") for _, tag in reductions)


def test_the_summary_holds_the_held_out_draw_to_issue_29s_targets_apart_from_the_fixed_suite():
    def row(tag: str, versus: float) -> shape_report.Row:
        return shape_report.Row("matmul", "64x4096x4096", tag, "GFLOP/s", "w", 1.0, versus * 100.0, 100.0, 50.0,
                                "w", 0.0, 0.0, 3, 3, {})

    rows = [row("odd", 0.91), row("held:thin", 0.85), row("held:flat", 0.93), row("held:general", 0.97)]
    summary = "\n".join(shape_report.summary(rows))
    fixed, held = summary.split("the held-out draw")
    assert "issue 14's targets" in fixed and "median 91.0% (target >= 90%: met)" in fixed
    assert "issue 29's targets" in held and "median 93.0% (target >= 95%: MISSED)" in held
    assert "held:thin 85.0% (target >= 90%: MISSED)" in held and "held:flat 93.0% (target >= 90%: met)" in held
    assert "vs torch's CUDA graph median 186.0%" in held  # twice: the graph rate is half


def test_the_summary_gives_the_ratios_by_gpu_time_alone_where_the_host_share_is_known():
    """A winner's rate counts its launches' host recording (what a batch pays); torch's events around its
    loop count only the GPU's time while the GPU is the slower side: the summary says both."""
    def row(shape: str, versus: float, share: float | None) -> shape_report.Row:
        return shape_report.Row("matmul", shape, "held:general", "GFLOP/s", "w", 1.0, versus * 100.0, 100.0, 50.0,
                                "w", 0.0, 0.0, 3, 3, {}, host_share=share)

    rows = [row("1x2x3", 0.738, 0.10), row("4x5x6", 0.7695, 0.05), row("7x8x9", 0.90, 0.10)]
    assert [round(r.versus_gpu, 3) for r in rows] == [0.82, 0.81, 1.0]
    summary = "\n".join(shape_report.summary(rows))
    assert "min 73.8% at 1x2x3 (target none under 80%: 2 of 3 under)" in summary  # the rate as before
    assert ("  the host's recording of a launch: a median 10.0% of the winners' time (their rates count it, as a "
            "pass recorded in full pays it); by GPU time alone vs torch median 82.0%, min 81.0% at 4x5x6, "
            "0 of 3 under 80%") in summary
    unknown = "\n".join(shape_report.summary([row("1x2x3", 0.72, None)]))
    assert "host's recording" not in unknown  # no timestamps: the wall clock counts both as one
    no_torch = replace(rows[0], torch_rate=None, torch_graph_rate=None)
    alone = "\n".join(shape_report.summary([no_torch]))
    assert "the host's recording of a launch: a median 10.0% of the winners' time (their rates count it, as a " \
           "pass recorded in full pays it)\n" in alone


def test_the_summary_sets_the_batch_loops_rates_beside_torchs_plain_loop():
    def row(shape: str, batch_rate: float | None, host: float | None = None) -> shape_report.Row:
        return shape_report.Row("matmul", shape, "held:general", "GFLOP/s", "w", 1.0, 70.0, 100.0, 50.0,
                                "w", 0.0, 0.0, 3, 3, {}, batch_rate=batch_rate, batch_host=host)

    rows = [row("1x2x3", 78.0, 0.95), row("4x5x6", 95.0, 0.855), row("7x8x9", 120.0, 0.5), row("9x9x9", None)]
    assert [r.versus_batch for r in rows] == [0.78, 0.95, 1.2, None]
    summary = "\n".join(shape_report.summary(rows))
    assert ("  a program's tuner.batch() loop of the winners (wall clock, the GPU running while the host records) "
            "against their rates above: a median 1.36x, 1.11-1.71x; the host's part of the loop's time a median 85.5%, "
            "over 90% on 1 of 3 shapes\n"
            "  the batch loop vs torch's plain loop: median 95.0%, min 78.0% at 1x2x3, 1 of 3 under 80%") in summary
    assert "batch() loop" not in "\n".join(shape_report.summary([row("1x2x3", None)]))
    assert shape_report.row_line(rows[2]).split()[-2:] == ["0.0", "120.0%"]  # rates in G: 120 of them is 0.0


def test_given_shapes_replace_the_lists_and_are_held_to_issue_29s_targets_by_class():
    given = [shapes.matmul_shape("1668x189x1090"), shapes.matmul_shape("17X5794x2066")]
    assert given == [(1668, 189, 1090), (17, 5794, 2066)]
    picked = shapes.suite(True, shapes.FAMILIES, slice(None), draw=30, seed=1, given=given)
    assert [(w.label, tag) for w, tag in picked] == [("1668x189x1090", "given:general"), ("17x5794x2066", "given:thin")]
    assert shapes.suite(True, ("row_sum",), given=given) == [], "given shapes are matmul's"
    for bad in ("3x4", "0x5x6", "axbxc"):
        with pytest.raises(Exception, match="matmul shape"):
            shapes.matmul_shape(bad)

    def row(tag: str, versus: float) -> shape_report.Row:
        return shape_report.Row("matmul", "17x5794x2066", tag, "GFLOP/s", "w", 1.0, versus * 100.0, 100.0, 50.0,
                                "w", 0.0, 0.0, 3, 3, {})

    summary = "\n".join(shape_report.summary([row("given:thin", 0.85), row("given:general", 0.97)]))
    assert "the given shapes against issue 29's targets" in summary and "fixed suite" not in summary
    assert "given:thin 85.0% (target >= 90%: MISSED)" in summary and "given:general 97.0% /" in summary


def test_the_compiler_is_chosen_on_the_command_line_and_one_that_cannot_open_is_a_clear_error(monkeypatch, capsys):
    with pytest.raises(SystemExit) as stopped:
        shapes.main(["--shape", "9x12x13", "--unchecked"])
    assert stopped.value.code == 2 and "--unchecked is for --dawn" in capsys.readouterr().err
    from wgtune.backends.dawn import DawnDevice
    from wgtune.errors import ConfigError

    opened = []

    def dawn_open(**options):
        opened.append(options)
        raise ConfigError("Dawn found no WebGPU adapter")

    monkeypatch.setattr(DawnDevice, "open", dawn_open)
    for flags, robust in ((["--dawn"], True), (["--dawn", "--unchecked"], False)):
        with pytest.raises(SystemExit) as stopped:
            shapes.main(["--shape", "9x12x13", *flags])
        assert stopped.value.code == 2, flags
        assert capsys.readouterr().err == "shapes.py: Dawn found no WebGPU adapter\n"  # one line, no traceback
        assert opened.pop() == {"runtime_checks": robust}
    assert type(shapes.open_device()) is NativeDevice
    assert [shapes.compiler_name(*flags) for flags in ((False, False), (True, False), (True, True))] == [
        "wgpu-native", "Dawn", "Dawn, robustness off"]
