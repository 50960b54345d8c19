"""The README's example runs verbatim and does what it says."""

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
    (example,) = python_blocks()
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
