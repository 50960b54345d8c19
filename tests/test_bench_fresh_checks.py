"""bench/fresh_checks.py: its draws are seeded and bounded, and on lavapipe it tells right, wrong,
failed and refused candidates apart (a wrong one fails the run; a refusal does not)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from wgtune import Kernel, TunableSet
from wgtune.backends.native import NativeDevice
from wgtune.kernels.matmul import matmul_key, naive_matmul_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import fresh_checks

from kernels import matmul_workload


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


@pytest.mark.parametrize("family", list(fresh_checks.FAMILIES))
def test_draws_are_seeded_distinct_and_within_the_work_and_the_binding_limit(family):
    work, binding = 1e8, 1 << 22
    shapes = fresh_checks.draw(family, 12, seed=5, work=work, binding=binding)
    assert shapes == fresh_checks.draw(family, 12, seed=5, work=work, binding=binding)
    assert shapes != fresh_checks.draw(family, 12, seed=6, work=work, binding=binding)
    assert len(set(shapes)) == 12 and all(min(shape) >= 1 for shape in shapes)
    for shape in shapes:
        if family.startswith("matmul"):
            m, n, k = shape
            assert m * n * k <= work and max(m * k, k * n, m * n) * (2 if family == "matmul_f16" else 4) <= binding
        else:
            elements = shape[0] * (shape[1] if len(shape) > 1 else 1)
            assert elements * fresh_checks.ELEMENT_WORK <= work and 4 * elements <= binding


def test_too_tight_a_bound_says_how_many_it_drew():
    with pytest.raises(RuntimeError, match="drew only 1 of 3 fma shapes"):
        fresh_checks.draw("fma", 3, seed=1, work=fresh_checks.ELEMENT_WORK, binding=1 << 20)


def _odd_k_skipper() -> Kernel:
    """The naive kernel, but it writes nothing when K is odd: wrong on half the shapes."""
    naive = naive_matmul_kernel(16, 16)
    source = naive.wgsl.replace("  let col = gid.x;", "  if ((p.k & 1u) == 1u) { return; }\n  let col = gid.x;", 1)
    assert source != naive.wgsl
    return replace(naive, name="skips_odd_k", wgsl=source, group=None, priority=0)


def _too_wide() -> Kernel:
    """The naive kernel on a grid past every device's workgroups per dimension: refused at launch."""
    naive = naive_matmul_kernel(16, 16)
    return replace(naive, name="too_wide", grid=lambda args: (1 << 20, 1, 1), group=None, priority=0)


def _raises() -> Kernel:
    naive = naive_matmul_kernel(16, 16)

    def grid(args):
        raise ValueError("no grid for this call")

    return replace(naive, name="raises", grid=grid, group=None, priority=0)


def test_a_shape_sorts_its_candidates_into_right_wrong_failed_and_refused(device):
    tunables = TunableSet("mixed", [naive_matmul_kernel(16, 16), _odd_k_skipper(), _too_wide(), _raises()],
                          key=matmul_key, outputs=(2,), atol=1e-3, rtol=1e-3)
    compiled: dict = {}
    odd = fresh_checks.check_shape(device, replace(matmul_workload(9, 12, 13), tunables=tunables), compiled)
    assert odd.right == [tunables.candidates[0].name]
    assert list(odd.wrong) == ["skips_odd_k"] and "108 of 108 values off" in odd.wrong["skips_odd_k"]
    assert list(odd.refused) == ["too_wide"] and "65535" in odd.refused["too_wide"]
    assert list(odd.failed) == ["raises"] and "no grid for this call" in odd.failed["raises"]
    even = fresh_checks.check_shape(device, replace(matmul_workload(9, 12, 14), tunables=tunables), compiled)
    assert sorted(even.right) == sorted([tunables.candidates[0].name, "skips_odd_k"]) and not even.wrong
    assert len(compiled) == 4, "each candidate compiled once for both shapes"
    assert 0.0 <= even.closest[0] < 1.0 and even.closest[1] in even.right


