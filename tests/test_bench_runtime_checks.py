"""bench/runtime_checks.py: each candidate timed with and without runtime checks in one run, and
the report of where a set's choice lost."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wgtune.backends.native import NativeDevice
from wgtune.kernels.bandwidth import fma_set
from wgtune.kernels.matmul import matmul_set
from wgtune.kernels.matmul.tiles import R, T

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import kernel_probe
import runtime_checks
from kernel_probe import fma_problem, matmul_problem


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


@pytest.fixture(autouse=True)
def no_slow_cutoff(monkeypatch):
    """Every candidate sampled: the probe's cutoff for a slow first run is a timing margin, which
    a loaded machine (a CPU adapter sharing two cores) crosses at random."""
    monkeypatch.setattr(kernel_probe, "SLOW", float("inf"))


def row(name: str, on: float | None, off: float | None, set_checks: bool) -> dict:
    return {"candidate": name, "on": on, "off": off, "set_checks": set_checks}


def test_the_report_names_the_choices_that_lost_past_the_margin_near_the_best_only(capsys):
    shapes = {
        "A": [row("fast_unchecked", 100.0, 110.0, False),   # unchecked and faster so: right
              row("slow_unchecked", 100.0, 90.0, False),    # unchecked but 10% slower: lost
              row("right_checked", 95.0, 90.0, True),       # checked and faster so: right
              row("far_behind", 10.0, 5.0, False),          # lost, but never near the best: not counted
              row("wrong_once", None, 100.0, False)],       # one form slow or wrong: left out
        "B": [row("slow_unchecked", 100.0, 99.0, False),    # within the 2% margin: not a loss
              row("wrong_checked", 100.0, 104.0, True)],    # checked but unchecked is 4% faster: lost
    }
    runtime_checks.report("matmul", shapes, margin=0.02)
    out = capsys.readouterr().out
    lost = out.split("lost by over 2%")[1]
    assert "slow_unchecked" in lost and "A 0.900" in lost and "B 0.990" not in lost
    assert "wrong_checked" in lost and "B 1.040" in lost
    assert "far_behind" not in out and "wrong_once" not in out and "right_checked " not in lost
    assert "slow_unchecked                                    2 shapes  median 0.945" in out


def test_every_planned_candidate_is_timed_both_ways_with_its_sets_choice(device):
    # A few of the set's tiles, one of them compiled with checks (tiles.CHECKED): the whole set's 77 planned
    # candidates, each compiled both ways, took 171 s on a loaded machine.
    tunables = matmul_set((T(64, 64, 8, 8, 8, double=True, strided=True), T(64, 32, 16, 4, 4, pad=4, strided=True),
                           R(4, 8)))
    problem = matmul_problem(device, tunables, 33, 65, 64)
    rows = runtime_checks.pair(device, problem, {}, samples=1, min_sample=1e-4)
    names = {kernel.name: kernel.runtime_checks for kernel in tunables.candidates}
    assert len(rows) == 4 and all(r["set_checks"] == names[r["candidate"]] for r in rows)  # the naive kernel too
    timed = [r for r in rows if r["on"] and r["off"]]
    assert timed and all(r["on"] > 0 and r["off"] > 0 for r in timed)
    assert any(not r["set_checks"] for r in rows) and any(r["set_checks"] for r in rows)


def test_the_fma_family_is_timed_both_ways_and_checked_against_its_reference(device):
    tunables = fma_set()
    problem = fma_problem(device, tunables, 65_537)  # odd: the f32 candidates and the vec4 ones with a tail
    assert problem.output == 2 and problem.regime == "vec=1"
    rows = runtime_checks.pair(device, problem, {}, samples=1, min_sample=1e-4)
    planned = {k.name for k in tunables.candidates if k.name.startswith("f32") or k.name.endswith("_tail")}
    assert {r["candidate"] for r in rows} == planned and any(name.endswith("_tail") for name in planned)
    assert all(r["on"] and r["off"] for r in rows)  # every one right both ways (a wrong output is None)
