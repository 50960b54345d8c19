"""The JavaScript `anchor` (web/anchor.js) rounds as Python's `wgtune.anchor` does, so a key an app
writes in JavaScript names the same buckets as one written in Python."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from wgtune import anchor

WEB = Path(__file__).resolve().parent.parent / "web"
CASES = [(x, {}) for x in (0, 1, 2, 3, 5, 1000, 1024, 1025, 3001, 2**29 - 1, 2**29 + 1, 2**52)]
CASES += [(3000, {"max": 2048}), (3, {"min": 8}), (10, {"base": 4}), (100, {"base": 10, "max": 50})]


def test_javascript_anchor_agrees_with_python_and_refuses_what_python_refuses():
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: scripts/setup.sh installs it with the page's npm packages")
    script = f"""
import {{ anchor }} from {json.dumps((WEB / "anchor.js").as_uri())};
const cases = {json.dumps(CASES)};
const refused = [1.5, -1, "8", null].map((x) => {{ try {{ anchor(x); return null; }} catch (e) {{ return e.name; }} }});
console.log(JSON.stringify({{ values: cases.map(([x, options]) => anchor(x, options)), refused }}));
"""
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["values"] == [anchor(x, **options) for x, options in CASES]
    assert answer["refused"] == ["TypeError"] * 4
