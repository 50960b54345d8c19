"""Running a script on Dawn's Null backend, for the tests that compile WGSL as a browser does.

Dawn reads ``WGPU_BACKEND_TYPE`` when its instance starts, so each script runs in a process of its
own with ``WGPU_BACKEND_TYPE=Null``: its adapter validates every shader and pipeline as Dawn does
(Tint's WGSL checks included) and runs nothing. The script prints one line ``REPORT <json>``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dawn_null_report(script: str, timeout: float = 300) -> dict:
    """The JSON ``script`` printed after ``REPORT `` on Dawn's Null backend; the test fails with
    its stderr's tail when it exits badly or prints no single report."""
    env = dict(os.environ, WGPU_BACKEND_TYPE="Null")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert len(lines) == 1, proc.stdout[-2000:]
    return json.loads(lines[0].removeprefix("REPORT "))
