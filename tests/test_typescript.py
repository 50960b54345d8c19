"""The TypeScript declarations of the JavaScript API (web/wgtune.d.ts) type-check an app's use of
it (web/types-example.ts), and refuse a wrong one: `tsc --noEmit` from the page's npm packages."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parent.parent / "web"
TSC = WEB / "node_modules" / ".bin" / "tsc"


def tsc(project: Path) -> subprocess.CompletedProcess:
    node = shutil.which("node")
    assert node, "node is not installed: run `make setup` (scripts/setup.sh installs it)"
    assert TSC.exists(), f"{TSC} is missing: run `make setup` (npm ci in web/ installs TypeScript)"
    return subprocess.run([node, str(TSC), "--noEmit", "-p", str(project)], capture_output=True, text=True,
                          timeout=300)


def test_the_declarations_type_check_the_example():
    done = tsc(WEB / "tsconfig.json")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("wrong, error", [
    ('params: { n, scale: 2.0 }', 'params: { n, scale: "two" }'),  # a param that is not a number
    ('grid: (call) => [Math.ceil(n / wg)],', 'grid: (call) => "all",'),  # a grid that is not counts
    ('wgsl: SOURCE,', 'source: SOURCE,'),  # a field the API does not have
])
def test_the_declarations_refuse_a_wrong_use(tmp_path, wrong, error):
    example = (WEB / "types-example.ts").read_text()
    assert wrong in example
    as_written = project(tmp_path / "as-written", example)
    assert tsc(as_written).returncode == 0  # the copy checks as the original does: only the change can fail
    done = tsc(project(tmp_path / "wrong", example.replace(wrong, error)))
    assert done.returncode != 0 and "error TS" in done.stdout, done.stdout + done.stderr


def project(directory: Path, example: str) -> Path:
    """A TypeScript project of ``example`` and the declarations, with the page's npm types."""
    directory.mkdir()
    (directory / "example.ts").write_text(example)
    shutil.copy(WEB / "wgtune.d.ts", directory / "wgtune.d.ts")
    config = json.loads((WEB / "tsconfig.json").read_text())
    config["compilerOptions"]["typeRoots"] = [str(WEB / "node_modules" / "@types"), str(WEB / "node_modules")]
    config["files"] = ["example.ts", "wgtune.d.ts"]
    (directory / "tsconfig.json").write_text(json.dumps(config))
    return directory