def test_the_report_says_how_near_right_outputs_came_to_the_tolerance(monkeypatch, capsys):
    def off_by(share: float):
        def workload_of(n: int):
            workload = fresh_checks.fma_workload(n)
            _code, atol, rtol = workload.tunables.tolerances[0]  # numbers: no call needed

            def expected(inputs):  # every value off by that share of its allowance, the right side of it
                want = workload.expected(inputs)
                return want + share * (atol + rtol * abs(want)) / (1 - share * rtol)

            return replace(workload, expected=expected)

        return workload_of

    for share, verdict in ((0.5, 0), (2.0, 1)):
        monkeypatch.setitem(fresh_checks.FAMILIES, "fma",
                            replace(fresh_checks.FAMILIES["fma"], workload=off_by(share)))
        assert fresh_checks.main(["--seed", "4", "--count", "1", "--only", "fma", "--work", "1e6"]) == verdict
        printed = capsys.readouterr().out
        if verdict == 0:
            assert "closest 0.50 of the tolerance" in printed
            assert "as a share of the tolerance: fma 0.50 (" in printed
        else:
            assert "WRONG" in printed and "closest" not in printed


def test_a_run_prints_every_shape_and_a_summary_and_fails_only_on_a_wrong_candidate(monkeypatch, capsys, tmp_path):
    out = tmp_path / "checks.txt"
    assert fresh_checks.main(["--seed", "4", "--count", "2", "--only", "fma", "--work", "1e6", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("\nfma ") == 2 and "0 wrong, 0 failed" in printed and "seed 4" in printed
    assert out.read_text().splitlines()[-1] == printed.splitlines()[-1]

    def wrong_fma(n: int):
        workload = fresh_checks.fma_workload(n)
        return replace(workload, expected=lambda inputs: workload.expected(inputs) + 1.0)

    monkeypatch.setitem(fresh_checks.FAMILIES, "fma", replace(fresh_checks.FAMILIES["fma"], workload=wrong_fma))
    assert fresh_checks.main(["--seed", "4", "--count", "1", "--only", "fma", "--work", "1e6"]) == 1
    assert "WRONG" in capsys.readouterr().out


def test_the_page_checks_draw_medium_matmuls_within_the_work_and_compute_products_as_the_family_does():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
    import base64

    import numpy as np
    import page_checks

    from wgtune.kernels.families import family_named

    shapes = page_checks.medium_matmuls(10, seed=3, work=2e7)
    assert shapes == page_checks.medium_matmuls(10, seed=3, work=2e7) and len(set(shapes)) == 10
    assert all(257 <= m <= 2048 and 257 <= n <= 2048 and m * n * k <= 2e7 for m, n, k in shapes)
    assert max(k for _, _, k in shapes) > 64, "long K as likely as short: some keys past the flat group"
    with pytest.raises(RuntimeError, match="drew only 0 of 2"):
        page_checks.medium_matmuls(2, seed=3, work=1000)
    family = family_named("matmul")
    recorder = page_checks.RecordingDevice()
    args = family.make_args(recorder, (7, 5, 9))
    inputs = [np.frombuffer(recorder.data[args.buffers[slot]], np.float32).tolist() for slot in (0, 1)]
    want = family.reference(inputs, args.params)  # the family's own pure-Python product
    got = np.frombuffer(base64.b64decode(page_checks.matmul_expected("matmul", (7, 5, 9))), np.float32)
    assert got.shape == (35,) and np.allclose(got, want, rtol=1e-6, atol=1e-6)


def test_dawn_without_a_gpu_adapter_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_info:  # Dawn here has its Null backend only: it runs nothing
        fresh_checks.main(["--dawn", "--count", "1", "--only", "fma"])
    assert exit_info.value.code == 2 and "Dawn found no WebGPU adapter" in capsys.readouterr().err
