"""The README's examples run verbatim and do what they say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_example_runs_verbatim_and_tunes_then_hits(tmp_path):
    example = python_blocks()[0]
    script = tmp_path / "example.py"
    script.write_text(example)
    env = {**os.environ, "WGTUNE_CACHE_DIR": str(tmp_path / "cache"), "WGTUNE_RECORDS": str(tmp_path / "r.jsonl")}
    first = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert re.search(r"ran scale_wg\d+ \(0\.0, 3\.0, 6\.0\)", first.stdout), first.stdout
    second = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stderr
    records = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(records) == 1, "the second run is a cache hit: no new tune, no new record"


def run_block(tmp_path, marker: str) -> str:
    """The README's one Python block that contains ``marker``, run as a script; its output."""
    (example,) = [block for block in python_blocks() if marker in block]
    script = tmp_path / "example.py"
    script.write_text(example)
    env = {**os.environ, "WGTUNE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_override_constants_example_runs_verbatim_and_computes_with_its_values(tmp_path):
    out = run_block(tmp_path, "override WORKGROUP_SIZE")
    ran = r"ran scale_wg(64|128|256) \{'WORKGROUP_SIZE': \d+, 'scale': 3\.0\} \(0\.0, 3\.0, 6\.0\)"
    assert re.search(ran, out), out


def test_the_parameter_space_example_runs_verbatim_and_tunes_its_candidates(tmp_path):
    out = run_block(tmp_path, "axpy = wgtune.TunableSet")
    assert re.search(r"^8 candidates; ran axpy\[WG=\d+,PER_THREAD=\d\] \(1\.0, 3\.0, 5\.0\)$", out, re.M), out


def test_the_per_key_search_example_runs_verbatim_and_measures_its_budget(tmp_path):
    out = run_block(tmp_path, "wgtune.Search(")
    assert re.search(r"^ran scale\[WG=\d+,PER_THREAD=\d\]: 10 of 30 measured; \(0\.0, 3\.0, 6\.0\)$", out, re.M), out


def test_the_bindings_example_runs_verbatim_and_every_two_pass_candidate_meets_the_reference(tmp_path):
    out = run_block(tmp_path, "two_pass_sum")
    assert re.search(r"^ran sum_wg\d+ 500000\.0 \['Measured', 'Measured', 'Measured'\]$", out, re.M), out


def test_the_batch_example_runs_verbatim_and_keeps_the_order_of_its_launches(tmp_path):
    out = run_block(tmp_path, "tuner.batch()")
    assert out.strip() == "(51.0, 51.0, 51.0)", out  # 1.0, then x -> (2x + 1) / 2 a hundred times


def test_every_python_block_of_the_readme_is_run_by_a_test():
    assert len(python_blocks()) == 6, "a new README example needs its test here"
